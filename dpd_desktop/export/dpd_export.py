"""Run a trained DPD on I/Q samples and export the predistorted signal u = DPD(x) (``dpd-desktop run-dpd``).

Input: a ``--split`` of the DPD run's own dataset (reloaded through the record, fingerprint checked), or an
``--input`` file: a CSV with a header naming the I, Q columns (:func:`dpd_desktop.data.read_iq_csv`'s rules); an HDF5
file with ``x`` (complex, or (N, 2) I/Q) at the root or at ``/<split>/x``; a ``.mat`` file with a variable ``x``.

Output, by the extension of ``out``, written atomically, plus a side-car ``<out>.meta.json`` (:func:`run_dpd`'s
metadata): ``.csv`` header ``I,Q,I_dpd,Q_dpd``, ``%.9g`` (round-trips float32); ``.h5``/``.hdf5`` datasets ``x`` and
``u``, (N, 2) float32, the metadata as root attributes; ``.mat`` complex64 columns ``x``, ``u`` and a struct ``meta``.

Decision: the DPD runs as the run's evaluation does (:data:`SEGMENTATION`), not as the reference's ``run_dpd`` (one
unsegmented pass, reference §5.2/§9.11), so the exported u is bit for bit the u whose PA(u) gave the run's test
metrics (``results.h5`` ``test/dpd_output``) on the same device type and library build.
"""
from __future__ import annotations

import contextlib
import io
import json
import math
import re
import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import torch

from .. import __version__
from ..data import DatasetError, read_iq_csv
from ..data.locks import ensure_unlocked
from ..data.framing import segment, unsegment
from ..metrics.transfer import as_complex
from ..models import build_from_arch
from ..training.device import resolve_device
from ..training.errors import TrainingError
from ..runs import artifacts
from .. import atomic
from ..runs.outputs import check_output, recorded_dataset
from ..runs.record import DatasetChanged, DatasetUnavailable, RecordError, RunRecord
from ..runs.workspace import Workspace

__all__ = ["DpdExportError", "run_dpd", "compute_dpd_output", "read_input_file", "write_output", "is_dpd_run",
           "OUTPUT_SUFFIXES", "SEGMENTATION"]

#: Output extension → format name.
OUTPUT_SUFFIXES = {".csv": "csv", ".h5": "hdf5", ".hdf5": "hdf5", ".mat": "mat"}
META_FORMAT = "dpd-desktop-dpd-output-1"
CSV_COLUMNS = ("I", "Q", "I_dpd", "Q_dpd")
SEGMENTATION = ("segmented exactly like the run's evaluation: consecutive segments of nperseg samples, a fresh zero "
                "initial state per segment, the last segment zero-padded at its end (padding removed from the "
                "output), eval mode, torch.inference_mode; u is bit for bit the DPD output scored in the run's "
                "results (unlike OpenDPD's run_dpd, which makes one unsegmented pass, reference §5.2/§9.11)")


class DpdExportError(ValueError):
    """run-dpd cannot run: the message names the run, file or field and says what to do, in plain words."""


# ====================================================================================================== public API
def is_dpd_run(run_dir: str | Path) -> bool:
    """Whether ``run_dir`` is a run folder whose ``config.json`` says ``experiment.step == "dpd"`` and that holds a
    ``best.pt`` (never raises)."""
    rec = RunRecord.read(run_dir)
    return rec is not None and rec.step == "dpd" and rec.best_checkpoint.is_file()


