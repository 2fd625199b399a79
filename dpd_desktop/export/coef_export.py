"""Export an MP/GMP run's coefficients (its best.pt) for MATLAB and spreadsheets.

Layout (models/poly.py): MATLAB ``comm.DPD``'s 'Memory polynomial' ``Coefficients``, an M-by-K complex matrix, row
m+1 = delay m, column k = the term x(n−m)|x(n−m)|^(k−1); orders left out by ``odd_only`` are 0. A DPD run's matrix
goes to ``comm.DPD('Coefficients', A)`` directly; a PA run's is the PA model.

* ``.csv``: the matrix, header ``k=1,…,k=K``, cells ``a+bi`` (``%.17g``, complex to MATLAB ``readmatrix``); a GMP's
  cross terms go to ``<out stem>-cross.csv`` (``kind,order,delay,envelope_delay,real,imag``).
* ``.mat``: ``Coefficients``, ``w`` (every coefficient in basis order), ``terms`` (P-by-3: order, delay, envelope
  delay), ``orders`` (the PolySpec) and ``run_id``.

Files are written atomically where the output rule (runs/outputs.py) allows; the run folder is only read.
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from ..metrics.transfer import as_complex
from ..models import POLY_BACKBONES, build_from_arch
from ..models.poly import matlab_coefficients
from ..runs import artifacts
from .. import atomic
from ..runs.outputs import check_output, recorded_dataset
from ..runs.record import RecordError, RunRecord
from ..runs.workspace import Workspace

__all__ = ["CoefficientExportError", "export_coefficients", "read_coefficients"]

LAYOUT = "comm.DPD memory polynomial: M-by-K (rows: delay 0..M-1, columns: degree 1..K)"


class CoefficientExportError(ValueError):
    """The run is not an MP/GMP run, its checkpoint cannot be read, or the output type is unknown."""


def read_coefficients(workspace: Workspace, run: str):
    """(coefficients (P,) complex128, PolySpec, RunRecord) of a run's best.pt: the least-squares solve's float64
    values when its metadata holds them (``coefficients_float64``, used only when they round to the stored float32
    tensor), else the checkpoint's tensor. Raises CoefficientExportError."""
    try:
        rec = RunRecord.open(workspace.resolve(run))
    except RecordError as exc:
        raise CoefficientExportError(str(exc)) from exc
    if rec.backbone not in POLY_BACKBONES:
        raise CoefficientExportError(f"{rec.config_path}: field 'experiment.backbone' is {rec.backbone!r}; "
                                     f"coefficients exist for {', '.join(POLY_BACKBONES)} runs only")
    model = build_from_arch(rec.arch)
    try:
        meta = artifacts.load_state_checked(model, rec.best_checkpoint, rec.arch)
    except artifacts.CheckpointError as exc:
        raise CoefficientExportError(str(exc)) from exc
    w = model.backbone.coefficients()
    w64 = np.asarray(meta.get("coefficients_float64", []), dtype=np.float64)
    if w64.shape == (w.shape[0], 2):
        stored = model.backbone.coef.detach().cpu().numpy()
        if np.array_equal(w64.astype(stored.dtype), stored):
            w = as_complex(w64)
    return w, model.backbone.spec, rec


def _cell(c: complex) -> str:
    return f"{c.real:.17g}{c.imag:+.17g}i"


def export_coefficients(workspace: Workspace, run: str, out: str | Path, overwrite: bool = False) -> dict[str, Any]:
    """Write the coefficients of ``run`` to ``out`` (.csv or .mat, module docstring); returns what was written.

    ``overwrite``: an existing ``out`` (and a GMP's ``<stem>-cross.csv``) may be replaced; the files the output rule
    protects never are (runs/outputs.py). Raises CoefficientExportError (the run, its checkpoint, a failed write)
    or OutputRefused (the output rule; a ValueError too)."""
    out = check_output(out, overwrite=overwrite, suffixes=(".csv", ".mat"), workspace=workspace)
    suffix = out.suffix.lower()
    w, spec, rec = read_coefficients(workspace, run)
    matrix = matlab_coefficients(w, spec)
    terms = spec.terms
    files = [str(out)]
    source = recorded_dataset(rec.dataset)
    targets = [out]
    if any(t.delay != t.env_delay for t in terms) and suffix == ".csv":
        targets.append(out.with_name(f"{out.stem}-cross.csv"))
    for target in targets:
        check_output(target, overwrite=overwrite, datasets=[source], workspace=workspace)
    try:
        _write(out, suffix, w, spec, rec, matrix, terms, files)
    except OSError as exc:
        raise CoefficientExportError(f"cannot write the output file {out}: {exc.strerror or type(exc).__name__}; "
                                     "expected a file in a writable folder") from exc
    return {"run_id": rec.run_dir.name, "n_coefficients": len(terms), "layout": LAYOUT, "files": files,
            "shape": list(matrix.shape)}


def _write(out: Path, suffix: str, w, spec, rec, matrix, terms, files: list) -> None:
    if suffix == ".csv":
        lines = [",".join(f"k={k}" for k in range(1, spec.order + 1))]
        lines += [",".join(_cell(c) for c in row) for row in matrix]
        atomic.atomic_write_text(out, "\n".join(lines) + "\n")
        cross = [(t, c) for t, c in zip(terms, w) if t.delay != t.env_delay]
        if cross:
            side = out.with_name(f"{out.stem}-cross.csv")
            rows = ["kind,order,delay,envelope_delay,real,imag"]
            rows += [f"{'lagging' if t.env_delay > t.delay else 'leading'},{t.order},{t.delay},{t.env_delay},"
                     f"{c.real:.17g},{c.imag:.17g}" for t, c in cross]
            atomic.atomic_write_text(side, "\n".join(rows) + "\n")
            files.append(str(side))
    else:
        from scipy.io import savemat  # here: scipy.io is only needed by this export

        buf = io.BytesIO()
        savemat(buf, {"Coefficients": matrix, "w": w.reshape(-1, 1),
                      "terms": np.array([[t.order, t.delay, t.env_delay] for t in terms], dtype=np.float64),
                      "orders": {k: (int(v) if isinstance(v, bool) else v) for k, v in spec.to_dict().items()},
                      "run_id": rec.run_id or rec.run_dir.name}, do_compression=False)
        atomic.atomic_write_bytes(out, buf.getvalue())
