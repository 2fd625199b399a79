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
"""
from __future__ import annotations

from torch import Tensor, nn

KERNELS = ("reference", "fast")
DEFAULT_KERNEL = "reference"


def unsupported_reason(rnn: nn.RNNBase, device) -> str | None:
    """Why ``fast`` cannot run ``rnn`` on ``device`` (None: it can)."""
    return "fast kernels are not built yet"


def run_recurrent(rnn: nn.RNNBase, x: Tensor, h0: Tensor, kernel: str = DEFAULT_KERNEL) -> Tensor:
    """``rnn`` over ``x`` from ``h0`` with the chosen kernel; returns the last layer's output ``(B, T, H)``."""
    if isinstance(rnn, nn.LSTM):
        return rnn(x, (h0, h0))[0]
    return rnn(x, h0)[0]
