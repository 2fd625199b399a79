"""What the Sweep view shows, without Qt: each trial of sweep.json joined with its run's row of the workspace index
(runs/index.py), and the Pareto front of a metric against a model cost.

:func:`sweep_table` (a pool thread's work: it syncs the index) → :class:`SweepTable`; :func:`pareto_front` marks
the points no other point beats in both coordinates (lower cost and lower metric: NMSE [dB], ACLR [dBc] and EVM are
all better lower).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ..config import ExperimentConfig
from ..runs.index import IndexedRun, RunIndex
from ..runs.workspace import Workspace
from .store import SweepInfo, SweepStore

#: the model costs on the Pareto plot's x axis: (IndexedRun attribute, label)
COSTS = (("macs_per_sample", "MACs per sample"), ("n_params", "parameters"))


@dataclass(frozen=True)
class TrialRow:
    """One trial: its sweep.json entry (``number``, ``state`` — "pruned" for a pruned trial —, ``params``,
    ``value``) and its run's index row (``run``: None before its folder exists)."""

    number: int
    state: str
    params: dict
    value: float | None
    message: str
    run: IndexedRun | None
    fields: dict  # the trial's configuration (base + params): backbone, hidden_size, lr, frame_length, seed...
    group: int | None = None  # the sweep's group number it trains in with other trials (None: alone)

    @property
    def run_id(self) -> str | None:
        return self.run.run_id if self.run is not None else None

    def metric(self, name: str) -> float | None:
        v = getattr(self.run, name, None) if self.run is not None else None
        return v if isinstance(v, (int, float)) and math.isfinite(v) else None


@dataclass(frozen=True)
class SweepTable:
    """A sweep as the view shows it: the sweep (``info``), its trial rows in trial order, every sweep's id."""

    info: SweepInfo
    rows: tuple[TrialRow, ...]
    sweep_ids: tuple[str, ...]

    def best(self) -> TrialRow | None:
        """The succeeded trial with the lowest sweep value (None before one succeeded)."""
        done = [r for r in self.rows if r.state == "succeeded" and r.value is not None and r.run is not None]
        return min(done, key=lambda r: (r.value, r.number)) if done else None

    def points(self, cost: str, metric: str, succeeded_only: bool = False) -> list[tuple[int, float, float]]:
        """(trial number, cost, metric) of the trials that have both (``succeeded_only``: of the finished ones: a
        pruned or running trial's metrics are an early epoch's, not a result on the Pareto front)."""
        out = []
        for r in self.rows:
            if succeeded_only and r.state != "succeeded":
                continue
            x, y = r.metric(cost), r.metric(metric)
            if x is not None and y is not None:
                out.append((r.number, float(x), float(y)))
        return out


def sweep_table(workspace: Workspace, sweep_id: str | None = None) -> SweepTable | None:
    """Read sweep ``sweep_id`` (None: the newest) and its runs' index rows; None when the workspace has no sweep.
    Raises SweepError for an unreadable sweep."""
    store = SweepStore(workspace.root)
    sweeps = store.list()
    if not sweeps:
        return None
    info = store.open(sweep_id) if sweep_id else sweeps[-1]
    with RunIndex.open(workspace) as idx:
        by_id = {r.run_id: r for r in idx.runs()}
    rows = []
    base = ExperimentConfig.from_dict(dict(info.spec.base)).to_dict()  # the defaults filled in (not validated)
    for t in info.trials:
        state = "pruned" if t.get("pruned") else t.get("state", "queued")
        run = by_id.get(t.get("run_id")) if t.get("run_id") else None
        if run is not None and state in ("queued", "running") and run.state != state:
            state = run.state  # the folder is the truth while sweep.json waits for the trial's end
        params = dict(t.get("params") or {})
        group = t.get("group") if isinstance(t.get("group"), int) else None
        rows.append(TrialRow(int(t["number"]), state, params, t.get("value"), t.get("message") or "", run,
                             {**base, **params}, group))
    return SweepTable(info, tuple(rows), tuple(s.id for s in sweeps))


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points that no other point dominates (another with x ≤ and y ≤, one of them <), in order
    of increasing x; equal points are all kept."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], points[i][1]))
    front, best_y = [], math.inf
    for i in order:
        x, y = points[i]
        if y < best_y or (front and points[front[-1]] == (x, y)):
            front.append(i)
            best_y = min(best_y, y)
    return front
