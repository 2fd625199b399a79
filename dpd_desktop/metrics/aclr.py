"""Legacy (Welch-based) ACLR in dBc, OpenDPD 2.2.1 numerics (reference §6.2). SciPy is imported at first use."""

from __future__ import annotations

import numpy as np

from .nmse import as_segments
from .transfer import as_complex
from .spectra import ChannelBins, channel_bins

__all__ = ["aclr_db", "segment_psd"]


def segment_psd(seg, fs: float) -> np.ndarray:
    """Averaged ACLR power spectrum of a segment array, (N,) float32 in signal units² per bin, ascending
    (reference §6.2 step 1): per segment ``scipy.signal.welch(p, fs, nperseg=N, return_onesided=False,
    scaling='spectrum')`` of complex64 ``p = I + jQ`` (periodic Hann, constant detrend, one window per segment), i.e.
    ``|FFT(w*(p - mean p))|^2 / (sum w)^2``, fftshifted; then the float32 mean over segments."""
    from scipy.signal import welch  # at first use (spectra module docstring)

    x = as_segments(seg, "pred")
    n = x.shape[1]
    if n < 2:
        raise ValueError(f"segments need at least 2 samples for a spectrum, got N={n}")
    p = as_complex(x, np.complex64)
    _, pxx = welch(p, fs, nperseg=n, return_onesided=False, scaling="spectrum", axis=-1)
    pxx = np.fft.fftshift(pxx, axes=-1)
    return np.mean(pxx, axis=0)


def aclr_db(pred, fs: float, bw_main: float, n_sub_ch: int) -> tuple[float, float, float]:
    """Adjacent-channel leakage ratio of ``pred`` ((S, N, 2) segments, N = nperseg; fs, bw_main in Hz) in dBc,
    legacy OpenDPD definition: ``(left, right, avg)`` floats.

    From the segment-averaged spectrum S (``segment_psd``) and ``channel_bins`` (iL, iR, W): ``P_max = max_c sum
    S[iL+cW : iL+(c+1)W]`` (the **strongest sub-channel**), adjacent channels **one sub-channel wide**
    ``P_L = sum S[iL-W : iL]``, ``P_R = sum S[iR : iR+W]`` (right starts at iR inclusive); ``ACLR_L =
    10*log10(P_L/P_max)``, ``ACLR_R`` likewise, ``ACLR_AVG`` the mean of the two dB values. Only ``pred`` is used;
    zero-padded tails are included; not a 3GPP ACLR (no RRC filter, no full-carrier adjacent channels); ``bw_sub_ch``
    is not used. Numerics (bitwise, reference §6.2): float32 PSD, mean, band sums and max; ratios, ``10*log10`` and
    the average in float64.

    Raises ValueError: bad shape, bad fs/bw_main/n_sub_ch, W < 1, or an adjacent channel past ±fs/2 (the reference
    would truncate or wrap the slice; refused here).
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
