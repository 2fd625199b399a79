"""Recurrence kernels: the per-run ``kernel`` setting (``reference`` | ``fast``) and its dispatch
(:mod:`.dispatch`; the record of a run's kernels, torch-free: :mod:`.record`).

``reference`` runs ``torch.nn.GRU`` / ``torch.nn.LSTM`` themselves (cuDNN on CUDA, TF32 where PyTorch's defaults
allow it): bitwise equal to OpenDPD 2.2.1. ``fast`` runs our own sequence-level kernels with PyTorch's gate
equations and the same parameters (checkpoints are interchangeable): :mod:`.cuda_rnn` on CUDA, :mod:`.cpu_rnn` on
the CPU. A shape or device the fast kernels do not support stays on the reference recurrence with a reason
(:func:`unsupported_reason`), which the trainer logs (:func:`apply_kernel`).

Each backend module provides (float32, batch first; biases may be None for a bias-free GRU):
- ``gru_sequence(x (B, T, I), h0 (B, H), w_ih (3H, I), w_hh (3H, H), b_ih (3H) | None, b_hh (3H) | None) -> y (B, T, H)``
- ``lstm_sequence(x, h0, c0, w_ih (4H, I), w_hh (4H, H), b_ih (4H), b_hh (4H)) -> y (B, T, H)``
- ``unsupported(rnn: nn.RNNBase) -> str | None`` (why that backend cannot run this module)
Both differentiable (autograd) with respect to x, h0 (c0) and every weight.
"""
