"""Command-line pieces of the MP/GMP baselines and the model cost: the training options, the run summary lines and
the ``coefficients`` command (export a run's MP/GMP coefficients as CSV or MAT: K×M / comm.DPD layout, models/poly.py).
"""
from __future__ import annotations

import argparse
import sys

from ..config import FITS, ExperimentConfig

POLY = ("mp", "gmp")


def _int_list(text: str) -> list[int]:
    try:
        values = [int(t) for t in str(text).replace(" ", "").split(",")]  # "3,,5": an empty item is an error
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return values


def add_poly_options(p: argparse.ArgumentParser) -> None:
    """The MP/GMP options of train-pa / train-dpd (config fields of the same names, config.py)."""
    d = ExperimentConfig()
    g = p.add_argument_group("MP/GMP baselines (--backbone mp|gmp)")
    g.add_argument("--fit", choices=FITS, default=None,
                   help="least squares (a DPD by indirect learning) or the gradient trainer (a DPD through the "
                        "frozen PA; the only fit of the neural backbones) (default: ls for mp/gmp, else gradient)")
    g.add_argument("--poly-order", type=int, default=d.poly_order, help="K, nonlinearity order (default %(default)s)")
    g.add_argument("--memory-depth", type=int, default=d.memory_depth,
                   help="M, memory depth: delays 0…M−1, samples (default %(default)s)")
    g.add_argument("--odd-only", action="store_true", help="odd orders 1, 3, 5 … only (default: every order)")
    g.add_argument("--cross-order", type=int, default=None,
                   help="GMP: highest order of the cross terms (default: K, --poly-order)")
    g.add_argument("--cross-lag", type=int, default=d.cross_lag,
                   help="GMP: lagging-envelope depth |x(n−m−l)|, l = 1…L (default %(default)s)")
    g.add_argument("--cross-lead", type=int, default=d.cross_lead,
                   help="GMP: leading-envelope depth |x(n−m+l)|, l = 1…L (default %(default)s)")
    g.add_argument("--rcond", type=float, default=d.rcond,
                   help="least squares: relative singular-value cutoff (numpy.linalg.lstsq; default %(default)s)")
    g.add_argument("--grid-k", type=_int_list, default=None,
                   help="least squares: orders to search, e.g. 3,5,7 (default: none, --poly-order only)")
    g.add_argument("--grid-m", type=_int_list, default=None,
                   help="least squares: memory depths to search, e.g. 2,4,6 (default: none, --memory-depth only)")


def poly_config_fields(a) -> dict:
    """ExperimentConfig fields from the parsed options (``--fit`` defaults to ls for mp/gmp, else gradient)."""
    fit = a.fit or ("ls" if str(a.backbone).lower() in POLY else "gradient")
    return {"fit": fit, "poly_order": a.poly_order, "memory_depth": a.memory_depth, "poly_odd_only": a.odd_only,
            "cross_order": a.cross_order, "cross_lag": a.cross_lag, "cross_lead": a.cross_lead, "rcond": a.rcond,
            "grid_k": a.grid_k, "grid_m": a.grid_m}


def poly_summary(ev) -> list[str]:
    """Run-summary lines of a RunStarted event: the model's cost and, for a least-squares fit, the solve."""
    setup = getattr(ev, "setup", None) or {}
    model = setup.get("model") or {}
    lines = []
    if model.get("macs_per_sample") is not None:
        lines.append(f"model cost: {model.get('params')} parameters, {model['macs_per_sample']} real MACs/sample "
                     "(forward)")
    fit = setup.get("fit")
    if fit:
        o = fit.get("orders") or {}
        lines.append(f"least squares: K={o.get('order')} M={o.get('memory_depth')}, effective rank {fit['rank']} of "
                     f"{fit['n_coefficients']} coefficients (rcond {fit['rcond']:g}), {fit['n_observations']} "
                     f"training samples, train residual {fit['train_nmse_db']:.3f} dB")
        for row in fit.get("grid") or []:
            lines.append(f"  grid K={row['K']:<2d} M={row['M']:<2d} rank {row['rank']:>3d}/{row['n_coefficients']:<3d} "
                         f"val NMSE {row['val_nmse_db']:8.3f} dB")
    return lines


# ----------------------------------------------------------------------------------------- coefficients command
def add_parser(add) -> None:
    c = add("coefficients", help="export an MP/GMP run's coefficients (CSV or MAT; MATLAB comm.DPD M-by-K layout)")
    c.add_argument("--run", required=True, help="MP/GMP run id or run folder (PA or DPD)")
    c.add_argument("--out", required=True, help="output file: .csv or .mat (a GMP's cross terms: STEM-cross.csv "
                   "beside it); never a file of a run folder, a dataset or the workspace")
    c.add_argument("--overwrite", action="store_true", help="replace an existing output file")


def handle(args, ws) -> int:
    """Returns the exit status (0, or 2 for a run/file that cannot be exported)."""
    from ..export.coef_export import CoefficientExportError, export_coefficients  # PyTorch: checkpoint load
    from ..runs.outputs import OutputRefused

    try:
        info = export_coefficients(ws, args.run, args.out, overwrite=args.overwrite)
    except (CoefficientExportError, OutputRefused, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {info['n_coefficients']} coefficients ({info['layout']}) to {args.out}")
    return 0
