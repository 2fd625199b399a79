"""A named Arena protocol: one TOML file (``protocols/<name>.toml`` in this package, or any path).

    [protocol]   name, title, seeds, epochs, reference_rows (optional); power_gate_db, selection, metric_profile
                 (optional: config.py's defaults); legacy_aclr (optional, default false: true adds the ACLR in
                 OpenDPD 2.2.1's per-segment convention beside the corrected one, arena/metrics.py ``legacy_aclr``)
    [training]   ExperimentConfig fields shared by every DPD trial (frame, batch, optimizer, schedule, loss window…)
    [[conditions]]  id, kind = "arena" (calibration = the wheel's calibration file, validation_nperseg) or
                    kind = "dataset" (dataset = a folder name under the assets' datasets/ or a path; pa = {backbone,
                    hidden_size, epochs, …} the PA trained first; validation_nperseg; max_train_samples);
                    aclr_segments (optional, either kind: "welch" (default) or "aligned", arena/metrics.py)
    [[models]]   name, backbone, hidden_size, num_layers (optional), options = {ExperimentConfig fields of this model only},
                 arena_row = [backbone key, budget] (the wheel's leaderboard row this configuration reproduces)

``extends = "arena-v6"`` in [protocol]: start from that protocol (its keys, [training] fields, conditions and
models), override what this file gives (its [[models]] replace the parent's): candidates under the same rules.

Overrides (``--epochs``, ``--seeds``, ``--models``, ``--datasets``) are recorded in the leaderboard. Errors are
:class:`ProtocolError` naming the file and the key.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from ..config import ConfigError, ExperimentConfig, SELECTIONS, unknown_field

__all__ = ["ConditionSpec", "ModelSpec", "Protocol", "ProtocolError", "load_protocol", "protocol_path",
           "protocol_names"]

PROTOCOLS = Path(__file__).with_name("protocols")
KINDS = ("arena", "dataset")
#: a condition's test ACLR windows: "welch" (50 % overlap, the corrected profile's) or "aligned" (adjacent windows on
#: the split's nperseg-sample block grid, arena/metrics.py ``aligned_window``)
ACLR_SEGMENTS = ("welch", "aligned")
_CONFIG_FIELDS = {f.name for f in fields(ExperimentConfig)}
#: fields a protocol's [training] or a model's options may not set (the runner sets them per trial)
_RESERVED = ("step", "dataset", "pa_run", "backbone", "hidden_size", "num_layers", "seed", "epochs", "name", "extra")


class ProtocolError(ValueError):
    def __init__(self, source: str, key: str, message: str):
        super().__init__(f"{source}: {key}: {message}")
        self.source, self.key = source, key


@dataclass(frozen=True)
class ConditionSpec:
    id: str
    kind: str
    calibration: str | None = None
    dataset: str | None = None
    pa: dict = field(default_factory=dict)
    validation_nperseg: int | None = None
    max_train_samples: int | None = None
    aclr_segments: str = "welch"


@dataclass(frozen=True)
class ModelSpec:
    name: str
    backbone: str
    hidden_size: int
    num_layers: int = ExperimentConfig.num_layers
    options: dict = field(default_factory=dict)
    arena_row: tuple[str, int] | None = None


@dataclass(frozen=True)
class Protocol:
    name: str
    title: str
    seeds: tuple[int, ...]
    epochs: int
    power_gate_db: float
    selection: str
    metric_profile: str
    training: dict
    conditions: tuple[ConditionSpec, ...]
    models: tuple[ModelSpec, ...]
    reference_rows: str | None = None
    source: str = ""
    overrides: dict = field(default_factory=dict)
    legacy_aclr: bool = False

    def trial_config(self, condition: ConditionSpec, model: ModelSpec, *, dataset: str, pa_run: str,
                     gain_value: float | None, peak_limit: float | None, device: str, kernel: str | None,
                     seed: int) -> ExperimentConfig:
        """The ExperimentConfig of one DPD trial (validated). Raises ConfigError."""
        fields_ = {**self.training, "metric_profile": self.metric_profile, "selection": self.selection,
                   "power_gate_db": self.power_gate_db, **model.options}
        if kernel is not None:
            fields_["kernel"] = kernel
        if condition.max_train_samples:
            fields_["max_train_samples"] = condition.max_train_samples
        return ExperimentConfig(step="dpd", dataset=dataset, pa_run=pa_run, backbone=model.backbone,
                                hidden_size=model.hidden_size, num_layers=model.num_layers, epochs=self.epochs,
                                seed=seed, device=device, gain_value=gain_value, peak_limit=peak_limit,
                                name=f"{self.name} {condition.id} {model.name} seed {seed}",
                                extra={"arena": {"protocol": self.name, "condition": condition.id,
                                                 "model": model.name}}, **fields_).validate()

    def with_overrides(self, *, epochs: int | None = None, seeds: list[int] | None = None,
                       models: list[str] | None = None, datasets: list[str] | None = None) -> "Protocol":
        """The protocol with a short-run override of epochs, seeds, models (names) or conditions (ids)."""
        out, ov = self, dict(self.overrides)
        if epochs is not None:
            if epochs < 1:
                raise ProtocolError("command line", "--epochs", f"expected >= 1, got {epochs}")
            out, ov["epochs"] = replace(out, epochs=int(epochs)), int(epochs)
        if seeds is not None:
            out, ov["seeds"] = replace(out, seeds=tuple(int(s) for s in seeds)), list(seeds)
        if models is not None:
            names = {m.name.lower(): m for m in self.models}
            missing = [m for m in models if m.lower() not in names]
            if missing:
                raise ProtocolError("command line", "--models", f"unknown model {missing[0]!r}; the protocol has "
                                    + ", ".join(m.name for m in self.models))
            out, ov["models"] = replace(out, models=tuple(names[m.lower()] for m in models)), list(models)
        if datasets is not None:
            ids = {c.id.lower(): c for c in self.conditions}
            by_name = {(c.dataset or "").lower(): c for c in self.conditions}
            chosen = []
            for d in datasets:
                c = ids.get(d.lower()) or by_name.get(d.lower())
                if c is None:
                    raise ProtocolError("command line", "--datasets", f"unknown condition {d!r}; the protocol has "
                                        + ", ".join(c.id for c in self.conditions))
                chosen.append(c)
            out, ov["datasets"] = replace(out, conditions=tuple(chosen)), list(datasets)
        return replace(out, overrides=ov)

    def to_dict(self) -> dict[str, Any]:
        """The protocol as JSON; ``legacy_aclr`` only when true and a condition's ``aclr_segments`` only when
        "aligned" (a protocol without them keeps its old dict)."""
        out = {"name": self.name, "title": self.title, "seeds": list(self.seeds), "epochs": self.epochs,
               "power_gate_db": self.power_gate_db, "selection": self.selection,
               "metric_profile": self.metric_profile, "training": dict(self.training),
               # aclr_segments only where not the default: a protocol without it keeps its old dict
               "conditions": [{k: v for k, v in vars(c).items() if (k, v) != ("aclr_segments", "welch")}
                              for c in self.conditions],
               "models": [{**vars(m), "arena_row": list(m.arena_row) if m.arena_row else None} for m in self.models],
               "reference_rows": self.reference_rows, "source": self.source, "overrides": dict(self.overrides)}
        if self.legacy_aclr:
            out["legacy_aclr"] = True
        return out


def protocol_names() -> list[str]:
    return sorted(p.stem for p in PROTOCOLS.glob("*.toml"))


def protocol_path(name_or_path: str) -> Path:
    """A protocol's file: a path to a .toml file, or the name of one of this package's (``arena-v6``)."""
    p = Path(name_or_path)
    if p.suffix == ".toml" and p.is_file():
        return p
    q = PROTOCOLS / f"{name_or_path}.toml"
    if q.is_file():
        return q
    raise ProtocolError(str(name_or_path), "protocol", "no such protocol file; the named protocols are "
                        + ", ".join(protocol_names()))


def shown_path(path: Path) -> str:
    """How a leaderboard names a protocol file: one of this package's as ``dpd_desktop/arena/protocols/NAME.toml``
    (no machine path in a committed leaderboard), any other as it was given."""
    try:
        return str(Path("dpd_desktop", "arena", "protocols") / Path(path).resolve().relative_to(PROTOCOLS.resolve()))
    except ValueError:
        return str(path)


#: the keys of each table a protocol file may hold (anything else is a typo or a misplaced field: refused)
_TABLE_KEYS = {
    "": ("protocol", "training", "conditions", "models"),
    "protocol": ("name", "title", "seeds", "epochs", "power_gate_db", "selection", "metric_profile", "reference_rows",
                 "legacy_aclr", "extends"),
    "conditions": ("id", "kind", "calibration", "dataset", "pa", "validation_nperseg", "max_train_samples",
                   "aclr_segments"),
    "models": ("name", "backbone", "hidden_size", "num_layers", "options", "arena_row"),
}


def _known_keys(raw: dict, table: str, source: str, where: str) -> None:
    """Raises ProtocolError naming the first key of ``raw`` that ``table`` does not hold (a training field in a
    [[models]] table is pointed to its ``options``)."""
    for k in raw:
        if k not in _TABLE_KEYS[table]:
            hint = ""
            if table == "models" and k in _CONFIG_FIELDS:
                hint = f": a training field of one model goes in its options, e.g. options = {{ {k} = ... }}"
            elif table in ("", "protocol") and k in _CONFIG_FIELDS:
                hint = ": a training field of every trial goes in the [training] table"
            raise ProtocolError(source, f"{where}{k}", f"not a key of {'the file' if not table else table}; expected "
                                f"one of {', '.join(_TABLE_KEYS[table])}{hint}")


def _fields(raw: dict, source: str, where: str) -> dict:
    out = {}
    for k, v in raw.items():
        if k not in _CONFIG_FIELDS:
            raise ProtocolError(source, f"{where}.{k}", unknown_field(k, _CONFIG_FIELDS))
        if k in _RESERVED:
            raise ProtocolError(source, f"{where}.{k}", "set by the protocol's runner per trial")
        out[k] = v
    return out


def _extend(parent: str, raw: dict, src: str, path: Path) -> dict:
    """``extends = "<protocol>"``: the parent's tables, this file's [protocol] keys and [training] fields over them;
    [[conditions]] and [[models]] replace the parent's when given. The parent is a named protocol or a path relative
    to this file."""
    cand = path.parent / parent
    ppath = cand if cand.suffix == ".toml" and cand.is_file() else protocol_path(parent)
    try:
        base = tomllib.loads(ppath.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ProtocolError(src, "protocol.extends", f"{ppath}: {exc}") from exc
    if (base.get("protocol") or {}).get("extends"):
        raise ProtocolError(src, "protocol.extends", f"{ppath} extends another protocol itself (one level only)")
    out = dict(base)
    head = {k: v for k, v in (raw.get("protocol") or {}).items() if k != "extends"}
    out["protocol"] = {**(base.get("protocol") or {}), **head, "extends": shown_path(ppath)}
    out["training"] = {**(base.get("training") or {}), **(raw.get("training") or {})}
    for table in ("conditions", "models"):
        if raw.get(table):
            out[table] = raw[table]
    return out


def load_protocol(name_or_path: str) -> Protocol:
    """Read and check a protocol (module docstring). Raises ProtocolError."""
    path = protocol_path(name_or_path)
    src = str(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ProtocolError(src, "file", str(exc)) from exc
    _known_keys(raw, "", src, "")
    _known_keys(raw.get("protocol") or {}, "protocol", src, "protocol.")
    for table in ("conditions", "models"):
        for i, item in enumerate(raw.get(table) or []):
            _known_keys(item, table, src, f"{table}[{i}].")
    parent = (raw.get("protocol") or {}).get("extends")
    if parent:
        raw = _extend(parent, raw, src, path)
    head = raw.get("protocol") or {}
    for key in ("name", "seeds", "epochs"):
        if key not in head:
            raise ProtocolError(src, f"protocol.{key}", "missing")
    selection = head.get("selection", ExperimentConfig.selection)
    if selection not in SELECTIONS:
        raise ProtocolError(src, "protocol.selection", f"expected one of {SELECTIONS}")
    legacy_aclr = head.get("legacy_aclr", False)
    if not isinstance(legacy_aclr, bool):
        raise ProtocolError(src, "protocol.legacy_aclr", f"expected true or false, got {legacy_aclr!r}")
    training = _fields(raw.get("training") or {}, src, "training")
    conds = []
    for i, c in enumerate(raw.get("conditions") or []):
        where = f"conditions[{i}]"
        if c.get("kind") not in KINDS:
            raise ProtocolError(src, f"{where}.kind", f"expected one of {KINDS}")
        if c["kind"] == "arena" and not c.get("calibration"):
            raise ProtocolError(src, f"{where}.calibration", "an arena condition names its calibration file")
        if c["kind"] == "dataset" and (not c.get("dataset") or not c.get("pa")):
            raise ProtocolError(src, f"{where}", "a dataset condition names its dataset and its PA ({backbone, ...})")
        segments = c.get("aclr_segments", "welch")
        if segments not in ACLR_SEGMENTS:
            raise ProtocolError(src, f"{where}.aclr_segments", f"expected one of {ACLR_SEGMENTS}, got {segments!r}")
        conds.append(ConditionSpec(id=str(c.get("id") or c.get("dataset")), kind=c["kind"],
                                   calibration=c.get("calibration"), dataset=c.get("dataset"),
                                   pa=dict(c.get("pa") or {}), validation_nperseg=c.get("validation_nperseg"),
                                   max_train_samples=c.get("max_train_samples"), aclr_segments=segments))
    if not conds:
        raise ProtocolError(src, "conditions", "a protocol has at least one condition")
    models = []
    for i, m in enumerate(raw.get("models") or []):
        where = f"models[{i}]"
        for key in ("name", "backbone", "hidden_size"):
            if key not in m:
                raise ProtocolError(src, f"{where}.{key}", "missing")
        row = m.get("arena_row")
        models.append(ModelSpec(name=str(m["name"]), backbone=str(m["backbone"]), hidden_size=int(m["hidden_size"]),
                                num_layers=int(m.get("num_layers", ExperimentConfig.num_layers)),
                                options=_fields(m.get("options") or {}, src, f"{where}.options"),
                                arena_row=(str(row[0]), int(row[1])) if row else None))
    if not models:
        raise ProtocolError(src, "models", "a protocol has at least one model")
    proto = Protocol(name=str(head["name"]), title=str(head.get("title", head["name"])),
                     seeds=tuple(int(s) for s in head["seeds"]), epochs=int(head["epochs"]),
                     power_gate_db=float(head.get("power_gate_db", ExperimentConfig.power_gate_db)), selection=selection,
                     metric_profile=str(head.get("metric_profile", ExperimentConfig.metric_profile)), training=training,
                     conditions=tuple(conds), models=tuple(models), reference_rows=head.get("reference_rows"),
                     source=shown_path(path), legacy_aclr=legacy_aclr)
    # every (condition, model) must make a valid trial; the error names where the field was set
    for i, m in enumerate(proto.models):
        try:
            proto.trial_config(proto.conditions[0], m, dataset="x", pa_run="x", gain_value=None, peak_limit=None,
                               device="cpu", kernel=None, seed=proto.seeds[0])
        except ConfigError as exc:
            f = exc.field
            key = f"models[{i}].options.{f}" if f in m.options else f"training.{f}" if f in training \
                else f"models[{i}]"
            raise ProtocolError(src, key, f"{m.name}: {exc}") from exc
    return proto
