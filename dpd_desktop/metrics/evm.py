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
    """Spectral "EVM" of ``pred`` against ``ref`` ((S, N, 2) segments; fs, bw_main in Hz), in dB (legacy OpenDPD).

    Per segment, unwindowed FFTs P, R (no detrend, shifted ascending) on the ``channel_bins`` grid; per segment s
    and sub-channel c (bins ``[iL+cW, iL+(c+1)W)``) ``E_sc = mean_k |P-R| / mean_k |R|`` (a ratio of **mean
    magnitudes**, not RMS); ``EVM = 20*log10(mean_s mean_c E_sc)``, zero-padded tails included; percent
    ``100*10**(EVM/20)``. Not a demodulated constellation EVM; bins outside the sub-channels and ``bw_sub_ch`` are
    not used. Numerics (bitwise, reference §6.3): ``np.fft.fft`` on complex64 (complex64 out with NumPy >= 2),
    ``fftshift``; two float32 means per (s, c), their ratio and the later means and ``20*log10`` in float64.

    Returns a float dB: ``-inf`` if pred == ref; ``nan``/``inf`` if ref has no energy in a sub-channel. Raises
    ValueError: bad/unequal shapes, bad fs/bw_main/n_sub_ch, or W < 1 (``channel_bins``).
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
