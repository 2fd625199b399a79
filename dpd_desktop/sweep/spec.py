"""A sweep's specification: the base configuration, the search space and the search (grid, random or Optuna).

A spec comes from a TOML file (:func:`load_spec`) or from the command line (:func:`spec_from_options`)::

    [sweep]
    name = "gru-sizes"          # the sweep folder's label
    search = "grid"             # grid | random | optuna
    trials = 8                  # random / optuna: how many trials
    seed = 0                    # random / optuna: the search's own seed (not the runs' seed)
    metric = "VAL_NMSE"         # optuna: the per-epoch value minimised (default VAL_NMSE for PA, VAL_ACLR_AVG for DPD)
    devices = ["cpu"]           # optional: trials take these devices in turn (one queue lane each)
    group_size = "auto"         # trials of one shape that train together (sweep/groups.py): auto or N >= 1

    [base]                      # configuration fields shared by every trial (README, Sweeps)
    step = "pa"
    dataset = "demo"
    epochs = 3

    [space]                     # ExperimentConfig fields searched, in this order
    backbone = ["gru", "lstm"]  # a list: the values (grid), or the choices (random, optuna)
    hidden_size = [4, 8]
    lr = {low = 1e-4, high = 1e-2, log = true}   # a range (random, optuna): float, or int when low/high are ints

    [optuna]                    # search = "optuna" only
    sampler = "tpe"             # tpe | random | cmaes | qmc (optuna.samplers)
    pruner = "median"           # median | percentile | successive-halving | hyperband | none (optuna.pruners)
    n_startup_trials = 2        # median / percentile: trials before pruning starts
    n_warmup_steps = 0          # median / percentile: epochs of each trial before it may be pruned
    enqueue = [{lr = 5e-3}]     # optional: trials to evaluate first (optuna.Study.enqueue_trial)

Keys of [space] may also be written ``family`` (backbone), ``hidden`` (hidden_size), ``seeds`` (seed).

Grid order: the Cartesian product with the first key of [space] the slowest (itertools.product order). Random
search: ``random.Random(seed)``; for each trial the keys in [space] order; a list draws ``choice``, a float range
``uniform`` (``log``: uniform in log space, then exp), an int range ``randint`` — so the same spec gives the same
trials; a draw equal to an earlier trial is drawn again (each combination at most once; with lists only, at most
as many trials as combinations). A field is either in [base] or searched in [space], never both. Every trial's configuration is validated through :meth:`ExperimentConfig.validate`; errors are
:class:`SweepSpecError` naming the file and the key (``space.lr``, ``base.epochs``, ``sweep.search``).
"""
from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from ..config import ConfigError, ExperimentConfig, unknown_field

SEARCHES = ("grid", "random", "optuna")
MAX_DRAWS = 1000  # random search: draws per trial before giving up on a new combination (int ranges can be small)
SAMPLERS = ("tpe", "random", "cmaes", "qmc")
PRUNERS = ("median", "percentile", "successive-halving", "hyperband", "none")
#: spellings accepted for a [space] key
ALIASES = {"family": "backbone", "hidden": "hidden_size", "seeds": "seed", "learning_rate": "lr"}
#: config fields a sweep does not search (they say what the sweep is, or are filled in by it)
NOT_SEARCHABLE = ("step", "extra", "name")
#: the per-epoch history column each step selects its checkpoint by (the trainer's, training/trainer.py)
DEFAULT_METRIC = {"pa": "VAL_NMSE", "dpd": "VAL_ACLR_AVG"}
METRICS = ("VAL_NMSE", "VAL_ACLR_AVG", "VAL_EVM", "VAL_LOSS")
MAX_TRIALS = 10_000
_FIELDS = {f.name: f for f in fields(ExperimentConfig)}
_SECTIONS = ("sweep", "base", "space", "optuna")
_BASE_KEYS = tuple(k for k in _FIELDS if k not in ("extra", "name"))
_SEARCHABLE = tuple(k for k in _FIELDS if k not in NOT_SEARCHABLE) + tuple(ALIASES)
_SEARCHABLE_FIELD = "a searchable configuration field"


