"""Where a sweep's trials run: the executor protocol shared by the local runner and the Ray backend.

A :class:`Trial` is one configuration of a sweep; an executor trains each trial into an ordinary run folder of the
workspace (written by :class:`~dpd_desktop.runs.writer.RunWriter`, so the index, browser, compare and report see
it) and reports each end through ``on_done``. ``stop`` set: no new trial starts, running ones stop after their
current batch (they end ``cancelled``).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from ..config import ExperimentConfig


@dataclass(frozen=True)
class Trial:
    """Trial ``number`` (0-based, in the sweep's order) of sweep ``sweep_id`` with its ``config``."""

    sweep_id: str
    number: int
    config: ExperimentConfig


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

    def run(self, trials: Sequence[Trial], on_done: Callable[[TrialEnd], None], stop: threading.Event) -> None:
        ...
