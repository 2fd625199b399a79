"""Issue 24's training options (config.py; training/schedules.py, losses.py, objectives.py, evaluation.py): each is
selectable, recorded in config.json, and computes what its docstring says. Defaults leave runs bitwise unchanged
(tests/unit/test_pinned_numbers.py, test_models_vs_reference.py and test_record.py cover that)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from dpd_desktop.config import ConfigError, ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.data.framing import unsegment
from dpd_desktop.metrics.profiles import compute_profile_metrics
from dpd_desktop.models import Cascade, build_model
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training.evaluation import Evaluator
from dpd_desktop.training.augment import PhaseRamp, make_augment
from dpd_desktop.training.losses import FrameLoss, make_criterion
from dpd_desktop.training.optim import AdamW, ReduceLROnPlateau
from dpd_desktop.training.record_payload import INFEASIBLE_DB
from dpd_desktop.training.schedules import EpochSchedule, make_schedule
from dpd_desktop.training.trainer import Trainer

DEMO = dict(seed=2, n_train=3000, n_val=4300, n_test=4300)  # nperseg 4096 + the overlap guards


def _opt(lr=0.01):
    return AdamW([torch.nn.Parameter(torch.zeros(3))], lr=lr, weight_decay=0.0)


# ------------------------------------------------------------------------------------------------ schedules
def test_default_schedule_is_the_reference_plateau():
    sched = make_schedule(_opt(), ExperimentConfig())
    assert type(sched) is ReduceLROnPlateau and sched.threshold_mode == "rel" and sched.threshold == 1e-4


def test_warmup_then_cosine_rates():
    opt = _opt(0.01)
    s = EpochSchedule(opt, kind="cosine", epochs=8, warmup=2, lr=0.01, lr_end=1e-4)
    rates = [opt.param_groups[0]["lr"]]
    for _ in range(7):
        s.step(0.0)
        rates.append(opt.param_groups[0]["lr"])
    want = [0.005, 0.01] + [1e-4 + (0.01 - 1e-4) * (1 + math.cos(math.pi * k / 5)) / 2 for k in range(6)]
    assert rates == pytest.approx(want, rel=0, abs=1e-15)
    assert rates[2] == 0.01 and rates[-1] == pytest.approx(1e-4, abs=1e-15)


def test_warmup_then_plateau_with_absolute_threshold():
    opt = _opt(0.01)
    cfg = ExperimentConfig(epochs=20, lr=0.01, warmup_epochs=2, patience=1, plateau_threshold=0.01,
                           plateau_threshold_mode="abs", lr_end=1e-4)
    s = make_schedule(opt, cfg)
    lrs = [opt.param_groups[0]["lr"]]
    # warm-up metrics are not shown to the plateau; then -40, -40.005 (< 0.01 dB better: bad), -40.006 (bad: lr halves)
    for metric in (0.0, 0.0, -40.0, -40.005, -40.006, -41.0):
        s.step(metric)
        lrs.append(opt.param_groups[0]["lr"])
    assert lrs == [0.005, 0.01, 0.01, 0.01, 0.01, 0.005, 0.005]
    rel = ReduceLROnPlateau(_opt(), patience=0, threshold=1e-4, threshold_mode="rel")
    rel.step(-40.0)
    rel.step(-39.999)  # the reference quirk: a slightly worse negative value counts as better (relative mode)
    assert rel.num_bad_epochs == 0 and rel.best == -39.999


def test_schedule_state_round_trip():
    opt = _opt()
    s = EpochSchedule(opt, kind="plateau", epochs=10, warmup=3, lr=0.01, lr_end=1e-4,
                      plateau=ReduceLROnPlateau(opt, patience=2))
    for _ in range(5):
        s.step(-1.0)
    t = EpochSchedule(_opt(), kind="plateau", epochs=10, warmup=3, lr=0.01, lr_end=1e-4,
                      plateau=ReduceLROnPlateau(opt, patience=2))
    t.load_state_dict(s.state_dict())
    assert t.state_dict() == s.state_dict()


# ------------------------------------------------------------------------------------------------ losses
def test_frame_loss_window_and_power_term():
    torch.manual_seed(0)
    out, tgt = torch.randn(4, 20, 2), torch.randn(4, 20, 2)
    assert type(make_criterion(ExperimentConfig())) is torch.nn.MSELoss
    crit = make_criterion(ExperimentConfig(loss_window=[5, 15], power_weight=0.3))
    o, t = out[:, 5:15].double(), tgt[:, 5:15].double()
    dp = 10 * math.log10(float((o ** 2).sum() / (t ** 2).sum()))
    want = float(((o - t) ** 2).mean()) + 0.3 * float((t ** 2).mean()) * dp ** 2
    assert float(crit(out, tgt)) == pytest.approx(want, rel=1e-5)
    # equal power: no penalty
    scaled = out * torch.sqrt((tgt ** 2).sum() / (out ** 2).sum())
    assert float(FrameLoss(torch.nn.MSELoss(), None, 5.0)(scaled, tgt)) == pytest.approx(
        float(torch.nn.functional.mse_loss(scaled, tgt)), rel=1e-5)



def _numpy_oob_share(out, tgt, band, side="both"):
    """The out-of-band share of the MSE from NumPy: DFT of the Hann-windowed complex error over sqrt(L·mean(h²)),
    bins with f outside [-b/2, b/2); ``side="worse"``: twice the larger of the two sides' sums."""
    e = (out[..., 0] - tgt[..., 0]).double().numpy() + 1j * (out[..., 1] - tgt[..., 1]).double().numpy()
    n = e.shape[1]
    h = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n)  # periodic Hann
    spec = np.fft.fft(e * h, axis=1) / np.sqrt(n * np.mean(h ** 2))
    f = np.fft.fftfreq(e.shape[1])
    power = np.abs(spec) ** 2
    lower, upper = power[:, f < -band / 2].sum(), power[:, f >= band / 2].sum()
    return float((lower + upper if side == "both" else 2 * max(lower, upper)) / (2 * e.size))


