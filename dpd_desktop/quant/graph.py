"""A lowered DPD: a small graph of layer kinds that every family is written in for fixed-point work.

Node kinds (each ``run(backend, *inputs) -> Fx``; quant/backends.py gives the arithmetic):

* :class:`Input` — the I/Q input ``(B, T, 2)`` quantised to its format (key ``x``);
* :class:`Polar` — features ``[I, Q, |x|, |x|³, sin φ, cos φ]`` (DGRU, TCN, DeltaGRU);
* :class:`Select` — channels ``start:stop`` of a tensor, its words unchanged (the TCN's residual I/Q of ``x``);
* :class:`Concat` — channel concatenation, requantised to one format;
* :class:`Linear` — ``W v + b`` on the last axis, optional ReLU, requantised;
* :class:`GRU` — one ``nn.GRU`` layer (gates r, z, n in PyTorch's order and formula), zero initial state;
* :class:`Conv1d` — ``nn.Conv1d`` over time (dilation, zero padding, groups), optional Hardswish or ReLU;
* :class:`Add` — the sum of two tensors (a residual), requantised.

The integer arithmetic of each kind is written out in its ``run`` and in the export's README (export/fixed_export.py).
Parameters are the torch tensors of the model itself (views, not copies), so a lowered model trains: quantisation-
aware training (quant/qat.py) updates the model's own parameters.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .backends import Fx

__all__ = ["Node", "Input", "Polar", "Select", "Concat", "Linear", "GRU", "Conv1d", "Add", "Graph", "graph_to_dict",
           "graph_from_dict"]


@dataclass
class Node:
    name: str
    inputs: tuple[str, ...] = ()

    kind = "node"

    def params(self) -> dict[str, Any]:
        """Parameter key → torch tensor."""
        return {}

    def describe(self) -> str:
        return self.kind


def _weight_bias(node) -> dict[str, Any]:
    """``{"<name>.weight": weight, "<name>.bias": bias}`` of a Linear or Conv1d node (no bias key without one)."""
    return {f"{node.name}.weight": node.weight, **({f"{node.name}.bias": node.bias} if node.bias is not None else {})}


@dataclass
class Input(Node):
    kind = "input"

    def run(self, be, x) -> Fx:
        return be.input(x, self.name)

    def describe(self) -> str:
        return "I/Q input (B, T, 2), quantised"


@dataclass
class Polar(Node):
    kind = "polar"

    def run(self, be, x: Fx) -> Fx:
        return be.polar(x, self.name)

    def describe(self) -> str:
        return "features [I, Q, |x|, |x|^3, Q/|x|, I/|x|] (|x| = 0: sin = cos = 0)"


@dataclass
class Select(Node):
    start: int = 0
    stop: int = 2
    kind = "select"

    def run(self, be, x: Fx) -> Fx:
        return x[..., self.start:self.stop]

    def describe(self) -> str:
        return f"channels {self.start}:{self.stop} of {self.inputs[0]}, its words unchanged" if self.inputs else \
            f"channels {self.start}:{self.stop}"


@dataclass
class Concat(Node):
    kind = "concat"

    def run(self, be, *parts: Fx) -> Fx:
        return be.concat(list(parts), self.name)

    def describe(self) -> str:
        return f"concatenation of {', '.join(self.inputs)} (one format)"


@dataclass
class Linear(Node):
    weight: Any = None
    bias: Any = None
    relu: bool = False
    kind = "linear"

    def params(self) -> dict[str, Any]:
        return _weight_bias(self)

    def run(self, be, x: Fx) -> Fx:
        acc = be.linear(x, f"{self.name}.weight", self.weight, f"{self.name}.bias", self.bias)
        y = be.requant(acc, self.name, "act")
        return be.relu(y) if self.relu else y

    def describe(self) -> str:
        o, i = tuple(self.weight.shape)
        return f"linear {i} -> {o}" + (" + ReLU" if self.relu else "")


@dataclass
class GRU(Node):
    """One GRU layer: ``w_ih`` (3H, I), ``w_hh`` (3H, H), ``b_ih``/``b_hh`` (3H) or None, gates r, z, n.

    Per step, with x(t) and h(t−1) words (h in Q0.(A−1), h(−1) = 0; r, z unsigned UQ0.A), per gate g the accumulators
    ``a_xg = W_ig x + b_ig`` and ``a_hg = W_hg h + b_hg`` (int64), aligned by exact left shifts:
    r = σ(pre(a_xr + a_hr)), z = σ(pre(a_xz + a_hz)), hn = pre(a_hn), n = tanh(pre(a_xn + r·hn)),
    h(t) = sat(n + round(z·(h(t−1) − n))) — PyTorch's h = (1 − z)·n + z·h(t−1) — where pre() is a 32-bit
    pre-activation word (fraction from the training-split range) and σ/tanh are the lookup tables.
    """

    w_ih: Any = None
    w_hh: Any = None
    b_ih: Any = None
    b_hh: Any = None
    kind = "gru"

    def _blocks(self):
        h = self.w_hh.shape[1]
        out = {}
        for k, g in enumerate("rzn"):
            s = slice(k * h, (k + 1) * h)
            out[g] = (self.w_ih[s], self.w_hh[s], None if self.b_ih is None else self.b_ih[s],
                      None if self.b_hh is None else self.b_hh[s])
        return out

    def params(self) -> dict[str, Any]:
        out = {}
        for g, (wi, wh, bi, bh) in self._blocks().items():
            out[f"{self.name}.w_i{g}"] = wi
            out[f"{self.name}.w_h{g}"] = wh
            if bi is not None:
                out[f"{self.name}.b_i{g}"] = bi
                out[f"{self.name}.b_h{g}"] = bh
        return out

    def run(self, be, x: Fx) -> Fx:
        n_ = self.name
        blocks = self._blocks()
        bsz, t_len = x.shape[0], x.shape[1]
        hid = self.w_hh.shape[1]
        gates = list(blocks)
        ax = dict(zip(gates, be.linear_many(x, [(f"{n_}.w_i{g}", wi, f"{n_}.b_i{g}", bi)
                                                for g, (wi, _, bi, _) in blocks.items()])))
        hx = [(f"{n_}.w_h{g}", wh, f"{n_}.b_h{g}", bh) for g, (_, wh, _, bh) in blocks.items()]
        h = be.zeros_unit(x, (bsz, hid))
        seq: dict[str, list] = {k: [] for k in ("r_pre", "z_pre", "hn", "n_pre", "r", "z", "n", "h")}
        for t in range(t_len):
            ah = dict(zip(gates, be.linear_many(h, hx)))
            r_pre = be.requant(be.add(ax["r"][:, t], ah["r"]), f"{n_}.r_pre", "pre")
            z_pre = be.requant(be.add(ax["z"][:, t], ah["z"]), f"{n_}.z_pre", "pre")
            r = be.lut(r_pre, "sigmoid")
            z = be.lut(z_pre, "sigmoid")
            hn = be.requant(ah["n"], f"{n_}.hn", "pre")
            n_pre = be.requant(be.add(ax["n"][:, t], be.mul(r, hn)), f"{n_}.n_pre", "pre")
            n = be.lut(n_pre, "tanh")
            h = be.requant(be.add(n, be.mul(z, be.sub(h, n))), f"{n_}.h", "unit")
            if be.records:
                for k, v in (("r_pre", r_pre), ("z_pre", z_pre), ("hn", hn), ("n_pre", n_pre), ("r", r),
                             ("z", z), ("n", n), ("h", h)):
                    seq[k].append(v)
            else:
                seq["h"].append(h)
        for k, vs in seq.items():
            if vs and k != "h":
                be.trace(f"{n_}.{k}", be.stack(vs, 1))
        return be.stack(seq["h"], 1)

    def describe(self) -> str:
        return f"GRU {self.w_ih.shape[1]} -> {self.w_hh.shape[1]}" + (" (no bias)" if self.b_ih is None else "")


@dataclass
class Conv1d(Node):
    """``nn.Conv1d`` over time on (B, T, C): weight (Cout, Cin/groups, K), zero padding, dilation, groups; then
    ``act`` ("hardswish": on an A-bit word ``.pre``; "relu"; None) and the requantisation to the node's format."""

    weight: Any = None
    bias: Any = None
    dilation: int = 1
    padding: int = 0
    groups: int = 1
    act: str | None = None
    kind = "conv1d"

    def params(self) -> dict[str, Any]:
        return _weight_bias(self)

    def run(self, be, x: Fx) -> Fx:
        acc = be.conv1d(x, f"{self.name}.weight", self.weight, f"{self.name}.bias", self.bias, self.dilation,
                        self.padding, self.groups)
        if self.act == "hardswish":
            return be.hardswish(be.requant(acc, f"{self.name}.pre", "act"), self.name)
        y = be.requant(acc, self.name, "act")
        return be.relu(y) if self.act == "relu" else y

    def describe(self) -> str:
        o, i, k = tuple(self.weight.shape)
        return (f"conv1d {i * self.groups} -> {o}, kernel {k}, dilation {self.dilation}, padding {self.padding}, "
                f"groups {self.groups}" + (f" + {self.act}" if self.act else ""))


