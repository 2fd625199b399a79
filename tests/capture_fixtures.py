"""A synthetic capture from a known PA for the inspector and import tests (independent of the code under test).

x: band-limited complex Gaussian (|f| < 0.9·fs/8: 180 MHz occupied of a 200 MHz channel at fs = 800 MHz), RMS 0.25.
PA: a memoryless cubic y = g·(x + c3·x·|x|²) delayed by ``delay`` samples (exact frequency-domain delay, circular),
plus white noise.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from dpd_desktop.data import DatasetSpec, IQDataset, Split

FS = 800e6
BW = 200e6
GAIN_DB = 6.0
PHASE_DEG = 30.0
C3 = complex(-0.2, 0.05)
DELAY = 7.3


def band_limited(n: int, seed: int = 0, rms: float = 0.25) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    f = np.fft.fftfreq(n)
    x = np.fft.ifft(np.fft.fft(w) * (np.abs(f) < 0.9 * BW / FS / 2))  # 90 % occupancy, like LTE
    return x * rms / np.sqrt(np.mean(np.abs(x) ** 2))


def delayed(z: np.ndarray, d: float) -> np.ndarray:
    """z(t − d) by a frequency-domain phase ramp (circular)."""
    f = np.fft.fftfreq(z.size)
    return np.fft.ifft(np.fft.fft(z) * np.exp(-2j * np.pi * f * d))


def pa(x: np.ndarray) -> np.ndarray:
    g = 10 ** (GAIN_DB / 20) * np.exp(1j * np.radians(PHASE_DEG))
    return g * (x + C3 * x * np.abs(x) ** 2)


def analytic_p1db() -> float:
    """|x| where |1 + c3·A²| = 10^(−1/20), by bisection on the exact expression."""
    lo, hi = 0.0, 3.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if abs(1 + C3 * mid ** 2) > 10 ** (-1 / 20):
            lo = mid
        else:
            hi = mid
    return lo


def capture(n: int = 2 ** 16, seed: int = 0, delay: float = DELAY, noise_db: float = -60.0):
    x = band_limited(n, seed)
    y = delayed(pa(x), delay)
    rng = np.random.default_rng(seed + 1)
    s = np.sqrt(np.mean(np.abs(y) ** 2) * 10 ** (noise_db / 10) / 2)
    y = y + s * (rng.standard_normal(n) + 1j * rng.standard_normal(n))
    return x, y


def iq(z: np.ndarray) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=1).astype(np.float32)


def dataset_from(x: np.ndarray, y: np.ndarray, name: str = "synthetic", bw: float = BW, n_sub_ch: int = 1,
                 nperseg: int = 2560) -> IQDataset:
    n = x.size
    b = [0, int(0.6 * n), int(0.8 * n), n]
    spec = DatasetSpec(sample_rate_hz=FS, bw_main_hz=bw, bw_sub_hz=bw / n_sub_ch, n_sub_ch=n_sub_ch,
                       nperseg=nperseg)
    sp = [Split(iq(x[b[i]:b[i + 1]]), iq(y[b[i]:b[i + 1]])) for i in range(3)]
    return IQDataset(name=name, source=Path("/nonexistent") / name, spec=spec, train=sp[0], val=sp[1], test=sp[2])