def test_out_of_band_term_against_numpy():
    torch.manual_seed(1)
    out, tgt = torch.randn(3, 40, 2), torch.randn(3, 40, 2)
    spec = SimpleNamespace(sample_rate_hz=800e6, bw_main_hz=200e6)
    crit = make_criterion(ExperimentConfig(loss_window=[10, 30], oob_weight=7.0), spec)
    o, t = out[:, 10:30], tgt[:, 10:30]
    want = float(((o.double() - t.double()) ** 2).mean()) + 7.0 * _numpy_oob_share(o, t, 0.25)
    assert float(crit(out, tgt)) == pytest.approx(want, rel=1e-5)
    # a main channel of the whole band leaves nothing out of it
    assert float(FrameLoss(torch.nn.MSELoss(), None, 0.0, 1.0, 1.0).out_of_band(o, t)) == 0.0


def test_worse_side_out_of_band_term_against_numpy():
    """Side "worse": twice the larger side's out-of-band sum of the batch, so an error whose sides differ costs more
    than with "both" and only the worse side's bins get a gradient."""
    torch.manual_seed(2)
    n = 40
    ph = 2 * np.pi * 0.3 * np.arange(n)  # an upper-side tone on top of white error: the upper side is the worse
    tone = torch.tensor(np.stack([np.cos(ph), np.sin(ph)], axis=-1), dtype=torch.float32)
    out = (0.05 * torch.randn(3, n, 2) + 0.5 * tone).requires_grad_()
    tgt = torch.zeros(3, n, 2)
    spec = SimpleNamespace(sample_rate_hz=800e6, bw_main_hz=200e6)
    worse = make_criterion(ExperimentConfig(oob_weight=2.0, oob_side="worse"), spec)
    both = make_criterion(ExperimentConfig(oob_weight=2.0), spec)
    o = out.detach()
    want = float((o.double() ** 2).mean()) + 2.0 * _numpy_oob_share(o, tgt, 0.25, "worse")
    assert float(worse(out, tgt).detach()) == pytest.approx(want, rel=1e-5)
    assert float(both(out, tgt).detach()) == pytest.approx(
        float((o.double() ** 2).mean()) + 2.0 * _numpy_oob_share(o, tgt, 0.25), rel=1e-5)
    assert _numpy_oob_share(o, tgt, 0.25, "worse") > 1.5 * _numpy_oob_share(o, tgt, 0.25)
    # the gradient of the term alone: none reaches the lower side's bins (but the Hann window's one-bin spread of
    # the upper side's, at either edge: -fs/2 neighbours fs/2)
    worse.out_of_band(out, tgt).backward()
    g = out.grad[..., 0].double().numpy() + 1j * out.grad[..., 1].double().numpy()
    gspec = np.abs(np.fft.fft(g, axis=1)) ** 2
    f = np.fft.fftfreq(n)
    assert gspec[:, (f > -0.5 + 1 / n) & (f < -0.125 - 1 / n)].sum() < 1e-9 * gspec[:, f >= 0.125].sum()
    with pytest.raises(ValueError, match="side"):
        FrameLoss(torch.nn.MSELoss(), None, 0.0, 1.0, 0.25, "left")


