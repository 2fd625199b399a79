"""Replay a finished run from its folder (no model, no torch): the history rows and the :class:`PlotData` the live run
showed at its end, :func:`~dpd_desktop.runs.plotdata.build_plot_data` fed results.h5's test arrays (its stored PSD
bit for bit). A DPD's "PA(x) no DPD" baseline comes from its PA run's results.h5 (:func:`pa_baseline`); when that
cannot be used :attr:`Replay.notes` says why. Reading results.h5 takes h5py: call :func:`load_replay` off the GUI
thread.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..data.segments import segment
from ..data.spec import DatasetSpec
from ..metrics import aclr_db
from .events import PlotData
from .plotdata import build_plot_data
from .artifacts import file_sha256
from .record import RecordError, RunRecord
from .states import DAMAGED, UNREADABLE

#: signal names of the plots, as training/evaluation.py ``signal_names`` gives them
SIGNAL_NAMES = {"pa": ("measured y", "predicted ŷ"), "dpd": ("target g·x", "PA(DPD(x))")}
DPD_OUTPUT_NAME = "DPD output u"
BASELINE_NAME = "PA(x) no DPD"  # training/evaluation.py ``plots``


class ReplayError(RecordError):
    """A run folder cannot be replayed; the message names the file and the field (or says why)."""


@dataclass(frozen=True)
class SplitArrays:
    """One split of results.h5: (N, 2) float32 arrays, the stored PSD (Hz, dB/Hz) and the metrics attributes."""

    x: np.ndarray
    target: np.ndarray
    prediction: np.ndarray
    dpd_output: np.ndarray | None
    psd_freq_hz: np.ndarray
    psd_prediction_db: np.ndarray
    metrics: dict[str, float]


@dataclass(frozen=True)
class Replay:
    """A run as the window shows it after its end: ``plots`` and ``test`` None without results.h5; ``notes`` what
    differs from the live view; ``power_change_db`` a DPD's output-power change with vs without DPD [dB]."""

    record: RunRecord
    history: list[dict[str, Any]]
    best_epoch: int | None
    plots: PlotData | None
    test: SplitArrays | None
    notes: tuple[str, ...] = field(default_factory=tuple)
    power_change_db: float | None = None

    @property
    def run_id(self) -> str:
        return self.record.run_id


def spec_of(record: RunRecord) -> DatasetSpec:
    """The run's :class:`DatasetSpec` from config.json ``dataset.spec`` (unknown keys ignored).

    Raises:
        ReplayError: no spec recorded, or its ``nperseg`` is not a positive integer.
    """
    raw = dict(record.dataset.spec) if record.dataset is not None else {}
    names = {f.name for f in dataclasses.fields(DatasetSpec)}
    kw = {k: v for k, v in raw.items() if k in names}
    nps = kw.get("nperseg")
    if isinstance(nps, bool) or not isinstance(nps, int) or nps < 1:
        raise ReplayError(f"{record.config_path}: field 'dataset.spec.nperseg' is {nps!r}, expected a positive "
                          "integer")
    kw.setdefault("split_ratios", {})
    kw.setdefault("dataset_format", "split_csv")
    try:
        return DatasetSpec(**kw)
    except TypeError as exc:
        raise ReplayError(f"{record.config_path}: field 'dataset.spec': {exc}") from exc


def read_split(path: Path, split: str = "test") -> SplitArrays:
    """One split of results.h5 (runs/writer.py ``_fill_results`` layout).

    Raises:
        ReplayError: the file is not HDF5, or the split or one of its datasets is missing.
    """
    import h5py  # 0.07 s, off the window's start-up (the runs browser imports this module)

    try:
        with h5py.File(path, "r") as f:
            if split not in f:
                raise ReplayError(f"{path}: group '{split}' is missing")
            g = f[split]
            arrays = {}
            for name in ("x", "target", "prediction", "psd_freq_hz", "psd_prediction_db"):
                if name not in g:
                    raise ReplayError(f"{path}: dataset '{split}/{name}' is missing")
                arrays[name] = np.asarray(g[name][()])
            u = np.asarray(g["dpd_output"][()]) if "dpd_output" in g else None
            metrics = {str(k): float(v) for k, v in g.attrs.items() if k != "loss"}
    except OSError as exc:
        raise ReplayError(f"{path}: cannot read results ({exc})") from exc
    for name in ("x", "target", "prediction"):
        a = arrays[name]
        if a.ndim != 2 or a.shape[1] != 2:
            raise ReplayError(f"{path}: dataset '{split}/{name}' has shape {a.shape}, expected (N, 2)")
    return SplitArrays(x=arrays["x"].astype(np.float32), target=arrays["target"].astype(np.float32),
                       prediction=arrays["prediction"].astype(np.float32),
                       dpd_output=None if u is None else u.astype(np.float32),
                       psd_freq_hz=arrays["psd_freq_hz"].astype(np.float64),
                       psd_prediction_db=arrays["psd_prediction_db"], metrics=metrics)


def power_change_db(path: Path) -> float | None:
    """The output-power change [dB] of a DPD run's results.h5 (root attribute ``rms_out_diff_db``); None when absent
    or not a finite number. Raises ReplayError when the file cannot be read."""
    import h5py  # see read_split

    try:
        with h5py.File(path, "r") as f:
            v = f.attrs.get("rms_out_diff_db")
    except OSError as exc:
        raise ReplayError(f"{path}: cannot read results ({exc})") from exc
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _aclr_pair(sig: np.ndarray, spec: DatasetSpec) -> tuple[float, float]:
    if not (spec.sample_rate_hz and spec.bw_main_hz and spec.n_sub_ch):
        return math.nan, math.nan
    left, right, _ = aclr_db(segment(sig, spec.nperseg), spec.sample_rate_hz, spec.bw_main_hz, spec.n_sub_ch)
    return float(left), float(right)