def run_dpd(workspace: Workspace | str | Path | None, run: str | Path, *, out: str | Path,
            input_file: str | Path | None = None, split: str = "test", device: str = "cpu",
            dataset=None, overwrite: bool = False) -> dict[str, Any]:
    """Compute u = DPD(x) with a DPD run's selected checkpoint and write it to ``out``; returns the metadata.

    Args:
        workspace: the workspace (or its root folder) in which ``run`` (an id or a folder) is looked up.
        out: output file; the extension picks the format.
        input_file: I/Q input file instead of ``split`` ("train", "val", "test") of the run's dataset (an HDF5 input
            without a root ``x`` is read from ``/<split>/x``).
        device: "cpu", "cuda", "cuda:N" or "auto".
        dataset: the run's loaded dataset (one that cannot be reloaded); it must have the recorded fingerprint.
        overwrite: an existing ``out`` (and its ``.meta.json``) may be replaced, never a protected file.

    Raises:
        DpdExportError: an unsupported extension, no such DPD run, an unreadable record or checkpoint, a dataset
            that cannot be reloaded (suggesting ``--input``), an unreadable input, an unknown device, an ``out``
            that cannot be written; the message names the file and field.
        OutputRefused: the output rule (runs/outputs.py) refuses ``out`` or its ``.meta.json``.
    """
    if isinstance(workspace, Workspace):
        ws = workspace
    else:  # a root folder, or any object with a ``root`` (run folders resolve without a workspace anyway)
        ws = Workspace(getattr(workspace, "root", workspace)) if workspace is not None else Workspace()
    out = check_output(out, overwrite=overwrite, suffixes=tuple(OUTPUT_SUFFIXES), inputs=[input_file], workspace=ws)
    fmt = output_format(out)
    if split not in ("train", "val", "test"):
        raise DpdExportError(f"split: expected train, val or test, got {split!r}")
    try:
        run_dir = ws.resolve(run)
    except FileNotFoundError as exc:
        raise DpdExportError(f"{exc} (give a DPD run id of the workspace {ws.root} or a DPD run folder)") from exc
    try:
        rec = RunRecord.open(run_dir)
    except RecordError as exc:
        raise DpdExportError(str(exc)) from exc
    cfg_path = rec.config_path
    source = recorded_dataset(rec.dataset)
    for target in (out, meta_path(out)):
        check_output(target, overwrite=overwrite, inputs=[input_file], datasets=[source], workspace=ws)
    if rec.step != "dpd":
        hint = (f" (this is a PA run: train a DPD through it with dpd-desktop train-dpd --pa-run {run_dir.name}, "
                "then give that DPD run)" if rec.step == "pa" else "")
        raise DpdExportError(f"{cfg_path}: field 'experiment.step' is {rec.step!r}; run-dpd needs a DPD "
                             f"run{hint}")
    model, ckpt_meta = _load_dpd_model(rec)
    dev = _device(device)

    nperseg = _int_field(rec.dataset.spec.get("nperseg"), cfg_path, "dataset.spec.nperseg")
    bs_eval = _int_field(rec.config.batch_size_eval, cfg_path, "experiment.batch_size_eval")
    if input_file is not None:
        x, input_info = read_input_file(input_file, split)
        used_split = None
    else:
        ds = _run_dataset(rec, dataset)
        x = getattr(ds, split).x
        used_split = split
        input_info = None

    u = compute_dpd_output(model, x, nperseg, batch_size=bs_eval, device=dev, cudnn=rec.device.get("cudnn"))
    meta = _metadata(rec, ckpt_meta, x, u, out=out, fmt=fmt, split=used_split,
                     input_info=input_info, nperseg=nperseg, device=str(dev))
    write_output(out, x, u, meta, overwrite=overwrite)
    side = meta_path(out)
    try:
        atomic.atomic_write_json(side, meta)
    except OSError as exc:
        raise DpdExportError(f"cannot write the metadata file {side}: {_os_reason(exc, side)}") from exc
    return meta


def output_format(out: str | Path) -> str:
    """"csv", "hdf5" or "mat" from the output file's extension; anything else raises :class:`DpdExportError`."""
    suffix = Path(out).suffix.lower()
    if suffix not in OUTPUT_SUFFIXES:
        shown = f"extension {suffix!r}" if suffix else "no extension"
        raise DpdExportError(f"output file {Path(out).name}: {shown} is not supported; use one of "
                             f"{', '.join(OUTPUT_SUFFIXES)} (CSV I,Q,I_dpd,Q_dpd; HDF5 datasets x and u; MATLAB x, u)")
    return OUTPUT_SUFFIXES[suffix]


