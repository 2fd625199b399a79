"""Start-up: the window's import path is free of PyTorch on Linux (torch loads behind the first paint), and on
Windows torch is imported before Qt (pytorch#166628). Timing is in benchmarks/bench_window_startup.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _pythonpath() -> str:
    """This checkout first, then the caller's PYTHONPATH (where Qt may come from, as on the GPU machine)."""
    return os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)


CHILD = r"""
import json, sys, tempfile
from dpd_desktop.gui.qt_app import ensure_app
app = ensure_app()
from dpd_desktop.gui.main_window import MainWindow
from dpd_desktop.runs.workspace import Workspace
from PySide6.QtCore import QTimer, QSettings
out = {"torch_after_import": "torch" in sys.modules}
w = MainWindow(workspace=Workspace(tempfile.mkdtemp()), settings=QSettings(tempfile.mktemp(suffix=".ini"),
               QSettings.Format.IniFormat))
out["torch_after_build"] = "torch" in sys.modules
out["tooltip_before"] = w.form.backbone.itemData(0, 3)
def painted():
    out["torch_at_first_paint"] = "torch" in sys.modules
def loaded():
    out["torch_after_preload"] = "torch" in sys.modules
    out["trainer_after_preload"] = "dpd_desktop.training.trainer" in sys.modules
    import multiprocessing.forkserver as fs
    out["forkserver_pid"] = fs._forkserver._forkserver_pid
    out["tooltip_after"] = w.form.backbone.itemData(0, 3)
    from dpd_desktop.gui.preload import preload_job
    out["preload_ended"] = preload_job().wait(5000)
    out["jobs_left"] = len(w.jobs)
    import gc
    out["gc_enabled_after_preload"] = gc.isenabled()
    out["frozen_after_preload"] = gc.get_freeze_count()
    app.quit()
w.firstPainted.connect(painted)
w.coreLoaded.connect(loaded)
w.show()
QTimer.singleShot(90000, app.quit)
app.exec()
print("RESULT " + json.dumps(out))
"""


def test_linux_window_paints_before_torch_is_imported_then_preloads_it():
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=_pythonpath())
    proc = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert line, proc.stderr[-3000:]
    out = json.loads(line[0][7:])
    assert out["torch_after_import"] is False
    assert out["torch_after_build"] is False
    assert out["torch_at_first_paint"] is False
    assert out["torch_after_preload"] is True
    # the trainer is the child process's (gui/worker.py): its forkserver runs, started by the preload
    assert out["trainer_after_preload"] is False
    assert isinstance(out["forkserver_pid"], int) and out["forkserver_pid"] > 0
    # the static tooltip first, the model registry's description once the core is loaded
    assert out["tooltip_before"] == "Gated recurrent unit"
    assert out["tooltip_after"].startswith("nn.GRU(2, H)")
    assert out["preload_ended"] is True and out["jobs_left"] == 0  # then no longer a live job of the window
    # torch's objects frozen (no collector pass walks them again), the collector on
    assert out["gc_enabled_after_preload"] is True and out["frozen_after_preload"] > 100_000


def test_torch_first_only_on_windows():
    from dpd_desktop.gui import import_torch_first

    imported = []
    assert import_torch_first("win32", importer=imported.append) is True
    assert imported == ["torch"]
    assert import_torch_first("linux", importer=imported.append) is False
    assert import_torch_first("darwin", importer=imported.append) is False
    assert imported == ["torch"]


def test_about_box_names_torch_version_without_importing_it(make_window):
    from importlib import metadata

    w = make_window()
    assert f"PyTorch {metadata.version('torch')}" in w.about_text()


def test_start_checks_the_config_by_hand_while_the_preload_imports_torch(monkeypatch):
    """ExperimentConfig.validate imports the model registry (torch): while the preload thread imports torch the GUI
    thread would wait for that import, so the window checks the backbone and the PA run itself then."""
    import pytest

    from dpd_desktop.config import ConfigError, ExperimentConfig
    from dpd_desktop.gui import preload, run_control

    class RunningPreload:
        def is_done(self):
            return False

    validated = []
    monkeypatch.setattr(ExperimentConfig, "validate", lambda self: validated.append(self) or self)
    monkeypatch.setattr(preload, "_job", RunningPreload())
    with pytest.raises(ConfigError) as err:
        run_control.validate_config(ExperimentConfig(backbone="nope"))
    assert err.value.field == "backbone"
    with pytest.raises(ConfigError):
        run_control.validate_config(ExperimentConfig(step="dpd", pa_run=None))
    good = ExperimentConfig(backbone="gru")
    assert run_control.validate_config(good) is good and validated == []
    monkeypatch.setattr(preload, "_job", None)  # no preload (or ended): the full check
    assert run_control.validate_config(good) is good and validated == [good]


def test_the_preload_imports_with_the_collector_off_then_freezes_what_it_imported(qtbot):
    """A cyclic collection while torch imports is a full pass over its objects, holding the GIL the GUI thread waits
    for: the preload imports with the collector off, freezes the objects and turns it on again, also on failure."""
    import gc

    from dpd_desktop.gui.preload import CorePreloadJob

    seen = []

    def importer(name):
        seen.append((name, gc.isenabled()))
        if name == "broken":
            raise ImportError("no such module")

    assert gc.isenabled()
    frozen = gc.get_freeze_count()  # an earlier window's preload in this process froze its objects
    gc.unfreeze()
    job = CorePreloadJob(("json", "email.message"), forkserver=False, importer=importer)
    try:
        with qtbot.waitSignal(job.signals.done, timeout=10_000):
            job.submit()
        assert seen == [("json", False), ("email.message", False)]
        assert gc.isenabled()
        assert gc.get_freeze_count() > 1000  # this process's objects, the test's among them
        job = CorePreloadJob(("broken", "json"), forkserver=False, importer=importer)
        with qtbot.waitSignal(job.signals.failed, timeout=10_000) as failed:
            job.submit()
        assert "no such module" in failed.args[0] and seen[-1] == ("broken", False)
        assert gc.isenabled()
    finally:
        gc.unfreeze()
        gc.enable()
        if frozen:
            gc.freeze()


LIBS = r"""
import json, sys, threading, time
sys.setswitchinterval(1000)  # the GIL changes hands only where a thread releases it
from dpd_desktop.gui.preload import load_libraries
count, stop = [0], []
def spin():
    while not stop:
        count[0] += 1
        time.sleep(0)
t = threading.Thread(target=spin)
t.start()
time.sleep(0.05)
before = count[0]
paths = load_libraries("torch")
during = count[0] - before
stop.append(1)
t.join()
print("RESULT " + json.dumps({"paths": paths, "during": during, "torch": "torch" in sys.modules}))
"""


def test_torchs_libraries_load_with_the_gil_released():
    """The import of torch loads libtorch_cpu holding the GIL (the GUI thread waited for it); the preload loads the
    library first with the GIL released: another thread runs meanwhile."""
    if not sys.platform.startswith("linux"):
        import pytest

        pytest.skip("Linux only: Windows imports torch before Qt")
    env = dict(os.environ, PYTHONPATH=_pythonpath())
    proc = subprocess.run([sys.executable, "-c", LIBS], env=env, capture_output=True, text=True, timeout=120)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert line, proc.stderr[-3000:]
    out = json.loads(line[0][7:])
    assert [Path(p).name for p in out["paths"]][:1] == ["libtorch_cpu.so"]
    assert out["torch"] is False  # not imported, only its library loaded
    # held: 1 to 5 turns of the other thread (the file look-ups release the GIL briefly); released: thousands
    assert out["during"] > 200, out
