"""PN-GRU, PN-GRU-2 and the gain-head GRUs GRU-gain, GRU-gain-3, GRU-gain-3p, GRU-gain-5 (dpd_desktop/models/pn_gru.py).

* Parameters: the registry's formula, the cost model and the built module agree, at the Arena budgets' sizes.
* Forward equals an independent NumPy float64 computation written from the equations (complex arithmetic for the
  phase turn, the GRU equations of the PyTorch documentation), a zero sample included.
* The phase-normalized families are equivariant: a common phase turn of the input turns the output alike.
* The fast kernel (CPU backend) against nn.GRU in float64: outputs and every gradient within 1e-5.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from dpd_desktop.families import BACKBONES as NAMES
from dpd_desktop.kernels.dispatch import apply_kernel
from dpd_desktop.models import build_model
from dpd_desktop.models.base import count_parameters
from dpd_desktop.models.cost import model_cost
from dpd_desktop.models.registry import REGISTRY

FAMILIES = ("pn_gru", "pn_gru2", "gru_gain", "gru_gain3", "gru_gain3p", "gru_gain5")
TAPS = {"gru_gain": (0,), "gru_gain3": (-1, 0, 1), "gru_gain3p": (-1, 0, 1), "gru_gain5": (-2, -1, 0, 1, 2)}
AMP_ORDERS = {"gru_gain3p": (2,)}  # gains on x(t)·|x(t)|^p after the taps' 


@pytest.mark.parametrize("backbone,h,params", [("pn_gru", 14, 954), ("pn_gru2", 12, 890), ("gru_gain", 14, 984),
                                               ("pn_gru", 5, 207), ("gru_gain", 9, 499),
                                               ("gru_gain3", 13, 931), ("gru_gain5", 12, 876),
                                               ("gru_gain3p", 13, 959)])
def test_parameter_counts(backbone, h, params):
    assert count_parameters(build_model(backbone, h)) == params
    assert REGISTRY[backbone].param_count(h) == params
    assert model_cost(backbone, h).params == params
    assert count_parameters(build_model(backbone, h, 2)) == REGISTRY[backbone].param_count(h, 2)
    assert backbone in NAMES


def _sig(z):
    return 1.0 / (1.0 + np.exp(-z))


def _np_gru(f, w_ih, w_hh, b_ih, b_hh):
    """PyTorch's GRU equations (r, z, n gate order), float64, h0 = 0: (B, T, I) → (B, T, H)."""
    hid = w_hh.shape[1]
    out = np.zeros(f.shape[:2] + (hid,))
    for b in range(f.shape[0]):
        h = np.zeros(hid)
        for t in range(f.shape[1]):
            gi = w_ih @ f[b, t] + b_ih
            gh = w_hh @ h + b_hh
            r = _sig(gi[:hid] + gh[:hid])
            z = _sig(gi[hid:2 * hid] + gh[hid:2 * hid])
            n = np.tanh(gi[2 * hid:] + r * gh[2 * hid:])
            h = (1 - z) * n + z * h
            out[b, t] = h
    return out


def _np_shift(xc, k):
    """x(t + k) of (B, T) complex, zeros beyond the frame."""
    nb = np.zeros_like(xc)
    if k > 0:
        nb[:, :-k] = xc[:, k:]
    elif k < 0:
        nb[:, -k:] = xc[:, :k]
    else:
        nb[:] = xc
    return nb


