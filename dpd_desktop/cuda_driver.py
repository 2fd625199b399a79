"""Start the CUDA driver early, on a helper thread, while the main thread imports PyTorch (command-line start-up).

Creating a CUDA context costs ~0.1–0.3 s (``cuInit`` and the device's primary context). PyTorch does it on first
use, after its own ~3 s import. :func:`retain_primary_context_in_background` calls the driver API through ctypes
(which releases the GIL during foreign calls) on a daemon thread right at start-up: ``cuInit(0)`` and
``cuDevicePrimaryCtxRetain`` for the device the run will use. PyTorch's runtime works in that same primary context
(the CUDA runtime always uses the device's primary context), so it finds the driver initialized and the context
alive. Nothing else changes: no kernel runs, no memory is allocated, and any failure (no driver, no GPU) is
silent — PyTorch then reports it as usual. Reference: CUDA Driver API, "Primary Context Management".
"""
from __future__ import annotations

import threading


def device_index(device: str) -> int | None:
    """CUDA ordinal the run will use for a ``--device`` value ("auto" and "cuda" → 0, "cuda:N" → N), else None."""
    if device in ("auto", "cuda"):
        return 0
    if device.startswith("cuda:"):
        try:
            return int(device.split(":", 1)[1])
        except ValueError:
            return None
    return None


def retain_primary_context_in_background(device: str) -> threading.Thread | None:
    """Initialize the driver and retain the primary context of ``device`` on a daemon thread (no-op for CPU).

    Call it after any ``fork`` (a forked child must not inherit an initialized driver). Returns the thread, or None.
    """
    index = device_index(device)
    if index is None:
        return None

    def work():
        try:
            import ctypes

            lib = ctypes.CDLL("libcuda.so.1")
            if lib.cuInit(0) != 0:
                return
            dev = ctypes.c_int()
            if lib.cuDeviceGet(ctypes.byref(dev), index) != 0:
                return
            ctx = ctypes.c_void_p()
            lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)  # kept: released when the process exits
        except Exception:  # noqa: BLE001 - no driver or no such GPU: PyTorch reports it later, as usual
            pass

    t = threading.Thread(target=work, name="dpd-cuda-driver", daemon=True)
    t.start()
    return t
