"""The DPD update of one loop iteration: the waveform to play next from the one just played and its capture.

All signals complex (N,), in the PA-input's units (√mW at the generator); ``y_n`` is the aligned capture divided by
the target gain G and de-rotated by the measured phase (engine.py), so that a linear PA at gain G gives y_n = u.

* ILC (iterative learning control, per sample): u_{k+1} = u_k + μ·(x − y_n,k), with e_k = x − y_k/G the
  gain-normalised error (the P-type ILC of J. Chani-Cahuana, P. N. Landin, C. Fager, T. Eriksson, "Iterative
  learning control for RF power amplifier linearization", IEEE Trans. Microwave Theory Tech. 64(9), 2016). It needs
  no model of the PA; with the local gain of the PA g_loc, each sample's error shrinks by |1 − μ·g_loc/G| per
  iteration, so μ ≈ 1 converges where the PA is not saturated beyond G.
* ILA (indirect learning, C. Eun, E. J. Powers, "A new Volterra predistorter based on the indirect learning
  architecture", IEEE Trans. Signal Processing 45(1), 1997): a post-inverse MP/GMP P with P(y_n,k) ≈ u_k is fitted
  by least squares (models/poly.py ``basis`` and ``fit_least_squares``, column-scaled, float64) and copied in front
  of the PA: u_{k+1} = P(x).
"""
from __future__ import annotations

import numpy as np

__all__ = ["ilc_update", "ila_update"]


def ilc_update(u: np.ndarray, x: np.ndarray, y_n: np.ndarray, mu: float) -> np.ndarray:
    """u + μ·(x − y_n) (module docstring). Raises ValueError for unequal lengths."""
    if not (u.shape == x.shape == y_n.shape):
        raise ValueError(f"u, x and y_n must have one shape, got {u.shape}, {x.shape}, {y_n.shape}")
    return u + float(mu) * (x - y_n)


def ila_update(u: np.ndarray, x: np.ndarray, y_n: np.ndarray, kind: str = "mp", order: int = 5,
               memory: int = 3) -> tuple[np.ndarray, dict]:
    """(u_{k+1} = P(x), the fit's diagnostics) with P the post-inverse fitted on (y_n → u) (module docstring)."""
    from ..models.poly import basis, fit_least_squares  # PyTorch with it: only ILA needs it
    from ..config import PolySpec

    spec = PolySpec.from_mapping(kind, {"order": order, "memory_depth": memory, "cross_order": max(2, order)})
    scale = float(np.max(np.abs(x)))  # the basis in units of the waveform's peak (better conditioned)
    fit = fit_least_squares(basis(y_n / scale, spec), u / scale)
    u_next = (basis(x / scale, spec) @ fit.coefficients) * scale
    return u_next, {"kind": kind, "order": order, "memory": memory, **fit.diagnostics()}
