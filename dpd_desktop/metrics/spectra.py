"""Frequency grids, channel geometry and PSD helpers.

``channel_bins`` is the channel geometry shared by the legacy ACLR and EVM ("OpenDPD 2.2.1 reference §6.2
(utils/metrics.py)", steps 2-3). ``psd_db`` is for plots only (it follows the Studio plot settings of reference §8.2,
not the ACLR numerics). SciPy is imported lazily inside functions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "ChannelBins",
    "channel_bins",
    "channel_edges",
    "psd_db",
    "band_power_db",
    "downsample_peaks",
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

    def edges_hz(self) -> dict[str, tuple[float, float]]:
        """Band edges in Hz, as ``(f_first_bin, f_last_bin + df)`` for main, adjacent and each sub-channel band.

        For plots/overlays. Keys: ``main``, ``left``, ``right``, ``sub0`` ... ``sub{n_sub_ch-1}``. Bands partly
        outside the grid are clipped to it.
        """

        def span(sl: slice) -> tuple[float, float]:
            a = max(sl.start, 0)
            b = min(sl.stop, self.n)
            if b <= a:
                return (float("nan"), float("nan"))
            return (float(self.freqs_hz[a]), float(self.freqs_hz[b - 1] + self.df))

        out = {
            "main": span(slice(self.iL, self.iR + 1)),
            "left": span(self.left_slice),
            "right": span(self.right_slice),
        }
        for c in range(self.n_sub_ch):
            out[f"sub{c}"] = span(self.sub_slice(c))
        return out


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


def channel_edges(fs: float, bw_main: float, n_sub_ch: int, n: int) -> ChannelBins:
    """Alias of :func:`channel_bins` (name used in docs/CONTRACTS.md); use ``.edges_hz()`` for band edges in Hz."""
    return channel_bins(fs, bw_main, n_sub_ch, n)


def _to_complex_sequence(sig, n_valid: int | None) -> np.ndarray:
    """(N,2)/(S,N,2) real I/Q or (N,)/(S,N) complex -> 1-D complex128 sequence (segments concatenated in order)."""
    a = np.asarray(sig)
    if np.iscomplexobj(a):
        if a.ndim not in (1, 2):
            raise ValueError(f"complex signal must be (N,) or (S, N), got shape {a.shape}")
        z = a.astype(np.complex128).reshape(-1)
    else:
        if a.ndim not in (2, 3) or a.shape[-1] != 2:
            raise ValueError(f"real signal must be (N, 2) or (S, N, 2) I/Q, got shape {a.shape}")
        a = a.astype(np.float64).reshape(-1, 2)
        z = a[:, 0] + 1j * a[:, 1]
    if n_valid is not None:
        if int(n_valid) < 1:
            raise ValueError(f"n_valid must be >= 1, got {n_valid!r}")
        z = z[: int(n_valid)]
    if z.size < 2:
        raise ValueError(f"signal needs at least 2 samples for a PSD, got {z.size}")
    return z


def _to_db(lin: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 10.0 * np.log10(lin)
    out = np.where(np.isnan(out), DB_FLOOR, out)
    return np.maximum(out, DB_FLOOR)


def downsample_peaks(x: np.ndarray, y: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """Peak-preserving downsampling for plots: split into <= max_points contiguous buckets, keep each bucket's max.

    Returns ``(x[idx], y[idx])`` where idx is the argmax of y in each bucket, so x stays in its original order and
    every returned point is an original sample. Inputs with ``len <= max_points`` are returned unchanged (copies).
    """
    x = np.asarray(x)
    y = np.asarray(y)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"x and y must be 1-D of equal length, got {x.shape} and {y.shape}")
    if int(max_points) < 1:
        raise ValueError(f"max_points must be >= 1, got {max_points!r}")
    n = y.size
    m = int(max_points)
    if n <= m:
        return x.copy(), y.copy()
    bounds = np.linspace(0, n, m + 1).astype(np.int64)
    idx = np.array([a + int(np.argmax(y[a:b])) for a, b in zip(bounds[:-1], bounds[1:]) if b > a], dtype=np.int64)
    return x[idx], y[idx]


def psd_db(
    sig,
    fs: float,
    nperseg: int,
    ref_power: float | None = None,
    *,
    max_points: int | None = None,
    n_valid: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided Welch power spectral density in dB, frequencies ascending from -fs/2 - for plots.

    What it is: ``scipy.signal.welch`` of the complex signal with a periodic Hann window of ``nperseg`` samples,
    50 % overlap (``nperseg//2``), **no** detrend, ``scaling='density'`` (power per Hz), two-sided, reordered
    ascending (fftshift), then ``10*log10`` with a floor at -300 dB. These are the Studio plot settings of
    "OpenDPD 2.2.1 reference §8.2 (opendpd/core/plots.py)". A segment array (S, N, 2) is flattened back to one
    sequence in order (as Studio display plots do, reference §2.2) and optionally cut to ``n_valid`` samples to drop
    zero padding; Welch then averages its overlapping windows.

    What it is NOT: not the ACLR PSD (that one is 'spectrum' scaling, constant detrend, one window per segment;
    see ``aclr.segment_psd``) - do not integrate this curve to reproduce the logged ACLR.

    Args:
        sig: (N, 2) or (S, N, 2) real I/Q, or (N,) / (S, N) complex.
        fs: sample rate, Hz.
        nperseg: Welch window length; reduced to the signal length when longer.
        ref_power: if given, the PSD is divided by it (e.g. a carrier power) so the result is relative (dB re ref).
        max_points: if given, peak-preserving downsampling to at most this many points (see ``downsample_peaks``).
        n_valid: keep only the first n_valid samples of the flattened sequence.

    Returns:
        ``(freq_hz, psd_db)``: float64 arrays, Hz and dB (dB/Hz re 1 unit^2, or dB re ``ref_power``).

    Raises:
        ValueError: bad shape, fs <= 0, nperseg < 2, ref_power <= 0, max_points < 1.
    """
    from scipy.signal import welch

    fs_f = float(fs)
    if not np.isfinite(fs_f) or fs_f <= 0:
        raise ValueError(f"fs must be a positive number of Hz, got {fs!r}")
    if int(nperseg) < 2:
        raise ValueError(f"nperseg must be >= 2, got {nperseg!r}")
    z = _to_complex_sequence(sig, n_valid)
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
    f = np.fft.fftshift(f)
    pxx = np.fft.fftshift(pxx).astype(np.float64)
    if ref_power is not None:
        rp = float(ref_power)
        if not rp > 0:
            raise ValueError(f"ref_power must be > 0, got {ref_power!r}")
        pxx = pxx / rp
    out = _to_db(pxx)
    if max_points is not None:
        f, out = downsample_peaks(f, out, max_points)
    return f, out


def band_power_db(freq_hz, psd_db_values, lo_hz: float, hi_hz: float) -> float:
    """Power in the band [lo_hz, hi_hz) from a *density* PSD in dB (as returned by ``psd_db`` without downsampling).

    Sums the linear PSD over bins whose centre frequency lies in [lo_hz, hi_hz) times the bin spacing (taken from
    the grid), returns ``10*log10`` (floor -300 dB). Same band rule as the Studio general profile (reference §6.4);
    it is NOT the legacy ACLR band rule (``channel_bins``). Needs a uniform grid (do not pass downsampled curves).
    """
    f = np.asarray(freq_hz, dtype=np.float64)
    p = np.asarray(psd_db_values, dtype=np.float64)
    if f.shape != p.shape or f.ndim != 1 or f.size < 2:
        raise ValueError(f"freq_hz and psd_db_values must be equal-length 1-D arrays (>=2), got {f.shape}, {p.shape}")
    df = float(f[1] - f[0])
    mask = (f >= lo_hz) & (f < hi_hz)
    lin = np.sum(10.0 ** (p[mask] / 10.0)) * df
    return float(_to_db(np.asarray(lin)))
