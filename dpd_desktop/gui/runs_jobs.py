"""Pool jobs of the runs browser and the compare view (gui/jobs.py ``PoolJob``): listing the index, replaying a
run, reading a comparison, writing a report — every read of the workspace off the GUI thread."""
from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any, Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog
from shiboken6 import isValid

from ..runs.index import RunIndex
from ..runs.report_html import write_report
from .jobs import PoolJob


class _CallSignals(QObject):
    done = Signal(object)  # the function's result
    failed = Signal(object, str)  # exception, traceback text


class CallJob(PoolJob):
    """Runs ``fn(*args)`` on the thread pool; ``signals.done(result)`` or ``signals.failed(exc, traceback)``.
    A stop requested before it begins skips it; one requested while it runs drops the result."""

    def __init__(self, name: str, fn: Callable[..., Any], *args):
        super().__init__()
        self.name = name
        self.fn, self.args = fn, args
        self.signals = _CallSignals()

    def work(self) -> None:
        if self.stop_requested:
            return
        try:
            result = self.fn(*self.args)
        except Exception as exc:  # noqa: BLE001 - shown to the user in plain words
            if not self.stop_requested:
                self.signals.failed.emit(exc, traceback.format_exc())
            return
        if not self.stop_requested:
            self.signals.done.emit(result)


def start_job(window, name: str, fn: Callable[..., Any], *args, done: Callable | None = None,
              failed: Callable | None = None) -> CallJob:
    """Register a :class:`CallJob` in ``window.jobs`` (the close waits for it), connect ``done(result)`` /
    ``failed(exc, traceback)`` and start it; the job leaves the registry when it reports."""
    job = CallJob(name, fn, *args)
    window.jobs.add(job)

    # the callbacks are plain functions, which Qt cannot disconnect when the window goes: a result queued before a
    # close and delivered after it finds the window deleted, and is dropped
    def _done(result, job=job):
        if isValid(window):
            window.jobs.discard(job)
            if done is not None:
                done(result)

    def _failed(exc, tb, job=job):
        if isValid(window):
            window.jobs.discard(job)
            if failed is not None:
                failed(exc, tb)

    job.signals.done.connect(_done)
    job.signals.failed.connect(_failed)
    job.submit()
    return job


def index_rows(workspace) -> list:
    """Open the workspace's index, sync it with the folders and return every row, newest first (pool thread)."""
    with RunIndex.open(workspace) as idx:
        return idx.runs(sort="run_id", descending=True)


def write_report_job(window, folders, path: str | None, on_end=None) -> None:
    """Ask for the HTML file (unless ``path``) and write the report of ``folders`` on a pool thread; the status bar
    says where it went; ``on_end(path or exception)``."""
    overwrite = path is None  # the save dialog asks before replacing a file
    if path is None:
        stem = Path(folders[0]).name if len(folders) == 1 else f"compare-{len(folders)}-runs"
        path, _ = QFileDialog.getSaveFileName(window, "Write HTML report", str(Path.home() / f"{stem}.html"),
                                              "HTML (*.html)")
        if not path:
            return
        if not path.lower().endswith((".html", ".htm")):
            path += ".html"

    def done(out):
        window.statusBar().showMessage(f"Report written to {out}", 8000)
        if on_end:
            on_end(out)

    def failed(exc, tb):
        window.banner.show_message("error", f"The report could not be written: {exc}", detail=tb)
        if on_end:
            on_end(exc)

    start_job(window, "HTML report", write_report, list(folders), path, overwrite,
              getattr(window, "workspace", None), done=done, failed=failed)
