"""Time in the package: wall-clock marks for benchmarks, and :class:`Throttle`, the rate limit of every progress
update.

Marks: production code calls :func:`mark`; it does nothing unless a benchmark installed a :class:`Recorder`
(:func:`install`; benchmarks/timed.py), which appends one JSON line ``{"mark": name, "t": unix seconds, "th": thread
name, ...}`` per mark to its file."""
from __future__ import annotations

import json
import math
import threading
import time


class Recorder:
    """The profiler that records: appends each mark to ``path`` (JSON lines, see the module docstring)."""

    def __init__(self, path):
        self.path = str(path)

    def mark(self, name: str, **fields) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"mark": name, "t": time.time(), "th": threading.current_thread().name, **fields})
                     + "\n")


_profiler: Recorder | None = None  # None: marks do nothing


def install(profiler: Recorder | None) -> None:
    """Send every mark of this process to ``profiler`` (None: marks do nothing again)."""
    global _profiler
    _profiler = profiler


def mark(name: str, **fields) -> None:
    if _profiler is not None:
        _profiler.mark(name, **fields)


def recording() -> bool:
    """Whether marks are recorded (a benchmark's extra timing work is done only then)."""
    return _profiler is not None


class Throttle:
    """Rate limit for progress updates: :meth:`ready` is true at most once every ``interval_s`` seconds of
    ``clock``, and always for the ``final`` update of a series. The first call passes, unless ``start`` (a reading of
    ``clock``) is given: then the first passes ``interval_s`` after it. ``last``: the clock reading of the last update
    let through."""

    def __init__(self, interval_s: float, *, start: float | None = None, clock=time.monotonic):
        self.interval_s, self._clock = interval_s, clock
        self.last = -math.inf if start is None else start

    def ready(self, final: bool = False) -> bool:
        now = self._clock()
        if final or now - self.last >= self.interval_s:
            self.last = now
            return True
        return False
