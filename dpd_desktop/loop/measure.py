"""One capture measured: the metrics of dpd_desktop/metrics (the one ACLR/EVM/NMSE) and the plot data.

The metrics compare the gain-normalised, aligned output y_n (input-referred: a linear PA at the target gain gives
y_n = x) with the reference x, under the loop's metric profile (metrics/profiles.py): NMSE [dB], EVM [dB] and ACLR
L/R/avg [dBc] of y_n. Both are cut into ``nperseg`` segments as the profiles expect (the last one zero-padded; the
``corrected`` profile counts the real samples only).
"""
from __future__ import annotations

import numpy as np

from ..data.segments import segment
from ..metrics.profiles import compute_profile_metrics
from ..metrics.spectra import psd_db

__all__ = ["iq", "loop_metrics", "psd_mhz"]


def iq(z: np.ndarray) -> np.ndarray:
    """complex (N,) → (N, 2) float32 I/Q."""
    out = np.empty((z.size, 2), dtype=np.float32)
    out[:, 0], out[:, 1] = z.real, z.imag
    return out


def loop_metrics(y_n: np.ndarray, x: np.ndarray, spec_like, profile: str) -> dict[str, float]:
    """``{"NMSE", "EVM", "ACLR_L", "ACLR_R", "ACLR_AVG"}`` (dB, dB, dBc) of y_n against x (module docstring)."""
    nps = int(spec_like.nperseg)
    m = compute_profile_metrics(profile, segment(iq(y_n), nps), segment(iq(x), nps), spec_like, n_valid=x.size)
    return {k: float(v) for k, v in m.items()}


def psd_mhz(z: np.ndarray, fs: float, nperseg: int) -> tuple[np.ndarray, np.ndarray]:
    """(frequency [MHz], PSD [dB/Hz]) of ``z`` by the one plot PSD (metrics/spectra.py ``psd_db``)."""
    f, p = psd_db(z, fs, min(int(nperseg), z.size))
    return f / 1e6, p
