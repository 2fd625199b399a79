"""Compare runs: their metrics side by side, their learning curves, their test-split PSD and AM/AM overlays (on the
same test signal only when the runs share a dataset) and a config diff (only the fields that differ).

Everything is read through :class:`~dpd_desktop.runs.record.RunRecord` and results.h5 (runs/replay.py
``read_split``); no model is loaded. Call off the GUI thread (h5py, disk).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..config import ExperimentConfig
from ..metrics.spectra import psd_db
from .plotdata import AMAM_POINTS
from .index import finite, shown_quantized
from .record import RecordError, RunRecord
from .replay import ReplayError, SplitArrays, read_split
from .states import UNREADABLE

#: rows of the metrics table: (label, unit, key of :attr:`RunSummary.metrics`)
METRIC_ROWS = (
    ("test NMSE", "dB", "NMSE"),
    ("test ACLR L", "dBc", "ACLR_L"),
    ("test ACLR R", "dBc", "ACLR_R"),
    ("test ACLR avg", "dBc", "ACLR_AVG"),
    ("test EVM", "dB", "EVM"),
    ("quantised test NMSE", "dB", "q_NMSE"),
    ("quantised test ACLR avg", "dBc", "q_ACLR_AVG"),
    ("quantised test EVM", "dB", "q_EVM"),
    ("params", "", "params"),
    ("MACs/sample", "", "macs_per_sample"),
    ("duration", "s", "wall_s"),
)
#: the rows of the quantised DPD (export/quantized.py; the format shown is runs/index.py ``shown_quantized``'s):
#: left out of a table in which no run has them
QUANT_ROWS = frozenset(k for _, _, k in METRIC_ROWS if k.startswith("q_"))
#: learning-curve series drawn in a comparison: (label, history.csv column)
CURVES = (("val NMSE [dB]", "VAL_NMSE"), ("val ACLR avg [dBc]", "VAL_ACLR_AVG"), ("val EVM [dB]", "VAL_EVM"),
          ("train loss", "TRAIN_LOSS"), ("val loss", "VAL_LOSS"))
#: config.json blocks whose scalar fields enter the config diff besides ``experiment``
_DIFF_BLOCKS = {"dataset": ("name", "kind", "source", "fingerprint"), "model": ("params", "macs_per_sample")}


class CompareError(ValueError):
    """Runs cannot be compared (fewer than two, or one cannot be read); the message names the run and the file."""


@dataclass(frozen=True)
class RunSummary:
    """What a comparison needs of one run: ``metrics`` (:data:`METRIC_ROWS` keys → value or None), ``config``
    (flattened fields: ``experiment.lr``, ``dataset.fingerprint``, …), ``test`` (results.h5's test split, or None)
    and ``error`` (why results.h5 could not be read; the run is still compared by its record)."""

    run_id: str
    run_dir: Path
    state: str
    step: str
    label: str
    dataset_fingerprint: str | None
    dataset_name: str | None
    fs_hz: float | None
    metrics: dict[str, float | None]
    history: list[dict[str, Any]]
    config: dict[str, Any]
    test: SplitArrays | None = None
    error: str | None = None

    def curve(self, column: str) -> tuple[np.ndarray, np.ndarray]:
        """(epoch, value) of a history.csv column; rows without a number are left out."""
        ep, val = [], []
        for i, row in enumerate(self.history):
            v = row.get(column)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                e = row.get("EPOCH", i)
                ep.append(float(e) if isinstance(e, (int, float)) else float(i))
                val.append(float(v))
        return np.asarray(ep), np.asarray(val)

    def psd(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(frequency [MHz], prediction PSD [dB/Hz]) as results.h5 stored them, or None."""
        if self.test is None:
            return None
        return self.test.psd_freq_hz / 1e6, np.asarray(self.test.psd_prediction_db, dtype=np.float64)

    def amam(self, points: int = AMAM_POINTS) -> tuple[np.ndarray, np.ndarray] | None:
        """(|x|, |prediction|) at ``points`` evenly spaced test samples (the PlotData's decimation), or None."""
        if self.test is None:
            return None
        return _amam(self.test.x, self.test.prediction, points)

    def target_amam(self, points: int = AMAM_POINTS) -> tuple[np.ndarray, np.ndarray] | None:
        if self.test is None:
            return None
        return _amam(self.test.x, self.test.target, points)


@dataclass(frozen=True)
class Comparison:
    """Two or more runs. ``same_dataset``: every run recorded the same dataset fingerprint (the PSD and AM/AM
    overlays are then on the same test signal); ``config_diff``: (field, one value per run) for the fields that
    differ, in field order; ``notes``: what the comparison leaves out, in words."""

    runs: list[RunSummary]
    same_dataset: bool
    config_diff: list[tuple[str, tuple[Any, ...]]]
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: (name, frequency [MHz], PSD [dB/Hz]) of the shared reference signal (measured y / target g·x of the first
    #: run's test split, :func:`~dpd_desktop.metrics.spectra.psd_db` on the predictions' frequency grid), or None
    reference_psd: tuple[str, np.ndarray, np.ndarray] | None = None

    def metric_table(self) -> list[tuple[str, str, list[float | None]]]:
        """(label, unit, one value per run) for each of :data:`METRIC_ROWS`."""
        return [(label, unit, [r.metrics.get(key) for r in self.runs]) for label, unit, key in metric_rows(self.runs)]


def metric_rows(runs: Sequence["RunSummary"]) -> list[tuple[str, str, str]]:
    """:data:`METRIC_ROWS` without the quantised rows when none of ``runs`` has a quantised evaluation."""
    return [row for row in METRIC_ROWS
            if row[2] not in QUANT_ROWS or any(r.metrics.get(row[2]) is not None for r in runs)]


def _amam(x: np.ndarray, out: np.ndarray, points: int) -> tuple[np.ndarray, np.ndarray]:
    n = x.shape[0]
    idx = np.linspace(0, n - 1, num=min(points, n)).astype(np.int64)
    mag = lambda a: np.hypot(a[idx, 0].astype(np.float64), a[idx, 1].astype(np.float64))  # noqa: E731
    return mag(x), mag(out)



def flatten_config(rec: RunRecord) -> dict[str, Any]:
    """The fields of a run's config.json that describe it: ``experiment.*`` (``extra`` as JSON text),
    ``experiment.metric_profile`` and ``experiment.kernel`` (config.py's default where the
    run has none), ``device.kernel`` (the kernels that ran, kernels/record.py ``KernelRun.label``), ``dataset.*``
    and ``model.*`` scalars (:data:`_DIFF_BLOCKS`), ``pa.run_id``."""
    out: dict[str, Any] = {}
    exp = rec.doc.get("experiment") if isinstance(rec.doc.get("experiment"), dict) else {}
    for k, v in exp.items():
        out[f"experiment.{k}"] = json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v
    out.setdefault("experiment.metric_profile", ExperimentConfig.metric_profile)
    out.setdefault("experiment.kernel", ExperimentConfig.kernel)
    out["device.kernel"] = rec.kernel.label  # what ran: "fast → reference" when fast fell back
    for block, keys in _DIFF_BLOCKS.items():
        b = rec.doc.get(block) if isinstance(rec.doc.get(block), dict) else {}
        for k in keys:
            out[f"{block}.{k}"] = b.get(k)
    pa = rec.doc.get("pa") if isinstance(rec.doc.get("pa"), dict) else {}
    out["pa.run_id"] = pa.get("run_id")
    if rec.qat:
        out["qat.label"] = rec.qat.get("label")
    if rec.parent_run:
        out["parent_run"] = rec.parent_run
    shown = shown_quantized(rec)
    if shown is not None:
        out["quantized.shown"] = shown[0]
        out["quantized.plan_source"] = shown[1].get("plan_source")
    return out


def config_diff(configs: Sequence[dict[str, Any]]) -> list[tuple[str, tuple[Any, ...]]]:
    """(field, values) for each field whose value is not the same in every config (a missing field is None);
    fields in first-seen order."""
    keys: list[str] = []
    for c in configs:
        keys.extend(k for k in c if k not in keys)
    out = []
    for k in keys:
        values = tuple(c.get(k) for c in configs)
        if any(v != values[0] for v in values[1:]):
            out.append((k, values))
    return out


def summarize(run_dir: str | Path) -> RunSummary:
    """One run's :class:`RunSummary`. Raises CompareError for a folder that is not a readable run (the file and the
    field or line named)."""
    rec = RunRecord.read(run_dir)
    if rec is None:
        raise CompareError(f"{run_dir}: not a run folder (no config.json)")
    if rec.state == UNREADABLE or rec.config is None:
        try:
            RunRecord.open(run_dir)
        except RecordError as exc:
            raise CompareError(str(exc)) from exc
        raise CompareError(f"{Path(run_dir) / 'status.json'}: unreadable, the run cannot be reported")
    test_m = rec.test_metrics
    model = rec.model
    metrics = {k: finite(test_m.get(k)) for k in ("NMSE", "ACLR_L", "ACLR_R", "ACLR_AVG", "EVM")}
    shown = shown_quantized(rec)
    q_test = ((shown[1].get("metrics") or {}).get("test") or {}) if shown is not None else {}
    for k in ("NMSE", "ACLR_AVG", "EVM"):
        metrics[f"q_{k}"] = finite(q_test.get(k)) if isinstance(q_test, dict) else None
    metrics["params"] = finite(model.get("params", model.get("n_params")))
    metrics["macs_per_sample"] = finite(model.get("macs_per_sample"))
    metrics["wall_s"] = finite(rec.status_doc.get("wall_s"))
    test = error = None
    if rec.results_path.is_file():
        try:
            test = read_split(rec.results_path, "test")
        except ReplayError as exc:
            error = str(exc)
    else:
        error = f"{rec.results_path}: missing (no test predictions)"
    try:
        history = rec.history()
    except RecordError as exc:  # a row with an extra or a missing cell: names the file and the line
        raise CompareError(f"{exc}; the run cannot be reported or compared") from exc
    ds = rec.dataset
    spec = dict(ds.spec) if ds is not None else {}
    fs = finite(spec.get("sample_rate_hz"))
    label = f"{rec.run_id} · {str(rec.backbone).upper()}-{rec.hidden_size}"
    return RunSummary(run_id=rec.run_id, run_dir=rec.run_dir, state=rec.state, step=str(rec.step), label=label,
                      dataset_fingerprint=ds.fingerprint if ds else None, dataset_name=ds.name if ds else None,
                      fs_hz=fs, metrics=metrics, history=history, config=flatten_config(rec), test=test,
                      error=error)


def compare_runs(run_dirs: Sequence[str | Path]) -> Comparison:
    """Compare two or more run folders (in the order given). Raises CompareError for fewer, or an unreadable one."""
    if len(run_dirs) < 2:
        raise CompareError(f"a comparison needs two or more runs, got {len(run_dirs)}")
    runs = [summarize(d) for d in run_dirs]
    fps = {r.dataset_fingerprint for r in runs}
    same = len(fps) == 1 and None not in fps
    notes = []
    if not same:
        names = ", ".join(sorted({str(r.dataset_name or r.dataset_fingerprint or "?") for r in runs}))
        notes.append(f"the runs were trained on different datasets ({names}): only the learning curves and the "
                     "metrics are overlaid, not the PSD or AM/AM of the test signal")
    profiles = [str(r.config["experiment.metric_profile"]) for r in runs]
    if len(set(profiles)) > 1:
        notes.append("the runs' metrics follow different metric profiles ("
                     + ", ".join(f"{r.run_id}: {p}" for r, p in zip(runs, profiles))
                     + "): re-score them under one with `dpd-desktop runs evaluate RUN --profile NAME`")
    for r in runs:
        if r.error:
            notes.append(f"{r.run_id}: {r.error}")
    return Comparison(runs=runs, same_dataset=same, config_diff=config_diff([r.config for r in runs]),
                      notes=tuple(notes), reference_psd=reference_psd(runs[0]) if same else None)


def reference_psd(run: RunSummary) -> tuple[str, np.ndarray, np.ndarray] | None:
    """(name, frequency [MHz], PSD [dB/Hz]) of the run's test reference (measured y for a PA, g·x for a DPD) with
    the Welch window of its stored prediction PSD (so both share a frequency grid); None without results.h5 or fs."""
    if run.test is None or not run.fs_hz:
        return None
    n_bins = int(run.test.psd_freq_hz.shape[0])
    f, p = psd_db(run.test.target, run.fs_hz, n_bins)
    return reference_name(run.step), f / 1e6, np.asarray(p, dtype=np.float64)


def reference_name(step: str) -> str:
    """The plots' name of the reference signal (training/evaluation.py ``signal_names``)."""
    return "measured y" if step == "pa" else "target g·x"
