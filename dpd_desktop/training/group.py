"""Trials that train together: runs of one shape in one process, their full batches replayed as one CUDA graph.

A :class:`TrainerGroup` runs several ordinary :class:`~dpd_desktop.training.trainer.Trainer` s (each with its own run
folder, writer, RNG stream, evaluation and checkpoints) whose configurations differ only in the fields of
:data:`MAY_DIFFER` (seed, learning rate and its schedule, weight decay, clipping, name). On CUDA with the fast path,
the members' training steps are captured as parallel branches of one CUDA graph (one stream per member, joined at
the end) and the group replays that graph once per full batch for every member; the recurrence inside a branch runs
on the member's kernel (``reference``: cuDNN; ``fast``: ours, kernels/cuda_rnn.py). Each branch is the member's own
captured step (training/fast_path.py) on its own buffers, so a member's history and checkpoints are bitwise equal to
the same configuration trained alone in the same mode (tests/gpu/test_group_training.py; benchmarks/bench_group.py).

Isolation: the members run on threads of this process, one at a time (a baton); the global RNG states (torch CPU and
CUDA, NumPy, ``random``) are swapped in and out with the baton, so each member draws exactly the numbers it would
draw alone (reference §4.1–§4.2 order). A member that ends early (cancelled, pruned, failed, a time limit) leaves
the group; the others' graph is captured again without its branch.

Elsewhere (CPU, no fast path) the members still take turns batch by batch and train eagerly: no speed-up, the same
numbers (the CPU tests of the isolation).
"""
from __future__ import annotations

from dataclasses import fields
from typing import Sequence

from ..config import ExperimentConfig

#: configuration fields in which the members of one group may differ
MAY_DIFFER = frozenset({"seed", "lr", "lr_end", "decay_factor", "patience", "weight_decay", "grad_clip", "name",
                        "preview_every", "time_limit_s"})
#: default group sizes on a CUDA device (measured on the H200: benchmarks/results/…-group-h200.md)
DEFAULT_SIZE = {"fast": 8, "reference": 4}


def group_key(cfg: ExperimentConfig) -> tuple | None:
    """What must be equal for two configurations to train in one group (every field outside :data:`MAY_DIFFER`), or
    None when ``cfg`` cannot train in a group (a least-squares fit has no training steps)."""
    if cfg.fit != "gradient":
        return None
    return tuple((f.name, repr(getattr(cfg, f.name))) for f in fields(cfg) if f.name not in MAY_DIFFER)


def default_group_size(cfg: ExperimentConfig) -> int:
    """Members per group for ``cfg``: :data:`DEFAULT_SIZE` by kernel on a CUDA device, 1 elsewhere (on the CPU a
    group gains nothing)."""
    return DEFAULT_SIZE.get(cfg.kernel, 1) if str(cfg.device).startswith("cuda") else 1


def plan_groups(configs: Sequence[ExperimentConfig], size: int) -> list[list[int]]:
    """Indices of ``configs`` in groups of at most ``size`` members with equal :func:`group_key` (a configuration
    with key None is a group of its own), in first-appearance order; within a group, the configurations' order."""
    if size < 1:
        raise ValueError(f"group size must be at least 1, got {size}")
    open_groups: dict[tuple, list[int]] = {}
    groups: list[list[int]] = []
    for i, cfg in enumerate(configs):
        key = group_key(cfg)
        if key is None or size == 1:
            groups.append([i])
            continue
        g = open_groups.get(key)
        if g is None or len(g) >= size:
            g = open_groups[key] = []
            groups.append(g)
        g.append(i)
    return groups


class TrainerGroup:
    """Runs ``trainers`` (built as usual, each with its observers and writer; ``len >= 1``) as one group.

    :meth:`run` blocks until every member ended and returns their :class:`RunResult` s in order; it never raises for
    a member's failure (that member's result is ``failed``, the others go on). :meth:`request_cancel` (thread-safe)
    stops one member after its current batch; :meth:`cancel_all` every member.
    """

    def __init__(self, trainers: Sequence):
        if not trainers:
            raise ValueError("a group needs at least one trainer")
        self.trainers = list(trainers)

    def request_cancel(self, index: int, reason: str = "") -> None:
        self.trainers[index].request_cancel(reason)

    def cancel_all(self, reason: str = "") -> None:
        for t in self.trainers:
            t.request_cancel(reason)

    def run(self) -> list:
        return [t.run() for t in self.trainers]  # placeholder: one after another (the lockstep version follows)
