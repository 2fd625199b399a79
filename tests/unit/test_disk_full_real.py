"""A real full disk: a tiny run into a small tmpfs (mounted in a private user and mount namespace with
``unshare -rm``, no privileges needed where user namespaces are allowed), in a child process
(tests/unit/disk_full_child.py) that reads the folder back. Sizes chosen so that the disk fills at the end (the
results file, which used to crash h5py), mid-run and at the start. Where no namespace can be made, the process's
file-size limit (RLIMIT_FSIZE: EFBIG, "File too large") stands in, a real kernel refusal too.

Each case: the process does not crash (exit 0, one JSON line), the run failed naming the file, no temporary is left,
status.json never claims more than the disk holds, and what it names (best.pt) loads.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("disk_full_child.py")


def _env():
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _tmpfs_works(tmp_path) -> bool:
    if not shutil.which("unshare"):
        return False
    d = tmp_path / "probe"
    d.mkdir()
    r = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=16k tmpfs {d}"],
                       capture_output=True, timeout=30)
    return r.returncode == 0


def _child(tmp_path, size: str | None = None, fsize: int | None = None) -> dict:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    py = [sys.executable, str(CHILD), str(ws)]
    if size is not None:
        cmd = ["unshare", "-rm", "sh", "-c", f'mount -t tmpfs -o size={size} tmpfs "$1" && shift && exec "$@"',
               "sh", str(ws), *py]
    else:
        cmd = py + [str(fsize)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=_env(), cwd=str(ROOT))
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def _check(out: dict, artifact: str, reason: str) -> None:
    assert out["state"] == "failed" and out["message"] == f"{artifact}: cannot write: {reason}", out
    assert out["leftovers"] == [] and "read_error" not in out, out
    assert out["record_state"] in ("failed", "running"), out  # running: the failed status did not fit either
    if out["record_state"] == "failed":
        assert out["record_message"] == out["message"] and out["log_has_failure"]
    assert (out["epochs_completed"] or 0) <= out["history_rows"]
    if out["best_epoch"] is not None:
        assert out["best_pt_epoch"] == out["best_epoch"]
    if out.get("epochs_completed"):
        assert out["last_pt_epoch"] + 1 >= out["epochs_completed"]


# (tmpfs size, the artifact that finds the disk full, or RLIMIT_FSIZE bytes with its artifact)
TMPFS = [("48k", "results.h5"), ("24k", "last.pt"), ("12k", "log.txt")]
FSIZE = [(20_000, "results.h5"), (5_000, "last.pt")]


def test_a_real_full_disk_fails_the_run_naming_the_file(tmp_path):
    if _tmpfs_works(tmp_path):
        for size, artifact in TMPFS:
            out = _child(tmp_path, size=size)
            _check(out, artifact, "No space left on device")
        assert out["files"] == ["config.json", "history.csv", "status.json"]
    else:
        for limit, artifact in FSIZE:
            _check(_child(tmp_path, fsize=limit), artifact, "File too large")


def test_a_file_size_limit_fails_the_run_naming_the_file(tmp_path):
    """The stand-in on its own (it runs wherever RLIMIT_FSIZE exists: every POSIX system)."""
    for limit, artifact in FSIZE:
        _check(_child(tmp_path, fsize=limit), artifact, "File too large")
