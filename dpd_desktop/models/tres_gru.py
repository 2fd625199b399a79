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

from .base import init_gate_blocks_, safe_amplitude

__all__ = ["TResGRUBackbone", "features"]

N_FEATURES = 6
TCN_CHANNELS = 3
TCN_KERNEL = 3
TCN_DILATION = 16


def features(x: Tensor) -> Tensor:
    """TRes-GRU features (§2.4): ``[I, Q, |x|, |x|³, I(t+1), Q(t+1)]`` in that order.

    Args:
        x: ``(B, T, 2)`` float32 I/Q (one frame / segment per batch row).
    Returns:
        ``(B, T, 6)`` float32.

    The next-sample pair is ``torch.roll(x, shifts=-1, dims=1)``: a circular shift within the frame, so the last step
    of a frame sees the frame's **first** sample — kept for comparability with the reference, §9.6/§9.7.
    ``|x|`` is ``sqrt(I² + Q²)`` (NaN-free gradient at 0, identical forward, see ``safe_amplitude``); ``|x|³`` is
    ``|x| ** 3`` (exact reference expression not verified bitwise).
    """
    i = x[..., 0]
    q = x[..., 1]
    amp = safe_amplitude(i, q)
    nxt = torch.roll(x, shifts=-1, dims=1)
    return torch.stack([i, q, amp, amp**3, nxt[..., 0], nxt[..., 1]], dim=-1)


class TResGRUBackbone(nn.Module):
    """TRes-GRU backbone (§3.5). Everything is bias-free (the reference ignores its ``bias`` argument).

    Submodules, in registration (= default-init RNG) order — our choice, following the §3.5 description order,
    **not verified bitwise against the reference**:
    ``rnn`` = ``nn.GRU(6, H, num_layers, bias=False, batch_first=True)``, ``fc_out`` = ``nn.Linear(H, 2, bias=False)``,
    ``tcn_conv1`` = ``nn.Conv1d(2, 3, 3, dilation=16, padding=16, bias=False)``, ``tcn_conv2`` =
    ``nn.Conv1d(3, 2, 1, bias=False)`` (Hardswish after each conv, no parameters).

    Custom init (``reset_parameters``), visiting modules in the same registration order (order also our choice):
    GRU parameters in registration order — input weights ``weight_ih_l*`` (all layers) gate-block Xavier-uniform
    (no orthogonal draw first), hidden weights ``weight_hh_l*`` gate-block orthogonal; ``fc_out`` Xavier-uniform;
    both conv weights Xavier-uniform (fans from PyTorch: conv1 fan_in 6 / fan_out 9, conv2 3 / 2).

    Parameters (1 layer): 3H² + 20H + 24 (H = 10 → 524, H = 23 → 2,071, H = 27 → 2,751); extra layer: + 6H².

    forward(x ``(B, T, 2)`` float32, h0 ``(L, B, H)``) → ``(B, T, 2)``.
    """

    def __init__(self, hidden_size: int, num_layers: int = 1, output_size: int = 2) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.rnn = nn.GRU(input_size=N_FEATURES, hidden_size=hidden_size, num_layers=num_layers, bias=False,
                          batch_first=True, bidirectional=False)
        self.fc_out = nn.Linear(hidden_size, output_size, bias=False)
        self.tcn_conv1 = nn.Conv1d(2, TCN_CHANNELS, kernel_size=TCN_KERNEL, dilation=TCN_DILATION,
                                   padding=TCN_DILATION, bias=False)
        self.tcn_conv2 = nn.Conv1d(TCN_CHANNELS, output_size, kernel_size=1, bias=False)
        self.act = nn.Hardswish()

    def reset_parameters(self) -> None:
        """§3.5 init (order = registration order, our choice): GRU ih Xavier blocks / hh orthogonal blocks,
        head Xavier, conv weights Xavier."""
        with torch.no_grad():
            for name, param in self.rnn.named_parameters():
                if name.startswith("weight_ih"):
                    init_gate_blocks_(param, self.hidden_size, nn.init.xavier_uniform_)
                elif name.startswith("weight_hh"):
                    init_gate_blocks_(param, self.hidden_size, nn.init.orthogonal_)
                else:  # pragma: no cover - the GRU is bias-free
                    param.zero_()
            nn.init.xavier_uniform_(self.fc_out.weight)
            nn.init.xavier_uniform_(self.tcn_conv1.weight)
            nn.init.xavier_uniform_(self.tcn_conv2.weight)

    def tcn(self, x: Tensor) -> Tensor:
        """Residual path: x ``(B, T, 2)`` → ``(B, T, 2)`` (length preserved by padding 16)."""
        y = self.act(self.tcn_conv1(x.transpose(1, 2)))
        y = self.act(self.tcn_conv2(y))
        return y.transpose(1, 2)

    def forward(self, x: Tensor, h0: Tensor) -> Tensor:
        """x ``(B, T, 2)``, h0 ``(L, B, H)`` → recurrent head + TCN residual, ``(B, T, 2)``."""
        h, _ = self.rnn(features(x), h0)
        return self.fc_out(h) + self.tcn(x)
