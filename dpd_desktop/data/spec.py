"""Dataset description (``spec.json``) and its normalization.

The fields and their meaning follow OpenDPD reference §1.2 (``../shared/reference/opendpd-reference.md``):

============================  ====================  =========================================================
DatasetSpec attribute         preferred JSON key    accepted spellings (first one is written back)
============================  ====================  =========================================================
``sample_rate_hz`` (Hz)       ``input_signal_fs``   ``input_signal_fs``, ``fs``, ``sample_rate``, ``sample_rate_hz``
``bw_main_hz`` (Hz)           ``bw_main_ch``        ``bw_main_ch``, ``input_signal_bw``, ``bandwidth``
``bw_sub_hz`` (Hz)            ``bw_sub_ch``         ``bw_sub_ch``, ``input_signal_sub_ch_bw``
``n_sub_ch`` (carriers)       ``n_sub_ch``          ``n_sub_ch``, ``num_sub_ch``, ``n_carriers``
``nperseg`` (samples)         ``nperseg``           ``nperseg`` (default 2560, reference §1.1 bare-CSV spec)
``split_ratios``              ``split_ratios``      ``{"train": r, "val": r, "test": r}`` (default 0.6/0.2/0.2)
``dataset_format``            ``dataset_format``    ``split_csv`` (default), ``single_csv``, ``hdf5``
``csv_filename``              ``csv_filename``      file name of a single CSV (``None`` → ``data.csv``), inside the folder
``split_indices``             ``split_indices``     where a single CSV is cut, in rows (see below); kept in ``extra``
``input_power_ref_dbm`` (dBm) ``power_ref_dbm``     a number (both planes) or ``{"input": dBm, "output": dBm}``;
``output_power_ref_dbm``                            also the flat keys ``input_power_ref_dbm``,
                                                    ``output_power_ref_dbm`` (HDF5 root attributes); optional
============================  ====================  =========================================================

``split_indices`` (optional) cuts a single CSV at given rows instead of ``split_ratios``: OpenDPD's
``{"train_end": T, "val_end": V}`` (train = rows [0, T), val = [V0 = T, V), test = [V, N)), or half-open row ranges
``{"train": [a, b], "val": [c, d], "test": [e, f]}`` in time order that do not overlap (rows between them are left
out). Rows count from 0 after the header; every split needs at least one row and the ranges must lie within the
file's N rows. In a split-CSV folder or an HDF5 file the splits are stored apart, so the indices, when given, must
agree with the stored lengths. OpenDPD 2.2.1 ignores the field (reference §1.1, quirk 14); here it is honoured.

Numbers may be JSON numbers or numeric strings (``"640e6"``; frequency fields also accept a unit suffix
``Hz``/``kHz``/``MHz``/``GHz``, e.g. ``"640 MHz"``; power references the suffix ``dBm``). Every other key is kept
verbatim in ``DatasetSpec.extra``.

The power reference (optional) says what the file's numbers are in absolute terms: ``power_ref_dbm`` is the power in
dBm of a signal whose mean |I + jQ|² is 1 (one data unit squared; equivalently a full-scale |x| = 1 complex tone) at
that signal's reference plane, so P [dBm] = 10·log10(mean(I² + Q²)) + power_ref_dbm. The ``input`` plane is the PA
input (x, and a DPD's output u), the ``output`` plane the PA output (y, the model's ŷ); one number sets both. With
it the window's PSD is in dBm/Hz and the Pin/Pout and compression plots in dBm; without it they are in dB relative
to a unit-power signal, and their axes say so.
"""

from __future__ import annotations

import json
import math
import numbers
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..metrics.spectra import channel_bins
from .errors import DatasetError
from .locks import ensure_unlocked

__all__ = [
    "DatasetSpec",
    "normalize_spec",
    "parse_split_indices",
    "check_split_indices",
    "read_spec_file",
    "DEFAULT_NPERSEG",
    "DEFAULT_SPLIT_RATIOS",
    "DATASET_FORMATS",
    "FS_KEYS",
    "BW_MAIN_KEYS",
    "BW_SUB_KEYS",
    "N_SUB_CH_KEYS",
]

#: Default Welch / val-test segment length in samples (OpenDPD reference §1.1, built-in spec of a bare CSV).
DEFAULT_NPERSEG = 2560
#: Default split ratios (OpenDPD reference §1.1).
DEFAULT_SPLIT_RATIOS: dict[str, float] = {"train": 0.6, "val": 0.2, "test": 0.2}
#: Accepted values of ``dataset_format``.
DATASET_FORMATS = ("split_csv", "single_csv", "hdf5")

