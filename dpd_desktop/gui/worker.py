"""Workers on a QThread that turn the supervisor's observer calls (lab/supervisor.py, a child process per run)
into Qt signals carrying runs/events.py dataclasses. Progress is throttled (latest wins, at most ~10 per second, an
epoch's last batch always passes). They are jobs of :class:`~dpd_desktop.gui.jobs.JobRegistry`.
"""
from __future__ import annotations

import threading
import traceback
from typing import Callable

from PySide6.QtCore import QCoreApplication, QObject, Qt, QThread, Signal, Slot

from ..config import ExperimentConfig
from ..lab.queue import QueueEntry, device_lane
from ..lab.supervisor import EntryEnded, EntryStarted, Supervisor
from ..timing import Throttle
from ..runs.events import (BatchProgress, EpochEnded, PreviewReady, RunCancelled, RunFailed, RunFinished,
                           RunStarted)
from ..runs.record import DatasetRef, RecordError, RunRecord

_SIGNAL_OF = {RunStarted: "started", EpochEnded: "epochEnded", PreviewReady: "previewReady",
              RunFinished: "finished", RunFailed: "failed", RunCancelled: "cancelled"}
#: the id of the window's one entry (the child's fault hook may name it: ``1:kill@epoch:0``)
ENTRY_ID = 1


def start_on_thread(worker, name: str) -> QThread:
    """Move ``worker`` (a QObject with a ``run`` slot and a ``done`` signal) to a new QThread named ``name``, start
    ``run`` there, and quit the thread when ``done`` is emitted; sets and returns ``worker.thread``."""
    thread = QThread()
    thread.setObjectName(name)
    worker.thread = thread
    worker.moveToThread(thread)
    thread.started.connect(worker.run)
    # quit() is thread-safe: call it directly from the worker thread, before any queued GUI slot waits on it.
    worker.done.connect(thread.quit, Qt.ConnectionType.DirectConnection)
    thread.start()
    return thread


class ThreadJob(QObject):
    """A QObject whose ``run`` slot works on its own QThread (:meth:`start`, named ``THREAD_NAME``); with
    ``request_stop`` and the two methods here it is a job of :class:`dpd_desktop.gui.jobs.JobRegistry`. Subclasses
    define ``run`` and a ``done`` signal (emitted last)."""

    THREAD_NAME = "dpd-job"

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.thread: QThread | None = None

    def start(self) -> QThread:
        """Move to a new QThread and start :meth:`run` there. Returns the thread."""
        return start_on_thread(self, self.THREAD_NAME)

    def is_done(self) -> bool:
        """Started and its thread has ended."""
        return self.thread is not None and self.thread.isFinished()

    def wait(self, timeout_ms: int) -> bool:
        """Join the thread for at most ``timeout_ms``; True when it has ended (or never started)."""
        return True if self.thread is None else self.thread.wait(int(timeout_ms))

    def _end(self) -> None:
        """The last step of :meth:`run` (its thread): hand the object back to the GUI thread, so that it can be
        deleted there, then emit ``done`` (which quits the thread)."""
        app = QCoreApplication.instance()
        if app is not None:
            self.moveToThread(app.thread())
        self.done.emit()


