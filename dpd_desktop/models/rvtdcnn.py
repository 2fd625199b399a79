"""RVTDCNN family: real-valued time-delay CNN, IEEE 9352501 (reference §2.4, §3.6, quirk §9.6).

Per step t: a 4 × 5 window of features of samples t−3 … t → 1-channel image → ``Conv2d(1, 3, 3×3, padding (1, 0))``
→ tanh → 3 × 4 × 3 = 36 → ``Linear(36, H)`` → tanh → ``Linear(H, 2)``. No recurrence; ``num_layers`` and ``h0`` are
ignored; PyTorch default initialization only (no ``reset_parameters``).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .base import safe_sqrt

__all__ = ["RVTDCNNBackbone", "features", "windows"]

N_FEATURES = 5
WINDOW = 4  # hard-wired in the reference (--window_size is not passed, §3.6)
CONV_CHANNELS = 3
CONV_OUT = CONV_CHANNELS * WINDOW * (N_FEATURES - 2)  # 3 × 4 × 3 = 36


def features(x: Tensor) -> Tensor:
    """RVTDCNN per-step features (§2.4): ``(B, T, 2)`` → ``(B, T, 5)`` ``[I, Q, |x|, |x|², |x|³]``, the reference's
    arithmetic: ``|x|²`` is ``pow(I, 2) + pow(Q, 2)`` itself, not ``sqrt(·)²`` (they differ in the last bit)."""
    i = x[..., 0]
    q = x[..., 1]
    amp2 = i**2 + q**2
    amp = safe_sqrt(amp2)
    amp3 = amp**3
    return torch.stack([i, q, amp, amp2, amp3], dim=-1)


def windows(f: Tensor, window: int = WINDOW) -> Tensor:
    """Per-step memory windows with circular pre-padding (§3.6): ``(B, T, F)`` → ``(B, T, window, F)``, ``out[b, t,
    k] = f[b, (t − (window−1) + k) mod T]`` (row 0 the oldest sample). The frame's own last ``window − 1`` samples
    pad its start, so its first outputs depend on its last samples (kept for comparability, §9.6/§9.7); built by
    ``unfold``, whose backward sums the overlapping windows' gradients in the reference's order. Raises ValueError
    when T < window − 1."""
    if f.shape[1] < window - 1:
        raise ValueError(f"RVTDCNN needs at least {window - 1} time steps per frame, got {f.shape[1]}")
    padded = torch.cat([f[:, f.shape[1] - (window - 1):], f], dim=1)  # (B, T + w − 1, F)
    return padded.unfold(1, window, 1).transpose(2, 3)  # (B, T, F, w) → (B, T, w, F)


class RVTDCNNBackbone(nn.Module):
    """RVTDCNN backbone (§3.6); verified bitwise (models/base.py) for inputs without a zero sample.

    Submodules in registration (= RNG = state_dict key) order: ``Conv2d`` = ``nn.Conv2d(1, 3, 3, padding (1, 0))``
    (the reference checkpoints' spelling: keys ``Conv2d.weight``, ``Conv2d.bias``), ``fc_hid`` = ``nn.Linear(36,
    H)``, ``fc_out`` = ``nn.Linear(H, 2)``; the conv outputs flattened channel-major; PyTorch's default inits only.
    Parameters: 39H + 32 (H = 23 → 929). forward(x ``(B, T, 2)``, h0 ignored) → ``(B, T, 2)``.
    """

    def __init__(self, hidden_size: int, num_layers: int = 1, output_size: int = 2) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers  # ignored (§3.6)
        self.Conv2d = nn.Conv2d(1, CONV_CHANNELS, kernel_size=3, stride=1, padding=(1, 0), bias=True)  # noqa: N815
        self.fc_hid = nn.Linear(CONV_OUT, hidden_size, bias=True)
        self.fc_out = nn.Linear(hidden_size, output_size, bias=True)

    def forward(self, x: Tensor, h0: Tensor | None = None) -> Tensor:
        """x ``(B, T, 2)`` (h0 ignored) → ``(B, T, 2)``."""
        b, t, _ = x.shape
        w = windows(features(x))  # (B, T, 4, 5)
        c = torch.tanh(self.Conv2d(w.reshape(b * t, 1, WINDOW, N_FEATURES)))  # (B*T, 3, 4, 3)
        h = torch.tanh(self.fc_hid(c.reshape(b * t, CONV_OUT)))  # (B*T, H)
        return self.fc_out(h).reshape(b, t, -1)
