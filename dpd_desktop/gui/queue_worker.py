"""The window's queue runner: the core's :class:`~dpd_desktop.lab.supervisor.Supervisor` on its own QThread.

Each queued run trains in a child process (lab/child.py), so a run that segfaults or is killed takes only its
child down. :class:`QueueWorker` turns the events the supervisor hands over into the signals of
:class:`~dpd_desktop.gui.worker.TrainingWorker` (the same names, the same event dataclasses) for the entry the
window follows — the first running one — so that the panels follow a queued run as they follow an interactive one;
``entryStarted`` / ``entryEnded`` carry every entry's start and end. With ``request_stop``, ``wait`` and
``is_done`` it is a job of :class:`~dpd_desktop.gui.jobs.JobRegistry`.
"""
from __future__ import annotations

import threading
import traceback

from PySide6.QtCore import QObject, Signal, Slot

from ..timing import Throttle
from ..lab.supervisor import EntryEnded, EntryStarted, Supervisor
from ..runs.events import (BatchProgress, EpochEnded, PreviewReady, RunCancelled, RunFailed, RunFinished,
                               RunStarted)
from .worker import ThreadJob

_SIGNAL_OF = {RunStarted: "started", EpochEnded: "epochEnded", PreviewReady: "previewReady",
              RunFinished: "finished", RunFailed: "failed", RunCancelled: "cancelled"}


class QueueWorker(ThreadJob):
    """Runs the workspace's queue (``lanes``: the device lanes served, None: all) until no entry is ready.

    :meth:`request_cancel` stops the followed entry after its current batch (the toolbar's Stop);
    :meth:`request_stop` stops the queue: the running entries stop after their batch and none starts.
    """

    name = "run queue"
    THREAD_NAME = "dpd-queue"

    started = Signal(object)  # RunStarted of the followed entry
    batchProgress = Signal(object)  # BatchProgress (throttled)
    epochEnded = Signal(object)
    previewReady = Signal(object)
    finished = Signal(object)
    failed = Signal(object)
    cancelled = Signal(object)
    entryStarted = Signal(object, bool)  # QueueEntry, followed by the window
    entryEnded = Signal(object, object, bool)  # QueueEntry, EntryEnded, followed
    queueFailed = Signal(str)  # the supervisor itself stopped on an error (e.g. a damaged queue file)
    done = Signal()

    PROGRESS_MIN_INTERVAL_S = 0.1

    def __init__(self, workspace, lanes=None, supervisor_factory=Supervisor, parent: QObject | None = None):
        super().__init__(parent)
        self.workspace = workspace
        self.lanes = lanes
        self._factory = supervisor_factory
        self._lock = threading.Lock()
        self._sup: Supervisor | None = None
        self._stop = False
        self.followed: int | None = None
        self._progress = Throttle(self.PROGRESS_MIN_INTERVAL_S)

    # -- control (GUI thread) -------------------------------------------------------------------------------------
    def request_stop(self) -> None:
        """Stop the queue (safe from any thread)."""
        with self._lock:
            self._stop = True
            sup = self._sup
        if sup is not None:
            sup.request_stop()

    def request_cancel(self) -> None:
        """Stop the followed entry after its current batch; the queue goes on (safe from any thread)."""
        with self._lock:
            sup, entry = self._sup, self.followed
        if sup is not None and entry is not None:
            sup.send(entry, "cancel")

    def set_preview_every(self, n: int | None) -> None:
        with self._lock:
            sup = self._sup
        if sup is not None:
            sup.send(None, f"preview:{n}" if n else "preview:off")

    # -- the queue (worker thread) --------------------------------------------------------------------------------
    @Slot()
    def run(self) -> None:
        try:
            sup = self._factory(self.workspace, lanes=self.lanes, observers=[self._observe])
            with self._lock:
                self._sup = sup
                stop = self._stop
            if stop:
                sup.request_stop()
            sup.run(watch=False)
        except Exception as exc:  # noqa: BLE001 - shown by the panel; the window stays
            self.queueFailed.emit(f"{exc}\n{traceback.format_exc(limit=3)}" if not isinstance(exc, ValueError)
                                  else str(exc))
        finally:
            with self._lock:
                self._sup = None
            self._end()

    def _observe(self, entry, ev) -> None:
        """The supervisor's observer (worker thread): only emits signals."""
        if isinstance(ev, EntryStarted):
            with self._lock:
                follow = self.followed is None
                if follow:
                    self.followed = entry.id
            self.entryStarted.emit(entry, follow)
            return
        followed = entry.id == self.followed
        if isinstance(ev, EntryEnded):
            if followed:
                with self._lock:
                    self.followed = None
            self.entryEnded.emit(entry, ev, followed)
            return
        if not followed:
            return
        if isinstance(ev, BatchProgress):
            if self._progress.ready(final=ev.batch >= ev.batches):
                self.batchProgress.emit(ev)
            return
        name = _SIGNAL_OF.get(type(ev))
        if name is not None:
            getattr(self, name).emit(ev)
