"""models/cost.py against the built models: parameters against ``sum(p.numel())``, weight MACs against a count
taken from a real forward pass (hooks on every Linear / GRU / LSTM / Conv module, sizes read from the modules and
the tensors they see), the elementwise products and the MP/GMP cost against hand formulas."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from dpd_desktop.models import build_model
from dpd_desktop.models.cost import model_cost
from dpd_desktop.config import PolySpec

NEURAL = ("gru", "dgru", "lstm", "tres_gru", "rvtdcnn")
SIZES = ((4, 1), (23, 1), (10, 2))


def _hooked_weight_macs(model: nn.Module, t: int) -> float:
    """Weight MACs per time step of one forward pass over a (1, t, 2) frame."""
    total = [0]

    def linear(m, inp, out):
        total[0] += inp[0].numel() // m.in_features * m.in_features * m.out_features

    def rnn(m, inp, out):
        gates = {"GRU": 3, "LSTM": 4}[m.mode]
        steps = inp[0].shape[0] * inp[0].shape[1]
        size_in = m.input_size
        for _ in range(m.num_layers):
            total[0] += steps * gates * m.hidden_size * (size_in + m.hidden_size)
            size_in = m.hidden_size

    def conv(m, inp, out):
        k = 1
        for s in m.kernel_size:
            k *= s
        total[0] += out.numel() * (m.in_channels // m.groups) * k

    handles = []
    for mod in model.modules():
        if isinstance(mod, nn.Linear):
            handles.append(mod.register_forward_hook(linear))
        elif isinstance(mod, nn.RNNBase):
            handles.append(mod.register_forward_hook(rnn))
        elif isinstance(mod, (nn.Conv1d, nn.Conv2d)):
            handles.append(mod.register_forward_hook(conv))
    with torch.no_grad():
        model(torch.randn(1, t, 2))
    for h in handles:
        h.remove()
    return total[0] / t


@pytest.mark.parametrize("backbone", NEURAL)
@pytest.mark.parametrize("hidden, layers", SIZES)
def test_neural_params_and_weight_macs_match_the_built_model(backbone, hidden, layers):
    model = build_model(backbone, hidden, layers)
    cost = model_cost(backbone, hidden, layers)
    assert cost.params == sum(p.numel() for p in model.parameters())
    assert cost.weight_macs == _hooked_weight_macs(model, t=64)
    assert cost.macs_per_sample == cost.weight_macs + cost.elementwise_macs


@pytest.mark.parametrize("hidden, layers", SIZES)
def test_elementwise_and_activation_counts_by_hand(hidden, layers):
    h, n = hidden, layers
    gru = model_cost("gru", h, n)
    assert (gru.elementwise_macs, gru.activations) == (3 * h * n, 3 * h * n)  # r⊙, z⊙h, (1−z)⊙n; 2 σ + 1 tanh
    lstm = model_cost("lstm", h, n)
    assert (lstm.elementwise_macs, lstm.activations) == (3 * h * n, 5 * h * n)  # f⊙c, i⊙g, o⊙tanh c; 3 σ + 2 tanh
    assert model_cost("dgru", h, n).elementwise_macs == 3 * h * n + 4  # + I², Q², |x|², |x|³
    assert model_cost("rvtdcnn", h, n).activations == 36 + h + 1  # conv tanh, hidden tanh, sqrt


def test_gru_23_headline_numbers():
    c = model_cost("gru", 23, 1)
    # GRU(2, 23): 3·23·(2 + 23) = 1725 weight MACs, head 2·23 = 46; 3·23 gate products
    assert (c.params, c.weight_macs, c.elementwise_macs, c.macs_per_sample) == (1911, 1771, 69, 1840)


@pytest.mark.parametrize("kind, orders, p, elementwise", [
    # K=5, M=4: 20 coefficients; |x|² (2) + |x|³, |x|⁴ (2) + x·|x|^p for p = 1..4 (2 each)
    ("mp", {"order": 5, "memory_depth": 4}, 20, 2 + 2 + 2 * 4),
    # odd orders 1, 3, 5 × M = 2: powers 2, 4 → |x|² (2) + |x|⁴ (1) + 2 products of 2
    ("mp", {"order": 5, "memory_depth": 2, "odd_only": True}, 6, 2 + 1 + 2 * 2),
    # K=3, M=2, cross orders 2..3, lag 2, lead 1: 6 + 2·2·2 + 2·2·1 = 18; pairs: aligned p=1,2 (2) + cross
    # (p, offset) for p = 1, 2 and offsets +1, +2, −1 (6)
    ("gmp", {"order": 3, "memory_depth": 2, "cross_order": 3, "cross_lag": 2, "cross_lead": 1}, 18,
     2 + 0 + 2 * (2 + 6)),
])
def test_poly_cost_by_hand(kind, orders, p, elementwise):
    spec = PolySpec.from_mapping(kind, orders)
    model = build_model(kind, 1, 1, poly=spec)
    cost = model_cost(kind, 1, 1, poly=spec)
    assert spec.n_coefficients == p
    assert cost.params == 2 * p == sum(q.numel() for q in model.parameters())
    assert cost.weight_macs == 4 * p  # a complex MAC = 4 real MACs
    assert cost.elementwise_macs == elementwise
    assert cost.macs_per_sample == 4 * p + elementwise
