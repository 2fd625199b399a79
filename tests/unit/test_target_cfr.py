"""The DPD target's crest-factor reduction (training/cfr.py, ``target_cfr_db``) against independent NumPy
computations; its configuration checks and command-line options; a DPD run trained towards it (config.json's
``target_cfr`` block, results.h5's target); and the Arena's aligned ACLR windows (arena/metrics.py ``aligned_window``,
a condition's ``aclr_segments``) against scipy.signal.welch written out here, on the measured DPA_160MHz too."""
from __future__ import annotations

import math
from types import SimpleNamespace

import h5py
import numpy as np
import pytest
from scipy.signal import get_window, welch

from datasets_dir import DATASETS
from dpd_desktop.arena.judge import floor_scores
from dpd_desktop.arena.metrics import aligned_window, window_aclr
from dpd_desktop.arena.protocol import ProtocolError, load_protocol
from dpd_desktop.cli.entry import build_parser
from dpd_desktop.cli.train import config_from_args
from dpd_desktop.config import ConfigError, ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training.cfr import cfr_targets, clip_and_filter
from dpd_desktop.training.trainer import Trainer

DPA160 = DATASETS / "DPA_160MHz"
TINY = dict(hidden_size=4, frame_length=40, stride=16, device="cpu", batch_size=32)


