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
    """TRes-GRU features (§2.4): ``[I, Q, |x|, |x|³, I(t+1), Q(t+1)]`` in that order.

    Args:
        x: ``(B, T, 2)`` float32 I/Q (one frame / segment per batch row).
    Returns:
        ``(B, T, 6)`` float32.

    The next-sample pair is ``torch.roll(x, shifts=-1, dims=1)``: a circular shift within the frame, so the last step
    of a frame sees the frame's **first** sample — kept for comparability with the reference, §9.6/§9.7.
    ``|x| = sqrt(I² + Q²)`` (NaN-free gradient at 0, identical forward, see ``safe_amplitude``); ``|x|³ = pow(|x|, 3)``.
    Same arithmetic as the reference (|x| via ``pow(·, 2)`` + ``sqrt``, ``|x|³`` via ``pow``); the operations are
    created in the reference's order (roll, I/Q selections, |x|, |x|³) — measured not to matter on its own, unlike the
    residual-path-first order in :meth:`TResGRUBackbone.forward`. Features, outputs and gradients are verified bitwise
    against OpenDPD 2.2.1 (tests/unit/test_models_vs_reference.py).
    """
    nxt = torch.roll(x, shifts=-1, dims=1)
    i = x[..., 0]
    q = x[..., 1]
    i_next = nxt[..., 0]
    q_next = nxt[..., 1]
    amp = safe_amplitude(i, q)
    amp3 = amp**3
    return torch.stack([i, q, amp, amp3, i_next, q_next], dim=-1)


class TResGRUBackbone(nn.Module):
    """TRes-GRU backbone (§3.5). Everything is bias-free (the reference ignores its ``bias`` argument).

    Submodules, in registration (= default-init RNG = state_dict key) order, as in the reference:
    ``rnn`` = ``nn.GRU(6, H, num_layers, bias=False, batch_first=True)``, ``fc_out`` = ``nn.Linear(H, 2, bias=False)``,
    ``tcn`` = ``nn.Sequential(Conv1d(2, 3, 3, dilation=16, padding=16, bias=False), Hardswish(),
    Conv1d(3, 2, 1, bias=False), Hardswish())``. state_dict keys (1 layer): ``rnn.weight_ih_l0, rnn.weight_hh_l0,
    fc_out.weight, tcn.0.weight, tcn.2.weight``.

    Custom init (``reset_parameters``) — its order differs from the registration order: first the TCN conv weights
    (``tcn.0`` then ``tcn.2``) Xavier-uniform (fans from PyTorch: conv1 fan_in 6 / fan_out 9, conv2 3 / 2); then the
    GRU parameters in registration order — input weights ``weight_ih_l*`` (all layers) gate-block Xavier-uniform (no
    orthogonal draw first), hidden weights ``weight_hh_l*`` gate-block orthogonal; finally ``fc_out`` Xavier-uniform.

    Verified bitwise against OpenDPD 2.2.1 (CPU, float32; tests/unit/test_models_vs_reference.py): state_dict keys,
    key order and values after the same ``torch.manual_seed``, the RNG state afterwards, the forward output and the
    input/parameter gradients (the residual path is evaluated first, as in the reference, see :meth:`forward`).

    Parameters (1 layer): 3H² + 20H + 24 (H = 10 → 524, H = 23 → 2,071, H = 27 → 2,751); extra layer: + 6H².

    forward(x ``(B, T, 2)`` float32, h0 ``(L, B, H)``) → ``(B, T, 2)``.
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
        """x ``(B, T, 2)``, h0 ``(L, B, H)`` → recurrent head + TCN residual, ``(B, T, 2)``.

        The residual path is computed *before* the features, as in the reference: that fixes the autograd order in
        which the gradient contributions reaching ``x`` are summed (bitwise-equal input gradients).
        """
        skip = self.residual(x)
        h = run_recurrent(self.rnn, features(x), h0, self.kernel)
        return self.fc_out(h) + skip
