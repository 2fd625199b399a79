"""The quantised DPD through the frozen PA: metrics of a DPD run's integer model, kept beside its float metrics.

At given bit widths (quant/plan.py ``QuantSpec``) best.pt is lowered (quant/lower.py) and run in the bit-exact integer
reference (quant/backends.py ``IntBackend``) over val and test, segmented as the run's evaluation; its output u_q
goes through the run's frozen PA (SHA-256 checked) in float32 and is scored against g·x under the run's metric
profile, the float model's u beside it. Activation formats: a quantisation-aware run's recorded plan at its own bit
widths, else a calibration on the training split. Kept in ``quantized.json`` (runs/writer.py ``write_quantized``).
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .. import __version__
from ..data.segments import segment, unsegment
from ..metrics.profiles import compute_profile_metrics
from ..models import build_from_arch
from ..quant.backends import IntBackend
from ..quant.lower import LoweringError, lower
from ..quant.plan import QuantPlan, calibrate
from ..config import QuantError, QuantSpec
from ..runs import artifacts
from ..runs.record import DatasetChanged, DatasetUnavailable, PACheckpointError, RecordError, RunRecord
from ..runs.writer import write_quantized

__all__ = ["QuantEvalError", "evaluate_quantized", "save_quantized", "load_dpd", "load_run_models", "quant_plan_for",
           "QUANT_FORMAT"]

QUANT_FORMAT = "dpd-desktop-quantized-1"


class QuantEvalError(ValueError):
    """The run cannot be quantised or evaluated: the message names the run, file or field."""


def _arch_of(block: dict[str, Any]) -> dict[str, Any]:
    arch = {k: block.get(k) for k in artifacts.ARCH_FIELDS}
    if block.get("poly") is not None:
        arch["poly"] = block["poly"]
    return arch


def load_dpd(rec: RunRecord):
    """The DPD model of a DPD run's best.pt (float32, CPU, eval mode).

    Raises:
        QuantEvalError: not a DPD run, no best.pt, an architecture mismatch (naming the file and field).
    """
    if rec.step != "dpd":
        hint = " (a PA run is the surrogate a DPD trains through; export the DPD run trained through it)" \
            if rec.step == "pa" else ""
        raise QuantEvalError(f"{rec.config_path}: field 'experiment.step' is {rec.step!r}; a DPD run is needed{hint}")
    ckpt = rec.best_checkpoint
    if not ckpt.is_file():
        raise QuantEvalError(f"{ckpt}: the run has no selected checkpoint (best.pt): did it finish an epoch?")
    try:
        dpd = build_from_arch(rec.arch)
        artifacts.load_state_checked(dpd, ckpt, rec.arch)
    except artifacts.CheckpointError as exc:
        raise QuantEvalError(str(exc)) from exc
    return dpd.eval()


def load_run_models(rec: RunRecord):
    """(DPD model, frozen PA model, info) of a DPD run, both float32 on the CPU in eval mode.

    Raises:
        QuantEvalError: as :func:`load_dpd`; the PA checkpoint missing or changed since the run (its SHA-256
            differs from config.json's ``pa.sha256``).
    """
    dpd = load_dpd(rec)
    ckpt = rec.best_checkpoint
    pa_block = rec.pa or {}
    try:
        pa_ckpt, sha = rec.pa_checkpoint("the DPD run", "the quantised DPD cannot be scored through its PA")
    except PACheckpointError as exc:
        raise QuantEvalError(str(exc)) from exc
    try:
        pa = build_from_arch(_arch_of(pa_block))
        artifacts.load_state_checked(pa, pa_ckpt, _arch_of(pa_block))
    except (artifacts.CheckpointError, KeyError, TypeError, ValueError) as exc:
        raise QuantEvalError(f"{pa_ckpt}: {exc}") from exc
    pa.eval()
    return dpd, pa, {"checkpoint": str(ckpt), "sha256": artifacts.file_sha256(ckpt), "pa_checkpoint": str(pa_ckpt),
                     "pa_sha256": sha}


def quant_plan_for(rec: RunRecord, model, spec: QuantSpec, dataset) -> tuple[QuantPlan, str]:
    """(plan, where it came from): a quantisation-aware run's recorded plan for its own bit widths, else a
    calibration of ``model`` on the training split of ``dataset``."""
    qat = rec.doc.get("qat") if isinstance(rec.doc.get("qat"), dict) else None
    if qat and qat.get("spec") == spec.to_dict() and isinstance(qat.get("plan"), dict):
        try:
            return QuantPlan.from_dict(qat["plan"]), f"recorded by the quantisation-aware run ({rec.config_path})"
        except QuantError as exc:
            raise QuantEvalError(f"{rec.config_path}: field 'qat.plan': {exc}") from exc
    nps = int(dataset.spec.nperseg)
    segs = segment(dataset.train.x, nps)
    what = (f"float model on the training split of {dataset.name} ({segs.shape[0]} segments of {nps} samples, zero "
            "state each)")
    return calibrate(lower(model), segs, spec, what), "calibrated on the training split"


def _forward(module, segs: np.ndarray, batch: int) -> np.ndarray:
    x = torch.from_numpy(np.ascontiguousarray(segs, dtype=np.float32))
    with torch.inference_mode():
        return torch.cat([module(x[i:i + batch]) for i in range(0, x.shape[0], batch)], dim=0).numpy()


def int_output(graph, plan: QuantPlan, segs: np.ndarray, batch: int = 64) -> tuple[np.ndarray, dict[str, int]]:
    """The integer reference's output (dequantised, float64) on (S, N, 2) segments, and the words it saturated per
    tensor."""
    parts, sat = [], {}
    for i in range(0, segs.shape[0], batch):
        ib = IntBackend(plan)
        parts.append(graph.run(ib, segs[i:i + batch]))
        for k, n in ib.saturated.items():
            sat[k] = sat.get(k, 0) + n
    return np.concatenate(parts, axis=0), sat


def _u_error(uq: np.ndarray, uf: np.ndarray) -> dict[str, float]:
    e = uq.astype(np.float64) - uf.astype(np.float64)
    p_e = float(np.sum(e ** 2))
    p_u = float(np.sum(uf.astype(np.float64) ** 2))
    return {"max_abs": float(np.max(np.abs(e))) if e.size else 0.0,
            "rel_error_db": 10 * math.log10(p_e / p_u) if p_e > 0 and p_u > 0 else float("-inf")}


def evaluate_quantized(run_dir: str | Path, spec: QuantSpec, dataset=None, plan: QuantPlan | None = None,
                       models=None) -> dict[str, Any]:
    """Score a DPD run's integer model at ``spec`` through its frozen PA (module docstring).

    ``dataset`` (checked against the record), ``plan`` (None: :func:`quant_plan_for`) and ``models``
    (``load_run_models(rec)``): when already loaded.

    Returns:
        The ``quantized.json`` entry: ``label``, ``spec``, ``plan`` and ``plan_source``, ``metric_profile``,
        ``metrics`` / ``float_metrics`` {split: {NMSE, EVM, ACLR_L, ACLR_R, ACLR_AVG}} (dB / dBc), ``u_error``
        {split: {max_abs, rel_error_db}} (u_q against the float u), ``saturated`` {split: {tensor: words clipped}}
        (the padded tail of the last segment included), the checkpoints' SHA-256, time and version.
    Raises:
        QuantEvalError: see :func:`load_run_models`; a dataset that cannot be reloaded; a family without a lowering.
    """
    spec = spec.check()
    try:
        rec = RunRecord.open(run_dir)
    except RecordError as exc:
        raise QuantEvalError(str(exc)) from exc
    dpd, pa, info = models if models is not None else load_run_models(rec)
    try:
        ds = rec.dataset.load(dataset)
    except (DatasetChanged, DatasetUnavailable) as exc:
        raise QuantEvalError(str(exc)) from exc
    try:
        graph = lower(dpd)
        if plan is None:
            plan, source = quant_plan_for(rec, dpd, spec, ds)
        else:
            source = "given"
    except LoweringError as exc:
        raise QuantEvalError(f"{rec.config_path}: {exc}") from exc
    gain = rec.gain
    if gain is None:
        raise QuantEvalError(f"{rec.config_path}: field 'gain.value' is missing (the DPD target g·x is unknown)")
    nps = int(ds.spec.nperseg)
    bs = int(rec.config.batch_size_eval)
    profile = rec.metric_profile
    metrics, float_metrics, u_err, saturated = {}, {}, {}, {}
    for name in ("val", "test"):
        split = getattr(ds, name)
        n = split.x.shape[0]
        x64 = getattr(split, "x64", None)
        target = ((x64 if x64 is not None else split.x.astype(np.float64)) * gain).astype(np.float32)
        segs = segment(split.x, nps)
        t_seg = segment(target, nps)
        uq, saturated[name] = int_output(graph, plan, segs, bs)
        uf = _forward(dpd, segs, bs)
        yq = _forward(pa, uq.astype(np.float32), bs)
        yf = _forward(pa, uf, bs)
        metrics[name] = {k: float(v) for k, v in compute_profile_metrics(profile, yq, t_seg, ds.spec, n).items()}
        float_metrics[name] = {k: float(v) for k, v in
                               compute_profile_metrics(profile, yf, t_seg, ds.spec, n).items()}
        u_err[name] = _u_error(unsegment(uq, n), unsegment(uf, n))
    return {"format": QUANT_FORMAT, "label": spec.label, "spec": spec.to_dict(), "plan_source": source,
            "plan": plan.to_dict(), "metric_profile": profile, "metrics": metrics, "float_metrics": float_metrics,
            "u_error": u_err, "saturated": saturated, "checkpoint_sha256": info["sha256"],
            "pa_checkpoint_sha256": info["pa_sha256"],
            "qat": rec.config.qat, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "dpd_desktop_version": __version__}


def save_quantized(run_dir: str | Path, doc: dict[str, Any]) -> Path:
    """Keep ``doc`` in the run folder's quantized.json under its label (runs/writer.py); returns the path."""
    return write_quantized(run_dir, doc)
