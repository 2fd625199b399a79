"""Inspect a loaded capture before any training: :func:`inspect_dataset` → :class:`CaptureReport` (no Qt, no torch).

What is measured, and on which samples (the estimators and their methods: :mod:`.estimators`):

* counts, PAPR, non-finite samples, clipping plateaus, all-zero/constant signals: every sample of every split;
* delay (FFT cross-correlation), small-signal gain, AM/AM and AM/PM fits, P1dB, the linear NMSE: the first
  :data:`ANALYSIS_MAX` contiguous train samples (a block, not a decimation: delay and memory stay intact);
* PSDs (Welch, ``min(nperseg, 4096)`` bins) and the 99 % occupied bandwidth: the whole train split;
* ACLR with the spec's channel layout: at most 16 whole ``nperseg`` segments of train;
* the AM/AM / AM/PM scatter: every k-th sample of the aligned block, at most :data:`SCATTER_MAX`.

Its time: benchmarks/inspect_speed.py, benchmarks/results/2026-12-04-notes-core.md.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..data.readers import IQDataset
from ..metrics.aclr import aclr_db, segment_psd
from ..metrics.spectra import channel_bins, psd_db
from ..metrics.transfer import SMALL_SIGNAL_FRACTION, as_complex, small_signal_gain
from . import estimators as est
from .flags import Flag, capture_flags

__all__ = ["CaptureReport", "Flag", "inspect_dataset", "summary_rows", "ANALYSIS_MAX", "SCATTER_MAX", "PSD_BINS_MAX"]

ANALYSIS_MAX = 65536
SCATTER_MAX = 3000
PSD_BINS_MAX = 4096
_ACLR_SEGMENTS_MAX = 16
_TRIM = 64  # samples dropped at each end of the aligned block (the fractional shift is circular)


@dataclass(frozen=True)
class CaptureReport:
    """What :func:`inspect_dataset` found. Units: dB, degrees, Hz, samples; ``None`` where not computable.

    ``p1db_input_amplitude`` is |x| at the 1 dB compression point (None: "not reached" within max|x|);
    ``p1db_input_dbfs`` = 20·log10 of it (re 1.0); ``p1db_backoff_db`` = 20·log10(A_1dB / RMS|x|).
    ``plots`` holds numpy arrays for the window (not in :meth:`to_dict` unless asked).
    """

    name: str
    source: str
    spec: dict[str, Any]
    n_samples: dict[str, int]
    papr_x_db: float
    papr_y_db: float
    delay_samples: float
    delay_integer: int
    delay_fraction: float
    delay_peak_ratio: float
    delay_method: str
    gain_db: float
    phase_deg: float
    am_am: dict[str, Any]
    am_pm: dict[str, Any]
    linear_nmse_db: float
    p1db_input_amplitude: float | None
    p1db_input_dbfs: float | None
    p1db_backoff_db: float | None
    obw_x_hz: float | None
    obw_y_hz: float | None
    obw_ratio: float | None
    aclr_x_db: tuple[float, float, float] | None
    aclr_y_db: tuple[float, float, float] | None
    flags: tuple[Flag, ...]
    methods: dict[str, str]
    elapsed_s: float
    plots: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def errors(self) -> tuple[Flag, ...]:
        return tuple(f for f in self.flags if f.severity == "error")

    @property
    def p1db_text(self) -> str:
        if self.p1db_input_amplitude is None:
            return "not reached"
        return (f"|x| = {self.p1db_input_amplitude:.3f} ({self.p1db_input_dbfs:.2f} dBFS, "
                f"{self.p1db_backoff_db:+.2f} dB re RMS)")

    def to_dict(self, include_plots: bool = False) -> dict[str, Any]:
        """Plain JSON types (NaN → None); ``plots`` as lists only with ``include_plots``."""
        d = {k: v for k, v in asdict(self).items() if k != "plots"}
        d["flags"] = [f.to_dict() for f in self.flags]
        if include_plots:
            d["plots"] = {k: np.asarray(v).tolist() for k, v in self.plots.items()}
        return _clean(d)


def _clean(v):
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, (float, np.floating)):
        return float(v) if np.isfinite(v) else None
    if isinstance(v, np.integer):
        return int(v)
    return v


def _fit_dict(fit: est.PolyFit) -> dict[str, Any]:
    return {"powers": list(fit.powers), "coefficients": list(fit.coefficients), "residual_db": fit.residual_db,
            "rms_residual": fit.rms_residual}


def _source_file(ds: IQDataset, split: str, role: str) -> str:
    src = Path(ds.source)
    if src.is_dir() and ds.spec.dataset_format == "split_csv":
        return str(src / f"{split}_{role}.csv")
    return f"{src} ({split} {'x' if role == 'input' else 'y'})"


def inspect_dataset(ds: IQDataset, frame_length: int | None = None) -> CaptureReport:
    """Measure ``ds`` (module docstring) and flag what would make training misleading (:mod:`.flags`).

    Never raises on bad data: non-finite samples are counted and set to 0 for the rest of the analysis, an all-zero
    signal gives NaN figures and an error flag.
    """
    t0 = time.perf_counter()
    spec = ds.spec
    fs = spec.sample_rate_hz
    nonfinite: list[dict[str, Any]] = []
    xs, ys = {}, {}
    for s, sp in ds.splits.items():
        for role, arr, store in (("input", sp.x, xs), ("output", sp.y, ys)):
            bad = ~np.isfinite(arr).all(axis=1)
            z = as_complex(arr)
            if bad.any():
                nonfinite.append({"split": s, "role": role, "count": int(bad.sum()),
                                  "first_index": int(np.argmax(bad)), "file": _source_file(ds, s, role)})
                z[bad] = 0
            store[s] = z
    x_all = np.concatenate(list(xs.values()))
    y_all = np.concatenate(list(ys.values()))

    # --- the analysis block: contiguous head of train, aligned by the measured delay
    xb = xs["train"][:ANALYSIS_MAX]
    yb = ys["train"][:ANALYSIS_MAX]
    delay = est.estimate_delay(xb, yb)
    xa, ya = est.shift_integer(xb, yb, delay.integer)
    if ya.size > 4 * _TRIM:
        ya = est.shift_fractional(ya, delay.fraction)[_TRIM:-_TRIM]
        xa = xa[_TRIM:-_TRIM]
    try:
        g = small_signal_gain(xa, ya)[0]
    except ValueError:  # too few samples, or all zero: NaN figures (the flags say why)
        g = complex("nan")
    gabs = abs(g)
    am_am = est.fit_am_am(xa, ya) if np.any(xa) else None
    am_pm = est.fit_am_pm(xa, ya, g) if np.any(xa) and gabs > 0 else None
    with np.errstate(divide="ignore", invalid="ignore"):
        lin_nmse = float(10 * np.log10(np.sum(np.abs(ya - g * xa) ** 2) / np.sum(np.abs(ya) ** 2)))
    a_max = float(np.abs(xa).max()) if xa.size else 0.0
    p1 = est.p1db_amplitude(am_am, gabs, a_max) if am_am is not None and gabs > 0 else None
    rms_x = float(np.sqrt(np.mean(np.abs(x_all) ** 2)))

    # --- spectra of the whole train split
    fs_psd = fs if fs else 1.0
    nps = min(int(spec.nperseg), PSD_BINS_MAX, xs["train"].size)
    f_x, p_x = psd_db(xs["train"], fs_psd, nps) if nps >= 2 else (np.zeros(0), np.zeros(0))
    f_y, p_y = psd_db(ys["train"], fs_psd, nps) if nps >= 2 else (np.zeros(0), np.zeros(0))
    obw_x = est.occupied_bandwidth(f_x, p_x) if f_x.size else (np.nan,) * 3
    obw_y = est.occupied_bandwidth(f_y, p_y) if f_y.size else (np.nan,) * 3
    aclr_x = aclr_y = None
    carriers_db = None
    edges: list[float] = []
    if spec.has_metrics:
        n = int(spec.nperseg)
        n_seg = min(ds.train.x.shape[0] // n, _ACLR_SEGMENTS_MAX)
        try:
            bins = channel_bins(fs, spec.bw_main_hz, spec.n_sub_ch, n)
            edges = [float(bins.freqs_hz[bins.iL] + k * bins.W * bins.df) for k in range(spec.n_sub_ch + 1)]
            if n_seg >= 1:
                segx = ds.train.x[: n_seg * n].reshape(n_seg, n, 2)
                segy = ds.train.y[: n_seg * n].reshape(n_seg, n, 2)
                segx = np.nan_to_num(segx)
                segy = np.nan_to_num(segy)
                aclr_x = aclr_db(segx, fs, spec.bw_main_hz, spec.n_sub_ch)
                aclr_y = aclr_db(segy, fs, spec.bw_main_hz, spec.n_sub_ch)
                sx = segment_psd(segx, fs).astype(np.float64)
                subs = np.array([np.sum(sx[sl]) for sl in bins.sub_slices])
                with np.errstate(divide="ignore"):
                    carriers_db = 10 * np.log10(subs / subs.max()) if subs.max() > 0 else None
        except ValueError:
            aclr_x = aclr_y = None
    obw_ratio = (obw_x[0] / spec.bw_main_hz) if (fs and spec.bw_main_hz and np.isfinite(obw_x[0])) else None

    # --- plot arrays
    step = max(1, xa.size // SCATTER_MAX)
    sx_, sy_ = xa[::step], ya[::step]
    grid = np.linspace(0, a_max, 200) if a_max > 0 else np.zeros(0)
    plots = {
        "am_am_x": np.abs(sx_), "am_am_y": np.abs(sy_),
        "am_pm_deg": est.am_pm_deg(sx_, sy_, g) if gabs > 0 else np.zeros(sx_.size),
        "fit_x": grid, "am_am_fit": am_am(grid) if am_am is not None else np.zeros(grid.size),
        "am_pm_fit": am_pm(grid) if am_pm is not None else np.zeros(grid.size),
        "small_signal": gabs * grid,
        "psd_f_hz": f_x, "psd_x_db": p_x, "psd_y_db": p_y, "channel_edges_hz": np.asarray(edges),
        "xcorr_lags": delay.lags, "xcorr_mag": delay.magnitude,
    }
    nan = float("nan")
    stats = {
        "x_all": x_all, "y_all": y_all, "nonfinite": nonfinite, "carriers_db": carriers_db,
        "psd": (f_x, p_x, p_y), "obw_x": obw_x, "obw_y": obw_y, "am_am": am_am, "gain_abs": gabs, "a_max": a_max,
    }
    report_fields = dict(
        name=ds.name, source=str(ds.source), spec=spec.to_dict(), n_samples=ds.n_samples,
        papr_x_db=est.papr_db(x_all), papr_y_db=est.papr_db(y_all),
        delay_samples=delay.samples, delay_integer=delay.integer, delay_fraction=delay.fraction,
        delay_peak_ratio=delay.peak_ratio,
        delay_method="FFT cross-correlation r[k] = Σ y[n]·x*[n−k] on the first "
                     f"{xb.size} train samples; integer = argmax|r|; fraction = parabola through |r| on a 1/8-sample "
                     "grid of the band-limited correlation (cross spectrum zero-padded 8×) around the peak",
        gain_db=float(20 * np.log10(gabs)) if gabs > 0 else nan,
        phase_deg=float(np.degrees(np.angle(g))) if gabs > 0 else nan,
        am_am=_fit_dict(am_am) if am_am else {}, am_pm=_fit_dict(am_pm) if am_pm else {},
        linear_nmse_db=lin_nmse,
        p1db_input_amplitude=p1,
        p1db_input_dbfs=float(20 * np.log10(p1)) if p1 else None,
        p1db_backoff_db=float(20 * np.log10(p1 / rms_x)) if p1 and rms_x > 0 else None,
        obw_x_hz=obw_x[0] if fs else None, obw_y_hz=obw_y[0] if fs else None, obw_ratio=obw_ratio,
        aclr_x_db=aclr_x, aclr_y_db=aclr_y,
        methods={
            "small_signal_gain": f"least squares g = Σ y·x*/Σ|x|² on the {int(SMALL_SIGNAL_FRACTION * 100)} % "
                                 "lowest-|x| samples of the aligned block",
            "am_am": "|y| ≈ a1|x| + a3|x|³ + a5|x|⁵ (least squares on the aligned block)",
            "am_pm": "∠(y·x*) − ∠g ≈ b0 + b2|x|² + b4|x|⁴ degrees (samples above 5 % of max|x|)",
            "p1db": "smallest |x| where the AM/AM fit is 1 dB below the small-signal line |g|·|x|",
            "obw": "99 % power: 0.5 % of the Welch PSD power below f_low, 0.5 % above f_high (train split)",
            "aclr": "reference ACLR (metrics.aclr_db) on whole nperseg segments of train",
            "alignment": "y advanced by the integer delay, then by the fraction (FFT phase ramp); "
                         f"{_TRIM} samples trimmed at each end",
        },
    )
    flags = capture_flags(ds, report_fields, stats, frame_length)
    return CaptureReport(**report_fields, flags=tuple(flags), elapsed_s=time.perf_counter() - t0, plots=plots)


def _fmt(v, unit="", digits=2) -> str:
    if v is None:
        return "—"
    return f"{v:.{digits}f}{unit}"


def summary_rows(r: CaptureReport) -> list[tuple[str, str]]:
    """(label, value) rows of a report: the command line's table and the window's summary table."""
    s = r.spec
    mhz = lambda v: f"{v / 1e6:g} MHz" if v else "—"  # noqa: E731
    aclr = lambda a: f"{a[0]:.1f} / {a[1]:.1f} dBc" if a else "—"  # noqa: E731
    return [
        ("Dataset", r.name),
        ("Sample rate", mhz(s.get("input_signal_fs"))),
        ("Spec bandwidth / carriers", f"{mhz(s.get('bw_main_ch'))} / {s.get('n_sub_ch', '—')}"),
        ("Samples train / val / test", " / ".join(f"{r.n_samples[k]:,}" for k in ("train", "val", "test"))),
        ("PAPR x / y", f"{_fmt(r.papr_x_db)} / {_fmt(r.papr_y_db, ' dB')}"),
        ("Delay y after x", f"{r.delay_samples:+.3f} samples ({r.delay_integer:+d} {r.delay_fraction:+.3f})"),
        ("Small-signal gain", f"{_fmt(r.gain_db, ' dB')}, {_fmt(r.phase_deg, '°')}"),
        ("AM/AM fit a1, a3, a5", ", ".join(f"{c:.4g}" for c in r.am_am.get("coefficients", [])) +
         f" (residual {_fmt(r.am_am.get('residual_db'), ' dB', 1)})"),
        ("AM/PM fit b0, b2, b4 (°)", ", ".join(f"{c:.4g}" for c in r.am_pm.get("coefficients", [])) +
         f" (RMS residual {_fmt(r.am_pm.get('rms_residual'), '°', 1)})"),
        ("Linear NMSE (y vs g·x)", _fmt(r.linear_nmse_db, " dB", 1)),
        ("P1dB (input)", r.p1db_text),
        ("Occupied BW 99 % x / y", f"{mhz(r.obw_x_hz)} / {mhz(r.obw_y_hz)}" +
         (f" ({100 * r.obw_ratio:.0f} % of spec)" if r.obw_ratio else "")),
        ("ACLR x (L / R)", aclr(r.aclr_x_db)),
        ("ACLR y (L / R)", aclr(r.aclr_y_db)),
    ]
