"""DPD → PA cascade for direct-learning DPD training through a frozen PA surrogate (reference §5.1)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .base import CoreModel

__all__ = ["Cascade"]


class Cascade(nn.Module):
    """``y_hat = pa(dpd(x))`` (§5.1 step 3).

    Submodules, registered in this order: ``dpd`` then ``pa`` (so ``parameters()`` yields DPD parameters first and
    state_dict keys are ``dpd.backbone.…`` then ``pa.backbone.…``).

    * :meth:`freeze_pa` sets ``requires_grad = False`` on every PA parameter (§5.1 step 4). The PA is *not* put in eval
      mode separately: it follows the cascade's ``train()`` / ``eval()`` like any submodule (harmless, none of the
      backbones has dropout or batch-norm). Gradients still flow *through* the PA to the DPD (§5.1 step 5).
    * ``peak_limit`` (optional): the DPD output's magnitude limit before the PA (:meth:`limit`).

    forward(x ``(B, T, 2)`` float32) → ``(B, T, 2)`` float32.
    """

    def __init__(self, dpd: CoreModel, pa: CoreModel, peak_limit: float | None = None) -> None:
        super().__init__()
        self.dpd = dpd
        self.pa = pa
        self.peak_limit = None if peak_limit is None else float(peak_limit)

    def freeze_pa(self) -> "Cascade":
        """Set ``requires_grad = False`` on all PA parameters (in place); returns ``self``."""
        for p in self.pa.parameters():
            p.requires_grad_(False)
        return self

    def limit(self, u: Tensor) -> Tensor:
        """The transmitter's peak limiter on the DPD output: ``u·min(1, peak/|u|)`` per sample (|u| floored at 1e-12;
        OpenDPD 2.4.2 Arena's limiter, peak = the largest training-input magnitude); ``u`` itself without a limit."""
        if self.peak_limit is None:
            return u
        amp = torch.linalg.vector_norm(u, dim=-1, keepdim=True)
        return u * torch.clamp(self.peak_limit / amp.clamp_min(1e-12), max=1.0)

    def forward(self, x: Tensor) -> Tensor:
        """x ``(B, T, 2)`` → ``pa(limit(dpd(x)))`` ``(B, T, 2)`` (no limit by default: ``pa(dpd(x))``)."""
        if self.peak_limit is None:
            return self.pa(self.dpd(x))
        return self.pa(self.limit(self.dpd(x)))
