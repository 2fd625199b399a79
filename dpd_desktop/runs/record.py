"""The run record's reader: :class:`RunRecord` reads a run folder back (ARCHITECTURE.md, "What a run leaves on
disk"): the typed :class:`~dpd_desktop.config.ExperimentConfig`, the :class:`DatasetRef`, the state (runs/states.py),
the history and the checkpoint paths. Its twin, runs/writer.py ``RunWriter``, writes every file of the folder; the
round trip is tested in tests/unit/test_record.py.

``config.json`` carries ``schema`` (:data:`SCHEMA`). Schema 1 (no ``schema`` field) named the demo dataset by the
pseudo-path ``"<synthetic demo seed=N>"`` in ``dataset.source``; the reader translates it once, here. Schema 2
records the demo's generator settings in ``dataset.demo`` and its source as null.
"""
from __future__ import annotations

import dataclasses
import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..config import ConfigError, ExperimentConfig
from ..data import load_dataset, make_demo_dataset
from ..data.synthetic import demo_settings
from . import artifacts
from ..kernels.record import KernelRun, read_kernel
from .states import DAMAGED, LIVE_STATES, UNREADABLE
from .owner import owner_gone
from .outputs import HDF5_MAGIC

#: config.json schema written by :class:`RunWriter`; the reader reads 1 and 2.
SCHEMA = 2
READABLE_SCHEMAS = (1, 2)
FORMAT = "dpd-desktop-run-1"  # the folder's format name, unchanged since schema 1 (schema says the revision)
ARCH_FIELDS = artifacts.ARCH_FIELDS  # ("backbone", "hidden_size", "num_layers")
# history.csv columns, the reference's (§4.8), in the order of the trainer's rows
HISTORY_METRICS = ("NMSE", "EVM", "ACLR_L", "ACLR_R", "ACLR_AVG")
HISTORY_COLUMNS = ("EPOCH", "N_EPOCH", "TIME:", "LR", "BATCH_SIZE", "N_PARAM", "FRAME_LENGTH", "BACKBONE",
                   "HIDDEN_SIZE", "TRAIN_LOSS", "VAL_LOSS", *(f"VAL_{k}" for k in HISTORY_METRICS), "TEST_LOSS",
                   *(f"TEST_{k}" for k in HISTORY_METRICS))
# dataset kinds: from the spec's dataset_format (data/spec.py DATASET_FORMATS), plus the synthetic demo
_KIND_OF_FORMAT = {"split_csv": "split-folder", "single_csv": "single-csv", "hdf5": "hdf5"}
DATASET_KINDS = ("split-folder", "single-csv", "hdf5", "demo")
_V1_DEMO_PREFIX, _V1_DEMO_SUFFIX = "<synthetic demo seed=", ">"
#: the quantised evaluations of a DPD run (export/quantized.py; written by runs/writer.py ``write_quantized``)
QUANTIZED_FILE = "quantized.json"


class RecordError(ValueError):
    """A folder is not a run, or its record is damaged; the message names the file and the field."""


class DatasetUnavailable(RecordError):
    """The run's dataset cannot be reloaded (no source, a reader error, the demo cannot be regenerated)."""


class DatasetChanged(RecordError):
    """The dataset found is not the one the run recorded (its fingerprint differs)."""


class PACheckpointError(RecordError):
    """The frozen PA checkpoint a DPD run recorded is gone, or changed since the run."""


