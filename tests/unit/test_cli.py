"""The command line: Ctrl+C at any moment, exit codes, workspace and display errors, option placement, output."""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dpd_desktop import cli
from dpd_desktop.cli import entry, train
from dpd_desktop.cli.entry import build_parser, main as cli_main
from dpd_desktop.process import CTRL_C

ROOT = Path(__file__).resolve().parents[2]
TINY_TRAIN = ["train-pa", "--dataset", "demo", "--epochs", "50", "--device", "cpu", "--hidden-size", "4",
              "--frame-length", "40", "--stride", "40"]


def _spawn(ws: Path, *args: str, marks: Path | None = None, **env_vars: str) -> subprocess.Popen:
    """``dpd-desktop --workspace WS ARGS`` (``marks``: through benchmarks/timed.py, its timing marks to that file)."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", **env_vars)
    head = ["-m", "dpd_desktop"] if marks is None else [str(ROOT / "benchmarks" / "timed.py"), str(marks), "--"]
    return subprocess.Popen([sys.executable, *head, "--workspace", str(ws), *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _run_dirs(ws: Path) -> list[Path]:
    return sorted(p for p in (ws / "runs").glob("*") if p.is_dir()) if (ws / "runs").is_dir() else []


# ------------------------------------------------------------------------------------------------ 1. Ctrl+C
def _wait_for_handler(proc: subprocess.Popen, timing: Path, timeout: float = 120, mark: str = "cli_start") -> None:
    """Until run() has installed the Ctrl+C handler (its cli_start mark; the window's: gui_ctrl_c_ready): before
    that, Python's default applies."""
    end = time.monotonic() + timeout
    while not (timing.exists() and f'"{mark}"' in timing.read_text()):
        assert proc.poll() is None and time.monotonic() < end, proc.communicate()
        time.sleep(0.01)


@pytest.mark.skipif(sys.platform == "win32", reason="platform: POSIX signals")
@pytest.mark.parametrize("delay", [0.0, 0.4, 1.5])
def test_ctrl_c_at_any_moment_is_a_plain_cancel(tmp_path, delay):
    """SIGINT once the handler is installed — while torch imports, while the data loads or while training: exit 3,
    no traceback; a run folder, when one was made, says cancelled and has a history.csv."""
    timing = tmp_path / "t.jsonl"
    proc = _spawn(tmp_path, *TINY_TRAIN, marks=timing)
    _wait_for_handler(proc, timing)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 3, (out, err)
    assert "Traceback" not in err and "Traceback" not in out, err
    runs = _run_dirs(tmp_path)
    assert len(runs) <= 1
    if runs:
        status = json.loads((runs[0] / "status.json").read_text())
        assert status["state"] == "cancelled", status
        assert (runs[0] / "history.csv").read_text().startswith("EPOCH,N_EPOCH,")
    else:
        assert "cancelled before training started" in err


def test_keyboard_interrupt_reaching_run_is_a_cancel(monkeypatch, capsys):
    def interrupted(argv=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(entry, "execute", interrupted)
    monkeypatch.setattr(sys, "argv", ["dpd-desktop", "runs"])
    try:
        with pytest.raises(SystemExit) as exc:
            cli.run()
    finally:
        CTRL_C.uninstall()
    assert exc.value.code == 3
    assert "cancelled" in capsys.readouterr().err


def test_sigint_before_the_trainer_exists_cancels_it(tmp_path, capsys):
    """A Ctrl+C that came before the run (during the imports) is honored: no run starts (exit 3, no run folder)."""
    from dpd_desktop.config import ExperimentConfig
    from dpd_desktop.runs.workspace import Workspace

    assert CTRL_C.install()
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        assert CTRL_C.pressed.is_set()
        rc = train.run_training(ExperimentConfig(dataset="demo", epochs=1, device="cpu"), Workspace(tmp_path))
    finally:
        CTRL_C.uninstall()
    assert rc == 3
    assert "cancelled before training started" in capsys.readouterr().err
    assert _run_dirs(tmp_path) == []


@pytest.mark.parametrize("argv,skip", [(["runs"], False), (["train-pa", "--dataset", "demo", "--seed", "-1"], False),
                                       ([*TINY_TRAIN, "--epochs", "1", "--no-plots", "--quiet"], True)])
def test_teardown_is_skipped_only_after_a_headless_command_ran(tmp_path, argv, skip):
    """The command decides (cli/common.py Outcome), not a scan of sys.argv: a refused train-pa keeps the teardown."""
    outcome = cli.execute(["--workspace", str(tmp_path), *argv])
    assert outcome.status == 0 if argv[0] == "runs" or skip else outcome.status == 2
    assert outcome.skip_teardown is skip


def test_command_line_and_window_modules_do_not_import_each_other():
    """No import cycle; the command line's module imports neither PyTorch nor Qt (see its import note)."""
    code = ("import sys\n"
            "import dpd_desktop.cli.entry\n"
            "heavy = sorted(m for m in ('torch', 'PySide6', 'dpd_desktop.gui.app') if m in sys.modules)\n"
            "assert not heavy, heavy\n"
            "for m in [m for m in sys.modules if m.startswith('dpd_desktop')]:\n"
            "    del sys.modules[m]\n"
            "import dpd_desktop.gui.app\n"
            "assert not [m for m in sys.modules if m.startswith('dpd_desktop.cli')]\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, QT_QPA_PLATFORM="offscreen"))
    assert r.returncode == 0, r.stderr


def test_hidden_size_default_is_the_configs_for_each_step():
    from dpd_desktop.config import default_hidden_size

    p = build_parser()
    assert p.parse_args(["train-pa", "--dataset", "demo"]).hidden_size == default_hidden_size("pa") == 23
    assert p.parse_args(["train-dpd", "--dataset", "demo", "--pa-run", "x"]).hidden_size == \
        default_hidden_size("dpd") == 15
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    for step, size in (("train-pa", 23), ("train-dpd", 15)):
        text = " ".join(sub.choices[step].format_help().split())
        assert f"hidden size (default {size}: the reference command line's for this step, the window's too)" in text


# ------------------------------------------------------------------------------------------------ 2. mismatch
def test_train_dpd_has_allow_dataset_mismatch_flag():
    from dpd_desktop.config import ExperimentConfig

    base = ["train-dpd", "--dataset", "demo", "--pa-run", "x"]
    assert train.config_from_args(build_parser().parse_args(base), "dpd").allow_dataset_mismatch is False
    cfg = train.config_from_args(build_parser().parse_args(base + ["--allow-dataset-mismatch"]), "dpd")
    assert cfg.validate().allow_dataset_mismatch is True
    assert ExperimentConfig.from_dict(cfg.to_dict()) == cfg


# ------------------------------------------------------------------------------------------------ 7. workspace
@pytest.mark.parametrize("cmd", [["runs"], TINY_TRAIN[:5], ["run-dpd", "--run", "r", "--out", "u.csv"]])
def test_unusable_workspace_is_a_plain_error(tmp_path, capsys, cmd):
    afile = tmp_path / "afile"
    afile.write_text("x")
    for ws, words in ((afile, "not a folder"), (afile / "below", "")):
        rc = cli_main(["--workspace", str(ws), *cmd])
        err = capsys.readouterr().err
        assert rc == 2, err
        assert str(ws) in err and words in err
        assert "Traceback" not in err and err.count("\n") == 1, err


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="platform: needs /proc")
def test_workspace_under_proc(capsys):
    assert cli_main(["--workspace", "/proc/nope", "runs"]) == 2
    assert "/proc/nope" in capsys.readouterr().err
    assert cli_main(["--workspace", "/proc/nope", *TINY_TRAIN[:5]]) == 2
    assert "/proc/nope" in capsys.readouterr().err


@pytest.mark.parametrize("seed", ["-1", "4294967296", "99999999999999999999999"])
def test_seed_out_of_range_is_refused_before_a_run_folder(tmp_path, capsys, seed):
    """NumPy's seeding takes 0 … 2**32 - 1: anything else is exit 2 naming the field, and no run folder."""
    assert cli_main(["--workspace", str(tmp_path), *TINY_TRAIN, "--seed", seed]) == 2
    assert "seed: expected an integer from 0 to 4294967295" in capsys.readouterr().err
    assert _run_dirs(tmp_path) == []


@pytest.mark.parametrize("option,value,top", [("--hidden-size", "10000000", 4096), ("--num-layers", "100000", 16)])
def test_a_model_too_large_to_train_is_refused_before_a_run_folder(tmp_path, capsys, option, value, top):
    """Hidden 10,000,000 used to fail with the allocator's raw message after a run folder existed; 100,000 layers
    hung in model construction: both are exit 2 naming the field and its bound."""
    assert cli_main(["--workspace", str(tmp_path), *TINY_TRAIN, option, value]) == 2
    field = option[2:].replace("-", "_")
    assert f"{field}: expected at most {top}" in capsys.readouterr().err
    assert _run_dirs(tmp_path) == []


def test_a_run_failing_in_its_set_up_is_listed_failed(tmp_path, capsys, monkeypatch):
    """A failure after the run folder exists (here: the model cannot be built) leaves a run that `runs` lists as
    failed, with its experiment (config.json holds it from the folder's creation on)."""
    import dpd_desktop.training.trainer as trainer_mod

    def broken(*a, **k):
        raise RuntimeError("can't allocate memory: you tried to allocate 1200000000000000 bytes")

    monkeypatch.setattr(trainer_mod, "build_model", broken)
    assert cli_main(["--workspace", str(tmp_path), *TINY_TRAIN, "--no-plots", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "the computer ran out of memory: reduce the batch size" in err
    assert cli_main(["--workspace", str(tmp_path), "runs"]) == 0
    header, row = [ln for ln in capsys.readouterr().out.splitlines() if ln.strip()]
    assert header.split()[:5] == ["RUN", "STEP", "FAMILY", "H", "STATE"] and row.split()[1:5] == ["pa", "gru", "4",
                                                                                                  "failed"]


def test_frame_longer_than_the_training_split_is_refused_before_a_run_folder(tmp_path, capsys):
    """The demo's training split has 61,440 samples: a 100,000-sample frame is exit 2 naming the field and the
    split's length, and no run folder (was exit 1 with a folder lacking config.json)."""
    argv = ["--workspace", str(tmp_path), "train-pa", "--dataset", "demo", "--epochs", "1", "--device", "cpu",
            "--frame-length", "100000"]
    assert cli_main(argv) == 2
    assert "frame_length: 100000 is longer than the training split (61440 samples" in capsys.readouterr().err
    assert _run_dirs(tmp_path) == []


@pytest.mark.skipif(sys.platform == "win32", reason="platform: POSIX pipes")
def test_runs_into_a_closed_pipe_is_quiet(tmp_path):
    """`dpd-desktop runs | head -1`: the reader closes the pipe early; no BrokenPipeError traceback, exit 0."""
    for i in range(300):
        d = tmp_path / "runs" / f"2026-01-01-{i:06d}-pa-gru4"
        d.mkdir(parents=True)
        (d / "config.json").write_text('{"experiment": {"step": "pa", "backbone": "gru", "hidden_size": 4}}')
        (d / "status.json").write_text('{"state": "succeeded"}')
    proc = subprocess.Popen([sys.executable, "-m", "dpd_desktop", "--workspace", str(tmp_path), "runs"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    header, first = proc.stdout.readline(), proc.stdout.readline()
    proc.stdout.close()  # like head -2
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0, err
    assert header.startswith("RUN ") and first.startswith("2026-01-01-000299-pa-gru4") and "Traceback" not in err and "Broken" not in err


def test_runs_on_an_empty_workspace_says_so(tmp_path, capsys):
    assert cli_main(["--workspace", str(tmp_path), "runs"]) == 0
    assert "no runs" in capsys.readouterr().err


@pytest.mark.parametrize("config,status,expected", [
    ("[]", None, "unreadable"), ('{"experiment": "pa"}', None, "unreadable"), ("{", None, "unreadable"),
    ('{"experiment": {"step": "pa"}}', "{broken", "unreadable"), ('{"experiment": {"step": "pa"}}', "[1]", "unreadable"),
    ('{"experiment": {"step": "pa"}}', None, "interrupted")],
    ids=["config-list", "config-experiment-text", "config-broken", "status-broken", "status-list", "no-status"])
def test_runs_lists_a_damaged_run_without_a_traceback(tmp_path, capsys, config, status, expected):
    """A run folder whose config.json / status.json is broken or valid JSON of another shape is one row
    (unreadable); a run without status.json (died before writing it) reads interrupted; the good run is listed."""
    bad = tmp_path / "runs" / "2026-01-01-000000-pa-gru4"
    bad.mkdir(parents=True)
    (bad / "config.json").write_text(config)
    if status is not None:
        (bad / "status.json").write_text(status)
    good = tmp_path / "runs" / "2026-01-02-000000-pa-gru4"
    good.mkdir()
    (good / "config.json").write_text(json.dumps({"experiment": {"step": "pa", "backbone": "gru", "hidden_size": 4}}))
    (good / "status.json").write_text(json.dumps({"state": "succeeded"}))
    assert cli_main(["--workspace", str(tmp_path), "runs"]) == 0
    out = capsys.readouterr()
    rows = {line.split()[0]: line.split()[4] for line in out.out.splitlines() if line.startswith("2026-")}
    assert rows == {bad.name: expected, good.name: "succeeded"}, out
    assert "Traceback" not in out.err


def test_runs_reports_a_killed_run_as_interrupted(tmp_path, capsys):
    run = tmp_path / "runs" / "2026-01-01-000000-pa-gru4"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"experiment": {"step": "pa", "backbone": "gru", "hidden_size": 4}}))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    import socket

    (run / "status.json").write_text(json.dumps({"state": "running", "pid": dead.pid, "host": socket.gethostname()}))
    assert cli_main(["--workspace", str(tmp_path), "runs"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[4] == "interrupted"


# ------------------------------------------------------------------------------------------------ 8. output, codes
def test_dpd_parameter_line_separates_dpd_and_frozen_pa():
    from dpd_desktop.runs.events import RunStarted

    common = dict(run_id="r", run_dir="d", config={}, device="cpu", device_name="CPU", fast_path="on",
                  batched_loader="on", n_train_frames=1, batches_per_epoch=1, epochs=1, dataset_summary={})
    assert train.param_text(RunStarted(step="dpd", n_params=748, n_params_model=306, **common)) == \
        "306 parameters (DPD) + 442 frozen PA"
    assert train.param_text(RunStarted(step="pa", n_params=442, n_params_model=442, **common)) == "442 parameters"


def test_dataset_that_cannot_load_is_exit_2_without_run_folder(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("I_in,Q_in,I_out,Q_out\n0.1,0.2,0.3,abc\n")
    ws = tmp_path / "ws"
    for ds in (str(bad), str(tmp_path / "missing-folder")):
        rc = cli_main(["--workspace", str(ws), "train-pa", "--dataset", ds, "--epochs", "1", "--device", "cpu"])
        err = capsys.readouterr().err
        assert rc == 2, err
        assert err.startswith("error: ") and "Traceback" not in err
    assert _run_dirs(ws) == []


def test_exit_codes_documented_in_cli_and_readme():
    readme = (ROOT / "README.md").read_text()
    for code, words in (("0", "success"), ("1", "failed"), ("2", "bad arguments"), ("3", "cancelled")):
        assert re.search(rf"\b{code}\b[^\n]*{words}", entry.__doc__), code
        assert re.search(rf"`{code}`[^\n]*{words}", readme), code


# ------------------------------------------------------------------------------------------------ 9. no display
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="platform: display detection is for X11/Wayland")
@pytest.mark.parametrize("argv", [[], ["gui"]])
def test_window_without_display_says_so(tmp_path, monkeypatch, capsys, argv):
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(var, raising=False)
    assert cli_main(["--workspace", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert "no display found" in err and "demo --headless" in err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="platform: display detection is for X11/Wayland")
def test_gui_app_main_without_display_says_so(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["DPD_DESKTOP_WORKSPACE"] = str(tmp_path)
    proc = subprocess.run([sys.executable, "-c", "import sys; from dpd_desktop.gui.app import main; sys.exit(main())"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "no display found" in proc.stderr, proc.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="platform: POSIX signals")
def test_ctrl_c_closes_the_window(tmp_path):
    """Qt's event loop keeps Python from running signal handlers: the window still closes on Ctrl+C (exit 0, one
    line), where it used to ignore it."""
    timing = tmp_path / "t.jsonl"
    proc = _spawn(tmp_path, "gui", marks=timing, XDG_CONFIG_HOME=str(tmp_path / "config"))
    _wait_for_handler(proc, timing, mark="gui_ctrl_c_ready")  # the window is up, its handler installed
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, (proc.returncode, err)
    assert "closing the window" in err and "Traceback" not in err


@pytest.mark.skipif(sys.platform == "win32", reason="platform: POSIX signals")
def test_second_ctrl_c_quits_the_window_at_once(tmp_path):
    """The window's Ctrl+C is the command line's mechanism with closing as its first action: a second Ctrl+C right
    after the first quits at once, status 130 as the shell reports it: our abort (exit 130, one line) while the
    window is still closing, or SIGINT's default action when the second one finds Python already finalizing."""
    timing = tmp_path / "t.jsonl"
    proc = _spawn(tmp_path, "gui", marks=timing, XDG_CONFIG_HOME=str(tmp_path / "config"))
    _wait_for_handler(proc, timing, mark="gui_ctrl_c_ready")  # the window is up, its handler installed
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    time.sleep(0.05)  # two signals sent before the first is delivered are merged by the kernel into one
    proc.send_signal(signal.SIGINT)
    t = time.monotonic()
    out, err = proc.communicate(timeout=30)
    # the exit status says which path ended it (130: the abort); the bound only shows no wait for a normal close,
    # with room for a busy machine (0.8-5.6 s measured under load on 2 cores)
    assert time.monotonic() - t < 15
    assert proc.returncode in (130, -signal.SIGINT), (proc.returncode, err)
    assert err.count("aborted (second Ctrl+C)") == (proc.returncode == 130) and "Traceback" not in err


# ------------------------------------------------------------------------------------------------ 10. --workspace
def test_workspace_accepted_before_and_after_the_sub_command():
    p = build_parser()
    assert p.parse_args(["--workspace", "A", "runs"]).workspace == "A"
    assert p.parse_args(["runs", "--workspace", "B"]).workspace == "B"
    assert p.parse_args(["--workspace", "A", "train-pa", "--dataset", "demo"]).workspace == "A"
    assert p.parse_args(["train-pa", "--dataset", "demo", "--workspace", "C"]).workspace == "C"
    assert p.parse_args(["runs"]).workspace is None
    assert "before the sub-command" in p.format_help()


def test_readme_covers_the_headless_pitfalls():
    readme = (ROOT / "README.md").read_text()
    for words in ("global option", "spec.json", "split_ratios", "--max-train-samples", "`dpd-desktop` alone",
                  "--allow-dataset-mismatch"):
        assert words in readme, words
