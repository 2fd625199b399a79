"""``dpd-desktop sweep``: grid, random and Optuna sweeps, each trial an ordinary run of the workspace (sweep/).

    dpd-desktop sweep SPEC.toml                       create the sweep and run it (spec format: README, Sweeps)
    dpd-desktop sweep --grid KEY=V1,V2 [--grid ...] [--random N | --optuna N] [--seed S] [--name NAME]
                      [--step pa|dpd] [--group-size N|auto] --base [the options of train-pa / train-dpd]
    dpd-desktop sweep list
    dpd-desktop sweep show SWEEP [--json]
    dpd-desktop sweep resume SWEEP                    run the trials that did not finish
    dpd-desktop sweep cancel SWEEP                    the running trials stop after their current batch

Before the sweep exists its datasets are inspected (cli/flags.py): an error flag refuses it unless --accept-flags
(before or after --base), which records the flags in every trial's config.json.
Trials run as queue entries (queue list shows them), each in a child process, one at a time per device lane;
trials of one shape that differ only in seed, learning rate, weight decay… train in groups of up to --group-size
(``group_size`` in the TOML; default auto: 8 in fast mode and 4 in reference mode on a CUDA device, 1 on the CPU)
in one process (training/group.py), recorded in sweep.json for ``sweep resume``; with
``--ray ADDRESS`` (or ``--ray local``) as Ray tasks on a cluster (sweep/ray_executor.py; the extra
dpd-desktop[cluster]), their run folders brought back into the workspace. sweep.json records the address; ``sweep
resume`` uses it again unless ``--ray ADDRESS`` (or ``--ray none``: this machine) is given; the override
--ray-allow-unauthenticated is never recorded.
Ctrl+C: the first stops the sweep (running trials end cancelled after their current batch; ``sweep resume`` runs
them again), the second aborts. Exit status: 0 the sweep succeeded (at least one trial succeeded; the others'
outcomes are in ``sweep show``), 1 the sweep failed (no trial succeeded, the sweep itself stopped on an error, or some
trial did not finish because its process was killed: ``sweep resume`` runs it again), 2 bad arguments or spec
(nothing created), 3 stopped (Ctrl+C or ``sweep cancel``).
"""
from __future__ import annotations

import argparse
import json
import sys
import threading

from ..config import ConfigError
from ..process import CTRL_C, Exit
from ..sweep.ray_options import LOCAL_ADDRESS, add_ray_arguments  # argparse only (0.4 ms); Ray comes with --ray
from . import flags
from .common import Outcome
from .limits import with_limit_options
from .train import add_training_options, config_from_args

ACTIONS = ("list", "show", "resume", "cancel")
#: the unit of each metric a sweep selects by (metrics/__init__.py: NMSE and EVM in dB, ACLR in dBc)
UNITS = {"VAL_NMSE": " dB", "VAL_EVM": " dB", "VAL_ACLR_AVG": " dBc", "VAL_LOSS": ""}
STOPPING = "stopping the sweep: the running trials stop after their current batch (Ctrl+C again to abort)…"


def add_parser(add) -> argparse.ArgumentParser:
    """Register ``sweep`` with cli/entry.py's ``add(name, **kw)``."""
    p = add("sweep", help="grid, random or Optuna sweep of training runs (SPEC.toml or --grid); list, show, resume, "
                          "cancel", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", nargs="?", default=None,
                   help="SPEC.toml, or an action: list, show SWEEP, resume SWEEP, cancel SWEEP")
    p.add_argument("sweep", nargs="?", default=None, help="the sweep id (show, resume, cancel)")
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                   help="a searched configuration field and its values (repeatable; e.g. hidden_size=8,16, "
                        "backbone=gru,lstm, lr=1e-3,5e-3, seed=0,1,2)")
    p.add_argument("--random", type=int, default=None, metavar="N", help="N random trials over the --grid values")
    p.add_argument("--optuna", type=int, default=None, metavar="N",
                   help="N trials drawn by Optuna's TPE sampler over the --grid values, the median pruner on")
    p.add_argument("--seed", type=int, default=0, help="the search's seed (random / optuna; default 0)")
    p.add_argument("--name", default="sweep", help="the sweep folder's label (default %(default)s)")
    p.add_argument("--step", default="pa", choices=("pa", "dpd"), help="the trials' step (default pa)")
    p.add_argument("--group-size", default=None, metavar="N|auto",
                   help="the most trials of one shape that train together in one process (default: the spec's "
                        "group_size, else auto: 8 fast / 4 reference on CUDA, 1 on the CPU)")
    p.add_argument("--json", action="store_true", help="show: sweep.json as it is")
    flags.add_accept_option(p)  # also accepted among the --base options
    p.add_argument("--base", nargs=argparse.REMAINDER, default=None,
                   help="the rest of the line: train-pa / train-dpd options of every trial (--dataset ... )")
    add_ray_arguments(p)
    _SWEEP_OPTIONS.update(opt for action in p._actions for opt in action.option_strings)
    return p


