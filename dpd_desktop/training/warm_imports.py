"""The first epoch's lazy imports, done early on a daemon thread (the trainer starts it after the first replay)."""
from __future__ import annotations

import threading

from .. import timing


def warm_imports_in_background() -> None:
    """Import what the first epoch end and the end of the run need (scipy.signal, h5py) on a daemon thread
    while the GPU trains, so that neither the first evaluation nor the results file waits for an import."""

    def work():
        # Never a traceback from this thread: the process may exit (Ctrl+C, os._exit) in the middle of an import,
        # and a failed warm-up only means the import happens later, where it is needed.
        try:
            for name in ("scipy.signal", "scipy.fft", "h5py"):
                try:
                    __import__(name)
                except ImportError:
                    pass
            timing.mark("warm_imports_done")
        except BaseException:  # noqa: BLE001
            pass

    threading.Thread(target=work, name="dpd-warm-imports", daemon=True).start()