@pytest.mark.parametrize("freq, share", [(0.30, 1.0), (-0.30, 1.0), (0.05, 0.0), (0.10, 1 / 6), (-0.125, 1 / 6), (0.125, 5 / 6),
                                         (0.15, 1.0), (-0.15, 5 / 6)])
def test_out_of_band_term_of_a_tone(freq, share):
    """An error that is one complex tone on DFT bin k = freq·L: the periodic Hann window puts 2/3 of its power on
    bin k and 1/6 on each of k ± 1. Band = 0.25 (200 MHz of 800 MS/s), half-open [-0.125, 0.125) = bins -5 … 4 of
    L = 40: a tone on bin 4 puts 1/6 out of band (bin 5), on bin 5 5/6 (bins 5, 6), on bin -5 1/6 (bin -6), on bin
    -6 5/6 (bins -7, -6)."""
    n = 40
    ph = 2 * np.pi * freq * np.arange(n)
    err = torch.tensor(np.stack([0.3 * np.cos(ph), 0.3 * np.sin(ph)], axis=-1), dtype=torch.float32)[None]
    crit = FrameLoss(torch.nn.MSELoss(), None, 0.0, 1.0, 0.25)
    got = float(crit.out_of_band(err, torch.zeros_like(err)))
    assert got == pytest.approx(share * 0.09 / 2, abs=1e-8)


def test_out_of_band_term_needs_the_spectral_spec():
    with pytest.raises(ConfigError) as e:
        make_criterion(ExperimentConfig(oob_weight=1.0), SimpleNamespace(sample_rate_hz=None, bw_main_hz=200e6))
    assert e.value.field == "oob_weight"
    with pytest.raises(ConfigError) as e:
        make_criterion(ExperimentConfig(oob_weight=1.0), SimpleNamespace(sample_rate_hz=100e6, bw_main_hz=200e6))
    assert e.value.field == "oob_weight"
    assert type(make_criterion(ExperimentConfig(oob_weight=0.0), None)) is torch.nn.MSELoss

def test_peak_limiter():
    dpd, pa = build_model("gru", 4), build_model("gru", 4)
    c = Cascade(dpd, pa, peak_limit=0.5)
    u = torch.tensor([[[0.3, 0.4], [0.6, 0.8], [0.0, 0.0], [-3.0, 0.0]]])
    got = c.limit(u)
    assert torch.allclose(got, torch.tensor([[[0.3, 0.4], [0.3, 0.4], [0.0, 0.0], [-0.5, 0.0]]]))
    assert Cascade(dpd, pa).limit(u) is u


