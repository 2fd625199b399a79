"""Common model wrapper and shared initialization / feature helpers (OpenDPD 2.2.1 reference §2.4, §2.5, §3.1, §3.2;
re-implemented from the documented behaviour).

Every family: input ``x`` ``(B, T, 2)`` float32, batch first, columns (I, Q); output the same, no output activation
(§3.1); the backbone's ``forward(x, h0)`` gets ``h0`` ``(num_layers, B, H)`` zeros from :class:`CoreModel` (§2.5).
A backbone's custom initializer is its ``reset_parameters()``, called right after construction (§3.1); without one
PyTorch's default initialization stays (RVTDCNN, §3.6).

"Verified bitwise" in a family's docstring: against OpenDPD 2.2.1 on the CPU in float32
(tests/unit/test_models_vs_reference.py): state_dict keys, their order and values after the same
``torch.manual_seed``, the RNG state afterwards, the forward output and the input and parameter gradients.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

__all__ = ["CoreModel", "count_parameters", "init_gate_blocks_", "init_recurrent_gate_blocks_", "init_linear_xavier_",
           "safe_amplitude", "safe_sqrt"]


def safe_sqrt(p: Tensor) -> Tensor:
    """``sqrt(p)`` of a non-negative tensor (typically ``I² + Q²``), bitwise equal to ``torch.sqrt(p)`` (NaN stays
    NaN). Only the gradient at ``p == 0`` differs: 0 (a subgradient of |x|) where plain ``sqrt`` gives inf and then
    NaN through ``I²``; elsewhere it is bitwise identical. A documented fix of the reference's NaN at a zero sample
    (§2.4)."""
    nonzero = p != 0
    return torch.where(nonzero, torch.sqrt(torch.where(nonzero, p, torch.ones_like(p))), torch.zeros_like(p))


def safe_amplitude(i: Tensor, q: Tensor) -> Tensor:
    """``|x| = sqrt(I**2 + Q**2)`` (the reference's arithmetic order) through :func:`safe_sqrt`: bitwise the
    reference's value and, where ``I² + Q² > 0``, its gradient; 0 instead of NaN where it is 0 (§2.4)."""
    return safe_sqrt(i**2 + q**2)


def init_gate_blocks_(weight: Tensor, hidden_size: int, init_fn: Callable[[Tensor], Tensor]) -> Tensor:
    """Apply the in-place ``torch.nn.init`` function ``init_fn`` to each ``(H, C)`` gate block of ``weight``
    ``(G*H, C)`` (G = 3 for the GRU's r, z, n; 4 for the LSTM's i, f, g, o), in block order, each drawing from the
    global torch RNG as on an ``(H, C)`` tensor (Xavier: fan_in = C, fan_out = H) (§3.2)."""
    rows = weight.shape[0]
    if rows % hidden_size != 0:
        raise ValueError(f"weight rows {rows} are not a multiple of hidden_size {hidden_size}")
    with torch.no_grad():
        for g in range(rows // hidden_size):
            init_fn(weight[g * hidden_size:(g + 1) * hidden_size])
    return weight


def init_recurrent_gate_blocks_(rnn: nn.RNNBase, hidden_size: int) -> None:
    """The §3.2 recurrent initializer of the GRU-like families, in place on an ``nn.GRU``/``nn.LSTM``: in
    registration order, biases → zeros; weights → ``orthogonal_`` per gate block; ``weight_ih_l0`` then also
    ``xavier_uniform_`` per gate block right after its own orthogonal draws (which are consumed, though overwritten);
    input weights of layers ≥ 1 keep their orthogonal init."""
    with torch.no_grad():
        for name, param in rnn.named_parameters():
            if name.startswith("bias"):
                param.zero_()
                continue
            init_gate_blocks_(param, hidden_size, nn.init.orthogonal_)
            if name == "weight_ih_l0":
                init_gate_blocks_(param, hidden_size, nn.init.xavier_uniform_)


def init_linear_xavier_(linear: nn.Linear) -> None:
    """Xavier-uniform on the whole ``linear.weight`` matrix (one draw), zero bias if present (§3.2 step 3)."""
    with torch.no_grad():
        nn.init.xavier_uniform_(linear.weight)
        if linear.bias is not None:
            linear.bias.zero_()


def count_parameters(model: nn.Module) -> int:
    """Total number of scalar parameters of ``model`` (trainable or frozen), as counted by the reference (§3.1)."""
    return int(sum(p.numel() for p in model.parameters()))


class CoreModel(nn.Module):
    """Common wrapper around one backbone (§3.1, §2.5); build it with :func:`dpd_desktop.models.build_model`.

    ``backbone`` is registered under that name, so state_dict keys are ``backbone.<...>`` as in the reference
    checkpoints (§3.2); ``backbone_name`` is the registry key; ``input_size`` and ``output_size`` are 2 (I, Q).
    The caller constructs the backbone (PyTorch's default inits); the wrapper then calls its ``reset_parameters()``
    if it has one. ``forward``: zero ``h0`` ``(num_layers, B, H)`` on x's device and dtype, then ``backbone(x, h0)``.
    """

    input_size: int = 2
    output_size: int = 2

    def __init__(self, backbone: nn.Module, backbone_name: str, hidden_size: int, num_layers: int = 1) -> None:
        super().__init__()
        self.backbone_name = backbone_name
        self.hidden_size = int(hidden_size)
        self.num_layers = int(num_layers)
        self.input_size = 2
        self.output_size = 2
        self.backbone = backbone
        init = getattr(self.backbone, "reset_parameters", None)
        if callable(init):
            init()

    def forward(self, x: Tensor) -> Tensor:
        """``x`` ``(B, T, 2)`` float32 → ``(B, T, 2)`` float32 (§3.1)."""
        if x.dim() != 3 or x.shape[-1] != 2:
            raise ValueError(f"expected input of shape (batch, time, 2), got {tuple(x.shape)}")
        h0 = torch.zeros(self.num_layers, x.shape[0], self.hidden_size, device=x.device, dtype=x.dtype)
        return self.backbone(x, h0)

    def extra_repr(self) -> str:
        return f"backbone_name={self.backbone_name!r}, hidden_size={self.hidden_size}, num_layers={self.num_layers}"
