"""The bitwise check the fused training steps share (tests/gpu/test_fused_step.py, test_fused_dpd_step.py): one set of
members stepped as a group, each stepped alone, and the group stepped from a CUDA graph must give the same tensors.
Members are training/fast_path.py CudaGraphStep objects with their fused step prepared; CUDA only."""
from __future__ import annotations

from typing import Callable

import torch


def step_tensors(s, steps: int) -> list[torch.Tensor]:
    """What a member's steps leave: each trainable parameter, its gradient and AdamW moments, the first ``steps``
    epoch losses and the step counter."""
    st = s.optimizer.state
    out = []
    for p in s.trainable:
        out += [p, p.grad, st[p]["exp_avg"], st[p]["exp_avg_sq"]]
    return out + [s.epoch_losses[:steps], s.counter]


def assert_bitwise(a, b, steps: int) -> None:
    for x, y in zip(step_tensors(a, steps), step_tensors(b, steps), strict=True):
        assert torch.equal(x, y)


def three_ways(make: Callable[[], list], step_cls, steps: int, group: Callable[[list], object] | None = None):
    """``(together, alone, replayed)``: three fresh sets of members from ``make()``, stepped ``steps`` times as one
    group (``group(members)``, default ``step_cls(members)``), each alone (``step_cls([member])``), and as one
    ``step_cls`` group captured once in a CUDA graph and replayed; asserts every member counted ``steps`` steps and
    is bitwise equal in all three."""
    together = make()
    f = (group or step_cls)(together)
    for _ in range(steps):
        f.launch()
    alone = make()
    for s in alone:
        one = step_cls([s])
        for _ in range(steps):
            one.launch()
    replayed = make()
    fr = step_cls(replayed)
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.graph(graph, stream=side):
        fr.launch()
    for _ in range(steps):
        graph.replay()
    torch.cuda.synchronize()
    for a, b, c in zip(together, alone, replayed, strict=True):
        assert int(a.counter) == steps
        assert_bitwise(a, b, steps)
        assert_bitwise(a, c, steps)
    return together, alone, replayed