class SupervisorWorker(ThreadJob):
    """A :class:`~dpd_desktop.lab.supervisor.Supervisor` (built by ``supervisor_factory(workspace, observers=[...],
    **kw)``) on its own QThread; the followed run's events as signals."""

    started = Signal(object)  # RunStarted
    batchProgress = Signal(object)  # BatchProgress (throttled)
    epochEnded = Signal(object)  # EpochEnded
    previewReady = Signal(object)  # PreviewReady
    finished = Signal(object)  # RunFinished
    failed = Signal(object)  # RunFailed
    cancelled = Signal(object)  # RunCancelled
    done = Signal()

    PROGRESS_MIN_INTERVAL_S = 0.1

    def __init__(self, workspace, supervisor_factory: Callable = Supervisor, parent: QObject | None = None):
        super().__init__(parent)
        self.workspace = workspace
        self._factory = supervisor_factory
        self._lock = threading.Lock()
        self._sup = None
        self._stop = False
        self._progress = Throttle(self.PROGRESS_MIN_INTERVAL_S)

    def request_stop(self) -> None:
        """Stop (safe from any thread): the running children stop after their current batch, none starts."""
        with self._lock:
            self._stop = True
            sup = self._sup
        if sup is not None:
            sup.request_stop()

    def _supervise(self, **kw):
        """Build the supervisor (this thread) and return it; stopped already when a stop came first."""
        sup = self._factory(self.workspace, observers=[self._observe], **kw)
        with self._lock:
            self._sup = sup
            stop = self._stop
        if stop:
            sup.request_stop()
        return sup

    def _send(self, entry_id: int | None, message: str) -> None:
        with self._lock:
            sup = self._sup
        if sup is not None:
            sup.send(entry_id, message)

    def _forward(self, ev) -> None:
        """Emit the signal of ``ev`` (BatchProgress throttled); other events are ignored."""
        if isinstance(ev, BatchProgress):
            if self._progress.ready(final=ev.batch >= ev.batches):
                self.batchProgress.emit(ev)
            return
        name = _SIGNAL_OF.get(type(ev))
        if name is not None:
            getattr(self, name).emit(ev)

    def _observe(self, entry, ev) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class RunWorker(SupervisorWorker):
    """The window's Start: ``config`` on ``dataset`` (None: the config's, or a ``resume`` run folder's) in a child
    process. A child killed without an outcome emits :attr:`interrupted`; ``resumed_rows``: a resume's earlier
    history rows, set before ``started`` is emitted.
    """

    name = "training run"
    THREAD_NAME = "dpd-training"

    interrupted = Signal(object)  # EntryEnded (state "interrupted"): the child was killed

    def __init__(self, config: ExperimentConfig, dataset=None, workspace=None, resume: str | None = None,
                 supervisor_factory: Callable = Supervisor, parent: QObject | None = None):
        super().__init__(workspace, supervisor_factory, parent)
        self.config = config
        self.dataset = dataset
        self.resume = resume
        self._preview: tuple[int | None] | None = None
        self._outcome_emitted = False
        self.resumed_rows: list[dict] = []
        self.end: EntryEnded | None = None

    @property
    def cancel_requested(self) -> bool:
        return self._stop

    request_cancel = SupervisorWorker.request_stop

    def set_preview_every(self, n: int | None) -> None:
        """A live change of the preview period, sent to the child (applied at its next batch)."""
        with self._lock:
            self._preview = (n,)  # sent again when RunStarted arrives: a send before the child runs is lost
        self._send(ENTRY_ID, f"preview:{int(n)}" if n else "preview:off")

    @Slot()
    def run(self) -> None:
        try:
            # the DatasetRef hashes the whole dataset (its fingerprint): here, not on the GUI thread
            entry = QueueEntry(id=ENTRY_ID, position=0, config=self.config, device=device_lane(self.config.device),
                               state="running")
            options = child_options(self.dataset, resume=self.resume)
            self._supervise().run_entry(entry, options)
        except Exception as exc:  # noqa: BLE001 - the run's own failures come from the child
            if not self._outcome_emitted:
                self._outcome_emitted = True
                self.failed.emit(RunFailed(run_id=None, run_dir=None, message=f"The run could not start: {exc}",
                                           detail=traceback.format_exc()))
        finally:
            with self._lock:
                self._sup = None
            self._end()

    def _observe(self, entry, ev) -> None:
        """The supervisor's observer (this worker's thread): only emits signals."""
        if isinstance(ev, EntryEnded):
            self.end = ev
            if ev.state == "interrupted" and not self._outcome_emitted:
                self._outcome_emitted = True
                self.interrupted.emit(ev)
            return
        if isinstance(ev, RunStarted):
            with self._lock:
                preview = self._preview
            if preview is not None:
                self._send(ENTRY_ID, f"preview:{int(preview[0])}" if preview[0] else "preview:off")
            if self.resume:
                self.resumed_rows = rows_before_resume(ev.run_dir)
        elif isinstance(ev, (RunFinished, RunFailed, RunCancelled)):
            if self._outcome_emitted:
                return
            self._outcome_emitted = True
        self._forward(ev)


class QueueWorker(SupervisorWorker):
    """Runs the workspace's queue (``lanes``: None for all) until no entry is ready, following its first running
    entry; ``entryStarted`` / ``entryEnded`` carry every entry's. :meth:`request_cancel` stops the followed entry,
    :meth:`request_stop` the queue (running entries stop after their batch, none starts).
    """

    name = "run queue"
    THREAD_NAME = "dpd-queue"

    entryStarted = Signal(object, bool)  # QueueEntry, followed by the window
    entryEnded = Signal(object, object, bool)  # QueueEntry, EntryEnded, followed
    queueFailed = Signal(str)  # the supervisor itself stopped on an error (e.g. a damaged queue file)

    def __init__(self, workspace, lanes=None, supervisor_factory: Callable = Supervisor,
                 parent: QObject | None = None):
        super().__init__(workspace, supervisor_factory, parent)
        self.lanes = lanes
        self.followed: int | None = None

    def request_cancel(self) -> None:
        """Stop the followed entry after its current batch; the queue goes on (safe from any thread)."""
        with self._lock:
            entry = self.followed
        if entry is not None:
            self._send(entry, "cancel")

    def set_preview_every(self, n: int | None) -> None:
        self._send(None, f"preview:{n}" if n else "preview:off")

    @Slot()
    def run(self) -> None:
        try:
            self._supervise(lanes=self.lanes).run(watch=False)
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
        elif followed:
            self._forward(ev)


def child_options(dataset=None, resume: str | None = None) -> dict:
    """The ``options`` of lab/child.py ``child_main``: ``dataset``, the DatasetRef block of the window's loaded
    ``dataset`` (the child reloads the folder or regenerates the demo and checks the fingerprint; computing it
    hashes the data: call it off the GUI thread), and ``resume``, a run folder to continue."""
    opts: dict = {}
    if dataset is not None:
        opts["dataset"] = DatasetRef.from_dataset(dataset).to_dict()
    if resume:
        opts["resume"] = str(resume)
    return opts


def rows_before_resume(run_dir) -> list[dict]:
    """The history rows of a resumed run up to the epoch it resumed from (config.json's last ``resumes`` entry): the
    child may have appended the resumed run's first rows by the time its RunStarted is read here."""
    try:
        rec = RunRecord.open(run_dir)
        resumes = rec.doc.get("resumes") or []
        last = int(resumes[-1]["from_epoch"]) if resumes else None
        rows = [dict(r) for r in rec.history()]
    except (RecordError, OSError, ValueError, KeyError, TypeError):
        return []
    return [r for r in rows if last is None or int(r["EPOCH"]) <= last]