# ====================================================================================================== dataset
@dataclass(frozen=True)
class DatasetRef:
    """What a run recorded of its dataset.

    Attributes:
        kind: "split-folder", "single-csv", "hdf5" or "demo".
        source: the resolved path that was loaded (None for the demo).
        fingerprint: :meth:`IQDataset.fingerprint` (SHA-256 hex) or None when not recorded.
        name: display name.
        demo: for the demo, the keyword arguments of :func:`~dpd_desktop.data.make_demo_dataset` (incl. ``seed``)
            that regenerate it; None otherwise.
        spec: the normalized spec as a dict (data/spec.py ``DatasetSpec`` fields).
        samples: ``{"train": N, "val": N, "test": N}``.
        recorded_in: the config.json it was read from (for messages; None for a fresh reference).
    """

    kind: str
    source: str | None
    fingerprint: str | None
    name: str | None = None
    demo: Mapping[str, Any] | None = None
    spec: Mapping[str, Any] = field(default_factory=dict)
    samples: Mapping[str, int] = field(default_factory=dict)
    recorded_in: str | None = field(default=None, compare=False)

    @classmethod
    def from_dataset(cls, ds, fingerprint: str | None = None) -> "DatasetRef":
        """The reference of a loaded :class:`~dpd_desktop.data.IQDataset` (``fingerprint`` computed when None)."""
        spec = _spec_dict(ds.spec)
        demo = demo_settings(ds)
        kind = "demo" if demo is not None else _KIND_OF_FORMAT.get(spec.get("dataset_format"),
                                                                    str(spec.get("dataset_format")))
        return cls(kind=kind, source=None if demo is not None else str(ds.source),
                   fingerprint=fingerprint or ds.fingerprint(), name=ds.name, demo=demo, spec=spec,
                   samples={k: int(getattr(ds, k).x.shape[0]) for k in ("train", "val", "test")})

    def to_dict(self) -> dict[str, Any]:
        """config.json's ``dataset`` block (schema 2)."""
        return {"kind": self.kind, "name": self.name, "source": self.source, "fingerprint": self.fingerprint,
                "demo": dict(self.demo) if self.demo is not None else None, "spec": dict(self.spec),
                "samples": dict(self.samples)}

    @classmethod
    def from_record(cls, block: Any, schema: int, experiment_dataset: str | None = None,
                    recorded_in: str | None = None) -> "DatasetRef":
        """Read config.json's ``dataset`` block; schema 1's demo pseudo-path is translated here, once."""
        b = block if isinstance(block, dict) else {}
        spec = b.get("spec") if isinstance(b.get("spec"), dict) else {}
        samples = b.get("samples") if isinstance(b.get("samples"), dict) else {}
        source = b.get("source")
        source = str(source) if source not in (None, "") else None
        demo = b.get("demo") if isinstance(b.get("demo"), dict) else None
        kind = b.get("kind")
        if schema == 1:
            seed = _v1_demo_seed(source)
            if seed is not None or (experiment_dataset == "demo" and source is None):
                demo, source, kind = _v1_demo_settings(spec, samples, seed or 0), None, "demo"
            else:
                kind = _KIND_OF_FORMAT.get(spec.get("dataset_format"), str(spec.get("dataset_format")))
        elif kind not in DATASET_KINDS:
            kind = "demo" if demo is not None else _KIND_OF_FORMAT.get(spec.get("dataset_format"), str(kind))
        return cls(kind=str(kind), source=source, fingerprint=b.get("fingerprint"), name=b.get("name"),
                   demo=demo, spec=spec, samples=samples, recorded_in=recorded_in)

    def load(self, dataset=None):
        """The run's dataset: ``dataset`` when given (checked), else reloaded from ``source`` or, for the demo,
        regenerated from ``demo``. The fingerprint must be the recorded one (when one was recorded).

        Raises:
            DatasetUnavailable: no source recorded, the reader failed, the demo cannot be regenerated.
            DatasetChanged: the dataset's fingerprint differs from the recorded one.
        """
        where = self.recorded_in or "config.json"
        if dataset is not None:
            if self.fingerprint and dataset.fingerprint() != self.fingerprint:
                raise DatasetChanged(f"the dataset given is not the run's dataset (its fingerprint differs from "
                                     f"'dataset.fingerprint' in {where})")
            return dataset
        if self.kind == "demo":
            try:
                ds = make_demo_dataset(**dict(self.demo or {}))
            except (ValueError, TypeError) as exc:
                raise DatasetUnavailable(f"the run's demo dataset cannot be regenerated from {where} "
                                         f"({type(exc).__name__}: {exc})") from exc
        elif not self.source:
            raise DatasetUnavailable(f"{where}: field 'dataset.source' missing, so the run's dataset cannot be "
                                     "reloaded")
        else:
            source = self.resolved_source()
            try:
                ds = load_dataset(source)
            except (ValueError, OSError) as exc:
                raise DatasetUnavailable(f"cannot reload the run's dataset from {source} (recorded in "
                                         f"{where}): {exc}") from exc
        if self.fingerprint and ds.fingerprint() != self.fingerprint:
            raise DatasetChanged(f"the dataset at {self.source or 'the demo settings'} has changed since the run "
                                 f"(its fingerprint differs from 'dataset.fingerprint' in {where}), or the run "
                                 "trained on a subset of it: what is computed from it now would not be what the run trained and scored on")
        return ds

    def resolved_source(self) -> Path:
        """``source`` as an absolute path: as recorded when absolute (``..`` resolved); a relative one (a run folder
        from elsewhere, edited by hand) is resolved against the folder of the config.json that recorded it.

        Raises:
            DatasetUnavailable: no source, a relative source without a recording folder, or a path that does not
                exist; the message names the field ``dataset.source``.
        """
        where = self.recorded_in or "config.json"
        if not self.source:
            raise DatasetUnavailable(f"{where}: field 'dataset.source' missing, so the run's dataset cannot be "
                                     "reloaded")
        p = Path(self.source).expanduser()
        if not p.is_absolute():
            if self.recorded_in is None:
                raise DatasetUnavailable(f"field 'dataset.source' is the relative path {self.source!r} and no run "
                                         "folder to resolve it against")
            p = Path(self.recorded_in).parent / p
        p = p.resolve()
        if not p.exists():
            raise DatasetUnavailable(f"{where}: field 'dataset.source' names {p}, which does not exist (the dataset "
                                     "was moved or deleted: open it from where it is now)")
        return p

    @property
    def shown(self) -> str:
        """Where the data came from, for messages: the source path, or the demo and its seed."""
        if self.kind == "demo":
            return f"synthetic demo, seed {(self.demo or {}).get('seed', 0)}"
        return self.source or "?"


