"""The dispatch of the ``kernel`` setting: which recurrence runs each recurrent module (see the package docstring).

:func:`apply_kernel` decides once per network: it tells each recurrent module which kernel to run (the module's
``kernel`` attribute, which its forward passes to :func:`run_recurrent`) and returns the decision
(:class:`KernelChoice`), from which the run's log and record are written.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from . import cpu_rnn, cuda_rnn
from .record import DEFAULT_KERNEL, kernel_block, module_key

__all__ = ["DEFAULT_KERNEL", "KernelChoice", "apply_kernel", "run_recurrent", "unsupported_reason"]


def _backend(device):
    return cuda_rnn if torch.device(device).type == "cuda" else cpu_rnn


def unsupported_reason(rnn: nn.RNNBase, device) -> str | None:
    """Why ``fast`` cannot run ``rnn`` on ``device`` (None: it can)."""
    if not isinstance(rnn, (nn.GRU, nn.LSTM)):
        return f"{type(rnn).__name__} has no fast kernel"
    if rnn.bidirectional or not rnn.batch_first or getattr(rnn, "proj_size", 0):
        return "only unidirectional, batch-first recurrences without projection have fast kernels"
    if any(p.dtype != torch.float32 for p in rnn.parameters()):
        return "the fast kernels are float32 only"
    return _backend(device).unsupported(rnn)


def run_recurrent(rnn: nn.RNNBase, x: Tensor, h0: Tensor, kernel: str = DEFAULT_KERNEL) -> Tensor:
    """``rnn`` over ``x`` ``(B, T, I)`` from ``h0`` ``(L, B, H)`` with the chosen kernel; returns the last layer's
    output ``(B, T, H)``. An LSTM starts from ``(h0, h0)`` (reference §2.5). ``kernel == "fast"`` assumes
    :func:`unsupported_reason` said None (``apply_kernel`` sees to it)."""
    lstm = isinstance(rnn, nn.LSTM)
    if kernel != "fast":
        if x.shape[1] > LONG_SEQUENCE:
            return _chunked(rnn, x, h0, lstm)
        return rnn(x, (h0, h0))[0] if lstm else rnn(x, h0)[0]
    backend = _backend(x.device)
    y = x
    for layer in range(rnn.num_layers):
        w_ih, w_hh = getattr(rnn, f"weight_ih_l{layer}"), getattr(rnn, f"weight_hh_l{layer}")
        b_ih = getattr(rnn, f"bias_ih_l{layer}", None) if rnn.bias else None
        b_hh = getattr(rnn, f"bias_hh_l{layer}", None) if rnn.bias else None
        h = h0[layer]
        if lstm:
            y = backend.lstm_sequence(y, h, h, w_ih, w_hh, b_ih, b_hh)
        elif y.shape[1] > LONG_SEQUENCE:  # a whole-split evaluation: in chunks, the state carried (see below)
            pieces = []
            for a in range(0, y.shape[1], LONG_CHUNK):
                pieces.append(backend.gru_sequence(y[:, a:a + LONG_CHUNK], h, w_ih, w_hh, b_ih, b_hh))
                h = pieces[-1][:, -1]
            y = torch.cat(pieces, dim=1)
        else:
            y = backend.gru_sequence(y, h, w_ih, w_hh, b_ih, b_hh)
        if rnn.dropout and rnn.training and layer < rnn.num_layers - 1:
            y = nn.functional.dropout(y, rnn.dropout, training=True)
    return y


#: sequences longer than this run the reference recurrence in chunks of LONG_CHUNK steps, the state carried over
#: (cuDNN's sequence descriptors limit the length; OpenDPD 2.4.2 splits its Arena's 66,270-sample test record the
#: same way). Same recurrence; only a whole-split evaluation (``evaluation = "overlap"``) is that long.
LONG_SEQUENCE = 32768
LONG_CHUNK = 16384


def _chunked(rnn: nn.RNNBase, x: Tensor, h0: Tensor, lstm: bool) -> Tensor:
    state = (h0, h0) if lstm else h0
    pieces = []
    for a in range(0, x.shape[1], LONG_CHUNK):
        y, state = rnn(x[:, a:a + LONG_CHUNK], state)
        pieces.append(y)
    return torch.cat(pieces, dim=1)


@dataclass(frozen=True)
class KernelChoice:
    """:func:`apply_kernel`'s decision for one network. ``requested``: the setting; ``used``: the kernel of each
    recurrent module, keyed by kernels/record.py ``module_key`` (``model``; ``dpd``, ``pa``); ``notes``: one line per
    module that fell back to ``reference``, with the reason; ``summary``: the log line, e.g. ``"dpd: GRU on fast
    (cuda_rnn); pa: GRU on reference"`` (``"no recurrent layer"`` for the other families)."""

    requested: str
    used: dict[str, str]
    notes: tuple[str, ...]
    summary: str

    def block(self) -> dict[str, Any]:
        """config.json's ``device.kernel`` block (kernels/record.py)."""
        return kernel_block(self.requested, self.used, self.notes)


def apply_kernel(net: nn.Module, kernel: str, device) -> KernelChoice:
    """Set the kernel of every module of ``net`` that has a ``kernel`` attribute and an ``rnn`` (a cascade's DPD
    and PA both): ``kernel``, or ``reference`` for a module the fast kernels cannot run (a backbone's own
    ``kernel_note()`` is asked first). Returns the decision."""
    used, notes, parts = {}, [], []
    backend = _backend(device).__name__.rsplit(".", 1)[-1]
    for name, module in _recurrent_modules(net):
        own = getattr(module, "kernel_note", None)  # a backbone that knows why it cannot run fast (delta thresholds)
        reason = None if kernel == "reference" else (own() if callable(own) else None) or unsupported_reason(
            module.rnn, device)
        key, rnn, module.kernel = module_key(name), type(module.rnn).__name__, kernel if reason is None else "reference"
        used[key] = module.kernel
        parts.append(f"{key}: {rnn} on {module.kernel}" + (f" ({backend})" if module.kernel == "fast" else ""))
        if reason is not None:
            notes.append(f"{key}: {rnn} runs on the reference kernel ({reason})")
    return KernelChoice(kernel, used, tuple(notes), "; ".join(parts) or "no recurrent layer")


def _recurrent_modules(net: nn.Module):
    """(qualified name, module) of every module of ``net`` with a ``kernel`` attribute and an ``rnn``."""
    for name, module in net.named_modules():
        if hasattr(module, "kernel") and isinstance(getattr(module, "rnn", None), nn.RNNBase):
            yield name, module