@dataclass
class Add(Node):
    kind = "add"

    def run(self, be, a: Fx, b: Fx) -> Fx:
        return be.requant(be.add(a, b), self.name, "act")

    def describe(self) -> str:
        return f"{' + '.join(self.inputs)}"


@dataclass
class Graph:
    """Nodes in execution order; ``output`` names the node whose tensor is the DPD output ``(B, T, 2)``."""

    family: str
    nodes: list[Node] = field(default_factory=list)
    output: str = ""

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for n in self.nodes:
            out.update(n.params())
        return out

    def run(self, be, x):
        """Run on input ``x`` (B, T, 2) in backend ``be``; returns ``be.output`` of the output node. Every node's
        output is recorded with ``be.trace`` (the integer backend keeps them: the golden vectors)."""
        env: dict[str, Fx] = {}
        for node in self.nodes:
            args = [x] if isinstance(node, Input) else [env[i] for i in node.inputs]
            env[node.name] = node.run(be, *args)
            be.trace(node.name, env[node.name])
        return be.output(env[self.output])


# ------------------------------------------------------------------------------------------------ (de)serialisation
_KINDS = {c.kind: c for c in (Input, Polar, Select, Concat, Linear, GRU, Conv1d, Add)}
_PARAM_FIELDS = {"linear": ("weight", "bias"), "gru": ("w_ih", "w_hh", "b_ih", "b_hh"), "conv1d": ("weight", "bias")}
_ATTR_FIELDS = {"select": ("start", "stop"), "linear": ("relu",), "conv1d": ("dilation", "padding", "groups", "act")}


