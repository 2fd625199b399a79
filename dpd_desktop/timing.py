"""Wall-clock marks for benchmarks, and :class:`Throttle`, the rate limit of every progress update.

Marks: with ``DPD_DESKTOP_TIMING=PATH`` each mark appends one JSON line ``{"mark": name, "t": unix seconds, "th":
thread name, ...}`` to PATH (read once at import); without it, :func:`mark` does nothing. Used by
benchmarks/bench_gpu.py and benchmarks/profile_startup.py for "process start → first batch" breakdowns."""
from __future__ import annotations

import json
import math
import os
import threading
import time

TIMING_FILE = os.environ.get("DPD_DESKTOP_TIMING")


def mark(name: str, **kw) -> None:
    """Append one mark (no-op unless ``DPD_DESKTOP_TIMING`` is set)."""
    if TIMING_FILE:
        with open(TIMING_FILE, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"mark": name, "t": time.time(), "th": threading.current_thread().name, **kw}) + "\n")


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
