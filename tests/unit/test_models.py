"""Unit tests for dpd_desktop.models (reference spec §2.4, §2.5, §3, §5.1)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from dpd_desktop.models import (
    BACKBONES,
    REGISTRY,
    Cascade,
    CoreModel,
    ModelFamily,
    build_model,
    count_parameters,
)
from dpd_desktop.models import dgru as dgru_mod
from dpd_desktop.models import gru as gru_mod
from dpd_desktop.models import rvtdcnn as rvtdcnn_mod
from dpd_desktop.models import tres_gru as tres_mod
from dpd_desktop.models.base import safe_amplitude

ALL = ("gru", "dgru", "lstm", "tres_gru", "rvtdcnn")


# ---------------------------------------------------------------------------------------------------------------------
# Parameter counts (§3.2–§3.6)
# ---------------------------------------------------------------------------------------------------------------------

PINNED = [
    ("gru", 23, 1, 1911),
    ("lstm", 23, 1, 2532),
    ("dgru", 23, 1, 2751),
    ("tres_gru", 23, 1, 2071),
    ("rvtdcnn", 23, 1, 929),
    ("gru", 15, 1, 887),
    ("tres_gru", 10, 1, 524),
    ("tres_gru", 27, 1, 2751),
]


@pytest.mark.parametrize("name,hidden,layers,expected", PINNED)
def test_pinned_parameter_counts(name, hidden, layers, expected):
    model = build_model(name, hidden, layers)
    assert count_parameters(model) == expected
    assert REGISTRY[name].param_count(hidden, layers) == expected


@pytest.mark.parametrize("hidden", [1, 7, 23])
@pytest.mark.parametrize("layers", [2, 3])
def test_extra_layer_parameter_counts(hidden, layers):
    h = hidden
    gru1 = count_parameters(build_model("gru", h, 1))
    lstm1 = count_parameters(build_model("lstm", h, 1))
    assert count_parameters(build_model("gru", h, layers)) == gru1 + (layers - 1) * (6 * h * h + 6 * h)
    assert count_parameters(build_model("lstm", h, layers)) == lstm1 + (layers - 1) * (8 * h * h + 8 * h)
    for name in ALL:
        assert count_parameters(build_model(name, h, layers)) == REGISTRY[name].param_count(h, layers), name
    # RVTDCNN ignores num_layers (§3.6)
    assert count_parameters(build_model("rvtdcnn", h, layers)) == 39 * h + 32


def test_count_parameters_includes_frozen():
    model = build_model("gru", 23)
    for p in model.parameters():
        p.requires_grad_(False)
    assert count_parameters(model) == 1911


# ---------------------------------------------------------------------------------------------------------------------
# build_model / CoreModel / registry API
# ---------------------------------------------------------------------------------------------------------------------

def test_backbones_and_registry():
    # + the MP/GMP baselines (tests/unit/test_poly.py), the frontier families (tests/unit/test_frontier_models.py) and
    # the phase-normalized and gain-head GRUs (tests/unit/test_pn_gru.py)
    assert set(BACKBONES) == set(ALL) | {"mp", "gmp"} | {"deltagru", "tres_deltagru", "gru_amp", "tcn"} \
        | {"pn_gru", "pn_gru2", "gru_gain", "gru_gain3", "gru_gain3p", "gru_gain5"}
    assert [n for n in BACKBONES if REGISTRY[n].poly] == ["mp", "gmp"]
    labels = {n: REGISTRY[n].label for n in ALL}
    assert labels == {"gru": "GRU", "dgru": "DGRU", "lstm": "LSTM", "tres_gru": "TRes-GRU", "rvtdcnn": "RVTDCNN"}
    assert {n: REGISTRY[n].n_features for n in ALL} == {"gru": 2, "dgru": 6, "lstm": 2, "tres_gru": 6, "rvtdcnn": 5}
    assert [n for n in ALL if not REGISTRY[n].has_layers] == ["rvtdcnn"]
    x = torch.randn(2, 9, 2)
    for name in ALL:
        fam = REGISTRY[name]
        assert isinstance(fam, ModelFamily)
        assert fam.name == name
        assert len(fam.features) == fam.n_features
        assert fam.feature_fn(x).shape == (2, 9, fam.n_features)
        assert fam.description


def test_build_model_attributes_and_case_insensitive():
    m = build_model("TRes_GRU", 12, 2)
    assert isinstance(m, CoreModel)
    assert m.backbone_name == "tres_gru"
    assert (m.hidden_size, m.num_layers, m.input_size, m.output_size) == (12, 2, 2, 2)
    assert isinstance(m.backbone, tres_mod.TResGRUBackbone)
    assert build_model(" GRU ", 4).backbone_name == "gru"


def test_build_model_errors():
    with pytest.raises(ValueError) as err:
        build_model("transformer", 23)
    for name in ALL:
        assert name in str(err.value)
    with pytest.raises(ValueError):
        build_model("gru", 0)
    with pytest.raises(ValueError):
        build_model("gru", -3)
    with pytest.raises(ValueError):
        build_model("gru", 8, 0)


def test_gru_state_dict_keys():
    keys = list(build_model("gru", 23).state_dict().keys())
    assert keys == [
        "backbone.rnn.weight_ih_l0",
        "backbone.rnn.weight_hh_l0",
        "backbone.rnn.bias_ih_l0",
        "backbone.rnn.bias_hh_l0",
        "backbone.fc_out.weight",
        "backbone.fc_out.bias",
    ]
    sd = build_model("gru", 23).state_dict()
    assert sd["backbone.rnn.weight_ih_l0"].shape == (69, 2)
    assert sd["backbone.rnn.weight_hh_l0"].shape == (69, 23)
    assert all(v.dtype == torch.float32 for v in sd.values())
    keys2 = list(build_model("gru", 8, 2).state_dict().keys())
    assert keys2[:8] == [f"backbone.rnn.{k}_l{i}" for i in (0, 1)
                         for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    assert keys2[8:] == ["backbone.fc_out.weight", "backbone.fc_out.bias"]


def test_other_family_state_dict_keys():
    """Key names and order as in the reference checkpoints (§3.4–§3.6; bitwise check in test_models_vs_reference.py)."""
    rnn = [f"backbone.rnn.{k}_l{i}" for i in (0, 1) for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    assert list(build_model("dgru", 23, 2).state_dict()) == rnn + [
        "backbone.fc_out.weight", "backbone.fc_out.bias", "backbone.fc_hid.weight", "backbone.fc_hid.bias",
    ]
    assert list(build_model("lstm", 23, 2).state_dict()) == rnn + ["backbone.fc_out.weight", "backbone.fc_out.bias"]
    rnn_nobias = [f"backbone.rnn.{k}_l{i}" for i in (0, 1) for k in ("weight_ih", "weight_hh")]
    assert list(build_model("tres_gru", 23, 2).state_dict()) == rnn_nobias + [
        "backbone.fc_out.weight", "backbone.tcn.0.weight", "backbone.tcn.2.weight",
    ]
    sd = build_model("tres_gru", 23).state_dict()
    assert sd["backbone.tcn.0.weight"].shape == (3, 2, 3) and sd["backbone.tcn.2.weight"].shape == (2, 3, 1)
    sd = build_model("rvtdcnn", 23).state_dict()
    assert list(sd) == [
        "backbone.Conv2d.weight", "backbone.Conv2d.bias", "backbone.fc_hid.weight", "backbone.fc_hid.bias",
        "backbone.fc_out.weight", "backbone.fc_out.bias",
    ]
    assert sd["backbone.Conv2d.weight"].shape == (3, 1, 3, 3) and sd["backbone.fc_hid.weight"].shape == (23, 36)


# ---------------------------------------------------------------------------------------------------------------------
# Forward shapes
# ---------------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("layers", [1, 2])
def test_forward_shapes(name, layers):
    torch.manual_seed(1)
    model = build_model(name, 11, layers)
    x = torch.randn(3, 50, 2)
    y = model(x)
    assert y.shape == (3, 50, 2)
    assert y.dtype == torch.float32
    assert torch.isfinite(y).all()


@pytest.mark.parametrize("dpd_name", ALL)
def test_cascade_forward_shapes(dpd_name):
    torch.manual_seed(2)
    pa = build_model("gru", 23)
    dpd = build_model(dpd_name, 10)
    cascade = Cascade(dpd, pa)
    x = torch.randn(3, 50, 2)
    y = cascade(x)
    assert y.shape == (3, 50, 2)
    assert torch.equal(y, pa(dpd(x)))
    assert [n for n, _ in cascade.named_children()] == ["dpd", "pa"]


# ---------------------------------------------------------------------------------------------------------------------
# Feature extraction vs hand computation (§2.4)
# ---------------------------------------------------------------------------------------------------------------------

SAMPLES = [(3.0, 4.0), (0.0, 1.0), (-1.0, 0.0), (0.6, -0.8), (-0.25, 0.5)]


def _x(samples=SAMPLES):
    return torch.tensor([samples], dtype=torch.float32)  # (1, T, 2)


def _close(actual: torch.Tensor, expected_rows):
    exp = torch.tensor([expected_rows], dtype=torch.float32)
    assert actual.shape == exp.shape
    torch.testing.assert_close(actual, exp, rtol=1e-6, atol=1e-7)


def test_gru_features_are_iq():
    x = _x()
    assert torch.equal(gru_mod.features(x), x)


def test_dgru_features_hand():
    rows = []
    for i, q in SAMPLES:
        a = math.hypot(i, q)
        rows.append([i, q, a, a**3, q / a, i / a])
    _close(dgru_mod.features(_x()), rows)


def test_tres_features_hand():
    rows = []
    n = len(SAMPLES)
    for t, (i, q) in enumerate(SAMPLES):
        a = math.hypot(i, q)
        ni, nq = SAMPLES[(t + 1) % n]  # circular shift by -1 within the frame (§2.4, §9.7)
        rows.append([i, q, a, a**3, ni, nq])
    _close(tres_mod.features(_x()), rows)


def test_rvtdcnn_features_and_windows_hand():
    rows = []
    for i, q in SAMPLES:
        a = math.hypot(i, q)
        rows.append([i, q, a, a**2, a**3])
    f = rvtdcnn_mod.features(_x())
    _close(f, rows)
    w = rvtdcnn_mod.windows(f)
    n = len(SAMPLES)
    assert w.shape == (1, n, 4, 5)
    for t in range(n):
        expected = [rows[(t - 3 + k) % n] for k in range(4)]  # circular pre-pad with the last 3 samples (§3.6)
        _close(w[:, t], expected)


def test_rvtdcnn_power_feature_is_sum_of_squares():
    """|x|² is I² + Q² itself, not sqrt(I² + Q²)² (they differ in the last bit for many inputs; §3.6)."""
    torch.manual_seed(0)
    x = torch.randn(4, 200, 2)
    i, q = x[..., 0], x[..., 1]
    f = rvtdcnn_mod.features(x)
    assert torch.equal(f[..., 3], i**2 + q**2)
    assert torch.equal(f[..., 2], torch.sqrt(i**2 + q**2))
    assert torch.equal(f[..., 4], torch.sqrt(i**2 + q**2) ** 3)
    assert not torch.equal(f[..., 3], torch.sqrt(i**2 + q**2) ** 2)  # the rejected alternative really differs


def test_rvtdcnn_output_depends_on_window_only():
    torch.manual_seed(3)
    model = build_model("rvtdcnn", 8)
    x = torch.randn(1, 12, 2)
    base = model(x)
    for s in (0, 5, 11):
        x2 = x.clone()
        x2[0, s] += 0.5
        changed = (model(x2) != base).any(-1)[0]
        expected = torch.zeros(12, dtype=torch.bool)
        for t in range(12):
            if s in {(t - k) % 12 for k in range(4)}:
                expected[t] = True
        assert torch.equal(changed, expected), s


# ---------------------------------------------------------------------------------------------------------------------
# Initialization (§3.2): determinism and independent re-derivation of the RNG order
# ---------------------------------------------------------------------------------------------------------------------

def _sd_equal(a: nn.Module, b: nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return list(sa) == list(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("name", ALL)
def test_init_determinism(name):
    torch.manual_seed(0)
    a = build_model(name, 23)
    ra = torch.rand(3)
    torch.manual_seed(0)
    b = build_model(name, 23)
    rb = torch.rand(3)
    assert _sd_equal(a, b)
    assert torch.equal(ra, rb)
    torch.manual_seed(1)
    c = build_model(name, 23)
    assert not _sd_equal(a, c)


def _hand_orthogonal(rows: int, cols: int) -> torch.Tensor:
    """Orthogonal block as §3.2 describes: fresh standard-normal draw of the block shape, then QR with sign fix."""
    a = torch.empty(rows, cols).normal_(0, 1)
    transpose = rows < cols
    if transpose:
        a = a.t()
    q, r = torch.linalg.qr(a)
    q = q * torch.diag(r, 0).sign()
    return q.t() if transpose else q


def _hand_xavier(rows: int, cols: int) -> torch.Tensor:
    block = torch.empty(rows, cols)
    nn.init.xavier_uniform_(block)  # fan_in = cols (input size), fan_out = rows (H)
    return block


def _hand_gru_reference(hidden: int, layers: int, gates: int = 3, cls=nn.GRU, order: str = "reference"):
    """Re-derive the §3.2 init independently of the package code; returns (rnn, fc)."""
    rnn = cls(2, hidden, num_layers=layers, batch_first=True)
    fc = nn.Linear(hidden, 2)
    new = {}
    deferred_xavier = []
    for name, p in rnn.named_parameters():
        if name.startswith("bias"):
            new[name] = torch.zeros_like(p)
            continue
        cols = p.shape[1]
        new[name] = torch.cat([_hand_orthogonal(hidden, cols) for _ in range(gates)])
        if name == "weight_ih_l0":
            if order == "reference":
                new[name] = torch.cat([_hand_xavier(hidden, cols) for _ in range(gates)])
            else:
                deferred_xavier.append((name, cols))
    for name, cols in deferred_xavier:  # wrong order on purpose: all orthogonal first
        new[name] = torch.cat([_hand_xavier(hidden, cols) for _ in range(gates)])
    with torch.no_grad():
        for name, p in rnn.named_parameters():
            p.copy_(new[name])
        w = torch.empty(2, hidden)
        nn.init.xavier_uniform_(w)
        fc.weight.copy_(w)
        fc.bias.zero_()
    return rnn, fc


@pytest.mark.parametrize("layers", [1, 2])
def test_gru_init_matches_independent_rederivation(layers):
    H = 23
    torch.manual_seed(0)
    rnn, fc = _hand_gru_reference(H, layers)
    after_hand = torch.rand(4)
    torch.manual_seed(0)
    model = build_model("gru", H, layers)
    after_model = torch.rand(4)
    sd = model.state_dict()
    for name, p in rnn.named_parameters():
        assert torch.equal(sd[f"backbone.rnn.{name}"], p), name
    assert torch.equal(sd["backbone.fc_out.weight"], fc.weight)
    assert torch.equal(sd["backbone.fc_out.bias"], fc.bias)
    assert torch.equal(after_hand, after_model)  # same total RNG consumption


def test_lstm_init_matches_independent_rederivation():
    H = 9
    torch.manual_seed(5)
    rnn, fc = _hand_gru_reference(H, 1, gates=4, cls=nn.LSTM)
    torch.manual_seed(5)
    sd = build_model("lstm", H).state_dict()
    for name, p in rnn.named_parameters():
        assert torch.equal(sd[f"backbone.rnn.{name}"], p), name
    assert torch.equal(sd["backbone.fc_out.weight"], fc.weight)


def test_gru_init_order_matters():
    torch.manual_seed(0)
    rnn, _ = _hand_gru_reference(23, 1, order="all-orthogonal-first")
    torch.manual_seed(0)
    sd = build_model("gru", 23).state_dict()
    # Xavier after *all* orthogonal draws (§3.2 says: right after weight_ih_l0's own) gives different weights
    assert not torch.equal(sd["backbone.rnn.weight_ih_l0"], rnn.weight_ih_l0)
    assert not torch.equal(sd["backbone.rnn.weight_hh_l0"], rnn.weight_hh_l0)


def test_gru_init_properties():
    H = 23
    torch.manual_seed(0)
    m = build_model("gru", H, 2)
    rnn = m.backbone.rnn
    bound = math.sqrt(6.0 / (2 + H))
    w_ih = rnn.weight_ih_l0.detach()
    assert w_ih.abs().max().item() <= bound * (1 + 1e-6)
    assert w_ih.abs().max().item() > math.sqrt(6.0 / (2 + 3 * H))  # block fan_out = H, not 3H
    eye = torch.eye(H)
    for name in ("weight_hh_l0", "weight_hh_l1", "weight_ih_l1"):
        w = getattr(rnn, name).detach()
        for g in range(3):
            blk = w[g * H:(g + 1) * H]
            torch.testing.assert_close(blk @ blk.T, eye, atol=1e-5, rtol=0)
    for name, p in rnn.named_parameters():
        if name.startswith("bias"):
            assert torch.count_nonzero(p) == 0
    assert torch.count_nonzero(m.backbone.fc_out.bias) == 0
    assert m.backbone.fc_out.weight.abs().max().item() <= math.sqrt(6.0 / (H + 2)) * (1 + 1e-6)


def test_other_family_init_properties():
    torch.manual_seed(0)
    d = build_model("dgru", 16).backbone
    assert torch.count_nonzero(d.fc_hid.bias) == 0 and torch.count_nonzero(d.fc_out.bias) == 0
    assert d.fc_hid.weight.abs().max().item() <= math.sqrt(6.0 / 16) * (1 + 1e-6)
    assert d.rnn.weight_ih_l0.abs().max().item() <= math.sqrt(6.0 / (6 + 16)) * (1 + 1e-6)
    t = build_model("tres_gru", 16, 2).backbone
    assert all(not n.endswith("bias") for n, _ in t.named_parameters())
    eye = torch.eye(16)
    for name in ("weight_hh_l0", "weight_hh_l1"):
        w = getattr(t.rnn, name).detach()
        for g in range(3):
            blk = w[g * 16:(g + 1) * 16]
            torch.testing.assert_close(blk @ blk.T, eye, atol=1e-5, rtol=0)
    assert t.rnn.weight_ih_l0.abs().max().item() <= math.sqrt(6.0 / (6 + 16)) * (1 + 1e-6)
    assert t.rnn.weight_ih_l1.abs().max().item() <= math.sqrt(6.0 / 32) * (1 + 1e-6)
    assert not hasattr(build_model("rvtdcnn", 8).backbone, "reset_parameters")  # PyTorch defaults only (§3.6)


def test_rvtdcnn_default_init_rng_order():
    torch.manual_seed(4)
    conv = nn.Conv2d(1, 3, 3, padding=(1, 0))
    fc_hid = nn.Linear(36, 8)
    fc_out = nn.Linear(8, 2)
    torch.manual_seed(4)
    b = build_model("rvtdcnn", 8).backbone
    assert torch.equal(b.Conv2d.weight, conv.weight) and torch.equal(b.Conv2d.bias, conv.bias)
    assert torch.equal(b.fc_hid.weight, fc_hid.weight) and torch.equal(b.fc_out.weight, fc_out.weight)


# ---------------------------------------------------------------------------------------------------------------------
# DGRU zero-sample fix (§2.4, §9.5)
# ---------------------------------------------------------------------------------------------------------------------

def _dgru_unguarded(x: torch.Tensor) -> torch.Tensor:
    """Plain §2.4 formula in the reference's evaluation order (|x|³, then cos φ, then sin φ; §3.4)."""
    i, q = x[..., 0], x[..., 1]
    a = torch.sqrt(i**2 + q**2)
    a3 = a**3
    cos_phi = i / a
    sin_phi = q / a
    return torch.stack([i, q, a, a3, sin_phi, cos_phi], dim=-1)


