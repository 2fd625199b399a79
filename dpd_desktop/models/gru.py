"""GRU family (reference §2.4, §3.2).

Recurrence is ``torch.nn.GRU`` itself (a hand-written cell differs in the last bits, §3.2), followed by one
``nn.Linear(H, 2)`` head on the whole hidden sequence.
"""

from __future__ import annotations

from torch import Tensor, nn

from ..kernels.dispatch import DEFAULT_KERNEL, run_recurrent
from .base import init_linear_xavier_, init_recurrent_gate_blocks_

__all__ = ["GRUBackbone", "features"]


def features(x: Tensor) -> Tensor:
    """GRU/LSTM input features (§2.4): ``x`` ``(B, T, 2)`` itself, the raw (I, Q) pair."""
    return x


class GRUBackbone(nn.Module):
    """``nn.GRU(2, H, num_layers, bias=True, batch_first=True)`` → ``nn.Linear(H, 2)`` (§3.2); verified bitwise
    (models/base.py).

    Submodules in registration (= RNG) order: ``rnn`` then ``fc_out``; state_dict keys (1 layer):
    ``rnn.weight_ih_l0 (3H×2), rnn.weight_hh_l0 (3H×H), rnn.bias_ih_l0 (3H), rnn.bias_hh_l0 (3H), fc_out.weight
    (2×H), fc_out.bias (2)``; extra layers add ``rnn.*_l1``, … Parameters: 3H² + 14H + 2, + (6H² + 6H) per extra
    layer. forward(x ``(B, T, 2)``, h0 ``(L, B, H)``) → ``(B, T, 2)``.
    """

    def __init__(self, hidden_size: int, num_layers: int = 1, input_size: int = 2, output_size: int = 2) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.kernel = DEFAULT_KERNEL  # "reference" | "fast" (dpd_desktop/kernels); not in the state_dict
        self.rnn = nn.GRU(input_size=input_size, hidden_size=hidden_size, num_layers=num_layers, bias=True,
                          batch_first=True, bidirectional=False)
        self.fc_out = nn.Linear(hidden_size, output_size, bias=True)

    def reset_parameters(self) -> None:
        """Custom init (§3.2 steps 2–3): GRU gate-block orthogonal (+ Xavier on ``weight_ih_l0`` blocks right after
        its own orthogonal draws), zero biases; then head Xavier-uniform weight, zero bias."""
        init_recurrent_gate_blocks_(self.rnn, self.hidden_size)
        init_linear_xavier_(self.fc_out)

    def forward(self, x: Tensor, h0: Tensor) -> Tensor:
        """x ``(B, T, 2)``, h0 ``(L, B, H)`` → ``(B, T, 2)``."""
        out = run_recurrent(self.rnn, features(x), h0, self.kernel)
        return self.fc_out(out)
