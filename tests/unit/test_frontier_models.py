"""The frontier families DeltaGRU, TRes-DeltaGRU and TCN (models/deltagru.py, tres_deltagru.py, tcn.py).

* Parameter counts equal the counts OpenDPD 2.4.2's Arena v6 leaderboard states for the same configurations (the
  numbers are typed in here; with the wheel's assets present, every row of the three families is checked too), and
  the registry formula, the built model and models/cost.py agree.
* Forward outputs equal an independent NumPy re-implementation (float64, written from the equations in the module
  docstrings) on a few frames, for zero and nonzero delta thresholds.
* With OpenDPD 2.4.2's backbones present (``make arena-data`` unpacks them into ``.ref/opendpd-2.4.2-arena``;
  git-ignored, only imported here): after the same seed the state_dict and the global RNG state are bitwise equal;
  with nonzero thresholds forward and gradients are bitwise equal; TCN bitwise; at zero thresholds our dense
  recurrence is within float32 rounding of its delta recurrence.
* Each family trains (the epoch-mean training loss falls) as a PA and as a DPD on a slice of DPA_200MHz, CPU.
"""
from __future__ import annotations

import contextlib
import importlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.models import REGISTRY, build_model, count_parameters
from dpd_desktop.models.cost import model_cost
from dpd_desktop.models.deltagru import delta_sequence
from dpd_desktop.models.tres_deltagru import KEYS_2_4_2
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training.trainer import Trainer
from tests.datasets_dir import DATASETS

ARENA_REF = Path(__file__).resolve().parents[2] / ".ref" / "opendpd-2.4.2-arena"
ARENA_ROWS = ARENA_REF / "opendpd" / "arena_assets" / "reference-results-v6-apa-b.json"
NEED_ARENA = pytest.mark.skipif(
    not (ARENA_REF / "backbones" / "deltagru.py").is_file() or not ARENA_ROWS.is_file(),
    reason=f"OpenDPD 2.4.2 reference sources not found at {ARENA_REF} (git-ignored; `make arena-data` unpacks them)")
DPA200 = DATASETS / "DPA_200MHz"
NEED_DPA200 = pytest.mark.skipif(not (DPA200 / "spec.json").is_file(),
                                 reason=f"dataset DPA_200MHz not found at {DPA200}")

FAMILIES = ("deltagru", "tres_deltagru", "tcn", "gru_amp")
WHEEL_KEY = {"gru_amp": "qgru_amp1"}  # our family → OpenDPD 2.4.2's backbone key / module
# (backbone, hidden size) -> parameters, as OpenDPD 2.4.2's Arena v6 rows state them (reference-results-v6-apa-b.json)
ARENA_COUNTS = {("deltagru", 5): 207, ("deltagru", 9): 479, ("deltagru", 14): 954, ("deltagru", 21): 1871,
                ("tres_deltagru", 5): 199, ("tres_deltagru", 9): 447, ("tres_deltagru", 15): 999,
                ("tres_deltagru", 22): 1916, ("tcn", 8): 232, ("tcn", 17): 493, ("tcn", 34): 986, ("tcn", 68): 1972,
                ("gru_amp", 6): 230, ("gru_amp", 9): 425, ("gru_amp", 15): 977, ("gru_amp", 22): 1894}


@pytest.mark.parametrize("key", sorted(ARENA_COUNTS), ids=lambda k: f"{k[0]}-{k[1]}")
def test_parameter_counts_equal_the_arena_rows(key):
    backbone, h = key
    model = build_model(backbone, h)
    assert count_parameters(model) == ARENA_COUNTS[key]
    assert REGISTRY[backbone].param_count(h) == ARENA_COUNTS[key]
    assert model_cost(backbone, h).params == ARENA_COUNTS[key]


def test_costs_per_sample():
    # DeltaGRU H: GRU(6, H) dense 3H(6+H) + head 2H weight MACs, 3H gate products + 4 feature products
    h = 14
    c = model_cost("deltagru", h)
    assert (c.weight_macs, c.elementwise_macs) == (3 * h * (6 + h) + 2 * h, 3 * h + 4)
    # TCN C: 6C + 4*5C + 2C weight MACs; 5C Hardswish + sqrt + 2 divisions
    c = model_cost("tcn", 17)
    assert (c.weight_macs, c.activations) == (28 * 17, 5 * 17 + 3)
    assert model_cost("tres_deltagru", 15) == model_cost("tres_gru", 15)


