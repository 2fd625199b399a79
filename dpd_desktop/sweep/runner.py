"""Running a sweep: its pending trials through an executor, each end recorded in sweep.json (sweep/store.py).

:func:`create_sweep` makes the folder (a grid or random sweep lists every trial at once; an Optuna sweep adds each
when its sampler draws it). :func:`run_sweep` runs the trials that are not done (all of a new sweep; after a cancel
or an interruption only those that did not finish), on the calling thread; ``stop`` or a ``sweep cancel`` from
another process (sweep.json ``cancel_requested``, polled) stops it: running trials end ``cancelled`` after their
current batch, finished trials stay as they are. The sweep ends ``succeeded`` when every trial is done (some may have
failed: the message counts them), ``cancelled`` when stopped before, else ``failed`` (a trial's process was killed:
it reads interrupted, and resume runs it again).
"""
from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Callable

from ..runs.record import RecordError, RunRecord
from ..runs.workspace import Workspace
from .executor import Trial, TrialEnd, TrialExecutor
from .spec import SweepSpec, expand, trial_config
from .store import SweepError, SweepInfo, SweepStore, trial_done

CANCEL_POLL_S = 0.5


def create_sweep(workspace: Workspace, spec: SweepSpec) -> SweepInfo:
    """A new sweep folder with its trials (grid / random) or none yet (Optuna)."""
    trials = expand(spec) if spec.search != "optuna" else []
    return SweepStore(workspace.root).create(spec, trials)


def best_value(run_dir: str | None, metric: str) -> float | None:
    """The lowest finite ``metric`` of a run's history.csv (None when it has none)."""
    if not run_dir:
        return None
    try:
        rows = RunRecord.open(run_dir).history()
    except (RecordError, OSError):
        return None
    vals = []
    for row in rows:
        try:
            v = float(row.get(metric))
        except (TypeError, ValueError):
            continue
        if math.isfinite(v):
            vals.append(v)
    return min(vals) if vals else None


class SweepRun:
    """One pass of a sweep in this process: ``run()``; ``on_change(info)`` after each change of sweep.json."""

    def __init__(self, workspace: Workspace, sweep_id: str, executor: TrialExecutor | None = None,
                 stop: threading.Event | None = None, on_change: Callable[[SweepInfo], None] | None = None):
        from .local import LocalExecutor

        self.workspace = workspace
        self.store = SweepStore(workspace.root)
        self.info = self.store.open(sweep_id)
        self.id = self.info.id
        self.spec = self.info.spec
        self.executor = executor or LocalExecutor(workspace)
        self.stop = stop or threading.Event()
        self.on_change = on_change

    def run(self) -> SweepInfo:
        """Run the pending trials; returns the final sweep. Raises SweepError for a sweep that runs elsewhere or
        whose trials are all done."""
        if self.info.state == "running":
            raise SweepError(self.info.folder / "sweep.json", "is running in another process (pid "
                             f"{(self.info.doc.get('owner') or {}).get('pid')}); sweep cancel stops it", "state")
        if self.spec.search != "optuna" and all(trial_done(t) for t in self.info.trials):
            raise SweepError(self.info.folder / "sweep.json", "every trial is done: nothing to resume", "trials")
        self._changed(self.store.set_running(self.id))
        done = threading.Event()
        watcher = threading.Thread(target=self._watch_cancel, args=(done,), name="dpd-sweep-cancel", daemon=True)
        watcher.start()
        try:
            if self.spec.search == "optuna":
                from .optuna_search import run_optuna  # optuna (0.2 s) only for its sweeps

                run_optuna(self)
            else:
                pending = [t for t in self.store.open(self.id).trials if not trial_done(t)]
                self.executor.run([self.trial(t["number"], t["params"]) for t in pending], self.record, self.stop,
                                  on_epoch=self.on_epoch, on_start=self.on_start)
        except BaseException as exc:
            done.set()
            self._changed(self.store.finish(self.id, "failed", f"the sweep stopped: {exc}"))
            raise
        done.set()
        watcher.join()
        return self._finish()

    def _finish(self) -> SweepInfo:
        info = self.store.open(self.id)
        trials = info.trials
        complete = all(trial_done(t) for t in trials) and (self.spec.search != "optuna"
                                                           or len(trials) >= (self.spec.trials or 0))
        failed = sum(t["state"] == "failed" for t in trials)
        pruned = sum(bool(t.get("pruned")) for t in trials)
        n_done = sum(trial_done(t) for t in trials)
        if complete:
            parts = [f"{len(trials)} trials done"] + ([f"{failed} failed"] if failed else []) + \
                    ([f"{pruned} pruned"] if pruned else [])
            info = self.store.finish(self.id, "succeeded", ", ".join(parts))
        else:
            total = self.spec.trials if self.spec.search == "optuna" else len(trials)
            left = "(sweep resume runs the others)"
            if self.stop.is_set():
                info = self.store.finish(self.id, "cancelled", f"cancelled: {n_done} of {total} trials done {left}")
            else:  # not stopped, yet some trial did not finish (its process was killed: interrupted)
                info = self.store.finish(self.id, "failed", f"{n_done} of {total} trials done; the others did not "
                                                            f"finish {left}")
        self._changed(info)
        return info

    def _watch_cancel(self, done: threading.Event) -> None:
        while not done.wait(CANCEL_POLL_S):
            if self.store.cancel_requested(self.id):
                self.stop.set()
                return

    def _changed(self, info: SweepInfo) -> None:
        self.info = info
        if self.on_change is not None:
            self.on_change(info)

    # ------------------------------------------------------------------------------------------------ trials
    def trial(self, number: int, params: dict) -> Trial:
        return Trial(self.id, number, trial_config(self.spec, params, self.id, number))

    def on_start(self, trial: Trial, run_dir: str) -> None:
        """A trial's run folder exists: sweep.json names it (state running)."""
        self._changed(self.store.set_trial(self.id, trial.number, state="running", run_id=Path(run_dir).name,
                                           run_dir=run_dir, message=""))

    def on_epoch(self, trial: Trial, ev) -> str | None:
        """No pruning in a grid or random sweep (sweep/optuna_search.py prunes)."""
        return None

    def record(self, end: TrialEnd) -> None:
        """Write a trial's end into sweep.json."""
        pruned = end.state == "cancelled" and end.message.startswith("pruned by the sweep")
        value = best_value(end.run_dir, self.spec.metric)
        self._changed(self.store.set_trial(
            self.id, end.trial.number, state=end.state, run_dir=end.run_dir,
            run_id=Path(end.run_dir).name if end.run_dir else None, message=end.message, value=value,
            pruned=pruned))
