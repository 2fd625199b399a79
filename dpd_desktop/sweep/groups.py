"""A sweep's trials in groups that train together (training/group.py): the group size and the plan.

The group size is ``auto`` (each trial's :func:`~dpd_desktop.training.group_plan.default_group_size`: 8 in ``fast`` mode
and 4 in ``reference`` mode on a CUDA device, 1 on the CPU, where a group gains nothing) or a positive integer (the
most members of one group). Trials whose configurations share a :func:`~dpd_desktop.training.group_plan.group_key` (the
same family, shape, data, device and mode; they may differ in seed, learning rate, weight decay…) form groups of at
most that size, in trial order (:func:`~dpd_desktop.training.group_plan.plan_groups`); a group of one trains alone.
"""
from __future__ import annotations

from typing import Sequence

from ..config import ExperimentConfig
from ..training.group_plan import default_group_size, plan_groups

AUTO = "auto"
#: the most members a group may have (8 fast members already fill the H200's rate of small kernels:
#: benchmarks/results/2026-12-01-group-h200.md); more is refused as a likely typo or an out-of-memory trap
MAX_GROUP_SIZE = 64


def parse_group_size(value, source: str, key: str):
    """``value`` as a group size: ``"auto"`` or an int 1..MAX_GROUP_SIZE (a string of digits is read as one).

    Raises:
        SweepSpecError: naming ``source`` (the TOML file, "command line") and ``key`` (``sweep.group_size``,
            ``--group-size``).
    """
    from .spec import SweepSpecError  # spec.py imports this module for its validation

    if isinstance(value, str) and value.strip().lower() == AUTO:
        return AUTO
    n = value
    if isinstance(value, str) and value.strip().isdigit():
        n = int(value.strip())
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise SweepSpecError(source, key, f"expected a positive integer or \"auto\", got {value!r}")
    if n > MAX_GROUP_SIZE:
        raise SweepSpecError(source, key, f"expected at most {MAX_GROUP_SIZE} trials per group, got {n}")
    return n


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