FS_KEYS = ("input_signal_fs", "fs", "sample_rate", "sample_rate_hz")
BW_MAIN_KEYS = ("bw_main_ch", "input_signal_bw", "bandwidth")
BW_SUB_KEYS = ("bw_sub_ch", "input_signal_sub_ch_bw")
N_SUB_CH_KEYS = ("n_sub_ch", "num_sub_ch", "n_carriers")
_SPLITS = ("train", "val", "test")
_RATIO_TOL = 1e-6

_NUM_RE = re.compile(
    r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(?:([kKmMgG]?)[hH][zZ])?\s*$"
)
_UNIT = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9}


@dataclass(frozen=True)
class DatasetSpec:
    """Normalized dataset description (immutable); the fields and their units are the module docstring's table.

    ``None`` marks an unknown value: without ``sample_rate_hz`` the dataset still loads, but training refuses to
    start (:meth:`require_metrics`). ``bw_sub_hz`` is informative only (reference §1.2: not used by the metrics);
    ``nperseg`` is the val/test segment length, EVM FFT length and Welch segment (§1.2, §2.2); ``split_ratios`` only
    cut a single CSV; ``extra`` keeps every other key verbatim; the power references are both given or neither.
    """

    sample_rate_hz: float | None = None
    bw_main_hz: float | None = None
    bw_sub_hz: float | None = None
    n_sub_ch: int | None = None
    nperseg: int = DEFAULT_NPERSEG
    split_ratios: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_SPLIT_RATIOS))
    dataset_format: str = "split_csv"
    csv_filename: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    input_power_ref_dbm: float | None = None
    output_power_ref_dbm: float | None = None

    # ------------------------------------------------------------------ queries
    @property
    def has_metrics(self) -> bool:
        """True when sample rate, main bandwidth, carrier count and nperseg are all known (spectral metrics work)."""
        return not self.missing_metric_fields()

    @property
    def split_indices(self) -> dict[str, tuple[int, int | None]] | None:
        """``split_indices`` of the spec (module docstring) as half-open row ranges ``{"train": (a, b), "val": (c,
        d), "test": (e, f)}`` (``f`` None: to the last row), or None when the spec has none. Validated by
        :func:`normalize_spec` (types, order, overlap); the row count is checked where the rows are known."""
        raw = self.extra.get("split_indices")
        return None if raw is None else parse_split_indices(raw, "spec.json", None)

    @property
    def has_power_reference(self) -> bool:
        """True when the capture's absolute power is known (``power_ref_dbm``): plots can be in dBm and dBm/Hz."""
        return self.input_power_ref_dbm is not None and self.output_power_ref_dbm is not None

    def missing_metric_fields(self) -> list[str]:
        """Preferred names of the metric fields that are missing (subset of
        ``input_signal_fs``, ``bw_main_ch``, ``n_sub_ch``, ``nperseg``)."""
        missing = [k for k, v in (("input_signal_fs", self.sample_rate_hz), ("bw_main_ch", self.bw_main_hz),
                                  ("n_sub_ch", self.n_sub_ch)) if v is None]
        if not isinstance(self.nperseg, int) or self.nperseg <= 0:
            missing.append("nperseg")
        return missing

    def require_metrics(self, source: str | Path = "spec.json") -> None:
        """Check that the spec allows the spectral metrics EVM/ACLR (reference §6.2-6.3), which training computes at
        every validation: the fields ``input_signal_fs`` [Hz], ``bw_main_ch`` [Hz], ``n_sub_ch``, ``nperseg``
        [samples] are present, then fs > 0, bandwidth > 0, ``n_sub_ch`` ≥ 1, ``nperseg`` ≥ 2, ``bw_main_ch`` < fs, at
        least one bin per sub-channel and the adjacent channels [−B/2 − B/n_sub_ch, +B/2 + B/n_sub_ch] inside the
        ``nperseg``-bin grid [−fs/2, +fs/2) (:func:`dpd_desktop.metrics.channel_bins`). Split lengths are not checked.

        ``source``: the dataset's path (``IQDataset.source``: a folder, ``.csv`` or ``.h5``/``.hdf5``; names
        ``<folder>/spec.json`` or ``<file> root attributes`` and tells a missing ``spec.json`` apart) or a display
        name used as given.

        Raises:
            DatasetError: naming the spec file (or the HDF5 root attributes) and the field, with what was expected;
                a folder without ``spec.json`` (an HDF5 file without the attributes) is said so, listing the fields.
        """
        where, origin, spec_path = self._origin(source)
        missing = self.missing_metric_fields()
        labels = {
            "input_signal_fs": "sample rate 'input_signal_fs' (Hz; also fs/sample_rate/sample_rate_hz)",
            "bw_main_ch": "main bandwidth 'bw_main_ch' (Hz; also input_signal_bw/bandwidth)",
            "n_sub_ch": "carrier count 'n_sub_ch' (also num_sub_ch/n_carriers)",
            "nperseg": "segment length 'nperseg' (samples)",
        }
        example = '{"input_signal_fs": 640e6, "bw_main_ch": 160e6, "n_sub_ch": 4, "nperseg": 16384}'
        if missing:
            needed = ", ".join(labels[m] for m in missing)
            if origin == "no spec.json":
                folder = spec_path.parent
                beside = f" (beside {Path(str(source)).name})" if Path(str(source)).suffix.lower() == ".csv" else ""
                raise DatasetError(
                    f"spec.json is missing in this folder{beside}; training computes the spectral metrics (EVM, "
                    f"ACLR), which need {needed} (nperseg defaults to {DEFAULT_NPERSEG})", path=folder,
                    source=str(folder), expected=f"a file {spec_path} such as {example}")
            if origin == "hdf5":
                raise DatasetError(
                    f"the HDF5 file has no root attribute(s) for {', '.join(missing)}; training computes the "
                    f"spectral metrics (EVM, ACLR), which need {needed}", path=spec_path, field=", ".join(missing),
                    source=where, expected="root attributes such as input_signal_fs=640e6, bw_main_ch=160e6, "
                    "n_sub_ch=4 (docs/hdf5-layout.md)")
            raise DatasetError("missing field(s) needed for spectral metrics (EVM, ACLR): " + needed, path=spec_path,
                               field=", ".join(missing), source=where, expected="these fields in spec.json")
        self._check_geometry(where, spec_path, origin)

    def _origin(self, source: str | Path) -> tuple[str, str | None, Path | None]:
        """(display name for errors, ``"hdf5"`` / ``"spec.json"`` / ``"no spec.json"`` / None, spec file or HDF5)."""
        s = str(source)
        p = Path(s)
        try:
            suffix = p.suffix.lower()
            if suffix in (".h5", ".hdf5") or (self.dataset_format == "hdf5" and p.is_file()):
                return f"{p.name} root attributes", "hdf5", p
            spec_path = None
            if p.is_dir():
                spec_path = p / "spec.json"
            elif suffix == ".csv" and p.is_file():
                spec_path = p.parent / "spec.json"
            elif p.name == "spec.json" and p.is_file():
                spec_path = p
            if spec_path is None:
                return s, None, None
            return str(spec_path), ("spec.json" if spec_path.is_file() else "no spec.json"), spec_path
        except OSError:  # e.g. a display name that is not a valid path
            return s, None, None

    def _check_geometry(self, where: str, path: Path | None, origin: str | None) -> None:
        def err(key: str, msg: str, expected: str) -> DatasetError:
            return DatasetError(msg, path=path, field=key, source=where, expected=expected)

        fs, bw, n_sub, nps = self.sample_rate_hz, self.bw_main_hz, self.n_sub_ch, self.nperseg
        for key, v in (("input_signal_fs", fs), ("bw_main_ch", bw)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise err(key, f"{key} is {_show(v)}", "a positive number in Hz")
        if isinstance(n_sub, bool) or not isinstance(n_sub, int) or n_sub < 1:
            raise err("n_sub_ch", f"n_sub_ch is {_show(n_sub)}", "an integer >= 1 (number of carriers)")
        if isinstance(nps, bool) or not isinstance(nps, int) or nps < 2:
            raise err("nperseg", f"nperseg is {_show(nps)}, too short for a spectrum",
                      "an integer >= 2 (segment length in samples)")

        def mhz(v: float) -> str:
            return f"{v / 1e6:g} MHz"

        if bw >= fs:
            raise err(
                "bw_main_ch",
                f"main bandwidth bw_main_ch = {bw:g} Hz ({mhz(bw)}) is not below the sample rate "
                f"input_signal_fs = {fs:g} Hz ({mhz(fs)})",
                f"bw_main_ch < input_signal_fs; with one adjacent channel of bw_main_ch/n_sub_ch on each side, "
                f"bw_main_ch <= {mhz(fs * n_sub / (n_sub + 2))} for n_sub_ch = {n_sub}",
            )
        try:
            bins = channel_bins(fs, bw, n_sub, nps)
        except ValueError as exc:
            # blame the carrier count when the main channel spans bins but too few for n_sub_ch, else the bandwidth
            key = "n_sub_ch" if "sub-channel width" in str(exc) and bw * nps / fs >= 2 else "bw_main_ch"
            raise err(key, f"the channel layout does not fit the {nps}-bin spectrum of nperseg samples ({exc})",
                      "at least one frequency bin per sub-channel: bw_main_ch / n_sub_ch >= input_signal_fs / nperseg"
                      ) from None
        if not bins.adjacent_in_grid:
            edge = bw / 2 + bw / n_sub
            raise err(
                "bw_main_ch",
                f"the adjacent channels [-B/2 - B/n, +B/2 + B/n] = [-{mhz(edge)}, +{mhz(edge)}] "
                f"(B = bw_main_ch = {mhz(bw)}, n = n_sub_ch = {n_sub}) fall outside the spectrum "
                f"[-fs/2, +fs/2) = [-{mhz(fs / 2)}, +{mhz(fs / 2)}) of input_signal_fs = {mhz(fs)} "
                f"(bins {bins.iL - bins.W}..{bins.iR + bins.W - 1} of {nps})",
                f"bw_main_ch * (1 + 2/n_sub_ch) within input_signal_fs, i.e. bw_main_ch <= about "
                f"{mhz(fs * n_sub / (n_sub + 2))} for n_sub_ch = {n_sub} (or a higher sample rate)",
            )

    # ------------------------------------------------------------------ serialization
    def to_dict(self, *, include_container: bool = True) -> dict[str, Any]:
        """JSON-ready dict with the preferred spellings (``input_signal_fs``, ``bw_main_ch``, ...).

        Fields that are ``None`` are omitted. ``extra`` keys are merged in (they never collide with the
        normalized keys). With ``include_container=False`` the storage details ``dataset_format`` and
        ``csv_filename`` are left out (used by :meth:`canonical_json`).
        """
        out: dict[str, Any] = {}
        if include_container:
            out["dataset_format"] = self.dataset_format
            if self.csv_filename is not None:
                out["csv_filename"] = self.csv_filename
        out["split_ratios"] = {k: float(self.split_ratios[k]) for k in _SPLITS}
        if self.sample_rate_hz is not None:
            out["input_signal_fs"] = float(self.sample_rate_hz)
        if self.bw_main_hz is not None:
            out["bw_main_ch"] = float(self.bw_main_hz)
        if self.bw_sub_hz is not None:
            out["bw_sub_ch"] = float(self.bw_sub_hz)
        if self.n_sub_ch is not None:
            out["n_sub_ch"] = int(self.n_sub_ch)
        out["nperseg"] = int(self.nperseg)
        if self.has_power_reference:
            pin, pout = float(self.input_power_ref_dbm), float(self.output_power_ref_dbm)
            out["power_ref_dbm"] = pin if pin == pout else {"input": pin, "output": pout}
        for k, v in self.extra.items():
            out.setdefault(k, v)
        return out

    def canonical_json(self) -> str:
        """Canonical JSON of the spec content (sorted keys, no whitespace, container fields excluded), for
        ``IQDataset.fingerprint()``: the same data stored as split CSV or HDF5 fingerprints equally."""
        return json.dumps(self.to_dict(include_container=False), sort_keys=True, separators=(",", ":"), default=str,
                          allow_nan=True)


# ---------------------------------------------------------------------------------------------------------------------
def _err(msg: str, *, key: str, source: str, path: Path | None, expected: str | None = None) -> DatasetError:
    return DatasetError(msg, path=path, field=key, expected=expected, source=source)


def _show(value: Any) -> str:
    s = repr(value)
    return s if len(s) <= 60 else s[:57] + "..."


def _parse_float(value: Any, key: str, source: str, path: Path | None, *, hz: bool) -> float | None:
    """Positive finite float from a number or a numeric string; ``None`` stays ``None``."""
    if value is None:
        return None
    expected = "a positive number in Hz (e.g. 640e6 or \"640e6\" or \"640 MHz\")" if hz else "a positive number"
    if isinstance(value, bool):
        raise _err(f"expected {expected}, got {_show(value)}", key=key, source=source, path=path)
    if isinstance(value, str):
        m = _NUM_RE.match(value)
        if m is None or (not hz and "hz" in value.lower()):
            raise _err(f"expected {expected}, got {_show(value)}", key=key, source=source, path=path)
        v = float(m.group(1)) * _UNIT[(m.group(2) or "").lower()]
    elif isinstance(value, numbers.Real):  # numpy scalars too (HDF5 attributes)
        v = float(value)
    else:
        raise _err(f"expected {expected}, got {type(value).__name__} {_show(value)}", key=key, source=source,
                   path=path)
    if not math.isfinite(v) or v <= 0:
        raise _err(f"expected {expected}, got {_show(value)}", key=key, source=source, path=path)
    return v


def _parse_int(value: Any, key: str, source: str, path: Path | None, what: str) -> int | None:
    """Positive integer from an int, an integral float or a numeric string; ``None`` stays ``None``."""
    if value is None:
        return None
    expected = f"a positive integer ({what})"
    if isinstance(value, bool):
        raise _err(f"expected {expected}, got {_show(value)}", key=key, source=source, path=path)
    v: float
    if isinstance(value, str):
        m = _NUM_RE.match(value)
        if m is None or m.group(2) is not None or "hz" in value.lower():
            raise _err(f"expected {expected}, got {_show(value)}", key=key, source=source, path=path)
        v = float(m.group(1))
    elif not isinstance(value, numbers.Real):
        raise _err(f"expected {expected}, got {type(value).__name__} {_show(value)}", key=key, source=source,
                   path=path)
    else:
        v = float(value)
    if not math.isfinite(v) or v != int(v) or v < 1:
        raise _err(f"expected {expected}, got {_show(value)}", key=key, source=source, path=path)
    return int(v)


#: The range accepted for a power reference, dBm (a femtowatt to a megawatt: catches watts or dBW given by mistake
#: only when far off, but always a unit typed as text).
POWER_REF_RANGE_DBM = (-150.0, 90.0)
_DBM_RE = re.compile(r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(?:[dD][bB][mM])?\s*$")
POWER_REF_KEYS = ("power_ref_dbm", "input_power_ref_dbm", "output_power_ref_dbm")


def _parse_dbm(value: Any, key: str, source: str, path: Path | None) -> float:
    lo, hi = POWER_REF_RANGE_DBM
    expected = (f"a number of dBm from {lo:g} to {hi:g} (the power of a signal of mean |I + jQ|² = 1), e.g. 10 or "
                '"10 dBm"')
    v: float | None = None
    if isinstance(value, bool):
        v = None
    elif isinstance(value, numbers.Real):
        v = float(value)
    elif isinstance(value, str):
        m = _DBM_RE.match(value)
        v = float(m.group(1)) if m else None
    if v is None or not math.isfinite(v) or not lo <= v <= hi:
        raise _err(f"expected {expected}, got {_show(value)}", key=key, source=source, path=path)
    return v


def _parse_power_ref(raw: dict[str, Any], source: str, path: Path | None) -> tuple[float | None, float | None]:
    """(input, output) dBm of a unit-power signal from ``power_ref_dbm`` (a number or {"input", "output"}) and the
    flat ``input_power_ref_dbm`` / ``output_power_ref_dbm``; (None, None) when none is given."""
    found: dict[str, tuple[str, float]] = {}

    def put(plane: str, key: str, v: float) -> None:
        if plane in found and not math.isclose(found[plane][1], v, abs_tol=1e-9):
            raise _err(f"conflicting values: '{found[plane][0]}' = {found[plane][1]!r} but '{key}' = {v!r}",
                       key=key, source=source, path=path, expected="one value (or spellings that agree)")
        found.setdefault(plane, (key, v))

    ref = raw.get("power_ref_dbm")
    if isinstance(ref, dict):
        keys = {str(k) for k in ref}
        if keys != {"input", "output"}:
            raise _err(f"{_key_mismatch(keys, ('input', 'output'))}; expected an object {{\"input\": dBm, \"output\": dBm}} (or one number for both)",
                       key="power_ref_dbm", source=source, path=path)
        for plane in ("input", "output"):
            put(plane, f"power_ref_dbm.{plane}", _parse_dbm(ref[plane], f"power_ref_dbm.{plane}", source, path))
    elif ref is not None:
        v = _parse_dbm(ref, "power_ref_dbm", source, path)
        put("input", "power_ref_dbm", v)
        put("output", "power_ref_dbm", v)
    for plane in ("input", "output"):
        key = f"{plane}_power_ref_dbm"
        if raw.get(key) is not None:
            put(plane, key, _parse_dbm(raw[key], key, source, path))
    if len(found) == 1:
        (plane, (key, _)), = found.items()
        other = "output" if plane == "input" else "input"
        raise _err(f"'{key}' gives the {plane} plane's power reference but not the {other} plane's",
                   key=f"{other}_power_ref_dbm", source=source, path=path,
                   expected=f"both planes: '{other}_power_ref_dbm' too, or one number 'power_ref_dbm' for both")
    if not found:
        return None, None
    return found["input"][1], found["output"][1]


def _pick(raw: dict[str, Any], keys: tuple[str, ...], parse, source: str, path: Path | None):
    """Parse every present alias of one field (they must agree); return the value or ``None``."""
    found = [(k, parse(raw[k], k)) for k in keys if k in raw]
    found_vals = [(k, v) for k, v in found if v is not None]
    for k, v in found_vals[1:]:
        k0, v0 = found_vals[0]
        if not math.isclose(float(v), float(v0), rel_tol=1e-9):
            raise _err(f"conflicting values: '{k0}' = {v0!r} but '{k}' = {v!r}", key=k, source=source, path=path,
                       expected="one value (or aliases that agree)")
    return found_vals[0][1] if found_vals else None


def _parse_ratios(value: Any, source: str, path: Path | None) -> dict[str, float]:
    key = "split_ratios"
    expected = 'an object {"train": r, "val": r, "test": r} with each r in [0, 1) and sum 1 (within 1e-6)'
    if value is None:
        return dict(DEFAULT_SPLIT_RATIOS)
    if isinstance(value, (list, tuple)) and len(value) == 3:
        value = dict(zip(_SPLITS, value))
    if not isinstance(value, dict):
        raise _err(f"expected {expected}, got {_show(value)}", key=key, source=source, path=path)
    keys = set(value)
    if keys != set(_SPLITS):
        raise _err(_key_mismatch(keys, _SPLITS) + f"; expected {expected}", key=key, source=source, path=path)
    out: dict[str, float] = {}
    for k in _SPLITS:
        v = value[k]
        m = _NUM_RE.match(v) if isinstance(v, str) else None
        f = float(m.group(1)) if m is not None and m.group(2) is None else \
            float(v) if isinstance(v, numbers.Real) and not isinstance(v, bool) else math.nan
        if not 0 <= f < 1:  # NaN included: not a number
            raise _err(f"expected a number in [0, 1), got {_show(v)}", key=f"{key}.{k}", source=source, path=path)
        out[k] = f
    total = sum(out.values())
    if abs(total - 1.0) > _RATIO_TOL:
        raise _err(f"ratios sum to {total:.6g} (train {out['train']:g} + val {out['val']:g} + test {out['test']:g})",
                   key=key, source=source, path=path, expected="they sum to 1 (within 1e-6)")
    return out


def _key_mismatch(keys: set, wanted: tuple[str, ...]) -> str:
    """``missing 'a'; unknown 'b'`` for the keys of an object that should be exactly ``wanted``."""
    missing = [k for k in wanted if k not in keys]
    unknown = sorted(str(k) for k in keys - set(wanted))
    return "; ".join(([f"missing {', '.join(repr(k) for k in missing)}"] if missing else [])
                     + ([f"unknown {', '.join(repr(k) for k in unknown)}"] if unknown else []))


_INDICES_EXPECTED = ('{"train_end": T, "val_end": V} with 0 < T < V, or {"train": [a, b], "val": [c, d], '
                     '"test": [e, f]} with 0 <= a < b <= c < d <= e < f (rows, half-open, in time order)')


def parse_split_indices(value: Any, source: str, path: Path | None) -> dict[str, tuple[int, int | None]]:
    """``split_indices`` (module docstring) → ``{"train": (a, b), "val": (c, d), "test": (e, f)}``, half-open row
    ranges (``f`` None: to the last row).

    Raises
    ------
    DatasetError
        naming ``source`` and the field (``split_indices``, ``split_indices.val_end`` …): not an object of one of the
        two forms, a value that is not a non-negative integer, ranges out of order, empty or overlapping.
    """
    key = "split_indices"

    def row(v: Any, sub: str) -> int:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) and not (
                isinstance(v, float) and math.isfinite(v) and v.is_integer()) or int(v) < 0:
            raise _err(f"expected a row index (an integer >= 0), got {_show(v)}", key=f"{key}.{sub}", source=source,
                       path=path, expected=_INDICES_EXPECTED)
        return int(v)

    if not isinstance(value, dict):
        raise _err(f"expected an object, got {_show(value)}", key=key, source=source, path=path,
                   expected=_INDICES_EXPECTED)
    keys = set(value)
    if keys == {"train_end", "val_end"}:
        t, v = row(value["train_end"], "train_end"), row(value["val_end"], "val_end")
        if t < 1:
            raise _err(f"train_end is {t}: the train split would be empty", key=f"{key}.train_end", source=source,
                       path=path, expected=_INDICES_EXPECTED)
        if v <= t:
            raise _err(f"val_end ({v}) is not after train_end ({t}): the val split would be empty",
                       key=f"{key}.val_end", source=source, path=path, expected=_INDICES_EXPECTED)
        return {"train": (0, t), "val": (t, v), "test": (v, None)}
    if keys == set(_SPLITS):
        out: dict[str, tuple[int, int | None]] = {}
        for s in _SPLITS:
            r = value[s]
            if not isinstance(r, (list, tuple)) or len(r) != 2:
                raise _err(f"expected a row range [start, end], got {_show(r)}", key=f"{key}.{s}", source=source,
                           path=path, expected=_INDICES_EXPECTED)
            a, b = row(r[0], f"{s}[0]"), row(r[1], f"{s}[1]")
            if b <= a:
                raise _err(f"the range [{a}, {b}) is empty (end <= start)", key=f"{key}.{s}", source=source,
                           path=path, expected=_INDICES_EXPECTED)
            out[s] = (a, b)
        for first, second in (("train", "val"), ("val", "test")):
            if out[second][0] < out[first][1]:
                raise _err(f"{second} [{out[second][0]}, {out[second][1]}) starts before {first} "
                           f"[{out[first][0]}, {out[first][1]}) ends: the ranges overlap or are out of order",
                           key=f"{key}.{second}", source=source, path=path, expected=_INDICES_EXPECTED)
        return out
    unknown = sorted(str(k) for k in keys - {"train_end", "val_end", *_SPLITS})
    raise _err("expected the keys train_end, val_end or train, val, test; got "
               + (", ".join(repr(str(k)) for k in sorted(map(str, keys))) or "none")
               + (f" (unknown: {', '.join(unknown)})" if unknown else ""), key=key, source=source, path=path,
               expected=_INDICES_EXPECTED)


def check_split_indices(indices: dict[str, tuple[int, int | None]], n_rows: int, where: str,
                        path: Path | None) -> dict[str, tuple[int, int]]:
    """``indices`` (:func:`parse_split_indices`) against a file of ``n_rows`` data rows: the ranges with the test
    split's open end filled in. Raises DatasetError naming ``where`` and the field when a range ends past the last
    row or leaves a split empty."""
    reference_form = indices["test"][1] is None  # {"train_end", "val_end"}
    names = {"train": "train_end", "val": "val_end", "test": "val_end"} if reference_form else \
        {s: s for s in _SPLITS}
    out = {}
    for s in _SPLITS:
        a, b = indices[s]
        end = n_rows if b is None else b
        if end > n_rows or a >= end:
            raise DatasetError(
                f"split {s} would be rows [{a}, {end}), which do not fit the file's {n_rows} data rows",
                path=path, source=where, field=f"split_indices.{names[s]}",
                expected="row indices within the data rows (counted from 0 after the header), every split "
                         "holding at least one row",
            )
        out[s] = (a, end)
    return out


def normalize_spec(raw: dict[str, Any] | None, source: str = "spec.json", path: str | Path | None = None) -> DatasetSpec:
    """Normalize a raw spec mapping (parsed ``spec.json`` or HDF5 root attributes; ``None``: all defaults) into a
    :class:`DatasetSpec`, unknown keys kept verbatim in ``extra``. Accepts the spellings of the module docstring;
    aliases of one field may appear together only if they agree. ``source``: the display name in error messages,
    ``path``: the file stored on the error.

    Raises:
        DatasetError: naming ``source`` and the field, with what was expected: wrong type, non-numeric string,
            non-positive or non-finite value, non-integer count, unknown ``dataset_format``, ratios not in [0, 1) or
            not summing to 1 (within 1e-6), conflicting aliases, a power reference that is not a number of dBm in
            :data:`POWER_REF_RANGE_DBM` or gives one plane only.
    """
    p = Path(path) if path is not None else None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise DatasetError(
            f"expected a JSON object {{...}} at the top level, got {type(raw).__name__}", path=p, source=source
        )
    raw = {str(k): v for k, v in raw.items()}

    def pf(hz: bool):
        return lambda v, k: _parse_float(v, k, source, p, hz=hz)

    fs = _pick(raw, FS_KEYS, pf(True), source, p)
    bw_main = _pick(raw, BW_MAIN_KEYS, pf(True), source, p)
    bw_sub = _pick(raw, BW_SUB_KEYS, pf(True), source, p)
    n_sub = _pick(raw, N_SUB_CH_KEYS, lambda v, k: _parse_int(v, k, source, p, "number of carriers"), source, p)
    nperseg = _parse_int(raw.get("nperseg"), "nperseg", source, p, "segment length in samples") or DEFAULT_NPERSEG
    ratios = _parse_ratios(raw.get("split_ratios"), source, p)
    pin_ref, pout_ref = _parse_power_ref(raw, source, p)

    fmt = raw.get("dataset_format")
    fmt = "split_csv" if fmt is None else fmt.strip().lower().replace("-", "_") if isinstance(fmt, str) else fmt
    if fmt not in DATASET_FORMATS:
        raise _err(f"unknown dataset_format {_show(raw['dataset_format'])}", key="dataset_format", source=source,
                   path=p, expected="one of " + ", ".join(DATASET_FORMATS))

    csv_name = raw.get("csv_filename")
    if csv_name is not None and (not isinstance(csv_name, str) or not csv_name.strip()):
        raise _err(f"expected a non-empty file name string, got {_show(csv_name)}", key="csv_filename",
                   source=source, path=p)
    if isinstance(csv_name, str):
        csv_name = csv_name.strip()
        parts = Path(csv_name).parts
        if Path(csv_name).is_absolute() or csv_name.startswith(("~", "\\")) or ".." in parts or (
                len(csv_name) > 1 and csv_name[1] == ":"):
            raise _err(f"{_show(csv_name)} leads outside the dataset folder", key="csv_filename", source=source,
                       path=p, expected="the name of a CSV file inside the dataset folder (e.g. \"data.csv\"; no "
                       "absolute path, no '..')")
    if raw.get("split_indices") is not None:
        parse_split_indices(raw["split_indices"], source, p)  # types, order, overlap; the rows where they are read

    known = {*FS_KEYS, *BW_MAIN_KEYS, *BW_SUB_KEYS, *N_SUB_CH_KEYS, *POWER_REF_KEYS, "nperseg", "split_ratios",
             "dataset_format", "csv_filename"}
    return DatasetSpec(sample_rate_hz=fs, bw_main_hz=bw_main, bw_sub_hz=bw_sub, n_sub_ch=n_sub, nperseg=nperseg,
                       split_ratios=ratios, dataset_format=fmt, csv_filename=csv_name,
                       extra={k: v for k, v in raw.items() if k not in known},
                       input_power_ref_dbm=pin_ref, output_power_ref_dbm=pout_ref)


def read_spec_file(path: str | Path) -> DatasetSpec:
    """Read and normalize a ``spec.json`` file.

    Raises
    ------
    DatasetError
        file unreadable or not UTF-8; invalid JSON (message gives the JSON error's line and column); top level not an
        object; any field error of :func:`normalize_spec`.
    """
    p = Path(path)
    ensure_unlocked(p)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise DatasetError(f"cannot read file ({exc.strerror or exc})", path=p, expected="a readable JSON file") from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DatasetError(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x})", path=p, line=line, expected="UTF-8 encoded JSON"
        ) from exc
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(
            f"invalid JSON at column {exc.colno} ({exc.msg})",
            path=p,
            line=exc.lineno,
            expected='a JSON object such as {"input_signal_fs": 640e6, "nperseg": 16384}',
        ) from exc
    return normalize_spec(raw, source=p.name, path=p)
