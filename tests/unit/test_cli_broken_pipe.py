"""Issue 28: `train-pa`, `queue run` and `sweep` piped into `head` end quietly (exit 0, the run recorded) instead of
printing BrokenPipeError tracebacks from the run's observers and the sweep's and queue's callbacks, which print
from other threads than the main one. A real pipe, closed by the reader after the first line (process.py
QuietPipe)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dpd_desktop.cli.entry import main as cli_main

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--dataset", "demo", "--hidden-size", "4", "--frame-length", "50", "--epochs", "3",
        "--max-train-samples", "200", "--device", "cpu", "--threads", "1"]


def _head_1(ws: Path, *args: str) -> tuple[int, str, str]:
    """Run ``dpd-desktop --workspace ws args`` with stdout into a pipe whose reader takes one line and closes it."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "dpd_desktop", "--workspace", str(ws), *args], cwd=str(ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    first = proc.stdout.readline().decode()
    proc.stdout.close()  # the reader is gone: every later print meets a closed pipe
    err = proc.stderr.read().decode()
    return proc.wait(timeout=300), first, err


@pytest.mark.parametrize("command", ["train-pa", "sweep", "queue run"])
def test_a_command_piped_into_head_ends_quietly(tmp_path, command):
    ws = tmp_path / "ws"
    if command == "train-pa":
        args = ["train-pa", *TINY]
    elif command == "sweep":
        args = ["sweep", "--grid", "seed=0,1", "--name", "s", "--base", *TINY]
    else:
        for seed in ("0", "1"):
            assert cli_main(["--workspace", str(ws), "queue", "add", "pa", *TINY, "--seed", seed]) == 0
        args = ["queue", "run"]
    rc, first, err = _head_1(ws, *args)
    assert first.strip(), "the first line reached the reader"
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Broken pipe" not in err, err
    assert rc == 0, err
    # the runs went on to their end without a reader: each recorded as succeeded
    runs = sorted((ws / "runs").iterdir())
    assert len(runs) == (1 if command == "train-pa" else 2)
    assert [json.loads((r / "status.json").read_text())["state"] for r in runs] == ["succeeded"] * len(runs)
