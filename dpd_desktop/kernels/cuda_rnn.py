"""Fast recurrence kernels on the cuda: not built yet (every module falls back to the reference kernel)."""
from __future__ import annotations

from torch import nn


def unsupported(rnn: nn.RNNBase) -> str | None:
    """Why this backend cannot run ``rnn`` (None: it can)."""
    return "no fast kernel is built for this device yet"


def gru_sequence(x, h0, w_ih, w_hh, b_ih, b_hh):
    raise NotImplementedError("fast GRU kernel")


def lstm_sequence(x, h0, c0, w_ih, w_hh, b_ih, b_hh):
    raise NotImplementedError("fast LSTM kernel")
