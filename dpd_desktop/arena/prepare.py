"""A condition made ready for DPD trials: its dataset as an HDF5 file of the workspace and its frozen PA as a PA run.

``arena`` conditions (OpenDPD 2.4.2 calibration records): the resplit capture's train/val/test arrays, the Welch
segment of validation (``validation_nperseg``, 4096 in Arena v6) as the dataset's nperseg; the frozen TRes-GRU's
weights imported as a PA run (training/import_pa.py); the calibration's target gain and peak limit; the test scores
on the signal's own segment (19662), the split's metric window and the EVM grid.

``dataset`` conditions (a folder of the wheel's ``datasets/``, or a path): the dataset copied to HDF5 with
``validation_nperseg`` (default: its own); its PA trained first, as a one-trial sweep of the workspace, with the
condition's ``pa`` settings; the target gain by the trials' rule (the reference's peak rule unless set), the peak
limit the largest training-input magnitude (as the Arena's); the test scores with the dataset's own segment, the
split without its first and last ``frame_length`` samples, EVM = in-band error (no symbol grid); the protocol's
target gain (its ``gain_rule``/``gain_value``, the peak rule by default) for the reference and the power gate.

Written to ``<workspace>/arena/<protocol>/<condition>/``, reused while its fingerprint (``prepared.json``) holds.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..config import ConfigError, ExperimentConfig
from ..data import IQDataset, Split, load_dataset, save_hdf5
from ..atomic import atomic_write_json
from ..runs.workspace import Workspace
from .assets import ArenaAssetError, load_arena_condition
from .metrics import aligned_window
from .protocol import ConditionSpec, Protocol

__all__ = ["Prepared", "prepare_condition"]


@dataclass
class Prepared:
    """A condition ready for trials (module docstring). ``judge`` holds what scoring needs: ``signal`` (fs, bw,
    n_sub_ch, nperseg), ``window`` (first, stop) of the test split, ``grid`` (EVM grid or None), ``start`` (the test
    split's capture index), ``gain``, ``peak``, ``legacy_aclr`` (the protocol's flag: also score ACLR in OpenDPD
    2.2.1's convention)."""

    spec: ConditionSpec
    folder: Path
    dataset_path: str
    dataset: IQDataset
    pa_run: str
    gain_value: float | None
    peak_limit: float | None
    judge: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


def _write_dataset(path: Path, name: str, spec, splits: dict[str, tuple[np.ndarray, np.ndarray]]) -> IQDataset:
    ds = IQDataset(name=name, source=path, spec=spec,
                   **{k: Split(np.asarray(x, np.float32), np.asarray(y, np.float32)) for k, (x, y) in splits.items()})
    if not path.is_file() or load_dataset(path).fingerprint() != ds.fingerprint():
        path.parent.mkdir(parents=True, exist_ok=True)  # only once the inputs were read: no empty folders
        save_hdf5(ds, path)
    return load_dataset(path)


def _check_segments(cond: ConditionSpec, window: tuple[int, int], nperseg: int) -> None:
    """Raises ConfigError("aclr_segments") when ``cond`` scores aligned ACLR windows and no whole nperseg-sample block
    of the test split lies inside its metric ``window``."""
    if cond.aclr_segments != "aligned":
        return
    try:
        aligned_window(window, nperseg)
    except ValueError as exc:
        raise ConfigError("aclr_segments", f"condition {cond.id}: {exc}; use \"welch\" for this split") from None


def _reusable_pa(workspace: Workspace, folder: Path, fingerprint: str) -> str | None:
    p = folder / "prepared.json"
    try:
        doc = json.loads(p.read_text())
        if doc.get("fingerprint") == fingerprint:
            workspace.resolve(doc["pa_run"])
            return doc["pa_run"]
    except (OSError, ValueError, KeyError, FileNotFoundError):
        pass
    return None


def prepare_condition(workspace: Workspace, proto: Protocol, cond: ConditionSpec, assets: Path, *,
                      device: str = "auto", train_pa: Callable[..., str] | None = None,
                      log: Callable[[str], None] = print) -> Prepared:
    """Make ``cond`` ready (module docstring). ``train_pa(config, label)`` trains a dataset condition's PA and
    returns its run id (runner.py passes the sweep machinery). Raises ArenaAssetError, DatasetError, ConfigError."""
    from ..data.spec import DatasetSpec

    folder = workspace.root / "arena" / proto.name / cond.id
    path = folder / "dataset.h5"
    if cond.kind == "arena":
        c = load_arena_condition(assets, cond.calibration, cond.id)
        sig = c.signal
        spec = DatasetSpec(sample_rate_hz=sig["fs"], bw_main_hz=sig["bw"], bw_sub_hz=sig["bw_sub"],
                           n_sub_ch=sig["n_sub_ch"], nperseg=int(cond.validation_nperseg or sig["nperseg"]),
                           dataset_format="hdf5",
                           extra={"description": f"{c.dataset}, OpenDPD 2.4.2 Arena condition {c.id} "
                                                 f"({c.record['split']['method']} split)"})
        ds = _write_dataset(path, f"{c.dataset}-{c.id}", spec,
                            {s: (c.data[f"x_{s}"], c.data[f"y_{s}"]) for s in ("train", "val", "test")})
        _check_segments(cond, c.windows["test"], int(sig["nperseg"]))
        fp = ds.fingerprint()
        pa_run = _reusable_pa(workspace, folder, fp)
        if pa_run is None:
            from ..training.import_pa import import_pa_run

            pa = c.pa
            pa_run, _ = import_pa_run(workspace, ds, str(path), pa["state"], backbone=pa["backbone"],
                                      hidden_size=pa["hidden_size"], num_layers=pa["num_layers"],
                                      metric_profile=proto.metric_profile,
                                      source={"file": pa["file"], "sha256": pa["sha256"],
                                              "note": f"OpenDPD 2.4.2 Arena frozen PA of {c.id}"})
            log(f"arena: {cond.id}: frozen PA {pa['backbone']} H={pa['hidden_size']} imported as run {pa_run}")
        judge = {"signal": sig, "window": c.windows["test"], "grid": c.grid, "start": c.starts["test"],
                 "gain": c.gain, "peak": c.peak}
        info = {"pa": {k: c.pa[k] for k in ("backbone", "hidden_size", "file", "sha256", "validation_nmse_db",
                                            "test_nmse_db")},
                "split": c.record["split"], "gain": c.gain, "peak_limit": c.peak}
        prepared = Prepared(cond, folder, str(path), ds, pa_run, c.gain, c.peak, judge, info)
    else:
        src = Path(cond.dataset)
        if not src.exists():
            src = Path(assets) / "datasets" / cond.dataset
        if not src.exists():
            raise ArenaAssetError(f"{src}: dataset {cond.dataset!r} not found (run `make arena-data`, or give a path)")
        orig = load_dataset(src)
        nps = int(cond.validation_nperseg or orig.spec.nperseg)
        ds = _write_dataset(path, orig.name, replace(orig.spec, nperseg=nps, dataset_format="hdf5"),
                            {s: (getattr(orig, s).x, getattr(orig, s).y) for s in ("train", "val", "test")})
        frame = int(proto.training.get("frame_length", ExperimentConfig.frame_length))
        _check_segments(cond, (frame, ds.test.x.shape[0] - frame), int(orig.spec.nperseg))  # before its PA trains
        fp = ds.fingerprint()
        pa_run = _reusable_pa(workspace, folder, fp)
        if pa_run is None:
            if train_pa is None:
                raise ValueError(f"condition {cond.id}: its PA must be trained (no trainer given)")
            fields_ = {k: proto.training[k] for k in ("frame_length", "stride", "batch_size") if k in proto.training}
            fields_.update({"metric_profile": proto.metric_profile, **cond.pa})
            if cond.max_train_samples:
                fields_.setdefault("max_train_samples", cond.max_train_samples)
            cfg = ExperimentConfig(step="pa", dataset=str(path), device=device, **fields_).validate()
            pa_run = train_pa(cfg, f"arena-{proto.name}-{cond.id}-pa")
            log(f"arena: {cond.id}: PA {cfg.backbone} H={cfg.hidden_size} trained as run {pa_run}")
        x = ds.train.x.astype(np.float64)
        peak = float(np.float32(np.sqrt(np.max(x[:, 0] ** 2 + x[:, 1] ** 2))))
        n_test = ds.test.x.shape[0]
        sig = {"fs": orig.spec.sample_rate_hz, "bw": orig.spec.bw_main_hz, "n_sub_ch": orig.spec.n_sub_ch,
               "nperseg": int(orig.spec.nperseg), "bw_sub": orig.spec.bw_sub_hz}
        from ..training.gain import target_gain

        rule = proto.training.get("gain_rule", ExperimentConfig.gain_rule)
        gain = target_gain(ds, rule, proto.training.get("gain_value")).value
        judge = {"signal": sig, "window": (frame, n_test - frame), "grid": None, "start": 0, "gain": gain,
                 "peak": peak}
        prepared = Prepared(cond, folder, str(path), ds, pa_run, None, peak, judge,
                            {"dataset": str(src), "peak_limit": peak})
    prepared.judge["legacy_aclr"] = bool(proto.legacy_aclr)
    prepared.judge["signal"] = {**prepared.judge["signal"], "segments": cond.aclr_segments}
    atomic_write_json(folder / "prepared.json", {"fingerprint": prepared.dataset.fingerprint(),
                                                 "pa_run": prepared.pa_run, "dataset": prepared.dataset_path,
                                                 "info": prepared.info})
    return prepared
