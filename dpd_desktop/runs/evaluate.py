"""Re-evaluation of a stored run under a metric profile, without retraining (``dpd-desktop runs evaluate``): results.h5
holds each split's ``x``, ``target`` and ``prediction`` (cut to its real samples) and config.json the dataset spec,
all a profile needs (metrics/profiles.py). Caveat, ``legacy-2.2.1`` only: it scores zero-padded segments whose
padded tail was the model's output during the run; here the prediction is padded with zeros, so a split that is not
a whole number of segments may differ slightly (``padded_tail``). ``corrected`` reproduces the run's numbers exactly.
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ..data.segments import segment
from ..metrics.profiles import PROFILE_NOTES, check_profile, compute_profile_metrics
from .record import RecordError, RunRecord
from .writer import write_evaluation

__all__ = ["evaluate_run", "save_evaluation"]

_SPEC_KEYS = ("sample_rate_hz", "bw_main_hz", "n_sub_ch", "nperseg")


def _spec_of(rec: RunRecord, attrs: dict[str, Any]):
    spec = dict(rec.dataset.spec) if rec.dataset is not None else {}
    vals = {k: spec.get(k, attrs.get(f"spec_{k}")) for k in _SPEC_KEYS}
    if not vals["nperseg"]:
        raise RecordError(f"{rec.config_path}: field 'dataset.spec.nperseg' is missing, so the run cannot be scored")
    return SimpleNamespace(**vals)


def evaluate_run(run_dir: str | Path, profile: str) -> dict[str, Any]:
    """Score a finished run's stored predictions under ``profile``.

    Returns:
        ``{"run_id", "step", "profile", "profile_note", "recorded_profile", "metrics": {split: {NMSE, EVM, ACLR_L,
        ACLR_R, ACLR_AVG}}, "recorded": {split: the metrics results.h5 holds}, "n_valid": {split: samples},
        "padded_tail": {split: bool}}`` - floats in dB/dBc, NaN where not applicable.

    Raises:
        ValueError: unknown profile. RecordError: not a run folder, no/unreadable results.h5, no spec.
    """
    check_profile(profile)
    rec = RunRecord.open(run_dir)
    attrs, splits = rec.read_results()
    spec = _spec_of(rec, attrs)
    nps = int(spec.nperseg)
    metrics, recorded, n_valid, padded = {}, {}, {}, {}
    for name, d in splits.items():
        n = int(d["prediction"].shape[0])
        pred, target = segment(d["prediction"], nps), segment(d["target"], nps)
        m = compute_profile_metrics(profile, pred, target, spec, n)
        metrics[name] = {k: float(v) for k, v in m.items()}
        recorded[name] = {k: float(d["attrs"][k]) for k in m if k in d["attrs"]}
        n_valid[name] = n
        padded[name] = profile == "legacy-2.2.1" and n % nps != 0
    return {"run_id": rec.run_id, "step": rec.step, "profile": profile, "profile_note": PROFILE_NOTES[profile],
            "recorded_profile": attrs.get("metric_profile", rec.metric_profile), "metrics": metrics,
            "recorded": recorded, "n_valid": n_valid, "padded_tail": padded}


def save_evaluation(run_dir: str | Path, doc: dict[str, Any]) -> Path:
    """Write ``doc`` (from :func:`evaluate_run`) beside results.h5 as ``evaluation-<profile>.json``, atomically,
    through the run folder's writer (runs/writer.py); returns the path."""
    return write_evaluation(run_dir, doc["profile"], doc)
