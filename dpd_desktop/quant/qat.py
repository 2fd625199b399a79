"""The model that quantisation-aware training trains: a DPD run through the fake-quantisation backend.

:class:`FakeQuantModel` holds the same ``backbone`` module as the :class:`~dpd_desktop.models.base.CoreModel` it is
made from, so its state_dict has the same keys (``backbone.…``) and its checkpoints load into a plain model of the
family. Its forward lowers the model (quant/lower.py) and runs the graph in
:class:`~dpd_desktop.quant.backends.FakeBackend` with the plan's activation formats: the forward is the integer
reference's arithmetic (bit for bit in float64, to float32 rounding of the wide words in float32), the backward
straight-through (quant/backends.py).
"""
from __future__ import annotations

from torch import Tensor, nn

from .backends import FakeBackend
from .lower import lower
from .plan import QuantPlan

__all__ = ["FakeQuantModel"]


class FakeQuantModel(nn.Module):
    """forward(x ``(B, T, 2)``) → ``(B, T, 2)``: the fake-quantised model (module docstring).

    Args:
        core: the float model (its ``backbone`` is taken over, not copied).
        plan: the activation formats and bit widths (quant/plan.py).
    """

    def __init__(self, core: nn.Module, plan: QuantPlan) -> None:
        super().__init__()
        self.backbone_name = core.backbone_name
        self.hidden_size = core.hidden_size
        self.num_layers = core.num_layers
        self.input_size, self.output_size = 2, 2
        self.backbone = core.backbone
        self.plan = plan
        lower(self)  # refuses a family without a lowering now, not at the first batch

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() != 3 or x.shape[-1] != 2:
            raise ValueError(f"expected input of shape (batch, time, 2), got {tuple(x.shape)}")
        return lower(self).run(FakeBackend(self.plan), x)

    def extra_repr(self) -> str:
        return f"backbone_name={self.backbone_name!r}, fake quantisation {self.plan.spec.label}"

