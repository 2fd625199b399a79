"""The CPU fast kernels (dpd_desktop/kernels/cpu_rnn.py) against PyTorch's own recurrences.

* forward outputs within 1e-5 of ``nn.GRU`` / ``nn.LSTM`` (float32, tiny shapes and the GRU-23 training shape);
* ``torch.autograd.gradcheck`` in float64 (x, h0, c0 and every weight and bias), with and without biases;
* float32 gradients within 1e-5 (relative to the largest float64 gradient of the same tensor) of ``nn.GRU`` in
  float64 on GRU-23, batch 64, frame 200;
* the model families through ``kernel = "fast"`` (GRU, DGRU, TRes-GRU; 2 layers) against ``reference``;
* the workspace pool: two live sequences of one shape (a DPD cascade), a retained graph, frozen weights.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from dpd_desktop.kernels.dispatch import apply_kernel, unsupported_reason
from dpd_desktop.kernels import cpu_rnn
from dpd_desktop.models import build_model


def _weights(rnn: nn.RNNBase) -> list:
    bias = rnn.bias
    return [rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0 if bias else None, rnn.bias_hh_l0 if bias else None]


def _fast(rnn, x, h0, c0=None):
    if isinstance(rnn, nn.LSTM):
        return cpu_rnn.lstm_sequence(x, h0, h0 if c0 is None else c0, *_weights(rnn))
    return cpu_rnn.gru_sequence(x, h0, *_weights(rnn))


def _reference(rnn, x, h0, c0=None):
    if isinstance(rnn, nn.LSTM):
        return rnn(x, (h0[None], (h0 if c0 is None else c0)[None]))[0]
    return rnn(x, h0[None])[0]


CELLS = [(nn.GRU, True), (nn.GRU, False), (nn.LSTM, True), (nn.LSTM, False)]


@pytest.mark.parametrize("cls,bias", CELLS)
@pytest.mark.parametrize("shape", [(3, 7, 2, 5), (64, 200, 2, 23), (5, 40, 6, 10), (4, 600, 2, 5)])
def test_forward_matches_pytorch(cls, bias, shape):
    b, t, i, h = shape
    torch.manual_seed(1)
    rnn = cls(i, h, batch_first=True, bias=bias)
    with torch.no_grad():  # non-zero biases, so that a bias in the wrong gate shows
        for p in rnn.parameters():
            p.uniform_(-0.6, 0.6)
    x, h0 = torch.randn(b, t, i), torch.randn(b, h) * 0.5
    y = _fast(rnn, x, h0)
    ref = _reference(rnn, x, h0)
    assert y.shape == ref.shape == (b, t, h) and y.is_contiguous()
    assert (y - ref).abs().max().item() <= 1e-5
    with torch.no_grad():  # the no-grad path (evaluation; 256-step chunks) gives the same numbers
        assert torch.equal(_fast(rnn, x, h0), y.detach())


@pytest.mark.parametrize("cls,bias", CELLS)
def test_gradcheck_float64(cls, bias):
    torch.manual_seed(2)
    rnn = cls(3, 4, batch_first=True, bias=bias).double()
    with torch.no_grad():
        for p in rnn.parameters():
            p.uniform_(-0.8, 0.8)
    x = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    ws = [w.detach().clone().requires_grad_() if w is not None else None for w in _weights(rnn)]
    if cls is nn.LSTM:
        c0 = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
        fn = lambda x, h0, c0, *w: cpu_rnn.lstm_sequence(x, h0, c0, *w)  # noqa: E731
        inputs = (x, h0, c0, *ws)
    else:
        fn = cpu_rnn.gru_sequence
        inputs = (x, h0, *ws)
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-8, rtol=1e-6)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b).abs().max() / b.abs().max()).item()


@pytest.mark.parametrize("cls", [nn.GRU, nn.LSTM])
def test_float32_gradients_within_1e5_of_float64_on_the_training_shape(cls):
    torch.manual_seed(3)
    rnn = cls(2, 23, batch_first=True)
    rnn64 = cls(2, 23, batch_first=True).double()
    rnn64.load_state_dict({k: v.double() for k, v in rnn.state_dict().items()})
    x = torch.randn(64, 200, 2) * 0.3
    h0 = torch.randn(64, 23) * 0.1
    dy = torch.randn(64, 200, 23)
    x32, h32 = x.clone().requires_grad_(), h0.clone().requires_grad_()
    x64, h64 = x.double().requires_grad_(), h0.double().requires_grad_()
    _fast(rnn, x32, h32).backward(dy)
    _reference(rnn64, x64, h64).backward(dy.double())
    pairs = [(x32.grad, x64.grad), (h32.grad, h64.grad)]
    pairs += [(p.grad, q.grad) for p, q in zip(rnn.parameters(), rnn64.parameters())]
    errors = [_rel(a, b) for a, b in pairs]
    assert max(errors) <= 1e-5, errors


@pytest.mark.parametrize("backbone", ["gru", "dgru", "tres_gru"])
@pytest.mark.parametrize("layers", [1, 2])
def test_families_fast_equal_reference_to_float32_rounding(backbone, layers):
    torch.manual_seed(4)
    net = build_model(backbone, 10, layers)
    x = torch.randn(4, 60, 2) * 0.5
    outs, grads = [], []
    for kernel in ("reference", "fast"):
        net.zero_grad(set_to_none=True)
        notes = apply_kernel(net, kernel, "cpu").notes
        assert notes == () and net.backbone.kernel == kernel
        xi = x.clone().requires_grad_()
        y = net(xi)
        y.pow(2).sum().backward()
        outs.append(y.detach())
        grads.append([xi.grad] + [p.grad for p in net.parameters()])
    assert (outs[0] - outs[1]).abs().max().item() <= 1e-5
    for a, b in zip(*grads):
        assert ((a - b).abs().max() / b.abs().max()).item() <= 1e-5


def test_lstm_stays_on_onednn_with_the_reason_and_runs_fast_without_it(monkeypatch):
    lstm = build_model("lstm", 8, 1)
    if torch.backends.mkldnn.is_available():
        assert "oneDNN" in unsupported_reason(lstm.backbone.rnn, "cpu")
        notes = apply_kernel(lstm, "fast", "cpu").notes
        assert lstm.backbone.kernel == "reference" and len(notes) == 1 and "oneDNN" in notes[0]
    monkeypatch.setattr(torch.backends.mkldnn, "enabled", False)
    assert unsupported_reason(lstm.backbone.rnn, "cpu") is None
    assert apply_kernel(lstm, "fast", "cpu").notes == () and lstm.backbone.kernel == "fast"
    assert unsupported_reason(build_model("gru", 8, 1).backbone.rnn, "cpu") is None


def test_two_live_sequences_of_one_shape_and_a_retained_graph():
    """A DPD cascade runs two GRUs of one shape before either backward: each keeps its own workspace. A retained
    graph keeps its workspace until the graph is dropped, so a second backward gives the same gradients."""
    torch.manual_seed(5)
    a, b = nn.GRU(2, 6, batch_first=True), nn.GRU(6, 6, batch_first=True)
    fc = nn.Linear(6, 6)
    x = torch.randn(3, 9, 2)
    h0 = torch.zeros(3, 6)

    def run(fn):
        for m in (a, b, fc):
            m.zero_grad(set_to_none=True)
        y = fn(b, fc(fn(a, x, h0)), h0)
        y.sum().backward(retain_graph=True)
        first = [p.grad.clone() for p in a.parameters()]
        y.sum().backward()
        return first, [p.grad for p in list(a.parameters()) + list(b.parameters())]

    f_first, f_all = run(_fast)
    r_first, r_all = run(_reference)
    for got, want in zip(f_first + f_all, r_first + r_all):
        assert (got - want).abs().max().item() <= 1e-5
    assert all(torch.equal(2 * g, h) for g, h in zip(f_first, f_all[:4]))  # second backward accumulated the same


def test_frozen_weights_give_input_gradients_only():
    """A frozen PA in a DPD cascade: no weight needs a gradient, the input does."""
    torch.manual_seed(6)
    rnn = nn.GRU(2, 5, batch_first=True).requires_grad_(False)
    x = torch.randn(2, 8, 2, requires_grad=True)
    _fast(rnn, x, torch.zeros(2, 5)).pow(2).sum().backward()
    x_ref = x.detach().clone().requires_grad_()
    _reference(rnn, x_ref, torch.zeros(2, 5)).pow(2).sum().backward()
    assert all(p.grad is None for p in rnn.parameters())
    assert (x.grad - x_ref.grad).abs().max().item() <= 1e-6


def test_workspace_pool_reuses_and_is_bounded():
    cpu_rnn._POOL.clear()
    rnn = nn.GRU(2, 4, batch_first=True)
    x = torch.randn(2, 5, 2)
    with torch.no_grad():
        for _ in range(3):
            _fast(rnn, x, torch.zeros(2, 4))
    assert sum(len(v) for v in cpu_rnn._POOL.values()) == 1  # released after each no-grad call, then reused
    with torch.no_grad():
        for t in range(6, 6 + cpu_rnn._POOL_MAX + 3):
            _fast(rnn, torch.randn(2, t, 2), torch.zeros(2, 4))
    assert sum(len(v) for v in cpu_rnn._POOL.values()) <= cpu_rnn._POOL_MAX
    assert not any(w.in_use for v in cpu_rnn._POOL.values() for w in v)
