"""Wall-clock marks for benchmarks. Production code calls :func:`mark`; the installed profiler decides what a mark
does: nothing by default; a :class:`Recorder`, which a benchmark installs (:func:`install`; benchmarks/timed.py),
appends one JSON line ``{"mark": name, "t": unix seconds, "th": thread name, ...}`` per mark to its file."""
from __future__ import annotations

import json
import threading
import time


class Profiler:
    """The default profiler: a mark does nothing."""

    recording = False

    def mark(self, name: str, **fields) -> None:
        pass


class Recorder(Profiler):
    """Appends each mark to ``path`` (JSON lines, see the module docstring)."""

    recording = True

    def __init__(self, path):
        self.path = str(path)

    def mark(self, name: str, **fields) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"mark": name, "t": time.time(), "th": threading.current_thread().name, **fields})
                     + "\n")


_profiler: Profiler = Profiler()


def install(profiler: Profiler) -> None:
    """Make ``profiler`` the one that every mark of this process goes to."""
    global _profiler
    _profiler = profiler


def mark(name: str, **fields) -> None:
    """One mark on the installed profiler."""
    _profiler.mark(name, **fields)


def recording() -> bool:
    """Whether the installed profiler records (a benchmark's extra timing work is done only then)."""
    return _profiler.recording
