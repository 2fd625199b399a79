"""DGRU family (reference §2.4, §3.4, quirk §9.5 — fixed here).

Features f = [I, Q, |x|, |x|³, sin φ = Q/|x|, cos φ = I/|x|] → ``nn.GRU(6, H)`` → a = ReLU(fc_hid(h)) →
output = fc_out([a ; f]) (the 6 features skip into the output layer).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..kernels.dispatch import DEFAULT_KERNEL, run_recurrent
from .base import init_linear_xavier_, init_recurrent_gate_blocks_, safe_amplitude

__all__ = ["DGRUBackbone", "features"]

N_FEATURES = 6


def features(x: Tensor) -> Tensor:
    """DGRU features (§2.4): ``(B, T, 2)`` → ``(B, T, 6)`` ``[I, Q, |x|, |x|³, Q/|x|, I/|x|]``.

    Fix of the reference quirk §9.5 (no epsilon: a zero sample, such as the padding of a last segment, gives NaN to
    the end of the segment): where ``I² + Q² == 0`` sin φ = cos φ = 0, through a safe denominator (no NaN in value or
    gradient). Elsewhere features, outputs and gradients are bitwise the reference's, which needs its arithmetic
    (``pow(·, 2)``, ``sqrt``, ``pow(|x|, 3)``) and its autograd order: cos φ is formed **before** sin φ (the order of
    the nodes fixes the order in which autograd sums the contributions reaching |x|; float addition is not
    associative).
    """
    i = x[..., 0]
    q = x[..., 1]
    amp = safe_amplitude(i, q)
    nonzero = amp != 0
    # |x|³, cos φ, sin φ in the reference's order; a pass-through ``where`` per division keeps the gradients' order
    amp3 = amp**3
    cos_phi = _safe_div(i, amp, nonzero)
    sin_phi = _safe_div(q, amp, nonzero)
    return torch.stack([i, q, amp, amp3, sin_phi, cos_phi], dim=-1)


def _safe_div(num: Tensor, amp: Tensor, nonzero: Tensor) -> Tensor:
    """``num / amp`` where ``nonzero`` else 0, with a safe denominator so neither value nor gradient is NaN."""
    den = torch.where(nonzero, amp, torch.ones_like(amp))
    return torch.where(nonzero, num / den, torch.zeros_like(amp))


class DGRUBackbone(nn.Module):
    """DGRU backbone (§3.4); verified bitwise (models/base.py) for inputs without a zero sample (:func:`features`).

    Submodules in registration (= RNG = state_dict key) order, as the reference's: ``rnn`` = ``nn.GRU(6, H,
    num_layers, bias=True, batch_first=True)``, ``fc_out`` = ``nn.Linear(H + 6, 2)``, ``fc_hid`` = ``nn.Linear(H,
    H)`` (the output layer before the hidden one, though data flows rnn → fc_hid → fc_out). ``reset_parameters`` in
    the same order: the GRU as §3.2; ``fc_out`` Xavier-uniform; ``fc_hid`` ``kaiming_uniform_`` with PyTorch's
    defaults (bound √(6/H)); zero biases. Parameters: 4H² + 27H + 14 (H = 23 → 2,751), + 6H² + 6H per extra layer.
    forward(x ``(B, T, 2)``, h0 ``(L, B, H)``) → ``(B, T, 2)``.
    """

    def __init__(self, hidden_size: int, num_layers: int = 1, output_size: int = 2) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.kernel = DEFAULT_KERNEL  # "reference" | "fast" (dpd_desktop/kernels); not in the state_dict
        self.rnn = nn.GRU(input_size=N_FEATURES, hidden_size=hidden_size, num_layers=num_layers, bias=True,
                          batch_first=True, bidirectional=False)
        self.fc_out = nn.Linear(hidden_size + N_FEATURES, output_size, bias=True)
        self.fc_hid = nn.Linear(hidden_size, hidden_size, bias=True)

    def reset_parameters(self) -> None:
        init_recurrent_gate_blocks_(self.rnn, self.hidden_size)
        init_linear_xavier_(self.fc_out)
        with torch.no_grad():
            nn.init.kaiming_uniform_(self.fc_hid.weight)
            self.fc_hid.bias.zero_()

    def forward_features(self, f: Tensor, h0: Tensor) -> Tensor:
        """Run the network on precomputed features f ``(B, T, 6)`` with h0 ``(L, B, H)`` → ``(B, T, 2)``."""
        h = run_recurrent(self.rnn, f, h0, self.kernel)
        a = torch.relu(self.fc_hid(h))
        return self.fc_out(torch.cat([a, f], dim=-1))

    def forward(self, x: Tensor, h0: Tensor) -> Tensor:
        """x ``(B, T, 2)``, h0 ``(L, B, H)`` → ``(B, T, 2)``."""
        return self.forward_features(features(x), h0)