def _one_round(s: np.ndarray, peak: float, fs: float, band: float) -> np.ndarray:
    """One clip-and-filter round written out: the clipped signal's difference, its DFT kept on the bins k whose
    frequency (k if k < N/2 else k − N)·fs/N lies in [−band/2, band/2), added back."""
    n = s.size
    clipped = np.array([v * peak / abs(v) if abs(v) > peak else v for v in s])
    dft = np.fft.fft(clipped - s)
    for k in range(n):
        f = (k if k < (n + 1) // 2 else k - n) * fs / n
        if not -band / 2 <= f < band / 2:
            dft[k] = 0
    return s + np.fft.ifft(dft)


def _multitone(n: int, bins: list[int], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    return sum(rng.uniform(0.5, 1.0) * np.exp(1j * (2 * np.pi * k * t / n + rng.uniform(0, 2 * np.pi)))
               for k in bins)


def test_one_round_equals_the_written_out_computation_and_the_band_is_half_open():
    fs, n = 64e6, 64
    band = 32e6  # bins −16 … 15 kept: −16 MHz is inside, +16 MHz outside (half-open)
    s = _multitone(n, [-12, -5, 0, 3, 9, 14])
    peak = 0.6 * float(np.max(np.abs(s)))
    got = clip_and_filter(s, peak, fs, band, 1)
    assert np.allclose(got, _one_round(s, peak, fs, band), rtol=0, atol=1e-12)
    change = np.fft.fft(got - s)
    f = np.fft.fftfreq(n, 1 / fs)
    assert np.max(np.abs(change[(f < -band / 2) | (f >= band / 2)])) < 1e-12  # nothing added out of band
    assert abs(change[f == -band / 2][0]) > 1e-6  # the band's lower edge is kept


def test_rounds_lower_the_peak_keep_the_band_and_stop_when_nothing_is_over():
    fs, n, band = 128e6, 2048, 40e6
    rng = np.random.default_rng(3)
    spec = np.zeros(n, complex)
    f = np.fft.fftfreq(n, 1 / fs)
    inband = (f >= -band / 2) & (f < band / 2)
    spec[inband] = rng.normal(size=inband.sum()) + 1j * rng.normal(size=inband.sum())
    s = np.fft.ifft(spec)  # a band-limited Gaussian signal: PAPR about 10 dB
    peak = 2.0 * math.sqrt(float(np.mean(np.abs(s) ** 2)))  # a 6 dB limit
    peaks = [float(np.max(np.abs(clip_and_filter(s, peak, fs, band, k)))) for k in (1, 4, 16)]
    assert peaks[0] < float(np.max(np.abs(s))) and peaks[1] < peaks[0] and peaks[2] < peaks[1]
    assert peaks[2] < peak * 10 ** (0.3 / 20)
    out = clip_and_filter(s, peak, fs, band, 16)
    assert np.max(np.abs(np.fft.fft(out)[~inband])) < 1e-9 * np.max(np.abs(spec))
    # nothing above the limit: the signal comes back unchanged
    assert np.array_equal(clip_and_filter(s, 10 * float(np.max(np.abs(s))), fs, band, 4), s.astype(complex))
    with pytest.raises(ValueError, match="iterations"):
        clip_and_filter(s, peak, fs, band, 0)


def test_cfr_targets_of_a_dataset_and_what_they_record():
    ds = make_demo_dataset(seed=1, n_train=3000, n_val=2000, n_test=2000, nperseg=512)
    y = ds.train.y.astype(np.float64)
    ref_peak = float(np.sqrt(np.max(y[:, 0] ** 2 + y[:, 1] ** 2)))
    smallest = min(float(np.max(np.hypot(*getattr(ds, s).x.astype(np.float64).T))) for s in ("train", "val", "test"))
    g = 2.0 * ref_peak / smallest  # every split's g·x peaks 6 dB above max|y_train|, 9 dB above the limit
    res = cfr_targets(ds, g, -3.0, 4)
    assert res.reference_peak == pytest.approx(ref_peak, rel=1e-12)
    assert res.peak == pytest.approx(ref_peak * 10 ** (-3 / 20), rel=1e-12)
    for name in ("train", "val", "test"):
        x = getattr(ds, name).x.astype(np.float64)
        ideal = g * (x[:, 0] + 1j * x[:, 1])
        want = clip_and_filter(ideal, res.peak, ds.spec.sample_rate_hz, ds.spec.bw_main_hz, 4)
        got = res.targets[name]
        assert got.dtype == np.float32 and got.shape == x.shape
        assert np.array_equal(got, np.stack([want.real, want.imag], 1).astype(np.float32))
        rec = res.splits[name]
        assert rec["error_db"] == pytest.approx(10 * math.log10(np.sum(np.abs(want - ideal) ** 2)
                                                                / np.sum(np.abs(ideal) ** 2)), abs=1e-9)
        assert rec["peak_after_db"] < rec["peak_before_db"]
    block = res.block()
    assert (block["limit_db"], block["iterations"], block["reference"]) == (-3.0, 4, "max|y_train|")
    assert block["band_hz"] == ds.spec.bw_main_hz
    narrow = cfr_targets(ds, g, -3.0, 4, band_hz=0.5 * ds.spec.bw_main_hz)
    x = ds.test.x.astype(np.float64)
    want = clip_and_filter(g * (x[:, 0] + 1j * x[:, 1]), res.peak, ds.spec.sample_rate_hz,
                           0.5 * ds.spec.bw_main_hz, 4)
    assert narrow.block()["band_hz"] == 0.5 * ds.spec.bw_main_hz
    assert np.array_equal(narrow.targets["test"], np.stack([want.real, want.imag], 1).astype(np.float32))
    with pytest.raises(ConfigError, match="wider than the dataset's sample rate"):
        cfr_targets(ds, g, -3.0, 4, band_hz=2 * ds.spec.sample_rate_hz)
    bare = SimpleNamespace(spec=SimpleNamespace(sample_rate_hz=None, bw_main_hz=None), name="x")
    with pytest.raises(ConfigError, match="input_signal_fs"):
        cfr_targets(bare, g, 0.0, 4)


@pytest.mark.parametrize("fields, name", [
    (dict(step="pa", target_cfr_db=0.0), "target_cfr_db"),
    (dict(step="dpd", pa_run="r", target_cfr_db=float("nan")), "target_cfr_db"),
    (dict(step="dpd", pa_run="r", target_cfr_db=7.0), "target_cfr_db"),
    (dict(step="dpd", pa_run="r", target_cfr_db=0.0, dpd_learning="ila"), "target_cfr_db"),
    (dict(step="dpd", pa_run="r", target_cfr_db=0.0, backbone="gmp", fit="ls"), "target_cfr_db"),
    (dict(step="dpd", pa_run="r", target_cfr_db=0.0, target_cfr_iterations=0), "target_cfr_iterations"),
    (dict(step="dpd", pa_run="r", target_cfr_db=0.0, target_cfr_band_hz=-1.0), "target_cfr_band_hz"),
])
def test_the_configuration_refuses_what_cannot_be_trained(fields, name):
    with pytest.raises(ConfigError) as err:
        ExperimentConfig(dataset="demo", **fields).validate()
    assert err.value.field == name


def test_command_line_options_reach_the_configuration():
    a = build_parser().parse_args(["train-dpd", "--dataset", "demo", "--pa-run", "r", "--target-cfr-db", "-0.5",
                                   "--target-cfr-iterations", "8", "--target-cfr-band-hz", "158e6"])
    cfg = config_from_args(a, "dpd")
    assert (cfg.target_cfr_db, cfg.target_cfr_iterations, cfg.target_cfr_band_hz) == (-0.5, 8, 158e6)
    assert config_from_args(build_parser().parse_args(["train-dpd", "--dataset", "demo", "--pa-run", "r"]),
                            "dpd").target_cfr_db is None
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train-pa", "--dataset", "demo", "--target-cfr-db", "0"])


def test_a_dpd_run_trains_towards_the_shaped_target_and_records_it(tmp_path):
    ds = make_demo_dataset(seed=0, n_train=2000, n_val=2048, n_test=2048, nperseg=512)
    ws = Workspace(tmp_path)
    pa = Trainer(ExperimentConfig(step="pa", dataset="demo", epochs=1, **TINY), dataset=ds, workspace=ws).run()
    assert pa.state == "succeeded", pa.message
    cfg = ExperimentConfig(step="dpd", dataset="demo", epochs=1, pa_run=str(pa.run_dir), gain_rule="rms",
                           target_cfr_db=-1.0, target_cfr_iterations=3, **TINY)
    tr = Trainer(cfg, dataset=ds, workspace=ws)
    dpd = tr.run()
    assert dpd.state == "succeeded", dpd.message
    rec = RunRecord.open(dpd.run_dir)
    want = cfr_targets(ds, rec.gain, -1.0, 3)
    block = rec.doc["target_cfr"]
    assert block["limit_db"] == -1.0 and block["iterations"] == 3
    assert block["peak"] == pytest.approx(want.peak, rel=1e-12)
    assert block["splits"]["test"] == pytest.approx(want.splits["test"], abs=1e-9)
    with h5py.File(rec.results_path) as f:
        assert np.array_equal(f["test/target"][()], want.targets["test"])
    assert rec.doc["experiment"]["target_cfr_db"] == -1.0


def _independent_aligned(iq: np.ndarray, fs: float, bw: float, nsc: int, nps: int) -> tuple[float, float]:
    z = iq[:, 0].astype(np.float64) + 1j * iq[:, 1].astype(np.float64)
    f, p = welch(z, fs=fs, window=get_window("hann", nps, fftbins=True), nperseg=nps, noverlap=0, detrend=False,
                 return_onesided=False, scaling="density")
    w = bw / nsc

    def band(lo, hi):
        return float(np.sum(p[(f >= lo) & (f < hi)]) * fs / nps)

    ref = max(band(-bw / 2 + i * w, -bw / 2 + (i + 1) * w) for i in range(nsc))
    return 10 * math.log10(band(-bw / 2 - w, -bw / 2) / ref), 10 * math.log10(band(bw / 2, bw / 2 + w) / ref)


def test_aligned_window_and_aclr_against_welch():
    assert aligned_window((200, 98104), 16384) == (16384, 81920)
    assert aligned_window((0, 4096), 1024) == (0, 4096)
    with pytest.raises(ValueError, match="no whole 1024-sample block"):
        aligned_window((10, 1100), 1024)
    rng = np.random.default_rng(5)
    iq = rng.normal(size=(10_000, 2)).astype(np.float32)
    signal = {"fs": 100e6, "bw": 40e6, "n_sub_ch": 2, "nperseg": 1024, "segments": "aligned"}
    got = window_aclr(iq, signal, (100, 9900))
    want = _independent_aligned(iq[1024:9216], 100e6, 40e6, 2, 1024)
    assert got == (pytest.approx(want[0], abs=1e-9), pytest.approx(want[1], abs=1e-9))
    overlapped = window_aclr(iq, {**signal, "segments": "welch"}, (100, 9900))
    assert overlapped != got


@pytest.mark.skipif(not (DPA160 / "spec.json").is_file(), reason=f"dataset DPA_160MHz not found at {DPA160}")
def test_dpa160_test_input_is_clean_on_its_block_grid():
    """The 16,384-sample blocks of the generator: aligned windows see no join (float rounding only), 50 %-overlap
    windows see -44 / -38 dBc (tests/unit/test_arena_floor.py)."""
    from dpd_desktop.data import load_dataset

    ds = load_dataset(DPA160)
    s = ds.spec
    signal = {"fs": s.sample_rate_hz, "bw": s.bw_main_hz, "n_sub_ch": s.n_sub_ch, "nperseg": s.nperseg,
              "segments": "aligned"}
    n = ds.test.x.shape[0]
    judge = {"signal": signal, "window": (200, n - 200), "grid": None, "start": 0, "gain": 2.9, "peak": None}
    fl = floor_scores(SimpleNamespace(judge=judge, dataset=SimpleNamespace(test=SimpleNamespace(x=ds.test.x))))
    ref = (2.9 * ds.test.x.astype(np.float64)).astype(np.float32)
    want = _independent_aligned(ref[16384:5 * 16384], s.sample_rate_hz, s.bw_main_hz, s.n_sub_ch, s.nperseg)
    assert (fl["aclr_l_db"], fl["aclr_r_db"]) == (pytest.approx(want[0], abs=1e-6), pytest.approx(want[1], abs=1e-6))
    assert fl["aclr_db"] < -120


def test_protocol_aclr_segments(tmp_path):
    body = ('[protocol]\nextends = "arena-v6"\nname = "t"\n[[conditions]]\nid = "c"\nkind = "dataset"\n'
            'dataset = "DPA_200MHz"\npa = {{ backbone = "gru", hidden_size = 4 }}\n{extra}')
    p = tmp_path / "p.toml"
    p.write_text(body.format(extra='aclr_segments = "aligned"\n'))
    proto = load_protocol(str(p))
    assert proto.conditions[0].aclr_segments == "aligned"
    assert proto.to_dict()["conditions"][0]["aclr_segments"] == "aligned"
    p.write_text(body.format(extra=""))
    assert "aclr_segments" not in load_protocol(str(p)).to_dict()["conditions"][0]  # an old protocol's dict
    p.write_text(body.format(extra='aclr_segments = "blocks"\n'))
    with pytest.raises(ProtocolError, match="conditions\\[0\\].aclr_segments"):
        load_protocol(str(p))


def test_a_sweep_base_takes_the_dpd_options(tmp_path):
    """--base is parsed as train-dpd's options: the DPD-only ones too (they were refused by a program-name test)."""
    import argparse

    from dpd_desktop.cli.sweep import _base_config

    args = argparse.Namespace(step="dpd", accept_flags=False,
                              base=["--dataset", "demo", "--pa-run", "r", "--target-cfr-db", "-0.5",
                                    "--selection", "power-gated", "--peak-limit", "1.5"])
    base, defaults = _base_config(args, Workspace(tmp_path))
    assert (base.target_cfr_db, base.selection, base.peak_limit) == (-0.5, "power-gated", 1.5)
    assert (defaults.target_cfr_db, defaults.selection) == (None, "reference")


def test_a_short_test_split_is_refused_before_the_pa_trains(tmp_path):
    from dpd_desktop.arena.prepare import prepare_condition
    from dpd_desktop.data import save_hdf5

    ds = make_demo_dataset(seed=0, n_train=3000, n_val=3000, n_test=3000, nperseg=2560)
    save_hdf5(ds, tmp_path / "short.h5")
    p = tmp_path / "p.toml"
    p.write_text(f'[protocol]\nextends = "arena-v6"\nname = "t"\n[training]\nframe_length = 40\n'
                 f'loss_window = [10, 30]\n'
                 f'[[conditions]]\nid = "c"\nkind = "dataset"\ndataset = "{tmp_path / "short.h5"}"\n'
                 f'pa = {{ backbone = "gru", hidden_size = 4 }}\naclr_segments = "aligned"\n')
    proto = load_protocol(str(p))
    with pytest.raises(ConfigError, match="no whole 2560-sample block lies inside the metric window \\[40, 2960\\)"):
        prepare_condition(Workspace(tmp_path / "ws"), proto, proto.conditions[0], tmp_path, train_pa=None)


def test_the_baseline_cache_and_a_merge_tell_the_aclr_windows_apart(tmp_path):
    import json

    from dpd_desktop.arena.judge import baseline_key
    from dpd_desktop.arena.runner import merge_leaderboards

    judge = {"gain": 2.0, "peak": 1.0, "window": (200, 1000), "signal": {"nperseg": 256}}
    prep = SimpleNamespace(pa_run="pa", judge=judge)
    welch_key = baseline_key(prep)
    assert "aclr_segments" not in welch_key and "legacy_aclr" not in welch_key  # an old cache stays valid
    prep.judge = {**judge, "signal": {"nperseg": 256, "segments": "aligned"}, "legacy_aclr": True}
    assert baseline_key(prep) == {**welch_key, "aclr_segments": "aligned", "legacy_aclr": True}
    for name, cond in (("a", {"id": "c", "aclr_segments": "aligned"}), ("w", {"id": "c"})):
        (tmp_path / name).mkdir()
        (tmp_path / name / "leaderboard.json").write_text(json.dumps(
            {"protocol": {"power_gate_db": 0.5, "conditions": [cond]}, "results": [], "trials": []}))
    with pytest.raises(ValueError, match="condition c scores ACLR on welch windows, an earlier leaderboard on "
                                         "aligned ones"):
        merge_leaderboards([tmp_path / "a", tmp_path / "w"], tmp_path / "m", None)


def test_the_leaderboard_names_each_model_s_own_options(tmp_path):
    """A model's options (e.g. its target's crest-factor reduction) are stated beside the board, merged boards too."""
    import json

    from dpd_desktop.arena.runner import merge_leaderboards

    def board(name, model, options):
        out = tmp_path / name
        out.mkdir()
        result = {"condition": "c", "model": {"name": model, "backbone": "gru", "hidden_size": 4, "options": options},
                  "params": 10, "macs": 10, "trials": [], "evm_kind": "in-band error"}
        doc = {"protocol": {"name": "p", "title": "t", "source": "p.toml", "seeds": [0], "epochs": 1,
                            "metric_profile": "corrected", "selection": "power-gated", "power_gate_db": 0.5,
                            "conditions": [{"id": "c"}],
                            "models": [{"name": model, "backbone": "gru", "hidden_size": 4, "options": options}]},
               "command": "x", "results": [result], "trials": []}
        (out / "leaderboard.json").write_text(json.dumps(doc))
        return out

    a = board("a", "M-cfr", {"target_cfr_db": -1.0, "target_cfr_band_hz": 158e6})
    b = board("b", "M", {})
    paths = merge_leaderboards([a, b], tmp_path / "m", None)
    md = paths["md"].read_text()
    assert "Training options of a model beyond the protocol's [training]: M-cfr: target_cfr_db = -1.0, " \
           "target_cfr_band_hz = 158000000.0." in md
    assert "M: " not in md.replace("M-cfr: ", "")
