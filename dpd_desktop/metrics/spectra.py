"""Channel geometry and the one plot PSD.

``channel_bins`` is the channel geometry shared by the legacy ACLR and EVM ("OpenDPD 2.2.1 reference §6.2
(utils/metrics.py)", steps 2-3). ``psd_db`` is the PSD of every plot and of results.h5 (it follows the Studio plot
settings of reference §8.2, not the ACLR numerics).

SciPy is imported inside ``psd_db``, not here: this module is on the dataset-load path (``data/spec.py``) and
``import scipy.signal`` costs ~0.6 s (benchmarks/results/2026-12-04-notes-core.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .transfer import as_complex

__all__ = [
    "ChannelBins",
    "channel_bins",
    "psd_db",
    "psd_dbm_per_hz",
    "welch_psd",
    "DB_FLOOR",
]

#: Floor of every dB value produced here (reference §6.4/§8.2: zero power floors at -300 dB).
DB_FLOOR = -300.0


@dataclass(frozen=True, eq=False)
class ChannelBins:
    """Main-channel / sub-channel / adjacent-channel bin geometry on the shifted FFT grid.

    Attributes:
        iL: first bin with ``f >= -bw_main/2`` (inclusive start of the main channel and of sub-channel 0).
        iR: last bin with ``f <= +bw_main/2``. The right adjacent channel starts **at** iR (inclusive).
        W: sub-channel width in bins, ``floor((iR - iL) / n_sub_ch)``. Also the adjacent-channel width.
        freqs_hz: (n,) float64 bin frequencies in Hz, ascending (``fftshift(fftfreq(n, 1/fs))``).
        df: bin spacing ``fs / n`` in Hz.
        n: number of bins (FFT / Welch segment length).
        n_sub_ch: number of sub-channels.
        fs: sample rate in Hz.
        bw_main: main (total occupied) bandwidth in Hz.
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
    """Channel geometry of the legacy ACLR/EVM on an n-bin shifted FFT grid.

    Per "OpenDPD 2.2.1 reference §6.2 (utils/metrics.py)" steps 2-3: ``iL`` = first bin with ``f >= -B/2``,
    ``iR`` = last bin with ``f <= +B/2``, ``W = floor((iR - iL) / n_sub_ch)``.

    Frequency grid: ``np.fft.fftshift(np.fft.fftfreq(n, 1/fs))`` (float64, Hz) - i.e. the frequencies that
    ``scipy.signal.welch(..., return_onesided=False)`` returns, reordered ascending. For even n it starts at exactly
    ``-fs/2`` and bin k is ``(k - n/2)*fs/n``; for odd n it starts at ``-(n-1)/2 * fs/n`` (there is no bin at
    ``-fs/2``). Worked numbers (tested): 640 MHz/16384 bins/160 MHz/4 → (6144, 10240, 1024); 800 MHz/2560/200 MHz/10
    → (960, 1600, 64); 983.04 MHz/19662/200 MHz/5 → (7831, 11831, 800).

    Not consulted: ``bw_sub_ch`` (the sub-channel and adjacent-channel width is derived as W bins ≈ B/n_sub_ch).
    When (iR - iL) is not a multiple of n_sub_ch the few bins just below iR belong to no sub-channel.

    Raises:
        ValueError: non-positive fs/bw_main, n_sub_ch < 1, n < 2, no bin inside the main channel, or W < 1
            (main channel narrower than n_sub_ch bins).
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
              strict: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The one Welch PSD: two-sided power spectral density (linear), frequencies ascending from -fs/2.

    ``scipy.signal.welch`` of the complex128 signal with a periodic Hann window of ``nperseg`` samples, 50 % overlap
    (``nperseg//2``), **no** detrend, ``scaling='density'`` (power per Hz), two-sided, reordered ascending
    (fftshift). A segment array (S, N, 2) is flattened back to one sequence in order (reference §2.2); Welch then
    averages its overlapping windows (samples after the last whole window are not used, scipy's behaviour).

    Args:
        sig: (N, 2) or (S, N, 2) real I/Q, or (N,) / (S, N) complex.
        fs: sample rate, Hz.
        nperseg: Welch window length; reduced to the signal length when longer (unless ``strict``).
        n_valid: keep only the first ``n_valid`` samples of the flattened sequence (the rest is the zero padding of
            the last segment, reference §2.2); None keeps all.
        strict: raise instead of shortening the window when fewer than ``nperseg`` samples remain.

    Returns:
        ``(freq_hz, pxx)``: float64 arrays of ``min(nperseg, len)`` points, Hz and unit^2/Hz.

    Raises:
        ValueError: bad shape, fewer than 2 samples, fs not a positive number, nperseg < 2, n_valid < 2 or more than
            the samples given, or (``strict``) fewer samples than ``nperseg``.
    """
    from scipy.signal import welch  # ~0.6 s import: see the module docstring

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
        noverlap=nps // 2,
        detrend=False,
        return_onesided=False,
        scaling="density",
    )
    return np.fft.fftshift(f), np.fft.fftshift(pxx).astype(np.float64)


