"""CCDF of the instantaneous power and the peak-to-average power ratio (PAPR) of an I/Q signal.

CCDF(L) = P(|s|² / mean|s|² > 10^(L/10)): the fraction of samples whose power exceeds the mean power by more than
L dB (the curve a signal analyser's "CCDF" measurement shows; 3GPP TS 36.104 / Agilent AN 1320 usage). PAPR at
probability p is the level L that a fraction p of the samples exceeds (the (1 - p) quantile of the power in dB
above the mean); the peak PAPR is the largest sample's. A complex Gaussian signal (many-carrier OFDM) has
CCDF(L) = exp(-10^(L/10)), PAPR(1e-4) = 10·log10(ln 1e4) = 9.64 dB. O(N log L) NumPy, no Qt.
"""
from __future__ import annotations

import math

import numpy as np

from .transfer import as_complex

__all__ = ["CCDF_LEVELS_DB", "ccdf", "papr_db", "papr_probability", "peak_papr_db"]

#: The levels at which the plots' CCDF is evaluated: 0 to 16 dB above the mean power in 0.05 dB steps.
CCDF_LEVELS_DB = np.round(np.arange(0.0, 16.0 + 1e-9, 0.05), 10)


def _power_above_mean(sig, power: np.ndarray | None = None) -> np.ndarray:
    """|s|² / mean|s|² of the finite samples (``power``: |s|² when the caller has it)."""
    if power is None:
        z = as_complex(sig)
        power = z.real * z.real + z.imag * z.imag
    fin = np.isfinite(power)
    p = power if fin.all() else power[fin]
    if p.size == 0:
        raise ValueError("the signal has no finite sample")
    mean = float(p.mean())
    if not mean > 0:
        raise ValueError("the signal's mean power is 0")
    return p / mean


def _db(v: float) -> float:
    return 10.0 * math.log10(v) if v > 0 else -math.inf


def ccdf(sig, levels_db=CCDF_LEVELS_DB, power: np.ndarray | None = None) -> np.ndarray:
    """P(power > mean power + L dB) for each level L of ``levels_db`` (ascending), over the finite samples.

    Args:
        sig: (N, 2) real I/Q or (N,) complex.
        levels_db: (L,) ascending levels in dB above the mean power.
        power: (N,) |s|², when the caller has it (``sig`` is then not read).

    Returns:
        (L,) float64 fractions in [0, 1], non-increasing.

    Raises:
        ValueError: a bad shape, no finite sample, zero mean power, levels not ascending.
    """
    levels = np.asarray(levels_db, dtype=np.float64).reshape(-1)
    if levels.size and np.any(np.diff(levels) < 0):
        raise ValueError("levels_db must be ascending")
    r = _power_above_mean(sig, power)
    n = r.size
    if levels.size == 0:
        return np.empty(0)
    thresholds = 10.0 ** (levels / 10.0)
    r = r[r > thresholds[0]]  # the others exceed no level (most samples of a signal: the search is the cost)
    step = float(levels[1] - levels[0]) if levels.size > 1 else 0.0
    if step > 0 and np.allclose(np.diff(levels), step, rtol=1e-9, atol=0.0):
        # an even grid (the plots'): the count of levels below each sample directly, faster than a search of
        # unsorted samples; a sample within rounding of a level may land on its other side
        with np.errstate(divide="ignore"):
            pos = np.ceil((10.0 * np.log10(r) - levels[0]) / step)
        below = np.clip(pos, 0, levels.size).astype(np.int64)
    else:
        below = np.searchsorted(thresholds, r, side="left")  # levels strictly below each sample's power
    counts = np.bincount(below, minlength=levels.size + 1)
    above = np.cumsum(counts[::-1])[::-1]  # above[j] = samples whose power exceeds more than j levels
    return above[1:].astype(np.float64) / n


def papr_db(sig, prob: float = 1e-4, power: np.ndarray | None = None) -> tuple[float, float]:
    """(PAPR at probability ``prob``, peak PAPR), both dB above the mean power.

    The PAPR at ``prob`` is the (1 - prob) quantile of the samples' power above the mean (``numpy.quantile``,
    linear interpolation), in dB; NaN when there are fewer than 1/prob samples (the quantile would be the peak).

    Raises:
        ValueError: a bad shape, no finite sample, zero mean power, prob not in (0, 1).
    """
    if not 0 < prob < 1:
        raise ValueError(f"prob must be in (0, 1), got {prob!r}")
    r = _power_above_mean(sig, power)
    peak = _db(float(r.max()))
    at = _db(_upper_quantile(r, 1.0 - prob)) if r.size * prob >= 1 else math.nan
    return at, peak


def _upper_quantile(r: np.ndarray, q: float) -> float:
    """``numpy.quantile(r, q)`` (linear interpolation) for a q near 1, from the samples above the mean (r > 1) when
    they hold the two order statistics it interpolates: a partition of that tail, not of every sample."""
    pos = (r.size - 1) * q
    lo = int(math.floor(pos))
    tail = r[r > 1.0]
    skipped = r.size - tail.size
    j = lo - skipped
    if j < 0:
        return float(np.quantile(r, q))
    hi = min(j + 1, tail.size - 1)
    part = np.partition(tail, [j, hi]) if hi != j else np.partition(tail, j)
    return float(part[j] + (pos - lo) * (part[hi] - part[j]))


def peak_papr_db(peak_abs: float, rms_abs: float) -> float:
    """Peak PAPR [dB] from the peak and the RMS magnitude: 20·log10(peak / rms); NaN when either is not positive."""
    try:
        p, r = float(peak_abs), float(rms_abs)
    except (TypeError, ValueError):
        return math.nan
    return 20.0 * math.log10(p / r) if p > 0 and r > 0 and math.isfinite(p) and math.isfinite(r) else math.nan


def papr_probability(n: int) -> float:
    """The probability a PAPR read-out of ``n`` samples uses: 0.01 % with at least 100,000 samples (ten samples
    beyond it), else 0.1 % with at least 10,000, else 1 %."""
    return 1e-4 if n >= 100_000 else 1e-3 if n >= 10_000 else 1e-2
