"""Model cost: parameters and real multiply-accumulates (MACs) per sample of the forward pass, for every family.

Counting convention (one output sample in steady state, i.e. per time step of a frame):

* ``weight_macs``: one real MAC per weight use — a Linear(in, out) costs in·out, a GRU layer 3H·(I + H), an LSTM
  layer 4H·(I + H), a convolution (output elements × kernel size × input channels) per sample. Bias additions are
  not counted (additions, not multiplications).
* ``elementwise_macs``: real products between signals — recurrent gates (GRU: r⊙(W_hn h + b_hn), z⊙h, (1−z)⊙n = 3H
  per layer; LSTM: f⊙c, i⊙g, o⊙tanh(c) = 3H), feature products (I², Q², |x|·|x|² …) and, for MP/GMP, the
  basis products x(n)·|x(n−l)|^(k−1) (2 real products each, computed once per new sample and reused through the
  delay line).
* A complex MAC is 4 real MACs (MP/GMP coefficients: 4 per complex coefficient).
* Delta recurrences (DeltaGRU, TRes-DeltaGRU) are counted dense, as at zero thresholds (every delta kept); their
  delta encoders (subtractions and compares) are additions, not MACs. Temporal sparsity would lower the weight MACs.
* ``activations``: nonlinear function evaluations (sigmoid, tanh, ReLU, Hardswish, sqrt, division), counted
  separately, not in the MACs.

``macs_per_sample = weight_macs + elementwise_macs``. Parameters are ``sum(p.numel())`` of the built model
(tests/unit/test_model_cost.py checks both against the built modules and an independent forward-hook count).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

from ..config import PolySpec
from .pn_gru import (GRUGain3Backbone, GRUGain3PBackbone, GRUGain5Backbone, GRUGainBackbone, PNGRU2Backbone,
                     PNGRUBackbone)
from .rvtdcnn import CONV_CHANNELS, CONV_OUT
from .tcn import DILATIONS as TCN_DILATIONS
from .tcn import KERNEL as TCN_DW_KERNEL
from .tres_gru import TCN_CHANNELS, TCN_KERNEL

__all__ = ["Cost", "model_cost", "poly_cost"]


@dataclass(frozen=True)
class Cost:
    """Parameters and per-sample forward cost (module docstring for the convention)."""

    params: int
    weight_macs: int
    elementwise_macs: int
    activations: int

    @property
    def macs_per_sample(self) -> int:
        return self.weight_macs + self.elementwise_macs

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "macs_per_sample": self.macs_per_sample}


def _rnn(kind: str, n_in: int, h: int, layers: int, bias: bool = True) -> tuple[int, int, int, int]:
    """(params, weight MACs, elementwise MACs, activations) of a stacked GRU/LSTM."""
    gates = 3 if kind == "gru" else 4
    params = weight = 0
    i = n_in
    for _ in range(layers):
        params += gates * h * (i + h) + (2 * gates * h if bias else 0)
        weight += gates * h * (i + h)
        i = h
    acts = (3 if kind == "gru" else 5) * h * layers
    return params, weight, 3 * h * layers, acts


def poly_cost(spec: PolySpec) -> Cost:
    """MP/GMP: 2 real parameters and 4 real MACs per complex coefficient, plus the basis products.

    Per new sample: |x|² (2 products) and |x| (sqrt, an activation); the envelope powers |x|^p for every power used
    beyond 2 (one product each, |x|² being known); one complex×real product (2 real) per distinct
    (power, envelope offset) pair with power ≥ 1 — aligned terms share offset 0 — each then reused along the delays.
    """
    terms = spec.terms
    p = len(terms)
    powers = {t.power for t in terms if t.power >= 1}
    pairs = {(t.power, t.env_delay - t.delay) for t in terms if t.power >= 1}
    env = 2 + sum(1 for q in powers if q > 2) if powers else 0
    acts = 1 if powers else 0
    return Cost(params=2 * p, weight_macs=4 * p, elementwise_macs=env + 2 * len(pairs), activations=acts)


GAIN_BACKBONES = {"gru_gain": GRUGainBackbone, "gru_gain3": GRUGain3Backbone, "gru_gain3p": GRUGain3PBackbone,
                  "gru_gain5": GRUGain5Backbone}


def model_cost(backbone: str, hidden_size: int, num_layers: int = 1,
               poly: PolySpec | Mapping[str, Any] | None = None) -> Cost:
    """The cost of ``build_model(backbone, hidden_size, num_layers, poly)`` (same arguments).

    Raises:
        ValueError: unknown backbone.
    """
    key = str(backbone).strip().lower()
    h, n = int(hidden_size), int(num_layers)
    if key in ("mp", "gmp"):
        return poly_cost(poly if isinstance(poly, PolySpec) else PolySpec.from_mapping(key, poly))
    if key == "gru":  # GRU(2, H) → Linear(H, 2)
        p, w, e, a = _rnn("gru", 2, h, n)
        return Cost(p + 2 * h + 2, w + 2 * h, e, a)
    if key == "lstm":  # LSTM(2, H) → Linear(H, 2)
        p, w, e, a = _rnn("lstm", 2, h, n)
        return Cost(p + 2 * h + 2, w + 2 * h, e, a)
    if key == "dgru":  # features [I, Q, |x|, |x|³, Q/|x|, I/|x|] → GRU(6, H) → ReLU(Linear(H, H)) → Linear(H + 6, 2)
        p, w, e, a = _rnn("gru", 6, h, n)
        feat_e, feat_a = 2 + 2, 1 + 2  # I², Q², |x|·|x|, ·|x|; sqrt and two divisions
        return Cost(p + h * h + h + 2 * (h + 6) + 2, w + h * h + 2 * (h + 6), e + feat_e, a + h + feat_a)
    if key == "deltagru":  # features as DGRU → GRU(6, H) (dense equivalent of the delta recurrence) → Linear(H, 2)
        p, w, e, a = _rnn("gru", 6, h, n)
        feat_e, feat_a = 2 + 2, 1 + 2
        return Cost(p + 2 * h + 2, w + 2 * h, e + feat_e, a + feat_a)
    if key == "gru_amp":  # [I, Q, |x|, |x|³] → GRU(4, H) → Linear(H, 2)
        p, w, e, a = _rnn("gru", 4, h, n)
        return Cost(p + 2 * h + 2, w + 2 * h, e + 2 + 2, a + 1)
    if key in ("pn_gru", "pn_gru2"):  # unit phasor, 2 or 4 neighbours turned → GRU(I, H) → Linear(H, 2) → turned back
        taps = len((PNGRUBackbone if key == "pn_gru" else PNGRU2Backbone).offsets)
        p, w, e, a = _rnn("gru", 2 + 2 * taps, h, n)
        feat_e, feat_a = 2 + 2 + 4 * taps, 1 + 2  # I², Q², |x|³ (2); 4 per turned neighbour; sqrt, two divisions
        return Cost(p + 2 * h + 2, w + 2 * h, e + feat_e + 4, a + feat_a)  # + 4: the output turned back
    if key in GAIN_BACKBONES:  # polar features → GRU(6, H) → Linear(H, 2K + 2) → x + Σ x(t+k)·g_k (+ x·|x|^p·g_p) + a
        cls = GAIN_BACKBONES[key]
        k, pw = len(cls.taps), len(cls.amp_orders)
        p, w, e, a = _rnn("gru", 6, h, n)
        out = 2 * (k + pw) + 2
        # per amplitude term: |x|^p from |x|² (p = 2: none), x·|x|^p (2), its complex product (4)
        return Cost(p + out * h + out, w + out * h, e + 2 + 2 + 4 * k + 6 * pw, a + 1 + 2)
    if key == "tcn":  # features → Conv1d(6, C, 1) → 4 × depthwise Conv1d(C, C, 5) → Conv1d(C, 2, 1), Hardswish × 5C
        c = h
        weight = 6 * c + len(TCN_DILATIONS) * TCN_DW_KERNEL * c + 2 * c
        feat_e, feat_a = 2 + 2, 1 + 2
        return Cost(weight + c, weight, feat_e, (1 + len(TCN_DILATIONS)) * c + feat_a)
    if key in ("tres_gru", "tres_deltagru"):  # bias-free GRU(6, H) → Linear(H, 2) (no bias), + Conv1d(2,3,3) → Hardswish → Conv1d(3,2,1)
        p, w, e, a = _rnn("gru", 6, h, n, bias=False)
        tcn = TCN_CHANNELS * 2 * TCN_KERNEL + 2 * TCN_CHANNELS
        feat_e, feat_a = 2 + 2, 1
        return Cost(p + 2 * h + tcn, w + 2 * h + tcn, e + feat_e, a + feat_a + TCN_CHANNELS + 2)
    if key == "rvtdcnn":  # 4×5 window → Conv2d(1, 3, 3×3, pad (1, 0)) → tanh → Linear(36, H) → tanh → Linear(H, 2)
        conv_w = CONV_CHANNELS * 9 + CONV_CHANNELS
        conv_macs = CONV_OUT * 9  # every output element: 3×3 kernel over 1 channel (zero padding rows included)
        feat_e, feat_a = 2 + 1, 1  # I², Q², |x|·|x|²; sqrt
        return Cost(conv_w + CONV_OUT * h + h + 2 * h + 2, conv_macs + CONV_OUT * h + 2 * h, feat_e,
                    CONV_OUT + h + feat_a)
    raise ValueError(f"unknown backbone {backbone!r}")
