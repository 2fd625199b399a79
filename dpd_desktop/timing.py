"""Wall-clock marks for benchmarks: with ``DPD_DESKTOP_TIMING=PATH`` each mark appends one JSON line
``{"mark": name, "t": unix seconds, "th": thread name, ...}`` to PATH (read once at import). Without it, :func:`mark` does nothing.
Used by benchmarks/bench_gpu.py and benchmarks/profile_startup.py for "process start → first batch" breakdowns."""
from __future__ import annotations

import json
import os
import threading
import time

TIMING_FILE = os.environ.get("DPD_DESKTOP_TIMING")


def mark(name: str, **kw) -> None:
    """Append one mark (no-op unless ``DPD_DESKTOP_TIMING`` is set)."""
    if TIMING_FILE:
        with open(TIMING_FILE, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"mark": name, "t": time.time(), "th": threading.current_thread().name, **kw}) + "\n")
