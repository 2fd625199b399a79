"""TCN family: a small non-causal temporal convolutional network with an I/Q residual.

As OpenDPD 2.4.2 defines it [backbones/tcn.py of its wheel; registry key ``tcn``, hidden size = channels C]:

* features f(t) = [I, Q, |x|, |x|³, Q/|x|, I/|x|] (a zero sample gets sin = cos = 0);
* Conv1d 6 → C (k 1, bias) → Hardswish, then four depthwise Conv1d C → C (k 5, groups C, no bias) with dilations
  1, 2, 4, 8 and padding 2·d (length kept, centred) each followed by Hardswish, then Conv1d C → 2 (k 1, no bias);
* output = network(f) + [I, Q] (residual on the input).

No custom initializer: PyTorch's default conv inits. Non-causal: each output reads 2·(1 + 2 + 4 + 8) = 30 samples
before and after it (30 samples of look-ahead). Parameters: 29·C (C = 17 → 493, C = 34 → 986).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from .base import safe_amplitude

__all__ = ["DILATIONS", "KERNEL", "TCNBackbone", "features"]

N_FEATURES = 6
KERNEL = 5
DILATIONS = (1, 2, 4, 8)


def features(x: Tensor) -> Tensor:
    """``(B, T, 2)`` → ``(B, T, 6)`` ``[I, Q, |x|, |x|³, Q/|x|, I/|x|]`` (cos φ formed before sin φ, 2.4.2's order)."""
    i = x[..., 0]
    q = x[..., 1]
    amp = safe_amplitude(i, q)
    amp3 = amp**3
    den = torch.where(amp == 0, torch.ones_like(amp), amp)
    cos_phi = i / den
    sin_phi = q / den
    return torch.stack([i, q, amp, amp3, sin_phi, cos_phi], dim=-1)


class TCNBackbone(nn.Module):
    """TCN backbone (module docstring). ``network`` is an ``nn.Sequential`` with 2.4.2's layout (state_dict keys
    ``network.0.weight, network.0.bias, network.2/4/6/8.weight`` (depthwise), ``network.10.weight``).
    ``num_layers`` is ignored.

    forward(x ``(B, T, 2)`` float32, h0 ignored) → ``(B, T, 2)``.
    """

    def __init__(self, hidden_size: int, num_layers: int = 1, output_size: int = 2) -> None:
        super().__init__()
        c = hidden_size
        self.hidden_size = c
        layers: list[nn.Module] = [nn.Conv1d(N_FEATURES, c, kernel_size=1), nn.Hardswish()]
        for d in DILATIONS:
            layers += [nn.Conv1d(c, c, KERNEL, padding=(KERNEL - 1) // 2 * d, dilation=d, groups=c, bias=False),
                       nn.Hardswish()]
        layers.append(nn.Conv1d(c, output_size, kernel_size=1, bias=False))
        self.network = nn.Sequential(*layers)

    def forward(self, x: Tensor, h0: Tensor | None = None) -> Tensor:
        f = features(x)
        residual = f[..., :2]  # [I, Q] through the features' own selections: 2.4.2's autograd order (bitwise grads)
        return self.network(f.transpose(1, 2)).transpose(1, 2) + residual
