"""The transfer curves of a PA, a model or a DPD cascade from its I/Q samples: binned AM/AM and AM/PM, gain
compression (gain vs input power) and the 1 dB compression point.

Each curve is the *binned least-squares complex gain*: the samples are grouped by their input magnitude |x| (bins
uniform in |x|, or in dB of |x|²), and for bin b

    G_b = Σ out·conj(x) / Σ |x|²        (the least-squares fit of out ≈ G_b·x over the bin's samples)

whose magnitude is the bin's gain and whose angle its phase shift. Unlike a mean of |out| (or of |out|²), additive
noise that is uncorrelated with x averages out of G_b: the low-power bins of a measured output do not show the
noise floor as gain expansion (a -30 dB noise floor biases the mean of |out|² by +0.4 dB in the bins 20 dB below
the mean power, not G_b; tests/unit/test_rf_metrics.py). For a memoryless PA out = A(r)·e^{j(∠x + Φ(r))} it is
exactly A(r)/r · e^{jΦ(r)} in the limit of narrow bins; with memory it is the part of out that follows x
instantaneously. Everything here is NumPy, O(N) over the samples (``np.bincount``), no Qt.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["BinnedTransfer", "CompressionPoint", "SMALL_SIGNAL_FRACTION", "TransferBins", "as_complex",
           "binned_transfer", "binned_transfers", "compression_point", "small_signal_gain", "transfer_bins"]

_DB_PER_NEPER = 20.0 / math.log(10.0)  # 8.686: d(20·log10 g) = 8.686·dg/g
#: Gain drop that defines the compression point, dB (P1dB).
DEFAULT_DROP_DB = 1.0
#: The small-signal gain is the mean gain of the bins within this span above the lowest one used, dB.
DEFAULT_SS_SPAN_DB = 10.0
#: Bins whose gain is less certain than this (standard error, dB) do not count for the compression point.
DEFAULT_MAX_SE_DB = 0.1
#: Fraction of the samples, lowest |x| first, on which :func:`small_signal_gain` fits the gain.
SMALL_SIGNAL_FRACTION = 0.4


def as_complex(sig, dtype=np.complex128) -> np.ndarray:
    """(..., 2) real I/Q → (...) complex ``I + jQ`` of ``dtype`` (the parts copied exactly: complex64 from float32
    is bitwise the samples); a complex array is returned as ``dtype``. The one I/Q → complex conversion of the
    package. Raises ValueError for a real array whose last axis is not 2."""
    a = np.asarray(sig)
    if np.iscomplexobj(a):
        return a.astype(dtype, copy=False)
    if a.ndim < 1 or a.shape[-1] != 2:
        raise ValueError(f"real signal must be (..., 2) I/Q, got shape {a.shape}")
    z = np.empty(a.shape[:-1], dtype=dtype)
    z.real = a[..., 0]
    z.imag = a[..., 1]
    return z


def _signal(sig) -> np.ndarray:
    """(N, 2) real I/Q or (N,) complex → (N,) complex128. Raises ValueError for another shape."""
    z = as_complex(sig)
    if z.ndim != 1:
        raise ValueError(f"expected an (N, 2) I/Q or (N,) complex signal, got shape {np.shape(sig)}")
    return z


def small_signal_gain(x: np.ndarray, y: np.ndarray, fraction: float = SMALL_SIGNAL_FRACTION) -> tuple[complex, int]:
    """(c, k): the least-squares complex gain c = Σ conj(x)·y / Σ|x|² of y onto x over the ``k = floor(fraction·N)``
    smallest-|x| samples (a stable sort; complex128 (N,) inputs). Raises ValueError when k < 1 or those samples
    have no energy."""
    k = int(math.floor(fraction * x.size))
    if k < 1:
        raise ValueError(f"{x.size} samples: too few for a small-signal gain")
    idx = np.argsort(np.abs(x), kind="stable")[:k]
    xs, ys = x[idx], y[idx]
    den = float(np.sum(np.abs(xs) ** 2))
    if den == 0.0:
        raise ValueError(f"the {k} lowest-amplitude inputs are all zero")
    return complex(np.sum(np.conj(xs) * ys) / den), k


@dataclass(frozen=True)
class BinnedTransfer:
    """The binned transfer of one signal against the input x (populated bins only, ascending |x|).

    Attributes:
        amp_in: (B,) float64 mean |x| of each bin's samples (data units).
        pin_db: (B,) float64 10·log10 of the mean |x|² of each bin (dB re a unit-power signal).
        gain: (B,) complex128 least-squares complex gain G_b (module docstring).
        count: (B,) int64 samples of each bin that the gain used (pairs with a finite output).
        dropped: samples left out: |x| = 0, a non-finite value, or below the lowest bin.
        gain_se_db: (B,) float64 standard error of the bin's gain magnitude in dB, 8.686·SE(G_b)/|G_b| with
            SE(G_b)² = (Σ|out - G_b·x|² / (n - 1)) / Σ|x|² (the least-squares estimate's; NaN for n < 2): what the
            bin's noise, memory effects and few samples leave uncertain.
    """

    amp_in: np.ndarray
    pin_db: np.ndarray
    gain: np.ndarray
    count: np.ndarray
    dropped: int = 0
    gain_se_db: np.ndarray | None = None

    @property
    def amp_out(self) -> np.ndarray:
        """(B,) |G_b|·mean|x|: the AM/AM curve, output magnitude [data units] against :attr:`amp_in`."""
        return np.abs(self.gain) * self.amp_in

    @property
    def phase_deg(self) -> np.ndarray:
        """(B,) ∠G_b in degrees: the AM/PM curve (phase of out relative to x)."""
        return np.degrees(np.angle(self.gain))

    @property
    def gain_db(self) -> np.ndarray:
        """(B,) 20·log10|G_b| [dB] (-inf where the gain is 0)."""
        with np.errstate(divide="ignore"):
            return 20.0 * np.log10(np.abs(self.gain))

    @property
    def pout_db(self) -> np.ndarray:
        """(B,) output power of each bin, :attr:`pin_db` + :attr:`gain_db` [dB re a unit-power signal]."""
        return self.pin_db + self.gain_db

    def __len__(self) -> int:
        return int(self.count.size)


def binned_transfer(x, out, *, scale: str = "linear", n_bins: int = 64, bin_db: float = 0.5,
                    span_db: float = 40.0, min_count: int = 5) -> BinnedTransfer:
    """The binned least-squares complex gain of ``out`` against ``x`` (module docstring).

    Args:
        x, out: the input and the output samples, (N, 2) I/Q or (N,) complex, the same N.
        scale: ``"linear"``: ``n_bins`` bins uniform in |x| over [0, max|x|] (the AM/AM and AM/PM curves);
            ``"db"``: bins of ``bin_db`` dB of |x|² over [peak - ``span_db``, peak] (gain compression, Pin/Pout).
        min_count: bins with fewer samples of x are left out (the few samples near the peak are noisy).

    Returns:
        A :class:`BinnedTransfer` (possibly empty: no sample with |x| > 0).

    Raises:
        ValueError: shapes that differ or are not I/Q, an unknown ``scale``, n_bins < 1, bin_db or span_db not
            positive, min_count < 1.
    """
    return binned_transfers(x, {"out": out}, scale=scale, n_bins=n_bins, bin_db=bin_db, span_db=span_db,
                            min_count=min_count)["out"]


def binned_transfers(x, outs, *, scale: str = "linear", n_bins: int = 64, bin_db: float = 0.5,
                     span_db: float = 40.0, min_count: int = 5) -> dict[str, BinnedTransfer]:
    """:func:`binned_transfer` of several outputs of the same input on one set of bins (the bins, ``amp_in`` and
    ``pin_db`` come from x alone, so that the curves share their x axis): ``outs`` maps names to (N, 2) / (N,)
    signals; returns the same names. A bin in which an output has no finite sample has a NaN gain for it, and
    ``count`` is the samples each output's gain used."""
    bins = transfer_bins(x, scale=scale, n_bins=n_bins, bin_db=bin_db, span_db=span_db, min_count=min_count)
    return {name: bins.transfer(out, name) for name, out in outs.items()}


@dataclass(frozen=True, eq=False)
class TransferBins:
    """The bins of one input x (:func:`transfer_bins`), for the transfers of any number of outputs
    (:meth:`transfer`): computed once, reused for every output (and every epoch of a fixed input)."""

    n: int  # samples of x
    idx: np.ndarray  # (M,) samples in a bin
    k: np.ndarray  # (M,) their bin
    nb: int  # bins in all
    use: np.ndarray  # (nb,) bool: populated (>= min_count samples)
    xs: np.ndarray  # (M,) complex128 x of those samples
    ps: np.ndarray  # (M,) |x|²
    count: np.ndarray  # (B,) samples of x per used bin
    sum_p: np.ndarray  # (B,) Σ|x|² per used bin
    amp_in: np.ndarray  # (B,)
    pin_db: np.ndarray  # (B,)

    def _sum(self, k: np.ndarray, w: np.ndarray) -> np.ndarray:
        return np.bincount(k, weights=w, minlength=self.nb)[self.use]

    def transfer(self, out, name: str = "out", power: np.ndarray | None = None) -> BinnedTransfer:
        """The :class:`BinnedTransfer` of ``out`` ((N, 2) I/Q or (N,) complex) on these bins; ``power``: |out|²
        when the caller has it already ((N,) float64)."""
        oc = _signal(out)
        if oc.shape != (self.n,):
            raise ValueError(f"x and {name} must have the same number of samples, got {self.n} and {oc.size}")
        if not self.use.any():
            return BinnedTransfer(np.empty(0), np.empty(0), np.empty(0, np.complex128), np.empty(0, np.int64),
                                  self.n, np.empty(0))
        every = self.idx.size == self.n  # every sample in a bin (the linear bins of a signal without zeros)
        o = oc if every else oc[self.idx]
        o2 = power if power is not None else oc.real * oc.real + oc.imag * oc.imag
        o2 = o2 if every else o2[self.idx]
        fin = np.isfinite(o2)
        if fin.all():
            k, xs, ps, cnt, sum_p = self.k, self.xs, self.ps, self.count, self.sum_p
        else:
            k, o, o2, xs, ps = self.k[fin], o[fin], o2[fin], self.xs[fin], self.ps[fin]
            cnt = np.bincount(k, minlength=self.nb)[self.use]
            sum_p = self._sum(k, ps)
        cross = o * np.conj(xs)
        sum_c = self._sum(k, cross.real) + 1j * self._sum(k, cross.imag)
        sum_o = self._sum(k, o2)
        with np.errstate(invalid="ignore", divide="ignore"):
            sp = np.where(sum_p > 0, sum_p, 1.0)
            gain = np.where(cnt > 0, sum_c / sp, np.nan + 0j)
            resid = np.maximum(sum_o - np.abs(sum_c) ** 2 / sp, 0.0)
            se_db = np.where(cnt > 1, _DB_PER_NEPER * np.sqrt(resid / np.maximum(cnt - 1, 1) / sp) / np.abs(gain),
                             np.nan)
        return BinnedTransfer(amp_in=self.amp_in, pin_db=self.pin_db, gain=gain, count=cnt.astype(np.int64),
                              dropped=int(self.n - int(cnt.sum())), gain_se_db=se_db)


def transfer_bins(x, *, scale: str = "linear", n_bins: int = 64, bin_db: float = 0.5, span_db: float = 40.0,
                  min_count: int = 5) -> TransferBins:
    """The bins of :func:`binned_transfer` for the input ``x`` (same arguments and errors)."""
    xc = _signal(x)
    if scale not in ("linear", "db"):
        raise ValueError(f"scale must be 'linear' or 'db', got {scale!r}")
    if int(n_bins) < 1 or not bin_db > 0 or not span_db > 0 or int(min_count) < 1:
        raise ValueError("n_bins and min_count must be >= 1, bin_db and span_db > 0")
    p = xc.real * xc.real + xc.imag * xc.imag
    idx = np.flatnonzero(np.isfinite(p) & (p > 0))
    ps = p[idx]
    if ps.size == 0:
        z = np.empty(0)
        return TransferBins(xc.size, idx, idx, 1, np.zeros(1, bool), xc[idx], ps, z, z, z, z)
    peak = float(ps.max())
    if scale == "linear":
        nb = int(n_bins)
        k = np.minimum((np.sqrt(ps / peak) * nb).astype(np.int64), nb - 1)
    else:
        nb = max(1, int(math.ceil(span_db / bin_db)))
        level = 10.0 * np.log10(ps / peak) + nb * bin_db  # 0 at the lowest bin's lower edge, nb·bin_db at the peak
        k = np.minimum(np.floor(level / bin_db).astype(np.int64), nb - 1)
        keep = k >= 0
        idx, ps, k = idx[keep], ps[keep], k[keep]
    count_x = np.bincount(k, minlength=nb)
    use = count_x >= int(min_count)
    count = count_x[use]
    sum_p = np.bincount(k, weights=ps, minlength=nb)[use]
    with np.errstate(invalid="ignore", divide="ignore"):
        amp_in = np.bincount(k, weights=np.sqrt(ps), minlength=nb)[use] / count
        pin_db = 10.0 * np.log10(sum_p / count)
    return TransferBins(xc.size, idx, k, nb, use, xc[idx], ps, count, sum_p, amp_in, pin_db)


@dataclass(frozen=True)
class CompressionPoint:
    """The gain-compression read-out of a :class:`BinnedTransfer` (``scale="db"``); powers in dB re a unit-power
    signal (add a dataset's power reference for dBm, :attr:`dpd_desktop.data.DatasetSpec.input_power_ref_dbm`).

    Attributes:
        gain_ss_db: small-signal gain [dB].
        drop_db: the compression that defines the point (1 dB: P1dB).
        pin_db: input power at which the gain is ``gain_ss_db - drop_db`` (input-referred P1dB); NaN when the
            gain never drops that far within the measured range (``reached`` False).
        pout_db: the output power there, ``pin_db + gain_ss_db - drop_db`` (output-referred P1dB); NaN likewise.
        max_compression_db: ``gain_ss_db`` minus the lowest gain of the bins above the small-signal span.
        reached: the gain dropped by ``drop_db``.
    """

    gain_ss_db: float
    drop_db: float
    pin_db: float
    pout_db: float
    max_compression_db: float
    reached: bool

    def to_dict(self) -> dict[str, float]:
        return {"gain_ss_db": self.gain_ss_db, "drop_db": self.drop_db, "pin_db": self.pin_db,
                "pout_db": self.pout_db, "max_compression_db": self.max_compression_db,
                "reached": float(self.reached)}


def compression_point(t: BinnedTransfer, drop_db: float = DEFAULT_DROP_DB,
                      ss_span_db: float = DEFAULT_SS_SPAN_DB, max_se_db: float = DEFAULT_MAX_SE_DB
                      ) -> CompressionPoint:
    """The ``drop_db`` compression point (P1dB by default) of a transfer binned in dB (:func:`binned_transfer`).

    Only bins whose gain is known to ``max_se_db`` (:attr:`BinnedTransfer.gain_se_db`) count: at low power a
    measured output's few samples, noise and memory effects scatter the gain by decibels. The small-signal gain is
    the inverse-variance weighted mean of those bins' gain [dB] within ``ss_span_db`` of the lowest of them; the
    point is the first of them, ascending in input power, whose gain is ``drop_db`` or more below it, the crossing
    interpolated linearly from the one before (the usual definition: the input power at which the gain has fallen
    1 dB below its small-signal value; output-referred = input + small-signal gain - 1 dB).

    Returns NaNs (``reached`` False) when fewer than two bins count. Raises ValueError for drop_db <= 0,
    ss_span_db < 0 or max_se_db <= 0.
    """
    if not drop_db > 0 or not ss_span_db >= 0 or not max_se_db > 0:
        raise ValueError(f"drop_db and max_se_db must be > 0 and ss_span_db >= 0, got {drop_db!r}, {max_se_db!r} "
                         f"and {ss_span_db!r}")
    nan = math.nan
    g = t.gain_db
    pin = t.pin_db
    se = t.gain_se_db if t.gain_se_db is not None else np.full(g.shape, nan)
    known = np.isfinite(se)
    use = np.isfinite(g) & (~known | (se <= max_se_db))
    g, pin, se, count = g[use], pin[use], se[use], t.count[use]
    if g.size < 2:
        return CompressionPoint(nan, float(drop_db), nan, nan, nan, False)
    ss = pin <= pin[0] + ss_span_db
    w = np.where(np.isfinite(se) & (se > 0), 1.0 / np.maximum(se, 1e-12) ** 2, count.astype(np.float64))
    g_ss = float(np.average(g[ss], weights=w[ss]))
    above = g[~ss] if np.any(~ss) else g
    max_comp = float(g_ss - above.min())
    target = g_ss - drop_db
    hit = np.flatnonzero(g <= target)
    if hit.size == 0:
        return CompressionPoint(g_ss, float(drop_db), nan, nan, max_comp, False)
    i = int(hit[0])
    if i == 0:
        p = float(pin[0])
    else:
        g0, g1, p0, p1 = g[i - 1], g[i], pin[i - 1], pin[i]
        p = float(p0 + (target - g0) * (p1 - p0) / (g1 - g0)) if g1 != g0 else float(p1)
    return CompressionPoint(g_ss, float(drop_db), p, p + target, max_comp, True)
