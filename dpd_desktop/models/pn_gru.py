"""Phase-normalized GRU families (PN-GRU, PN-GRU-2), whose output is a correction turned by the input sample's own
phase, and the gain-head GRUs (GRU-gain, GRU-gain-3, GRU-gain-5), whose head gives complex gains on input samples.

A PA's baseband behaviour is equivariant to a common phase rotation: PA(x·e^{jθ}) = PA(x)·e^{jθ}; so is its inverse.
Phase normalization (Fischer-Bühner et al., "Phase-Normalized Neural Network for Linearization of RF Power
Amplifiers", IEEE MWCL 2023, the PN-TDNN) builds that symmetry into the network: with the unit phasor
u(t) = x(t)/|x(t)| every input is read in the frame of the current sample, x(t+k)·conj(u(t)), and the network's
output is turned back, y(t) = x(t) + u(t)·(o_I + j·o_Q). A network with n inputs then spends nothing on learning
the symmetry. Here the network is a GRU on the rotation-invariant features; its state is read in the frame of each
new sample through the neighbours' relative phase. At |x(t)| = 0, u(t) = 0: the correction is 0 (y = x).

* ``pn_gru``: features ``[|x|, |x|³, x(t−1)·u*, x(t+1)·u*]`` (6 reals) → ``nn.GRU(6, H)`` → ``nn.Linear(H, 2)``
  → ``y = x + u·o``. Parameters 3H² + 26H + 2 (H = 14 → 954).
* ``pn_gru2``: the same with x(t±2) as well (10 reals): 3H² + 38H + 2 (H = 12 → 890).
* ``gru_gain``: DeltaGRU's features ``[I, Q, |x|, |x|³, Q/|x|, I/|x|]`` → ``nn.GRU(6, H)`` → ``nn.Linear(H, 4)``
  → ``y = x·(1 + g) + a`` (g = o₀ + j·o₁ a complex gain, a = o₂ + j·o₃ an additive term). 3H² + 28H + 4 (H = 14 → 984).
* ``gru_gain3``, ``gru_gain5``: the network generates a complex gain for each of x(t−1), x(t), x(t+1) (or x(t−2) …
  x(t+2)) at every step, y = x + Σ_k x(t+k)·g_k + a: a linear filter whose taps follow the signal.
  3H² + 24H + (2K + 2)(H + 1) for K taps (K = 3, H = 13 → 931; K = 5, H = 12 → 876).
* ``gru_gain3p``: ``gru_gain3`` plus a complex gain on x(t)·|x(t)|², so the head can scale its gain on x(t) by the
  instantaneous power (a product the linear head cannot form): y = x + Σ_k x(t+k)·g_k + x·|x|²·g_p + a.
  3H² + 24H + 10(H + 1) (H = 13 → 959).

Neighbours beyond the frame's ends are zeros (no wrap). Look-ahead: 1 sample (``pn_gru``, ``gru_gain3``), 2
(``pn_gru2``, ``gru_gain5``), 0 (``gru_gain``), 1 (``gru_gain3p``). Measured under Arena v6: benchmarks/results/2026-12-05-arena-gain-h200. forward(x ``(B, T, 2)`` float32, h0 ``(L, B, H)``) → ``(B, T, 2)``; biases, init as GRU-amp's.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from ..kernels.dispatch import DEFAULT_KERNEL, run_recurrent
from . import deltagru
from .base import init_linear_xavier_, init_recurrent_gate_blocks_, safe_amplitude

__all__ = ["PNGRUBackbone", "PNGRU2Backbone", "GRUGainBackbone", "GRUGain3Backbone", "GRUGain5Backbone", "GRUGain3PBackbone",
           "pn_features",
           "pn_features2", "unit_phasor"]


def unit_phasor(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``(|x|, cos φ, sin φ)`` of ``x`` ``(..., 2)``: ``(I, Q)/|x|``, zeros where ``|x| = 0`` (no NaN in value or
    gradient)."""
    i, q = x[..., 0], x[..., 1]
    amp = safe_amplitude(i, q)
    den = torch.where(amp == 0, torch.ones_like(amp), amp)
    return amp, i / den, q / den


def _shift(x: Tensor, k: int) -> Tensor:
    """x(t + k) along dim 1 of ``(B, T, C)``, zeros beyond the frame."""
    if k == 0:
        return x
    pad = torch.zeros_like(x[:, :abs(k)])
    return torch.cat([x[:, k:], pad], dim=1) if k > 0 else torch.cat([pad, x[:, :k]], dim=1)


def _features(x: Tensor, offsets: tuple[int, ...]) -> tuple[Tensor, Tensor, Tensor]:
    amp, c, s = unit_phasor(x)
    cols = [amp, amp**3]
    for k in offsets:
        n = _shift(x, k)
        ni, nq = n[..., 0], n[..., 1]
        cols += [ni * c + nq * s, nq * c - ni * s]  # x(t+k)·conj(u(t))
    return torch.stack(cols, dim=-1), c, s


