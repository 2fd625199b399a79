"""Lowerings: a family's torch model written as a quant/graph.py :class:`Graph` of generic layer kinds.

Each lowering reads the backbone's own submodules (``rnn``, ``fc_out``, ``network`` …) and keeps references to
their parameters. A family is added by one function registered in :data:`LOWERINGS`; a float64 run of its graph in
the float backend must equal the model (tests/unit/test_quant.py checks each).

Lowered: ``gru`` (GRU layers → linear), ``dgru`` (polar features → GRU layers → linear + ReLU → [a; features] →
linear), ``deltagru`` with zero thresholds (the dense GRU on polar features → linear; nonzero thresholds are
refused), ``tcn`` (polar features → the ``network`` Conv1d/Hardswish stack → + [I, Q] of the input word). Not
lowered (refused with :class:`LoweringError`): ``lstm``, ``tres_gru``, ``tres_deltagru``, ``rvtdcnn`` and MP/GMP,
whose fixed point is quant/poly.py's.
"""
from __future__ import annotations

from typing import Callable

from torch import nn

from .graph import GRU, Add, Concat, Conv1d, Graph, Input, Linear, Polar, Select

__all__ = ["LoweringError", "LOWERINGS", "lower"]


class LoweringError(ValueError):
    """The model has no fixed-point lowering (its family, or a setting of it); the message says which."""


def _gru_layers(rnn: nn.GRU, src: str, nodes: list) -> str:
    if not isinstance(rnn, nn.GRU) or rnn.bidirectional or not rnn.batch_first:
        raise LoweringError("the recurrence is not a unidirectional batch-first nn.GRU")
    for layer in range(rnn.num_layers):
        sfx = f"_l{layer}"
        name = f"gru{layer}"
        nodes.append(GRU(name, (src,), w_ih=getattr(rnn, "weight_ih" + sfx), w_hh=getattr(rnn, "weight_hh" + sfx),
                         b_ih=getattr(rnn, "bias_ih" + sfx, None) if rnn.bias else None,
                         b_hh=getattr(rnn, "bias_hh" + sfx, None) if rnn.bias else None))
        src = name
    return src


def _linear(name: str, src: str, lin: nn.Linear, relu: bool = False) -> Linear:
    return Linear(name, (src,), weight=lin.weight, bias=lin.bias, relu=relu)


def lower_gru(bb) -> Graph:
    nodes = [Input("x")]
    src = _gru_layers(bb.rnn, "x", nodes)
    nodes.append(_linear("fc_out", src, bb.fc_out))
    return Graph("gru", nodes, "fc_out")


def lower_dgru(bb) -> Graph:
    nodes = [Input("x"), Polar("features", ("x",))]
    src = _gru_layers(bb.rnn, "features", nodes)
    nodes += [_linear("fc_hid", src, bb.fc_hid, relu=True), Concat("cat", ("fc_hid", "features")),
              _linear("fc_out", "cat", bb.fc_out)]
    return Graph("dgru", nodes, "fc_out")


def lower_deltagru(bb) -> Graph:
    if not getattr(bb, "dense", False):
        raise LoweringError(f"DeltaGRU with thresholds thx={getattr(bb, 'thx', '?')}, thh={getattr(bb, 'thh', '?')}: "
                            "only zero thresholds (the dense GRU) have a fixed-point lowering")
    nodes = [Input("x"), Polar("features", ("x",))]
    src = _gru_layers(bb.rnn, "features", nodes)
    nodes.append(_linear("fc_out", src, bb.fc_out))
    return Graph("deltagru", nodes, "fc_out")


def lower_tcn(bb) -> Graph:
    """The ``network`` Sequential: Conv1d layers, each optionally followed by Hardswish or ReLU; + [I, Q].

    The residual [I, Q] is taken from the input word ``x`` (``io_bits``), not from the features word: the features
    share one A-bit format with sin/cos (range 1), so at A = 8 their I/Q would carry a rounding floor near −35 dB
    relative to u straight to the output (the model's own residual, f[..., :2], is x itself)."""
    nodes = [Input("x"), Polar("features", ("x",))]
    layers = list(bb.network)
    src, k, i = "features", 0, 0
    while i < len(layers):
        conv = layers[i]
        if not isinstance(conv, nn.Conv1d) or conv.padding_mode != "zeros" or conv.stride[0] != 1:
            raise LoweringError(f"TCN layer {i} ({type(conv).__name__}) is not a stride-1 zero-padded Conv1d")
        act = None
        if i + 1 < len(layers) and isinstance(layers[i + 1], (nn.Hardswish, nn.ReLU)):
            act = "hardswish" if isinstance(layers[i + 1], nn.Hardswish) else "relu"
            i += 1
        name = f"conv{k}"
        nodes.append(Conv1d(name, (src,), weight=conv.weight, bias=conv.bias, dilation=conv.dilation[0],
                            padding=int(conv.padding[0]), groups=conv.groups, act=act))
        src, k, i = name, k + 1, i + 1
    nodes += [Select("iq", ("x",), start=0, stop=2), Add("out", (src, "iq"))]
    return Graph("tcn", nodes, "out")


LOWERINGS: dict[str, Callable] = {"gru": lower_gru, "dgru": lower_dgru, "deltagru": lower_deltagru,
                                  "tcn": lower_tcn}


def lower(model) -> Graph:
    """The graph of a :class:`~dpd_desktop.models.base.CoreModel` (its parameters by reference).

    Raises:
        LoweringError: a family without a lowering (the message lists those with one), or a setting the lowering
            does not cover.
    """
    name = getattr(model, "backbone_name", None)
    fn = LOWERINGS.get(name)
    if fn is None:
        raise LoweringError(f"the {name!r} family has no fixed-point lowering; lowered families: "
                            f"{', '.join(LOWERINGS)} (MP/GMP: their own fixed-point coefficients)")
    try:
        return fn(model.backbone)
    except AttributeError as exc:
        raise LoweringError(f"the {name!r} model does not have the layout its lowering expects ({exc})") from exc
