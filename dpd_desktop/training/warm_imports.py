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
    """Import what the first epoch end and the end of the run need (scipy.signal, h5py) on a daemon thread
    while the GPU trains, so that neither the first evaluation nor the results file waits for an import. The GIL
    switch interval is WARM_IMPORT_SWITCH_S meanwhile (left alone when another warm-up has lowered it already)."""

    def work():
        # Never a traceback from this thread: the process may exit (Ctrl+C, os._exit) in the middle of an import,
        # and a failed warm-up only means the import happens later, where it is needed.
        try:
            previous = sys.getswitchinterval()
            lower = previous > WARM_IMPORT_SWITCH_S
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

    def once():
        global _running, _done
        try:
            work()
            _done = True
        finally:
            with _lock:
                _running = False

    global _running
    with _lock:  # once per process: a group's members start theirs together, and imports are the process's
        if _running or _done:
            return
        _running = True
    threading.Thread(target=once, name="dpd-warm-imports", daemon=True).start()
