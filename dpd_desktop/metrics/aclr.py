"""Legacy (Welch-based) ACLR in dBc, OpenDPD numerics.

Behaviour and numerics follow "OpenDPD 2.2.1 reference §6.2 (utils/metrics.py)". SciPy is imported at first use (~0.6 s import, see ``spectra``).
"""

from __future__ import annotations

import numpy as np

from .nmse import as_segments
from .transfer import as_complex
from .spectra import ChannelBins, channel_bins

__all__ = ["aclr_db", "segment_psd"]


def segment_psd(seg, fs: float) -> np.ndarray:
    """Averaged ACLR power spectrum of a segment array, shape (N,) float32, bins ascending (fftshift order).

    Per segment: ``scipy.signal.welch(p, fs, nperseg=N, return_onesided=False, scaling='spectrum')`` on complex64
    ``p = I + jQ`` along time (periodic Hann window, constant detrend = segment mean removed, exactly one window per
    segment), i.e. ``|FFT(w*(p - mean p))|^2 / (sum w)^2`` in float32; reordered ascending (halves swapped =
    fftshift for even N; for odd N we use fftshift, which keeps the grid ascending); then a float32 mean over
    segments. Units: signal units squared per bin (power spectrum, not density). Reference §6.2 step 1.
    """
    from scipy.signal import welch  # ~0.6 s import: see the spectra module docstring

    x = as_segments(seg, "pred")
    n = x.shape[1]
    if n < 2:
        raise ValueError(f"segments need at least 2 samples for a spectrum, got N={n}")
    p = as_complex(x, np.complex64)
    _, pxx = welch(p, fs, nperseg=n, return_onesided=False, scaling="spectrum", axis=-1)
    pxx = np.fft.fftshift(pxx, axes=-1)
    return np.mean(pxx, axis=0)


def aclr_db(pred, fs: float, bw_main: float, n_sub_ch: int) -> tuple[float, float, float]:
    """Adjacent-channel leakage ratio of ``pred`` (legacy OpenDPD definition), in dBc.

    What it is: from the segment-averaged Welch power spectrum S_k (see ``segment_psd``) and the channel geometry of
    ``channel_bins`` (iL, iR, W): sub-channel powers ``P_c = sum S[iL+cW : iL+(c+1)W]``, reference
    ``P_max = max_c P_c`` (the **strongest sub-channel**, not the whole main channel); adjacent channels are **one
    sub-channel wide**: ``P_L = sum S[iL-W : iL]``, ``P_R = sum S[iR : iR+W]`` (right starts at iR inclusive, left
    ends at iL exclusive). ``ACLR_L = 10*log10(P_L/P_max)``, ``ACLR_R`` likewise, ``ACLR_AVG = (L+R)/2`` (mean of
    dB). Negative; lower is better. Only ``pred`` is used (for PA training this is the model output's ACLR, not a
    fit metric). The zero-padded tail of a padded last segment is included.

    What it is NOT: not a 3GPP ACLR (no RRC filter, no full-carrier-bandwidth adjacent channels, no main-channel
    total power reference); ``bw_sub_ch`` is not consulted (width is W bins ≈ bw_main/n_sub_ch).

    Numerics (bitwise, "OpenDPD 2.2.1 reference §6.2 (utils/metrics.py)"): float32 PSD, float32 mean over segments,
    float32 NumPy sums per band, float32 max; ratios and 10*log10 in float64 (powers promoted); ACLR_AVG is the
    float64 mean.

    Args:
        pred: (S, N, 2) float32 I/Q segments; N is the Welch segment length (nperseg).
        fs: sample rate, Hz. bw_main: total occupied bandwidth B, Hz. n_sub_ch: number of sub-channels.

    Returns:
        ``(left, right, avg)`` Python floats (float64), dBc.

    Raises:
        ValueError: bad shape; bad fs/bw_main/n_sub_ch; W < 1; an adjacent channel extends past ±fs/2 (the
            reference would silently truncate or wrap the slice there; we refuse instead).
    """
    x = as_segments(pred, "pred")
    bins = channel_bins(fs, bw_main, n_sub_ch, x.shape[1])
    _require_adjacent(bins)
    s = segment_psd(x, bins.fs)
    return _aclr_from_psd(s, bins)


def _require_adjacent(bins: ChannelBins) -> None:
    if not bins.adjacent_in_grid:
        raise ValueError(
            f"adjacent channels [{bins.iL - bins.W}, {bins.iL}) / [{bins.iR}, {bins.iR + bins.W}) fall outside the "
            f"{bins.n}-bin grid: bw_main={bins.bw_main:g} Hz plus one sub-channel each side exceeds fs={bins.fs:g} Hz"
        )


def _aclr_from_psd(s: np.ndarray, bins: ChannelBins) -> tuple[float, float, float]:
    subs = np.array([np.sum(s[sl]) for sl in bins.sub_slices], dtype=np.float32)
    p_max = np.max(subs)  # largest float32 sub-channel sum (NaN propagates)
    p_l = np.sum(s[bins.left_slice])
    p_r = np.sum(s[bins.right_slice])
    with np.errstate(divide="ignore", invalid="ignore"):
        left = 10 * np.log10(np.float64(p_l) / np.float64(p_max))
        right = 10 * np.log10(np.float64(p_r) / np.float64(p_max))
    avg = np.mean(np.array([left, right], dtype=np.float64))
    return float(left), float(right), float(avg)