def test_more_layers_and_thresholds_validated():
    m = build_model("deltagru", 6, 2)
    assert count_parameters(m) == REGISTRY["deltagru"].param_count(6, 2) == 3 * 36 + 26 * 6 + 2 + 6 * 36 + 36
    with pytest.raises(ValueError, match="thx"):
        build_model("deltagru", 6, thx=-0.1)
    with pytest.raises(ValueError, match="thh"):
        build_model("tres_deltagru", 6, thh=float("nan"))
    with pytest.raises(Exception, match="thx"):
        ExperimentConfig(backbone="deltagru", thx=-1.0).validate()


# ------------------------------------------------------------------------------------------------ NumPy forward
def _sig(v):
    return 1.0 / (1.0 + np.exp(-v))


def _hswish(v):
    return v * np.clip(v + 3.0, 0.0, 6.0) / 6.0


def _np_polar(x):
    i, q = x[..., 0], x[..., 1]
    a = np.sqrt(i * i + q * q)
    den = np.where(a == 0, 1.0, a)
    return np.stack([i, q, a, a ** 3, q / den, i / den], axis=-1)


def _np_tres_features(x):
    nxt = np.roll(x, -1, axis=1)
    i, q = x[..., 0], x[..., 1]
    a = np.sqrt(i * i + q * q)
    return np.stack([i, q, a, a ** 3, nxt[..., 0], nxt[..., 1]], axis=-1)


def _np_delta_gru(f, w_ih, w_hh, b_ih, b_hh, thx, thh):
    """Delta GRU written with explicit per-gate memories (thresholds 0: a plain GRU, the deltas telescope)."""
    B, T, n_in = f.shape
    H = w_hh.shape[1]
    b_ih = np.zeros(3 * H) if b_ih is None else b_ih
    b_hh = np.zeros(3 * H) if b_hh is None else b_hh
    wr, wz, wn = w_ih[:H], w_ih[H:2 * H], w_ih[2 * H:]
    ur, uz, un = w_hh[:H], w_hh[H:2 * H], w_hh[2 * H:]
    out = np.zeros((B, T, H))
    for b in range(B):
        xh, hh, h = np.zeros(n_in), np.zeros(H), np.zeros(H)
        mr, mz = b_ih[:H] + b_hh[:H], b_ih[H:2 * H] + b_hh[H:2 * H]
        mn, mnh = b_ih[2 * H:].copy(), b_hh[2 * H:].copy()
        for t in range(T):
            dx = f[b, t] - xh
            keep = np.abs(dx) >= thx
            dx = np.where(keep, dx, 0.0)
            xh = np.where(keep, f[b, t], xh)
            dh = h - hh
            keep = np.abs(dh) >= thh
            dh = np.where(keep, dh, 0.0)
            hh = np.where(keep, h, hh)
            mr = mr + wr @ dx + ur @ dh
            mz = mz + wz @ dx + uz @ dh
            mn = mn + wn @ dx
            mnh = mnh + un @ dh
            r, z = _sig(mr), _sig(mz)
            n = np.tanh(mn + r * mnh)
            h = (1 - z) * n + z * h
            out[b, t] = h
    return out


def _np_conv1d(x, w, pad, dil=1, groups=1):
    """x (C_in, T), w (C_out, C_in/groups, K), zero padding ``pad`` both ends → (C_out, T + 2 pad - dil (K-1))."""
    c_out, per, k = w.shape
    xp = np.pad(x, ((0, 0), (pad, pad)))
    t_out = xp.shape[1] - dil * (k - 1)
    y = np.zeros((c_out, t_out))
    out_per = c_out // groups
    for o in range(c_out):
        g = o // out_per
        for ci in range(per):
            for j in range(k):
                y[o] += w[o, ci, j] * xp[g * per + ci, j * dil:j * dil + t_out]
    return y


def _np_forward(backbone, model, x, thx=0.0, thh=0.0):
    sd = {k.removeprefix("backbone."): v.detach().double().numpy() for k, v in model.state_dict().items()}
    if backbone == "deltagru":
        h = _np_delta_gru(_np_polar(x), sd["rnn.weight_ih_l0"], sd["rnn.weight_hh_l0"], sd["rnn.bias_ih_l0"],
                          sd["rnn.bias_hh_l0"], thx, thh)
        return h @ sd["fc_out.weight"].T + sd["fc_out.bias"]
    if backbone == "tres_deltagru":
        h = _np_delta_gru(_np_tres_features(x), sd["rnn.weight_ih_l0"], sd["rnn.weight_hh_l0"], None, None, thx, thh)
        out = h @ sd["fc_out.weight"].T
        for b in range(x.shape[0]):
            r = _hswish(_np_conv1d(x[b].T, sd["tcn.0.weight"], pad=16, dil=16))
            out[b] += _hswish(_np_conv1d(r, sd["tcn.2.weight"], pad=0)).T
        return out
    if backbone == "gru_amp":
        i, q = x[..., 0], x[..., 1]
        a = np.sqrt(i * i + q * q)
        f = np.stack([i, q, a, a ** 3], axis=-1)
        h = _np_delta_gru(f, sd["rnn.weight_ih_l0"], sd["rnn.weight_hh_l0"], sd["rnn.bias_ih_l0"], sd["rnn.bias_hh_l0"],
                          0.0, 0.0)
        return h @ sd["fc_out.weight"].T + sd["fc_out.bias"]
    out = np.zeros_like(x)
    c = model.hidden_size
    for b in range(x.shape[0]):
        v = _hswish(_np_conv1d(_np_polar(x[b:b + 1])[0].T, sd["network.0.weight"], 0) + sd["network.0.bias"][:, None])
        for idx, d in zip((2, 4, 6, 8), (1, 2, 4, 8)):
            v = _hswish(_np_conv1d(v, sd[f"network.{idx}.weight"], pad=2 * d, dil=d, groups=c))
        out[b] = _np_conv1d(v, sd["network.10.weight"], 0).T + x[b]
    return out