def test_dgru_zero_tail_is_finite():
    torch.manual_seed(0)
    model = build_model("dgru", 12)
    x = torch.randn(2, 30, 2)
    x[:, 20:] = 0.0
    x.requires_grad_(True)
    f = dgru_mod.features(x)
    assert torch.equal(f[:, 20:], torch.zeros(2, 10, 6))
    y = model(x)
    assert torch.isfinite(y).all()
    y.pow(2).sum().backward()
    assert torch.isfinite(x.grad).all()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    # the unguarded formula is the reference quirk: NaN features at zero samples
    assert torch.isnan(_dgru_unguarded(x.detach())[:, 20:, 4:]).all()


def test_dgru_guard_is_bitwise_neutral_for_nonzero_samples():
    torch.manual_seed(0)
    model = build_model("dgru", 12)
    x = torch.randn(3, 40, 2) * torch.logspace(-6, 1, 40).view(1, 40, 1)
    assert (x.abs().sum(-1) > 0).all()
    x1 = x.clone().requires_grad_(True)
    x2 = x.clone().requires_grad_(True)
    f_guarded = dgru_mod.features(x1)
    f_plain = _dgru_unguarded(x2)
    assert torch.equal(f_guarded, f_plain)
    h0 = torch.zeros(1, 3, 12)
    y1 = model(x1)
    y2 = model.backbone.forward_features(f_plain, h0)
    assert torch.equal(y1, y2)
    y1.sum().backward()
    y2.sum().backward()
    assert torch.equal(x1.grad, x2.grad)


