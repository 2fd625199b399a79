"""NMSE in dB, legacy OpenDPD numerics.

Behaviour and numerics follow "OpenDPD 2.2.1 reference §6.1 (utils/metrics.py)" and §2.2 (segment arrays).
"""

from __future__ import annotations

import numpy as np

__all__ = ["nmse_db", "as_segments"]


def as_segments(a, name: str = "array") -> np.ndarray:
    """Validate and return a segment array ``(S, N, 2)`` as float32 (I, Q).

    Accepts anything ``np.asarray`` understands; values are cast to float32 (the reference numerics are float32).
    Raises ``ValueError`` when the array is not 3-D, its last axis is not 2 (I, Q), or it has no segment or no sample.
    """
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
    """Normalized mean squared error of ``pred`` against ``ref``, in dB (legacy OpenDPD definition).

    What it is: for each segment s, ``NMSE_s = 10*log10(mean_t |r-p|^2 / mean_t |r|^2)``; the result is the
    arithmetic **mean of the per-segment dB values** (not a pooled ratio over all samples). Zero-padded tails of a
    padded last segment are included, exactly as the reference does. Lower (more negative) is better.

    What it is NOT: not a pooled NMSE over the whole record, not restricted to valid (unpadded) samples, and not
    computed in float64.

    Numerics (bitwise, OpenDPD 2.2.1 reference §6.1 (utils/metrics.py)): float32 throughout. Per segment the
    numerator is the NumPy mean along time of ``(I_r-I_p)^2 + (Q_r-Q_p)^2`` (separate I and Q columns), the
    denominator the mean along time of ``I_r^2 + Q_r^2``; then ratio, ``10*log10`` and the mean over segments, all
    float32.

    Args:
        pred: prediction, shape (S, N, 2), float32 (I, Q). Other real dtypes are cast to float32.
        ref: reference (target), same shape.

    Returns:
        ``np.float32`` scalar, dB. ``-inf`` if pred == ref exactly; ``nan``/``inf`` if a reference segment is all
        zero (the reference produces the same).

    Raises:
        ValueError: shapes are not (S, N, 2), or differ between pred and ref.
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