@pytest.mark.parametrize("backbone,h,thx,thh", [("deltagru", 7, 0.0, 0.0), ("deltagru", 7, 0.08, 0.03),
                                                ("tres_deltagru", 6, 0.0, 0.0), ("tres_deltagru", 6, 0.05, 0.05),
                                                ("tcn", 5, 0.0, 0.0), ("gru_amp", 6, 0.0, 0.0)])
def test_forward_equals_numpy(backbone, h, thx, thh):
    torch.manual_seed(4)
    model = build_model(backbone, h, thx=thx, thh=thh).double()
    rng = np.random.default_rng(7)
    x = rng.normal(scale=0.35, size=(3, 45, 2))
    x[1, 10] = 0.0  # an exactly-zero sample: finite features
    with torch.no_grad():
        got = model(torch.from_numpy(x)).numpy()
    want = _np_forward(backbone, model, x, thx, thh)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    if thx > 0:  # the thresholds matter: the dense model differs
        dense = build_model(backbone, h).double()
        dense.load_state_dict(model.state_dict())
        with torch.no_grad():
            assert np.abs(dense(torch.from_numpy(x)).numpy() - got).max() > 1e-4


@pytest.mark.parametrize("backbone", ["deltagru", "tres_deltagru"])
def test_zero_thresholds_dense_equals_delta_recurrence(backbone):
    torch.manual_seed(2)
    model = build_model(backbone, 9)
    bb = model.backbone
    x = torch.randn(4, 80, 2) * 0.4
    feats = (importlib.import_module(f"dpd_desktop.models.{backbone}").features
             if backbone == "deltagru" else importlib.import_module("dpd_desktop.models.tres_gru").features)(x)
    h0 = torch.zeros(1, 4, 9)
    delta = delta_sequence(bb.rnn, feats, h0, 0.0, 0.0)
    dense = bb.rnn(feats, h0)[0]
    assert (delta - dense).abs().max().item() < 2e-6


# ------------------------------------------------------------------------------------------------ vs OpenDPD 2.4.2
@contextlib.contextmanager
def _wheel_backbones():
    stashed = {n: m for n, m in sys.modules.items() if n.split(".")[0] in ("backbones", "quant")}
    for n in stashed:
        del sys.modules[n]
    dont_write, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    sys.path.insert(0, str(ARENA_REF))
    try:
        importlib.invalidate_caches()
        yield {k: importlib.import_module(f"backbones.{WHEEL_KEY.get(k, k)}") for k in FAMILIES}
    finally:
        sys.path.remove(str(ARENA_REF))
        sys.dont_write_bytecode = dont_write
        for n in [n for n in sys.modules if n.split(".")[0] in ("backbones", "quant")]:
            del sys.modules[n]
        sys.modules.update(stashed)


def _wheel_model(mods, backbone, h, thx=0.0, thh=0.0):
    if backbone == "deltagru":
        m = mods["deltagru"].DeltaGRU(2, h, 2, 1, thx, thh)
    elif backbone == "tres_deltagru":
        m = mods["tres_deltagru"].TResDeltaGRU(2, h, 2, 1, thx, thh)
    elif backbone == "gru_amp":
        m = mods["gru_amp"].QGRU(h, 2, 1)
        m.reset_parameters()
        return m
    else:
        return mods["tcn"].TCN(h)
    m.reset_parameters()
    m.set_debug(0)
    return m


def _ours_as_wheel(backbone, model):
    keys = KEYS_2_4_2 if backbone == "tres_deltagru" else {}
    return {keys.get(k, k): v for k, v in model.backbone.state_dict().items()}


