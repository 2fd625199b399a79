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

__all__ = ["BinnedTransfer", "CompressionPoint", "as_complex", "binned_transfer", "compression_point"]

#: Gain drop that defines the compression point, dB (P1dB).
DEFAULT_DROP_DB = 1.0
#: The small-signal gain is the sample-weighted mean gain of the bins within this span above the lowest one, dB.
DEFAULT_SS_SPAN_DB = 10.0


def as_complex(sig) -> np.ndarray:
    """(N, 2) real I/Q or (N,) complex → (N,) complex128. Raises ValueError for another shape."""
    a = np.asarray(sig)
    if np.iscomplexobj(a):
        if a.ndim != 1:
            raise ValueError(f"complex signal must be (N,), got shape {a.shape}")
        return a.astype(np.complex128)
    if a.ndim != 2 or a.shape[1] != 2:
        raise ValueError(f"real signal must be (N, 2) I/Q, got shape {a.shape}")
    a = a.astype(np.float64)
    return a[:, 0] + 1j * a[:, 1]


@dataclass(frozen=True)
class BinnedTransfer:
    """The binned transfer of one signal against the input x (populated bins only, ascending |x|).

    Attributes:
        amp_in: (B,) float64 mean |x| of each bin's samples (data units).
        pin_db: (B,) float64 10·log10 of the mean |x|² of each bin (dB re a unit-power signal).
        gain: (B,) complex128 least-squares complex gain G_b (module docstring).
        count: (B,) int64 samples per bin.
        dropped: samples left out: |x| = 0, a non-finite value, or below the lowest bin.
    """

    amp_in: np.ndarray
    pin_db: np.ndarray
    gain: np.ndarray
    count: np.ndarray
    dropped: int = 0

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
        min_count: bins with fewer samples are left out (the few samples near the peak are noisy).

    Returns:
        A :class:`BinnedTransfer` (possibly empty: no sample with |x| > 0).

    Raises:
        ValueError: shapes that differ or are not I/Q, an unknown ``scale``, n_bins < 1, bin_db or span_db not
            positive, min_count < 1.
    """
    xc, oc = as_complex(x), as_complex(out)
    if xc.shape != oc.shape:
        raise ValueError(f"x and out must have the same number of samples, got {xc.size} and {oc.size}")
    if scale not in ("linear", "db"):
        raise ValueError(f"scale must be 'linear' or 'db', got {scale!r}")
    if int(n_bins) < 1 or not bin_db > 0 or not span_db > 0 or int(min_count) < 1:
        raise ValueError("n_bins and min_count must be >= 1, bin_db and span_db > 0")
    ok = np.isfinite(xc) & np.isfinite(oc)
    p = np.abs(xc) ** 2
    ok &= p > 0
    xs, os_, ps = xc[ok], oc[ok], p[ok]
    empty = BinnedTransfer(np.empty(0), np.empty(0), np.empty(0, np.complex128), np.empty(0, np.int64), xc.size)
    if ps.size == 0:
        return empty
    peak = float(ps.max())
    if scale == "linear":
        nb = int(n_bins)
        k = np.minimum((np.sqrt(ps / peak) * nb).astype(np.int64), nb - 1)
    else:
        nb = max(1, int(math.ceil(span_db / bin_db)))
        level = 10.0 * np.log10(ps / peak) + nb * bin_db  # 0 at the lowest bin's lower edge, nb·bin_db at the peak
        k = np.minimum(np.floor(level / bin_db).astype(np.int64), nb - 1)
        keep = k >= 0
        xs, os_, ps, k = xs[keep], os_[keep], ps[keep], k[keep]
    cross = os_ * np.conj(xs)
    count = np.bincount(k, minlength=nb)
    sum_p = np.bincount(k, weights=ps, minlength=nb)
    sum_a = np.bincount(k, weights=np.sqrt(ps), minlength=nb)
    sum_re = np.bincount(k, weights=cross.real, minlength=nb)
    sum_im = np.bincount(k, weights=cross.imag, minlength=nb)
    use = count >= int(min_count)
    c = count[use]
    if c.size == 0:
        return empty
    gain = (sum_re[use] + 1j * sum_im[use]) / sum_p[use]
    return BinnedTransfer(amp_in=sum_a[use] / c, pin_db=10.0 * np.log10(sum_p[use] / c), gain=gain,
                          count=c.astype(np.int64), dropped=int(xc.size - int(c.sum())))


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
                      ss_span_db: float = DEFAULT_SS_SPAN_DB) -> CompressionPoint:
    """The ``drop_db`` compression point (P1dB by default) of a transfer binned in dB (:func:`binned_transfer`).

    The small-signal gain is the sample-weighted mean of the bins' gain [dB] within ``ss_span_db`` of the lowest
    bin; the point is the first bin, ascending in input power, whose gain is ``drop_db`` or more below it, the
    crossing interpolated linearly between that bin and the one before (IEEE/IEC usage: the input power at which the
    gain has fallen 1 dB below its small-signal value; output-referred = input + small-signal gain - 1 dB).

    Returns NaNs (``reached`` False) when ``t`` has fewer than two bins. Raises ValueError for drop_db <= 0 or
    ss_span_db < 0.
    """
    if not drop_db > 0 or not ss_span_db >= 0:
        raise ValueError(f"drop_db must be > 0 and ss_span_db >= 0, got {drop_db!r} and {ss_span_db!r}")
    nan = math.nan
    g = t.gain_db
    pin = t.pin_db
    fin = np.isfinite(g)
    g, pin, count = g[fin], pin[fin], t.count[fin]
    if g.size < 2:
        return CompressionPoint(nan, float(drop_db), nan, nan, nan, False)
    ss = pin <= pin[0] + ss_span_db
    g_ss = float(np.average(g[ss], weights=count[ss]))
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