class SweepSpecError(ValueError):
    """A sweep spec that cannot be used: ``source`` (the TOML file, or "command line") and ``key`` (``space.lr``)."""

    def __init__(self, source: str, key: str, message: str):
        super().__init__(f"{source}: {key}: {message}")
        self.source, self.key = source, key


AUTO = "auto"
MAX_GROUP_SIZE = 64  # far above what fills a GPU: more is refused as a likely typo or an out-of-memory trap


def parse_group_size(value, source: str, key: str):
    """``value`` as a group size: ``"auto"`` or an int 1..MAX_GROUP_SIZE (a string of digits is read as one).
    Raises SweepSpecError naming ``source`` and ``key`` (``sweep.group_size``, ``--group-size``)."""
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


class SpecFileError(SweepSpecError):
    """The spec file cannot be read (missing, a folder, no permission): the message is one line naming it."""

    def __init__(self, message: str):
        ValueError.__init__(self, message)
        self.source, self.key = message.split(": ", 1)[0], "file"


#: the keys of a spec's [sweep] table
_SWEEP_KEYS = ("name", "search", "trials", "seed", "metric", "devices", "group_size")


@dataclass(frozen=True)
class Param:
    """One searched field: ``values`` (a list) or a range ``low``..``high`` (``log``: log-uniform; ``integer``)."""

    key: str
    values: tuple | None = None
    low: float | None = None
    high: float | None = None
    log: bool = False
    integer: bool = False

    def to_dict(self) -> dict:
        if self.values is not None:
            return {"key": self.key, "values": list(self.values)}
        return {"key": self.key, "low": self.low, "high": self.high, "log": self.log, "integer": self.integer}

    @classmethod
    def from_dict(cls, d: dict) -> "Param":
        if "values" in d:
            return cls(d["key"], values=tuple(d["values"]))
        return cls(d["key"], low=d["low"], high=d["high"], log=bool(d.get("log")), integer=bool(d.get("integer")))


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep (see the module docstring). ``base``: config fields (dict, JSON-plain); ``space``: the
    searched fields in order; ``optuna``: sampler, pruner and their options."""

    name: str
    search: str
    base: dict
    space: tuple[Param, ...]
    trials: int | None = None
    seed: int = 0
    metric: str = "VAL_NMSE"
    devices: tuple[str, ...] = ()
    optuna: dict = field(default_factory=dict)
    source: str = "command line"
    group_size: int | str = AUTO  # "auto" or the most trials per group (sweep/groups.py)

    @property
    def step(self) -> str:
        return self.base.get("step", ExperimentConfig.step)

    def base_config(self) -> ExperimentConfig:
        return ExperimentConfig.from_dict(dict(self.base))

    def to_dict(self) -> dict:
        return {"name": self.name, "search": self.search, "base": dict(self.base),
                "space": [p.to_dict() for p in self.space], "trials": self.trials, "seed": self.seed,
                "metric": self.metric, "devices": list(self.devices), "optuna": dict(self.optuna),
                "source": self.source, "group_size": self.group_size}

    @classmethod
    def from_dict(cls, d: dict) -> "SweepSpec":
        return cls(name=d["name"], search=d["search"], base=dict(d["base"]),
                   space=tuple(Param.from_dict(p) for p in d["space"]), trials=d.get("trials"),
                   seed=int(d.get("seed", cls.seed)), metric=d.get("metric", cls.metric),
                   devices=tuple(d.get("devices") or ()), optuna=dict(d.get("optuna") or {}),
                   source=d.get("source", "sweep.json"),
                   group_size=parse_group_size(d.get("group_size", AUTO), "sweep.json", "spec.group_size"))


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a TOML spec; a relative ``[base] dataset`` (and a ``pa_run`` folder there) is resolved
    against the file's folder. Raises SpecFileError (no such file, a folder, unreadable: one line naming the file)
    or SweepSpecError (a spec that cannot be used: file and key)."""
    p = Path(path)
    if p.is_dir():
        raise SpecFileError(f"{p}: is a folder, not a spec file")
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise SpecFileError(f"{p}: no such spec file") from exc
    except IsADirectoryError as exc:
        raise SpecFileError(f"{p}: is a folder, not a spec file") from exc
    except OSError as exc:
        raise SpecFileError(f"{p}: cannot read the spec file ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        raise SweepSpecError(str(p), "file", f"not UTF-8 text ({exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SweepSpecError(str(p), "file", f"not valid TOML ({exc})") from exc
    base = raw.get("base")
    if isinstance(base, dict) and isinstance(base.get("dataset"), str) and base["dataset"] != "demo":
        d = Path(base["dataset"]).expanduser()  # relative to the spec's folder; trials run from other folders
        base["dataset"] = str(d if d.is_absolute() else (p.parent / d).resolve())
    if isinstance(base, dict) and isinstance(base.get("pa_run"), str):  # a run id, or a run folder
        r = Path(base["pa_run"]).expanduser()
        if not r.is_absolute() and (p.parent / r).is_dir():
            base["pa_run"] = str((p.parent / r).resolve())
    return parse_spec(raw, str(p))


def parse_spec(raw: dict, source: str) -> SweepSpec:
    """Validate a spec given as the TOML's tables (see the module docstring)."""
    for k in raw:
        if k not in _SECTIONS:
            raise SweepSpecError(source, k, f"unknown table (expected {', '.join(_SECTIONS)})")
    for k in _SECTIONS:
        if not isinstance(raw.get(k, {}), dict):
            raise SweepSpecError(source, k, "expected a table")
    sw, base_raw, space_raw, opt = (dict(raw.get(k, {})) for k in _SECTIONS)
    for k in sw:
        if k not in _SWEEP_KEYS:
            raise SweepSpecError(source, f"sweep.{k}", f"unknown key (expected {', '.join(_SWEEP_KEYS)})")
    search = sw.get("search", "grid")
    if search not in SEARCHES:
        raise SweepSpecError(source, "sweep.search", f"expected one of {SEARCHES}, got {search!r}")
    name = sw.get("name", "sweep")
    if not isinstance(name, str) or not name.strip():
        raise SweepSpecError(source, "sweep.name", f"expected a non-empty string, got {name!r}")
    seed = sw.get("seed", SweepSpec.seed)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= 2**32 - 1:
        raise SweepSpecError(source, "sweep.seed", f"expected an integer from 0 to 2**32 - 1, got {seed!r}")
    trials = sw.get("trials")
    if search == "grid" and trials is not None:
        raise SweepSpecError(source, "sweep.trials", "a grid runs every combination: leave trials out")
    if search != "grid" and (isinstance(trials, bool) or not isinstance(trials, int) or not 1 <= trials <= MAX_TRIALS):
        raise SweepSpecError(source, "sweep.trials", f"expected an integer from 1 to {MAX_TRIALS}, got {trials!r}")
    devices = sw.get("devices", [])
    if not isinstance(devices, list) or not all(isinstance(d, str) for d in devices):
        raise SweepSpecError(source, "sweep.devices", f"expected a list of device names, got {devices!r}")
    group_size = parse_group_size(sw.get("group_size", AUTO), source, "sweep.group_size")
    base = _base(base_raw, source)
    for d in devices:
        _check_value(base, "device", d, source, "sweep.devices")
    space = tuple(_param(k, v, search, base, source) for k, v in space_raw.items())
    if not space:
        raise SweepSpecError(source, "space", "nothing to search: give at least one field")
    if len({p.key for p in space}) != len(space):
        raise SweepSpecError(source, "space", "a field is given twice (an alias and its name)")
    step = base.get("step", ExperimentConfig.step)
    metric = sw.get("metric", DEFAULT_METRIC[step])
    if metric not in METRICS:
        raise SweepSpecError(source, "sweep.metric", f"expected one of {METRICS}, got {metric!r}")
    spec = SweepSpec(name=name.strip(), search=search, base=base, space=space, trials=trials, seed=seed,
                     metric=metric, devices=tuple(devices), optuna=_optuna(opt, search, base, space, source),
                     source=source, group_size=group_size)
    if search == "grid":
        n = math.prod(len(p.values) for p in space)
        if n > MAX_TRIALS:
            raise SweepSpecError(source, "space", f"the grid has {n} combinations, more than {MAX_TRIALS}")
    if search == "random" and all(p.values is not None for p in space):
        n = math.prod(len(p.values) for p in space)
        if trials > n:
            raise SweepSpecError(source, "sweep.trials", f"{trials} random trials, but the lists give only {n} "
                                 f"distinct combinations (a random search draws each at most once): ask for at "
                                 f"most {n}, or run the grid")
    return spec


def _base(raw: dict, source: str) -> dict:
    base = {}
    for k, v in raw.items():
        if k in _SWEEP_KEYS and k not in _FIELDS:
            raise SweepSpecError(source, f"base.{k}", "a key of the [sweep] table, not of [base]: move it there")
        if k not in _FIELDS or k in ("extra", "name"):
            raise SweepSpecError(source, f"base.{k}", unknown_field(k, _BASE_KEYS))
        base[k] = v
    try:
        ExperimentConfig.from_dict(base).validate()
    except ConfigError as exc:
        raise SweepSpecError(source, f"base.{exc.field}", str(exc).split(": ", 1)[-1]) from exc
    except TypeError as exc:
        raise SweepSpecError(source, "base", str(exc)) from exc
    ds = base.get("dataset", ExperimentConfig.dataset)
    if ds != "demo" and not Path(ds).expanduser().exists():
        raise SweepSpecError(source, "base.dataset", f"{ds}: no such file or folder")
    return base


def _check_value(base: dict, key: str, value: Any, source: str, where: str) -> None:
    try:
        replace(ExperimentConfig.from_dict(base), **{key: value}).validate()
    except ConfigError as exc:
        msg = str(exc).split(": ", 1)[-1]
        if exc.field != key:
            msg = f"{value!r} conflicts with {exc.field}: {msg}"
        raise SweepSpecError(source, where, msg) from exc


def _param(key: str, value: Any, search: str, base: dict, source: str) -> Param:
    where = f"space.{key}"
    name = ALIASES.get(key, key)
    if name not in _FIELDS or name in NOT_SEARCHABLE:
        raise SweepSpecError(source, where, unknown_field(key, _SEARCHABLE, _SEARCHABLE_FIELD))
    if name in base:
        raise SweepSpecError(source, where, f"{name} is also set in [base] (base.{name} = {base[name]!r}): give it "
                                            "in one place, [base] or [space]")
    if isinstance(value, list):
        if not value:
            raise SweepSpecError(source, where, "expected a non-empty list of values")
        for i, v in enumerate(value):
            if any(v == u and isinstance(v, bool) == isinstance(u, bool) for u in value[:i]):  # 1 == 1.0, not True
                raise SweepSpecError(source, where, f"{v!r} is listed twice: its trials would train the same "
                                                    "configuration again")
            _check_value(base, name, v, source, where)
        return Param(name, values=tuple(value))
    if isinstance(value, dict):
        if search == "grid":
            raise SweepSpecError(source, where, "a grid needs a list of values, not a range")
        extra = set(value) - {"low", "high", "log"}
        if extra:
            raise SweepSpecError(source, f"{where}.{sorted(extra)[0]}", "unknown key (expected low, high, log)")
        low, high, log = value.get("low"), value.get("high"), value.get("log", False)
        for k, v in (("low", low), ("high", high)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise SweepSpecError(source, f"{where}.{k}", f"expected a finite number, got {v!r}")
        if not low < high:
            raise SweepSpecError(source, where, f"expected low < high, got {low} and {high}")
        if not isinstance(log, bool):
            raise SweepSpecError(source, f"{where}.log", f"expected true or false, got {log!r}")
        if log and low <= 0:
            raise SweepSpecError(source, f"{where}.low", f"a log range needs low > 0, got {low}")
        integer = isinstance(low, int) and isinstance(high, int)
        for v in (low, high):
            _check_value(base, name, v, source, where)
        return Param(name, low=low, high=high, log=log, integer=integer)
    raise SweepSpecError(source, where, f"expected a list of values or a range {{low, high}}, got {value!r}")


def _optuna(raw: dict, search: str, base: dict, space: tuple[Param, ...], source: str) -> dict:
    if search != "optuna":
        if raw:
            raise SweepSpecError(source, "optuna", f"only for search = \"optuna\" (this sweep is {search})")
        return {}
    known = ("sampler", "pruner", "n_startup_trials", "n_warmup_steps", "enqueue")
    for k in raw:
        if k not in known:
            raise SweepSpecError(source, f"optuna.{k}", f"unknown key (expected {', '.join(known)})")
    out = {"sampler": raw.get("sampler", "tpe"), "pruner": raw.get("pruner", "median"),
           "n_startup_trials": raw.get("n_startup_trials", 2), "n_warmup_steps": raw.get("n_warmup_steps", 0),
           "enqueue": raw.get("enqueue", [])}
    if out["sampler"] not in SAMPLERS:
        raise SweepSpecError(source, "optuna.sampler", f"expected one of {SAMPLERS}, got {out['sampler']!r}")
    if out["pruner"] not in PRUNERS:
        raise SweepSpecError(source, "optuna.pruner", f"expected one of {PRUNERS}, got {out['pruner']!r}")
    for k in ("n_startup_trials", "n_warmup_steps"):
        v = out[k]
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise SweepSpecError(source, f"optuna.{k}", f"expected an integer >= 0, got {v!r}")
    if not isinstance(out["enqueue"], list) or not all(isinstance(e, dict) for e in out["enqueue"]):
        raise SweepSpecError(source, "optuna.enqueue", "expected a list of tables of [space] fields")
    keys = {p.key for p in space}
    for i, e in enumerate(out["enqueue"]):
        for k, v in e.items():
            name = ALIASES.get(k, k)
            if name not in keys:
                raise SweepSpecError(source, f"optuna.enqueue[{i}].{k}", "not a field of [space]")
            _check_value(base, name, v, source, f"optuna.enqueue[{i}].{k}")
    out["enqueue"] = [{ALIASES.get(k, k): v for k, v in e.items()} for e in out["enqueue"]]
    return out


# ------------------------------------------------------------------------------------------------ expansion
def expand(spec: SweepSpec) -> list[dict]:
    """The trials of a grid or random sweep: each a dict of the searched fields (in [space] order)."""
    if spec.search == "grid":
        keys = [p.key for p in spec.space]
        return [dict(zip(keys, combo)) for combo in itertools.product(*(p.values for p in spec.space))]
    if spec.search == "random":  # each combination at most once (parse_spec refuses more trials than there are)
        rng = random.Random(spec.seed)
        out, seen = [], set()
        for _ in range(MAX_DRAWS * spec.trials):
            if len(out) == spec.trials:
                break
            trial = {p.key: _draw(rng, p) for p in spec.space}
            key = tuple(repr(v) for v in trial.values())
            if key not in seen:
                seen.add(key)
                out.append(trial)
        return out
    raise ValueError("an Optuna sweep draws its trials as it goes (sweep/optuna_search.py)")


def _draw(rng: random.Random, p: Param):
    if p.values is not None:
        return rng.choice(p.values)
    if p.integer:
        if p.log:
            return int(round(math.exp(rng.uniform(math.log(p.low), math.log(p.high)))))
        return rng.randint(int(p.low), int(p.high))
    if p.log:
        return math.exp(rng.uniform(math.log(p.low), math.log(p.high)))
    return rng.uniform(p.low, p.high)


def trial_config(spec: SweepSpec, params: dict, sweep_id: str, number: int, device: str | None = None
                 ) -> ExperimentConfig:
    """Trial ``number``'s validated configuration: the base, ``params``, the sweep's tag (``name`` and
    ``extra["sweep"]``, kept in config.json) and, with ``spec.devices``, its device (the devices in turn)."""
    cfg = replace(spec.base_config(), **params)
    if spec.devices and "device" not in params:
        cfg = replace(cfg, device=spec.devices[number % len(spec.devices)])
    if device is not None:
        cfg = replace(cfg, device=device)
    cfg = replace(cfg, name=f"sweep {sweep_id} trial {number}",
                  extra={**cfg.extra, "sweep": {"id": sweep_id, "trial": number}})
    try:
        return cfg.validate()
    except ConfigError as exc:
        raise SweepSpecError(spec.source, f"trial {number}: {exc.field}", str(exc).split(": ", 1)[-1]) from exc


# ------------------------------------------------------------------------------------------------ command line
def parse_grid_option(text: str) -> tuple[str, list]:
    """``KEY=V1,V2`` (``--grid``) → (key, values) with each value read as the field's type (int, float, bool, str,
    ``none``). Raises SweepSpecError naming the option."""
    key, sep, rest = text.partition("=")
    key = key.strip().replace("-", "_")
    where = f"--grid {text}"
    if not sep or not key or not rest.strip():
        raise SweepSpecError("command line", where, "expected KEY=V1,V2,...")
    name = ALIASES.get(key, key)
    if name not in _FIELDS or name in NOT_SEARCHABLE:
        raise SweepSpecError("command line", where, f"{key}: " + unknown_field(key, _SEARCHABLE, _SEARCHABLE_FIELD))
    items = [s.strip() for s in rest.split(",")]
    if any(not s for s in items):
        raise SweepSpecError("command line", where, "an empty value")
    return name, [_coerce(name, s, where) for s in items]


def _coerce(name: str, s: str, where: str, source: str = "command line"):
    """The text ``s`` as a value of config field ``name`` (int, float, bool, str, ``none``). Raises SweepSpecError
    naming ``source`` and ``where``."""
    kind = str(_FIELDS[name].type)
    if s.lower() in ("none", "null") and "None" in kind:
        return None
    try:
        if kind.startswith("bool"):
            if s.lower() not in ("true", "false"):
                raise ValueError(s)
            return s.lower() == "true"
        if kind.startswith("int"):
            return int(s)
        if kind.startswith("float"):
            return float(s)
    except ValueError as exc:
        raise SweepSpecError(source, where, f"{s!r} is not a value of {name} ({kind})") from exc
    return s


def base_table(base: ExperimentConfig) -> dict:
    """The [base] table of a spec over ``base``: the fields that differ from the defaults (not ``extra``, ``name``),
    a dataset folder as an absolute path."""
    raw_base = {k: v for k, v in base.to_dict().items() if k not in ("extra", "name")
                and v != _FIELDS[k].default}
    if raw_base.get("dataset") not in (None, "demo"):
        raw_base["dataset"] = str(Path(raw_base["dataset"]).expanduser().resolve())
    return raw_base


def spec_from_options(grid: list[str], base: ExperimentConfig, *, random_trials: int | None = None,
                      optuna_trials: int | None = None, seed: int = 0, name: str = "sweep",
                      optuna: dict | None = None, group_size=AUTO,
                      defaults: ExperimentConfig | None = None) -> SweepSpec:
    """The spec of ``dpd-desktop sweep --grid KEY=V1,V2 ... [--random N | --optuna N]`` over ``base``.
    ``defaults``: ``base`` with no option given (train-dpd's own defaults differ from the configuration's): a
    searched field whose base value is its default was not given in ``--base``, so it is no conflict.

    Raises:
        SweepSpecError: a ``--grid`` key given twice, or any error of :func:`parse_spec`.
    """
    space = {}
    for text in grid:
        k, vals = parse_grid_option(text)
        if k in space:
            raise SweepSpecError("command line", f"--grid {k}", "given twice: give all its values in one --grid "
                                                                 f"({k}=V1,V2,...)")
        space[k] = vals
    search = "optuna" if optuna_trials is not None else "random" if random_trials is not None else "grid"
    raw_base = base_table(base)
    if defaults is not None:
        for k in space:
            if k in raw_base and getattr(base, k, None) == getattr(defaults, k, None):
                del raw_base[k]
    raw = {"sweep": {"name": name, "search": search, "seed": seed, "group_size": group_size}, "base": raw_base,
           "space": space}
    if search != "grid":
        raw["sweep"]["trials"] = optuna_trials if search == "optuna" else random_trials
    if search == "optuna":
        raw["optuna"] = dict(optuna or {})
    try:
        return parse_spec(raw, "command line")
    except SweepSpecError as exc:
        if exc.key == "sweep.trials":  # name the option the user typed
            raise SweepSpecError("command line", f"--{search}", str(exc).split(": ", 2)[-1]) from exc
        if exc.key.startswith("space.") and "also set in [base]" in str(exc):
            key = exc.key[len("space."):]
            raise SweepSpecError("command line", f"--grid {key}", f"{key} is also given in --base: give it in one "
                                 "place, --base or --grid") from exc
        raise
