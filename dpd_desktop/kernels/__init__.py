"""Recurrence kernels: the per-run ``kernel`` setting (``reference`` | ``fast``) and its dispatch.

``reference`` runs ``torch.nn.GRU`` / ``torch.nn.LSTM`` themselves (cuDNN on CUDA, TF32 where PyTorch's defaults
allow it): bitwise equal to OpenDPD 2.2.1. ``fast`` runs our own sequence-level kernels with PyTorch's gate
equations and the same parameters (checkpoints are interchangeable): ``cuda_rnn`` on CUDA, ``cpu_rnn`` on the CPU.
A shape or device the fast kernels do not support falls back to the reference recurrence with a reason
(:func:`unsupported_reason`), which the trainer logs and records.

Interface (shapes float32, batch first):
- ``run_recurrent(rnn, x (B, T, I), h0 (L, B, H), kernel) -> (B, T, H)``: the output sequence of the last layer;
  for an LSTM, ``h0`` is used as both h0 and c0 (reference §2.5).
- ``unsupported_reason(rnn, device) -> str | None``.
- ``apply_kernel(net, kernel, device) -> list[str]``: sets every recurrent backbone of ``net`` (a cascade's DPD and
  PA too) to ``kernel``; returns the notes to log (one per fallback, with its reason).
"""
from __future__ import annotations

from torch import Tensor, nn

from ..config import KERNELS

DEFAULT_KERNEL = KERNELS[0]
__all__ = ["KERNELS", "DEFAULT_KERNEL", "apply_kernel", "run_recurrent", "unsupported_reason"]


def unsupported_reason(rnn: nn.RNNBase, device) -> str | None:
    """Why ``fast`` cannot run ``rnn`` on ``device`` (None: it can)."""
    return "fast kernels are not built yet"


def run_recurrent(rnn: nn.RNNBase, x: Tensor, h0: Tensor, kernel: str = DEFAULT_KERNEL) -> Tensor:
    """``rnn`` over ``x`` from ``h0`` with the chosen kernel; returns the last layer's output ``(B, T, H)``."""
    if isinstance(rnn, nn.LSTM):
        return rnn(x, (h0, h0))[0]
    return rnn(x, h0)[0]


def apply_kernel(net: nn.Module, kernel: str, device) -> list[str]:
    """Set ``kernel`` on every module of ``net`` that has a ``kernel`` attribute and an ``rnn``; a module the fast
    kernels cannot run stays on ``reference``. Returns the notes to log (empty for ``reference``)."""
    notes = []
    for name, module in net.named_modules():
        rnn = getattr(module, "rnn", None)
        if not hasattr(module, "kernel") or not isinstance(rnn, nn.RNNBase):
            continue
        reason = None if kernel == "reference" else unsupported_reason(rnn, device)
        module.kernel = kernel if reason is None else "reference"
        if reason is not None:
            notes.append(f"{name or 'model'}: {type(rnn).__name__} runs on the reference kernel ({reason})")
    return notes
