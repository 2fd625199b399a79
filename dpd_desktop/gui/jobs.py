"""The window's background jobs and the one registry that holds them while they run.

A job runs off the GUI thread (the global thread pool, or its own QThread for the training worker), reports back
through Qt signals, and offers ``request_stop()`` (cooperative: the job stops at its next check point),
``wait(ms) -> bool`` and ``is_done()``. :meth:`JobRegistry.shutdown` asks every live job to stop and waits for
them at most a given time in total (superqt's worker pattern: stop at each check point, a bounded wait when the
application quits); jobs still running then are kept referenced in :data:`ORPHANS` (a destroyed running QThread
aborts the process) and named in a warning.

Jobs: :class:`DatasetLoader` (a dataset file/folder or the demo), :class:`DpdExportJob` (Run DPD…),
:class:`PlotSaveJob` (PNG encoding and writing) and :class:`dpd_desktop.gui.worker.TrainingWorker`.
"""
from __future__ import annotations

import logging
import os
import threading
import time
import traceback
import warnings
from pathlib import Path

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal

from ..data import load_dataset, make_demo_dataset
from ..runs.record import RunRecord
from .export import save_images

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


# ---------------------------------------------------------------------------------------------------- Run DPD…
class _DpdExportSignals(QObject):
    done = Signal(object)  # the metadata dict of run_dpd
    failed = Signal(object, str)  # exception, traceback text


class DpdExportJob(PoolJob):
    """Runs :func:`dpd_desktop.export.dpd_export.run_dpd` (u = DPD(x) of a DPD run, written to ``out``).

    ``dataset`` (the window's loaded dataset) is passed on only when it is the run's dataset (same fingerprint);
    otherwise run_dpd reloads the dataset recorded in the run's config.json. The DPD runs on the run's own device
    type when it is available (so that u is bit for bit the scored one), else on the CPU. A stop requested before
    the job begins skips it; run_dpd itself has no check point.
    """

    name = "Run DPD"

    def __init__(self, workspace, run_dir: str | os.PathLike, out: str | os.PathLike, split: str = "test",
                 dataset=None, input_file: str | os.PathLike | None = None, overwrite: bool = False):
        super().__init__()
        self.workspace = workspace
        self.overwrite = overwrite  # the save dialog asked before replacing an existing file
        self.run_dir = str(run_dir)
        self.out = str(out)
        self.split = split
        self.dataset = dataset
        self.input_file = str(input_file) if input_file is not None else None  # a waveform file instead of a split
        self.signals = _DpdExportSignals()

    @staticmethod
    def _device(recorded: dict) -> str:
        """The run's own device type when this machine has it (so that u is bit for bit the scored one), else cpu."""
        import torch  # imported by then (below); the window's import path stays free of torch (gui/preload.py)

        dev = str(recorded.get("device", "cpu"))
        return "cuda" if dev.startswith("cuda") and torch.cuda.is_available() else "cpu"

    def work(self) -> None:
        if self.stop_requested:
            return
        try:
            from .preload import wait_for_core

            wait_for_core()  # never import torch on two threads at once
            from ..export.dpd_export import run_dpd  # PyTorch (~1 s): kept off the window's import path

            record = RunRecord.open(self.run_dir)
            ds = self.dataset
            want = record.dataset.fingerprint
            if ds is not None and not (want and callable(getattr(ds, "fingerprint", None))
                                       and ds.fingerprint() == want):
                ds = None
            meta = run_dpd(self.workspace, self.run_dir, out=self.out, split=self.split,
                           device=self._device(record.device), dataset=ds, input_file=self.input_file,
                           overwrite=self.overwrite)
        except Exception as exc:  # noqa: BLE001 - shown to the user in plain words
            self.signals.failed.emit(exc, traceback.format_exc())
            return
        self.signals.done.emit(meta)


# ---------------------------------------------------------------------------------------------------- PNG writer
class _PlotSaveSignals(QObject):
    done = Signal(object)  # list of written paths
    failed = Signal(object)  # the exception


class PlotSaveJob(PoolJob):
    """Encodes and writes rendered plot images (``[(file name, QImage), ...]``) as PNGs, so that the GUI thread
    never waits for the disk (:func:`dpd_desktop.gui.export.save_images`, atomic writes). A stop request does not
    interrupt it: the images of a finished run land (each file is written atomically)."""

    name = "plot PNG writer"

    def __init__(self, images, out_dir: str | os.PathLike):
        super().__init__()
        self.images = images
        self.out_dir = Path(out_dir)
        self.signals = _PlotSaveSignals()

    def work(self) -> None:
        try:
            paths = save_images(self.images, self.out_dir)
        except Exception as exc:  # noqa: BLE001 - shown in the status bar
            self.signals.failed.emit(exc)
            return
        self.signals.done.emit(paths)


# ---------------------------------------------------------------------------------------------------- the registry
class JobRegistry:
    """The live background jobs of one window. Jobs are added when they start and dropped when they end."""

    def __init__(self):
        self._jobs: list = []

    def add(self, job):
        """Register ``job`` (a PoolJob or a TrainingWorker); returns it."""
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