def test_safe_amplitude_bitwise_and_zero_gradient():
    torch.manual_seed(0)
    x = torch.randn(2, 16, 2)
    x[:, -3:] = 0.0
    w = torch.randn(2, 16)
    x1 = x.clone().requires_grad_(True)
    a = safe_amplitude(x1[..., 0], x1[..., 1])
    assert torch.equal(a, torch.sqrt(x[..., 0] ** 2 + x[..., 1] ** 2))
    (a * w).sum().backward()
    assert torch.isfinite(x1.grad).all()
    assert torch.equal(x1.grad[:, -3:], torch.zeros(2, 3, 2))
    x2 = x[:, :-3].clone().requires_grad_(True)
    (torch.sqrt(x2[..., 0] ** 2 + x2[..., 1] ** 2) * w[:, :-3]).sum().backward()
    assert torch.equal(x1.grad[:, :-3], x2.grad)


@pytest.mark.parametrize("name", ALL)
def test_zero_tail_finite_all_families(name):
    torch.manual_seed(0)
    model = build_model(name, 8)
    x = torch.randn(2, 40, 2)
    x[:, 30:] = 0.0
    x.requires_grad_(True)
    y = model(x)
    assert torch.isfinite(y).all()
    y.square().sum().backward()
    assert torch.isfinite(x.grad).all()


