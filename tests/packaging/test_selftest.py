"""`dpd-desktop --self-test` (dpd_desktop.selftest): passes on this install, keeps its run with --workspace, and
names the step and the file when something is wrong."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dpd_desktop import __version__, selftest
from dpd_desktop.runs.record import RunRecord

ROOT = Path(__file__).resolve().parents[2]


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", HOME=str(tmp_path / "home"),
               XDG_CONFIG_HOME=str(tmp_path / "xdg"), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "dpd_desktop", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=240)


def test_self_test_passes_and_keeps_its_run_in_the_named_workspace(tmp_path):
    ws = tmp_path / "ws"
    r = _cli(tmp_path, "--workspace", str(ws), "--self-test")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].endswith(f"dpd-desktop {__version__}, Python {sys.version.split()[0]}, Python install at "
                             f"{ROOT / 'dpd_desktop'}"), lines[0]
    assert f"torch {torch.__version__}, training device cpu" in lines[1]
    assert lines[-1].endswith("passed")
    (run_dir,) = sorted((ws / "runs").iterdir())
    assert run_dir.name.endswith("-pa-gru8")
    rec = RunRecord.open(run_dir)
    assert rec.state == "succeeded" and rec.config.epochs == 1 and rec.config.device == "cpu"
    assert rec.arch == {"backbone": "gru", "hidden_size": 8, "num_layers": 1}
    assert json.loads((run_dir / "config.json").read_text())["versions"]["dpd_desktop"] == __version__
    # the printed NMSE is the recorded one
    shown = float(re.search(r"test NMSE (-?\d+\.\d+) dB", r.stdout).group(1))
    assert shown == round(rec.test_metrics["NMSE"], 2) and shown < 0
    assert re.search(r"offscreen window 'DPD Desktop " + re.escape(__version__) + r" — PA · GRU-\d+' lists the run",
                     r.stdout)


def test_self_test_without_workspace_leaves_no_run_behind(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env_tmp = dict(TMPDIR=str(tmp))
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT), **env_tmp)
    r = subprocess.run([sys.executable, "-m", "dpd_desktop", "--self-test"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"into {tmp}" in r.stdout  # trained into a temporary workspace under TMPDIR …
    assert list(tmp.iterdir()) == []  # … removed afterwards


def test_self_test_failure_is_exit_1_with_the_step(tmp_path):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    r = _cli(tmp_path, "--workspace", str(not_a_folder), "--self-test")
    assert r.returncode == 1
    assert re.search(r"^self-test FAILED at training: WorkspaceError: .*" + re.escape(str(not_a_folder)), r.stderr,
                     re.MULTILINE), r.stderr
    assert "passed" not in r.stdout


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("selftest-ws")
    res = selftest.train_demo(root)
    return Path(res.run_dir)


def _copy(run: Path, tmp_path: Path) -> Path:
    dst = tmp_path / run.name
    shutil.copytree(run, dst)
    return dst


def test_check_run_accepts_the_demo_run(demo_run):
    text = selftest.check_run(demo_run)
    assert text.startswith(f"reopened {demo_run.name}: succeeded, test NMSE -")
    assert "best.pt loads into gru H=8" in text


@pytest.mark.parametrize("name", selftest.RUN_FILES)
def test_check_run_names_a_missing_file(demo_run, tmp_path, name):
    run = _copy(demo_run, tmp_path)
    (run / name).unlink()
    with pytest.raises(selftest.SelfTestError) as ei:
        selftest.check_run(run)
    if name == "config.json":
        assert ei.value.step == "reopen" and "not a run folder (no config.json)" in str(ei.value)
    else:
        assert ei.value.step == "files" and f"{run / name} is missing or empty" in str(ei.value)


def test_check_run_finds_a_damaged_checkpoint(demo_run, tmp_path):
    run = _copy(demo_run, tmp_path)
    (run / "best.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(selftest.SelfTestError) as ei:
        selftest.check_run(run)
    assert ei.value.step == "checkpoint" and str(run / "best.pt") in str(ei.value)


def test_check_run_compares_results_h5_with_the_recorded_nmse(demo_run, tmp_path):
    run = _copy(demo_run, tmp_path)
    status = json.loads((run / "status.json").read_text())
    status["test_metrics"]["NMSE"] -= 0.5  # still < 0 dB, but no longer what results.h5 gives
    (run / "status.json").write_text(json.dumps(status))
    with pytest.raises(selftest.SelfTestError) as ei:
        selftest.check_run(run)
    assert ei.value.step == "results", ei.value


def test_check_run_refuses_a_run_of_another_version(demo_run, tmp_path):
    run = _copy(demo_run, tmp_path)
    cfg = json.loads((run / "config.json").read_text())
    cfg["versions"]["dpd_desktop"] = "0.0.1"
    (run / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(selftest.SelfTestError, match="records version '0.0.1'"):
        selftest.check_run(run)