# ------------------------------------------------------------------------------------------------ phase augmentation
def test_phase_ramp_turns_input_and_target_by_one_ramp():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1000, 2)).astype(np.float32)
    y = (0.7 * x + 0.01 * rng.standard_normal((1000, 2))).astype(np.float32)
    tx, ty = torch.from_numpy(x.copy()), torch.from_numpy(y.copy())
    aug = PhaseRamp(tx, ty, seed=3)
    state = torch.get_rng_state()
    seen = set()
    for epoch in range(6):
        aug.apply(epoch)
        theta, d = aug.phase(epoch)
        assert 0 <= theta < 2 * np.pi and d in (1, -1)
        seen.add(d)
        phi = theta + d * 2 * np.pi * np.arange(1000) / 1000  # independent: NumPy's complex product
        for got, src in ((tx, x), (ty, y)):
            want = (src[:, 0].astype(np.float64) + 1j * src[:, 1]) * np.exp(1j * phi)
            assert np.abs(got[:, 0].numpy() - want.real).max() < 1e-6
            assert np.abs(got[:, 1].numpy() - want.imag).max() < 1e-6
        # turned from the originals, not from the last epoch's series: magnitudes kept to float32 rounding
        assert np.allclose(np.hypot(*tx.numpy().T), np.hypot(*x.T), rtol=1e-6, atol=0)
    assert seen == {1, -1}
    assert torch.equal(torch.get_rng_state(), state)  # the global RNG untouched
    again = PhaseRamp(torch.from_numpy(x.copy()), torch.from_numpy(y.copy()), seed=3)
    again.apply(4)
    aug.apply(4)
    assert torch.equal(again.x, tx) and torch.equal(again.y, ty)  # epoch e alone decides (resume turns the same)
    assert PhaseRamp(tx, ty, seed=4).phase(4) != aug.phase(4)
    assert tx.data_ptr() == aug.x.data_ptr()  # in place: a captured graph's pointers stay valid


def test_phase_ramp_checks_shapes_and_kind():
    with pytest.raises(ValueError, match="one shape"):
        PhaseRamp(torch.zeros(10, 2), torch.zeros(9, 2), 0)
    assert make_augment("none", None, 0) is None
    with pytest.raises(ValueError, match="unknown augmentation"):
        make_augment("flip", None, 0)


# ------------------------------------------------------------------------------------------------ validation
@pytest.mark.parametrize("bad", [dict(warmup_epochs=150), dict(lr_schedule="step"), dict(loss_window=[3, 3]),
                                 dict(power_weight=-1.0), dict(gain_value=0.0), dict(selection="power-gated"),
                                 dict(evaluation="overlap"), dict(peak_limit=1.0), dict(dpd_learning="ila"),
                                 dict(plateau_threshold_mode="percent"), dict(power_gate_db=0.0),
                                 dict(oob_weight=-1.0), dict(oob_weight=1.0, loss="l1"), dict(augment="flip"),
                                 dict(oob_side="left")])
def test_invalid_options_name_their_field(bad):
    with pytest.raises(ConfigError) as e:
        ExperimentConfig(**bad).validate()
    assert e.value.field == next(iter(bad))


# ------------------------------------------------------------------------------------------------ overlap evaluation
class _Double(torch.nn.Module):
    def forward(self, x):
        return 2 * x


class _Cumulative(torch.nn.Module):
    """A model with memory: output(t) = sum of the inputs since the window's start."""

    def forward(self, x):
        return torch.cumsum(x, dim=1)


def _evaluator(mode="overlap", w=40):
    ds = make_demo_dataset(**DEMO)
    targets = {s: getattr(ds, s).x * 0.9 for s in ("val", "test")}
    return ds, Evaluator(ds, targets, "dpd", torch.nn.MSELoss(), 16, torch.device("cpu"), "corrected", mode, w)


def test_overlap_forward_windows():
    ds, ev = _evaluator()
    x = torch.from_numpy(ds.val.x)
    assert torch.equal(ev.overlap_forward(_Double(), x), 2 * x)
    got = ev.overlap_forward(_Cumulative(), x).numpy()
    xn = np.pad(ds.val.x.astype(np.float64), ((10, 0), (0, 0)))  # lead W/4 = 10 zeros
    for t in (0, 5, 19, 20, 33, len(ds.val.x) - 1):
        k = t // 20  # hop W/2 = 20: the window starting at k·20 - 10 keeps samples k·20 .. k·20 + 19
        want = xn[k * 20:t + 10 + 1].sum(axis=0)
        np.testing.assert_allclose(got[t], want, rtol=1e-5, atol=1e-5)


