"""Channel geometry of the legacy ACLR and EVM (``channel_bins``, reference §6.2 steps 2-3) and the Welch PSD of
every plot and of results.h5 (``psd_db``: the Studio plot settings of reference §8.2, not the ACLR numerics).

SciPy is imported at first use: this module is on the dataset-load path (``data/spec.py``) and ``scipy.signal`` is
slow to import (benchmarks/results/2026-12-04-notes-core.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .transfer import as_complex

__all__ = ["ChannelBins", "channel_bins", "psd_db", "psd_dbm_per_hz", "welch_psd", "DB_FLOOR"]

#: Floor of every dB value produced here (reference §6.4/§8.2: zero power floors at -300 dB).
DB_FLOOR = -300.0


@dataclass(frozen=True, eq=False)
class ChannelBins:
    """Main-channel / sub-channel / adjacent-channel bin geometry on the shifted n-bin FFT grid (:func:`channel_bins`).

    ``iL``: first bin with ``f >= -bw_main/2`` (start of sub-channel 0); ``iR``: last bin with ``f <= +bw_main/2``,
    where the right adjacent channel starts (inclusive); ``W``: sub-channel and adjacent-channel width in bins;
    ``freqs_hz``: (n,) float64 bin frequencies, ascending; ``df = fs / n`` [Hz]; ``fs``, ``bw_main`` in Hz.
    """

    iL: int
    iR: int
    W: int
    freqs_hz: np.ndarray
    df: float
    n: int
    n_sub_ch: int
    fs: float
    bw_main: float

    def sub_slice(self, c: int) -> slice:
        """Bins of sub-channel c: ``[iL + c*W, iL + (c+1)*W)``."""
        if not 0 <= c < self.n_sub_ch:
            raise ValueError(f"sub-channel index {c} outside 0..{self.n_sub_ch - 1}")
        return slice(self.iL + c * self.W, self.iL + (c + 1) * self.W)

    @property
    def sub_slices(self) -> list[slice]:
        return [self.sub_slice(c) for c in range(self.n_sub_ch)]

    @property
    def left_slice(self) -> slice:
        """Left adjacent channel ``[iL - W, iL)`` (one sub-channel wide, ends exclusive at iL)."""
        return slice(self.iL - self.W, self.iL)

    @property
    def right_slice(self) -> slice:
        """Right adjacent channel ``[iR, iR + W)`` (starts inclusive at iR)."""
        return slice(self.iR, self.iR + self.W)

    @property
    def adjacent_in_grid(self) -> bool:
        """True when both adjacent channels lie fully inside the grid (required by ``aclr_db``)."""
        return self.iL - self.W >= 0 and self.iR + self.W <= self.n


def _check_geometry_args(fs, bw_main, n_sub_ch, n) -> tuple[float, float, int, int]:
    try:
        fs_f = float(fs)
        bw_f = float(bw_main)
    except (TypeError, ValueError):
        raise ValueError(f"fs and bw_main must be numbers, got fs={fs!r}, bw_main={bw_main!r}") from None
    if not np.isfinite(fs_f) or fs_f <= 0:
        raise ValueError(f"sample rate fs must be a positive finite number of Hz, got {fs!r}")
    if not np.isfinite(bw_f) or bw_f <= 0:
        raise ValueError(f"bw_main must be a positive finite number of Hz, got {bw_main!r}")
    if isinstance(n_sub_ch, bool) or int(n_sub_ch) != n_sub_ch or int(n_sub_ch) < 1:
        raise ValueError(f"n_sub_ch must be an integer >= 1, got {n_sub_ch!r}")
    if isinstance(n, bool) or int(n) != n or int(n) < 2:
        raise ValueError(f"n (FFT length / nperseg) must be an integer >= 2, got {n!r}")
    return fs_f, bw_f, int(n_sub_ch), int(n)


def channel_bins(fs: float, bw_main: float, n_sub_ch: int, n: int) -> ChannelBins:
    """Channel geometry of the legacy ACLR/EVM on an n-bin shifted FFT grid (reference §6.2 steps 2-3): ``iL`` =
    first bin with ``f >= -B/2``, ``iR`` = last bin with ``f <= +B/2``, ``W = floor((iR - iL) / n_sub_ch)``.

    The grid is ``fftshift(fftfreq(n, 1/fs))`` (float64, Hz; scipy's two-sided Welch frequencies, ascending): from
    exactly ``-fs/2`` for even n, from ``-(n-1)/2 * fs/n`` for odd n. Worked numbers (tested): 640 MHz/16384 bins/
    160 MHz/4 → (6144, 10240, 1024); 800 MHz/2560/200 MHz/10 → (960, 1600, 64); 983.04 MHz/19662/200 MHz/5 →
    (7831, 11831, 800). ``bw_sub_ch`` is not used; when (iR - iL) is not a multiple of n_sub_ch the bins just below
    iR belong to no sub-channel.

    Raises ValueError: non-positive fs/bw_main, n_sub_ch < 1, n < 2, no bin inside the main channel, or W < 1.
    """
    fs_f, bw_f, nsc, nn = _check_geometry_args(fs, bw_main, n_sub_ch, n)
    freqs = np.fft.fftshift(np.fft.fftfreq(nn, d=1.0 / fs_f))
    half = bw_f / 2
    left = np.flatnonzero(freqs >= -half)
    right = np.flatnonzero(freqs <= half)
    if left.size == 0 or right.size == 0 or right[-1] < left[0]:
        raise ValueError(f"no frequency bin inside the main channel ±{half:g} Hz (fs={fs_f:g} Hz, n={nn})")
    iL = int(left[0])
    iR = int(right[-1])
    W = (iR - iL) // nsc
    if W < 1:
        raise ValueError(
            f"sub-channel width is {W} bins: main channel ({bw_f:g} Hz -> bins {iL}..{iR}) is too narrow for "
            f"n_sub_ch={nsc} at fs={fs_f:g} Hz, n={nn} (bin spacing {fs_f / nn:g} Hz)"
        )
    return ChannelBins(iL=iL, iR=iR, W=int(W), freqs_hz=freqs, df=fs_f / nn, n=nn, n_sub_ch=nsc, fs=fs_f, bw_main=bw_f)


def _to_complex_sequence(sig) -> np.ndarray:
    """(N,2)/(S,N,2) real I/Q or (N,)/(S,N) complex -> 1-D complex128 sequence (segments concatenated in order)."""
    a = np.asarray(sig)
    if np.iscomplexobj(a):
        if a.ndim not in (1, 2):
            raise ValueError(f"complex signal must be (N,) or (S, N), got shape {a.shape}")
        z = a.astype(np.complex128).reshape(-1)
    else:
        if a.ndim not in (2, 3) or a.shape[-1] != 2:
            raise ValueError(f"real signal must be (N, 2) or (S, N, 2) I/Q, got shape {a.shape}")
        z = as_complex(a).reshape(-1)
    if z.size < 2:
        raise ValueError(f"signal needs at least 2 samples for a PSD, got {z.size}")
    return z


def _to_db(lin: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 10.0 * np.log10(lin)
    out = np.where(np.isnan(out), DB_FLOOR, out)
    return np.maximum(out, DB_FLOOR)


def welch_psd(sig, fs: float, nperseg: int, n_valid: int | None = None,
              strict: bool = False, overlap: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The one Welch PSD: two-sided power spectral density (linear), frequencies ascending from -fs/2 [Hz].

    ``scipy.signal.welch`` of the complex128 signal, periodic Hann window of ``nperseg`` samples (shortened to the
    signal, unless ``strict``: then ValueError), 50 % overlap, **no** detrend, ``scaling='density'``, two-sided,
    fftshifted. ``sig``: (N, 2) / (S, N, 2) real I/Q or (N,) / (S, N) complex; segments are joined in order (§2.2)
    and only the first ``n_valid`` samples kept (None: all). ``overlap=False``: adjacent, not overlapping, windows
    (hop = nperseg), for a signal built of nperseg-sample blocks whose joins a straddling window would measure.
    Returns ``(freq_hz, pxx)`` float64 [Hz, unit²/Hz].

    Raises ValueError: bad shape, fewer than 2 samples, fs not a positive number, nperseg < 2, n_valid < 2 or more
    than the samples given, or (``strict``) fewer samples than ``nperseg``.
    """
    from scipy.signal import welch  # at first use (module docstring)

    try:
        fs_f = float(fs)
    except (TypeError, ValueError):
        raise ValueError(f"fs must be a positive number of Hz, got {fs!r}") from None
    if not np.isfinite(fs_f) or fs_f <= 0:
        raise ValueError(f"fs must be a positive number of Hz, got {fs!r}")
    if int(nperseg) < 2:
        raise ValueError(f"nperseg must be >= 2, got {nperseg!r}")
    z = _to_complex_sequence(sig)
    if n_valid is not None:
        if not 2 <= int(n_valid) <= z.size:
            raise ValueError(f"n_valid must be from 2 to the {z.size} samples given, got {n_valid!r}")
        z = z[:int(n_valid)]
    if strict and z.size < int(nperseg):
        raise ValueError(f"{z.size} samples is fewer than one PSD window of nperseg={int(nperseg)}")
    nps = min(int(nperseg), z.size)
    f, pxx = welch(
        z,
        fs=fs_f,
        window="hann",
        nperseg=nps,
        noverlap=nps // 2 if overlap else 0,
        detrend=False,
        return_onesided=False,
        scaling="density",
    )
    return np.fft.fftshift(f), np.fft.fftshift(pxx).astype(np.float64)


def psd_db(sig, fs: float, nperseg: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`welch_psd` in dB/Hz re 1 unit², floored at -300 dB: the plots' and results.h5's PSD (the Studio plot
    settings, reference §8.2). Not the legacy ACLR's spectrum (``aclr.segment_psd``: 'spectrum' scaling, constant
    detrend, one window per segment): integrating this curve does not reproduce the legacy ACLR. Raises ValueError
    like :func:`welch_psd`."""
    f, pxx = welch_psd(sig, fs, nperseg)
    return f, _to_db(pxx)


def psd_dbm_per_hz(psd_db_values, power_ref_dbm: float) -> np.ndarray:
    """A :func:`psd_db` curve in dBm/Hz: + ``power_ref_dbm`` (the dataset's dBm of a signal of mean |I + jQ|² = 1,
    :class:`dpd_desktop.data.DatasetSpec`); values at :data:`DB_FLOOR` stay there. Returns float64 of the same shape;
    raises ValueError for a non-finite ``power_ref_dbm``."""
    ref = float(power_ref_dbm)
    if not np.isfinite(ref):
        raise ValueError(f"power_ref_dbm must be a finite number of dBm, got {power_ref_dbm!r}")
    v = np.asarray(psd_db_values, dtype=np.float64)
    return np.where(v <= DB_FLOOR, DB_FLOOR, v + ref)
