"""Scoring a condition's trials on its test split, as OpenDPD 2.4.2's Arena judges them [opendpd/core/arena_engine.py
``judge_case``, ``calibrate_linear_baseline``; arena.py ``observation_quality``, ``_budget_result``]:

* The trial's cascade output on the test split comes from its run's results.h5 (the selected checkpoint, evaluated
  with ``evaluation = "overlap"``: DPD on overlap windows, the peak limiter, the frozen PA over the whole split).
* The reference is g·x_test with the condition's (protocol's) target gain g; arena/metrics.py computes NMSE, IBE,
  EVM, ACLR and the output power error on the metric window.
* The common linear baseline: u0 = limit(α·x_test) through the same PA, α a complex scale calibrated once on the
  first 4096 training inputs: its phase undoes the PA's average rotation (−∠β, β = Σ conj(x)·PA(x) / Σ|x|²) and its
  magnitude is found by 18 bisection steps on [0.01, 2] so that mean |PA(limit(α x))|² = mean |g x|².
* q = 0.5·ΔEVM + 0.5·ΔACLR_worse against that baseline (metrics.py ``quality_db``); the power gate: |power error|
  ≤ the protocol's gate on every seed.
* The floor (ours, not the Arena's): the ACLR_L/R [dBc] of g·x_test itself, scored as the trials are (metrics.py
  ``floor_aclr``): a DPD whose output equals its target measures exactly this, so no model that matches its target
  measures below it.
* With the protocol's ``legacy_aclr`` flag (``prep.judge["legacy_aclr"]``), trials, baseline and floor also carry
  the ACLR in OpenDPD 2.2.1's convention (metrics.py ``legacy_scores``: ``aclr_legacy_l_db``, ``aclr_legacy_r_db``,
  ``aclr_legacy_db``) [dBc].
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..runs.record import RunRecord
from ..runs.workspace import Workspace
from ..training.pa_source import load_pa_for_dpd
from .metrics import arena_metrics, floor_aclr, quality_db
from .prepare import Prepared

__all__ = ["baseline_scores", "calibrate_baseline", "floor_scores", "judge_trial", "pa_output", "target"]

PROBE = 4096
BISECTION_STEPS = 18


def pa_output(pa, iq: np.ndarray, device="cpu") -> np.ndarray:
    """The PA over one whole sequence ``iq`` (N, 2) (continuous state; long sequences in chunks, kernels/)."""
    pa = pa.to(device).eval()
    with torch.inference_mode():
        x = torch.from_numpy(np.ascontiguousarray(iq, dtype=np.float32)).to(device)[None]
        return pa(x)[0].cpu().numpy()


def limit_array(iq: np.ndarray, peak: float | None) -> np.ndarray:
    """``iq·min(1, peak/max(|iq|, 1e-12))`` per sample, float32 (the Cascade's limiter, on arrays)."""
    if peak is None:
        return np.asarray(iq, dtype=np.float32)
    amp = np.linalg.norm(iq, axis=-1, keepdims=True)
    return np.asarray(iq * np.minimum(peak / np.maximum(amp, 1e-12), 1.0), dtype=np.float32)


def _scaled(iq: np.ndarray, value: complex) -> np.ndarray:
    z = (iq[:, 0].astype(np.float64) + 1j * iq[:, 1]) * value
    return np.stack((z.real, z.imag), axis=-1).astype(np.float32)


def calibrate_baseline(pa, x_train: np.ndarray, gain: float, peak: float | None, device="cpu") -> complex:
    """α of the common linear baseline (module docstring)."""
    probe = np.asarray(x_train[:PROBE], dtype=np.float32)
    y = pa_output(pa, probe, device)
    pc = probe[:, 0].astype(np.float64) + 1j * probe[:, 1]
    yc = y[:, 0].astype(np.float64) + 1j * y[:, 1]
    phase = np.exp(-1j * np.angle(np.vdot(pc, yc) / np.vdot(pc, pc)))
    target = float(np.mean(np.square((gain * probe).astype(np.float64))))
    lo, hi = 0.01, 2.0
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2
        out = pa_output(pa, limit_array(_scaled(probe, mid * phase), peak), device)
        if float(np.mean(np.square(out.astype(np.float64)))) < target:
            lo = mid
        else:
            hi = mid
    return complex((lo + hi) / 2 * phase)


def baseline_key(prep: Prepared) -> dict[str, Any]:
    """What a cached baseline was scored with: PA run, gain, peak, window, nperseg, and the ACLR's conventions where
    not the defaults (so a cache written before they existed stays valid for protocols without them)."""
    j = prep.judge
    key = {"pa_run": prep.pa_run, "gain": j["gain"], "peak": j["peak"], "window": list(j["window"]),
           "nperseg": j["signal"]["nperseg"]}
    if j.get("legacy_aclr"):
        key["legacy_aclr"] = True
    segments = j["signal"].get("segments", "welch")
    if segments != "welch":
        key["aclr_segments"] = segments
    return key


def baseline_scores(workspace: Workspace, prep: Prepared, device="cpu") -> dict[str, Any]:
    """The condition's baseline scores (cached in ``<condition folder>/baseline.json`` under :func:`baseline_key`)."""
    j = prep.judge
    legacy = bool(j.get("legacy_aclr"))
    key = baseline_key(prep)
    cache = prep.folder / "baseline.json"
    try:
        doc = json.loads(cache.read_text())
        if doc.get("key") == key:
            return doc["scores"]
    except (OSError, ValueError):
        pass
    pa, _ = load_pa_for_dpd(workspace, prep.pa_run)
    ds = prep.dataset
    alpha = calibrate_baseline(pa, ds.train.x, j["gain"], j["peak"], device)
    x = ds.test.x
    y0 = pa_output(pa, limit_array(_scaled(x, alpha), j["peak"]), device)
    scores = arena_metrics(y0, j["gain"] * x, j["signal"], tuple(j["window"]), j["grid"], j["start"], legacy)
    scores.update(alpha_re=alpha.real, alpha_im=alpha.imag)
    from ..atomic import atomic_write_json
    atomic_write_json(cache, {"key": key, "scores": scores})
    return scores


def target(x: np.ndarray, gain: float) -> np.ndarray:
    """The reference g·x of a split's input ``x`` (N, 2), float32 (computed in float64)."""
    return (gain * np.asarray(x, dtype=np.float64)).astype(np.float32)


def floor_scores(prep: Prepared) -> dict[str, float]:
    """The condition's floor (module docstring): ``aclr_l_db, aclr_r_db, aclr_db`` (worse side) [dBc] of g·x_test on
    the test metric window with the condition's fs, bw, n_sub_ch and nperseg (with the legacy flag, also the
    ``aclr_legacy_*`` keys, of the whole split)."""
    j = prep.judge
    return floor_aclr(target(prep.dataset.test.x, j["gain"]), j["signal"], tuple(j["window"]),
                      bool(j.get("legacy_aclr")))


def judge_trial(run_dir: str | Path, prep: Prepared, baseline: dict[str, Any], gate_db: float) -> dict[str, Any]:
    """One trial's test scores: arena/metrics.py's, ``quality_db``, ``gate_ok``, the selected epoch, parameters and
    MACs/sample. Raises RecordError when the run has no results (it did not finish)."""
    rec = RunRecord.open(Path(run_dir))
    _, splits = rec.read_results()
    test = splits["test"]
    j = prep.judge
    ref = target(test["x"], j["gain"])
    pred = np.asarray(test["prediction"])
    if not np.isfinite(pred).all():
        raise FloatingPointError(f"{rec.results_path}: the cascade output has non-finite samples")
    scores = arena_metrics(pred, ref, j["signal"], tuple(j["window"]), j["grid"], j["start"],
                           bool(j.get("legacy_aclr")))
    scores["quality_db"] = quality_db(scores, baseline)
    scores["gate_ok"] = bool(abs(scores["power_error_db"]) <= gate_db)
    u = test.get("dpd_output")
    if u is not None and j["peak"]:
        amp = np.linalg.norm(np.asarray(u, dtype=np.float64), axis=1)
        scores["limited_fraction"] = float(np.mean(amp >= j["peak"] * (1 - 1e-6)))
    model = rec.model
    scores.update(run_id=rec.run_id, selected_epoch=rec.status_doc.get("best_epoch"),
                  params=model.get("params"), macs_per_sample=model.get("macs_per_sample"))
    return {k: float(v) if isinstance(v, np.floating) else v for k, v in scores.items()}
