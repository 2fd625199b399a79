"""Running a sweep: its pending trials through an executor, each end recorded in sweep.json (sweep/store.py).

:func:`create_sweep` makes the folder (grid / random: every trial at once; Optuna: each as it is drawn).
:meth:`SweepRun.run` runs the trials not done, on the calling thread, until done or stopped (``stop``, or ``sweep
cancel`` from another process through sweep.json): running trials end ``cancelled`` after their batch. The sweep
ends ``succeeded`` when every trial is done and one succeeded, ``failed`` when none did or a trial's process was
lost (it reads interrupted; resume runs it again), ``cancelled`` when stopped.

Before a pass :func:`prepare_pass` cancels the sweep's stale queued entries, resets the trials to run again (an old
run id that holds a run goes to ``attempts``) and removes the sweep's own empty reserved run folders. The trials of
a pass are planned into groups (:meth:`SweepRun.grouped`, ``spec.group_size``) before the executor gets them.
"""
from __future__ import annotations

import math
import threading
from dataclasses import replace
from pathlib import Path
from typing import Callable

from ..lab.queue import RunQueue
from ..runs.record import RecordError, RunRecord
from ..runs.workspace import Workspace
from ..training.errors import TrainingError
from ..training.pa_check import check_pa_record
from .executor import Trial, TrialEnd, TrialExecutor
from .groups import plan_trial_groups
from .spec import SweepSpec, expand, trial_config
from .store import SweepError, SweepInfo, SweepStore, trial_done

CANCEL_POLL_S = 0.5
#: a run stopped by its own time limit ends cancelled with this message: training/limits.py TIME_LIMIT_REASON (not
#: imported: training/ brings PyTorch, and the window imports this module before its first paint)
TIME_LIMIT_REASON = "time limit"


def create_sweep(workspace: Workspace, spec: SweepSpec, check: bool = True,
                 fingerprints: dict | None = None) -> SweepInfo:
    """A new sweep folder with its trials (grid / random) or none yet (Optuna). ``check``: refuse, before anything
    is created, a trial device this machine does not have (:func:`check_devices`; off for a Ray cluster's sweep)
    and a PA run that the trials would refuse (:func:`check_pa_runs`, with ``fingerprints``). Raises SweepError."""
    trials = expand(spec) if spec.search != "optuna" else []
    if check:
        configs = _trial_configs(spec)  # once for both checks (a grid of 10,000: 10,000 validations each)
        check_devices(spec, workspace.root / "sweeps", configs)
        check_pa_runs(spec, workspace, configs, fingerprints)
    return SweepStore(workspace.root).create(spec, trials)


def _trial_configs(spec: SweepSpec) -> list:
    """Every trial's configuration (grid / random), or one per device of an Optuna sweep, for the checks."""
    if spec.search != "optuna":
        return [trial_config(spec, p, "check", i) for i, p in enumerate(expand(spec))]
    return [trial_config(spec, {}, "check", i) for i in range(max(1, len(spec.devices)))]


def check_pa_runs(spec: SweepSpec, workspace: Workspace, configs: list | None = None,
                  fingerprints: dict | None = None) -> None:
    """Raise SweepError (naming ``pa_run``) when a DPD trial's PA run would refuse it: not in ``workspace``, not a
    PA run, unfinished or failed, without its ``best.pt``, or (``fingerprints``: dataset reference → fingerprint of
    the datasets checked here) trained on another dataset than the trial's. Refused before the sweep exists, not as
    a failure of every trial; the checks are training/pa_check.py's, as ``train-dpd`` makes them. ``configs``: the
    trials' configurations when already made."""
    seen = set()
    for cfg in configs if configs is not None else _trial_configs(spec):
        if cfg.step != "dpd" or not cfg.pa_run:
            continue
        fp = (fingerprints or {}).get(cfg.dataset)
        key = (cfg.pa_run, fp, cfg.allow_dataset_mismatch)
        if key in seen:
            continue
        seen.add(key)
        try:
            check_pa_record(workspace, cfg.pa_run, fp, Path(str(cfg.dataset)).name, str(cfg.dataset),
                            cfg.allow_dataset_mismatch)
        except TrainingError as exc:  # "pa_run: …" (the option --pa-run, or [base] pa_run of a spec)
            text = str(exc).removeprefix("pa_run: ")
            raise SweepError("pa_run", f"{text} (option --pa-run); the sweep was not started") from exc


def trial_devices(spec: SweepSpec, configs: list | None = None) -> list[str]:
    """The devices the sweep's trials train on, in first-use order (``spec.devices`` in turn, a searched
    ``device``, else the base config's)."""
    return list(dict.fromkeys(c.device for c in (configs if configs is not None else _trial_configs(spec))))


def check_devices(spec: SweepSpec, where, configs: list | None = None) -> None:
    """Raise SweepError (naming ``where`` and ``devices``) for a trial device this machine does not have
    (training/device.py ``resolve_device``: a missing CUDA device)."""
    devices = [d for d in trial_devices(spec, configs) if d not in ("auto", "cpu")]
    if not devices:
        return
    # imported here, not at the top: training/device.py brings PyTorch (~1 s), and the window imports this module
    # for its Sweep view before its first paint (tests/gui/test_window_startup.py); a CUDA device needs torch anyway
    from ..training.device import resolve_device

    for d in devices:
        try:
            resolve_device(d)
        except TrainingError as exc:
            raise SweepError(where, f"{exc} — the sweep was not started", "devices") from exc


def _is_empty_dir(path: Path) -> bool:
    try:
        return path.is_dir() and not any(path.iterdir())
    except OSError:
        return False


