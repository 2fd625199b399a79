"""Turn two measured signals (PA input and PA output) into a dataset folder our loaders read (:func:`import_capture`).

1. **Read** each file: a CSV with a header naming I,Q (data/csv_parse.py, float64), HDF5 or MAT v4-v7 (a dataset or
   variable named in :data:`SIGNAL_NAMES`, or the only one): complex (N,) or real (N, 2). Non-finite samples are
   refused (file and first index named); lengths that differ are both cut to the shorter (reported).
2. **Delay** (:func:`.estimators.estimate_delay` on the first 65,536 samples): only the integer part d is removed,
   pairing y[n + d] with x[n]; the fraction (|f| ≤ 0.5) is reported, not resampled away: every sample is measured.
3. **Normalize**: x and y divided by one factor, max|x| over the train range (|x| peaks at 1.0 as in the bundled
   datasets, reference §1.4/§1.5; the gain y/x is kept). ``normalize=False`` keeps the values.
4. **Split** contiguously: n_train = floor(N·r_train), n_val = floor(N·r_val), test = the rest.
5. **Write** a split-CSV folder (:func:`dpd_desktop.data.save_split_csv`) atomically, never over a non-empty folder;
   spec.json's ``import`` entry records the source files, their SHA-256, the delay, the scale and the cut.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from ..data import DatasetError, DatasetSpec, IQDataset, Split, load_dataset, save_split_csv
from ..data.csv_parse import parse_iq_csv
from ..metrics.transfer import as_complex
from ..runs.artifacts import file_sha256
from ..runs.outputs import OutputRefused, check_output, write_folder
from . import estimators as est

__all__ = ["CaptureImportError", "ImportResult", "import_capture", "read_signal", "SIGNAL_NAMES"]

#: Dataset / variable names looked for in HDF5 and MAT files, in this order.
SIGNAL_NAMES = ("x", "y", "iq", "data", "signal")
_DELAY_BLOCK = 65536


class CaptureImportError(ValueError):
    """A capture that cannot be imported; the message names the file and what was expected."""


@dataclass(frozen=True)
class ImportResult:
    """What :func:`import_capture` wrote: the folder, the delay found (``delay_integer`` removed, ``delay_fraction``
    left), the scale the samples were divided by, the samples dropped and the split sizes."""

    folder: Path
    delay_integer: int
    delay_fraction: float
    scale: float
    n_input: int
    n_output: int
    n_used: int
    n_samples: dict[str, int]
    spec: DatasetSpec


def _to_complex(a: np.ndarray, path: Path, where: str) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.names and {"r", "i"} <= set(a.dtype.names):  # h5py compound complex
        a = a["r"] + 1j * a["i"]
    if np.iscomplexobj(a):
        if a.ndim == 2 and 1 in a.shape:
            a = a.reshape(-1)
        if a.ndim == 1:
            return a.astype(np.complex128)
    elif a.dtype.kind in "fiu" and a.ndim == 2 and a.shape[1] == 2:
        return as_complex(a)
    raise CaptureImportError(f"{path.name}: {where} has shape {a.shape} and dtype {a.dtype}; expected a complex "
                             "vector (N,) or a real N×2 I/Q matrix")


def _pick(names: list[str], path: Path, kind: str) -> str:
    for n in SIGNAL_NAMES:
        if n in names:
            return n
    if len(names) == 1:
        return names[0]
    raise CaptureImportError(f"{path.name}: no {kind} named {', '.join(SIGNAL_NAMES)} and {len(names)} others "
                             f"({', '.join(names[:6]) or 'none'}); keep one signal per file")


def read_signal(path: str | Path) -> np.ndarray:
    """One signal as complex128 (N,), from CSV (header I,Q), HDF5 or MAT (module docstring, step 1).

    Raises CaptureImportError naming the file: missing, unknown extension, unreadable, no/ambiguous signal, wrong
    shape, empty, non-finite samples (the first index).
    """
    p = Path(path).expanduser()
    if not p.is_file():
        raise CaptureImportError(f"{p}: {'is a folder, give a file' if p.is_dir() else 'not found'}")
    suffix = p.suffix.lower()
    if suffix == ".csv":
        try:
            a = parse_iq_csv(p)  # float64 as parsed (read_iq_csv would round to float32 first)
        except DatasetError as exc:
            raise CaptureImportError(str(exc)) from exc
        z = a[:, 0].astype(np.float64) + 1j * a[:, 1].astype(np.float64)
    elif suffix in (".h5", ".hdf5"):
        try:
            with h5py.File(p, "r") as f:
                names = [k for k, v in f.items() if isinstance(v, h5py.Dataset)]
                name = _pick(names, p, "dataset")
                z = _to_complex(f[name][()], p, f"dataset /{name}")
        except OSError as exc:
            raise CaptureImportError(f"{p.name}: not a readable HDF5 file ({exc})") from exc
    elif suffix == ".mat":
        from scipy.io import loadmat  # 0.14 s import (python -X importtime), .mat only

        try:
            d = loadmat(p)
        except NotImplementedError as exc:
            raise CaptureImportError(f"{p.name}: MATLAB v7.3 file; save it with -v7 or use HDF5") from exc
        except Exception as exc:  # noqa: BLE001 - corrupt files raise many types
            raise CaptureImportError(f"{p.name}: not a readable MATLAB file ({type(exc).__name__}: {exc})") from exc
        name = _pick([k for k in d if not k.startswith("__")], p, "variable")
        z = _to_complex(d[name], p, f"variable {name}")
    else:
        raise CaptureImportError(f"{p.name}: extension {suffix or '(none)'!r} not supported; use .csv (header I,Q), "
                                 ".h5/.hdf5 or .mat")
    if z.size < 2:
        raise CaptureImportError(f"{p.name}: holds {z.size} sample(s)")
    bad = ~np.isfinite(z)
    if bad.any():
        raise CaptureImportError(f"{p.name}: {int(bad.sum())} non-finite sample(s), the first at index "
                                 f"{int(np.argmax(bad))}; remove or interpolate them first")
    return z


def _cut(n: int, ratios: dict[str, float]) -> list[int]:
    n_train = math.floor(n * ratios["train"])
    n_val = math.floor(n * ratios["val"])
    return [0, n_train, n_train + n_val, n]


#: the spec field each import-capture option sets (its channel-layout errors name the option)
_OPTIONS = {"input_signal_fs": "--sample-rate", "bw_main_ch": "--bandwidth", "bw_sub_ch": "--carrier-bandwidth",
            "n_sub_ch": "--carriers", "nperseg": "--nperseg"}


def _positive(v, integer: bool = False) -> bool:
    ok = isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and v > 0
    return ok and (not integer or int(v) == v)


def _check_options(sample_rate_hz, bandwidth_hz, n_sub_ch, bw_sub_hz, nperseg) -> None:
    """Refuse a non-positive or non-finite rate, bandwidth, carrier count or segment length, naming the option."""
    hz = (("--sample-rate", sample_rate_hz), ("--bandwidth", bandwidth_hz), ("--carrier-bandwidth", bw_sub_hz))
    for opt, v in hz:
        if v is not None and not _positive(v):
            raise CaptureImportError(f"{opt} {v}: expected a positive number of Hz")
    for opt, v in (("--carriers", n_sub_ch), ("--nperseg", nperseg)):
        if not _positive(v, integer=True):
            raise CaptureImportError(f"{opt} {v}: expected a positive integer")


def import_capture(x_file: str | Path, y_file: str | Path, out: str | Path, *, sample_rate_hz: float,
                   bandwidth_hz: float, n_sub_ch: int = 1, bw_sub_hz: float | None = None, nperseg: int = 2560,
                   split: tuple[float, float, float] = (0.6, 0.2, 0.2), normalize: bool = True,
                   description: str | None = None) -> ImportResult:
    """Import a capture (module docstring); returns what was written. The folder loads with
    :func:`dpd_desktop.data.load_dataset`.

    Raises:
        CaptureImportError: a file (named) cannot be read; ratios not positive or not summing to 1; a split
            shorter than one ``nperseg`` segment (val/test) or empty; the channel layout impossible for fs/nperseg
            (the spec's field named); ``out`` exists and is not empty; the input and output are one file, or equal
            sample for sample.
    """
    out = Path(out).expanduser()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CaptureImportError(f"{out}: already exists; choose a new folder")
    try:
        check_output(out, folder=True, inputs=[x_file, y_file])  # never inside a run folder, dataset, workspace
    except OutputRefused as exc:
        raise CaptureImportError(str(exc)) from exc
    _check_options(sample_rate_hz, bandwidth_hz, n_sub_ch, bw_sub_hz, nperseg)
    if len(split) != 3 or min(split) <= 0 or abs(sum(split) - 1) > 1e-6:
        raise CaptureImportError(f"--split {','.join(map(str, split))}: expected three positive ratios summing to 1")
    ratios = dict(zip(("train", "val", "test"), (float(r) for r in split)))
    spec = DatasetSpec(sample_rate_hz=float(sample_rate_hz), bw_main_hz=float(bandwidth_hz),
                       bw_sub_hz=float(bw_sub_hz or bandwidth_hz / n_sub_ch), n_sub_ch=int(n_sub_ch),
                       nperseg=int(nperseg), split_ratios=ratios)
    try:
        spec.require_metrics("spec.json")
    except DatasetError as exc:
        option = _OPTIONS.get(exc.field or "")
        raise CaptureImportError(f"channel layout{f' ({option})' if option else ''}: {exc}") from exc

    x_path, y_path = Path(x_file).expanduser(), Path(y_file).expanduser()
    if x_path.resolve() == y_path.resolve():
        raise CaptureImportError(f"{x_path}: named as both the PA input and the PA output; give the measured output "
                                 "as --output")
    x0, y0 = read_signal(x_path), read_signal(y_path)
    if x0.shape == y0.shape and np.array_equal(x0, y0):
        raise CaptureImportError(f"{y_path.name}: the PA output equals the PA input ({x_path.name}) sample for "
                                 "sample; is it the measured output?")
    n = min(x0.size, y0.size)
    x, y = x0[:n], y0[:n]
    delay = est.estimate_delay(x[:_DELAY_BLOCK], y[:_DELAY_BLOCK])
    if abs(delay.integer) >= n // 2:
        raise CaptureImportError(f"{y_path.name}: delay of {delay.integer} samples leaves too little overlap")
    x, y = est.shift_integer(x, y, delay.integer)
    b = _cut(x.size, ratios)
    scale = 1.0
    if normalize:
        peak = float(np.abs(x[: b[1]]).max()) if b[1] > 0 else 0.0
        if peak <= 0:
            raise CaptureImportError(f"{x_path.name}: the input is all zero over the train range; nothing to scale")
        scale = peak
    sizes = {s: b[i + 1] - b[i] for i, s in enumerate(ratios)}
    for s, c in sizes.items():
        need = int(nperseg) if s in ("val", "test") else 1
        if c < need:
            raise CaptureImportError(f"split {s} would hold {c} samples ({x.size} after the delay cut, ratios "
                                     f"{split}); it needs at least {need} (val/test: one nperseg segment)")

    def iq(z: np.ndarray) -> np.ndarray:
        z = z / scale
        return np.stack([z.real, z.imag], axis=1).astype(np.float32)

    extra: dict[str, Any] = {"import": {
        "input_file": x_path.name, "output_file": y_path.name,
        "input_sha256": file_sha256(x_path), "output_sha256": file_sha256(y_path),
        "samples_input": int(x0.size), "samples_output": int(y0.size),
        "delay_removed_samples": delay.integer, "delay_fraction_left": round(delay.fraction, 4),
        "delay_rule": "integer only: y[n + d] paired with x[n]",
        "scale": scale, "scale_rule": "x and y divided by max|x| of the train range" if normalize else "none",
        "split": "contiguous floor cut", }}
    if description:
        extra["description"] = description
    spec = replace(spec, extra=extra)
    splits = [Split(iq(x[b[i]:b[i + 1]]), iq(y[b[i]:b[i + 1]])) for i in range(3)]
    ds = IQDataset(name=out.name, source=out, spec=spec, train=splits[0], val=splits[1], test=splits[2])

    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_folder(out, lambda tmp: save_split_csv(ds, tmp))  # replaces the empty folder checked above
    except OSError as exc:
        raise CaptureImportError(f"{out}: cannot write the dataset ({exc})") from exc
    load_dataset(out)  # the written folder must load (raises DatasetError naming the file)
    return ImportResult(folder=out, delay_integer=delay.integer, delay_fraction=delay.fraction, scale=scale,
                        n_input=int(x0.size), n_output=int(y0.size), n_used=int(x.size), n_samples=sizes, spec=spec)
