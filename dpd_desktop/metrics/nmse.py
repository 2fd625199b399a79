"""NMSE in dB, legacy OpenDPD numerics.

Behaviour and numerics follow "OpenDPD 2.2.1 reference §6.1 (utils/metrics.py)" and §2.2 (segment arrays).
"""

from __future__ import annotations

import numpy as np

__all__ = ["nmse_db", "as_segments"]


def as_segments(a, name: str = "array") -> np.ndarray:
    """``a`` as a float32 (S, N, 2) I/Q segment array (anything ``np.asarray`` takes; the reference numerics are
    float32). Raises ValueError for a complex array, another shape, or no segment or sample."""
    arr = np.asarray(a)
    if np.iscomplexobj(arr):
        raise ValueError(f"{name}: expected real (S, N, 2) I/Q segments, got a complex array of shape {arr.shape}")
    if arr.ndim != 3 or arr.shape[-1] != 2:
        raise ValueError(f"{name}: expected shape (S, N, 2) (segments, samples, I/Q), got {arr.shape}")
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"{name}: needs at least one segment and one sample, got shape {arr.shape}")
    return np.asarray(arr, dtype=np.float32)


def _pair(pred, ref) -> tuple[np.ndarray, np.ndarray]:
    p = as_segments(pred, "pred")
    r = as_segments(ref, "ref")
    if p.shape != r.shape:
        raise ValueError(f"pred and ref shapes differ: {p.shape} vs {r.shape}")
    return p, r


def nmse_db(pred, ref) -> np.float32:
    """Normalized mean squared error of ``pred`` against ``ref`` (S, N, 2), in dB (legacy OpenDPD definition).

    Per segment s ``NMSE_s = 10*log10(mean_t |r-p|^2 / mean_t |r|^2)``; the result is the **mean of the per-segment
    dB values**, zero-padded tails included (not a pooled ratio, not over valid samples only). Numerics (bitwise,
    reference §6.1): float32 throughout, NumPy means along time of ``(I_r-I_p)^2 + (Q_r-Q_p)^2`` and of
    ``I_r^2 + Q_r^2``, their ratio, ``10*log10``, the mean over segments.

    Returns an ``np.float32`` dB: ``-inf`` if pred == ref; ``nan``/``inf`` if a reference segment is all zero (as the
    reference). Raises ValueError: shapes not (S, N, 2), or different.
    """
    p, r = _pair(pred, ref)
    di = r[:, :, 0] - p[:, :, 0]
    dq = r[:, :, 1] - p[:, :, 1]
    num = np.mean(di**2 + dq**2, axis=1)
    den = np.mean(r[:, :, 0] ** 2 + r[:, :, 1] ** 2, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_seg = 10 * np.log10(num / den)
    out = np.mean(per_seg)
    return np.float32(out)
