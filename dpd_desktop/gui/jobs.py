"""The window's background jobs and the one registry that holds them while they run.

A job runs off the GUI thread (the global thread pool, or its own QThread: gui/worker.py), reports back
through Qt signals, and offers ``request_stop()`` (cooperative: the job stops at its next check point),
``wait(ms) -> bool`` and ``is_done()``. :meth:`JobRegistry.shutdown` asks every live job to stop and waits for
them at most a given time in total (superqt's worker pattern: stop at each check point, a bounded wait when the
application quits); jobs still running then are kept referenced in :data:`ORPHANS` (a destroyed running QThread
aborts the process) and named in a warning.

Jobs: :class:`PoolJob` subclasses (:class:`DatasetLoader` here, Run DPD's in gui/model_exports.py, …), the run
workers of gui/worker.py and the PNG process of gui/run_plots.py.
"""
from __future__ import annotations

import logging
import threading
import time
import traceback
import warnings

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal

from ..data import load_dataset, make_demo_dataset

log = logging.getLogger(__name__)

#: Jobs still running when a shutdown's wait ran out; they end on their own (the trainer at its next batch).
ORPHANS: list = []


class PoolJob(QRunnable):
    """A job for the thread pool: subclasses implement :meth:`work` and set ``self.signals``.

    The job is not deleted by the pool (``autoDelete`` off): its owner keeps it referenced until it reports.
    """

    name = "background job"

    def __init__(self):
        super().__init__()
        self.setAutoDelete(False)
        self.signals: QObject | None = None
        self._ended = threading.Event()
        self._stop = threading.Event()

    def work(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def run(self) -> None:
        try:
            self.work()
        finally:
            self._ended.set()

    def request_stop(self) -> None:
        """Ask the job to stop at its next check point (safe from any thread)."""
        self._stop.set()

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def is_done(self) -> bool:
        return self._ended.is_set()

    def wait(self, timeout_ms: int) -> bool:
        """Wait at most ``timeout_ms`` for the job to end; True when it has."""
        return self._ended.wait(max(int(timeout_ms), 0) / 1000)

    def submit(self, pool: QThreadPool | None = None) -> None:
        (pool or QThreadPool.globalInstance()).start(self)


# ---------------------------------------------------------------------------------------------------- dataset loader
class _LoaderSignals(QObject):
    loaded = Signal(object, str)  # dataset, reference ("demo" or the path)
    failed = Signal(object, str)  # exception, traceback text


class DatasetLoader(PoolJob):
    """Loads a dataset (``load_dataset(path)``) or the demo (``make_demo_dataset(**demo_kwargs)``).

    Connect to ``signals.loaded(dataset, ref)`` / ``signals.failed(exc, traceback)`` before :meth:`submit`. A stop
    requested while loading drops the result (reading a file has no check point inside).
    """

    name = "dataset loader"

    def __init__(self, source: str, demo_kwargs: dict | None = None):
        super().__init__()
        self.source = source
        self.demo_kwargs = dict(demo_kwargs or {})
        self.signals = _LoaderSignals()

    def work(self) -> None:
        try:
            if self.source == "demo":
                ds = make_demo_dataset(**self.demo_kwargs)
            else:
                ds = load_dataset(self.source)
        except Exception as exc:  # noqa: BLE001 - reported to the user in plain words
            if not self.stop_requested:
                self.signals.failed.emit(exc, traceback.format_exc())
            return
        if not self.stop_requested:
            self.signals.loaded.emit(ds, self.source)


# ---------------------------------------------------------------------------------------------------- the registry
class JobRegistry:
    """The live background jobs of one window. Jobs are added when they start and dropped when they end."""

    def __init__(self):
        self._jobs: list = []

    def add(self, job):
        """Register ``job`` (``request_stop``, ``wait``, ``is_done``); returns it."""
        self._jobs.append(job)
        return job

    def discard(self, job) -> None:
        if job in self._jobs:
            self._jobs.remove(job)

    def active(self, kind: type | None = None) -> list:
        """The registered jobs that have not ended (optionally only instances of ``kind``)."""
        self._jobs = [j for j in self._jobs if not j.is_done()]
        return [j for j in self._jobs if kind is None or isinstance(j, kind)]

    def __len__(self) -> int:
        return len(self.active())

    def shutdown(self, timeout_ms: int) -> list:
        """Ask every live job to stop, then wait for them at most ``timeout_ms`` in total.

        Returns the jobs still running after the wait: they are kept in :data:`ORPHANS` and a warning names them.
        Their signals are disconnected either way, so that nothing reaches a closed window. The registry is empty
        afterwards.
        """
        jobs = self.active()
        for job in jobs:
            job.request_stop()
        deadline = time.monotonic() + max(int(timeout_ms), 0) / 1000
        left = []
        for job in jobs:
            remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
            if not job.wait(remaining_ms):
                left.append(job)
        for job in jobs:
            _disconnect(job)
        if left:
            ORPHANS.extend(left)
            log.warning("%d background job(s) still running after %d ms, left to end on their own: %s",
                        len(left), timeout_ms, ", ".join(getattr(j, "name", type(j).__name__) for j in left))
        self._jobs = []
        return left


def _disconnect(job) -> None:
    """Disconnect every signal of ``job`` (a PoolJob's ``signals`` object, or a QObject job's own signals)."""
    holder = job.signals if isinstance(job, PoolJob) else job
    if holder is None:
        return
    mo = holder.metaObject()
    for i in range(mo.methodOffset(), mo.methodCount()):
        m = mo.method(i)
        if m.methodType() == m.MethodType.Signal:
            sig = getattr(holder, bytes(m.name()).decode(), None)
            with warnings.catch_warnings():  # PySide6 warns when a signal had no connection
                warnings.simplefilter("ignore", RuntimeWarning)
                try:
                    sig.disconnect()
                except (RuntimeError, TypeError, AttributeError):
                    pass
