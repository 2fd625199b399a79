"""Memory-polynomial (MP) and generalized memory-polynomial (GMP) models: the basis, the least-squares fit and the
torch module that trains and evaluates like the neural backbones.

Sources: the MP of Kim & Konstantinou, "Digital predistortion of wideband signals based on power amplifier model
with memory", Electronics Letters 37(23), 2001; the GMP of Morgan, Ma, Kim, Zierdt & Pastalan, "A generalized memory
polynomial model for digital predistortion of RF power amplifiers", IEEE Trans. Signal Processing 54(10), 2006, eq.
(23); the coefficient layout of MATLAB's ``comm.DPD`` ('Memory polynomial': ``Coefficients`` is an M-by-K matrix,
row m+1 = delay m, column k = degree k, y(n) = Σ_m Σ_k a(m+1, k) x(n−m)|x(n−m)|^(k−1)).

With x(n) complex baseband, K the nonlinearity order, M the memory depth (delays 0 … M−1):

* aligned terms (the MP):  a_{k,m} · x(n−m)·|x(n−m)|^(k−1),              k = 1 … K, m = 0 … M−1;
* lagging envelope (GMP):  b_{k,m,l} · x(n−m)·|x(n−m−l)|^(k−1),          k = 2 … Kc, m = 0 … M−1, l = 1 … L_lag;
* leading envelope (GMP):  c_{k,m,l} · x(n−m)·|x(n−m+l)|^(k−1),          k = 2 … Kc, m = 0 … M−1, l = 1 … L_lead.

In Morgan et al.'s notation: K_a = K, L_a = M (aligned); K_b = K_c = Kc − 1 envelope powers 1 … Kc−1, L_b = L_c = M,
M_b = L_lag (lagging cross-term depth), M_c = L_lead (leading cross-term depth). ``odd_only`` keeps the odd orders
k = 1, 3, 5 … only (in both term kinds). Samples before the start (or after the end) of a frame / series are zero.

Column order of the basis (and of the coefficient vector): aligned terms first, memory-major within an order —
column (k_index · M + m) — then the lagging terms (k, m, l) in that nesting, then the leading terms. The aligned
block therefore reshapes to a K×M array ``A[k_index, m]``; :func:`matlab_coefficients` transposes it to comm.DPD's
M-by-K matrix (even orders zero when ``odd_only``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from ..config import PolySpec, Term
from ..families import POLY_BACKBONES
from .base import safe_amplitude

__all__ = ["PolySpec", "Term", "PolyBackbone", "basis", "fit_least_squares", "LSFit", "matlab_coefficients",
           "DEFAULT_RCOND", "POLY_BACKBONES", "delayed"]

#: Singular values of the column-scaled basis below ``DEFAULT_RCOND · s_max`` are cut (numpy.linalg.lstsq's rcond).
DEFAULT_RCOND = 1e-10


# ----------------------------------------------------------------------------------------------- basis (NumPy, f64)
def delayed(a: np.ndarray, d: int) -> np.ndarray:
    """a(n − d) along the last axis, zeros outside (d > 0: past, d < 0: future)."""
    out = np.zeros_like(a)
    n = a.shape[-1]
    if 0 <= d < n:
        out[..., d:] = a[..., :n - d]
    elif -n < d < 0:
        out[..., :n + d] = a[..., -d:]
    return out


def basis(x: np.ndarray, spec: PolySpec) -> np.ndarray:
    """The basis matrix Φ of ``x``.

    Args:
        x: (N,) complex samples (cast to complex128), or (N, 2) float I/Q.
        spec: the orders.
    Returns:
        (N, P) complex128, P = ``spec.n_coefficients``, columns in coefficient order; y ≈ Φ·w.
    """
    x = np.asarray(x)
    if x.ndim == 2 and x.shape[1] == 2 and not np.iscomplexobj(x):
        x = x[:, 0].astype(np.float64) + 1j * x[:, 1].astype(np.float64)
    x = np.asarray(x, dtype=np.complex128).reshape(-1)
    amp = np.abs(x)
    phi = np.empty((x.shape[0], spec.n_coefficients), dtype=np.complex128)
    for j, t in enumerate(spec.terms):
        phi[:, j] = delayed(x, t.delay) * delayed(amp, t.env_delay) ** t.power
    return phi


@dataclass(frozen=True)
class LSFit:
    """One least-squares solve: ``coefficients`` (P,) complex128 and what the solver did."""

    coefficients: np.ndarray
    rank: int
    n_coefficients: int
    n_observations: int
    rcond: float
    condition_number: float | None  # s_max / s_min of the column-scaled basis (None: exactly singular)
    train_nmse_db: float     # residual energy / target energy on the fitted samples, dB

    def diagnostics(self) -> dict[str, Any]:
        """The plain fields (config.json / status.json)."""
        return {"solver": "column-scaled least squares, numpy.linalg.lstsq (SVD)", "rank": self.rank,
                "n_coefficients": self.n_coefficients, "n_observations": self.n_observations, "rcond": self.rcond,
                "condition_number": self.condition_number, "train_nmse_db": self.train_nmse_db}


def fit_least_squares(phi: np.ndarray, target: np.ndarray, rcond: float = DEFAULT_RCOND) -> LSFit:
    """Solve Φ·w ≈ t in float64 (complex128).

    The columns are scaled to unit L2 norm (an all-zero column keeps scale 1 and gets a zero coefficient), the
    scaled system is solved by ``numpy.linalg.lstsq(…, rcond=rcond)`` — singular values below ``rcond · s_max`` are
    treated as zero, so a rank-deficient basis (duplicated columns) still gives finite coefficients (the
    minimum-norm solution of the scaled system) — and the coefficients are unscaled.

    Args:
        phi: (N, P) basis; target: (N,) complex; rcond: 0 ≤ rcond < 1.
    Raises:
        ValueError: shapes that do not match, N < P, non-finite input, rcond out of range.
    """
    phi = np.asarray(phi, dtype=np.complex128)
    t = np.asarray(target, dtype=np.complex128).reshape(-1)
    if phi.ndim != 2 or phi.shape[0] != t.shape[0]:
        raise ValueError(f"basis {phi.shape} and target {t.shape} do not match")
    n, p = phi.shape
    if n < p:
        raise ValueError(f"least squares needs at least as many samples as coefficients: {n} samples, {p} coefficients")
    if not (0.0 <= float(rcond) < 1.0):
        raise ValueError(f"rcond: expected 0 <= rcond < 1, got {rcond!r}")
    if not (np.isfinite(phi).all() and np.isfinite(t).all()):
        raise ValueError("least squares: the basis or the target holds non-finite values")
    norms = np.linalg.norm(phi, axis=0)
    norms = np.where(norms > 0, norms, 1.0)
    w_scaled, _, rank, sv = np.linalg.lstsq(phi / norms, t, rcond=float(rcond))
    w = w_scaled / norms
    resid = t - phi @ w
    energy = float(np.vdot(t, t).real)
    nmse = 10 * np.log10(float(np.vdot(resid, resid).real) / energy) if energy > 0 else float("nan")
    cond = float(sv[0] / sv[-1]) if sv.size and sv[-1] > sv[0] * 1e-300 else None  # None: singular
    return LSFit(w, int(rank), int(p), int(n), float(rcond), cond, float(nmse))


def matlab_coefficients(coefficients: np.ndarray, spec: PolySpec) -> np.ndarray:
    """The aligned (MP) coefficients as MATLAB ``comm.DPD``'s 'Memory polynomial' ``Coefficients``: an M-by-K
    complex matrix, entry (m, k−1) multiplying x(n−m)|x(n−m)|^(k−1); orders left out by ``odd_only`` are zero.
    (A GMP's cross terms have no place in that matrix; the CSV/MAT export lists them separately.)"""
    w = np.asarray(coefficients, dtype=np.complex128).reshape(-1)
    out = np.zeros((spec.memory_depth, spec.order), dtype=np.complex128)
    for c, t in zip(w, spec.terms):
        if t.delay == t.env_delay:
            out[t.delay, t.order - 1] = c
    return out


# ----------------------------------------------------------------------------------------------- torch module
class PolyBackbone(nn.Module):
    """MP/GMP as a backbone: ``forward(x (B, T, 2) float32, h0 ignored) → (B, T, 2)``.

    Each row of ``x`` is one frame / segment; delays are zero before its first sample (and the leading terms zero
    after its last), like the recurrent families' zero initial state. The complex coefficients are one real
    parameter ``coef`` of shape (P, 2) (real, imaginary), so the module trains by gradient like the neural backbones
    (a DPD through the frozen PA) and loads a least-squares solution with :meth:`set_coefficients`. Initialization
    draws no random numbers: the identity (coefficient 1 on x(n), 0 elsewhere), as comm.DPD's default.
    State_dict: ``coef`` (P, 2) float32.
    """

    def __init__(self, spec: PolySpec) -> None:
        super().__init__()
        spec.check()
        self.spec = spec
        terms = spec.terms
        self.coef = nn.Parameter(torch.zeros(len(terms), 2))
        self._terms = terms
        self.reset_parameters()

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.coef.zero_()
            for j, t in enumerate(self._terms):
                if t.order == 1 and t.delay == 0:
                    self.coef[j, 0] = 1.0

    def set_coefficients(self, w: np.ndarray) -> None:
        """Load (P,) complex coefficients (cast to the parameter's dtype)."""
        w = np.asarray(w, dtype=np.complex128).reshape(-1)
        if w.shape[0] != self.coef.shape[0]:
            raise ValueError(f"expected {self.coef.shape[0]} coefficients, got {w.shape[0]}")
        with torch.no_grad():
            self.coef.copy_(torch.from_numpy(np.stack([w.real, w.imag], axis=1)).to(self.coef.dtype))

    def coefficients(self) -> np.ndarray:
        """(P,) complex128 copy of the coefficients."""
        c = self.coef.detach().cpu().double().numpy()
        return c[:, 0] + 1j * c[:, 1]

    @staticmethod
    def _shift(a: Tensor, d: int) -> Tensor:
        """a(t − d) along dim 1 of (B, T, …), zeros outside the frame."""
        if d == 0:
            return a
        t = a.shape[1]
        if abs(d) >= t:
            return torch.zeros_like(a)
        z = torch.zeros_like(a[:, :abs(d)])
        return torch.cat([z, a[:, :t - d]], dim=1) if d > 0 else torch.cat([a[:, -d:], z], dim=1)

    def forward(self, x: Tensor, h0: Tensor | None = None) -> Tensor:
        amp = safe_amplitude(x[..., 0], x[..., 1])  # (B, T)
        powers: dict[int, Tensor] = {}
        envs: dict[tuple[int, int], Tensor] = {}
        cols = []
        for t in self._terms:
            if t.power == 0:
                env = None
            else:
                key = (t.env_delay, t.power)
                if key not in envs:
                    if t.power not in powers:
                        powers[t.power] = amp ** t.power
                    envs[key] = self._shift(powers[t.power], t.env_delay)
                env = envs[key]
            s = self._shift(x, t.delay)
            cols.append(s if env is None else s * env.unsqueeze(-1))
        phi = torch.stack(cols, dim=2)  # (B, T, P, 2)
        c = self.coef
        re = phi[..., 0] @ c[:, 0] - phi[..., 1] @ c[:, 1]
        im = phi[..., 0] @ c[:, 1] + phi[..., 1] @ c[:, 0]
        return torch.stack([re, im], dim=-1)
