"""``dpd-desktop export RUN --format fixed`` for an MP/GMP run: its coefficients in fixed point, with the integer
model of quant/poly.py. The export folder (written whole, never inside a run folder):

* ``coefficients.csv``: one row per coefficient in basis order, ``kind,order,delay,envelope_delay,re,im,re_hex,
  im_hex,frac,real,imag`` (``re``/``im`` the W-bit words, ``real``/``imag`` the float values they round);
  ``coefficients_mk.csv``: the aligned (MP) words in comm.DPD's M-by-K layout (export/coef_export.py), ``re+imi``;
* ``dpd_coeffs.h``: C99 arrays of the words, the terms' (order, delay, envelope delay) and every fraction;
* ``golden/``: the first test frames, ``x_float.csv`` and the words of ``x``, ``amp``, the envelope powers and
  ``y`` as CSV and HEX (as export/fixed_export.py);
* ``formats.json`` and ``README.md``: the formats, the arithmetic, the integer model against the float one on the
  test split (and a DPD's metrics through its frozen PA).
"""
from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .. import __version__
from ..data.segments import segment
from ..metrics.profiles import compute_profile_metrics
from ..models import POLY_BACKBONES
from ..models.poly import matlab_coefficients
from ..quant import fixed
from ..config import PolySpec, QuantSpec
from ..quant.fixed import QFormat
from ..quant.poly import PolyFixed
from ..runs import artifacts
from .. import atomic
from .coef_export import CoefficientExportError, read_coefficients
from .fixed_export import (POLY_EXPORT_FORMAT, FixedExportError, _golden_csv, _golden_hex, _hex_words,
                           compare_golden, read_golden)
from ..runs.outputs import OutputRefused, check_output, recorded_dataset, write_folder
from .quantized import QuantEvalError, load_run_models
from ..runs.record import DatasetChanged, DatasetUnavailable, RecordError, RunRecord
from ..runs.workspace import Workspace

__all__ = ["PolyFixedError", "export_poly_fixed", "verify_poly_export"]

FORMAT = POLY_EXPORT_FORMAT


class PolyFixedError(ValueError):
    """The run is not an MP/GMP run, or its fixed-point export cannot be made or written; the message says which."""


def _rel_db(a: np.ndarray, b: np.ndarray) -> float:
    e = float(np.sum((a - b) ** 2))
    p = float(np.sum(b ** 2))
    return 10 * np.log10(e / p) if e > 0 and p > 0 else float("-inf")


def _pa_metrics(rec: RunRecord, ds, yq_test: np.ndarray, yf_test: np.ndarray, segs_shape) -> dict[str, Any] | None:
    """For a DPD run through a frozen PA: the test metrics of PA(u) for the integer and the float u."""
    if rec.step != "dpd" or not rec.pa or rec.gain is None:
        return None
    try:
        _, pa, _ = load_run_models(rec)
    except QuantEvalError:
        return None
    nps = segs_shape[1]
    target = (ds.test.x.astype(np.float64) * rec.gain).astype(np.float32)
    t_seg = segment(target, nps)
    out = {}
    for name, u in (("fixed", yq_test), ("float", yf_test)):
        with torch.inference_mode():
            y = pa(torch.from_numpy(u.astype(np.float32))).numpy()
        out[name] = {k: float(v) for k, v in compute_profile_metrics(rec.metric_profile, y, t_seg, ds.spec,
                                                                     ds.test.x.shape[0]).items()}
    return out