@NEED_ARENA
def test_arena_rows_parameter_counts():
    rows = json.loads(ARENA_ROWS.read_text())["rows"]
    seen = 0
    ours = {WHEEL_KEY.get(k, k): k for k in FAMILIES}
    for row in rows:
        if row["backbone"] not in ours:
            continue
        for b in row["budgets"]:
            if b["available"]:
                assert count_parameters(build_model(ours[row["backbone"]], b["model_parameters"]["hidden_size"])) \
                    == b["parameters"]
                seen += 1
    assert seen == 16


@NEED_ARENA
@pytest.mark.parametrize("backbone,h", [("deltagru", 14), ("deltagru", 21), ("tres_deltagru", 15), ("tcn", 17),
                                       ("gru_amp", 15)])
def test_init_and_rng_bitwise_equal_to_opendpd_242(backbone, h):
    with _wheel_backbones() as mods:
        for seed in (0, 5):
            torch.manual_seed(seed)
            ref = _wheel_model(mods, backbone, h)
            rng_ref = torch.get_rng_state()
            torch.manual_seed(seed)
            ours = build_model(backbone, h)
            assert torch.equal(torch.get_rng_state(), rng_ref)
            mine, theirs = _ours_as_wheel(backbone, ours), ref.state_dict()
            assert list(mine) == list(theirs)
            assert all(torch.equal(mine[k], theirs[k]) for k in theirs)


@NEED_ARENA
@pytest.mark.parametrize("backbone,h,thx,thh", [("deltagru", 8, 0.05, 0.02), ("tres_deltagru", 9, 0.05, 0.02),
                                                ("tcn", 6, 0.0, 0.0), ("gru_amp", 7, 0.0, 0.0)])
def test_forward_and_gradients_bitwise_equal_to_opendpd_242(backbone, h, thx, thh):
    with _wheel_backbones() as mods:
        torch.manual_seed(1)
        ref = _wheel_model(mods, backbone, h, thx, thh)
        torch.manual_seed(1)
        ours = build_model(backbone, h, thx=thx, thh=thh)
        x1 = (torch.randn(3, 40, 2) * 0.4).requires_grad_(True)
        x2 = x1.detach().clone().requires_grad_(True)
        y1, y2 = ref(x1, None), ours(x2)
        assert torch.equal(y1, y2)
        y1.square().sum().backward()
        y2.square().sum().backward()
        assert torch.equal(x1.grad, x2.grad)
        keys = KEYS_2_4_2 if backbone == "tres_deltagru" else {}
        grads = {keys.get(k.removeprefix("backbone."), k.removeprefix("backbone.")): p.grad
                 for k, p in ours.named_parameters()}
        for k, p in ref.named_parameters():
            assert torch.equal(p.grad, grads[k]), k


@NEED_ARENA
@pytest.mark.parametrize("backbone", ["deltagru", "tres_deltagru"])
def test_zero_threshold_dense_within_rounding_of_opendpd_242_delta(backbone):
    with _wheel_backbones() as mods:
        torch.manual_seed(3)
        ref = _wheel_model(mods, backbone, 14)
        torch.manual_seed(3)
        ours = build_model(backbone, 14)
        x = torch.randn(3, 200, 2) * 0.4
        with torch.no_grad():
            assert (ref(x, None) - ours(x)).abs().max().item() < 5e-6


# ------------------------------------------------------------------------------------------------ training
def _train(ws, **kw):
    base = dict(dataset=str(DPA200), epochs=3, frame_length=40, stride=8, batch_size=32, max_train_samples=2400,
                device="cpu", threads=1, lr=5e-3)
    base.update(kw)
    res = Trainer(ExperimentConfig(**base), workspace=ws).run()
    assert res.state == "succeeded", res
    return res


def _falls(res):
    losses = [row["TRAIN_LOSS"] for row in res.history]
    assert losses[-1] < losses[0], losses


@NEED_DPA200
@pytest.mark.parametrize("backbone,h,thx", [("deltagru", 8, 0.0), ("deltagru", 6, 0.02), ("tres_deltagru", 8, 0.0),
                                            ("tcn", 8, 0.0), ("gru_amp", 8, 0.0)])
def test_trains_as_pa_and_as_dpd(tmp_path, backbone, h, thx):
    ws = Workspace(tmp_path)
    kw = dict(epochs=2, max_train_samples=800) if thx else {}
    pa = _train(ws, step="pa", backbone=backbone, hidden_size=h, thx=thx, thh=thx, **kw)
    _falls(pa)
    cfg = json.loads((Path(pa.run_dir) / "config.json").read_text())
    assert cfg["model"]["params"] == REGISTRY[backbone].param_count(h)
    assert cfg["experiment"]["thx"] == thx
    dpd = _train(ws, step="dpd", backbone=backbone, hidden_size=h, thx=thx, thh=thx, pa_run=pa.run_id, **kw)
    _falls(dpd)
