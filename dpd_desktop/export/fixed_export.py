"""``dpd-desktop export RUN --format fixed``: a DPD run as integer arithmetic for an FPGA or ASIC.

The export folder (written whole, runs/outputs.py ``write_folder``; never inside a run folder):

* ``README.md``: every tensor's format, the rounding and saturation rules, the tables, each layer's integer
  arithmetic, the quantised metrics through the frozen PA beside the float ones; ``formats.json``: the same, for
  programs; ``dpd_coeffs.h``: a C99 header, every stored tensor as an exact-width integer array;
  ``coefficients.csv``: ``tensor,index,value,hex,real`` for every stored word;
* ``golden/``: the first test frames (zero initial state): ``x_float.csv`` (float32, 9 significant digits) and for
  every tensor of the integer reference in execution order ``<tensor>.csv`` (``frame,t,c0,…``) and ``<tensor>.hex``
  (one line per step, two's-complement words, for Verilog ``$readmemh``).

The integer reference is quant/backends.py ``IntBackend`` (NumPy int64); :func:`verify_export` rebuilds it from the
folder's own files and checks that it reproduces every golden file bit for bit. The quantised metrics also go into
the run's ``quantized.json`` (export/quantized.py).
"""
from __future__ import annotations

import csv
import io
import json
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__
from ..quant import fixed
from ..quant.backends import IntBackend
from ..quant.fixed import QFormat
from ..quant.graph import GRU, Conv1d, Graph, Linear, graph_from_dict, graph_to_dict
from ..quant.lower import LoweringError, lower
from ..quant.plan import QuantPlan
from ..config import QuantSpec
from .. import atomic
from ..runs.outputs import OutputRefused, check_output, recorded_dataset, write_folder
from .quantized import QuantEvalError, evaluate_quantized, load_run_models, quant_plan_for, save_quantized
from ..runs.record import DatasetChanged, DatasetUnavailable, RecordError, RunRecord
from ..runs.workspace import Workspace

__all__ = ["FixedExportError", "export_fixed", "verify_export", "read_golden", "compare_golden", "EXPORT_FORMAT"]

EXPORT_FORMAT = "dpd-desktop-fixed-export-1"
DEFAULT_GOLDEN_FRAMES = 4
POLY_EXPORT_FORMAT = "dpd-desktop-poly-fixed-export-1"  # export/poly_fixed.py FORMAT


class FixedExportError(ValueError):
    """The run cannot be exported in fixed point, or the export folder cannot be written or read; the message
    names the run, file or field."""


