"""OpenDPD 2.4.2's datasets and Arena v6 assets, as ``make arena-data`` unpacks them from the wheel (git-ignored):

    <root>/datasets/<name>/{train,val,test}_{input,output}.csv, spec.json     the measured datasets
    <root>/opendpd/arena_assets/calibration-v6-apa-b.json                     the Arena condition (splits, gain,
                                                                              peak limit, EVM grid, frozen PA)
    <root>/opendpd/arena_assets/apa-200mhz-b-measured-v4.npz                   the resplit capture (x/y per split)
    <root>/opendpd/arena_assets/apa-200mhz-b-pa-v6.npz                         the frozen TRes-GRU PA's weights
    <root>/opendpd/arena_assets/reference-results-v6-apa-b.json                the Arena v6 leaderboard

Nothing is copied into the package; files are read and their SHA-256 checked against the calibration record
(the wheel's own integrity data) before use.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..runs.artifacts import file_sha256

__all__ = ["ARENA_ASSETS", "ArenaAssetError", "Condition", "default_root", "load_arena_condition",
           "reference_rows"]

ARENA_ASSETS = Path("opendpd") / "arena_assets"
#: where ``make arena-data`` puts the tree, relative to a checkout
DEFAULT_DIR = Path(".ref") / "opendpd-2.4.2-arena"


class ArenaAssetError(ValueError):
    """An asset is missing or does not match its recorded hash; the message names the file."""


def default_root() -> Path:
    """``.ref/opendpd-2.4.2-arena`` of the current folder if it exists, else of this checkout."""
    here = Path.cwd() / DEFAULT_DIR
    if here.is_dir():
        return here
    return Path(__file__).resolve().parents[2] / DEFAULT_DIR


def _checked(path: Path, sha256: str | None) -> Path:
    if not path.is_file():
        raise ArenaAssetError(f"{path}: not found (run `make arena-data`, or pass --assets DIR)")
    if sha256 is not None and file_sha256(path) != sha256:
        raise ArenaAssetError(f"{path}: SHA-256 differs from the calibration record's {sha256[:12]}…")
    return path


@dataclass(frozen=True)
class Condition:
    """One Arena condition (OpenDPD 2.4.2 calibration record, cited field by field where used).

    Attributes:
        id: condition id (``apa-200mhz-b``). dataset: the dataset name. data: ``x_train, y_train, x_val, y_val,
        x_test, y_test`` (N, 2) float32. starts: capture index of each split's first sample. windows: per split the
        metric window (first, stop) in split samples. signal: fs, bandwidth, carriers, nperseg (Hz, samples).
        grid: the EVM grid (carriers, useful samples, prefix). gain: the fixed target gain. peak: the peak limit.
        pa: ``{"backbone", "hidden_size", "num_layers", "state": {key: tensor array}, "sha256", ...}``.
        record: the calibration record itself.
    """

    id: str
    dataset: str
    data: dict[str, np.ndarray]
    starts: dict[str, int]
    windows: dict[str, tuple[int, int]]
    signal: dict[str, Any]
    grid: dict[str, Any]
    gain: float
    peak: float
    pa: dict[str, Any]
    record: dict[str, Any]


def load_arena_condition(root: Path, calibration: str, condition_id: str) -> Condition:
    """Read and check one condition of an Arena calibration file under ``root`` (module docstring).

    Raises:
        ArenaAssetError: a file missing, a hash that differs, or the condition not in the file.
    """
    assets = Path(root) / ARENA_ASSETS
    cal_path = _checked(assets / calibration, None)
    records = json.loads(cal_path.read_text())
    if condition_id not in records:
        raise ArenaAssetError(f"{cal_path}: no condition {condition_id!r} (has {', '.join(records)})")
    m = records[condition_id]
    with np.load(_checked(assets / m["data_file"], m["data_sha256"]), allow_pickle=False) as z:
        data = {k: np.asarray(z[k], dtype=np.float32) for k in z.files}
    t = m["teacher"]
    with np.load(_checked(assets / t["file"], t["sha256"]), allow_pickle=False) as z:
        state = {k: np.array(z[k], copy=True) for k in z.files}
    params = t["model"]["parameters"]
    pa = {"backbone": t["model"]["key"], "hidden_size": int(params["hidden_size"]),
          "num_layers": int(params.get("num_layers", 1)), "state": state, "sha256": t["sha256"],
          "file": t["file"], "validation_nmse_db": t.get("pa_validation_nmse_db"),
          "test_nmse_db": t.get("pa_test_nmse_db")}
    splits = m["stimuli"]["splits"]
    sig = m["signal"]
    signal = {"fs": float(sig["sample_rate_hz"]), "bw": float(sig["bandwidth_hz"]), "n_sub_ch": int(sig["n_sub_ch"]),
              "nperseg": int(sig["nperseg"]), "bw_sub": float(sig.get("sub_channel_bandwidth_hz") or 0) or None}
    return Condition(
        id=condition_id, dataset=m["dataset"], data=data,
        starts={k: int(v[0]) for k, v in m["split"]["boundaries"].items()},
        windows={k: (int(v["metric_start"]), int(v["metric_stop"])) for k, v in splits.items()},
        signal=signal, grid=m["evm_grid"], gain=float(m["reference_gain"]), peak=float(m["peak_limit"]), pa=pa,
        record=m)


def reference_rows(root: Path, results: str) -> list[dict[str, Any]]:
    """The Arena leaderboard's rows (``reference-results-*.json``), as published. Raises ArenaAssetError."""
    path = _checked(Path(root) / ARENA_ASSETS / results, None)
    return json.loads(path.read_text())["rows"]
