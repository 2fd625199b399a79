"""Common model wrapper and shared initialization / feature helpers.

Behavioral source: ``../shared/reference/opendpd-reference.md`` (OpenDPD 2.2.1 spec), sections 2.4, 2.5, 3.1 and 3.2.
Nothing here is copied from OpenDPD; the code re-implements the documented behavior.

Conventions used by every family in this package:

* Input ``x``: ``(B, T, 2)`` float32, batch-first, columns ``(I, Q)``.
* Output: ``(B, T, 2)`` float32 ``(I, Q)``; no output activation (§3.1).
* Every backbone exposes ``forward(x, h0)``; ``h0`` is ``(num_layers, B, H)`` zeros built by :class:`CoreModel`
  (§2.5). Backbones with a custom initializer expose it as ``reset_parameters()``; the wrapper calls it right after
  construction (§3.1). A backbone *without* that method keeps PyTorch's default initialization (RVTDCNN, §3.6).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

__all__ = [
    "CoreModel",
    "count_parameters",
    "init_gate_blocks_",
    "init_recurrent_gate_blocks_",
    "init_linear_xavier_",
    "safe_amplitude",
    "safe_sqrt",
]


# ---------------------------------------------------------------------------------------------------------------------
# Feature helpers (§2.4)
# ---------------------------------------------------------------------------------------------------------------------

def safe_sqrt(p: Tensor) -> Tensor:
    """Return ``sqrt(p)`` for ``p >= 0`` with a NaN-free gradient at ``p == 0`` (§2.4).

    Args:
        p: non-negative tensor of any shape (typically ``I² + Q²``), float32.

    Returns:
        Tensor of the same shape and dtype, bitwise equal to ``torch.sqrt(p)`` for every input (including 0, because
        ``sqrt(0) = 0``; NaN stays NaN because ``NaN != 0``).

    Only the backward differs, and only where ``p == 0``: plain ``sqrt`` gives ``grad / (2·0) = inf`` there (which
    becomes NaN after the chain rule through ``I²``), this helper gives 0 (a valid subgradient of ``|x|``). For every
    element with ``p != 0`` the gradient is bitwise identical (``torch.where`` passes the gradient through unchanged).
    Deviation from the reference (which has the NaN gradient at an exactly-zero sample) documented as a fix.
    """
    nonzero = p != 0
    return torch.where(nonzero, torch.sqrt(torch.where(nonzero, p, torch.ones_like(p))), torch.zeros_like(p))


def safe_amplitude(i: Tensor, q: Tensor) -> Tensor:
    """Return ``|x| = sqrt(I² + Q²)`` with a NaN-free gradient at ``|x| = 0`` (§2.4).

    Args:
        i, q: tensors of identical shape (any shape, e.g. ``(B, T)``), float32.

    Returns:
        Tensor of the same shape and dtype: ``sqrt(I**2 + Q**2)`` (squares via ``pow(·, 2)``, then one addition,
        the reference's arithmetic order), computed through :func:`safe_sqrt`.

    The forward value is bitwise identical to ``torch.sqrt(i**2 + q**2)`` for every input; the backward differs only
    where ``I² + Q² == 0`` in the working precision (0 instead of NaN). For every sample with ``I² + Q² > 0`` the
    gradient is bitwise identical as well — checked against the reference in tests/unit/test_models_vs_reference.py.
    """
    return safe_sqrt(i**2 + q**2)


# ---------------------------------------------------------------------------------------------------------------------
# Initialization helpers (§3.2)
# ---------------------------------------------------------------------------------------------------------------------

def init_gate_blocks_(weight: Tensor, hidden_size: int, init_fn: Callable[[Tensor], Tensor]) -> Tensor:
    """Apply ``init_fn`` in place to each ``hidden_size``-row gate block of ``weight``, in block order (§3.2).

    Args:
        weight: recurrent weight ``(G*H, C)`` (G = 3 for GRU gates r, z, n; G = 4 for LSTM gates i, f, g, o).
        hidden_size: H, the number of rows per gate block.
        init_fn: an in-place ``torch.nn.init`` function (e.g. ``nn.init.orthogonal_``, ``nn.init.xavier_uniform_``)
            applied to each ``(H, C)`` block view separately, so fan_in = C and fan_out = H for Xavier.

    The blocks are visited in order 0 .. G-1, each consuming the global torch RNG as ``init_fn`` on an ``(H, C)``
    tensor does (orthogonal: one ``(H, C)`` standard-normal draw then QR; Xavier: one ``(H, C)`` uniform draw).
    """
    rows = weight.shape[0]
    if rows % hidden_size != 0:
        raise ValueError(f"weight rows {rows} are not a multiple of hidden_size {hidden_size}")
    with torch.no_grad():
        for g in range(rows // hidden_size):
            init_fn(weight[g * hidden_size:(g + 1) * hidden_size])
    return weight


def init_recurrent_gate_blocks_(rnn: nn.RNNBase, hidden_size: int) -> None:
    """The §3.2 recurrent initializer shared by the GRU, LSTM and DGRU families (in place).

    Visits ``rnn.named_parameters()`` once in registration order (``weight_ih_l0, weight_hh_l0, bias_ih_l0,
    bias_hh_l0, weight_ih_l1, ...``):

    * bias → zeros (no RNG use);
    * weight → ``orthogonal_`` on each H-row gate block in gate order;
    * ``weight_ih_l0`` only → then, immediately after its own orthogonal blocks (before ``weight_hh_l0``),
      ``xavier_uniform_`` on each gate block (fan_in = input size, fan_out = H, bound √(6/(in + H))).
      The orthogonal draws for ``weight_ih_l0`` are consumed even though they are overwritten (§3.2).
      Input weights of layers ≥ 1 keep their orthogonal init.

    Args:
        rnn: an ``nn.GRU`` or ``nn.LSTM`` (float32 parameters).
        hidden_size: H.
    """
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


# ---------------------------------------------------------------------------------------------------------------------
# Wrapper (§3.1, §2.5)
# ---------------------------------------------------------------------------------------------------------------------

def count_parameters(model: nn.Module) -> int:
    """Total number of scalar parameters of ``model`` (trainable or frozen), as counted by the reference (§3.1)."""
    return int(sum(p.numel() for p in model.parameters()))


class CoreModel(nn.Module):
    """Common wrapper around one backbone (reference §3.1, §2.5).

    Attributes:
        backbone: the family module (registered under the name ``backbone`` so state_dict keys are
            ``backbone.<...>`` exactly as in the reference checkpoints, §3.2).
        backbone_name: registry key (``"gru"``, ``"dgru"``, ``"lstm"``, ``"tres_gru"``, ``"rvtdcnn"``).
        hidden_size: H.
        num_layers: recurrent layers (RVTDCNN ignores it, §3.6).
        input_size: always 2 (I, Q columns; DGRU/TRes-GRU build 6 features internally, §3.1).
        output_size: always 2 (I, Q).

    Construction: the backbone is constructed by the caller (PyTorch default inits, consuming the global RNG in its
    module registration order); this wrapper then calls ``backbone.reset_parameters()`` if the backbone defines one
    (§3.1). Use :func:`dpd_desktop.models.build_model` rather than calling this directly.

    Forward: ``x`` ``(B, T, 2)`` → zero ``h0`` ``(num_layers, B, H)`` on ``x``'s device/dtype, rebuilt every call →
    ``backbone(x, h0)`` → ``(B, T, 2)``.
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
