"""An adaptive sweep through Optuna: its samplers draw the trials, its pruners stop poor ones early.

The study is ``<sweep folder>/optuna.sqlite``, named after the sweep, minimising ``spec.metric`` (a run's best
per-epoch value). Trials are asked in batches of (device lanes) × (group size; ``auto`` reads the first trial's
configuration) and all asked before any is told, so a group size above 1 means fewer, larger rounds for a
model-based sampler (TPE, CMA-ES). Each epoch's value goes to the pruner (``Trial.report(value, step=epoch)``); a
pruned trial ends ``cancelled`` ("pruned by the sweep at epoch N") and is told ``PRUNED``; a failed or cancelled
one is told ``FAIL``, and a cancelled one runs again on resume with the same parameters and trial number.

Samplers (seeded by ``spec.seed``): tpe, random, cmaes, qmc. Pruners: median and percentile (25) with
``n_startup_trials`` / ``n_warmup_steps``, successive-halving, hyperband (max_resource = epochs), none.
"""
from __future__ import annotations

import math

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from .executor import Trial, TrialEnd
from .groups import largest_group
from .store import OPTUNA_FILE, trial_done

PRUNED_MESSAGE = "pruned by the sweep at epoch {epoch}"


def storage_url(folder) -> str:
    return f"sqlite:///{(folder / OPTUNA_FILE).as_posix()}"


def distributions(spec) -> dict:
    """The Optuna distribution of each searched field (a list: categorical; a range: float or int, log or not)."""
    out = {}
    for p in spec.space:
        if p.values is not None:
            out[p.key] = CategoricalDistribution(list(p.values))
        elif p.integer:
            out[p.key] = IntDistribution(int(p.low), int(p.high), log=p.log)
        else:
            out[p.key] = FloatDistribution(float(p.low), float(p.high), log=p.log)
    return out


def make_sampler(spec):
    name, seed = spec.optuna.get("sampler", "tpe"), spec.seed
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed)
    if name == "qmc":
        return optuna.samplers.QMCSampler(seed=seed)
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=max(1, spec.optuna.get("n_startup_trials", 2)))


def make_pruner(spec):
    o = spec.optuna
    name = o.get("pruner", "median")
    warmup = {"n_startup_trials": o.get("n_startup_trials", 2), "n_warmup_steps": o.get("n_warmup_steps", 0)}
    if name == "median":
        return optuna.pruners.MedianPruner(**warmup)
    if name == "percentile":
        return optuna.pruners.PercentilePruner(25.0, **warmup)
    if name == "successive-halving":
        return optuna.pruners.SuccessiveHalvingPruner()
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=max(1, spec.base_config().epochs))
    return optuna.pruners.NopPruner()


def open_study(sweep_run):
    """The sweep's study (created on first use)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the sweep prints its own lines
    return optuna.create_study(storage=storage_url(sweep_run.info.folder), study_name=sweep_run.id,
                               direction="minimize", sampler=make_sampler(sweep_run.spec),
                               pruner=make_pruner(sweep_run.spec), load_if_exists=True)


def run_optuna(sweep_run) -> None:
    """Ask, run and tell until ``spec.trials`` trials are done or the sweep is stopped (see the module docstring)."""
    spec, store, sid = sweep_run.spec, sweep_run.store, sweep_run.id
    study = open_study(sweep_run)
    dists = distributions(spec)
    for ft in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):  # left by an interrupted pass
        study.tell(ft.number, state=TrialState.FAIL)
    info = store.open(sid)
    redo = [t for t in info.trials if not trial_done(t)]
    if not info.trials:
        for params in spec.optuna.get("enqueue", []):
            study.enqueue_trial(params)
    for t in redo:
        study.enqueue_trial(t["params"])
    next_number = len(info.trials)
    lanes = max(1, len(set(spec.devices)))
    size = largest_group([sweep_run.trial(next_number, {}).config], spec.group_size)
    per_batch = lanes * size
    while not sweep_run.stop.is_set():
        batch: list[tuple[Trial, optuna.trial.Trial]] = []
        while len(batch) < per_batch:
            if redo:
                number = redo.pop(0)["number"]
            elif next_number < (spec.trials or 0):
                number, next_number = next_number, next_number + 1
            else:
                break
            ot = study.ask(dists)
            sweep_run._changed(store.set_trial(sid, number, params=dict(ot.params), optuna_number=ot.number,
                                               state="queued", message=""))
            batch.append((sweep_run.trial(number, dict(ot.params)), ot))
        if not batch:
            return
        by_number = {t.number: ot for t, ot in batch}

        def on_epoch(trial: Trial, ev) -> str | None:
            ot = by_number[trial.number]
            try:
                value = float(ev.row.get(spec.metric))
            except (TypeError, ValueError):
                return None
            if not math.isfinite(value):
                return None
            ot.report(value, step=int(ev.epoch))
            if ot.should_prune():
                return PRUNED_MESSAGE.format(epoch=ev.epoch)
            return None

        def on_done(end: TrialEnd) -> None:
            sweep_run.record(end)
            ot = by_number[end.trial.number]
            t = next(t for t in store.open(sid).trials if t["number"] == end.trial.number)
            if end.state == "succeeded" and t.get("value") is not None:
                study.tell(ot, t["value"])
            elif t.get("pruned"):
                study.tell(ot, state=TrialState.PRUNED)
            else:
                study.tell(ot, state=TrialState.FAIL)

        sweep_run.executor.run(sweep_run.grouped([t for t, _ in batch]), on_done, sweep_run.stop, on_epoch=on_epoch,
                               on_start=sweep_run.on_start)