def export_poly_fixed(workspace: Workspace, run: str | Path, out: str | Path, *, spec: QuantSpec,
                      golden_frames: int = 4, overwrite: bool = False, dataset=None) -> dict[str, Any]:
    """Export an MP/GMP run's coefficients at ``spec`` into the folder ``out`` (module docstring); returns
    formats.json's content (``error``: the integer model against the float one on the test split).

    Raises:
        PolyFixedError: not an MP/GMP run, no best.pt, bits out of range, a dataset that cannot be reloaded, ``out``
            inside a run folder or existing without ``overwrite``, a write failure.
    """
    try:
        spec = spec.check()
        rec = RunRecord.open(workspace.resolve(run))
        if rec.backbone not in POLY_BACKBONES:
            raise PolyFixedError(f"{rec.config_path}: field 'experiment.backbone' is {rec.backbone!r}; the MP/GMP "
                                 "fixed-point export is for mp and gmp runs")
        target = check_output(out, overwrite=overwrite, folder=True, run_dir=rec.run_dir,
                              workspace=workspace, datasets=[recorded_dataset(rec.dataset)])
        w, pspec, _ = read_coefficients(workspace, rec.run_dir)
        ds = rec.dataset.load(dataset)
    except (ValueError, FileNotFoundError, RecordError, OutputRefused, CoefficientExportError, DatasetChanged,
            DatasetUnavailable) as exc:
        if isinstance(exc, PolyFixedError):
            raise
        raise PolyFixedError(str(exc)) from exc
    pf = PolyFixed(pspec, w, spec)
    nps = int(ds.spec.nperseg)
    pf.calibrate(segment(ds.train.x, nps))
    segs = segment(ds.test.x, nps)
    yq, _ = pf.run_int(segs)
    saturated = dict(pf.saturated)
    yf = pf.run_float(segs)
    n = ds.test.x.shape[0]
    error = {"rel_error_db": _rel_db(yq.reshape(-1, 2)[:n], yf.reshape(-1, 2)[:n]),
             "max_abs": float(np.max(np.abs(yq - yf))), "saturated_words": saturated}
    pa = _pa_metrics(rec, ds, yq, yf, segs.shape)
    t_len = int(rec.config.frame_length)
    frames = max(1, min(golden_frames, n // t_len))
    xg = np.ascontiguousarray(ds.test.x[:frames * t_len].reshape(frames, t_len, 2), dtype=np.float32)
    _, traces = pf.run_int(xg.astype(np.float64))
    meta = {"format": FORMAT, "run_id": rec.run_id, "step": rec.step, "family": rec.backbone,
            "checkpoint_sha256": artifacts.file_sha256(rec.best_checkpoint), **pf.describe(),
            "coef_format": pf.coef_formats[min(pf.orders)].to_dict(), "n_coefficients": len(pf.terms),
            "rounding": fixed.ROUNDING, "saturation": fixed.SATURATION, "headroom": fixed.HEADROOM,
            "calibration": f"training split of {ds.name}, {nps}-sample segments", "error": error,
            "metrics_through_pa": pa, "metric_profile": rec.metric_profile,
            "golden": {"frames": frames, "frame_length": t_len, "input_float": "golden/x_float.csv",
                       "tensors": {k: {"csv": f"golden/{k}.csv", "hex": f"golden/{k}.hex",
                                       "shape": list(v.shape if v.ndim == 3 else (*v.shape, 1)), "frac": int(f),
                                       "bits": _bits(pf, k)} for k, (v, f) in traces.items()}},
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "dpd_desktop_version": __version__}
    files = _files(pf, meta, xg, traces, spec)
    try:
        write_folder(target, lambda tmp: [atomic.atomic_write_bytes(tmp / k, v) for k, v in files.items()])
    except OSError as exc:
        raise PolyFixedError(f"cannot write the export folder {target}: {getattr(exc, 'strerror', None) or exc}") \
            from exc
    meta["folder"] = str(target)
    return meta


def verify_poly_export(folder: str | Path) -> dict[str, Any]:
    """Rebuild the fixed-point MP/GMP from the folder's formats.json and coefficients.csv alone (no checkpoint), run
    it on the golden float input and compare the coefficient words and every golden tensor. Returns ``{"tensors": n,
    "words": n, "mismatches": {tensor: count}}`` as fixed_export.verify_export (empty mismatches: bit for bit).

    Raises:
        PolyFixedError: the folder cannot be read (the file or field named).
    """
    folder = Path(folder)
    try:
        meta, x, golden = read_golden(folder, FORMAT)
    except FixedExportError as exc:
        raise PolyFixedError(str(exc)) from exc
    try:
        pspec = PolySpec.from_mapping(meta["spec"]["kind"], meta["spec"])
        with open(folder / "coefficients.csv", newline="", encoding="ascii") as fh:
            rows = list(csv.DictReader(fh))
        w = np.array([complex(float(r["real"]), float(r["imag"])) for r in rows], dtype=np.complex128)
        words = np.array([[int(r["re"]), int(r["im"])] for r in rows], dtype=np.int64).reshape(-1, 2)
        pf = PolyFixed(pspec, w, QuantSpec.from_dict(meta["quant"]))
        pf.formats = {k: QFormat.from_dict(f) for k, f in meta["formats"].items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise PolyFixedError(f"{folder}: cannot rebuild the fixed-point MP/GMP ({exc})") from exc
    _, traces = pf.run_int(x.astype(np.float64))
    out = compare_golden(golden, traces)
    bad = int(np.count_nonzero(np.stack([pf.coef_re, pf.coef_im], axis=1) != words))
    if bad:
        out["mismatches"] = {"coefficients": bad, **out["mismatches"]}
    return out


def _bits(pf: PolyFixed, key: str) -> int:
    f = pf.formats.get(key)
    return f.bits if f is not None else (pf.formats["x"].bits + 2 if key == "amp" else pf.qspec.activations)


def _files(pf: PolyFixed, meta: dict, xg: np.ndarray, traces, spec: QuantSpec) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    buf = io.StringIO()
    np.savetxt(buf, xg.reshape(-1, 2), fmt="%.9g", delimiter=",", header="I,Q", comments="")
    files["golden/x_float.csv"] = buf.getvalue().encode("ascii")
    for k, (v, _) in traces.items():
        files[f"golden/{k}.csv"] = _golden_csv(v)
        files[f"golden/{k}.hex"] = _golden_hex(v, _bits(pf, k))
    buf = io.StringIO()
    wr = csv.writer(buf, lineterminator="\n")
    wr.writerow(["kind", "order", "delay", "envelope_delay", "re", "im", "re_hex", "im_hex", "frac", "real", "imag"])
    for j, t in enumerate(pf.terms):
        f = pf.coef_formats[t.order]
        kind = "aligned" if t.delay == t.env_delay else ("lagging" if t.env_delay > t.delay else "leading")
        re, im = int(pf.coef_re[j]), int(pf.coef_im[j])
        wr.writerow([kind, t.order, t.delay, t.env_delay, re, im, *_hex_words(np.array([re, im]), f.bits), f.frac,
                     repr(float(pf.w[j].real)), repr(float(pf.w[j].imag))])
    files["coefficients.csv"] = buf.getvalue().encode("ascii")
    words = (pf.coef_re * 1.0 + 1j * pf.coef_im)
    mk = matlab_coefficients(words, pf.spec)
    lines = [",".join(f"k={k}" for k in range(1, pf.spec.order + 1))]
    lines += [",".join(f"{int(c.real)}{int(c.imag):+d}i" for c in row) for row in mk]
    files["coefficients_mk.csv"] = ("\n".join(lines) + "\n").encode("ascii")
    files["dpd_coeffs.h"] = _header(pf, meta).encode("utf-8")
    files["formats.json"] = (json.dumps(meta, indent=1) + "\n").encode("utf-8")
    files["README.md"] = _readme(pf, meta).encode("utf-8")
    return files


def _header(pf: PolyFixed, meta) -> str:
    ct = fixed.c_int_type(pf.qspec.weights)
    p = len(pf.terms)
    out = [f"/* DPD Desktop fixed-point MP/GMP of run {meta['run_id']} ({pf.qspec.label}); README.md has the "
           "arithmetic. */", "#ifndef DPD_POLY_COEFFS_H", "#define DPD_POLY_COEFFS_H", "#include <stdint.h>", "",
           f"#define DPD_POLY_TERMS {p}", f"#define DPD_POLY_ORDER {pf.spec.order}",
           f"#define DPD_POLY_MEMORY {pf.spec.memory_depth}", f"#define DPD_WEIGHT_BITS {pf.qspec.weights}",
           f"#define DPD_ACT_BITS {pf.qspec.activations}"]
    for key, f in pf.formats.items():
        out.append(f"#define DPD_FRAC_{key.upper()} {f.frac}  /* {f.label}, {f.bits} bits */")
    for k, f in pf.coef_formats.items():
        out.append(f"#define DPD_COEF_FRAC_K{k} {f.frac}  /* {f.label} */")
    cells = lambda a: ", ".join(str(int(v)) for v in a)  # noqa: E731
    out += ["/* per term j: order k, delay d, envelope delay e: c_j * x(n-d) * |x(n-e)|^(k-1) */",
            f"static const uint8_t dpd_poly_order[{p}] = {{{cells([t.order for t in pf.terms])}}};",
            f"static const int16_t dpd_poly_delay[{p}] = {{{cells([t.delay for t in pf.terms])}}};",
            f"static const int16_t dpd_poly_env_delay[{p}] = {{{cells([t.env_delay for t in pf.terms])}}};",
            f"static const uint8_t dpd_poly_coef_frac[{p}] = "
            f"{{{cells([pf.coef_formats[t.order].frac for t in pf.terms])}}};",
            f"static const {ct} dpd_poly_coef_re[{p}] = {{{cells(pf.coef_re)}}};",
            f"static const {ct} dpd_poly_coef_im[{p}] = {{{cells(pf.coef_im)}}};", "#endif", ""]
    return "\n".join(out)


def _readme(pf: PolyFixed, meta) -> str:
    s = pf.qspec
    e = meta["error"]
    out = [f"# Fixed-point {meta['family'].upper()} of run {meta['run_id']}", "",
           f"{pf.spec.to_dict()}, {len(pf.terms)} complex coefficients, {s.label}: coefficients {s.weights} bits, "
           f"activations {s.activations} bits. Written by DPD Desktop {__version__} on {meta['created']}.", "",
           "## Arithmetic", "", f"- Rounding: {fixed.ROUNDING}.", f"- Saturation: {fixed.SATURATION}.",
           "- x: I/Q words; |x| = (isqrt(4 (I^2 + Q^2)) + 1) >> 1 at x's fraction; e_1 = |x|, e_p = pre(e_(p-1) * |x|) "
           f"({fixed.PRE_BITS}-bit words); basis words phi = x(n-d) * e_(k-1)(n-e) requantised per order k; order 1 "
           "is x(n-d); zeros outside the segment.",
           "- y = sum_j c_j * phi_j: re = sum(c_re phi_re - c_im phi_im), im = sum(c_re phi_im + c_im phi_re), each "
           "product shifted left to the largest fraction of all orders (exact), int64, then round_shift + sat to y.",
           f"- Activation formats from the range on the {meta['calibration']} (headroom {fixed.HEADROOM}); "
           "coefficient formats per order (the largest fraction at which its largest |re| or |im| fits).", "",
           "| tensor | format | bits | frac | training-split max |", "| --- | --- | ---: | ---: | ---: |"]
    for key, f in pf.formats.items():
        out.append(f"| {key} | {f.label} | {f.bits} | {f.frac} | {pf.ranges.get(key, 0):.6g} |")
    out += ["", "| order k | coefficient format |", "| ---: | --- |"]
    out += [f"| {k} | {f.label} ({f.bits} bits) |" for k, f in pf.coef_formats.items()]
    out += ["", f"Integer model vs float model on the test split: error power {e['rel_error_db']:.2f} dB relative to "
                f"the float output, max |Δy| {e['max_abs']:.3g}; saturated words (the test split beyond the "
                f"training split's range and its headroom): {e['saturated_words'] or 'none'}."]
    if meta["metrics_through_pa"]:
        m = meta["metrics_through_pa"]
        out += ["", f"Through the frozen PA (test, {meta['metric_profile']}): float ACLR "
                    f"{m['float']['ACLR_AVG']:.3f} dBc, EVM {m['float']['EVM']:.3f} dB; fixed ACLR "
                    f"{m['fixed']['ACLR_AVG']:.3f} dBc, EVM {m['fixed']['EVM']:.3f} dB."]
    out += ["", "## Files", "", "- `coefficients.csv`: basis order; `coefficients_mk.csv`: comm.DPD M-by-K words "
                "(aligned terms); `dpd_coeffs.h`; `formats.json`;",
            f"- `golden/`: the first {meta['golden']['frames']} test frames of {meta['golden']['frame_length']} "
            "samples: `x_float.csv` (float32) and the words of " + ", ".join(meta["golden"]["tensors"]) + ".", "",
            "Check the folder with `python -c \"from dpd_desktop.export.poly_fixed import verify_poly_export; "
            "print(verify_poly_export('THIS_FOLDER'))\"`: it rebuilds the fixed-point model from formats.json and "
            "coefficients.csv alone and compares the coefficient words and every golden file bit for bit.", ""]
    return "\n".join(out)
