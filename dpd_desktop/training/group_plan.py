"""Which trials train together as one group (training/group.py ``TrainerGroup``), without PyTorch: a sweep's parent
plans its groups before its child imports PyTorch to train them (sweep/groups.py)."""
from __future__ import annotations

from dataclasses import fields
from typing import Sequence

from ..config import ExperimentConfig

__all__ = ["MAY_DIFFER", "DEFAULT_SIZE", "group_key", "default_group_size", "plan_groups"]

#: configuration fields in which the members of one group may differ
MAY_DIFFER = frozenset({"seed", "lr", "lr_end", "decay_factor", "patience", "weight_decay", "grad_clip", "name",
                        "preview_every", "lr_schedule", "warmup_epochs", "plateau_threshold",
                        "plateau_threshold_mode"})
#: default group sizes on a CUDA device (benchmarks/results/2026-12-04-notes-training.md)
DEFAULT_SIZE = {"fast": 8, "reference": 4}


def group_key(cfg: ExperimentConfig) -> tuple | None:
    """What must be equal for two configurations to train in one group (every field outside :data:`MAY_DIFFER`; of
    ``extra``, all but a sweep's ``sweep`` tag), or None when ``cfg`` cannot train in a group (a least-squares fit has
    no training steps; a time limit would count the whole group's time)."""
    if cfg.fit != "gradient" or cfg.time_limit_s is not None:
        return None  # a time limit counts wall-clock time, which the members of a group share: such a run trains alone
    key = []
    for f in fields(cfg):
        if f.name in MAY_DIFFER:
            continue
        value = getattr(cfg, f.name)
        if f.name == "extra" and isinstance(value, dict):  # a sweep's tag (its trial number) is no difference
            value = {k: v for k, v in value.items() if k != "sweep"}
        key.append((f.name, repr(value)))
    return tuple(key)


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