def test_overlap_evaluation_metrics_and_power():
    ds, ev = _evaluator()
    torch.manual_seed(0)
    net = Cascade(build_model("gru", 4), build_model("gru", 4)).freeze_pa()
    res = ev.evaluate("val", net)
    es = ev.sets["val"]
    n = es["n"]
    pred = unsegment(res["pred"], n)
    with torch.inference_mode():
        u = ev.overlap_forward(net.dpd, torch.from_numpy(ds.val.x))
        y = net.pa(u[None])[0].numpy()
    np.testing.assert_array_equal(pred, y)
    inner = compute_profile_metrics("corrected", y[40:n - 40], es["t_np"][40:n - 40], ds.spec, n - 80)
    assert res["metrics"] == pytest.approx(inner)
    p = 10 * math.log10(float(np.sum(y.astype(np.float64) ** 2) / np.sum(es["t_np"].astype(np.float64) ** 2)))
    assert res["extra"]["POWER_DB"] == pytest.approx(p, abs=1e-9)
    assert res["extra"]["OBJECTIVE"] == pytest.approx(0.5 * (inner["EVM"] + max(inner["ACLR_L"], inner["ACLR_R"])))


def test_overlap_needs_enough_samples():
    ds = make_demo_dataset(**DEMO)
    with pytest.raises(ValueError, match="nperseg"):
        Evaluator(ds, {s: getattr(ds, s).x for s in ("val", "test")}, "dpd", torch.nn.MSELoss(), 16,
                  torch.device("cpu"), "corrected", "overlap", 2000)


# ------------------------------------------------------------------------------------------------ through the trainer
@pytest.fixture(scope="module")
def pa_run(tmp_path_factory):
    ws = Workspace(tmp_path_factory.mktemp("ws"))
    ds = make_demo_dataset(**DEMO)
    cfg = ExperimentConfig(step="pa", dataset="demo", backbone="gru", hidden_size=6, epochs=3, frame_length=40,
                           stride=4, device="cpu", threads=1)
    res = Trainer(cfg, dataset=ds, workspace=ws).run()
    assert res.state == "succeeded"
    return ws, ds, res.run_id


def _dpd(pa_run, **kw):
    ws, ds, pa = pa_run
    base = dict(step="dpd", dataset="demo", backbone="gru", hidden_size=5, epochs=4, frame_length=40, stride=4,
                device="cpu", threads=1, pa_run=pa, metric_profile="corrected")
    base.update(kw)
    res = Trainer(ExperimentConfig(**base), dataset=ds, workspace=ws).run()
    assert res.state == "succeeded", res
    return res, json.loads((Path(res.run_dir) / "config.json").read_text())


def test_options_recorded_and_cosine_lr_in_history(pa_run):
    opts = dict(lr_schedule="cosine", warmup_epochs=1, gain_value=0.8, power_weight=1e-3, loss_window=[10, 30],
                peak_limit=2.0)
    res, doc = _dpd(pa_run, **opts)
    assert {k: doc["experiment"][k] for k in opts} == opts
    assert doc["gain"]["rule"] == "fixed" and doc["gain"]["value"] == 0.8
    lrs = [row["LR"] for row in res.history]
    want = [5e-3] + [5e-5 + (5e-3 - 5e-5) * (1 + math.cos(math.pi * k / 2)) / 2 for k in range(3)]
    assert lrs == pytest.approx(want, abs=1e-15)


def test_phase_augment_through_the_trainer(pa_run):
    """Recorded; the loader's series turned each epoch from the dataset's own, which stay as read; the same run twice
    gives the same numbers; a different run than without the augmentation."""
    ws, ds, _ = pa_run
    x0, val0 = ds.train.x.copy(), ds.val.x.copy()
    res, doc = _dpd(pa_run, augment="phase", epochs=2)
    assert doc["experiment"]["augment"] == "phase"
    assert "augmentation phase: the training input and target turned" in (Path(res.run_dir) / "log.txt").read_text()
    assert np.array_equal(ds.train.x, x0) and np.array_equal(ds.val.x, val0)
    again, _ = _dpd(pa_run, augment="phase", epochs=2)
    plain, _ = _dpd(pa_run, epochs=2)
    cols = ("TRAIN_LOSS", "VAL_NMSE")
    assert [[r[c] for c in cols] for r in again.history] == [[r[c] for c in cols] for r in res.history]
    assert [r["TRAIN_LOSS"] for r in plain.history] != [r["TRAIN_LOSS"] for r in res.history]


