"""A finished run's default plots (``plots/*.png``) rendered in a process of their own, from the run folder.

    python -m dpd_desktop.gui.run_plots RUN_DIR      # prints the PNG paths written, one per line

The window starts it after a run succeeded (its own or a followed queue entry): it renders nothing itself, only starts
a :class:`QProcess` and hears its end. The plots are drawn (gui/export.py ``write_run_plots``) from what the run
folder holds (runs/replay.py: history.csv, results.h5 — the test split of the selected checkpoint, as the live run's
final plots — and status.json's selected epoch).

Exit status 0 with the paths on stdout; 1 with the reason on stderr (the window shows it in its status bar).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from PySide6.QtCore import QObject, QProcess, QProcessEnvironment, Signal

from ..runs.replay import load_replay

#: the package's parent folder, put first on the renderer's PYTHONPATH (it imports this very copy of the package)
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])


def write_plots_of(run_dir: str | os.PathLike) -> list[Path]:
    """Render and write the default plots of the run at ``run_dir`` (offscreen Qt; this process must own the
    QApplication). Raises ReplayError / RecordError (the run folder cannot be read) or OSError (a PNG cannot be
    written)."""
    from .export import write_run_plots  # Qt's widgets and pyqtgraph: only in the renderer's process

    rep = load_replay(run_dir)
    return write_run_plots(run_dir, rep.history, rep.plots, best_epoch=rep.best_epoch)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m dpd_desktop.gui.run_plots RUN_DIR", file=sys.stderr)
        return 2
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    try:
        paths = write_plots_of(args[0])
    except Exception as exc:  # noqa: BLE001 - reported to the window in plain words
        print(f"the plots of {args[0]} were not written: {exc}", file=sys.stderr)
        return 1
    for p in paths:
        print(p)
    return 0


class PlotsProcess(QObject):
    """Runs ``python -m dpd_desktop.gui.run_plots RUN_DIR`` with :class:`QProcess` (asynchronous, on the GUI
    thread's event loop). ``written(list[Path])`` or ``failed(str)`` when it ends. A job of
    :class:`~dpd_desktop.gui.jobs.JobRegistry` (``request_stop`` lets it finish: each PNG is written atomically;
    ``wait`` bounds the wait)."""

    name = "plot PNG renderer"
    written = Signal(object)
    failed = Signal(str)

    def __init__(self, run_dir: str | os.PathLike, parent: QObject | None = None):
        super().__init__(parent)
        self.run_dir = str(run_dir)
        self.proc = QProcess(self)
        env = QProcessEnvironment.systemEnvironment()
        env.insert("QT_QPA_PLATFORM", "offscreen")
        env.insert("PYTHONPATH", os.pathsep.join(filter(None, [_PACKAGE_PARENT, env.value("PYTHONPATH", "")])))
        self.proc.setProcessEnvironment(env)
        self.proc.finished.connect(self._finished)
        self.proc.errorOccurred.connect(self._error)
        self._ended = False

    def start(self) -> None:
        self.proc.start(sys.executable, ["-m", "dpd_desktop.gui.run_plots", self.run_dir])

    def request_stop(self) -> None:
        """Nothing to interrupt: the renderer ends by itself within a few seconds."""

    def is_done(self) -> bool:
        return self._ended or self.proc.state() == QProcess.ProcessState.NotRunning

    def wait(self, timeout_ms: int) -> bool:
        if self.proc.state() == QProcess.ProcessState.NotRunning:
            return True
        return self.proc.waitForFinished(int(timeout_ms))

    def _finished(self, code: int, status) -> None:
        if self._ended:
            return
        self._ended = True
        out = bytes(self.proc.readAllStandardOutput()).decode("utf-8", "replace")
        err = bytes(self.proc.readAllStandardError()).decode("utf-8", "replace").strip()
        if status == QProcess.ExitStatus.NormalExit and code == 0:
            self.written.emit([Path(line) for line in out.splitlines() if line.strip()])
        else:
            self.failed.emit(err.splitlines()[-1] if err else f"the plot renderer ended with status {code}")

    def _error(self, error) -> None:
        if error == QProcess.ProcessError.FailedToStart and not self._ended:
            self._ended = True
            self.failed.emit(f"the plot renderer could not start: {self.proc.errorString()}")


if __name__ == "__main__":
    sys.exit(main())
