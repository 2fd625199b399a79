"""Where a sweep's trials run: the executor protocol shared by the local runner and the Ray backend.

An executor trains each :class:`Trial` into an ordinary run folder of the workspace and reports each end through
``on_done``. ``stop`` set: no new trial starts, running ones end ``cancelled`` after their current batch.
Optional keywords: ``on_epoch(trial, event)`` for each epoch end, a non-empty string returned stops that trial with
that reason (an Optuna pruner; an executor that cannot follow epochs ignores it); ``on_start(trial, run_dir)`` once
a trial's run folder exists; ``on_many([TrialEnd, ...])`` for trials that end at once, recorded in one write
(:func:`report`).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from ..config import ExperimentConfig


@dataclass(frozen=True)
class Trial:
    """Trial ``number`` (0-based, in the sweep's order) of sweep ``sweep_id`` with its ``config``; ``group``: the
    sweep's number of the group it trains in (trials of one run call with the same ``group`` train together in one
    process, training/group.py; None: alone), planned by sweep/runner.py (sweep/groups.py)."""

    sweep_id: str
    number: int
    config: ExperimentConfig
    group: int | None = None


@dataclass(frozen=True)
class TrialEnd:
    """How a trial ended: ``state`` a final state of runs/states.py; ``run_dir`` its run folder (None when it never
    started one); ``message`` the reason of a failure or cancel."""

    trial: Trial
    state: str
    run_dir: str | None
    message: str = ""


class TrialExecutor(Protocol):
    """Runs trials (see the module docstring)."""

    def run(self, trials: Sequence[Trial], on_done: Callable[[TrialEnd], None], stop: threading.Event,
            on_epoch: Callable[[Trial, object], str | None] | None = None,
            on_start: Callable[[Trial, str], None] | None = None,
            on_many: Callable[[list[TrialEnd]], None] | None = None) -> None:
        ...


def report(ends: Sequence[TrialEnd], on_done: Callable[[TrialEnd], None],
           on_many: Callable[[list[TrialEnd]], None] | None = None) -> None:
    """Hand ``ends`` to the sweep: one call of ``on_many`` when given (one write of sweep.json for them all), else
    ``on_done`` for each."""
    if not ends:
        return
    if on_many is not None:
        on_many(list(ends))
    else:
        for end in ends:
            on_done(end)