def test_phase_augment_turns_the_loaders_series(pa_run):
    ws, ds, pa = pa_run
    cfg = ExperimentConfig(step="dpd", dataset="demo", backbone="gru", hidden_size=5, epochs=1, frame_length=40,
                           stride=4, device="cpu", threads=1, pa_run=pa, augment="phase")
    t = Trainer(cfg, dataset=ds, workspace=ws)
    t._setup_seed(cfg)
    t._setup_data(cfg)
    x, y = t.loader.series()
    assert not np.shares_memory(x.numpy(), ds.train.x)
    t.augment.apply(0)
    theta, d = t.augment.phase(0)
    n = ds.train.x.shape[0]
    turn = np.exp(1j * (theta + d * 2 * np.pi * np.arange(n) / n))
    want_x = (ds.train.x[:, 0] + 1j * ds.train.x[:, 1]) * turn
    assert np.abs(x[:, 0].numpy() - want_x.real).max() < 1e-6
    g = t.gain
    want_y = g * (ds.train.x[:, 0].astype(np.float64) + 1j * ds.train.x[:, 1]) * turn
    assert np.abs(y[:, 1].numpy() - want_y.imag).max() < 1e-5


def test_power_gated_selection_and_test_at_the_end(pa_run):
    res, doc = _dpd(pa_run, selection="power-gated", evaluation="overlap", test_every_epoch=False,
                    power_gate_db=0.3)
    assert doc["selection_metric"] == "VAL_SELECTION"
    rows = res.history
    for row in rows:
        gated = row["VAL_OBJECTIVE"] + (0 if abs(row["VAL_POWER_DB"]) <= 0.3 else INFEASIBLE_DB)
        assert row["VAL_SELECTION"] == gated
        assert math.isnan(row["TEST_NMSE"]) and math.isnan(row["TEST_POWER_DB"])
    values = [row["VAL_SELECTION"] for row in rows]
    assert res.best_epoch == int(np.argmin(values))
    assert all(math.isfinite(v) for v in res.test_metrics.values())


def test_ila_learns_beyond_the_pa_alone(pa_run):
    res, doc = _dpd(pa_run, dpd_learning="ila", epochs=10, hidden_size=8, stride=2)
    assert doc["experiment"]["dpd_learning"] == "ila"
    ws, ds, pa = pa_run
    # no DPD: PA(x) against g·x on the validation split
    from dpd_desktop.training.pa_source import load_pa_for_dpd
    pa_model, _ = load_pa_for_dpd(ws, pa)
    g = doc["gain"]["value"]
    with torch.inference_mode():
        y0 = pa_model(torch.from_numpy(ds.val.x)[None])[0].numpy()
    base = compute_profile_metrics("corrected", y0, g * ds.val.x, ds.spec, len(y0))["NMSE"]
    assert min(row["VAL_NMSE"] for row in res.history) < base - 5.0


@pytest.mark.parametrize("kernel", ["reference", "fast"])
def test_long_sequences_run_in_chunks(monkeypatch, kernel):
    import dpd_desktop.kernels.dispatch as K

    torch.manual_seed(0)
    rnn = torch.nn.GRU(6, 5, batch_first=True, bias=kernel == "fast")
    x = torch.randn(2, 250, 6)
    h0 = torch.randn(1, 2, 5) * 0.1
    with torch.no_grad():
        whole = K.run_recurrent(rnn, x, h0, kernel)
        monkeypatch.setattr(K, "LONG_SEQUENCE", 100)
        monkeypatch.setattr(K, "LONG_CHUNK", 40)
        chunked = K.run_recurrent(rnn, x, h0, kernel)
    assert chunked.shape == whole.shape
    assert (chunked - whole).abs().max().item() < 1e-6


def test_the_loss_in_plain_words():
    crit = FrameLoss(torch.nn.MSELoss(), (50, 150), 1e-4, 1.0, 0.25, "worse")
    assert crit.describe() == ("MSE on frame samples [50, 150), out-of-band term w = 1 (worse side, main channel "
                               "0.25·fs), output-power term w = 0.0001")
    assert FrameLoss(torch.nn.L1Loss(), (0, 10)).describe() == "L1 on frame samples [0, 10)"