# ====================================================================================================== export
def export_fixed(workspace: Workspace, run: str | Path, out: str | Path, *, spec: QuantSpec,
                 golden_frames: int = DEFAULT_GOLDEN_FRAMES, overwrite: bool = False, dataset=None) -> dict[str, Any]:
    """Export ``run`` (a DPD run id or folder) at ``spec`` into the folder ``out`` (module docstring).

    Returns:
        formats.json's content (``metrics``: the quantised and float metrics through the frozen PA).
    Raises:
        FixedExportError: bits out of range, a PA run, no best.pt, a family without a lowering, a dataset that
            cannot be reloaded, ``out`` inside a run folder or existing without ``overwrite``, a write failure.
    """
    try:
        spec = spec.check()
    except ValueError as exc:
        raise FixedExportError(str(exc)) from exc
    if isinstance(golden_frames, bool) or not isinstance(golden_frames, int) or golden_frames < 1:
        raise FixedExportError(f"golden_frames: expected a positive integer, got {golden_frames!r}")
    try:
        rec = RunRecord.open(workspace.resolve(run))
        target = check_output(out, overwrite=overwrite, folder=True, run_dir=rec.run_dir,
                              workspace=workspace, datasets=[recorded_dataset(rec.dataset)])
        models = load_run_models(rec)
        ds = rec.dataset.load(dataset)
        graph = lower(models[0])
        plan, source = quant_plan_for(rec, models[0], spec, ds)
        doc = evaluate_quantized(rec.run_dir, spec, dataset=ds, plan=plan, models=models)
    except (FileNotFoundError, RecordError, OutputRefused, QuantEvalError, LoweringError, DatasetChanged,
            DatasetUnavailable) as exc:
        raise FixedExportError(str(exc)) from exc
    doc["plan_source"] = source
    save_quantized(rec.run_dir, doc)
    t_len = int(rec.config.frame_length)
    x_test = ds.test.x
    frames = max(1, min(golden_frames, x_test.shape[0] // t_len))
    xg = np.ascontiguousarray(x_test[:frames * t_len].reshape(frames, t_len, 2), dtype=np.float32)
    ib = IntBackend(plan)
    graph.run(ib, xg.astype(np.float64))
    meta = _formats_doc(rec, graph, plan, ib, doc, xg, models[2])
    files = _files(rec, graph, plan, ib, xg, meta)
    try:
        write_folder(target, lambda tmp: _fill(tmp, files))
    except OSError as exc:
        raise FixedExportError(f"cannot write the export folder {target}: {getattr(exc, 'strerror', None) or exc}") \
            from exc
    meta["folder"] = str(target)
    meta["files"] = sorted(files)
    return meta


def _fill(tmp: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        atomic.atomic_write_bytes(tmp / name, data)


def _bits_of(key: str, plan: QuantPlan) -> int:
    f = plan.formats.get(key)
    return f.bits if f is not None else plan.spec.activations


def _formats_doc(rec: RunRecord, graph: Graph, plan: QuantPlan, ib: IntBackend, doc, xg, info) -> dict[str, Any]:
    spec = plan.spec
    luts = {}
    for func in ("sigmoid", "tanh"):
        if f"lut.{func}" in ib.params:
            ls = ib.lut_spec(func)
            luts[func] = {"range": [-ls.range, ls.range], "bits": ls.bits, "entries": ls.entries,
                          "interp": ls.interp, "out": ls.out.to_dict(),
                          "step": 2.0 * ls.range / (1 << ls.bits)}
    params = {}
    for key, (q, fmt) in ib.params.items():
        if key.startswith("lut."):
            continue
        params[key] = {"kind": "bias" if _is_bias(key) else "weight", "shape": list(q.shape), **fmt.to_dict(),
                       "max_abs_int": int(np.max(np.abs(q))) if q.size else 0}
    golden = {}
    for key, (v, frac) in ib.traces.items():
        golden[key] = {"csv": f"golden/{_fname(key)}.csv", "hex": f"golden/{_fname(key)}.hex",
                       "shape": list(_as3(v).shape), "bits": _bits_of(key, plan), "frac": int(frac),
                       "signed": key not in ib.unsigned}
    return {
        "format": EXPORT_FORMAT, "run_id": rec.run_id, "family": graph.family,
        "model": {**rec.arch, "model_id": rec.model.get("model_id")}, "checkpoint_sha256": info["sha256"],
        "pa_run_id": (rec.pa or {}).get("run_id"), "pa_checkpoint_sha256": info["pa_sha256"],
        "qat": rec.qat, "spec": spec.to_dict(), "label": spec.label,
        "rounding": fixed.ROUNDING, "saturation": fixed.SATURATION, "headroom": fixed.HEADROOM,
        "accumulator": "int64, checked to stay below 2^62", "bias_bits": fixed.BIAS_BITS,
        "pre_bits": fixed.PRE_BITS, "luts": luts, "plan_source": doc["plan_source"], "plan": plan.to_dict(),
        "params": params, "graph": graph_to_dict(graph),
        "golden": {"frames": int(xg.shape[0]), "frame_length": int(xg.shape[1]), "split": "test",
                   "initial_state": "zero at the start of each frame", "input_float": "golden/x_float.csv",
                   "tensors": golden},
        "metrics": {k: doc[k] for k in ("metric_profile", "metrics", "float_metrics", "u_error", "saturated")},
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "dpd_desktop_version": __version__,
    }


def _is_bias(key: str) -> bool:
    tail = key.rsplit(".", 1)[-1]
    return tail == "bias" or tail.startswith("b_")


def _fname(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", key)


def _cname(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", key).lower()


def _as3(v: np.ndarray) -> np.ndarray:
    return v[..., None] if v.ndim == 2 else v


def _hex_words(v: np.ndarray, bits: int) -> np.ndarray:
    digits = -(-bits // 4)
    mask = (1 << bits) - 1
    return np.vectorize(lambda a: format(int(a) & mask, f"0{digits}x"), otypes=[object])(v)


def _golden_csv(v: np.ndarray) -> bytes:
    v = _as3(v)
    f, t, c = v.shape
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["frame", "t", *(f"c{j}" for j in range(c))])
    for i in range(f):
        for k in range(t):
            w.writerow([i, k, *(int(a) for a in v[i, k])])
    return buf.getvalue().encode("ascii")


def _golden_hex(v: np.ndarray, bits: int) -> bytes:
    v = _as3(v)
    words = _hex_words(v.reshape(-1, v.shape[-1]), bits)
    return ("\n".join(" ".join(row) for row in words) + "\n").encode("ascii")


def _files(rec, graph, plan, ib, xg, meta) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    buf = io.StringIO()
    np.savetxt(buf, xg.reshape(-1, 2), fmt="%.9g", delimiter=",", header="I,Q", comments="")
    files["golden/x_float.csv"] = buf.getvalue().encode("ascii")
    for key, (v, _) in ib.traces.items():
        files[f"golden/{_fname(key)}.csv"] = _golden_csv(v)
        files[f"golden/{_fname(key)}.hex"] = _golden_hex(v, _bits_of(key, plan))
    files["coefficients.csv"] = _coefficients_csv(ib)
    files["dpd_coeffs.h"] = _c_header(rec, plan, ib, meta).encode("utf-8")
    files["formats.json"] = (json.dumps(meta, indent=1) + "\n").encode("utf-8")
    files["README.md"] = _readme(rec, graph, plan, ib, meta).encode("utf-8")
    return files


def _coefficients_csv(ib: IntBackend) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["tensor", "index", "value", "hex", "real", "bits", "frac", "signed"])
    for key, (q, fmt) in ib.params.items():
        flat = q.reshape(-1)
        hexes = _hex_words(flat, fmt.bits) if flat.size else []
        for j, (a, h) in enumerate(zip(flat, hexes)):
            w.writerow([key, j, int(a), h, repr(float(fixed.dequantize(np.array(a), fmt.frac))), fmt.bits, fmt.frac,
                        int(fmt.signed)])
    return buf.getvalue().encode("ascii")


def _c_array(values: np.ndarray, ctype: str, name: str) -> str:
    dims = "".join(f"[{d}]" for d in values.shape) if values.ndim else "[1]"

    def body(a: np.ndarray, indent: int) -> str:
        pad = " " * (indent + 2)
        if a.ndim == 1:
            cells = [str(int(v)) for v in a]
            if len(cells) <= 16:
                return "{" + ", ".join(cells) + "}"
            lines = [", ".join(cells[i:i + 16]) for i in range(0, len(cells), 16)]
            return "{\n" + pad + (",\n" + pad).join(lines) + "\n" + " " * indent + "}"
        return "{\n" + ",\n".join(pad + body(s, indent + 2) for s in a) + "\n" + " " * indent + "}"

    return f"static const {ctype} {name}{dims} = {body(values.reshape(values.shape or (1,)), 0)};\n"


def _c_header(rec, plan: QuantPlan, ib: IntBackend, meta) -> str:
    spec = plan.spec
    guard = "DPD_COEFFS_H"
    out = [f"/* DPD Desktop fixed-point export of run {rec.run_id} ({meta['family']}, {spec.label}).",
           f" * Rounding: {fixed.ROUNDING}.",
           f" * Saturation: {fixed.SATURATION}.",
           " * A word q at fraction F stands for q * 2^-F. Layer arithmetic: README.md. */",
           f"#ifndef {guard}", f"#define {guard}", "#include <stdint.h>", "",
           f"#define DPD_WEIGHT_BITS {spec.weights}", f"#define DPD_ACT_BITS {spec.activations}",
           f"#define DPD_IO_BITS {spec.io_bits}",
           f"#define DPD_BIAS_BITS {fixed.BIAS_BITS}", f"#define DPD_PRE_BITS {fixed.PRE_BITS}",
           f"#define DPD_LUT_BITS {spec.lut_bits}",
           f"#define DPD_LUT_INTERP_{'LINEAR' if spec.lut_interp == 'linear' else 'NEAREST'} 1", "",
           "/* activation formats (fraction bits; bits per DPD_ACT_BITS or DPD_PRE_BITS) */"]
    for key, f in plan.formats.items():
        out.append(f"#define DPD_FRAC_{_cname(key).upper()} {f.frac}  /* {f.label}, {f.bits} bits, "
                   f"{plan.kinds.get(key)} */")
    out.append(f"#define DPD_FRAC_UNIT {fixed.unit_format(spec.activations).frac}  /* tanh table, n, GRU state */")
    out.append(f"#define DPD_FRAC_GATE {fixed.gate_format(spec.activations).frac}  /* sigmoid table, r, z: "
               "unsigned */")
    out.append("")
    for key, (q, fmt) in ib.params.items():
        name = "dpd_" + _cname(key)
        if key.startswith("lut."):
            func = key.split(".", 1)[1]
            ls = ib.lut_spec(func)
            out.append(f"/* {func} table: {ls.entries} entries at -{ls.range} + k * 2*{ls.range}/2^{ls.bits}, "
                       f"{ls.out.label}; index from a word at fraction f: shift s = {int(np.log2(2 * ls.range))} "
                       f"+ f - {ls.bits} */")
            out.append(f"#define DPD_LUT_{func.upper()}_RANGE {ls.range}")
        else:
            out.append(f"/* {key}: {fmt.label} ({fmt.bits}-bit words, fraction {fmt.frac}), shape "
                       f"{'x'.join(map(str, q.shape))} */")
        out.append(f"#define {name.upper()}_FRAC {fmt.frac}")
        out.append(_c_array(q, fixed.c_int_type(fmt.bits, fmt.signed), name))
    out.append(f"#endif /* {guard} */")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------------- README
def _layer_lines(graph: Graph, plan: QuantPlan, ib: IntBackend) -> list[str]:
    A = plan.spec.activations
    unit = fixed.unit_format(A)
    lines = []
    frac_of = {k: f for k, (_, f) in ib.traces.items()}
    pf = {k: fmt for k, (_, fmt) in ib.params.items()}
    for n in graph.nodes:
        head = f"- **{n.name}** ({n.describe()})"
        if n.kind == "input":
            f = plan.formats["x"]
            lines.append(f"{head}: x_q = sat(floor(x * 2^{f.frac} + 1/2)), {f.label} ({f.bits} bits).")
        elif isinstance(n, Linear):
            fi, fw = frac_of[n.inputs[0]], pf[f"{n.name}.weight"].frac
            fo = plan.formats[n.name]
            b = pf.get(f"{n.name}.bias")
            btxt = (f" + (b << {fi + fw - b.frac}) (b {b.label}, {b.bits} bits)" if b is not None else "")
            lines.append(f"{head}: acc = sum(W * v){btxt} at frac {fi} + {fw} = {fi + fw} (W "
                         f"{pf[f'{n.name}.weight'].label}); out = sat(round_shift(acc, {fi + fw - fo.frac})) "
                         f"→ {fo.label}" + ("; then max(out, 0)" if n.relu else "") + ".")
        elif isinstance(n, GRU):
            fi = frac_of[n.inputs[0]]
            parts = []
            for g in "rzn":
                wi, wh = pf[f"{n.name}.w_i{g}"], pf[f"{n.name}.w_h{g}"]
                parts.append(f"W_i{g} {wi.label}, W_h{g} {wh.label}")
            pre = {k: plan.formats[f"{n.name}.{k}"] for k in ("r_pre", "z_pre", "hn", "n_pre")}
            gate = fixed.gate_format(A)
            lines.append(f"{head}: input x at frac {fi}, state h {unit.label}, gates r, z {gate.label} (unsigned); "
                         f"{'; '.join(parts)}. Per step: "
                         f"a_x = W_i x + b_i (frac {fi} + f_Wi), a_h = W_h h + b_h (frac {unit.frac} + f_Wh), "
                         "aligned by exact left shifts to the larger fraction; "
                         f"r = σ(r_pre), r_pre = pre(a_xr + a_hr) {pre['r_pre'].label}; "
                         f"z = σ(z_pre), z_pre {pre['z_pre'].label}; hn = pre(a_hn) {pre['hn'].label}; "
                         f"n = tanh(n_pre), n_pre = pre(a_xn + r * hn) {pre['n_pre'].label}; "
                         f"h = sat(n + round_shift(z * (h - n), {gate.frac})) {unit.label}. "
                         f"pre(): round_shift to the word's fraction, saturated to {fixed.PRE_BITS} bits.")
        elif isinstance(n, Conv1d):
            fw = pf[f"{n.name}.weight"]
            lines.append(f"{head}: acc = sum over taps j of W[:, :, j] * v(t + j*{n.dilation} - {n.padding}) "
                         f"(zero outside the frame), W {fw.label}" + (
                             f"; hardswish: p = pre(acc) {plan.formats[n.name + '.pre'].label}, "
                             f"out = sat(round_shift(p * clip(p + 3, 0, 6) * c6, ·)) with c6 = 21845 * 2^-17"
                             if n.act == "hardswish" else "; out = sat(round_shift(acc, ·))")
                         + f" → {plan.formats[n.name].label}.")
        elif n.kind == "polar":
            lines.append(f"{head}: |x| = (isqrt(4 (I^2 + Q^2)) + 1) >> 1 at the input's fraction; |x|^3 through "
                         f"a pre word; sin = floor((2 (Q << {unit.frac}) + |x|) / (2 |x|)), cos likewise, "
                         f"{unit.label}, 0 where |x| = 0; all six requantised to {plan.formats[n.name].label}.")
        elif n.kind == "concat":
            lines.append(f"{head}: each part round_shift + sat to {plan.formats[n.name].label}.")
        elif n.kind == "add":
            lines.append(f"{head}: aligned exact sum, round_shift + sat to {plan.formats[n.name].label}.")
        else:
            lines.append(f"{head}.")
    return lines


def _metric_table(meta) -> list[str]:
    m = meta["metrics"]
    rows = ["| split | metric | float | fixed | fixed − float |", "| --- | --- | ---: | ---: | ---: |"]
    for split in ("val", "test"):
        for k, unit in (("NMSE", "dB"), ("ACLR_L", "dBc"), ("ACLR_R", "dBc"), ("ACLR_AVG", "dBc"), ("EVM", "dB")):
            f, q = m["float_metrics"][split][k], m["metrics"][split][k]
            rows.append(f"| {split} | {k} [{unit}] | {f:.3f} | {q:.3f} | {q - f:+.3f} |")
    return rows


def _readme(rec, graph: Graph, plan: QuantPlan, ib: IntBackend, meta) -> str:
    spec = plan.spec
    unit = fixed.unit_format(spec.activations)
    g = meta["golden"]
    u = meta["metrics"]["u_error"]["test"]
    out = [f"# Fixed-point export of run {rec.run_id}", "",
           f"Family {graph.family} ({rec.arch}), {spec.label}: weights {spec.weights} bits, activations "
           f"{spec.activations} bits, input and output words {spec.io_bits} bits, tables {spec.lut_bits} bits "
           f"({spec.lut_interp}). Checkpoint SHA-256 "
           f"{meta['checkpoint_sha256']}; frozen PA {meta['pa_run_id']} (SHA-256 {meta['pa_checkpoint_sha256']}). "
           f"Written by DPD Desktop {__version__} on {meta['created']}."
           + (f" Quantisation-aware fine-tune of {rec.qat.get('parent_run')}." if rec.qat else ""), "",
           "## Arithmetic rules", "",
           "- A word `q` of format `Qm.f` (signed two's complement, m integer bits, f fractional bits, m + f + 1 "
           "bits) stands for `q · 2^-f`.",
           f"- Rounding: {fixed.ROUNDING}.", f"- Saturation: {fixed.SATURATION}.",
           f"- Accumulators: {meta['accumulator']}. Biases: {fixed.BIAS_BITS}-bit words, added at the accumulator's "
           "fraction (shifted left, exactly). Pre-activation words (before a table or an elementwise product): "
           f"{fixed.PRE_BITS} bits.",
           f"- Formats: weights take the largest fraction at which max|w| fits (per tensor; a GRU's per gate); "
           f"the input and output words `frac = bits − 1 − ceil(log2(max|v| · {1 + fixed.HEADROOM}))` from the range "
           f"seen on the training split (nothing saturates there); the other activations the fraction, from that one "
           f"to {spec.activations - 2} finer, of least rounding plus saturation error over the values seen there "
           f"(peaks beyond a finer format's range saturate) ({meta['plan_source']}: {plan.calibration}); the tanh table, n and the GRU state "
           f"{unit.label}; the sigmoid table and the gates r, z {fixed.gate_format(spec.activations).label} "
           "(unsigned: they lie in (0, 1)).",
           ]
    for func, ls in meta["luts"].items():
        out.append(f"- {func}: table of {ls['entries']} entries at −{ls['range'][1]} + k·{ls['step']:g} "
                   f"(k = 0 … 2^{ls['bits']}), values {QFormat.from_dict(ls['out']).label}; an input word p at "
                   f"fraction f: o = clip(p + R·2^f, 0, 2R·2^f − 1), s = log2(2R) + f − {ls['bits']}, "
                   + ("i = o >> s, r = o & (2^s − 1), out = T[i] + (((T[i+1] − T[i])·r + 2^(s−1)) >> s)"
                      if ls["interp"] == "linear" else "out = T[(o + 2^(s−1)) >> s]")
                   + " (s ≤ 0: T[o << −s]).")
    out += ["", "## Layers (execution order)", "", *_layer_lines(graph, plan, ib), "",
            "## Activation formats", "", "| tensor | kind | format | bits | frac | training-split max |",
            "| --- | --- | --- | ---: | ---: | ---: |"]
    for key, f in plan.formats.items():
        r = plan.ranges.get(key)
        out.append(f"| {key} | {plan.kinds.get(key)} | {f.label} | {f.bits} | {f.frac} | "
                   f"{'' if r is None else f'{r:.6g}'} |")
    out += ["", "## Weights and biases", "", "| tensor | kind | shape | format | bits | frac |",
            "| --- | --- | --- | --- | ---: | ---: |"]
    for key, p in meta["params"].items():
        out.append(f"| {key} | {p['kind']} | {'×'.join(map(str, p['shape']))} | {p['q']} | {p['bits']} | "
                   f"{p['frac']} |")
    out += ["", f"## The quantised DPD through the frozen PA ({meta['metrics']['metric_profile']} profile)", "",
            "The integer reference's output over the whole split (segmented like the run's evaluation: "
            "nperseg-sample segments, zero state each), through the run's frozen PA in float32, against g·x:", "",
            *_metric_table(meta), "",
            f"DPD output u, integer vs float on the test split: max |Δu| = {u['max_abs']:.3g}, error power "
            f"{u['rel_error_db']:.2f} dB relative to u. Words saturated (peaks beyond a format's range: by "
            f"choice for the activations whose least-error format clips, else a range beyond the training split's): val {meta['metrics']['saturated']['val'] or 'none'}, test "
            f"{meta['metrics']['saturated']['test'] or 'none'}.", "",
            "## Files", "",
            "- `dpd_coeffs.h`: every weight, bias and table as a C99 exact-width array with its `_FRAC` define, "
            "and the activation fractions (`DPD_FRAC_*`).",
            "- `coefficients.csv`: `tensor,index,value,hex,real,bits,frac`, row-major.",
            "- `formats.json`: all of the above for programs (graph, formats, golden layout, metrics).",
            f"- `golden/`: the first {g['frames']} frames of {g['frame_length']} samples of the test split, each "
            f"from a zero state. `x_float.csv` is the float32 input (I,Q; 9 significant digits, read it as "
            "float32); each tensor has `<name>.csv` "
            "(`frame,t,c0,…`, integers) and `<name>.hex` (one line per time step, two's-complement words of the "
            "tensor's width, space-separated, `$readmemh` order):", ""]
    for key, t in g["tensors"].items():
        out.append(f"  - `{key}`: {'×'.join(map(str, t['shape']))}, {t['bits']} bits, fraction {t['frac']}")
    out += ["", "Check the folder with `python -c \"from dpd_desktop.export.fixed_export import verify_export; "
                "print(verify_export('THIS_FOLDER'))\"`: it rebuilds the integer reference from formats.json and "
                "coefficients.csv alone and compares every golden file bit for bit.", ""]
    return "\n".join(out)


# ====================================================================================================== reading back
def read_golden(folder: str | Path, fmt: str = EXPORT_FORMAT) -> tuple[dict[str, Any], np.ndarray,
                                                                          dict[str, np.ndarray]]:
    """(formats.json, float32 input (F, T, 2), {tensor: int64 (F, T, C)}) of an export folder whose formats.json
    ``format`` is ``fmt``.

    Raises:
        FixedExportError: a file is missing or malformed (named).
    """
    folder = Path(folder)
    try:
        meta = json.loads((folder / "formats.json").read_text(encoding="utf-8"))
        if meta.get("format") != fmt:
            hint = ("; an MP/GMP export: check it with dpd_desktop.export.poly_fixed.verify_poly_export"
                    if meta.get("format") == POLY_EXPORT_FORMAT else "")
            raise ValueError(f"field 'format' is {meta.get('format')!r}, expected {fmt!r}{hint}")
        g = meta["golden"]
        # float32 samples written with 9 significant digits: read back as float32 they are the exported values
        x = np.loadtxt(folder / g["input_float"], delimiter=",", skiprows=1, dtype=np.float32, ndmin=2)
        x = x.reshape(g["frames"], g["frame_length"], 2)
        tensors = {}
        for key, t in g["tensors"].items():
            a = np.loadtxt(folder / t["csv"], delimiter=",", skiprows=1, dtype=np.int64, ndmin=2)
            tensors[key] = a[:, 2:].reshape(t["shape"])
            hx = (folder / t["hex"]).read_text(encoding="ascii").split()
            words = np.array([int(h, 16) for h in hx], dtype=np.int64)
            top = np.int64(1) << np.int64(t["bits"] - 1)
            signed = (np.where(words >= top, words - 2 * top, words) if t.get("signed", True) else words)
            signed = signed.reshape(t["shape"])
            if not np.array_equal(signed, tensors[key]):
                raise ValueError(f"{t['hex']} and {t['csv']} hold different words")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FixedExportError(f"{folder}: not a readable fixed-point export ({exc})") from exc
    return meta, x, tensors


def _params_from_csv(folder: Path) -> dict[str, tuple[np.ndarray, QFormat]]:
    rows: dict[str, list] = {}
    fmts: dict[str, QFormat] = {}
    with open(folder / "coefficients.csv", newline="", encoding="ascii") as fh:
        for r in csv.DictReader(fh):
            rows.setdefault(r["tensor"], []).append(int(r["value"]))
            fmts[r["tensor"]] = QFormat(int(r["bits"]), int(r["frac"]), r.get("signed", "1") != "0")
    return {k: (np.array(v, dtype=np.int64), fmts[k]) for k, v in rows.items()}


def verify_export(folder: str | Path) -> dict[str, Any]:
    """Rebuild the integer reference from the folder's formats.json and coefficients.csv (no checkpoint), run it on
    the golden float input and compare every golden tensor. Returns ``{"tensors": n, "words": n, "mismatches":
    {tensor: count}}`` (empty mismatches: bit for bit).

    Raises:
        FixedExportError: the folder cannot be read.
    """
    folder = Path(folder)
    meta, x, golden = read_golden(folder)
    try:
        plan = QuantPlan.from_dict(meta["plan"])
        params = _params_from_csv(folder)
        for key, p in meta["params"].items():
            q, fmt = params[key]
            params[key] = (q.reshape(p["shape"]), fmt)
        graph = graph_from_dict(meta["graph"])
    except (OSError, ValueError, KeyError) as exc:
        raise FixedExportError(f"{folder}: cannot rebuild the integer reference ({exc})") from exc
    ib = IntBackend(plan, params)
    graph.run(ib, x.astype(np.float64))
    return compare_golden(golden, ib.traces)


def compare_golden(golden: dict[str, np.ndarray], traces: dict[str, tuple[np.ndarray, int]]) -> dict[str, Any]:
    """Every golden tensor (F, T, C) against the rebuilt model's trace of the same key (words, frac). Returns
    ``{"tensors": n, "words": n, "mismatches": {tensor: words that differ}}``; a missing or misshapen trace counts
    all its words."""
    mism = {}
    words = 0
    for key, want in golden.items():
        got = traces.get(key)
        words += want.size
        if got is None or _as3(got[0]).shape != want.shape:
            mism[key] = int(want.size)
            continue
        bad = int(np.count_nonzero(_as3(got[0]) != want))
        if bad:
            mism[key] = bad
    return {"tensors": len(golden), "words": int(words), "mismatches": mism}
