"""GRU-amp family: a GRU on [I, Q, |x|, |x|³] with a linear head (OpenDPD 2.4.2's ``qgru_amp1`` backbone in
float32, [backbones/qgru_amp1.py of its wheel]; its Arena v6 row at ≤ 1,000 parameters, H = 15 → 977, has the best
quality there, marginally ahead of DeltaGRU H = 14).

``nn.GRU(4, H)`` (biases) → ``nn.Linear(H, 2)``; initialization as the GRU family's (§3.2 of the 2.2.1 spec: gate-
block orthogonal weights, Xavier gate blocks on ``weight_ih_l0``, zero biases; head Xavier, zero bias), which is
2.4.2's for this backbone. Parameters (1 layer): 3H² + 20H + 2 (H = 9 → 425, H = 15 → 977); extra layer 6H² + 6H.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from ..kernels.dispatch import DEFAULT_KERNEL, run_recurrent
from .base import init_linear_xavier_, init_recurrent_gate_blocks_, safe_amplitude

__all__ = ["GRUAmpBackbone", "features"]

N_FEATURES = 4


def features(x: Tensor) -> Tensor:
    """``(B, T, 2)`` → ``(B, T, 4)`` ``[I, Q, |x|, |x|³]``."""
    i, q = x[..., 0], x[..., 1]
    amp = safe_amplitude(i, q)
    return torch.stack([i, q, amp, amp**3], dim=-1)


class GRUAmpBackbone(nn.Module):
    """``rnn`` = ``nn.GRU(4, H, num_layers, batch_first=True)``, ``fc_out`` = ``nn.Linear(H, 2)`` (2.4.2's keys).

    forward(x ``(B, T, 2)`` float32, h0 ``(L, B, H)``) → ``(B, T, 2)``."""

    def __init__(self, hidden_size: int, num_layers: int = 1, output_size: int = 2) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.kernel = DEFAULT_KERNEL
        self.rnn = nn.GRU(N_FEATURES, hidden_size, num_layers, bias=True, batch_first=True)
        self.fc_out = nn.Linear(hidden_size, output_size, bias=True)

    def reset_parameters(self) -> None:
        init_recurrent_gate_blocks_(self.rnn, self.hidden_size)
        init_linear_xavier_(self.fc_out)

    def forward(self, x: Tensor, h0: Tensor) -> Tensor:
        return self.fc_out(run_recurrent(self.rnn, features(x), h0, self.kernel))
