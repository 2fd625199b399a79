"""Application entry point: ``main()`` creates the QApplication (:mod:`.qt_app`) and the main window, then runs the
event loop."""
from __future__ import annotations

import dataclasses
import os
import sys
import threading

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from .. import timing
from ..process import CTRL_C, NO_DISPLAY_MESSAGE, Display, Exit, detect_display
from .main_window import MainWindow
from .qt_app import ensure_app  # noqa: F401 - also the entry point's public name for callers

CLOSING = "closing the window (Ctrl+C again to quit at once)"


def main(argv: list[str] | None = None, dataset=None, autostart_config=None, workspace=None) -> int:
    """Open the main window and run the event loop; returns the exit code.

    Args:
        argv: arguments for QApplication (Qt options such as ``-platform``); default ``sys.argv[:1]``.
        dataset: an ``IQDataset`` to show, or a path / ``"demo"`` to load in the background.
        autostart_config: an ``ExperimentConfig`` to start as soon as the window is up (its dataset is loaded
            first when ``dataset`` is not given).
        workspace: the run workspace (default: ``Workspace()`` under the platform's user data folder).

    Without a display (and without a QT_QPA_PLATFORM or ``-platform`` chosen by the user) the window would open on
    no screen and block forever: a message says so and the exit code is 2.
    """
    explicit_platform = any(a == "-platform" or a.startswith("-platform=") for a in (argv or ()))
    if QApplication.instance() is None and not explicit_platform and detect_display() is Display.NONE:
        print(NO_DISPLAY_MESSAGE, file=sys.stderr)
        return Exit.USAGE
    app = ensure_app(argv)
    win = MainWindow(workspace=workspace)
    if autostart_config is not None:
        win.set_form_from_config(autostart_config)
    elif dataset is None:
        win.restore_last_session()  # the form, step and dataset of the last close (QSettings)
    if dataset is not None:
        if isinstance(dataset, (str, os.PathLike)):
            if str(dataset) == "demo":
                win.load_demo()
            else:
                win.open_dataset(dataset)
        else:
            win.set_dataset(dataset)
        if autostart_config is not None:
            ref = "demo" if str(dataset) == "demo" else (
                str(dataset) if isinstance(dataset, (str, os.PathLike)) else win.data.ref)
            autostart_config = dataclasses.replace(autostart_config, dataset=ref)
    win.show()
    if autostart_config is not None:  # start_run queues the run while the dataset is still loading
        QTimer.singleShot(0, lambda: win.start_run(autostart_config))
    _close_on_ctrl_c(win)
    return int(app.exec())


def _close_on_ctrl_c(win) -> None:
    """Ctrl+C in the terminal that started the window closes it as "Stop and quit" does, without asking (a running
    training is cancelled and its run stays readable); a second Ctrl+C quits at once (exit 130):
    :data:`~dpd_desktop.process.CTRL_C` with closing as its first action. Python runs signal handlers only when the
    interpreter gets control, which Qt's event loop does not give it: a 200 ms timer does."""
    if threading.current_thread() is not threading.main_thread():
        return
    if not CTRL_C.install(lambda: QTimer.singleShot(0, win.close_guard.stop_and_close), CLOSING):
        return
    heartbeat = QTimer(win)
    heartbeat.timeout.connect(lambda: None)
    heartbeat.start(200)
    timing.mark("gui_ctrl_c_ready")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv))