def _v1_demo_seed(source: str | None) -> int | None:
    if source and source.startswith(_V1_DEMO_PREFIX) and source.endswith(_V1_DEMO_SUFFIX):
        digits = source[len(_V1_DEMO_PREFIX):-len(_V1_DEMO_SUFFIX)]
        if digits.isdigit():
            return int(digits)
    return None


def _v1_demo_settings(spec: dict, samples: dict, seed: int) -> dict[str, Any]:
    """make_demo_dataset's keyword arguments of a schema-1 demo record (sizes, nperseg, QAM order, noise)."""
    extra = spec.get("extra") if isinstance(spec.get("extra"), dict) else {}
    syn = extra.get("synthetic") if isinstance(extra.get("synthetic"), dict) else {}
    kw: dict[str, Any] = {"seed": int(syn.get("seed", seed))}
    for k in ("train", "val", "test"):
        if isinstance(samples.get(k), int):
            kw[f"n_{k}"] = samples[k]
    if isinstance(spec.get("nperseg"), int):
        kw["nperseg"] = spec["nperseg"]
    mod = str(extra.get("modulation", ""))
    if mod.endswith("QAM") and mod[:-3].isdigit():
        kw["qam_order"] = int(mod[:-3])
    if isinstance(syn.get("noise_db"), (int, float)):
        kw["noise_db"] = float(syn["noise_db"])
    return kw


def _spec_dict(spec) -> dict[str, Any]:
    try:
        return dataclasses.asdict(spec)
    except TypeError:
        return dict(vars(spec))


