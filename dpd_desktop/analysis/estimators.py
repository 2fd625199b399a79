"""The inspector's estimators on complex 1-D signals (numpy only; each states its method).

Conventions: ``x`` is the PA input, ``y`` the PA output, complex128 of equal length N. A positive delay ``d`` means
``y[n] ≈ g·x[n − d]`` (the output lags the input).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["DelayEstimate", "PolyFit", "estimate_delay", "fit_am_am", "fit_am_pm", "p1db_amplitude",
           "occupied_bandwidth", "papr_db", "shift_integer", "OBW_FRACTION", "AMAM_POWERS", "AMPM_POWERS"]

#: Power fraction of the occupied bandwidth (ITU-R SM.328 "β/2" rule: 0.5 % of the power below, 0.5 % above).
OBW_FRACTION = 0.99
#: Powers of |x| in the AM/AM fit |y| ≈ Σ a_k |x|^k (odd, no constant: |y|(0) = 0).
AMAM_POWERS = (1, 3, 5)
#: Powers of |x| in the AM/PM fit ∠(y·x*) − ∠g ≈ Σ b_k |x|^k, degrees.
AMPM_POWERS = (0, 2, 4)
#: Upsampling factor of the cross-correlation for the fractional delay (grid spacing 1/8 sample).
_UP = 8


@dataclass(frozen=True)
class DelayEstimate:
    """Delay of y behind x. ``integer`` is the peak lag of |r|; ``fraction`` in [−0.5, 0.5]; ``samples`` their sum.
    ``peak_ratio``: |r| at the peak over the mean |r| (a weak peak, < 10, means x and y are hardly related)."""

    integer: int
    fraction: float
    peak_ratio: float
    lags: np.ndarray  # (2L+1,) int lags around the peak, for the plot
    magnitude: np.ndarray  # (2L+1,) |r| normalized to 1 at the peak

    @property
    def samples(self) -> float:
        return float(self.integer + self.fraction)


@dataclass(frozen=True)
class PolyFit:
    """A least-squares fit ``Σ c_k · |x|^p_k``; ``residual_db`` = 10·log10(Σ e² / Σ t²) of the fitted target t."""

    powers: tuple[int, ...]
    coefficients: tuple[float, ...]
    residual_db: float
    rms_residual: float

    def __call__(self, a) -> np.ndarray:
        a = np.asarray(a, dtype=np.float64)
        return sum(c * a ** p for c, p in zip(self.coefficients, self.powers))


def papr_db(z: np.ndarray) -> float:
    """Peak-to-average power ratio 10·log10(max|z|² / mean|z|²), dB; NaN for an all-zero signal."""
    p = np.abs(z) ** 2
    m = float(np.mean(p))
    return float(10 * np.log10(np.max(p) / m)) if m > 0 else float("nan")


def estimate_delay(x: np.ndarray, y: np.ndarray, half_window: int = 32) -> DelayEstimate:
    """Delay of y behind x by cross-correlation.

    Method: r[k] = Σ_n y[n]·x*[n − k], computed by FFT with zero padding to ≥ 2N (linear, not circular, correlation);
    the integer delay is argmax_k |r[k]|. The fraction is found by band-limited interpolation of r: the cross spectrum
    Y·X* is zero-padded 8 times and inverse-transformed (r on a 1/8-sample grid), and a parabola is fitted through |r|
    at that grid's maximum within ±1 sample of the integer peak and its two neighbours (its accuracy:
    benchmarks/results/2026-12-04-notes-record-training-slim.md). Cost: one FFT of 8·nfft points.
    """
    n = x.size
    nfft = 1 << int(np.ceil(np.log2(2 * n)))
    X = np.fft.fft(x, nfft)
    Y = np.fft.fft(y, nfft)
    cross = Y * np.conj(X)
    r = np.fft.ifft(cross)
    mag = np.abs(r)
    k = int(np.argmax(mag))
    lag = k if k < nfft // 2 else k - nfft
    mean = float(np.mean(mag[mag > 0])) if np.any(mag > 0) else 0.0
    ratio = float(mag[k] / mean) if mean > 0 else 0.0
    idx = (np.arange(-half_window, half_window + 1) + lag) % nfft
    lags = np.arange(-half_window, half_window + 1) + lag
    peak = mag[k] if mag[k] > 0 else 1.0
    # band-limited interpolation: r on a 1/_UP-sample grid = IFFT of the cross spectrum zero-padded _UP times
    half = nfft // 2
    up = np.zeros(_UP * nfft, dtype=np.complex128)
    up[:half] = cross[:half]
    up[-half:] = cross[half:]
    fine_all = np.fft.ifft(up)
    grid = (np.arange(-_UP, _UP + 1) + lag * _UP) % (_UP * nfft)  # ±1 sample around the integer peak
    fine = np.abs(fine_all[grid])
    j = int(np.clip(np.argmax(fine), 1, fine.size - 2))
    a, b, c = fine[j - 1], fine[j], fine[j + 1]
    den = a - 2 * b + c
    frac_fine = 0.5 * (a - c) / den if den != 0 else 0.0
    tau = float(lag + (j - _UP + frac_fine) / _UP)
    integer = int(np.round(tau))
    return DelayEstimate(integer=integer, fraction=float(tau - integer), peak_ratio=ratio, lags=lags,
                         magnitude=mag[idx] / peak)


def shift_integer(x: np.ndarray, y: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Remove an integer delay d of y behind x: returns (x[0:N−d], y[d:N]) for d ≥ 0, (x[−d:N], y[0:N+d]) else."""
    if d >= 0:
        return x[: x.size - d], y[d:]
    return x[-d:], y[: y.size + d]


