"""The dispatch of the ``kernel`` setting: which recurrence runs each recurrent module (see the package docstring)."""
from __future__ import annotations

import torch
from torch import Tensor, nn

from . import cpu_rnn, cuda_rnn
from .record import DEFAULT_KERNEL, module_key

__all__ = ["DEFAULT_KERNEL", "apply_kernel", "kernels_used", "run_recurrent", "unsupported_reason"]


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


def kernel_summary(net: nn.Module, device) -> str:
    """Which kernel each recurrent module of ``net`` runs (after :func:`apply_kernel`), for the run's log, keyed as
    :func:`kernels_used` keys them, e.g. ``"model: GRU on fast (cpu_rnn)"``, ``"dpd: GRU on fast (cuda_rnn); pa: GRU
    on reference"``; ``"no recurrent layer"`` for the other families."""
    backend = _backend(device).__name__.rsplit(".", 1)[-1]
    parts = [f"{module_key(name)}: {type(m.rnn).__name__} on {m.kernel}"
             + (f" ({backend})" if m.kernel == "fast" else "") for name, m in _recurrent_modules(net)]
    return "; ".join(parts) or "no recurrent layer"


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


def apply_kernel(net: nn.Module, kernel: str, device) -> list[str]:
    """Set ``kernel`` on every module of ``net`` that has a ``kernel`` attribute and an ``rnn`` (a cascade's DPD and
    PA both); a module the fast kernels cannot run stays on ``reference`` (a backbone's own ``kernel_note()`` is
    asked first). Returns the notes to log, one per
    fallback with its reason (none for ``reference``), each starting with the module's ``kernels_used`` key
    (``model``, ``dpd``, ``pa``)."""
    notes = []
    for name, module in _recurrent_modules(net):
        own = getattr(module, "kernel_note", None)  # a backbone that knows why it cannot run fast (delta thresholds)
        reason = None if kernel == "reference" else (own() if callable(own) else None) or unsupported_reason(
            module.rnn, device)
        module.kernel = kernel if reason is None else "reference"
        if reason is not None:
            notes.append(f"{module_key(name)}: {type(module.rnn).__name__} runs on the reference kernel ({reason})")
    return notes


def _recurrent_modules(net: nn.Module):
    """(qualified name, module) of every module of ``net`` with a ``kernel`` attribute and an ``rnn``."""
    for name, module in net.named_modules():
        if hasattr(module, "kernel") and isinstance(getattr(module, "rnn", None), nn.RNNBase):
            yield name, module


def kernels_used(net: nn.Module) -> dict[str, str]:
    """The kernel each recurrent module of ``net`` runs on (after :func:`apply_kernel`), keyed as
    kernels/record.py ``module_key`` names them (``model``; ``dpd``, ``pa``); {} when ``net`` has none."""
    return {module_key(name): module.kernel for name, module in _recurrent_modules(net)}
