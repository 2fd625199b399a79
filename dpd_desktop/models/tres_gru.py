"""TRes-GRU family: dense-GRU version of TRes-DeltaGRU (reference §2.4, §3.5, quirk §9.7).

Output = recurrent head + residual "TCN" path:

* recurrent: features [I, Q, |x|, |x|³, I(t+1), Q(t+1)] → bias-free ``nn.GRU(6, H)`` → bias-free ``nn.Linear(H, 2)``;
* TCN on raw I/Q (channels-first): ``Conv1d(2, 3, k=3, dilation=16, padding=16, bias=False)`` → Hardswish →
  ``Conv1d(3, 2, k=1, bias=False)`` → Hardswish. Non-causal: output at t reads x(t−16), x(t), x(t+16).

Look-ahead: 16 future samples (dilated conv) + 1 (next-sample features).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..kernels.dispatch import DEFAULT_KERNEL, run_recurrent
from .base import init_gate_blocks_, safe_amplitude

__all__ = ["TResGRUBackbone", "features"]

N_FEATURES = 6
TCN_CHANNELS = 3
TCN_KERNEL = 3
TCN_DILATION = 16


def features(x: Tensor) -> Tensor:
    """TRes-GRU features (§2.4): ``(B, T, 2)`` (a frame per row) → ``(B, T, 6)`` ``[I, Q, |x|, |x|³, I(t+1),
    Q(t+1)]``, bitwise the reference's. The next sample is ``torch.roll(x, -1, dims=1)``: circular within the frame,
    so its last step sees its **first** sample (kept for comparability, §9.6/§9.7)."""
    nxt = torch.roll(x, shifts=-1, dims=1)
    i = x[..., 0]
    q = x[..., 1]
    i_next = nxt[..., 0]
    q_next = nxt[..., 1]
    amp = safe_amplitude(i, q)
    amp3 = amp**3
    return torch.stack([i, q, amp, amp3, i_next, q_next], dim=-1)


class TResGRUBackbone(nn.Module):
    """TRes-GRU backbone (§3.5), all bias-free (the reference ignores its ``bias`` argument); verified bitwise
    (models/base.py).

    Submodules in registration (= RNG = state_dict key) order: ``rnn`` = ``nn.GRU(6, H, num_layers, bias=False,
    batch_first=True)``, ``fc_out`` = ``nn.Linear(H, 2, bias=False)``, ``tcn`` = ``Sequential(Conv1d(2, 3, 3,
    dilation=16, padding=16), Hardswish(), Conv1d(3, 2, 1), Hardswish())``; keys (1 layer) ``rnn.weight_ih_l0,
    rnn.weight_hh_l0, fc_out.weight, tcn.0.weight, tcn.2.weight``. ``reset_parameters`` in another order: the TCN
    convs Xavier-uniform, then in registration order ``weight_ih_l*`` gate-block Xavier (no orthogonal draw first)
    and ``weight_hh_l*`` gate-block orthogonal, then ``fc_out`` Xavier. Parameters: 3H² + 20H + 24 (H = 10 → 524,
    H = 23 → 2,071, H = 27 → 2,751), + 6H² per extra layer. forward(x ``(B, T, 2)``, h0 ``(L, B, H)``) → ``(B, T, 2)``.
    """

    def __init__(self, hidden_size: int, num_layers: int = 1, output_size: int = 2) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.kernel = DEFAULT_KERNEL  # "reference" | "fast" (dpd_desktop/kernels); not in the state_dict
        self.rnn = nn.GRU(input_size=N_FEATURES, hidden_size=hidden_size, num_layers=num_layers, bias=False,
                          batch_first=True, bidirectional=False)
        self.fc_out = nn.Linear(hidden_size, output_size, bias=False)
        self.tcn = nn.Sequential(
            nn.Conv1d(2, TCN_CHANNELS, kernel_size=TCN_KERNEL, dilation=TCN_DILATION, padding=TCN_DILATION,
                      bias=False),
            nn.Hardswish(),
            nn.Conv1d(TCN_CHANNELS, output_size, kernel_size=1, bias=False),
            nn.Hardswish(),
        )

    def reset_parameters(self) -> None:
        """§3.5 init, order TCN convs → GRU (ih Xavier blocks / hh orthogonal blocks, registration order) → head."""
        with torch.no_grad():
            for module in self.tcn:
                if isinstance(module, nn.Conv1d):
                    nn.init.xavier_uniform_(module.weight)
            for name, param in self.rnn.named_parameters():
                if name.startswith("weight_ih"):
                    init_gate_blocks_(param, self.hidden_size, nn.init.xavier_uniform_)
                elif name.startswith("weight_hh"):
                    init_gate_blocks_(param, self.hidden_size, nn.init.orthogonal_)
                else:  # pragma: no cover - the GRU is bias-free
                    param.zero_()
            nn.init.xavier_uniform_(self.fc_out.weight)

    def residual(self, x: Tensor) -> Tensor:
        """Residual TCN path: x ``(B, T, 2)`` → channels-first → ``tcn`` → ``(B, T, 2)`` (length kept by padding 16)."""
        return self.tcn(x.transpose(1, 2)).transpose(1, 2)

    def forward(self, x: Tensor, h0: Tensor) -> Tensor:
        """Recurrent head + TCN residual; the residual first, as the reference: that order fixes how autograd sums
        the gradient contributions reaching ``x`` (bitwise-equal input gradients)."""
        skip = self.residual(x)
        h = run_recurrent(self.rnn, features(x), h0, self.kernel)
        return self.fc_out(h) + skip