#: the sweep command's own options (filled by add_parser): one of them after --base is a misplaced sweep option
_SWEEP_OPTIONS: set[str] = set()


def handle(args, ws) -> "object":
    """Run ``sweep …``; returns an Outcome."""
    from ..sweep.spec import SweepSpecError
    from ..sweep.store import SweepError, SweepStore

    try:
        if args.target in ACTIONS:
            if args.target != "list" and not args.sweep:
                raise SweepError(ws.root / "sweeps", f"sweep {args.target}: give the sweep id (sweep list)")
            store = SweepStore(ws.root)
            if args.target in ("list", "show"):
                status = _list(store) if args.target == "list" else _show(store, args.sweep, args.json)
                sys.stdout.flush()  # a reader that closed the pipe (`| head`) is seen here: BrokenPipeError below
                return Outcome(status)
            if args.target == "cancel":
                info = store.request_cancel(args.sweep)
                print(f"sweep {info.id}: " + ("its running trials stop after their current batch"
                                              if info.state == "running" else info.state))
                return Outcome(Exit.OK)
            if getattr(args, "group_size", None) is not None:
                raise SweepSpecError("command line", "--group-size", f"sweep {args.target} keeps the group size "
                                     "recorded in sweep.json (give it when the sweep is created)")
            check_ray(args.ray, args.ray_allow_unauthenticated)
            ws.check(create=True)
            return Outcome(_run(ws, store.open(args.sweep).id, args), skip_teardown=True)
        check_ray(args.ray, args.ray_allow_unauthenticated)  # before anything is created (exit 2: nothing created)
        spec = _spec(args, ws)
        ray = (getattr(args, "ray", None) or "none").strip().lower()
        if ray == "none":
            # this machine's trials run in children of the forkserver: started now, its imports (PyTorch, the
            # trainer) overlap the datasets' check below instead of following it. Measured (bench_sweep_e2e.py,
            # benchmarks/results/2026-12-05-sweep-forkserver-early.md): 2 CPU trials on 2 cores 17.01 → 15.79 s;
            # 8 GPU trials on an H100 10.56 → 10.45 s (within its noise)
            from ..lab.supervisor import start_forkserver  # 335 ms: not for the CLI's other commands

            start_forkserver()
        fingerprints = {}
        spec = accept_datasets(spec, ws, args.accept_flags, fingerprints)
        if spec is None:
            return Outcome(Exit.USAGE)  # an error flag: nothing created
        ws.check(create=True)
        from ..sweep.runner import create_sweep

        # a cluster's devices are the cluster's; a DPD trial's PA run is checked against its dataset's fingerprint
        info = create_sweep(ws, spec, check=ray in ("none", "local"), fingerprints=fingerprints)
        print(f"sweep {info.id}: {spec.search}, {_trials(len(info.trials) or spec.trials)} → {info.folder}",
              flush=True)
        return Outcome(_run(ws, info.id, args), skip_teardown=True)
    except (SweepSpecError, SweepError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return Outcome(Exit.USAGE)
    except BrokenPipeError:  # stdout closed by its reader (`sweep show --json | head`): the command line ends quietly
        raise
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return Outcome(Exit.USAGE)
    except RayNotUsable as exc:  # nothing was sent to a cluster; the sweep stays resumable
        print(f"error: {exc}", file=sys.stderr)
        return Outcome(Exit.USAGE)


def _spec(args, ws):
    from dataclasses import replace

    from ..sweep.spec import parse_group_size
    from ..sweep.spec import SpecFileError, SweepSpecError, load_spec, spec_from_options

    size = getattr(args, "group_size", None)
    if size is not None:  # before anything is read or created
        size = parse_group_size(size, "command line", "--group-size")
    if args.target is not None:
        if args.grid or args.base:
            raise SweepSpecError(args.target, "command line", "give a SPEC.toml or --grid/--base, not both")
        from pathlib import Path

        p = Path(args.target)
        if not p.exists() and p.suffix.lower() != ".toml" and len(p.parts) == 1:
            raise SpecFileError(f"sweep: {args.target!r} is neither an action ({', '.join(ACTIONS)}) nor a spec file")
        spec = load_spec(p)
        return spec if size is None else replace(spec, group_size=size)
    if not args.grid:
        raise SweepSpecError("command line", "sweep", "give SPEC.toml, or --grid KEY=V1,V2 ... --base OPTIONS")
    if args.random is not None and args.optuna is not None:
        raise SweepSpecError("command line", "--random", "give --random N or --optuna N, not both")
    base, defaults = _base_config(args, ws)
    return spec_from_options(args.grid, base, random_trials=args.random, optuna_trials=args.optuna, seed=args.seed,
                             name=args.name, group_size="auto" if size is None else size, defaults=defaults)


def _base_config(args, ws):
    """``(base, defaults)``: the trials' base from ``--base``, parsed as train-pa / train-dpd parse their options,
    and the configuration of those options left at their defaults (a field where the two agree was not given)."""
    from ..runs.settings import WorkspaceSettings
    from ..sweep.spec import SweepSpecError

    p = argparse.ArgumentParser(prog=f"dpd-desktop sweep --base ({'train-' + args.step} options)",
                                allow_abbrev=False)
    add_training_options(p, args.step)
    train_options = {opt for action in p._actions for opt in action.option_strings}
    for tok in args.base or []:
        name = tok.split("=", 1)[0]
        if name in _SWEEP_OPTIONS and name not in train_options:
            raise SweepSpecError("command line", name, "a sweep option: put it before --base (everything after "
                                                       "--base is the trials' train options)")
    try:
        a = p.parse_args(args.base or [])
    except SystemExit as exc:
        raise SweepSpecError("command line", "--base", "cannot read the train options (see the message above)") \
            from exc
    args.accept_flags = args.accept_flags or a.accept_flags  # given before or after --base
    settings = WorkspaceSettings.load(ws.root) if ws.root.is_dir() else WorkspaceSettings()
    # the same options left at their defaults (the required ones and the PA run as given)
    d = argparse.Namespace(**{x.dest: x.default for x in p._actions if x.dest != "help"})
    for x in p._actions:
        if x.required or x.dest in ("dataset", "pa_run"):
            setattr(d, x.dest, getattr(a, x.dest))
    return (with_limit_options(config_from_args(a, args.step), a, settings),
            with_limit_options(config_from_args(d, args.step), d, settings))


def accept_datasets(spec, ws, accept: bool, fingerprints: dict | None = None):
    """``spec`` after the inspector's check of its trials' datasets (the base's and a searched ``dataset``'s that
    exist here; cli/flags.py): None when an error flag refuses the sweep, else ``spec`` with the accepted flags in
    its base's ``extra`` (every trial's config.json; each record names its dataset). ``fingerprints``: for a DPD
    sweep, filled with each checked dataset's fingerprint (its PA runs are checked against them)."""
    from dataclasses import replace

    base = spec.base_config()
    datasets = [base.dataset]
    for param in spec.space:
        if param.key == "dataset" and param.values is not None:
            datasets += list(param.values)
    accepted = []
    for ref in dict.fromkeys(datasets):
        if not flags.exists(ref):
            continue  # a trial on it fails with the loader's message (or it is a cluster's path)
        loaded = []
        found = flags.check_reference(str(ref), ws, accept, loaded)
        if found is None:
            return None
        accepted += found
        if fingerprints is not None and base.step == "dpd":
            fingerprints[ref] = loaded[0].fingerprint()
    if not accepted:
        return spec
    return replace(spec, base={**spec.base, "extra": flags.with_accepted(spec.base.get("extra") or {}, accepted)})


class _Console:
    """One line per trial start and end (on_change of SweepRun)."""

    def __init__(self):
        self.seen: dict[int, str] = {}

    def __call__(self, info) -> None:
        for t in info.trials:
            state = "pruned" if t.get("pruned") else t["state"]
            if self.seen.get(t["number"]) == state or state == "queued":
                continue
            self.seen[t["number"]] = state
            params = _params(t["params"])
            value = (f" best {info.spec.metric} {t['value']:.3f}{UNITS.get(info.spec.metric, '')}"
                     if t.get("value") is not None else "")
            print(f"trial {t['number']}: {state} [{params}] {t.get('run_id') or ''}{value}"
                  + (f" — {t['message']}" if t.get("message") else ""), flush=True)


def check_ray(address: str | None, allow_unauthenticated: bool = False) -> None:
    """The ``--ray`` address and the security policy (sweep/ray_security.py ``check_address``), before anything is
    created or recorded. ``none`` and ``local`` pass (``local`` is checked when its cluster starts).

    Raises:
        SweepSpecError: not a Ray address (``--ray``).
        RayNotUsable: a remote address without token authentication (and without the override).
    """
    a = (address or "").strip()
    if not a or a.lower() in ("none", LOCAL_ADDRESS):
        return
    from ..sweep.ray_security import RaySecurityError, check_address, check_address_form  # urllib, ssl: with --ray
    from ..sweep.spec import SweepSpecError

    try:
        check_address_form(a)
    except ValueError as exc:
        raise SweepSpecError("command line", "--ray", str(exc)) from exc
    try:
        check_address(a, allow_unauthenticated)
    except RaySecurityError as exc:
        raise RayNotUsable(str(exc)) from exc


def _trials(n: int) -> str:
    return f"{n} trial" + ("" if n == 1 else "s")


def _params(params: dict) -> str:
    """``hidden_size=6 lr=0.00954``: floats with 4 significant digits."""
    return " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())


class RayNotUsable(RuntimeError):
    """No Ray sweep here: the policy refused the cluster (RaySecurityError), Ray is missing (the packaged app, no
    extra) or the cluster could not be reached or started; nothing was sent."""


def ray_address(args, info) -> str | None:
    """Where this pass runs: ``--ray`` (``none``: this machine), else the address sweep.json recorded (a resume)."""
    given = getattr(args, "ray", None)
    if given:
        return None if given.strip().lower() == "none" else given.strip()
    return ((info.doc.get("ray") or {}).get("address") or None) if args.target == "resume" else None


def _run(ws, sweep_id: str, args=None) -> int:
    from ..sweep.runner import SweepRun
    from ..sweep.store import SweepStore

    store = SweepStore(ws.root)
    info = store.open(sweep_id)
    address = ray_address(args, info) if args is not None else None
    executor = None
    if address:
        check_ray(address, bool(getattr(args, "ray_allow_unauthenticated", False)))  # a recorded one too
        from ..sweep.ray_executor import check_not_bundled, executor_for  # 20 ms (urllib, ssl): only with --ray

        try:
            check_not_bundled()
        except RuntimeError as exc:  # RayUnavailable: before anything is recorded
            raise RayNotUsable(str(exc)) from exc
        if not getattr(args, "ray", None):
            print(f"sweep {info.id}: resuming on the Ray cluster {address} recorded in sweep.json (--ray ADDRESS "
                  "to change it, --ray none for this machine)", flush=True)
        executor = executor_for(argparse.Namespace(**{**vars(args), "ray": address}), ws)
    if info.state != "running":
        store.set_ray(info.id, address)
    stop = threading.Event()
    run = SweepRun(ws, sweep_id, executor=executor, stop=stop, on_change=_Console())
    own = not CTRL_C.installed and CTRL_C.install()
    if CTRL_C.installed:
        CTRL_C.on_first(stop.set, STOPPING)
    try:
        info = _run_on(run, executor)
    finally:
        CTRL_C.on_first(None)
        if own:
            CTRL_C.uninstall()
    print(f"sweep {info.id}: {info.state} — {info.doc.get('message', '')}", flush=True)
    _best(info)
    return {"succeeded": Exit.OK, "failed": Exit.FAILED}.get(info.state, Exit.CANCELLED)


def _run_on(run, executor):
    """``run.run()``; with a RayExecutor, one connection (one ``local`` cluster) for all its batches, made when the
    first trial is sent (a refusal then fails the sweep's pass: nothing was sent, ``sweep resume`` runs it)."""
    if executor is None:
        return run.run()
    from ..sweep.ray_executor import RayUnavailable
    from ..sweep.ray_security import RayClusterError, RaySecurityError

    try:
        with executor:
            return run.run()
    except (RaySecurityError, RayClusterError, RayUnavailable) as exc:
        raise RayNotUsable(str(exc)) from exc


def _best(info) -> None:
    done = [t for t in info.trials if t.get("value") is not None and t["state"] == "succeeded"]
    if done:
        b = min(done, key=lambda t: t["value"])
        print(f"best: trial {b['number']} {info.spec.metric} {b['value']:.3f}{UNITS.get(info.spec.metric, '')} "
              f"run {b['run_id']} {_params(b['params'])}")


def _list(store) -> int:
    sweeps = store.list()
    if not sweeps:
        print(f"no sweeps (workspace {store.root})", file=sys.stderr)
        return Exit.OK
    print(f"{'SWEEP':40s} {'SEARCH':7s} {'STATE':11s} TRIALS")
    for s in sweeps:
        counts = ", ".join(f"{n} {k}" for k, n in sorted(s.counts().items()))
        print(f"{s.id:40s} {s.spec.search:7s} {s.state:11s} {len(s.trials)} ({counts})")
    return Exit.OK


def _show(store, sweep_id: str, as_json: bool) -> int:
    from ..sweep.runner import best_value  # the run record's reader (no PyTorch)

    info = store.open(sweep_id)
    if as_json:
        print(json.dumps(info.doc, indent=2))
        return Exit.OK
    spec = info.spec
    print(f"sweep {info.id}: {spec.search}, {info.state}" + (f" — {info.doc['message']}" if info.doc.get("message")
                                                             else ""))
    sizes: dict = {}
    for t in info.trials:
        if t.get("group") is not None:
            sizes[t["group"]] = sizes.get(t["group"], 0) + 1
    grouped = f"groups of up to {max(sizes.values())}" if sizes else "no trial in a group so far"
    print(f"{_trials(len(info.trials))}; space: " + ", ".join(p.key for p in spec.space)
          + f"; metric {spec.metric}; group size {spec.group_size} ({grouped}); folder {info.folder}")
    keys = [p.key for p in spec.space]
    w = max(12, len(spec.metric))
    print(f"{'#':>3s} {'STATE':11s} {'GROUP':>5s} " + " ".join(f"{k[:12]:>12s}" for k in keys)
          + f"  {spec.metric:>{w}s}  RUN")
    for t in info.trials:
        state = "pruned" if t.get("pruned") else ("time limit" if t.get("time_limited") else t["state"])
        group = "-" if t.get("group") is None else str(t["group"])  # "-": trained alone
        cells = " ".join(f"{_cell(t['params'].get(k)):>12s}" for k in keys)
        value = t.get("value")
        if value is None and t.get("run_dir"):  # running, or stopped hard: the run's history so far
            value = best_value(t["run_dir"], spec.metric)
        val = f"{value:{w}.3f}" if value is not None else f"{'':{w}s}"
        print(f"{t['number']:3d} {state:11s} {group:>5s} {cells}  {val}  {t.get('run_id') or ''}")
    _best(info)
    return Exit.OK


def _cell(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)
