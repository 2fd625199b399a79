"""Legacy "EVM" in dB: a spectral mean-magnitude error ratio, OpenDPD numerics.

Behaviour and numerics follow "OpenDPD 2.2.1 reference §6.3 (utils/metrics.py)".
"""

from __future__ import annotations

import numpy as np

from .nmse import _pair
from .transfer import as_complex
from .spectra import channel_bins

__all__ = ["evm_db"]


def _shifted_fft(x: np.ndarray) -> np.ndarray:
    z = as_complex(x, np.complex64)
    # NumPy >= 2: complex64 in -> complex64 out (single-precision FFT), as the reference relies on.
    return np.fft.fftshift(np.fft.fft(z, axis=-1), axes=-1)


def evm_db(pred, ref, fs: float, bw_main: float, n_sub_ch: int) -> float:
    """Spectral "EVM" of ``pred`` against ``ref`` (legacy OpenDPD definition), in dB.

    What it is: per segment, unwindowed FFTs P, R of ``pred`` and ``ref`` (n = N, no detrend, shifted ascending) on
    the ``channel_bins`` grid; for each segment s and sub-channel c (bins ``[iL+cW, iL+(c+1)W)``)
    ``E_sc = mean_k |P-R| / mean_k |R|`` (ratio of **mean magnitudes**, not RMS); ``E_s`` = mean over sub-channels;
    ``EVM = 20*log10(mean_s E_s)``. Percent form: ``100*10**(EVM/20)``. Zero-padded tails are included.

    What it is NOT: not a demodulated constellation (RMS) EVM - no synchronisation, equalisation or symbol
    decisions; bins outside the sub-channels (adjacent channels, leftover bins below iR) are ignored; ``bw_sub_ch``
    is not consulted.

    Numerics (bitwise, "OpenDPD 2.2.1 reference §6.3 (utils/metrics.py)"): ``np.fft.fft`` on complex64 (complex64
    out with NumPy >= 2) then ``np.fft.fftshift`` along time; per (s, c) two float32 NumPy means over the W bins;
    their ratio in float64; means over sub-channels then over segments and ``20*log10`` in float64.

    Args:
        pred, ref: (S, N, 2) float32 I/Q segments of equal shape.
        fs: sample rate, Hz. bw_main: total occupied bandwidth, Hz. n_sub_ch: number of sub-channels.

    Returns:
        Python float (float64), dB. ``-inf`` if pred == ref; ``nan``/``inf`` if ref has no energy in a sub-channel.

    Raises:
        ValueError: bad/unequal shapes, bad fs/bw_main/n_sub_ch, or W < 1 (see ``channel_bins``).
    """
    p, r = _pair(pred, ref)
    bins = channel_bins(fs, bw_main, n_sub_ch, p.shape[1])
    fp = _shifted_fft(p)
    fr = _shifted_fft(r)
    err_mag = np.abs(fp - fr)
    ref_mag = np.abs(fr)
    ratios = np.empty((p.shape[0], bins.n_sub_ch), dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        for c, sl in enumerate(bins.sub_slices):
            num = np.mean(err_mag[:, sl], axis=-1)  # float32, per segment
            den = np.mean(ref_mag[:, sl], axis=-1)  # float32, per segment
            ratios[:, c] = num.astype(np.float64) / den.astype(np.float64)
        per_seg = np.mean(ratios, axis=1)
        return float(20 * np.log10(np.mean(per_seg)))
