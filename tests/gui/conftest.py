"""GUI test fixtures: offscreen Qt, settings and workspace redirected into tmp_path, fakes for the trainer (trained
in this process through gui_fakes.InThreadSupervisor, the window's ``supervisor_factory``)."""
from __future__ import annotations

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"

import pytest

from gui_fakes import FakeWorkspace, InThreadSupervisor  # noqa: E402


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):
    """Never touch real preferences or the real workspace."""
    from PySide6.QtCore import QSettings

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DPD_DESKTOP_WORKSPACE", str(tmp_path / "default-workspace"))
    QSettings.setDefaultFormat(QSettings.Format.IniFormat)
    for scope in (QSettings.Scope.UserScope, QSettings.Scope.SystemScope):
        QSettings.setPath(QSettings.Format.IniFormat, scope, str(tmp_path / "qsettings"))
    yield


@pytest.fixture(autouse=True)
def _widgets_deleted_by_qt(qtbot, monkeypatch):
    """Widgets a test registers (``qtbot.addWidget``) are held until pytest-qt has closed them and Qt has deleted
    them (deleteLater), then collected: a top-level pyqtgraph widget is never destroyed by Python's cyclic collector
    in the middle of a later test. That order of destruction (children's wrappers cleared in arbitrary order) crashed
    the suite now and then inside pyqtgraph (an InfiniteLine's ``boundingRect`` on a deleted object, then SIGSEGV)."""
    import gc

    from PySide6.QtCore import QEvent
    from PySide6.QtWidgets import QApplication

    held = []
    add = qtbot.addWidget

    def add_and_hold(widget, *args, **kwargs):
        held.append(widget)
        return add(widget, *args, **kwargs)

    monkeypatch.setattr(qtbot, "addWidget", add_and_hold)
    yield
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete.value)
    held.clear()
    gc.collect()


@pytest.fixture(autouse=True)
def _close_answers_stop(monkeypatch):
    """A close while a run is live asks (gui/close_prompt.py); a modal dialog would block an offscreen test, so the
    answer is "Stop and quit" unless a test sets another (tests/gui/test_close_prompt.py)."""
    from dpd_desktop.gui import close_prompt

    monkeypatch.setattr(close_prompt, "ask", lambda parent, busy: close_prompt.STOP_AND_QUIT)


@pytest.fixture
def settings(tmp_path):
    from PySide6.QtCore import QSettings

    return QSettings(str(tmp_path / "window.ini"), QSettings.Format.IniFormat)


@pytest.fixture
def workspace(tmp_path):
    try:
        from dpd_desktop.runs.workspace import Workspace

        return Workspace(tmp_path / "workspace")
    except Exception:  # noqa: BLE001 - core not there yet
        return FakeWorkspace(tmp_path / "workspace")


@pytest.fixture
def make_window(qtbot, settings, workspace):
    """Factory for a shown MainWindow; at teardown it checks that no training thread is left running.

    ``trainer_factory(config, dataset=, workspace=, observers=)``: train with it in this process (on the run
    worker's thread) instead of in a child process."""
    from dpd_desktop.gui.main_window import MainWindow

    windows = []

    def _make(trainer_factory=None, ws=None, write_plots=False, inspect=False, **kw):
        if trainer_factory is not None:
            kw["supervisor_factory"] = InThreadSupervisor.factory(trainer_factory)
        w = MainWindow(workspace=ws if ws is not None else workspace, settings=settings, **kw)
        w.write_plots_on_finish = write_plots
        # the fakes' all-zero datasets would be flagged: only the flags' own tests inspect (test_dataset_flags.py)
        w.dataset_flags.enabled = inspect
        qtbot.addWidget(w)
        w.show()
        qtbot.waitExposed(w)
        windows.append(w)
        return w

    yield _make
    for w in windows:
        if w.runs.worker is not None:
            ended = w.shutdown(5000)
            assert ended, "training thread still running at teardown"
        assert w.runs.worker is None