@dataclass(frozen=True)
class Baseline:
    """A DPD's "PA(x) no DPD" curve: the PA run's test prediction (N, 2) and its ACLR (left, right) in dBc."""

    signal: np.ndarray
    aclr: tuple[float, float]


def pa_baseline(rec: RunRecord, test: SplitArrays) -> tuple[Baseline | None, str | None]:
    """The baseline of DPD run ``rec`` from its PA run's results.h5: the PA run's selected checkpoint on its test
    split is PA(x) without DPD, when that split's x is the DPD's test x (bitwise) and the PA's best.pt is the one
    the DPD trained through (config.json ``pa.sha256``). Returns ``(baseline, None)`` or ``(None, why not)``."""
    pa = rec.pa or {}
    folder = pa.get("run_dir") or (str(rec.run_dir.parent / pa["run_id"]) if pa.get("run_id") else None)
    if not folder:
        return None, f"{rec.config_path}: field 'pa.run_dir' missing"
    pa_rec = RunRecord.read(folder)
    if pa_rec is None or not pa_rec.results_path.is_file():
        return None, f"the PA run's results ({Path(folder) / 'results.h5'}) are not there"
    want = pa.get("sha256")
    if want and (not pa_rec.best_checkpoint.is_file() or file_sha256(pa_rec.best_checkpoint) != want):
        return None, f"the PA run's {pa_rec.best_checkpoint.name} is not the checkpoint the DPD trained through"
    pa_test = read_split(pa_rec.results_path, "test")
    if not np.array_equal(pa_test.x, test.x):
        return None, "the PA run's test input is not this run's (another dataset or split)"
    same_profile = pa_rec.metric_profile == rec.metric_profile
    aclr = (pa_test.metrics.get("ACLR_L", math.nan), pa_test.metrics.get("ACLR_R", math.nan))
    if not same_profile or not all(map(math.isfinite, aclr)):
        aclr = _aclr_pair(pa_test.prediction, spec_of(rec))
    return Baseline(pa_test.prediction, (float(aclr[0]), float(aclr[1]))), None


def plot_data_of(step: str, split: SplitArrays, spec: DatasetSpec, source: str = "test",
                 baseline: Baseline | None = None) -> PlotData:
    """The PlotData the live run built from this split's evaluation (training/evaluation.py ``plots``), the
    prediction's PSD replaced by the stored one; a DPD's "PA(x) no DPD" when ``baseline`` is given
    (:func:`pa_baseline`)."""
    tname, pname = SIGNAL_NAMES.get(step, SIGNAL_NAMES["pa"])
    signals = {tname: split.target, pname: split.prediction}
    aclr = {}
    if step == "dpd" and baseline is not None:
        signals[BASELINE_NAME] = baseline.signal
        aclr[BASELINE_NAME] = baseline.aclr
    if step == "dpd" and split.dpd_output is not None:
        signals[DPD_OUTPUT_NAME] = split.dpd_output
    aclr.update({pname: (split.metrics.get("ACLR_L", math.nan), split.metrics.get("ACLR_R", math.nan)),
                 tname: _aclr_pair(split.target, spec)})
    pd = build_plot_data(source, split.x, signals, spec, target_name=tname, pred_name=pname, aclr=aclr,
                         error_of=(pname, tname), input_side=(DPD_OUTPUT_NAME,))
    psd = dict(pd.psd)
    if split.psd_prediction_db.shape == pd.psd_freq_mhz.shape:
        psd[pname] = np.asarray(split.psd_prediction_db, dtype=np.float32)
    return dataclasses.replace(pd, psd=psd, psd_freq_mhz=(split.psd_freq_hz / 1e6).astype(np.float32)
                               if split.psd_freq_hz.shape == pd.psd_freq_mhz.shape else pd.psd_freq_mhz)


def load_replay(run_dir: str | Path) -> Replay:
    """Read the run at ``run_dir`` for the window's panels.

    Raises:
        ReplayError / RecordError: the folder is not a run, its config.json or status.json is unreadable, the
            record is damaged (best.pt missing), or history.csv / results.h5 cannot be read; the message says which.
    """
    rec = RunRecord.read(run_dir)
    if rec is None:
        raise ReplayError(f"{run_dir}: not a run folder (no config.json)")
    if rec.state == UNREADABLE or rec.config is None:
        RunRecord.open(run_dir)  # the strict reader raises naming the file and the field
        raise ReplayError(f"{Path(run_dir) / 'status.json'}: unreadable (the run's state cannot be read)")
    notes: list[str] = []
    if rec.state == DAMAGED:
        notes.append(f"damaged: {rec.best_checkpoint} is missing or not a checkpoint (plots from results.h5)")
    history = rec.history()
    plots = test = power = None
    if rec.results_path.is_file():
        test = read_split(rec.results_path, "test")
        baseline = None
        if rec.step == "dpd":
            power = power_change_db(rec.results_path)
            baseline, why = pa_baseline(rec, test)
            if baseline is None:
                notes.append(f"the PA(x) no-DPD baseline is not drawn: {why}")
        plots = plot_data_of(rec.step, test, spec_of(rec), "test", baseline=baseline)
    else:
        notes.append(f"{rec.results_path.name} missing: learning curves only (the run ended before its results)")
    return Replay(record=rec, history=history, best_epoch=rec.best_epoch, plots=plots, test=test,
                  notes=tuple(notes), power_change_db=power)
