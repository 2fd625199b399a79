"""The training loss of a run: the reference's MSE/L1 (``loss``), or that loss on a window of each frame and/or with
an output-power term (``loss_window``, ``power_weight``). :func:`make_criterion` returns ``nn.MSELoss()`` /
``nn.L1Loss()`` themselves for the default settings (bitwise the reference), else a :class:`FrameLoss`:

    loss = base(ŷ[:, a:b], t[:, a:b]) + w · mean(t[:, a:b]²) · ΔP²,   ΔP = 10·log10(Σ ŷ[:, a:b]² / Σ t[:, a:b]²) [dB]

over the batch; ``[a, b)`` the window (OpenDPD 2.4.2's Arena scores the middle 100 samples of 200-sample frames).
The power term holds the DPD at the target's output power instead of backing off (the ±0.5 dB gate of OpenDPD's
Arena); w = 1e-4 makes a 0.5 dB power error cost as much as an error vector at −46 dB.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["FrameLoss", "base_criterion", "make_criterion"]


class FrameLoss(nn.Module):
    """``base`` (an ``nn.MSELoss``/``nn.L1Loss``, mean) on frame samples ``window`` = (start, stop) (None: all), plus
    the power term with weight ``power_weight`` (module docstring). Inputs ``(B, T, 2)``; returns a 0-dim tensor."""

    def __init__(self, base: nn.Module, window: tuple[int, int] | None = None, power_weight: float = 0.0) -> None:
        super().__init__()
        self.base = base
        self.window = None if window is None else (int(window[0]), int(window[1]))
        self.power_weight = float(power_weight)

    def forward(self, out: Tensor, target: Tensor) -> Tensor:
        if self.window is not None:
            a, b = self.window
            out, target = out[:, a:b], target[:, a:b]
        loss = self.base(out, target)
        if self.power_weight:
            p_t = target.square().sum()
            ratio_db = 10.0 * torch.log10(out.square().sum() / p_t)
            loss = loss + self.power_weight * (p_t / target.numel()) * ratio_db.square()
        return loss

    def extra_repr(self) -> str:
        return f"window={self.window}, power_weight={self.power_weight}"


def make_criterion(cfg) -> nn.Module:
    """The training loss of ``cfg`` (an ExperimentConfig): module docstring."""
    base = nn.MSELoss() if cfg.loss == "l2" else nn.L1Loss()
    if cfg.loss_window is None and not cfg.power_weight:
        return base
    return FrameLoss(base, tuple(cfg.loss_window) if cfg.loss_window is not None else None, cfg.power_weight)


def base_criterion(criterion: nn.Module) -> nn.Module:
    """The plain MSE/L1 of a training loss (what val/test losses are computed with: whole segments, no window)."""
    return criterion.base if isinstance(criterion, FrameLoss) else criterion
