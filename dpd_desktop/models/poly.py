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

from dataclasses import asdict, dataclass
from typing import Any, Mapping

import numpy as np
import torch
from torch import Tensor, nn

from ..families import POLY_BACKBONES
from .base import safe_amplitude

__all__ = ["PolySpec", "Term", "PolyBackbone", "basis", "fit_least_squares", "LSFit", "matlab_coefficients",
           "DEFAULT_RCOND", "POLY_BACKBONES", "delayed"]

#: Singular values of the column-scaled basis below ``DEFAULT_RCOND · s_max`` are cut (numpy.linalg.lstsq's rcond).
DEFAULT_RCOND = 1e-10


@dataclass(frozen=True)
class Term:
    """One basis column: x(n − delay) · |x(n − env_delay)|^power (env_delay = delay for the aligned terms)."""

    order: int
    delay: int
    env_delay: int

    @property
    def power(self) -> int:
        return self.order - 1


@dataclass(frozen=True)
class PolySpec:
    """The orders of an MP/GMP model.

    Attributes:
        kind: "mp" or "gmp".
        order: K ≥ 1, nonlinearity order of the aligned terms.
        memory_depth: M ≥ 1 (delays 0 … M−1).
        odd_only: only odd orders 1, 3, 5 … (a PA's even-order products fall outside the band).
        cross_order: Kc, highest order of the GMP cross terms (≥ 2; ignored for "mp").
        cross_lag: L_lag ≥ 0, lagging-envelope depth (GMP; 0 for "mp").
        cross_lead: L_lead ≥ 0, leading-envelope depth (GMP; 0 for "mp"): reads L_lead future samples.
    """

    kind: str = "mp"
    order: int = 5
    memory_depth: int = 4
    odd_only: bool = False
    cross_order: int = 5
    cross_lag: int = 2
    cross_lead: int = 2

    @classmethod
    def from_mapping(cls, kind: str, data: Mapping[str, Any] | None) -> "PolySpec":
        """Build from a dict (config.json's ``poly`` block); unknown keys raise ValueError naming the key."""
        data = dict(data or {})
        data.pop("kind", None)
        known = {"order", "memory_depth", "odd_only", "cross_order", "cross_lag", "cross_lead"}
        odd = sorted(set(data) - known)
        if odd:
            raise ValueError(f"unknown MP/GMP field {odd[0]!r} (known: {', '.join(sorted(known))})")
        spec = cls(kind=kind, **data)
        if kind == "mp":
            spec = cls(kind="mp", order=spec.order, memory_depth=spec.memory_depth, odd_only=spec.odd_only,
                       cross_order=spec.order, cross_lag=0, cross_lead=0)
        spec.check()
        return spec

    def check(self) -> None:
        """Raises ValueError naming the field that is out of range."""
        if self.kind not in POLY_BACKBONES:
            raise ValueError(f"kind: expected one of {POLY_BACKBONES}, got {self.kind!r}")
        for name, low in (("order", 1), ("memory_depth", 1), ("cross_order", 1), ("cross_lag", 0),
                          ("cross_lead", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"{name}: expected an integer >= {low}, got {v!r}")
        if not isinstance(self.odd_only, bool):
            raise ValueError(f"odd_only: expected true or false, got {self.odd_only!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def orders(self, top: int, first: int = 1) -> list[int]:
        return [k for k in range(first, top + 1) if not self.odd_only or k % 2 == 1]

    @property
    def terms(self) -> tuple[Term, ...]:
        """The basis columns in coefficient order (module docstring)."""
        out = [Term(k, m, m) for k in self.orders(self.order) for m in range(self.memory_depth)]
        if self.kind == "gmp":
            cross = self.orders(self.cross_order, first=2)
            out += [Term(k, m, m + l) for k in cross for m in range(self.memory_depth)
                    for l in range(1, self.cross_lag + 1)]
            out += [Term(k, m, m - l) for k in cross for m in range(self.memory_depth)
                    for l in range(1, self.cross_lead + 1)]
        return tuple(out)

    @property
    def n_coefficients(self) -> int:
        """Number of complex coefficients (the real parameter count is twice it)."""
        return len(self.terms)


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
