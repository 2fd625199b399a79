"""The core's PyTorch modules, imported on a pool thread once the window has painted.

The window's own import path is free of torch (measured on the 2-core development machine: the window painted 2.5 s
after process start with torch imported first, ~1.2 s without; benchmarks/bench_window_startup.py). Run DPD's
module (``runs.dpd_export``, with the model registry) is imported here behind the window, and the forkserver of the
run's child process (lab/supervisor.py ``start_forkserver``: PyTorch and the trainer preloaded in that process,
~3 s) is started first, so the first Start does not pay for them either. Code that needs them on another thread
calls :func:`wait_for_core` first, so that two threads never import torch at the same time.

On Windows torch is imported before Qt instead (``dpd_desktop.gui.import_torch_first``); the preload then finds it
imported and only adds the core's modules.
"""
from __future__ import annotations

import importlib
import logging
import threading
import traceback

from PySide6.QtCore import QObject, Signal

from ..lab.supervisor import start_forkserver
from .jobs import PoolJob

log = logging.getLogger("dpd_desktop.gui")

#: What the preload imports, in order: torch and Run DPD's module (the model registry, h5py). The trainer and the
#: libraries of an epoch end (scipy.signal, scipy.fft) are no longer among them: the window's runs train in a child
#: process (gui/child_worker.py) whose forkserver has them; imported here they held the GIL of the window's process
#: for another 0.5-2 s behind the first paint (0.1 s trainer, 2.0 s scipy and h5py measured on the loaded 2-core
#: machine), the time in which an early Start's first events arrive. A run that trains in this process (the tests'
#: fakes, an in-memory dataset) imports them on its own thread, after :func:`wait_for_core`.
CORE_MODULES = ("torch", "dpd_desktop.export.dpd_export")

_lock = threading.Lock()
_job: "CorePreloadJob | None" = None


#: What the window's forkserver imports besides the trainer: the PNG writer its children use after a run
#: (gui/child_plots.py: Qt's widgets and pyqtgraph). Measured on the GPU machine (DPA_160MHz, GRU-23, 4 epochs,
#: benchmarks/gui_overhead.py --path child): see benchmarks/results/2026-12-01-gpu-gui-overhead-child.md.
CHILD_PRELOAD = ("dpd_desktop.gui.export",)


class _PreloadSignals(QObject):
    done = Signal(float)  # seconds the imports took
    failed = Signal(str)  # the traceback (the run that needs torch then reports the error itself)


class CorePreloadJob(PoolJob):
    """Imports :data:`CORE_MODULES` on a pool thread. A stop request cannot interrupt an import: ``wait`` is
    bounded by the registry's shutdown."""

    name = "PyTorch preload"

    def __init__(self, modules=CORE_MODULES, forkserver: bool = True):
        super().__init__()
        self.modules = tuple(modules)
        self.forkserver = forkserver
        self.signals = _PreloadSignals()
        self.error: str | None = None

    def work(self) -> None:
        import time

        t0 = time.perf_counter()
        if self.forkserver:
            try:  # first: the first Start's child comes from it (gui/child_worker.py), its imports run over there
                start_forkserver(CHILD_PRELOAD)
            except Exception:  # noqa: BLE001 - the first run's start starts it again (and reports a failure)
                log.warning("the children's forkserver did not start:\n%s", traceback.format_exc())
        try:
            for name in self.modules:
                importlib.import_module(name)
        except Exception:  # noqa: BLE001 - reported; whoever needs the module imports it again and raises
            self.error = traceback.format_exc()
            self.signals.failed.emit(self.error)
            return
        self.signals.done.emit(time.perf_counter() - t0)


def start_preload(jobs=None, modules=CORE_MODULES) -> CorePreloadJob:
    """Start the preload once per process (later calls return the first job); ``jobs``: a JobRegistry that keeps
    it until it ends (so that closing the window waits for it instead of tearing down a half-imported torch)."""
    global _job
    with _lock:
        if _job is None:
            _job = CorePreloadJob(modules)
            if jobs is not None:
                jobs.add(_job)
            _job.submit()
        elif jobs is not None and not _job.is_done():
            jobs.add(_job)
        return _job


def wait_for_core(timeout_ms: int = 120_000) -> bool:
    """Block (on a worker thread) until a started preload has ended; True when none was started or it ended."""
    job = _job
    return True if job is None else job.wait(timeout_ms)


def preload_job() -> CorePreloadJob | None:
    """The preload of this process, None before :func:`start_preload`."""
    return _job
