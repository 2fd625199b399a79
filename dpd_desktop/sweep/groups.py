"""A sweep's trials in groups that train together (training/group.py): the group size and the plan.

The group size (spec.py ``parse_group_size``) is ``auto`` (each trial's :func:`~dpd_desktop.training.group_plan.default_group_size`: 8 in ``fast`` mode
and 4 in ``reference`` mode on a CUDA device, 1 on the CPU, where a group gains nothing) or a positive integer (the
most members of one group). Trials whose configurations share a :func:`~dpd_desktop.training.group_plan.group_key` (the
same family, shape, data, device and mode; they may differ in seed, learning rate, weight decay…) form groups of at
most that size, in trial order (:func:`~dpd_desktop.training.group_plan.plan_groups`); a group of one trains alone.
"""
from __future__ import annotations

from typing import Sequence

from ..config import ExperimentConfig
from ..training.group_plan import default_group_size, plan_groups
from .spec import AUTO

def plan_trial_groups(configs: Sequence[ExperimentConfig], group_size) -> list[list[int]]:
    """Indices of ``configs`` in groups (see the module docstring), ordered by their first member; ``group_size``
    ``"auto"`` or an int >= 1."""
    if group_size != AUTO:
        return plan_groups(configs, int(group_size))
    by_size: dict[int, list[int]] = {}
    for i, cfg in enumerate(configs):
        by_size.setdefault(default_group_size(cfg), []).append(i)
    groups = []
    for size, idx in by_size.items():
        groups += [[idx[j] for j in g] for g in plan_groups([configs[i] for i in idx], size)]
    return sorted(groups, key=lambda g: g[0])


def largest_group(configs: Sequence[ExperimentConfig], group_size) -> int:
    """The most members a group of ``configs`` may have (``auto``: the largest default size among them)."""
    if group_size != AUTO:
        return int(group_size)
    return max((default_group_size(c) for c in configs), default=1)