def pn_features(x: Tensor) -> Tensor:
    """``(B, T, 2)`` → ``(B, T, 6)`` ``[|x|, |x|³, x(t−1)·u*, x(t+1)·u*]`` (real, imaginary of each product)."""
    return _features(x, (-1, 1))[0]


def pn_features2(x: Tensor) -> Tensor:
    """``(B, T, 2)`` → ``(B, T, 10)``: :func:`pn_features` with x(t−2), x(t+2) as well."""
    return _features(x, (-1, 1, -2, 2))[0]


class PNGRUBackbone(nn.Module):
    """``rnn`` = ``nn.GRU(2 + 2·len(offsets), H, num_layers, batch_first=True)``, ``fc_out`` = ``nn.Linear(H, 2)``;
    ``y = x + u·(fc_out(h))`` (module docstring)."""

    offsets: tuple[int, ...] = (-1, 1)

    def __init__(self, hidden_size: int, num_layers: int = 1, output_size: int = 2) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.kernel = DEFAULT_KERNEL
        self.rnn = nn.GRU(2 + 2 * len(self.offsets), hidden_size, num_layers, bias=True, batch_first=True)
        self.fc_out = nn.Linear(hidden_size, output_size, bias=True)

    def reset_parameters(self) -> None:
        init_recurrent_gate_blocks_(self.rnn, self.hidden_size)
        init_linear_xavier_(self.fc_out)

    def forward(self, x: Tensor, h0: Tensor) -> Tensor:
        feats, c, s = _features(x, self.offsets)
        o = self.fc_out(run_recurrent(self.rnn, feats, h0, self.kernel))
        oi, oq = o[..., 0], o[..., 1]
        return x + torch.stack([oi * c - oq * s, oi * s + oq * c], dim=-1)


class PNGRU2Backbone(PNGRUBackbone):
    """:class:`PNGRUBackbone` reading x(t±1) and x(t±2)."""

    offsets = (-1, 1, -2, 2)


class GRUGainBackbone(nn.Module):
    """``rnn`` = ``nn.GRU(6, H, num_layers, batch_first=True)`` on DeltaGRU's polar features, ``fc_out`` =
    ``nn.Linear(H, 2·len(taps) + 2)``; ``y(t) = x(t) + Σ_k x(t+k)·g_k(t) + a(t)`` over ``taps`` (module docstring):
    a complex gain per tap, generated at every step, and an additive term; then ``+ Σ_p x(t)·|x(t)|^p·g_p`` over
    ``amp_orders``."""

    taps: tuple[int, ...] = (0,)
    amp_orders: tuple[int, ...] = ()

    def __init__(self, hidden_size: int, num_layers: int = 1, output_size: int = 2) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.kernel = DEFAULT_KERNEL
        self.rnn = nn.GRU(6, hidden_size, num_layers, bias=True, batch_first=True)
        self.fc_out = nn.Linear(hidden_size, 2 * (len(self.taps) + len(self.amp_orders)) + output_size, bias=True)

    def reset_parameters(self) -> None:
        init_recurrent_gate_blocks_(self.rnn, self.hidden_size)
        init_linear_xavier_(self.fc_out)

    def forward(self, x: Tensor, h0: Tensor) -> Tensor:
        o = self.fc_out(run_recurrent(self.rnn, deltagru.features(x), h0, self.kernel))
        i, q = x[..., 0] + o[..., -2], x[..., 1] + o[..., -1]
        for j, k in enumerate(self.taps):
            n = _shift(x, k)
            ni, nq = n[..., 0], n[..., 1]
            gi, gq = o[..., 2 * j], o[..., 2 * j + 1]
            i = i + (ni * gi - nq * gq)
            q = q + (ni * gq + nq * gi)
        if self.amp_orders:
            amp = safe_amplitude(x[..., 0], x[..., 1])
            for j, p in enumerate(self.amp_orders, start=len(self.taps)):
                w = amp ** p
                ni, nq = x[..., 0] * w, x[..., 1] * w
                gi, gq = o[..., 2 * j], o[..., 2 * j + 1]
                i = i + (ni * gi - nq * gq)
                q = q + (ni * gq + nq * gi)
        return torch.stack([i, q], dim=-1)


class GRUGain3Backbone(GRUGainBackbone):
    """:class:`GRUGainBackbone` with gains on x(t−1), x(t), x(t+1)."""

    taps = (-1, 0, 1)


class GRUGain5Backbone(GRUGainBackbone):
    """:class:`GRUGainBackbone` with gains on x(t−2) … x(t+2)."""

    taps = (-2, -1, 0, 1, 2)


class GRUGain3PBackbone(GRUGainBackbone):
    """:class:`GRUGain3Backbone` plus a gain on x(t)·|x(t)|²."""

    taps = (-1, 0, 1)
    amp_orders = (2,)
