"""One timing of CUDA-graph replays for the GPU benchmarks (bench_gpu.py, bench_kernels.py, probe_group_step.py)."""
from __future__ import annotations

from typing import Callable

import torch


def replay_us(graph, n: int, warmup: int = 20, reset: Callable[[], None] | None = None) -> float:
    """µs per replay of ``graph``: ``warmup`` replays, then ``n`` timed back to back with CUDA events. ``reset``
    (e.g. zeroing a captured step's batch counter) runs before the warm-up and again before the timed replays, so
    that neither reads past the epoch's batches."""
    if reset is not None:
        reset()
    for _ in range(warmup):
        graph.replay()
    if reset is not None:
        reset()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n):
        graph.replay()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) * 1000.0 / n
