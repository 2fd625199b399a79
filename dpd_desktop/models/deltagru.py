"""DeltaGRU family: a GRU whose state is updated by thresholded input and hidden-state changes.

Behavior as OpenDPD 2.4.2 defines it [backbones/deltagru.py of its wheel] and the delta-network literature (Neil et
al., "Delta Networks for Optimized Recurrent Network Computation", ICML 2017; Gao et al., "DeltaRNN", FPGA 2018;
Wu, Gao et al., "DeltaDPD", IEEE MWCL 2025):

* features f(t) = [I, Q, |x|, |x|³, Q/|x|, I/|x|] (a zero sample gets sin = cos = 0, the 2.4.2 ``finite_iq`` rule);
* one delta-GRU layer stack 6 → H with biases, then a linear head H → 2 (bias);
* per step t, per layer: Δx = x(t) − x̂, kept where |Δx| ≥ θx (else 0, and x̂ keeps its old value; where kept
  x̂ ← x(t)); Δh = h(t−1) − ĥ likewise with θh. Delta memories accumulate the gate pre-activations:
  M_r += W_ir Δx + W_hr Δh, M_z += W_iz Δx + W_hz Δh, M_n += W_in Δx, M_nh += W_hn Δh, started from the biases
  (M_r = b_ir + b_hr, M_z = b_iz + b_hz, M_n = b_in, M_nh = b_hn); then r = σ(M_r), z = σ(M_z),
  n = tanh(M_n + r ⊙ M_nh), h(t) = (1 − z) ⊙ n + z ⊙ h(t−1). x̂, ĥ, h start at zero.
* Training (2.4.2 and the literature): the same thresholded forward, gradients straight through the kept deltas
  (a dropped delta has zero gradient); no sparsity regularizer (2.4.2 computes an L1 sum of Δh but never adds it to
  the loss).

With θx = θh = 0 every delta is kept and the memories telescope to W x(t) + b and W h(t−1) + b: the layer is exactly
a GRU on the 6 features (as OpenDPD 2.4.2's Arena trains it), so a zero-threshold model runs the dense recurrence
through ``run_recurrent`` (train and eval; equal to the delta recurrence to float32 rounding). Nonzero thresholds
run the delta recurrence in plain PyTorch on either kernel setting (``kernel_note``).

Initialization as 2.4.2's (same global-RNG draws, same state_dict keys): at construction a whole-matrix orthogonal
init of every GRU weight and zero biases, the head PyTorch's default; then §3.2 of the 2.2.1 spec (gate-block
orthogonal weights, Xavier gate blocks on ``weight_ih_l0``, zero biases; head Xavier, zero bias).

Parameters (1 layer): 3H² + 26H + 2 (H = 14 → 954, H = 21 → 1,871); each extra layer adds 6H² + 6H.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from ..kernels.dispatch import DEFAULT_KERNEL, run_recurrent
from .base import init_linear_xavier_, init_recurrent_gate_blocks_, safe_amplitude

__all__ = ["DeltaGRUBackbone", "delta_gru_layer", "features"]

N_FEATURES = 6


def features(x: Tensor) -> Tensor:
    """``(B, T, 2)`` float32 I/Q → ``(B, T, 6)`` ``[I, Q, |x|, |x|³, Q/|x|, I/|x|]``; zero samples → sin = cos = 0.

    The divisions use a unit denominator where |x| = 0 (no NaN in value or gradient). sin φ is formed before cos φ,
    2.4.2's order (it fixes the order in which autograd sums the contributions reaching |x|).
    """
    i = x[..., 0]
    q = x[..., 1]
    amp = safe_amplitude(i, q)
    amp3 = amp**3
    den = torch.where(amp == 0, torch.ones_like(amp), amp)
    sin_phi = q / den
    cos_phi = i / den
    return torch.stack([i, q, amp, amp3, sin_phi, cos_phi], dim=-1)


def delta_gru_layer(x: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None, b_hh: Tensor | None,
                    thx: float, thh: float, h0: Tensor | None = None) -> Tensor:
    """One delta-GRU layer (module docstring) over ``x`` ``(B, T, I)`` → ``(B, T, H)``, differentiable: w_ih
    ``(3H, I)``, w_hh ``(3H, H)`` in PyTorch's gate order r, z, n; b_ih, b_hh ``(3H)`` or None; thresholds ≥ 0 on
    |Δx| and |Δh|; h0 ``(B, H)`` (None: zeros)."""
    B, T, _ = x.shape
    H = w_hh.shape[1]
    h = x.new_zeros(B, H) if h0 is None else h0
    x_hat = x.new_zeros(B, x.shape[2])
    h_hat = x.new_zeros(B, H)
    if b_ih is not None:
        m = torch.cat([b_ih[:2 * H] + b_hh[:2 * H], b_ih[2 * H:]]).expand(B, 3 * H)
        m_nh = b_hh[2 * H:].expand(B, H)
    else:
        m = x.new_zeros(B, 3 * H)
        m_nh = x.new_zeros(B, H)
    out = []
    for x_t in x.unbind(1):
        dx = x_t - x_hat
        dh = h - h_hat
        adx, adh = dx.abs(), dh.abs()
        dx = dx.masked_fill(adx < thx, 0)
        dh = dh.masked_fill(adh < thh, 0)
        x_hat = torch.where(adx >= thx, x_t, x_hat)
        h_hat = torch.where(adh >= thh, h, h_hat)
        mx = dx @ w_ih.t() + m
        mh = dh @ w_hh.t()
        mx_r, mx_z, mx_n = mx.chunk(3, dim=1)
        mh_r, mh_z, mh_n = mh.chunk(3, dim=1)
        m_r, m_z = mx_r + mh_r, mx_z + mh_z
        m_nh = mh_n + m_nh
        m = torch.cat([m_r, m_z, mx_n], dim=1)
        r = torch.sigmoid(m_r)
        z = torch.sigmoid(m_z)
        n = torch.tanh(mx_n + r * m_nh)
        h = (1 - z) * n + z * h
        out.append(h)
    return torch.stack(out, dim=1)


def delta_sequence(rnn: nn.GRU, f: Tensor, h0: Tensor, thx: float, thh: float) -> Tensor:
    """The delta recurrence through every layer of ``rnn`` (its parameters), ``f`` ``(B, T, I)`` → ``(B, T, H)``."""
    y = f
    for layer in range(rnn.num_layers):
        b_ih = getattr(rnn, f"bias_ih_l{layer}") if rnn.bias else None
        b_hh = getattr(rnn, f"bias_hh_l{layer}") if rnn.bias else None
        y = delta_gru_layer(y, getattr(rnn, f"weight_ih_l{layer}"), getattr(rnn, f"weight_hh_l{layer}"),
                            b_ih, b_hh, thx, thh, h0[layer])
    return y


class _OrthogonalGRU(nn.GRU):
    """``nn.GRU`` whose construction-time init is a whole-matrix orthogonal init of every weight and zero biases
    (2.4.2's delta layer replaces the GRU's default uniform init this way; it fixes the RNG draws at construction)."""

    def reset_parameters(self) -> None:
        with torch.no_grad():
            for name, p in self.named_parameters():
                if "weight" in name:
                    nn.init.orthogonal_(p)
                elif "bias" in name:
                    p.zero_()


def check_thresholds(thx: float, thh: float) -> tuple[float, float]:
    """(θx, θh) as floats; ValueError unless both are finite and ≥ 0."""
    out = []
    for name, v in (("thx", thx), ("thh", thh)):
        v = float(v)
        if not (v >= 0 and v < float("inf")):
            raise ValueError(f"{name}: expected a finite threshold >= 0, got {v!r}")
        out.append(v)
    return out[0], out[1]


class DeltaGRUBackbone(nn.Module):
    """DeltaGRU backbone (module docstring). Submodules in registration order: ``rnn`` (a GRU 6 → H with biases,
    batch first), ``fc_out`` (Linear H → 2). state_dict keys (1 layer): ``rnn.weight_ih_l0, rnn.weight_hh_l0,
    rnn.bias_ih_l0, rnn.bias_hh_l0, fc_out.weight, fc_out.bias`` — 2.4.2's.

    forward(x ``(B, T, 2)`` float32, h0 ``(L, B, H)``) → ``(B, T, 2)``.
    """

    def __init__(self, hidden_size: int, num_layers: int = 1, output_size: int = 2, thx: float = 0.0,
                 thh: float = 0.0) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.thx, self.thh = check_thresholds(thx, thh)
        self.kernel = DEFAULT_KERNEL
        self.rnn = _OrthogonalGRU(N_FEATURES, hidden_size, num_layers, bias=True, batch_first=True)
        self.fc_out = nn.Linear(hidden_size, output_size, bias=True)

    @property
    def dense(self) -> bool:
        """True when both thresholds are zero: the recurrence is a plain GRU (module docstring)."""
        return self.thx == 0 and self.thh == 0

    def kernel_note(self) -> str | None:
        """Why the ``fast`` kernel cannot run this model (None: it can)."""
        return None if self.dense else "nonzero delta thresholds run the eager delta recurrence"

    def reset_parameters(self) -> None:
        init_recurrent_gate_blocks_(self.rnn, self.hidden_size)
        init_linear_xavier_(self.fc_out)

    def forward(self, x: Tensor, h0: Tensor) -> Tensor:
        f = features(x)
        h = (run_recurrent(self.rnn, f, h0, self.kernel) if self.dense
             else delta_sequence(self.rnn, f, h0, self.thx, self.thh))
        return self.fc_out(h)
