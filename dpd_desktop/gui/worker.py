"""The training run of the window, on its own QThread (the other background jobs are in :mod:`.jobs`).

The trainer calls its observers on the training thread; :class:`TrainingWorker` turns each event into a Qt signal
(queued to the GUI thread, which never trains). Progress is throttled (latest value wins, at most ~10 per second,
the last batch of an epoch always passes); epoch rows, outcomes and previews are forwarded as they come.
"""
from __future__ import annotations

import threading
import traceback
from typing import Any, Callable

from PySide6.QtCore import QCoreApplication, QObject, Qt, QThread, Signal, Slot

from ..timing import Throttle
from ..runs.events import (BatchProgress, EpochEnded, PreviewReady, RunCancelled, RunFailed, RunFinished,
                               RunStarted)

TrainerFactory = Callable[..., Any]


def default_trainer_factory(config, dataset=None, workspace=None, observers=()):
    """Build the real :class:`dpd_desktop.training.trainer.Trainer`."""
    # Imported here, not at the top: the trainer brings torch (~1.1 s measured), which the window must not wait
    # for at start-up; gui/preload.py imports it behind the first paint, and a run started before that waits here
    # (on the training thread) instead of importing torch on a second thread at the same time.
    from .preload import wait_for_core

    wait_for_core()
    from ..training.ls_fit import make_trainer

    return make_trainer(config, dataset=dataset, workspace=workspace, observers=list(observers))


class ResumeFactory:
    """A trainer factory for :class:`TrainingWorker` that resumes ``run_dir`` (training/resume.py); after it ran
    (on the worker thread), :attr:`rows` holds the history rows of the epochs done before."""

    def __init__(self, run_dir: str):
        self.run_dir = run_dir
        self.rows: list[dict] = []

    def __call__(self, config, dataset=None, workspace=None, observers=()):
        # Imported here, not at the top: the core's trainer brings torch (~1.1 s measured, see above); this runs on
        # the training thread.
        from ..training.resume import prepare_resume, resume_trainer

        plan = prepare_resume(workspace, self.run_dir, dataset=dataset)
        self.rows = [dict(r) for r in plan.state.history]
        return resume_trainer(plan, workspace, observers)


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


class RunSignals(ThreadJob):
    """The signals of a worker that follows one training run (every one carries the event dataclass)."""

    name = "training run"

    started = Signal(object)  # RunStarted
    batchProgress = Signal(object)  # BatchProgress (throttled)
    epochEnded = Signal(object)  # EpochEnded
    previewReady = Signal(object)  # PreviewReady
    finished = Signal(object)  # RunFinished
    failed = Signal(object)  # RunFailed
    cancelled = Signal(object)  # RunCancelled
    interrupted = Signal(object)  # EntryEnded (state "interrupted"): a child process's kill (gui/child_worker.py)
    plotsWritten = Signal(object)  # the PNG paths a child wrote after a succeeded run, or an OSError (child_worker)
    done = Signal()

    PROGRESS_MIN_INTERVAL_S = 0.1


class TrainingWorker(RunSignals):
    """Runs ``Trainer.run()`` on its own QThread and forwards the trainer's events as signals.

    Every signal carries the event dataclass (``Signal(object)``). ``done`` is emitted last, whatever the outcome.
    Use :meth:`start` to launch, :meth:`request_cancel` to stop cooperatively (thread-safe) and :meth:`wait` for a
    bounded join; with ``request_stop``/``is_done`` it is a job of :class:`dpd_desktop.gui.jobs.JobRegistry`.
    """

    THREAD_NAME = "dpd-training"
    # ``interrupted`` and ``plotsWritten`` never fire here: no child process, and the window renders this run's
    # PNGs itself (plot_area._write_plots)

    def __init__(self, config, dataset=None, workspace=None, trainer_factory: TrainerFactory | None = None,
                 parent: QObject | None = None):
        super().__init__(parent)
        self.config = config
        self.dataset = dataset
        self.workspace = workspace
        self._factory = trainer_factory or default_trainer_factory
        self._lock = threading.Lock()
        self._trainer = None
        self._cancel = False
        self._progress = Throttle(self.PROGRESS_MIN_INTERVAL_S)
        self._outcome_emitted = False
        self.result = None

    # -- control (GUI thread) -------------------------------------------------------------------------------------
    def request_cancel(self) -> None:
        """Ask the trainer to stop at the next batch boundary (safe from any thread)."""
        with self._lock:
            self._cancel = True
            trainer = self._trainer
        if trainer is not None:
            trainer.request_cancel()

    request_stop = request_cancel

    @property
    def cancel_requested(self) -> bool:
        return self._cancel

    @property
    def resumed_rows(self) -> list[dict]:
        """For a resume (:class:`ResumeFactory`): the history rows of the epochs done before it, once built."""
        return list(getattr(self._factory, "rows", []) or [])

    def set_preview_every(self, n: int | None) -> None:
        """Forward a live change of the preview period if the trainer supports it (``set_preview_every``)."""
        with self._lock:
            trainer = self._trainer
        setter = getattr(trainer, "set_preview_every", None)
        if callable(setter):
            setter(n)

    # -- the run (worker thread) ----------------------------------------------------------------------------------
    @Slot()
    def run(self) -> None:
        try:
            trainer = self._factory(self.config, dataset=self.dataset, workspace=self.workspace,
                                    observers=[self._observe])
            with self._lock:
                self._trainer = trainer
                cancel = self._cancel
            if cancel:
                trainer.request_cancel()
            self.result = trainer.run()
        except Exception as exc:  # the trainer reports its own failures; this catches construction errors
            if not self._outcome_emitted:
                self._outcome_emitted = True
                self.failed.emit(RunFailed(run_id=None, run_dir=None,
                                           message=f"The run could not start: {exc}",
                                           detail=traceback.format_exc()))
        finally:
            with self._lock:
                self._trainer = None
            self._end()

    def _observe(self, event) -> None:
        """The trainer's observer: runs on the training thread, only emits signals."""
        if isinstance(event, BatchProgress):
            if self._progress.ready(final=event.batch >= event.batches):
                self.batchProgress.emit(event)
        elif isinstance(event, EpochEnded):
            self.epochEnded.emit(event)
        elif isinstance(event, PreviewReady):
            self.previewReady.emit(event)
        elif isinstance(event, RunStarted):
            self.started.emit(event)
        elif isinstance(event, RunFinished):
            self._outcome_emitted = True
            self.finished.emit(event)
        elif isinstance(event, RunFailed):
            self._outcome_emitted = True
            self.failed.emit(event)
        elif isinstance(event, RunCancelled):
            self._outcome_emitted = True
            self.cancelled.emit(event)