def prepare_pass(store: SweepStore, sweep_id: str) -> SweepInfo:
    """Before a pass of a sweep that is not running (see the module docstring): cancel its stale queued entries,
    reset the trials to run again, remove its own empty reserved run folders. Returns the sweep as written."""
    with RunQueue(store.root) as q:
        for e in q.entries():
            tag = e.config.extra.get("sweep") if isinstance(e.config.extra, dict) else None
            if e.state == "queued" and isinstance(tag, dict) and tag.get("id") == sweep_id:
                q.cancel(e.id)

    def ch(doc):
        for t in doc.get("trials", []):
            if trial_done(t):
                continue
            kept = []
            for rid, rdir in [(a, None) for a in t.get("attempts", [])] + [(t.get("run_id"), t.get("run_dir"))]:
                if not rid:
                    continue
                folder = Path(rdir) if rdir else store.root / "runs" / rid
                if _is_empty_dir(folder):  # a reserved folder no run came into: the sweep's own, recorded here
                    try:
                        folder.rmdir()
                    except OSError:
                        pass
                    continue
                if folder.is_dir() and rid not in kept:
                    kept.append(rid)
            t.update(attempts=kept, run_id=None, run_dir=None, value=None, state="queued", message="", group=None)
    return store.update(sweep_id, ch)


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
        from .local import LocalExecutor

        if isinstance(self.executor, LocalExecutor):  # on this machine: its devices must exist here
            check_devices(self.spec, self.info.folder / "sweep.json")
        prepare_pass(self.store, self.id)
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
                self.executor.run(self.grouped([self.trial(t["number"], t["params"]) for t in pending]), self.record,
                                  self.stop, on_epoch=self.on_epoch, on_start=self.on_start,
                                  on_many=self.record_many)
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
        limited = sum(bool(t.get("time_limited")) for t in trials)
        lost = sum(t["state"] in ("interrupted", "running", "queued") for t in trials if not trial_done(t))
        n_done = sum(trial_done(t) for t in trials)
        succeeded = sum(t["state"] == "succeeded" for t in trials)
        extra = ([f"{pruned} pruned"] if pruned else []) + ([f"{limited} stopped by their time limit"] if limited else [])
        if complete and trials and not (succeeded or limited):  # a time-limited trial keeps its best checkpoint
            info = self.store.finish(self.id, "failed", "no trial succeeded: " + ", ".join(
                [f"{_trials(len(trials))} done", f"{failed} failed", *extra]))
        elif complete:
            parts = [f"{_trials(len(trials))} done"] + ([f"{failed} failed"] if failed else []) + extra
            info = self.store.finish(self.id, "succeeded", ", ".join(parts))
        else:
            total = self.spec.trials if self.spec.search == "optuna" else len(trials)
            left = "(sweep resume runs the others)"
            if self.stop.is_set():
                info = self.store.finish(self.id, "cancelled", f"cancelled: {n_done} of {_trials(total)} done {left}")
            elif not lost:  # the trials not done were cancelled one by one (queue cancel): no process was lost
                info = self.store.finish(self.id, "cancelled", f"{n_done} of {_trials(total)} done; the others were "
                                                               f"cancelled {left}")
            else:  # not stopped, yet some trial did not finish (its process was killed: interrupted)
                info = self.store.finish(self.id, "failed", f"{n_done} of {_trials(total)} done; the others did not "
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

    def grouped(self, trials: list[Trial]) -> list[Trial]:
        """``trials`` with their groups (``spec.group_size``, sweep/groups.py): each group of two or more takes the
        sweep's next free group number, recorded in sweep.json; a trial alone has group None."""
        plan = plan_trial_groups([t.config for t in trials], self.spec.group_size)
        used = [t.get("group") for t in self.store.open(self.id).trials if isinstance(t.get("group"), int)]
        number = max(used, default=-1) + 1
        out, groups = list(trials), {t.number: None for t in trials}
        for g in plan:
            if len(g) < 2:
                continue
            for i in g:
                out[i] = replace(trials[i], group=number)
                groups[trials[i].number] = number
            number += 1
        self._changed(self.store.set_groups(self.id, groups))
        return out

    def on_start(self, trial: Trial, run_dir: str) -> None:
        """A trial's run folder exists: sweep.json names it (state running)."""
        self._changed(self.store.set_trial(self.id, trial.number, state="running", run_id=Path(run_dir).name,
                                           run_dir=run_dir, message="", value=None))

    def on_epoch(self, trial: Trial, ev) -> str | None:
        """No pruning in a grid or random sweep (sweep/optuna_search.py prunes)."""
        return None

    def record(self, end: TrialEnd) -> None:
        """Write a trial's end into sweep.json."""
        self.record_many([end])

    def record_many(self, ends: list[TrialEnd]) -> None:
        """Write several trials' ends into sweep.json, in one write (a stop cancels every queued trial at once)."""
        changes = {}
        for end in ends:
            pruned = end.state == "cancelled" and end.message.startswith("pruned by the sweep")
            limited = end.state == "cancelled" and end.message.startswith(TIME_LIMIT_REASON)
            changes[end.trial.number] = dict(
                state=end.state, run_dir=end.run_dir, run_id=Path(end.run_dir).name if end.run_dir else None,
                message=end.message, value=best_value(end.run_dir, self.spec.metric), pruned=pruned,
                time_limited=limited)
        if changes:
            self._changed(self.store.set_trials(self.id, changes))


def _trials(n: int) -> str:
    """``"1 trial"``, ``"4 trials"``."""
    return f"{n} trial" + ("" if n == 1 else "s")
