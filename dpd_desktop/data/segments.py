"""Evaluation segments (reference §2.2): consecutive non-overlapping segments of ``nperseg`` samples, the last one
zero-padded at its end. NumPy only, so that readers of stored results (runs/replay.py, runs/evaluate.py) and the
window's import path need no PyTorch (tests/gui/test_window_startup.py).
"""
from __future__ import annotations

import numpy as np


def segment(series: np.ndarray, nperseg: int) -> np.ndarray:
    """Cut an (N, 2) series into (ceil(N / nperseg), nperseg, 2) consecutive segments, zero-padding the tail.

    Dtype is preserved. Reference §2.2 (val/test segmentation).
    """
    n = series.shape[0]
    n_seg = -(-n // nperseg)
    out = np.zeros((n_seg * nperseg,) + series.shape[1:], dtype=series.dtype)
    out[:n] = series
    return out.reshape((n_seg, nperseg) + series.shape[1:])


def unsegment(segments: np.ndarray, n_valid: int) -> np.ndarray:
    """Inverse of :func:`segment`: (S, nperseg, 2) → (n_valid, 2), dropping the zero padding."""
    return segments.reshape((-1,) + segments.shape[2:])[:n_valid]
