"""Dataset readers and writers: split-CSV folders, single CSV files and HDF5 files (reference §1.1; HDF5 layout in
``docs/hdf5-layout.md``). Entry point: :func:`load_dataset`, whose docstring gives the dispatch.

* **split CSV folder**: ``spec.json`` (optional for loading; training needs its metric fields) plus
  ``{train,val,test}_{input,output}.csv``, each a header naming the I/Q columns (:data:`IQ_HEADER_PAIRS`, either
  order) and two numeric columns (rules: :mod:`dpd_desktop.data.csv_parse`).
* **single CSV**: named columns ``I_in, Q_in, I_out, Q_out`` (any order, extra columns ignored), cut contiguously in
  time order: ``n_train = floor(N·r_train)``, ``n_val = floor(N·r_val)``, test = the rest (reference §1.1), or at
  the spec's ``split_indices``.
* **HDF5** (``.h5``/``.hdf5``): groups ``/train``, ``/val``, ``/test`` with datasets ``x`` and ``y``.

Samples are used as stored, parsed as float64 and cast to float32, with no normalization (reference §1.4).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from ..atomic import atomic_write_text, atomic_write_via
from ..metrics.transfer import as_complex
from .csv_parse import IQ_HEADER_PAIRS, parse_columns_csv, parse_iq_csv, read_iq_csv
from .errors import DatasetError
from .spec import DatasetSpec, check_split_indices, normalize_spec, read_spec_file

__all__ = [
    "Split",
    "IQDataset",
    "load_dataset",
    "read_iq_csv",
    "save_hdf5",
    "save_split_csv",
    "SPLIT_NAMES",
    "SPLIT_CSV_FILES",
    "SINGLE_CSV_COLUMNS",
    "HDF5_SUFFIXES",
    "HDF5_LAYOUT",
    "IQ_HEADER_PAIRS",
]

SPLIT_NAMES = ("train", "val", "test")
#: The six files of a split-CSV folder, in (split, role) order.
SPLIT_CSV_FILES = tuple(f"{s}_{r}.csv" for s in SPLIT_NAMES for r in ("input", "output"))
#: Required columns of a single CSV (reference §1.1).
SINGLE_CSV_COLUMNS = ("I_in", "Q_in", "I_out", "Q_out")
HDF5_SUFFIXES = (".h5", ".hdf5")
#: Value of the root attribute ``dpd_desktop_layout`` written by :func:`save_hdf5` (see docs/hdf5-layout.md).
HDF5_LAYOUT = "iq-splits-v1"
_H5_RESERVED_ATTRS = ("dpd_desktop_layout", "dpd_desktop_name")


# =====================================================================================================================
# Containers
# =====================================================================================================================
@dataclass(frozen=True, eq=False)
class Split:
    """One split of a dataset: PA input ``x`` and sample-aligned PA output ``y``.

    Attributes
    ----------
    x: np.ndarray, shape (N, 2), float32, C-contiguous — columns I, Q of the PA input x[n].
    y: np.ndarray, shape (N, 2), float32, C-contiguous — columns I, Q of the measured PA output y[n].

    Other dtypes or layouts are copied to C-contiguous float32. Treat them as read-only (the fingerprint assumes
    so). Equality is identity (compare ``IQDataset.fingerprint()``). Raises DatasetError: shape not (N, 2), N < 1,
    or ``len(x) != len(y)``.
    """

    x: np.ndarray
    y: np.ndarray
    #: The float64 values as parsed from text (CSV), when the reader had them; None otherwise. The reference keeps
    #: float64 until its dataset casts to float32, so the DPD target g·x and the gain g are computed from these
    #: (reference §1.4, §2.3) to reproduce its float32 targets bit for bit.
    x64: np.ndarray | None = field(default=None, repr=False)
    y64: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name in ("x", "y"):
            a = np.ascontiguousarray(getattr(self, name), dtype=np.float32)
            if a.ndim != 2 or a.shape[1] != 2:
                raise DatasetError(f"split array {name} has shape {a.shape}", field=name,
                                   expected="shape (N, 2) with columns I, Q")
            object.__setattr__(self, name, a)
        if len(self.x) != len(self.y):
            raise DatasetError(f"x has {len(self.x)} samples but y has {len(self.y)}", field="x/y",
                               expected="equal lengths")
        if len(self.x) < 1:
            raise DatasetError("split is empty", field="x", expected="at least 1 sample")

    def __len__(self) -> int:
        """Number of samples N."""
        return int(self.x.shape[0])

    @property
    def x_complex(self) -> np.ndarray:
        """x as complex64, shape (N,): I + jQ (a copy)."""
        return as_complex(self.x, np.complex64)

    @property
    def y_complex(self) -> np.ndarray:
        """y as complex64, shape (N,): I + jQ (a copy)."""
        return as_complex(self.y, np.complex64)


@dataclass(frozen=True, eq=False)
class IQDataset:
    """A loaded PA dataset: three contiguous splits plus the normalized spec.

    Attributes
    ----------
    name: str — display name (folder name, file stem, or stored name for HDF5 written by :func:`save_hdf5`).
    source: Path — what was loaded (folder or file), resolved.
    spec: DatasetSpec — normalized description (sample rate in Hz, bandwidths in Hz, nperseg in samples).
    train, val, test: Split — (N, 2) float32 arrays, in time order.
    """

    name: str
    source: Path
    spec: DatasetSpec
    train: Split
    val: Split
    test: Split

    @property
    def splits(self) -> dict[str, Split]:
        """``{"train": train, "val": val, "test": test}`` (insertion order = time order)."""
        return {"train": self.train, "val": self.val, "test": self.test}

    @property
    def n_samples(self) -> dict[str, int]:
        """Sample counts per split, e.g. ``{"train": 23040, "val": 7680, "test": 7680}``."""
        return {k: len(v) for k, v in self.splits.items()}

    @cached_property
    def gain(self) -> float:
        """Target gain g = max_t |y_train(t)| / max_t |x_train(t)| (OpenDPD reference §1.4).

        A real positive scalar: ratio of the peak amplitudes of the *training* split. Magnitudes are computed in
        float64 from the values as parsed (``Split.x64``/``y64``, like the reference's float64 arrays) or, when the
        reader had none, from the stored float32 I/Q samples; ``|z| = sqrt(I² + Q²)``. Used as the DPD target
        ``g·x`` (reference §2.3). ``nan`` if x_train is all zeros. DPA_200MHz: ≈ 2.52081; DPA_160MHz: ≈ 2.29554.
        """
        tr = self.train
        x = tr.x64 if tr.x64 is not None else tr.x.astype(np.float64)
        y = tr.y64 if tr.y64 is not None else tr.y.astype(np.float64)
        mx = float(np.sqrt(np.max(x[:, 0] ** 2 + x[:, 1] ** 2)))
        my = float(np.sqrt(np.max(y[:, 0] ** 2 + y[:, 1] ** 2)))
        return my / mx if mx > 0 else float("nan")

    def fingerprint(self) -> str:
        """SHA-256 hex digest of the data content: per split (train, val, test) and array (x, y) a header with the
        name and shape, then the little-endian float32 bytes; then ``spec.canonical_json()`` (storage details left
        out). ``name`` and ``source`` are not hashed: the same data as split CSV or HDF5 keeps its fingerprint."""
        h = hashlib.sha256(b"dpd-desktop/iq-dataset/v1\n")
        for sname, split in self.splits.items():
            for aname in ("x", "y"):
                a = np.ascontiguousarray(getattr(split, aname), dtype="<f4")
                h.update(f"{sname}.{aname}:{a.shape[0]}x{a.shape[1]}\n".encode())
                h.update(a.tobytes())
        h.update(self.spec.canonical_json().encode("utf-8"))
        return h.hexdigest()

    def summary(self) -> dict[str, Any]:
        """Short description for the GUI: ``name``, ``source`` (str), ``format``, ``train``/``val``/``test`` (sample
        counts), ``fs_mhz``, ``bw_main_mhz``, ``bw_sub_mhz`` (MHz, ``None`` when unknown), ``n_sub_ch``, ``nperseg``,
        ``gain``, ``metrics_available`` (spectral metrics computable), ``text`` (a one-line summary)."""

        def mhz(v: float | None) -> float | None:
            return None if v is None else v / 1e6

        s = self.spec
        d: dict[str, Any] = {
            "name": self.name,
            "source": str(self.source),
            "format": s.dataset_format,
            **self.n_samples,
            "fs_mhz": mhz(s.sample_rate_hz),
            "bw_main_mhz": mhz(s.bw_main_hz),
            "bw_sub_mhz": mhz(s.bw_sub_hz),
            "n_sub_ch": s.n_sub_ch,
            "nperseg": s.nperseg,
            "gain": self.gain,
            "metrics_available": s.has_metrics,
        }
        parts = [f"{d['train']:,} / {d['val']:,} / {d['test']:,} samples"]
        parts.append(f"fs {d['fs_mhz']:g} MHz" if d["fs_mhz"] is not None else "fs unknown")
        if d["bw_main_mhz"] is not None:
            parts.append(f"BW {d['bw_main_mhz']:g} MHz")
        if s.n_sub_ch is not None:
            sub = f" × {d['bw_sub_mhz']:g} MHz" if d["bw_sub_mhz"] is not None else ""
            parts.append(f"{s.n_sub_ch} carrier{'s' if s.n_sub_ch != 1 else ''}{sub}")
        parts.append(f"nperseg {s.nperseg}")
        parts.append(f"gain {self.gain:.4f}")
        d["text"] = f"{self.name}: " + ", ".join(parts)
        return d

    def __repr__(self) -> str:  # arrays would make the default repr huge
        n = self.n_samples
        return (
            f"IQDataset(name={self.name!r}, source={str(self.source)!r}, "
            f"train={n['train']}, val={n['val']}, test={n['test']}, spec={self.spec!r})"
        )


def _check_equal_length(a: np.ndarray, b: np.ndarray, pa: Path, pb: Path) -> None:
    if len(a) != len(b):
        raise DatasetError(f"length mismatch: {pa.name} has {len(a)} data rows but {pb.name} has {len(b)}", path=pb,
                           source=f"{pa.name} / {pb.name}",
                           expected="sample-aligned input/output files with equal row counts")


def _load_split_folder(folder: Path, spec: DatasetSpec) -> dict[str, Split]:
    missing = [f for f in SPLIT_CSV_FILES if not (folder / f).is_file()]
    folders = [f for f in missing if (folder / f).is_dir()]
    if folders:
        raise DatasetError(
            f"{folders[0]} in folder {folder} is a folder, not a file", path=folder / folders[0],
            expected="the six split files " + ", ".join(SPLIT_CSV_FILES) + " as CSV files",
        )
    if missing:
        hint = ""
        if len(missing) == 6:
            others = sorted(p.name for p in folder.iterdir() if p.suffix.lower() in (".csv", ".h5", ".hdf5"))
            if others:
                hint = (
                    f" (found {', '.join(others[:4])}: for a single CSV set \"dataset_format\": \"single_csv\" in "
                    "spec.json or open the file directly)"
                )
        raise DatasetError(f"missing file{'s' if len(missing) > 1 else ''} {', '.join(missing)} in folder "
                           f"{folder}{hint}", path=folder / missing[0], source=", ".join(missing),
                           expected="the six split files " + ", ".join(SPLIT_CSV_FILES))
    out: dict[str, Split] = {}
    for s in SPLIT_NAMES:
        pi, po = folder / f"{s}_input.csv", folder / f"{s}_output.csv"
        x, y = parse_iq_csv(pi), parse_iq_csv(po)
        _check_equal_length(x, y, pi, po)
        out[s] = Split(x, y, x64=_f64(x), y64=_f64(y))
    return out


def _cut_single(arr: np.ndarray, spec: DatasetSpec, path: Path, spec_path: Path | None = None) -> dict[str, Split]:
    """Cut of a single CSV: at the rows of ``split_indices`` when the spec has them (validated against the rows,
    errors naming ``spec_path``), else the contiguous floor-ratio cut (reference §1.1). ``arr`` columns: I_in, Q_in,
    I_out, Q_out."""
    n = arr.shape[0]
    x = np.ascontiguousarray(arr[:, 0:2], dtype=np.float64)
    y = np.ascontiguousarray(arr[:, 2:4], dtype=np.float64)
    indices = spec.split_indices
    if indices is not None:
        ranges = check_split_indices(indices, n, spec_path.name if spec_path is not None else "spec.json", spec_path)
    else:
        r = spec.split_ratios
        n_train, n_val = math.floor(n * r["train"]), math.floor(n * r["val"])
        ranges = {"train": (0, n_train), "val": (n_train, n_train + n_val), "test": (n_train + n_val, n)}
        for s, (a, b) in ranges.items():
            if b - a < 1:
                raise DatasetError(f"split '{s}' would be empty: {n} data rows cut with ratios {r} give "
                                   f"{n_train}/{n_val}/{n - n_train - n_val}", path=path, field="split_ratios",
                                   expected="at least 1 row in every split (more rows or larger ratio)")
    return {s: Split(x[a:b], y[a:b], x64=_f64(x[a:b]), y64=_f64(y[a:b])) for s, (a, b) in ranges.items()}


def _f64(a: np.ndarray) -> np.ndarray | None:
    """C-contiguous float64 copy of parsed text values (kept beside the float32 samples), or None."""
    return np.ascontiguousarray(a, dtype=np.float64) if a.dtype == np.float64 else None


def _check_indices_agree(spec: DatasetSpec, splits: dict[str, Split], where: str, path: Path | None) -> None:
    """A dataset stored split by split (folder of split CSVs, HDF5 groups) whose spec has ``split_indices``: they
    must describe the stored splits (one after the other, from row 0), or the dataset is refused naming the field."""
    indices = spec.split_indices
    if indices is None:
        return
    start, stored = 0, {}
    for s in SPLIT_NAMES:
        stored[s] = (start, start + len(splits[s]))
        start += len(splits[s])
    given = check_split_indices(indices, start, where, path)
    if given != stored:
        shown = ", ".join(f"{s} [{a}, {b})" for s, (a, b) in stored.items())
        raise DatasetError(
            "the split indices " + ", ".join(f"{s} [{a}, {b})" for s, (a, b) in given.items())
            + f" disagree with the stored splits ({shown})", path=path, source=where, field="split_indices",
            expected="indices that match the stored splits, or no split_indices (they cut a single CSV)",
        )


def _single_csv_path(folder: Path, spec: DatasetSpec, spec_path: Path) -> Path:
    """The single CSV that ``csv_filename`` names, confined to ``folder``: its path with links followed must lie in
    the folder, and it must be a regular file (never a device or a pipe). Raises DatasetError naming spec.json's
    field (and never reading the file)."""
    name = spec.csv_filename or "data.csv"
    target = folder / name
    try:
        inside = folder.resolve() in target.resolve().parents
    except (OSError, RuntimeError):
        inside = False
    if not inside:
        raise DatasetError(
            f"{name!r} leads outside the dataset folder {folder} (to {target.resolve()})", path=spec_path,
            source=spec_path.name, field="csv_filename",
            expected="the name of a CSV file inside the dataset folder (links leading out of it are not followed)",
        )
    if target.exists() and not target.is_file() and not target.is_dir():
        raise DatasetError(f"{name!r} is not a regular file (a device, a pipe or a socket)", path=spec_path,
                           source=spec_path.name, field="csv_filename",
                           expected="the name of a CSV file inside the dataset folder")
    return target


def _load_single_csv(path: Path, spec: DatasetSpec, spec_path: Path | None = None) -> dict[str, Split]:
    if path.is_dir():
        raise DatasetError(f"{path.name} in folder {path.parent} is a folder, not a file", path=path,
                           field="csv_filename", expected="the single CSV named by spec.json 'csv_filename'")
    if not path.is_file():
        raise DatasetError(f"missing file {path.name} in folder {path.parent}", path=path, field="csv_filename",
                           expected="the single CSV named by spec.json 'csv_filename' (default data.csv)")
    return _cut_single(parse_columns_csv(path, columns=SINGLE_CSV_COLUMNS), spec, path, spec_path)


# =====================================================================================================================
# HDF5
# =====================================================================================================================

def _attr_value(v: Any) -> Any:
    """HDF5 attribute → plain Python value (numpy scalars/arrays → Python, bytes → str, JSON object/array strings
    decoded)."""
    if isinstance(v, bytes):
        v = v.decode("utf-8", errors="replace")
    if isinstance(v, np.ndarray):
        v = v.tolist()
        if isinstance(v, list):
            v = [x.decode("utf-8", errors="replace") if isinstance(x, bytes) else x for x in v]
    elif isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, str) and v[:1] in ("{", "["):
        try:
            v = json.loads(v)
        except ValueError:
            pass
    return v


def _h5_to_iq(ds: Any, path: Path, where: str) -> np.ndarray:
    dt = ds.dtype
    shape = tuple(ds.shape)
    expected = "complex64/complex128 of shape (N,) or float of shape (N, 2) with columns I, Q"
    if dt.kind == "c" and len(shape) == 1:
        z = ds[()]
        src = np.stack([z.real, z.imag], axis=1) if z.size else np.empty((0, 2))
    elif dt.kind == "f" and len(shape) == 2 and shape[1] == 2:
        src = ds[()]
    else:
        raise DatasetError(f"dataset {where} has shape {shape} and dtype {dt}", path=path, field=where,
                           expected=expected)
    with np.errstate(over="ignore"):
        a = np.ascontiguousarray(src, dtype=np.float32)
    if a.shape[0] < 1:
        raise DatasetError(f"dataset {where} is empty", path=path, field=where, expected="at least 1 sample")
    finite = np.isfinite(a).all(axis=1)
    if not finite.all():
        k = int(np.argmin(finite))
        overflow = bool(np.isfinite(src[k]).all())
        raise DatasetError(
            f"{'value overflowing float32' if overflow else 'non-finite value'} at sample index {k} "
            f"({src[k, 0]:g}, {src[k, 1]:g})", path=path, field=where,
            expected=(f"|value| ≤ {float(np.finfo(np.float32).max):.7g} (samples are stored as float32)" if overflow
                      else "finite numbers (no NaN/Inf)"))
    return a


def _load_hdf5(path: Path) -> tuple[str, DatasetSpec, dict[str, Split]]:
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        if "lock" in str(exc).lower():  # HDF5's file lock: another process has it open for writing
            raise DatasetError(
                f"in use by another process (it holds the HDF5 file lock of {path}, e.g. while writing it)", path=path,
                expected="a file no other program is writing: close that program, or wait until it has finished",
            ) from exc
        raise DatasetError(f"cannot open as HDF5 ({exc})", path=path,
                           expected="an HDF5 file (layout in docs/hdf5-layout.md)") from exc
    with f:
        raw = {k: _attr_value(v) for k, v in f.attrs.items() if k not in _H5_RESERVED_ATTRS}
        name = _attr_value(f.attrs.get("dpd_desktop_name", path.stem))
        spec = normalize_spec(raw, source=f"{path.name} root attributes", path=path)
        spec = replace(spec, dataset_format="hdf5", csv_filename=None)
        splits: dict[str, Split] = {}
        for s in SPLIT_NAMES:
            g = f.get(s)
            if not isinstance(g, h5py.Group):
                raise DatasetError(f"missing group '/{s}'", path=path, field=f"/{s}", expected="groups /train, "
                                   "/val, /test each with datasets x and y (docs/hdf5-layout.md)")
            arrs = []
            for k in ("x", "y"):
                ds = g.get(k)
                if not isinstance(ds, h5py.Dataset):
                    raise DatasetError(f"missing dataset '/{s}/{k}'", path=path, field=f"/{s}/{k}",
                                       expected=f"datasets /{s}/x (PA input) and /{s}/y (PA output)")
                arrs.append(_h5_to_iq(ds, path, f"/{s}/{k}"))
            if len(arrs[0]) != len(arrs[1]):
                raise DatasetError(f"length mismatch: /{s}/x has {len(arrs[0])} samples but /{s}/y has "
                                   f"{len(arrs[1])}", path=path, field=f"/{s}",
                                   expected="equal lengths (sample-aligned input/output)")
            splits[s] = Split(arrs[0], arrs[1])
    return str(name), spec, splits


def _spec_attrs(spec: DatasetSpec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in spec.to_dict(include_container=False).items():
        if v is None:
            continue
        if isinstance(v, (dict, list, tuple)):
            out[k] = json.dumps(v)
        elif isinstance(v, (bool, int, float, str, np.generic)):
            out[k] = v
        else:
            out[k] = json.dumps(v, default=str)
    return out


def save_hdf5(dataset: IQDataset, path: str | Path, *, complex_samples: bool = False, compression: str | None = None) -> Path:
    """Write ``dataset`` to ``path`` (``.h5``/``.hdf5``; folders created) in the layout of ``docs/hdf5-layout.md``,
    atomically; returns the path. ``complex_samples``: ``x``/``y`` as complex64 (N,) instead of float32 (N, 2) (both
    exact); ``compression``: an h5py filter name (e.g. ``"gzip"``) for the samples. Raises DatasetError for another
    suffix or a file-system error (naming the file)."""
    p = Path(path)
    if p.suffix.lower() not in HDF5_SUFFIXES:
        raise DatasetError(f"unsupported file extension '{p.suffix}' for HDF5 output", path=p,
                           expected="'.h5' or '.hdf5'")

    def write(tmp: str) -> None:
        with h5py.File(tmp, "w") as f:
            f.attrs["dpd_desktop_layout"] = HDF5_LAYOUT
            f.attrs["dpd_desktop_name"] = dataset.name
            for k, v in _spec_attrs(dataset.spec).items():
                f.attrs[k] = v
            for s, split in dataset.splits.items():
                g = f.create_group(s)
                for k in ("x", "y"):
                    a = getattr(split, k)
                    data = as_complex(a, np.complex64) if complex_samples else np.ascontiguousarray(a, np.float32)
                    g.create_dataset(k, data=data, compression=compression)

    try:
        atomic_write_via(p, write)
    except OSError as exc:
        raise DatasetError(f"cannot write HDF5 file ({exc})", path=p, expected="a writable location") from exc
    return p


# =====================================================================================================================
# Split-CSV writer
# =====================================================================================================================
def save_split_csv(dataset: IQDataset, folder: str | Path, *, precision: int = 9) -> Path:
    """Write ``dataset`` as a split-CSV folder (created if needed; returned): ``spec.json`` (preferred field names,
    ``"dataset_format": "split_csv"``) and ``{train,val,test}_{input,output}.csv`` (header ``I,Q``, values
    ``%.{precision}g``: 9 significant digits round-trip float32 exactly), each file written atomically."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    fmt = f"%.{int(precision)}g"
    for s, split in dataset.splits.items():
        for role, a in (("input", split.x), ("output", split.y)):
            buf = io.StringIO()
            np.savetxt(buf, a, fmt=fmt, delimiter=",", header="I,Q", comments="")
            atomic_write_text(out / f"{s}_{role}.csv", buf.getvalue())
    spec = replace(dataset.spec, dataset_format="split_csv", csv_filename=None)
    atomic_write_text(out / "spec.json", json.dumps(spec.to_dict(), indent=4) + "\n")
    return out


# =====================================================================================================================
# Dispatch
# =====================================================================================================================
def load_dataset(path: str | Path) -> IQDataset:
    """Load a PA dataset (reference §1.1) → :class:`IQDataset` of (N, 2) float32 arrays, not normalized (§1.4).

    * folder (or its ``spec.json``): ``spec.json`` read if present (else defaults). ``dataset_format`` ``single_csv``
      → the CSV named ``csv_filename`` (default ``data.csv``) inside the folder; otherwise the six split CSVs.
    * ``.csv`` file: a single CSV; ``spec.json`` beside it is used if present (its ``dataset_format`` and
      ``csv_filename`` overridden), else defaults (``nperseg`` 2560, no fs/bandwidth).
    * ``.h5``/``.hdf5``: the spec from the root attributes.

    Raises:
        DatasetError: naming the file and the 1-based line (header = line 1) or the field, with what was expected:
            path not found, unsupported extension, missing split file(s), empty or header-only file, a split-CSV
            line 1 that is not an I/Q header, a blank line between rows, wrong column count, non-numeric cell,
            NaN/Inf, input/output length mismatch, invalid spec.json or spec field, missing single-CSV column, an
            empty split, a missing HDF5 group/dataset or one of wrong shape/dtype.
    """
    p = Path(path).expanduser()
    try:  # a folder without read/search permission fails the stat of what it holds
        if not p.exists():
            raise DatasetError(f"path not found: {p}", path=p,
                               expected="an existing dataset folder, .csv file or .h5/.hdf5 file")
        if p.is_file() and p.name == "spec.json":
            p = p.parent
        spec_path = p / "spec.json"
        is_dir = p.is_dir()
        has_spec = is_dir and spec_path.is_file()
    except OSError as exc:
        raise DatasetError(f"cannot read {p} ({exc.strerror or exc})", path=p,
                           expected="a readable dataset folder, .csv file or .h5/.hdf5 file") from exc
    if is_dir:
        spec = read_spec_file(spec_path) if has_spec else DatasetSpec()
        if spec.dataset_format == "single_csv":
            splits = _load_single_csv(_single_csv_path(p, spec, spec_path), spec, spec_path)
        elif spec.dataset_format == "hdf5":
            raise DatasetError("dataset_format 'hdf5' is not supported for a folder", path=spec_path,
                               field="dataset_format",
                               expected="'split_csv' or 'single_csv' in a folder; open an .h5/.hdf5 file directly")
        else:
            splits = _load_split_folder(p, spec)
            _check_indices_agree(spec, splits, spec_path.name, spec_path)
        name = p.resolve().name
    else:
        suffix = p.suffix.lower()
        if suffix == ".csv":
            beside = p.parent / "spec.json"
            spec = read_spec_file(beside) if beside.is_file() else DatasetSpec()
            spec = replace(spec, dataset_format="single_csv", csv_filename=p.name)
            splits = _load_single_csv(p, spec, beside if beside.is_file() else None)
            name = p.stem
        elif suffix in HDF5_SUFFIXES:
            name, spec, splits = _load_hdf5(p)
            _check_indices_agree(spec, splits, f"{p.name} root attributes", p)
        else:
            raise DatasetError(f"unsupported file extension '{p.suffix or '(none)'}'", path=p,
                               expected="a dataset folder (spec.json + split CSVs), a .csv file (columns "
                               "I_in,Q_in,I_out,Q_out) or an .h5/.hdf5 file")
    return IQDataset(name=name, source=p.resolve(), spec=spec, **splits)
