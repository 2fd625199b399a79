"""Process concerns (dpd_desktop.process): exit statuses, display detection, Ctrl+C (first cancels, second aborts)."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dpd_desktop import cli, process
from dpd_desktop.cli import entry, train
from dpd_desktop.process import CTRL_C, CtrlC, Display, Exit, detect_display

ROOT = Path(__file__).resolve().parents[2]
POSIX = pytest.mark.skipif(sys.platform == "win32", reason="platform: POSIX signals")
LONG_BATCHES = ["train-pa", "--dataset", "demo", "--epochs", "5", "--device", "cpu", "--hidden-size", "64",
                "--frame-length", "1000", "--stride", "16", "--batch-size", "256", "--no-plots"]
LONG_TRAIN = ["train-pa", "--dataset", "demo", "--epochs", "200", "--device", "cpu", "--hidden-size", "4",
              "--frame-length", "40", "--stride", "40", "--no-plots"]


def test_exit_statuses_are_the_documented_ones():
    assert [int(e) for e in Exit] == [0, 1, 2, 3, 130]
    documented = {int(code) for code in re.findall(r"^\s+(\d+)\s+[a-z]", entry.__doc__, flags=re.M)}
    assert documented == {int(e) for e in Exit}


@pytest.mark.parametrize("env,platform,expected", [
    ({}, "linux", Display.NONE),
    ({"DISPLAY": ":0"}, "linux", Display.SCREEN),
    ({"WAYLAND_DISPLAY": "wayland-0"}, "linux", Display.SCREEN),
    ({"DISPLAY": ""}, "linux", Display.NONE),
    ({"QT_QPA_PLATFORM": "offscreen"}, "linux", Display.CHOSEN),
    ({"QT_QPA_PLATFORM": "offscreen", "DISPLAY": ":0"}, "linux", Display.CHOSEN),  # offscreen is never a screen
    ({"QT_QPA_PLATFORM": "vnc"}, "linux", Display.CHOSEN),
    ({"QT_QPA_PLATFORM": "vnc", "DISPLAY": ":0"}, "linux", Display.SCREEN),
    ({"QT_QPA_PLATFORM": ""}, "linux", Display.NONE),
    ({}, "freebsd14", Display.NONE),
    ({}, "win32", Display.SCREEN),
    ({}, "darwin", Display.SCREEN),
    ({"QT_QPA_PLATFORM": "offscreen"}, "win32", Display.CHOSEN),
])
def test_display_detection_table(env, platform, expected):
    assert detect_display(env, platform) is expected


def test_display_detection_reads_this_process_by_default(monkeypatch):
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    assert detect_display() is Display.CHOSEN
    monkeypatch.delenv("QT_QPA_PLATFORM")
    monkeypatch.setenv("DISPLAY", ":7")
    assert detect_display() is Display.SCREEN


@POSIX
def test_first_ctrl_c_runs_the_first_action_and_uninstall_restores(capfd):
    """In this process: the first SIGINT sets ``pressed``, runs the registered action once and says its message;
    an action registered after that runs at once; uninstall gives SIGINT back to the previous handler."""
    def previous(signum, frame):  # pragma: no cover - never called
        pass

    old = signal.signal(signal.SIGINT, previous)
    calls: list[str] = []
    c = CtrlC()
    try:
        assert c.install(lambda: calls.append("first"), "stopping (test)")
        assert c.installed and signal.getsignal(signal.SIGINT) == c._handle
        assert not c.pressed.is_set()
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler runs at the next bytecode boundary
        assert calls == ["first"] and c.pressed.is_set()
        c.on_first(lambda: calls.append("late"))
        assert calls == ["first", "late"]
        c.uninstall()
        assert not c.installed and signal.getsignal(signal.SIGINT) is previous
        assert c.install()  # a new install counts afresh
        assert not c.pressed.is_set()
        c.uninstall()
    finally:
        c.uninstall()
        signal.signal(signal.SIGINT, old)
    assert "stopping (test)" in capfd.readouterr().err


def test_install_outside_the_main_thread_changes_nothing():
    import threading

    c, got = CtrlC(), []
    t = threading.Thread(target=lambda: got.append(c.install()))
    t.start()
    t.join()
    assert got == [False] and not c.installed


@POSIX
def test_second_ctrl_c_aborts_at_once_during_a_long_call():
    """The main thread inside one long C call (a big batch in PyTorch; here a PBKDF2 of ~10 s, which never checks
    for signals): the first Ctrl+C is noted, the second aborts within a second (exit 130, one line), although
    Python cannot run its handler until the call returns."""
    code = ("import hashlib\n"
            "from dpd_desktop.process import CTRL_C\n"
            "assert CTRL_C.install()\n"
            "print('ready', flush=True)\n"
            "hashlib.pbkdf2_hmac('sha256', b'x', b'y', 40_000_000)\n"
            "print('finished', flush=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    t = time.monotonic()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == Exit.ABORTED, (proc.returncode, err)
    assert time.monotonic() - t < 1.5
    assert err.count(process.ABORT_MESSAGE) == 1 and "Traceback" not in err and "finished" not in out


def _start_training(ws: Path, timing: Path, args=LONG_TRAIN) -> subprocess.Popen:
    """``dpd-desktop --workspace WS ARGS`` through benchmarks/timed.py: its timing marks go to ``timing``."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    return subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "timed.py"), str(timing), "--",
                             "--workspace", str(ws), *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_for_mark(proc: subprocess.Popen, timing: Path, name: str, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert proc.poll() is None, proc.communicate()
        if timing.exists() and any(json.loads(line)["mark"] == name for line in timing.read_text().splitlines()
                                   if line.strip()):
            return
        time.sleep(0.02)
    raise AssertionError(f"no {name} mark in {timeout} s")


@POSIX
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_first_ctrl_c_during_training_cancels_with_the_run_readable(tmp_path, signum):
    """Training is under way (a batch done): one Ctrl+C — or a SIGTERM, a plain ``kill PID`` — → the run stops after
    the current batch, exit 3, status cancelled, its history readable with the epochs completed, no traceback."""
    proc = _start_training(tmp_path, tmp_path / "t.jsonl")
    _wait_for_mark(proc, tmp_path / "t.jsonl", "epoch_end")
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == Exit.CANCELLED, (proc.returncode, err)
    assert "stopping after the current batch" in err and "Traceback" not in err
    (run,) = (tmp_path / "runs").iterdir()
    assert json.loads((run / "status.json").read_text())["state"] == "cancelled"
    rows = (run / "history.csv").read_text().splitlines()
    assert rows[0].startswith("EPOCH,N_EPOCH,") and 2 <= len(rows) < 201  # at least the first epoch, not all 200
    assert f"cancelled after {len(rows) - 1} epoch(s)" in err


@POSIX
def test_second_ctrl_c_during_training_aborts(tmp_path):
    proc = _start_training(tmp_path, tmp_path / "t.jsonl", LONG_BATCHES)
    _wait_for_mark(proc, tmp_path / "t.jsonl", "first_batch")
    # long batches (~0.5 s on 2 cores): the second Ctrl+C comes while the first one's cancel still waits for the
    # batch to end (with tiny batches the cancel may end the run, exit 3, before the second arrives)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == Exit.ABORTED, (proc.returncode, err)
    assert err.count(process.ABORT_MESSAGE) == 1 and "Traceback" not in err


def test_the_process_instance_is_not_left_installed_by_a_python_caller(tmp_path):
    """run_training called from Python (main thread, handler not installed) installs CTRL_C for the run only."""
    from dpd_desktop.config import ExperimentConfig
    from dpd_desktop.runs.workspace import Workspace

    before = signal.getsignal(signal.SIGINT)
    cfg = ExperimentConfig(dataset="demo", epochs=1, device="cpu", hidden_size=4, frame_length=40, stride=40)
    assert train.run_training(cfg, Workspace(tmp_path), plots=False) == Exit.OK
    assert not CTRL_C.installed and signal.getsignal(signal.SIGINT) is before
