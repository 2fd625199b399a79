"""How a DPD learns (``ExperimentConfig.dpd_learning``): ``direct`` is the trainer's plain step, loss(PA(DPD(x)),
g·x) through the frozen PA (reference §5.1); ``ila`` is the indirect learning architecture (Eun & Powers, IEEE
Trans. Signal Processing 1997; Morgan et al., IEEE Trans. Signal Processing 2006), here through the PA model:

    u = DPD(x) (no gradient; the identity u = x in the first epoch, ILA's usual start), y = PA(limit(u)),
    loss = criterion(DPD(y / g), u)

The network learns a post-inverse of the gain-normalised PA and serves, with the same weights, as the predistorter;
validation and selection score PA(DPD(x)) against g·x as for direct learning. ILA needs no gradient through the PA
but is biased where the post-inverse is not the pre-inverse (noise on y, memory effects).
"""
from __future__ import annotations

import torch

__all__ = ["IDENTITY_EPOCHS", "ila_loss"]

#: epochs at the start whose ILA pairs come from the identity predistorter u = x
IDENTITY_EPOCHS = 1


def ila_loss(net, xb: torch.Tensor, gain: float, criterion, epoch: int) -> torch.Tensor:
    """One ILA batch loss of ``net`` (a Cascade with a frozen PA) on input frames ``xb`` ``(B, T, 2)``."""
    with torch.no_grad():
        u = xb if epoch < IDENTITY_EPOCHS else net.dpd(xb)
        u = net.limit(u)
        post_in = net.pa(u) / gain
    return criterion(net.dpd(post_in), u)