# ---------------------------------------------------------------------------------------------------------------------
# Cascade with frozen PA (§5.1)
# ---------------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dpd_name", ["gru", "dgru"])
def test_cascade_frozen_pa(dpd_name):
    torch.manual_seed(0)
    pa = build_model("gru", 23)
    dpd = build_model(dpd_name, 15)
    cascade = Cascade(dpd, pa)
    cascade.freeze_pa()
    assert all(not p.requires_grad for p in pa.parameters())
    trainable = [p for p in cascade.parameters() if p.requires_grad]
    assert len(trainable) == len(list(dpd.parameters()))
    assert all(a is b for a, b in zip(trainable, dpd.parameters()))

    pa_before = {k: v.clone() for k, v in pa.state_dict().items()}
    dpd_before = {k: v.clone() for k, v in dpd.state_dict().items()}
    opt = torch.optim.AdamW(trainable, lr=1e-2)
    x = torch.randn(4, 20, 2) * 0.5
    target = 2.0 * x
    for _ in range(3):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(cascade(x), target)
        loss.backward()
        opt.step()
    for k, v in pa.state_dict().items():
        assert torch.equal(v, pa_before[k]), k
    for k, v in dpd.state_dict().items():
        assert not torch.equal(v, dpd_before[k]), k
    for p in pa.parameters():
        assert p.grad is None
    for p in dpd.parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0


def test_cascade_follows_train_eval():
    cascade = Cascade(build_model("gru", 4), build_model("gru", 5)).freeze_pa()
    cascade.eval()
    assert not cascade.pa.training and not cascade.dpd.training
    cascade.train()
    assert cascade.pa.training and cascade.dpd.training
    assert list(cascade.state_dict())[0].startswith("dpd.backbone.")
