"""The first epoch's lazy imports, done early on a daemon thread (the trainer starts it after the first replay)."""
from __future__ import annotations

import sys
import threading

from .. import timing

#: Python's GIL switch interval while the warm imports run (default 5 ms; restored after): the training loop gets the
#: GIL back within ~50 µs of asking (benchmarks/results/2026-12-04-notes-training.md).
WARM_IMPORT_SWITCH_S = 5e-5
_lock = threading.Lock()
_running = False  # a warm-up thread is at work
_done = False  # a warm-up finished (every later call returns at once)


def warm_imports_in_background() -> None:
    """Import what the first epoch end and the end of the run need (scipy.signal, h5py) on a daemon thread, once
    per process, while the GPU trains; the GIL switch interval is WARM_IMPORT_SWITCH_S meanwhile."""
    global _running
    with _lock:
        if _running or _done:
            return
        _running = True
    threading.Thread(target=_warm, name="dpd-warm-imports", daemon=True).start()


def _warm() -> None:
    global _running, _done
    # never a traceback from this thread: the process may exit mid-import; a failure only defers the import
    try:
        previous = sys.getswitchinterval()
        lower = previous > WARM_IMPORT_SWITCH_S  # left alone when another warm-up has lowered it already
        if lower:
            sys.setswitchinterval(WARM_IMPORT_SWITCH_S)
        try:
            for name in ("scipy.signal", "scipy.fft", "h5py"):
                try:
                    __import__(name)
                except ImportError:
                    pass
        finally:
            if lower:
                sys.setswitchinterval(previous)
        timing.mark("warm_imports_done")
    except BaseException:  # noqa: BLE001
        pass
    finally:
        with _lock:
            _done, _running = True, False