def psd_db(sig, fs: float, nperseg: int) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided Welch power spectral density in dB, frequencies ascending from -fs/2 - for plots and results.h5.

    What it is: :func:`welch_psd` (periodic Hann window of ``nperseg`` samples, 50 % overlap, **no** detrend,
    ``scaling='density'``, two-sided, ascending) then ``10*log10`` with a floor at -300 dB. These are the Studio plot
    settings of "OpenDPD 2.2.1 reference §8.2 (opendpd/core/plots.py)". A segment array (S, N, 2) is flattened back
    to one sequence in order (as Studio display plots do, reference §2.2).

    What it is NOT: not the ACLR PSD of the legacy profile (that one is 'spectrum' scaling, constant detrend, one
    window per segment; see ``aclr.segment_psd``) - do not integrate this curve to reproduce the logged legacy ACLR
    (the ``corrected`` profile, metrics/profiles.py, integrates :func:`welch_psd`).

    Args:
        sig: (N, 2) or (S, N, 2) real I/Q, or (N,) / (S, N) complex.
        fs: sample rate, Hz.
        nperseg: Welch window length; reduced to the signal length when longer. Callers cap it for plots
            (``runs.plotdata.PSD_NPERSEG_MAX`` = 2048 bins).

    Returns:
        ``(freq_hz, psd_db)``: float64 arrays of ``min(nperseg, len)`` points, Hz and dB/Hz re 1 unit^2.

    Raises:
        ValueError: bad shape, fewer than 2 samples, fs not a positive number, nperseg < 2.
    """
    f, pxx = welch_psd(sig, fs, nperseg)
    return f, _to_db(pxx)


def psd_dbm_per_hz(psd_db_values, power_ref_dbm: float) -> np.ndarray:
    """A :func:`psd_db` curve (dB re 1 unit²/Hz) in absolute units, dBm/Hz.

    ``power_ref_dbm`` is the power in dBm of a signal of mean |I + jQ|² = 1 at that signal's reference plane (the
    dataset's ``power_ref_dbm``, :class:`dpd_desktop.data.DatasetSpec`): the density scales with the power, so
    dBm/Hz = dB/Hz re 1 unit² + ``power_ref_dbm``; integrated over frequency it gives the signal's power in dBm,
    10·log10(mean |s|²) + ``power_ref_dbm``. Values at the floor :data:`DB_FLOOR` (zero power) stay there.

    Returns a float64 array of the same shape. Raises ValueError for a non-finite ``power_ref_dbm``.
    """
    ref = float(power_ref_dbm)
    if not np.isfinite(ref):
        raise ValueError(f"power_ref_dbm must be a finite number of dBm, got {power_ref_dbm!r}")
    v = np.asarray(psd_db_values, dtype=np.float64)
    return np.where(v <= DB_FLOOR, DB_FLOOR, v + ref)
