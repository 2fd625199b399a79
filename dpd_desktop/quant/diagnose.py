"""Where a quantised model loses accuracy: every traced tensor of the integer reference against the float model's.

:func:`node_errors` runs a lowered model (quant/lower.py) on one input in float64 (quant/backends.py
``FloatBackend``) and in the integer reference (``IntBackend``) under a plan, and gives per tensor the error power
of the dequantised words relative to the float tensor's power (dB): the first tensor whose error jumps is the
format or node to look at.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from . import fixed
from .backends import FloatBackend, IntBackend

__all__ = ["node_errors"]


class _Recording(FloatBackend):
    """The float backend keeping every traced tensor (float64 NumPy)."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, np.ndarray] = {}

    def trace(self, key: str, v) -> None:
        self.values[key] = v.data.detach().cpu().double().numpy()


def node_errors(graph, plan, x: np.ndarray) -> dict[str, dict]:
    """Per traced tensor of ``graph`` on ``x`` (B, T, 2) under ``plan``, in execution order: ``frac`` (its words'
    fraction), ``max_abs`` (the float tensor's largest magnitude), ``error_db`` (10·log10 of Σ(q − f)² / Σ f²;
    −inf when equal, +inf when the float tensor is all zero and the words are not) and ``saturated`` (words
    clipped). Tensors that exist only in the integer reference (the polar features' parts) are left out."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    fb = _Recording()
    with torch.no_grad():
        graph.run(fb, torch.from_numpy(x))
    ib = IntBackend(plan)
    graph.run(ib, x)
    out = {}
    for key, (q, frac) in ib.traces.items():
        f = fb.values.get(key)
        if f is None or f.shape != q.shape:
            continue
        e = float(np.sum((fixed.dequantize(q, frac) - f) ** 2))
        p = float(np.sum(f ** 2))
        err = -math.inf if e == 0 else math.inf if p == 0 else 10 * math.log10(e / p)
        out[key] = {"frac": int(frac), "max_abs": float(np.max(np.abs(f))) if f.size else 0.0, "error_db": err,
                    "saturated": int(ib.saturated.get(key, 0))}
    return out