# ====================================================================================================== reader
class RunRecord:
    """One run folder, read back: :meth:`open` (strict) or :meth:`read` (never raises, for listings; a config.json
    that makes no configuration gives ``config`` None and ``step``, ``backbone``… from its raw ``experiment``)."""

    def __init__(self, run_dir: Path, doc: dict[str, Any] | None, config: ExperimentConfig | None,
                 dataset: DatasetRef | None, state: str, status: dict[str, Any]):
        self.run_dir = Path(run_dir)
        self.run_id = self.run_dir.name
        self.doc = doc or {}
        self.config = config
        self.dataset = dataset
        self.state = state
        self.status_doc = status
        schema = self.doc.get("schema", 1)
        self.schema = schema if doc and isinstance(schema, int) and not isinstance(schema, bool) else None

    # ---------------------------------------------------------------- opening
    @classmethod
    def open(cls, path: str | Path) -> "RunRecord":
        """Read the run folder ``path``.

        Raises:
            RecordError: no config.json, or one that is unreadable, has no ``experiment`` object, lacks an
                architecture field or has a field ExperimentConfig does not know (file and field named). A damaged
                ``status.json`` is no error: the state is "unreadable".
        """
        run_dir = Path(path)
        cfg_path = run_dir / "config.json"
        if not cfg_path.is_file():
            raise RecordError(f"{run_dir}: not a run folder (no config.json)")
        doc, config, dataset = _read_config(cfg_path)
        state, status = _read_state(run_dir)
        return cls(run_dir, doc, config, dataset, state, status)

    @classmethod
    def read(cls, path: str | Path) -> "RunRecord | None":
        """Like :meth:`open` but never raises: None when ``path`` is not a run folder (no config.json), a record in
        state "unreadable" when config.json is damaged."""
        run_dir = Path(path)
        if not (run_dir / "config.json").is_file():
            return None
        try:
            return cls.open(run_dir)
        except (RecordError, OSError):
            pass
        # config.json that is JSON with an "experiment" object but does not make a config (a field missing or
        # unknown): listed with what it says and the state of its status.json; anything else: "unreadable"
        try:
            doc = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("experiment"), dict):
            state, status = _read_state(run_dir)
            return cls(run_dir, doc, None, None, state, status)
        return cls(run_dir, None, None, None, UNREADABLE, {})

    # ---------------------------------------------------------------- the experiment (stored once, in config)
    def _exp(self, key: str, default):
        if self.config is not None:
            return getattr(self.config, key)
        exp = _block(self.doc, "experiment") or {}
        return exp.get(key, default)

    @property
    def step(self) -> str:
        return self._exp("step", "?")

    @property
    def backbone(self) -> str:
        return self._exp("backbone", "?")

    @property
    def hidden_size(self) -> int | None:
        return self._exp("hidden_size", None)

    @property
    def num_layers(self) -> int | None:
        return self._exp("num_layers", None)

    @property
    def arch(self) -> dict[str, Any]:
        """``{"backbone", "hidden_size", "num_layers"}`` as recorded (what checkpoints are checked against), for
        MP/GMP ``poly``, the orders (models/poly.py ``PolySpec.to_dict``), for a delta family ``thx`` and ``thh``."""
        if not self.config:
            return {}
        arch = {k: getattr(self.config, k) for k in ARCH_FIELDS}
        spec = self.config.poly_spec()
        if spec is not None:
            arch["poly"] = spec.to_dict()
        arch.update(artifacts.delta_fields(self.config))
        return arch

    # ---------------------------------------------------------------- config.json blocks
    @property
    def config_path(self) -> Path:
        return self.run_dir / "config.json"

    @property
    def device(self) -> dict[str, Any]:
        return _block(self.doc, "device") or {}

    @property
    def pa(self) -> dict[str, Any] | None:
        return _block(self.doc, "pa")

    def pa_checkpoint(self, run: str, needed_for: str) -> tuple[Path, str]:
        """(path, SHA-256) of the frozen PA checkpoint config.json's ``pa`` block names, checked against its
        ``pa.sha256``. ``run`` ("the DPD run") and ``needed_for`` (what the PA is for) complete the messages.

        Raises:
            PACheckpointError: no ``pa.checkpoint``, no file there, or a file whose SHA-256 differs.
        """
        block = self.pa or {}
        ckpt = Path(str(block.get("checkpoint") or ""))
        if not block.get("checkpoint") or not ckpt.is_file():
            raise PACheckpointError(f"{self.config_path}: field 'pa.checkpoint' names {ckpt}, which is not there (the "
                                    f"PA run was moved or removed); {needed_for}")
        sha = artifacts.file_sha256(ckpt)
        if block.get("sha256") and sha != block["sha256"]:
            raise PACheckpointError(f"{ckpt}: the PA checkpoint changed since {run} (its SHA-256 differs from "
                                    f"'pa.sha256' in {self.config_path}); {needed_for}")
        return ckpt, sha

    @property
    def model(self) -> dict[str, Any]:
        return _block(self.doc, "model") or {}

    @property
    def gain(self) -> float | None:
        return (_block(self.doc, "gain") or {}).get("value")

    @property
    def gain_rule(self) -> str | None:
        return (_block(self.doc, "gain") or {}).get("rule")

    @property
    def selection_metric(self) -> str | None:
        return self.doc.get("selection_metric") or self.status_doc.get("selection_metric")

    @property
    def training(self) -> dict[str, Any]:
        return _block(self.doc, "training") or {}

    # ---------------------------------------------------------------- status.json
    @property
    def status(self) -> str:
        """Alias of :attr:`state` (the listing's callers read ``r.status``)."""
        return self.state


    @property
    def best_epoch(self) -> int | None:
        return self.status_doc.get("best_epoch")

    @property
    def best_value(self) -> float | None:
        return self.status_doc.get("best_value")

    @property
    def test_metrics(self) -> dict[str, float]:
        return dict(self.status_doc.get("test_metrics") or {})

    @property
    def val_metrics(self) -> dict[str, float]:
        return dict(self.status_doc.get("val_metrics") or {})

    @property
    def message(self) -> str | None:
        return self.status_doc.get("message")

    @property
    def label(self) -> str:
        best = self.best_value
        best_s = f" · best {best:.2f}" if isinstance(best, (int, float)) else ""
        return f"{self.run_id} ({self.state}{best_s})"

    # ---------------------------------------------------------------- files
    @property
    def best_checkpoint(self) -> Path:
        return self.run_dir / "best.pt"

    @property
    def last_checkpoint(self) -> Path:
        return self.run_dir / "last.pt"

    @property
    def results_path(self) -> Path:
        return self.run_dir / "results.h5"

    @property
    def log_path(self) -> Path:
        return self.run_dir / "log.txt"


    def history(self) -> list[dict[str, Any]]:
        """history.csv's rows, numbers parsed (int, float, else text); [] when the file is missing. Raises
        RecordError for an unreadable file or a row that does not match the header (file and line named)."""
        p = self.run_dir / "history.csv"
        if not p.is_file():
            return []
        try:
            rows = artifacts.read_history_csv(p)
        except artifacts.HistoryFormatError as exc:  # names the file and the line already
            raise RecordError(str(exc)) from exc
        except (OSError, ValueError) as exc:
            raise RecordError(f"{p}: cannot read the history ({exc})") from exc
        return [{k: _number(v) for k, v in r.items()} for r in rows]

    @property
    def metric_profile(self) -> str:
        """The metric profile the run's numbers follow (config.json ``experiment.metric_profile``; a run recorded
        before profiles existed: the default)."""
        return self._exp("metric_profile", ExperimentConfig.metric_profile)

    @property
    def kernel(self) -> KernelRun:
        """The recurrence kernels asked for and run (config.json ``device.kernel``; kernels/record.py)."""
        return read_kernel(self.doc)

    @property
    def quantized(self) -> dict[str, dict[str, Any]]:
        """The quantised evaluations of a DPD run (quantized.json, export/quantized.py), by bit-width label (e.g.
        ``W8A8``); {} when there are none or the file cannot be read."""
        try:
            doc = json.loads((self.run_dir / QUANTIZED_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        evals = doc.get("evaluations") if isinstance(doc, dict) else None
        return {str(k): v for k, v in evals.items() if isinstance(v, dict)} if isinstance(evals, dict) else {}

    @property
    def qat(self) -> dict[str, Any] | None:
        """A quantisation-aware fine-tune's config.json ``qat`` block (parent, bit widths, plan), else None."""
        return _block(self.doc, "qat")

    @property
    def parent_run(self) -> str | None:
        """The run a fine-tune started from (config.json ``qat`` or ``finetune`` block), else None."""
        block = _block(self.doc, "qat") or _block(self.doc, "finetune") or {}
        return block.get("parent_run")

    def read_results(self) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """results.h5 read back: (root attributes, ``{split: {"x", "target", "prediction"[, "dpd_output"]: (N, 2)
        float32 arrays, "attrs": {...}}}``).

        Raises:
            RecordError: no results.h5 (the run did not finish), or one that cannot be read / lacks a dataset.
        """
        import h5py  # 0.07 s: see runs/writer.py ``results_image``

        p = self.results_path
        if not p.is_file():
            raise RecordError(f"{p}: no results file (the run {self.run_id} did not finish)")
        try:
            with h5py.File(p, "r") as f:
                attrs = {k: _plain(v) for k, v in f.attrs.items()}
                splits: dict[str, dict[str, Any]] = {}
                for name in ("val", "test"):
                    if name not in f:
                        continue
                    g = f[name]
                    d: dict[str, Any] = {"attrs": {k: _plain(v) for k, v in g.attrs.items()}}
                    for k in ("x", "target", "prediction", "dpd_output"):
                        if k in g:
                            d[k] = g[k][()]
                    for k in ("x", "target", "prediction"):
                        if k not in d:
                            raise RecordError(f"{p}: dataset '{name}/{k}' is missing")
                    splits[name] = d
        except OSError as exc:
            raise RecordError(f"{p}: cannot read the results ({exc})") from exc
        return attrs, splits

    def __repr__(self) -> str:
        return f"RunRecord({self.run_id!r}, step={self.step!r}, state={self.state!r})"


def _block(doc: dict, key: str) -> dict | None:
    v = doc.get(key)
    return v if isinstance(v, dict) else None


def _plain(v):
    """An HDF5 attribute as a plain Python value (NumPy scalars → int/float/bool, bytes → str)."""
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v.item() if hasattr(v, "item") and getattr(v, "ndim", 1) == 0 else v


def _number(text: str):
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _read_config(cfg_path: Path) -> tuple[dict, ExperimentConfig, DatasetRef]:
    try:
        doc = json.loads(cfg_path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RecordError(f"{cfg_path}: cannot read the run's configuration ({exc})") from exc
    except ValueError as exc:
        raise RecordError(f"{cfg_path}: not valid JSON ({exc})") from exc
    exp = doc.get("experiment") if isinstance(doc, dict) else None
    if not isinstance(exp, dict):
        raise RecordError(f"{cfg_path}: field 'experiment' is missing or not an object (not a run's configuration)")
    schema = doc.get("schema", 1)
    if schema not in READABLE_SCHEMAS:
        raise RecordError(f"{cfg_path}: field 'schema' is {schema!r}; this version reads schemas "
                          f"{', '.join(map(str, READABLE_SCHEMAS))}")
    for k in ("step", *ARCH_FIELDS):
        if k not in exp:
            raise RecordError(f"{cfg_path}: field 'experiment.{k}' is missing")
    for k in ("hidden_size", "num_layers"):
        v = exp[k]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise RecordError(f"{cfg_path}: field 'experiment.{k}' is {v!r}, expected a positive integer")
    try:
        config = ExperimentConfig.from_dict(exp)
    except ConfigError as exc:
        raise RecordError(f"{cfg_path}: field 'experiment.{exc.field}': {exc}") from exc
    except TypeError as exc:
        raise RecordError(f"{cfg_path}: field 'experiment': {exc}") from exc
    dataset = DatasetRef.from_record(doc.get("dataset"), schema, exp.get("dataset"), recorded_in=str(cfg_path))
    return doc, config, dataset


def _read_state(run_dir: Path) -> tuple[str, dict[str, Any]]:
    """(state, raw status.json). No status.json, or queued/running under a gone process: "interrupted"; one that
    is not a JSON object: "unreadable"; "damaged": a final state whose selected epoch's ``best.pt`` is not a zip
    container (torch.save's; checked without torch) or whose ``history.csv`` is not the writer's table, or a
    "succeeded" one whose ``results.h5`` lacks the HDF5 signature."""
    p = run_dir / "status.json"
    try:
        st = json.loads(p.read_text(encoding="utf-8"))
        if not isinstance(st, dict):
            raise ValueError("not an object")
    except (OSError, ValueError):
        return (UNREADABLE if p.exists() else "interrupted"), {}
    state = st.get("state", "unknown")
    if not isinstance(state, str):
        return UNREADABLE, st
    if state in LIVE_STATES and owner_gone(st):
        state = "interrupted"
    elif state not in LIVE_STATES and st.get("best_epoch") is not None and not _is_checkpoint_file(run_dir / "best.pt"):
        state = DAMAGED
    elif state == "succeeded" and (run_dir / "results.h5").exists() and not _is_hdf5_file(run_dir / "results.h5"):
        state = DAMAGED
    elif state not in LIVE_STATES and not _history_readable(run_dir / "history.csv"):
        state = DAMAGED
    return state, st


def _history_readable(path: Path) -> bool:
    """False when ``path`` exists and is not a history table (a missing one is not damage: a run cancelled before
    its first epoch may have none)."""
    try:
        artifacts.read_history_csv(path)
    except FileNotFoundError:
        return True
    except (OSError, ValueError):  # HistoryFormatError, UnicodeDecodeError
        return False
    return True


def _is_checkpoint_file(path: Path) -> bool:
    try:
        return path.is_file() and zipfile.is_zipfile(path)
    except OSError:
        return False



def _is_hdf5_file(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(8) == HDF5_MAGIC
    except OSError:
        return False


def list_records(runs_dir: Path, step: str | None = None) -> list[RunRecord]:
    """Every run folder under ``runs_dir``, newest first (folder names start with the date); ``step`` filters by
    "pa"/"dpd". Never raises for a damaged run: it is listed as "unreadable"."""
    out: list[RunRecord] = []
    if not runs_dir.is_dir():
        return out
    for d in sorted(runs_dir.iterdir(), reverse=True):
        if not d.is_dir():
            continue
        rec = RunRecord.read(d)
        if rec is None or (step and rec.step != step):
            continue
        out.append(rec)
    return out


# ====================================================================================================== pin
#: a kept ("pinned") run's mark in its folder, written by runs/writer.py ``set_pinned``; retention never removes it
PIN_FILE = "pinned.json"


def read_pinned(run_dir: str | Path) -> bool:
    """Whether the run at ``run_dir`` is kept: no pinned.json → False (scratch); ``{"pinned": bool}`` → that value;
    a pinned.json that cannot be read or has another shape → True (retention never removes a run on a doubt)."""
    p = Path(run_dir) / PIN_FILE
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        return True
    v = doc.get("pinned") if isinstance(doc, dict) else None
    return v if isinstance(v, bool) else True


RunRecord.pinned = property(lambda self: read_pinned(self.run_dir),
                            doc="Whether the run is kept (pinned.json, :func:`read_pinned`); read at each access.")