def _np_forward(backbone, model, x):
    sd = {k.removeprefix("backbone."): v.detach().double().numpy() for k, v in model.state_dict().items()}
    xc = x[..., 0] + 1j * x[..., 1]
    a = np.abs(xc)
    u = np.where(a > 0, xc / np.where(a > 0, a, 1.0), 0.0)
    if backbone in TAPS:
        f = np.stack([x[..., 0], x[..., 1], a, a ** 3, np.where(a > 0, x[..., 1] / np.where(a > 0, a, 1), 0),
                      np.where(a > 0, x[..., 0] / np.where(a > 0, a, 1), 0)], axis=-1)
    else:
        offsets = (-1, 1) if backbone == "pn_gru" else (-1, 1, -2, 2)
        cols = [a, a ** 3]
        for k in offsets:
            turned = _np_shift(xc, k) * np.conj(u)
            cols += [turned.real, turned.imag]
        f = np.stack(cols, axis=-1)
    h = _np_gru(f, sd["rnn.weight_ih_l0"], sd["rnn.weight_hh_l0"], sd["rnn.bias_ih_l0"], sd["rnn.bias_hh_l0"])
    o = h @ sd["fc_out.weight"].T + sd["fc_out.bias"]
    if backbone in TAPS:
        y = xc + o[..., -2] + 1j * o[..., -1]
        for j, k in enumerate(TAPS[backbone]):
            y = y + _np_shift(xc, k) * (o[..., 2 * j] + 1j * o[..., 2 * j + 1])
        for j, p in enumerate(AMP_ORDERS.get(backbone, ()), start=len(TAPS[backbone])):
            y = y + xc * a ** p * (o[..., 2 * j] + 1j * o[..., 2 * j + 1])
    else:
        y = xc + u * (o[..., 0] + 1j * o[..., 1])
    return np.stack([y.real, y.imag], axis=-1)


@pytest.mark.parametrize("backbone,h", [("pn_gru", 6), ("pn_gru2", 5), ("gru_gain", 6), ("gru_gain3", 5),
                                       ("gru_gain5", 4), ("gru_gain3p", 5)])
def test_forward_equals_numpy(backbone, h):
    torch.manual_seed(3)
    model = build_model(backbone, h).double()
    x = np.random.default_rng(5).normal(scale=0.35, size=(3, 37, 2))
    x[1, 9] = 0.0  # a zero sample: no NaN; the phase-normalized correction there is 0
    with torch.no_grad():
        got = model(torch.from_numpy(x)).numpy()
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, _np_forward(backbone, model, x), rtol=0, atol=1e-12)
    if backbone not in TAPS:
        assert np.array_equal(got[1, 9], x[1, 9])


@pytest.mark.parametrize("backbone", ["pn_gru", "pn_gru2"])
def test_phase_normalized_families_are_equivariant(backbone):
    torch.manual_seed(0)
    model = build_model(backbone, 8).double()
    x = torch.randn(2, 50, 2, dtype=torch.float64) * 0.4
    th = 1.234

    def turn(v):
        c, s = np.cos(th), np.sin(th)
        return torch.stack([v[..., 0] * c - v[..., 1] * s, v[..., 0] * s + v[..., 1] * c], dim=-1)

    with torch.no_grad():
        assert (model(turn(x)) - turn(model(x))).abs().max().item() < 1e-12
        # the gain-head GRU reads absolute phase: not equivariant (the test above can fail)
        gain = build_model("gru_gain", 8).double()
        assert (gain(turn(x)) - turn(gain(x))).abs().max().item() > 1e-3


@pytest.mark.parametrize("backbone", FAMILIES)
def test_fast_kernel_within_1e5_of_float64(backbone):
    torch.manual_seed(1)
    fast = build_model(backbone, 9)
    choice = apply_kernel(fast, "fast", "cpu")
    assert fast.backbone.kernel == "fast", choice.summary
    ref = build_model(backbone, 9).double()
    ref.load_state_dict({k: v.double() for k, v in fast.state_dict().items()})
    x = torch.randn(3, 60, 2) * 0.4
    xf, xr = x.clone().requires_grad_(True), x.double().requires_grad_(True)
    dy = torch.randn(3, 60, 2)
    yf, yr = fast(xf), ref(xr)
    assert (yf.double() - yr).abs().max().item() <= 1e-5
    (yf * dy).sum().backward()
    (yr * dy.double()).sum().backward()
    for got, want in [(xf.grad, xr.grad)] + [(a.grad, b.grad) for a, b in zip(fast.parameters(), ref.parameters())]:
        assert ((got.double() - want).abs().max() / want.abs().max()).item() <= 1e-5
