"""LSTM family (reference §2.4, §2.5, §3.3).

``nn.LSTM`` recurrence (input 2, hidden H) with the same zero tensor as h0 and c0, then a linear head H → 2. Same
initialization scheme as the GRU (§3.2) with 4 gate blocks (PyTorch gate order i, f, g, o).
"""

from __future__ import annotations

from torch import Tensor, nn

from ..kernels.dispatch import DEFAULT_KERNEL, run_recurrent
from .base import init_linear_xavier_, init_recurrent_gate_blocks_
from .gru import features

__all__ = ["LSTMBackbone", "features"]


class LSTMBackbone(nn.Module):
    """``nn.LSTM(2, H, num_layers, bias=True, batch_first=True)`` → ``nn.Linear(H, 2)`` (§3.3); verified bitwise
    (models/base.py).

    Submodules in registration (= RNG) order: ``rnn`` then ``fc_out``; state_dict keys ``rnn.weight_ih_l0 (4H×2),
    rnn.weight_hh_l0 (4H×H), rnn.bias_ih_l0, rnn.bias_hh_l0 (4H), fc_out.weight (2×H), fc_out.bias (2)``.
    Parameters: 4H² + 18H + 2, + (8H² + 8H) per extra layer. forward(x, h0 ``(L, B, H)``): ``(h0, h0)`` is
    ``(h0, c0)`` (§2.5).
    """

    def __init__(self, hidden_size: int, num_layers: int = 1, input_size: int = 2, output_size: int = 2) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.kernel = DEFAULT_KERNEL  # "reference" | "fast" (dpd_desktop/kernels); not in the state_dict
        self.rnn = nn.LSTM(input_size=input_size, hidden_size=hidden_size, num_layers=num_layers, bias=True,
                           batch_first=True, bidirectional=False)
        self.fc_out = nn.Linear(hidden_size, output_size, bias=True)

    def reset_parameters(self) -> None:
        """§3.3: the §3.2 scheme with 4 gate blocks; head Xavier-uniform, zero bias."""
        init_recurrent_gate_blocks_(self.rnn, self.hidden_size)
        init_linear_xavier_(self.fc_out)

    def forward(self, x: Tensor, h0: Tensor) -> Tensor:
        """x ``(B, T, 2)``, h0 ``(L, B, H)`` → ``(B, T, 2)``."""
        out = run_recurrent(self.rnn, features(x), h0, self.kernel)
        return self.fc_out(out)