def _os_reason(exc: OSError, target: Path) -> str:
    """Why a write failed, without the name of the temporary file next to ``target`` (the user never asked for it)."""
    if exc.strerror:
        return exc.strerror
    text = re.sub(re.escape(f".{target.name}.") + r"\S*?\.tmp", target.name, str(exc))
    return text or type(exc).__name__


def meta_path(out: str | Path) -> Path:
    """The side-car metadata file of an output: ``<out>.meta.json``."""
    out = Path(out)
    return out.with_name(out.name + ".meta.json")


def compute_dpd_output(model, x: np.ndarray, nperseg: int, batch_size: int = 64, device="cpu",
                       cudnn: dict[str, Any] | None = None) -> np.ndarray:
    """u = DPD(x) for an (N, 2) float32 series, segmented as :data:`SEGMENTATION` says; returns (N, 2) float32.
    ``cudnn``: the run's recorded cuDNN flags (``benchmark``, ``deterministic``), applied on CUDA."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    n = x.shape[0]
    dev = torch.device(device)
    xs = torch.from_numpy(segment(x, nperseg)).to(dev)
    model.to(dev)
    ctx = contextlib.nullcontext()
    if dev.type == "cuda" and cudnn:
        ctx = torch.backends.cudnn.flags(enabled=True, benchmark=bool(cudnn.get("benchmark", False)),
                                         deterministic=bool(cudnn.get("deterministic", False)))
    was_training = model.training
    model.eval()
    try:
        with ctx, torch.inference_mode():
            parts = [model(xs[i:i + batch_size]) for i in range(0, xs.shape[0], batch_size)]
            u_seg = torch.cat(parts, dim=0).cpu().numpy()
    finally:
        model.train(was_training)
    return np.ascontiguousarray(unsegment(u_seg, n), dtype=np.float32)


def read_input_file(path: str | Path, split: str = "test") -> tuple[np.ndarray, dict[str, Any]]:
    """The I/Q samples x of an input file (module docstring): ((N, 2) float32, {path, format, where, sha256}).

    Raises:
        DpdExportError: a missing, unreadable or corrupt file ("not a readable MATLAB/HDF5 file"), a CSV breaking
            the rules (file and line named), an unknown extension, no ``x``, a wrong shape, non-finite values.
    """
    p = Path(path).expanduser()
    if not p.is_file():
        what = ("is a folder; give a file (.csv, .h5/.hdf5 or .mat)" if p.is_dir()
                else "is not a regular file" if p.exists() else "not found")
        raise DpdExportError(f"input file {p}: {what}")
    suffix = p.suffix.lower()
    if suffix == ".csv":
        try:
            x = read_iq_csv(p)
        except ValueError as exc:  # DatasetError names the file and line
            raise DpdExportError(f"input file {exc}") from exc
        where, kind = "columns I,Q", "csv"
    elif suffix in (".h5", ".hdf5"):
        x, where = _read_h5_x(p, split)
        kind = "hdf5"
    elif suffix == ".mat":
        x, where = _read_mat_x(p)
        kind = "mat"
    else:
        raise DpdExportError(f"input file {p.name}: extension {suffix or '(none)'!r} is not supported; use .csv "
                             "(header + columns I,Q), .h5/.hdf5 (dataset x) or .mat (variable x)")
    if x.shape[0] < 1:
        raise DpdExportError(f"input file {p.name}: {where} holds no samples")
    finite = np.isfinite(x).all(axis=1)
    if not finite.all():
        k = int(np.argmin(finite))
        raise DpdExportError(f"input file {p.name}: {where} has a non-finite value at sample index {k}")
    return np.ascontiguousarray(x, dtype=np.float32), {"path": str(p.resolve()), "format": kind, "where": where,
                                                      "sha256": artifacts.file_sha256(p)}


def write_output(out: str | Path, x: np.ndarray, u: np.ndarray, meta: dict[str, Any],
                 overwrite: bool = False) -> Path:
    """Write x and u to ``out`` in the format of its extension, atomically. Returns the path.

    Raises:
        DpdExportError: an unsupported extension, or ``out`` cannot be written (named, not the temporary file).
        OutputRefused: the output rule (runs/outputs.py) refuses ``out``.
    """
    out = Path(out)
    fmt = output_format(out)
    check_output(out, overwrite=overwrite)
    try:
        return _write_output(out, fmt, x, u, meta)
    except OSError as exc:
        raise DpdExportError(f"cannot write the output file {out}: {_os_reason(exc, out)}; expected a file in a "
                             "writable folder") from exc


def _write_output(out: Path, fmt: str, x: np.ndarray, u: np.ndarray, meta: dict[str, Any]) -> Path:
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = np.ascontiguousarray(u, dtype=np.float32)
    if fmt == "csv":
        buf = io.StringIO()
        np.savetxt(buf, np.concatenate([x, u], axis=1), fmt="%.9g", delimiter=",", header=",".join(CSV_COLUMNS),
                   comments="")
        return atomic.atomic_write_text(out, buf.getvalue())
    if fmt == "hdf5":
        def write(tmp: str) -> None:
            with h5py.File(tmp, "w") as f:
                f.create_dataset("x", data=x)
                f.create_dataset("u", data=u)
                for k, v in _flat_attrs(meta).items():
                    f.attrs[k] = v
        return atomic.atomic_write_via(out, write)
    from scipy.io import savemat  # a 0.14 s import (python -X importtime), .mat only

    buf = io.BytesIO()
    savemat(buf, {"x": as_complex(x, np.complex64), "u": as_complex(u, np.complex64), "meta": _mat_struct(meta)}, oned_as="column",
            do_compression=False)
    return atomic.atomic_write_bytes(out, buf.getvalue())


# ====================================================================================================== internals
def _int_field(v, cfg_path: Path, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise DpdExportError(f"{cfg_path}: field '{name}' is {v!r}, expected a positive integer")
    return v


def _load_dpd_model(rec: RunRecord):
    """Build the DPD model the record describes and load its ``best.pt``, verifying the architecture like
    ``load_pa_for_dpd`` does (errors name the file and the field)."""
    ckpt = rec.best_checkpoint
    arch = rec.arch
    try:
        _, meta = artifacts.load_checkpoint(ckpt)
    except artifacts.CheckpointError as exc:
        hint = " (the run has no selected checkpoint: did it finish at least one epoch?)" \
            if not ckpt.exists() else ""
        raise DpdExportError(f"{exc}{hint}") from exc
    if meta.get("role") not in (None, "dpd"):
        raise DpdExportError(f"{ckpt}: field 'role' is {meta['role']!r}; expected a DPD checkpoint")
    try:
        model = build_from_arch(arch)
    except (KeyError, ValueError, TypeError) as exc:
        raise DpdExportError(f"{rec.config_path}: cannot build the DPD model {arch} ({exc})") from exc
    try:
        artifacts.load_state_checked(model, ckpt, arch)
    except artifacts.CheckpointError as exc:
        raise DpdExportError(str(exc)) from exc
    model.eval()
    info = {"checkpoint": str(ckpt), "sha256": artifacts.file_sha256(ckpt), "selected_epoch": meta.get("epoch"),
            **arch}
    return model, info


def _device(requested: str):
    try:
        return resolve_device(str(requested))
    except TrainingError as exc:
        raise DpdExportError(str(exc)) from exc


_ADVICE = ("pass the samples to predistort with --input FILE (CSV with header and columns I,Q; HDF5 dataset x; "
           ".mat variable x)")


def _run_dataset(rec: RunRecord, dataset=None):
    """The run's dataset: ``dataset`` when given, else reloaded through the record (:meth:`DatasetRef.load`: the
    demo regenerated from its recorded settings); the fingerprint must match."""
    try:
        return rec.dataset.load(dataset)
    except DatasetChanged as exc:
        raise DpdExportError(str(exc) if dataset is not None else f"{exc}; {_ADVICE}") from exc
    except DatasetUnavailable as exc:
        raise DpdExportError(f"{exc}; {_ADVICE}") from exc


def _stats(a: np.ndarray) -> tuple[float, float]:
    a = a.astype(np.float64)
    mag2 = a[:, 0] ** 2 + a[:, 1] ** 2
    return float(np.sqrt(np.max(mag2))), float(np.sqrt(np.mean(mag2)))


def _metadata(rec: RunRecord, ckpt_info, x, u, *, out, fmt, split, input_info, nperseg, device):
    exp = rec.config
    dref = rec.dataset
    spec = dref.spec
    pa = rec.pa or {}
    run_dir = rec.run_dir
    peak_x, rms_x = _stats(x)
    peak_u, rms_u = _stats(u)
    nonfinite = int(np.count_nonzero(~np.isfinite(u).all(axis=1)))
    if fmt == "csv":
        columns = {"I": "DPD input x, in-phase", "Q": "DPD input x, quadrature",
                   "I_dpd": "DPD output u = DPD(x), in-phase (the predistorted PA input)",
                   "Q_dpd": "DPD output u = DPD(x), quadrature"}
    else:
        columns = {"x": "DPD input x, I/Q" + (" (N, 2)" if fmt == "hdf5" else " complex I + jQ"),
                   "u": "DPD output u = DPD(x), the predistorted PA input" +
                        (", I/Q (N, 2)" if fmt == "hdf5" else ", complex I + jQ")}
    return {
        "format": META_FORMAT,
        "file": str(out.resolve()),
        "file_format": fmt,
        "columns": columns,
        "dtype": "float32" if fmt != "mat" else "complex64 (float32 I and Q)",
        "samples": int(x.shape[0]),
        "sample_order": "time order; sample n of u is DPD(x)[n]",
        "sample_rate_hz": spec.get("sample_rate_hz"),
        "gain": rec.gain,
        "gain_rule": rec.gain_rule,
        "target": "g·x (the DPD was trained so that PA(u) approximates g·x)",
        "peak_abs_x": peak_x,
        "peak_abs_u": peak_u,
        "rms_abs_x": rms_x,
        "rms_abs_u": rms_u,
        "nonfinite_u_samples": nonfinite,
        "dpd_run_id": rec.doc.get("run_id", run_dir.name),
        "dpd_run_dir": str(run_dir.resolve()),
        "dpd_model": {**rec.arch, "model_id": rec.model.get("model_id")},
        "dpd_checkpoint": ckpt_info["checkpoint"],
        "dpd_checkpoint_sha256": ckpt_info["sha256"],
        "dpd_selected_epoch": ckpt_info.get("selected_epoch"),
        "pa_run_id": pa.get("run_id"),
        "pa_checkpoint": pa.get("checkpoint"),
        "pa_checkpoint_sha256": pa.get("sha256"),
        "dataset_name": dref.name,
        "dataset_source": dref.source if dref.kind != "demo" else dref.shown,
        "dataset_fingerprint": dref.fingerprint,
        "split": split,
        "input_file": (input_info or {}).get("path"),
        "input_format": (input_info or {}).get("format"),
        "input_where": (input_info or {}).get("where"),
        "input_sha256": (input_info or {}).get("sha256"),
        "nperseg": nperseg,
        "segmentation": SEGMENTATION,
        "batch_size_eval": exp.batch_size_eval,
        "device": device,
        "run_device": rec.device.get("device"),
        "semantics": ("offline: u is computed from recorded x with the DPD's selected checkpoint, in the data's "
                      "units; no physical calibration (scale and delay for a real PA are up to the user)"),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "dpd_desktop_version": __version__,
    }


def _read_h5_x(p: Path, split: str) -> tuple[np.ndarray, str]:
    expected = "expected an HDF5 file with a dataset x (complex (N,) or float (N, 2) I/Q)"
    try:
        f = h5py.File(p, "r")
    except Exception as exc:  # noqa: BLE001 - h5py raises OSError, but corrupt files can raise others
        raise DpdExportError(f"input file {p.name}: not a readable HDF5 file ({exc}); {expected}") from exc
    with f:
        for where in ("x", f"{split}/x"):
            try:
                obj = f.get(where)
                data = obj[()] if isinstance(obj, h5py.Dataset) else None
            except Exception as exc:  # noqa: BLE001 - a damaged object header or data chunk
                raise DpdExportError(f"input file {p.name}: not a readable HDF5 file (reading /{where}: "
                                     f"{type(exc).__name__}: {exc}); {expected}") from exc
            if data is not None:
                return _iq_from_array(data, p, "/" + where), "/" + where
    raise DpdExportError(f"input file {p.name}: no dataset 'x' at the root nor '/{split}/x' (expected complex (N,) "
                         "or float (N, 2) I/Q samples)")


def _read_mat_x(p: Path) -> tuple[np.ndarray, str]:
    from scipy.io import loadmat  # a 0.14 s import (python -X importtime), .mat only

    try:
        ensure_unlocked(p)
    except DatasetError as exc:
        raise DpdExportError(f"input file {exc}") from exc
    try:
        d = loadmat(p, variable_names=["x"])
    except NotImplementedError as exc:  # MATLAB v7.3 files are HDF5
        raise DpdExportError(f"input file {p.name}: MATLAB v7.3 file; save it with -v7 or use HDF5 ({exc})") from exc
    except Exception as exc:  # noqa: BLE001 - truncated/corrupt files raise IndexError, OSError, TypeError, ...
        raise DpdExportError(f"input file {p.name}: not a readable MATLAB file ({type(exc).__name__}: {exc}); "
                             "expected a MATLAB v4-v7 .mat file with a variable x") from exc
    if "x" not in d:
        raise DpdExportError(f"input file {p.name}: variable 'x' missing (expected a complex vector or an N×2 I/Q "
                             "matrix)")
    return _iq_from_array(d["x"], p, "variable x"), "variable x"


def _iq_from_array(a: np.ndarray, p: Path, where: str) -> np.ndarray:
    a = np.asarray(a)
    expected = "a complex vector (N,) / (N, 1) / (1, N) or a real N×2 I/Q matrix"
    if np.iscomplexobj(a):
        if a.ndim == 2 and 1 in a.shape:
            a = a.reshape(-1)
        if a.ndim != 1:
            raise DpdExportError(f"input file {p.name}: {where} has shape {a.shape}; expected {expected}")
        out = np.empty((a.shape[0], 2), dtype=np.float32)
        out[:, 0] = a.real
        out[:, 1] = a.imag
        return out
    if a.dtype.kind in "fiu" and a.ndim == 2 and a.shape[1] == 2:
        return np.ascontiguousarray(a, dtype=np.float32)
    raise DpdExportError(f"input file {p.name}: {where} has shape {a.shape} and dtype {a.dtype}; expected {expected}")


def _flat_attrs(meta: dict[str, Any]) -> dict[str, Any]:
    """HDF5 attributes: numbers and strings as they are, dicts/lists as JSON text, None left out."""
    out = {}
    for k, v in meta.items():
        if v is None:
            continue
        if isinstance(v, (dict, list, tuple)):
            v = json.dumps(v)
        elif isinstance(v, float) and not math.isfinite(v):
            v = str(v)
        out[k] = v
    out["metadata_json"] = json.dumps(meta)
    return out


def _mat_struct(meta: dict[str, Any]) -> dict[str, Any]:
    """MATLAB struct fields: None → empty string, nested dicts → structs, lists → cell-free JSON text."""
    def conv(v):
        if v is None:
            return ""
        if isinstance(v, dict):
            return {str(k): conv(w) for k, w in v.items()}
        if isinstance(v, (list, tuple)):
            return json.dumps(v)
        return v

    return {k: conv(v) for k, v in meta.items()}