def shift_fractional(y: np.ndarray, frac: float) -> np.ndarray:
    """y advanced by ``frac`` samples (y(t + frac)) by an FFT phase ramp (circular: trim the ends after use)."""
    n = y.size
    f = np.fft.fftfreq(n)
    return np.fft.ifft(np.fft.fft(y) * np.exp(2j * np.pi * f * frac))


def _lsq(a: np.ndarray, t: np.ndarray, powers: tuple[int, ...]) -> PolyFit:
    phi = np.stack([a ** p for p in powers], axis=1)
    coef, *_ = np.linalg.lstsq(phi, t, rcond=None)
    e = t - phi @ coef
    st = float(np.sum(t ** 2))
    se = float(np.sum(e ** 2))
    res = float(10 * np.log10(se / st)) if st > 0 and se > 0 else float("-inf")
    return PolyFit(powers=tuple(powers), coefficients=tuple(float(c) for c in coef), residual_db=res,
                   rms_residual=float(np.sqrt(se / max(t.size, 1))))


def fit_am_am(x: np.ndarray, y: np.ndarray) -> PolyFit:
    """|y| ≈ Σ a_k |x|^k, k in :data:`AMAM_POWERS` (least squares on the given, aligned samples)."""
    return _lsq(np.abs(x), np.abs(y), AMAM_POWERS)


def am_pm_deg(x: np.ndarray, y: np.ndarray, g: complex) -> np.ndarray:
    """Phase of y relative to g·x, degrees, wrapped to (−180, 180]."""
    return np.degrees(np.angle(y * np.conj(x) * np.conj(g) / max(abs(g), 1e-300)))


def fit_am_pm(x: np.ndarray, y: np.ndarray, g: complex) -> PolyFit:
    """∠(y·x*·g*) in degrees ≈ Σ b_k |x|^k, k in :data:`AMPM_POWERS`, fitted on the samples above 5 % of max|x|
    (the phase of the smallest samples is noise)."""
    a = np.abs(x)
    keep = a > 0.05 * a.max()
    return _lsq(a[keep], am_pm_deg(x[keep], y[keep], g), AMPM_POWERS)


def p1db_amplitude(fit: PolyFit, gain_abs: float, a_max: float, points: int = 4000) -> float | None:
    """The smallest input amplitude A ≤ a_max where fit(A)/A is 1 dB below ``gain_abs`` (the small-signal line),
    linearly interpolated on a ``points`` grid; None when not reached within the measured range."""
    a = np.linspace(a_max / points, a_max, points)
    drop = 20 * np.log10(np.maximum(fit(a), 1e-300) / (gain_abs * a))
    below = np.flatnonzero(drop <= -1.0)
    if below.size == 0 or gain_abs <= 0:
        return None
    i = int(below[0])
    if i == 0:
        return float(a[0])
    d0, d1 = drop[i - 1] + 1.0, drop[i] + 1.0
    return float(a[i - 1] + (a[i] - a[i - 1]) * d0 / (d0 - d1))


def occupied_bandwidth(freq_hz: np.ndarray, psd_db: np.ndarray, fraction: float = OBW_FRACTION
                       ) -> tuple[float, float, float]:
    """Occupied bandwidth of a PSD: (bandwidth, f_low, f_high) in Hz, where f_low / f_high are the frequencies below
    which (1 − fraction)/2 and (1 + fraction)/2 of the total power lie (cumulative sum of the linear PSD bins,
    bin-centre resolution)."""
    p = 10 ** (np.asarray(psd_db, dtype=np.float64) / 10)
    c = np.cumsum(p)
    tot = c[-1]
    if not tot > 0:
        return float("nan"), float("nan"), float("nan")
    lo = float(freq_hz[int(np.searchsorted(c, tot * (1 - fraction) / 2))])
    hi = float(freq_hz[min(int(np.searchsorted(c, tot * (1 + fraction) / 2)), c.size - 1)])
    return hi - lo, lo, hi