def graph_to_dict(graph: Graph) -> dict[str, Any]:
    """The graph's structure (no values): per node its kind, name, inputs, attributes and parameter shapes."""
    nodes = []
    for n in graph.nodes:
        d: dict[str, Any] = {"kind": n.kind, "name": n.name, "inputs": list(n.inputs), "describe": n.describe()}
        for f in _ATTR_FIELDS.get(n.kind, ()):
            d[f] = getattr(n, f)
        shapes = {f: list(getattr(n, f).shape) for f in _PARAM_FIELDS.get(n.kind, ()) if getattr(n, f) is not None}
        if shapes:
            d["param_shapes"] = shapes
        nodes.append(d)
    return {"family": graph.family, "output": graph.output, "nodes": nodes}


def graph_from_dict(d: dict[str, Any]) -> Graph:
    """A graph of :func:`graph_to_dict`'s structure whose parameters are zero tensors of the recorded shapes (for
    an integer backend whose parameters are loaded from an export's files)."""
    nodes = []
    for nd in d["nodes"]:
        cls = _KINDS[nd["kind"]]
        kw = {f: nd[f] for f in _ATTR_FIELDS.get(nd["kind"], ()) if f in nd}
        for f, shape in (nd.get("param_shapes") or {}).items():
            kw[f] = torch.zeros(shape, dtype=torch.float64)
        nodes.append(cls(nd["name"], tuple(nd["inputs"]), **kw))
    return Graph(d["family"], nodes, d["output"])
