"""Deploying a DPD from the command line: ``dpd-desktop export RUN --format fixed|onnx`` and ``finetune RUN``.

``export --format fixed`` writes the integer reference's folder (export/fixed_export.py) for a neural DPD, or the
fixed-point coefficients (quant/poly.py) for an MP/GMP run; ``--format onnx`` a checked ONNX file
(export/onnx_export.py). Outputs are checked by runs/outputs.py (``--overwrite``). ``finetune`` trains a new DPD run
from RUN's selected checkpoint with fake quantisation (``--qat W,A``; config.json ``experiment.qat``, ``parent_run``
and its ``qat`` block), then scores its integer model through the frozen PA (export/quantized.py); without ``--qat``
it continues the float training the same way (the control). Exit status: 0, 2 for anything refused before work
starts (named), 1/3 as training.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import Outcome
from .train import run_training
from ..config import ConfigError, QuantError, QuantSpec
from ..process import Exit

COMMANDS = ("export", "finetune")
_LUT_INTERPS = ("linear", "nearest")


def _bits_pair(text: str) -> tuple[int, int]:
    try:
        w, a = (int(t) for t in str(text).replace(" ", "").split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected W,A (weight and activation bits, e.g. 8,8), got {text!r}") \
            from None
    return w, a


def _quant_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lut-bits", type=int, default=10, help="sigmoid/tanh tables of 2^L + 1 entries (default 10)")
    p.add_argument("--lut-interp", choices=_LUT_INTERPS, default="linear",
                   help="between table entries: linear interpolation (default) or the nearest entry")
    p.add_argument("--io-bits", type=int, default=16,
                   help="input and output I/Q words, 4-16 bits (default 16: the converters' side)")


def add_parser(add) -> None:
    e = add("export", help="export a DPD run: fixed point (integer reference, golden vectors, C header) or ONNX")
    e.add_argument("run", help="DPD run id or run folder (an MP/GMP run: its coefficients in fixed point)")
    e.add_argument("--format", required=True, choices=("fixed", "onnx"))
    e.add_argument("--weights", type=int, default=16, help="weight bits, 4-16 (default 16)")
    e.add_argument("--activations", type=int, default=16, help="activation bits, 4-16 (default 16)")
    _quant_options(e)
    e.add_argument("--golden-frames", type=int, default=4,
                   help="test-split frames of frame_length samples in the golden vectors (default 4)")
    e.add_argument("--out", default=None, help="export folder (fixed) or .onnx file (default: RUN-<format> in "
                   "the current folder)")
    e.add_argument("--overwrite", action="store_true", help="replace an existing export folder or file")
    f = add("finetune", help="fine-tune a DPD run, quantisation-aware with --qat (a new run, linked to its parent)")
    f.add_argument("run", help="the DPD run to fine-tune (id or folder)")
    f.add_argument("--qat", default=None, type=_bits_pair, metavar="W,A",
                   help="weight,activation bits (e.g. 8,8); without it a float fine-tune")
    _quant_options(f)
    f.add_argument("--epochs", type=int, default=10, help="default %(default)s")
    f.add_argument("--lr", type=float, default=None, help="default: the parent's lr / 10")
    f.add_argument("--lr-end", type=float, default=None, help="default: the parent's, at most --lr")
    f.add_argument("--seed", type=int, default=None, help="default: the parent's")
    f.add_argument("--device", default=None, help="default: the parent's")
    f.add_argument("--threads", type=int, default=None)
    f.add_argument("--no-plots", action="store_true")
    f.add_argument("--quiet", action="store_true")


def handle(args, ws) -> Outcome:
    if args.command == "export":
        return Outcome(_export(args, ws), skip_teardown=True)
    return _finetune(args, ws)


def _spec(w: int, a: int, args):
    return QuantSpec(w, a, args.lut_bits, args.lut_interp, args.io_bits).check()


def _export(args, ws) -> int:
    # PyTorch: see the note under cli/entry.py's imports
    from ..families import POLY_BACKBONES
    from ..export.fixed_export import FixedExportError, export_fixed
    from ..export.onnx_export import OnnxExportError, export_onnx
    from ..export.poly_fixed import PolyFixedError, export_poly_fixed
    from ..runs.record import RecordError, RunRecord

    try:
        rec = RunRecord.open(ws.resolve(args.run))
        if args.format == "onnx":
            out = args.out or f"{rec.run_id}.onnx"
            meta = export_onnx(ws, rec.run_dir, out, overwrite=args.overwrite)
            c = meta["check"]
            print(f"wrote {out} (+ {out}.json): ONNX opset {meta['opset']}, checked on the test split with "
                  f"{c['runtime']}: max |Δu| {c['max_abs_error']:.3g}, {c['max_rel_error']:.3g} relative to the peak "
                  f"(limit {c['tolerance']:g})")
            return Exit.OK
        spec = _spec(args.weights, args.activations, args)
        out = args.out or f"{rec.run_id}-fixed-{spec.label.lower()}"
        if rec.backbone in POLY_BACKBONES:
            meta = export_poly_fixed(ws, rec.run_dir, out, spec=spec, overwrite=args.overwrite)
            print(f"wrote {out}: {meta['n_coefficients']} MP/GMP coefficients as {spec.weights}-bit words "
                  f"({meta['coef_format']['q']}); integer model vs float: {meta['error']['rel_error_db']:.2f} dB")
            return Exit.OK
        meta = export_fixed(ws, rec.run_dir, out, spec=spec, golden_frames=args.golden_frames,
                            overwrite=args.overwrite)
    except (FileNotFoundError, RecordError, QuantError, FixedExportError, OnnxExportError, PolyFixedError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return Exit.USAGE
    m = meta["metrics"]
    g = meta["golden"]
    print(f"wrote {out}: {spec.label} integer reference of {meta['family']} ({len(g['tensors'])} golden "
          f"tensors, {g['frames']} frames), C header, README")
    if g["frames"] < args.golden_frames:
        print(f"note: --golden-frames {args.golden_frames}: the test split holds {g['frames']} frames of "
              f"{g['frame_length']} samples, all of them in the golden vectors")
    print(_metric_line(m["metric_profile"], m["float_metrics"]["test"], m["metrics"]["test"], spec.label))
    return Exit.OK


def _metric_line(profile: str, f: dict, q: dict, label: str) -> str:
    return (f"test [{profile}] through the frozen PA: float NMSE {f['NMSE']:.3f} dB, ACLR {f['ACLR_AVG']:.3f} dBc, "
            f"EVM {f['EVM']:.3f} dB; {label} NMSE {q['NMSE']:.3f}, ACLR {q['ACLR_AVG']:.3f}, EVM {q['EVM']:.3f} "
            f"(ACLR {q['ACLR_AVG'] - f['ACLR_AVG']:+.3f} dB, EVM {q['EVM'] - f['EVM']:+.3f} dB)")


def finetune_config(parent, spec=None, *, epochs: int, lr: float | None = None, lr_end: float | None = None,
                    seed: int | None = None, device: str | None = None, threads: int | None = None):
    """The ExperimentConfig of a quantisation-aware fine-tune of ``parent`` (a RunRecord): the parent's settings
    with ``qat`` (None: a float fine-tune), ``parent_run``, the epochs and learning rates (default lr: the parent's
    / 10)."""
    from dataclasses import replace

    p = parent.config
    lr = lr if lr is not None else p.lr / 10.0
    pa_dir = (parent.pa or {}).get("run_dir")
    return replace(p, qat=spec.to_dict() if spec is not None else None, parent_run=parent.run_id, epochs=epochs, lr=lr,
                   lr_end=min(lr_end if lr_end is not None else p.lr_end, lr), seed=p.seed if seed is None else seed,
                   device=device or p.device, threads=threads if threads is not None else p.threads, name=None,
                   pa_run=pa_dir if pa_dir and Path(pa_dir).is_dir() else p.pa_run, fit="gradient",
                   kernel="reference", extra=dict(p.extra))


class _RunDir:
    """Observer keeping the run folder of the run it watches."""

    def __init__(self) -> None:
        self.run_dir = None

    def __call__(self, ev) -> None:
        if type(ev).__name__ == "RunStarted":
            self.run_dir = ev.run_dir


def _finetune(args, ws) -> Outcome:
    from .checks import option_message, preflight
    from ..runs.record import DatasetChanged, DatasetUnavailable, RecordError
    from ..training.errors import TrainingError
    from ..training.qat_setup import parent_record

    try:
        spec = _spec(args.qat[0], args.qat[1], args) if args.qat else None
        parent = parent_record(ws, args.run)
        if parent.config is None:
            raise RecordError(f"{parent.config_path}: the parent's configuration cannot be read")
        cfg = finetune_config(parent, spec, epochs=args.epochs, lr=args.lr, lr_end=args.lr_end, seed=args.seed,
                              device=args.device, threads=args.threads).validate()
        preflight(cfg, ws)
        ds = parent.dataset.load()
    except (QuantError, TrainingError, RecordError, DatasetChanged, DatasetUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return Outcome(Exit.USAGE)
    except ConfigError as exc:
        print(f"error: {option_message(exc)}", file=sys.stderr)
        return Outcome(Exit.USAGE)
    what = f"quantisation-aware fine-tune of {parent.run_id} at {spec.label}" if spec else \
        f"float fine-tune of {parent.run_id}"
    print(f"{what}: {cfg.epochs} epochs, lr {cfg.lr:g}")
    where = _RunDir()
    status = run_training(cfg, ws, dataset=ds, quiet=args.quiet, plots=not args.no_plots, observers=[where])
    if status == Exit.OK and where.run_dir is not None and spec is not None:
        score_integer_model(where.run_dir, spec, ds)
    return Outcome(status, skip_teardown=True)


def score_integer_model(run_dir, spec: QuantSpec, dataset=None) -> bool:
    """Score a finished quantisation-aware run's integer model through the frozen PA into its quantized.json
    (``runs`` QUANT / Q ACLR) and print the line; a failure is a warning. Returns whether it was scored."""
    from ..export.quantized import QuantEvalError, evaluate_quantized, save_quantized

    try:
        doc = evaluate_quantized(run_dir, spec, dataset=dataset)
        save_quantized(run_dir, doc)
    except (QuantEvalError, OSError) as exc:
        print(f"warning: the integer model was not scored: {exc}", file=sys.stderr)
        return False
    print("integer model " + _metric_line(doc["metric_profile"], doc["float_metrics"]["test"],
                                          doc["metrics"]["test"], spec.label).replace("float", "float weights", 1))
    return True
