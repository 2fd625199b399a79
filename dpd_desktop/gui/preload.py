"""The core's PyTorch modules, imported on a pool thread once the window has painted.

The window's own import path is free of torch. Run DPD's module (``export.dpd_export``, with the model registry) is
imported here behind the window, and the forkserver of the runs' child processes (lab/supervisor.py
``start_forkserver``: PyTorch and the trainer preloaded in that process) is started first, so the first Start does
not pay for them either. Code that needs them on another thread calls :func:`wait_for_core` first, so that two
threads never import torch at the same time.

On Windows torch is imported before Qt instead (``dpd_desktop.gui.import_torch_first``); the preload then finds it
imported and only adds the core's modules.
"""
from __future__ import annotations

import ctypes
import gc
import importlib
import importlib.util
import logging
import os
import sys
import threading
import traceback
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from ..lab.supervisor import start_forkserver
from .jobs import PoolJob

log = logging.getLogger("dpd_desktop.gui")

#: What the preload imports, in order: torch and Run DPD's module (the model registry, h5py); the trainer is the
#: child processes' (their forkserver preloads it), never imported in the window's process.
CORE_MODULES = ("torch", "dpd_desktop.export.dpd_export")

#: torch's C++ libraries (those its ``lib/`` folder holds), loaded before ``import torch`` by
#: :func:`load_libraries`: the import's own load of them holds the GIL, which the GUI thread then waits for
#: (a GUI-thread gap of 175-190 ms → 43-45 ms on 2 cores; benchmarks/results/2026-12-04-gui-responsiveness.md).
TORCH_LIBRARIES = ("libtorch_cpu.so", "libtorch_cuda.so")

_lock = threading.Lock()
_job: "CorePreloadJob | None" = None


def load_libraries(package: str = "torch", names=TORCH_LIBRARIES) -> list[str]:
    """Load the shared libraries ``names`` of ``package``'s ``lib/`` folder with the GIL released (libc's
    ``dlopen`` through ctypes, which releases it for the call), so that the package's import finds them loaded.
    Linux only (elsewhere nothing). Returns the paths loaded; one that fails to load is logged and skipped (the
    import then reports the error)."""
    if not sys.platform.startswith("linux"):
        return []
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin:
        return []
    dlopen = ctypes.CDLL(None).dlopen
    dlopen.restype, dlopen.argtypes = ctypes.c_void_p, (ctypes.c_char_p, ctypes.c_int)
    loaded = []
    for name in names:
        path = Path(spec.origin).parent / "lib" / name
        if not path.is_file():
            continue
        if dlopen(os.fsencode(path), os.RTLD_NOW | os.RTLD_LOCAL):
            loaded.append(str(path))
        else:
            log.warning("could not preload %s", path)
    return loaded


class _PreloadSignals(QObject):
    done = Signal(float)  # seconds the imports took
    failed = Signal(str)  # the traceback (the run that needs torch then reports the error itself)


class CorePreloadJob(PoolJob):
    """Imports :data:`CORE_MODULES` on a pool thread. A stop request cannot interrupt an import: ``wait`` is
    bounded by the registry's shutdown."""

    name = "PyTorch preload"

    def __init__(self, modules=CORE_MODULES, forkserver: bool = True, importer=importlib.import_module):
        super().__init__()
        self.modules = tuple(modules)
        self.forkserver = forkserver
        self.importer = importer
        self.signals = _PreloadSignals()
        self.error: str | None = None

    def work(self) -> None:
        import time

        t0 = time.perf_counter()
        if self.forkserver:
            try:  # first: the first Start's child comes from it (gui/worker.py), its imports run over there
                start_forkserver()
            except Exception:  # noqa: BLE001 - the first run's start starts it again (and reports a failure)
                log.warning("the children's forkserver did not start:\n%s", traceback.format_exc())
        # gc off while importing, then frozen: full passes over torch's objects held the GIL (226-778 ms each)
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            if "torch" in self.modules and "torch" not in sys.modules:
                load_libraries("torch")
            for name in self.modules:
                self.importer(name)
        except Exception:  # noqa: BLE001 - reported; whoever needs the module imports it again and raises
            self.error = traceback.format_exc()
        finally:
            gc.freeze()
            if was_enabled:
                gc.enable()
        try:
            if self.error is not None:
                self.signals.failed.emit(self.error)
            else:
                self.signals.done.emit(time.perf_counter() - t0)
        except RuntimeError:  # the window (and its QApplication) closed first: no one is left to tell
            log.debug("preload ended after its signals were deleted")


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
