"""TRes-DeltaGRU family: TRes-GRU's architecture with a delta-thresholded recurrence.

As OpenDPD 2.4.2 defines it [backbones/tres_deltagru.py of its wheel; Wu, Gao et al., "DeltaDPD", IEEE MWCL 2025]:

* recurrent path: features [I, Q, |x|, |x|³, I(t+1), Q(t+1)] (next sample by a circular shift within the frame, as
  TRes-GRU, §3.5 of the 2.2.1 spec) → bias-free delta-GRU 6 → H (models/deltagru.py for the delta equations; no
  bias memories) → bias-free linear H → 2;
* residual path on the raw I/Q: Conv1d 2 → 3 (k 3, dilation 16, padding 16, no bias) → Hardswish → Conv1d 3 → 2
  (k 1, no bias) → Hardswish; output = recurrent head + residual.

Zero thresholds run the dense bias-free GRU (train and eval; models/deltagru.py says why that is exact).

Parameter names are ``nn.GRU``'s, so a checkpoint is interchangeable with TRes-GRU's of the same size (2.4.2's
names: :data:`KEYS_2_4_2`). Initialization draws as 2.4.2's: construction default inits, then TCN convs Xavier, the
input matrix gate-block orthogonal then gate-block Xavier (TRes-GRU: Xavier only), the hidden matrix gate-block
orthogonal, the head Xavier.

Parameters (1 layer): 3H² + 20H + 24 (H = 9 → 447, H = 15 → 999, H = 22 → 1,916). Look-ahead 17 samples.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from .base import init_gate_blocks_
from .deltagru import check_thresholds, delta_sequence
from .tres_gru import TResGRUBackbone, features

__all__ = ["KEYS_2_4_2", "TResDeltaGRUBackbone"]

#: our state_dict key → OpenDPD 2.4.2's, for the keys that differ (1 layer)
KEYS_2_4_2 = {"rnn.weight_ih_l0": "rnn.x2h.weight", "rnn.weight_hh_l0": "rnn.h2h.weight"}


class TResDeltaGRUBackbone(TResGRUBackbone):
    """TRes-DeltaGRU backbone (module docstring); submodules and keys as :class:`TResGRUBackbone`.

    forward(x ``(B, T, 2)`` float32, h0 ``(L, B, H)``) → ``(B, T, 2)``.
    """

    def __init__(self, hidden_size: int, num_layers: int = 1, output_size: int = 2, thx: float = 0.0,
                 thh: float = 0.0) -> None:
        super().__init__(hidden_size, num_layers, output_size)
        self.thx, self.thh = check_thresholds(thx, thh)

    @property
    def dense(self) -> bool:
        return self.thx == 0 and self.thh == 0

    def kernel_note(self) -> str | None:
        """Why the ``fast`` kernel cannot run this model (None: it can)."""
        return None if self.dense else "nonzero delta thresholds run the eager delta recurrence"

    def reset_parameters(self) -> None:
        with torch.no_grad():
            for module in self.tcn:
                if isinstance(module, nn.Conv1d):
                    nn.init.xavier_uniform_(module.weight)
            for name, param in self.rnn.named_parameters():
                init_gate_blocks_(param, self.hidden_size, nn.init.orthogonal_)
                if name.startswith("weight_ih"):
                    init_gate_blocks_(param, self.hidden_size, nn.init.xavier_uniform_)
            nn.init.xavier_uniform_(self.fc_out.weight)

    def forward(self, x: Tensor, h0: Tensor) -> Tensor:
        if self.dense:
            return super().forward(x, h0)
        skip = self.residual(x)
        h = delta_sequence(self.rnn, features(x), h0, self.thx, self.thh)
        return self.fc_out(h) + skip
