"""``dpd-desktop arena`` (dpd_desktop/arena): protocols, the Arena's metrics and judge, the leaderboard, and a tiny
protocol end to end on the CPU (a slice of DPA_200MHz, one epoch, two seeds, two models; its floor line too - the
floor itself: tests/unit/test_arena_floor.py).

With OpenDPD 2.4.2's Arena assets (``make arena-data`` → ``.ref/opendpd-2.4.2-arena``): the common linear
baseline of Arena v6 (α, NMSE, demodulated EVM, ACLR, output power through the frozen TRes-GRU) equals the values
the wheel's leaderboard publishes, and the reference rows' per-seed statistics equal the published ones.
"""
from __future__ import annotations

import csv
import json
import math
import statistics
from pathlib import Path

import numpy as np
import pytest

from dpd_desktop.arena.leaderboard import build_rows, pareto, reference_summary
from dpd_desktop.arena.metrics import arena_metrics, evm_carriers_db, quality_db
from dpd_desktop.arena.protocol import ProtocolError, load_protocol
from dpd_desktop.cli.entry import main
from dpd_desktop.models import count_parameters, build_model
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.runs.workspace import Workspace
from tests.datasets_dir import DATASETS

ASSETS = Path(__file__).resolve().parents[2] / ".ref" / "opendpd-2.4.2-arena"
ROWS = ASSETS / "opendpd" / "arena_assets" / "reference-results-v6-apa-b.json"
NEED_ASSETS = pytest.mark.skipif(not ROWS.is_file(), reason=f"OpenDPD 2.4.2 reference sources not found at {ASSETS} "
                                 "(git-ignored; `make arena-data` unpacks them)")
DPA200 = DATASETS / "DPA_200MHz"
NEED_DPA200 = pytest.mark.skipif(not (DPA200 / "spec.json").is_file(),
                                 reason=f"dataset DPA_200MHz not found at {DPA200}")


# ------------------------------------------------------------------------------------------------ protocol
def test_arena_v6_protocol_is_the_wheels_training():
    p = load_protocol("arena-v6")
    assert p.seeds == (0, 1, 2) and p.epochs == 240 and p.power_gate_db == 0.5 and p.selection == "power-gated"
    t = p.training
    assert (t["frame_length"], t["stride"], t["batch_size"], t["lr"], t["weight_decay"], t["lr_end"], t["patience"],
            t["plateau_threshold"], t["plateau_threshold_mode"], t["loss_window"], t["evaluation"]) == \
        (200, 1, 64, 0.005, 0.01, 0.0001, 10, 0.01, "abs", [50, 150], "overlap")
    cfg = p.trial_config(p.conditions[0], p.models[0], dataset="d.h5", pa_run="pa", gain_value=0.99, peak_limit=1.0,
                         device="cpu", kernel=None, seed=2)
    assert (cfg.step, cfg.seed, cfg.epochs, cfg.gain_value, cfg.peak_limit, cfg.metric_profile) == \
        ("dpd", 2, 240, 0.99, 1.0, "corrected")


def test_overrides_and_errors(tmp_path):
    p = load_protocol("arena-v6").with_overrides(epochs=2, seeds=[0], models=["tcn-17", "DeltaGRU-14"],
                                                 datasets=["APA_200MHz_b"])
    assert (p.epochs, p.seeds, [m.name for m in p.models]) == (2, (0,), ["TCN-17", "DeltaGRU-14"])
    assert p.overrides == {"epochs": 2, "seeds": [0], "models": ["tcn-17", "DeltaGRU-14"], "datasets": ["APA_200MHz_b"]}
    with pytest.raises(ProtocolError, match="--models"):
        load_protocol("arena-v6").with_overrides(models=["nope"])
    bad = tmp_path / "bad.toml"
    bad.write_text('[protocol]\nname="b"\nseeds=[0]\nepochs=1\n[training]\nbackbone="gru"\n'
                   '[[conditions]]\nid="c"\nkind="arena"\ncalibration="x.json"\n'
                   '[[models]]\nname="m"\nbackbone="gru"\nhidden_size=3\n')
    with pytest.raises(ProtocolError, match="training.backbone"):
        load_protocol(str(bad))
    with pytest.raises(ProtocolError, match="no such protocol"):
        load_protocol("arena-v99")


@pytest.mark.parametrize("text,field,hint", [
    ('[[models]]\nname = "X"\nbackbone = "gru_gain3"\nhidden_size = 13\naugment = "phase"\n', "models[0].augment",
     "options = { augment = ... }"),
    ('[[models]]\nname = "X"\nbackbone = "gru_gain3"\nhidden_size = 13\nhiden_size = 12\n', "models[0].hiden_size",
     "expected one of name, backbone"),
    ('[[conditions]]\nid = "c"\nkind = "arena"\ncalibration = "x.json"\nnperseg = 4096\n', "conditions[0].nperseg",
     "expected one of id, kind"),
    ('[training]\nlr = 0.002\n[[models]]\nname = "X"\nbackbone = "deltagru"\nhidden_size = 14\n'
     '[extra]\nepochs = 3\n', "extra", "expected one of protocol, training"),
    # an option that is not a field: its place and the closest field
    ('[[models]]\nname = "X"\nbackbone = "gru"\nhidden_size = 4\noptions = { oob_sid = "worse" }\n',
     "models[0].options.oob_sid", "did you mean oob_side?"),
    # a bad value: named where it was set, a model's options or [training] (not the model that met it first)
    ('[[models]]\nname = "X"\nbackbone = "gru"\nhidden_size = 4\noptions = { oob_side = "left" }\n',
     "models[0].options.oob_side", "X: oob_side: expected one of"),
    ('[training]\noob_side = "LEFT"\n', "training.oob_side", "DeltaGRU-14: oob_side: expected one of"),
])
def test_unknown_keys_are_refused_with_the_file_and_key(tmp_path, text, field, hint):
    """A key a table does not hold is never ignored silently (a model trained without the option its author wrote)."""
    p = tmp_path / "p.toml"
    p.write_text('[protocol]\nextends = "arena-v6"\nname = "p"\nseeds = [0]\n' + text)
    with pytest.raises(ProtocolError) as e:
        load_protocol(str(p))
    msg = str(e.value)
    assert str(p) in msg and field in msg and hint in msg, msg


@NEED_ASSETS
def test_protocol_models_have_their_rows_parameter_counts():
    rows = json.loads(ROWS.read_text())["rows"]
    for m in load_protocol("arena-v6").models:
        ref = reference_summary(rows, *m.arena_row, condition="apa-200mhz-b")
        assert ref is not None, m.name
        assert count_parameters(build_model(m.backbone, m.hidden_size)) == ref["params"], m.name


# ------------------------------------------------------------------------------------------------ metrics
def _ofdm(n_sym=2, size=256, prefix=32, seed=0):
    """Two carriers of random QPSK OFDM symbols (CP) at ±fs/8: (signal (N, 2), grid)."""
    rng = np.random.default_rng(seed)
    fs = 1.0e6
    bins = np.r_[1:40, size - 40:size]
    parts = []
    for _ in range(n_sym):
        sym = np.zeros(size, complex)
        sym[bins] = (rng.choice([-1, 1], len(bins)) + 1j * rng.choice([-1, 1], len(bins))) / 8
        t = np.fft.ifft(sym)
        parts.append(np.r_[t[-prefix:], t])
    base = np.concatenate(parts)
    n = base.size
    tt = np.arange(n) / fs
    z = base * np.exp(2j * np.pi * fs / 8 * tt) + 0.5 * base[::-1] * np.exp(-2j * np.pi * fs / 8 * tt)
    grid = {"useful_samples": size, "prefix_samples": prefix,
            "carriers": [{"frequency_shift_hz": -fs / 8, "filter_half_bandwidth_hz": fs / 8 * 0.9,
                          "fft_starts": [prefix, prefix + size + prefix], "occupied_bins": bins.tolist()},
                         {"frequency_shift_hz": fs / 8, "filter_half_bandwidth_hz": fs / 8 * 0.9,
                          "fft_starts": [prefix], "occupied_bins": bins.tolist()}]}
    return np.stack([z.real, z.imag], -1), grid, fs


def test_evm_removes_one_complex_gain_and_measures_error():
    r, grid, fs = _ofdm()
    n = r.shape[0]
    assert evm_carriers_db(r, r, fs, grid, 0, (0, n)) == -300.0
    z = (r[:, 0] + 1j * r[:, 1]) * (0.7 * np.exp(0.4j))
    assert evm_carriers_db(np.stack([z.real, z.imag], -1), r, fs, grid, 0, (0, n)) < -250
    # an error vector 30 dB below the reference on the same subcarriers (another random symbol stream): -30 dB
    other, _, _ = _ofdm(seed=5)
    got = evm_carriers_db(r + 10 ** (-30 / 20) * other, r, fs, grid, 0, (0, n))
    assert -31.0 < got < -29.0
    with pytest.raises(ValueError, match="no complete OFDM symbol"):
        evm_carriers_db(r, r, fs, grid, 0, (40, n))  # the second carrier's only symbol starts at 32


def test_quality_and_power_error():
    base = {"evm_db": -20.0, "aclr_db": -30.0}
    assert quality_db({"evm_db": -40.0, "aclr_db": -45.0}, base) == 0.5 * 20 + 0.5 * 15
    r, grid, fs = _ofdm()
    sig = {"fs": fs, "bw": fs / 2, "n_sub_ch": 2, "nperseg": 128}
    m = arena_metrics(1.1 * r, r, sig, (10, r.shape[0] - 10), None)
    assert m["power_error_db"] == pytest.approx(20 * math.log10(1.1))
    assert m["evm_kind"] == "in-band error" and m["evm_db"] == m["ib_error_db"]


@NEED_ASSETS
def test_arena_v6_baseline_equals_the_wheels(tmp_path):
    import torch

    from dpd_desktop.arena.judge import baseline_scores
    from dpd_desktop.arena.prepare import prepare_condition

    torch.set_num_threads(1)
    ws = Workspace(tmp_path)
    proto = load_protocol("arena-v6")
    prep = prepare_condition(ws, proto, proto.conditions[0], ASSETS, log=lambda s: None)
    rec = RunRecord.open(ws.resolve(prep.pa_run))
    assert rec.state == "succeeded" and rec.arch == {"backbone": "tres_gru", "hidden_size": 37, "num_layers": 1}
    assert (prep.gain_value, prep.peak_limit) == (0.992225170135498, 1.0)
    b = baseline_scores(ws, prep)
    case = json.loads(ROWS.read_text())["rows"][0]["cases"][0]
    j = case["judges"][0]
    assert b["alpha_re"] == pytest.approx(case["baseline_input_scale_real"], abs=1e-8)
    assert b["alpha_im"] == pytest.approx(case["baseline_input_scale_imag"], abs=1e-6)
    for ours, theirs in (("nmse_db", "baseline_nmse_db"), ("evm_db", "baseline_evm_db"),
                         ("aclr_l_db", "baseline_aclr_l_db"), ("aclr_r_db", "baseline_aclr_r_db"),
                         ("ib_error_db", "baseline_ib_error_db"), ("power_error_db", "baseline_power_error_db")):
        assert b[ours] == pytest.approx(j[theirs], abs=1e-4), ours


@NEED_ASSETS
def test_reference_summary_reproduces_published_quality():
    rows = json.loads(ROWS.read_text())["rows"]
    for backbone, budget in (("deltagru", 1000), ("deltagru", 2000), ("tres_deltagru", 1000), ("tcn", 500)):
        ref = reference_summary(rows, backbone, budget, condition="apa-200mhz-b")
        assert ref["n"] == 3
        assert ref["stats"]["quality_db"][0] == pytest.approx(ref["published"]["quality_db"], abs=1e-9)
        assert ref["stats"]["quality_db"][1] == pytest.approx(ref["published"]["quality_std_db"], abs=1e-9)
        assert ref["stats"]["evm_db"][0] == pytest.approx(ref["published"]["evm_db"], abs=1e-9)
        assert ref["stats"]["aclr_db"][0] == pytest.approx(ref["published"]["aclr_db"], abs=1e-9)
    assert reference_summary(rows, "deltagru", 1000, condition="dpa-200mhz") is None


# ------------------------------------------------------------------------------------------------ leaderboard
def _trial(seed, q, p=0.1, aclr=-50.0):
    return {"seed": seed, "nmse_db": -40.0 - q / 10, "aclr_db": aclr, "evm_db": -45.0, "quality_db": q,
            "power_error_db": p, "gate_ok": abs(p) <= 0.5, "evm_kind": "demodulated"}


def test_rows_mean_sd_gate_rank_and_pareto():
    res = [{"condition": "c", "model": {"name": "A", "backbone": "gru", "hidden_size": 4, "arena_row": None},
            "params": 100, "macs": 90, "trials": [_trial(0, 10.0), _trial(1, 12.0), _trial(2, 14.0)]},
           {"condition": "c", "model": {"name": "B", "backbone": "gru", "hidden_size": 8, "arena_row": None},
            "params": 300, "macs": 250, "trials": [_trial(0, 11.0), _trial(1, 11.5)]},
           {"condition": "c", "model": {"name": "C", "backbone": "gru", "hidden_size": 9, "arena_row": None},
            "params": 400, "macs": 80, "trials": [_trial(0, 20.0, p=0.7)]},
           {"condition": "c", "model": {"name": "D", "backbone": "gru", "hidden_size": 9, "arena_row": None},
            "params": 500, "macs": 500, "trials": [_trial(0, 15.0)]}]
    rows = {r["model"]: r for r in build_rows(res, 0.5, None)}
    assert rows["A"]["stats"]["quality_db"] == (12.0, statistics.stdev([10.0, 12.0, 14.0]))
    assert rows["B"]["stats"]["quality_db"] == (11.25, statistics.stdev([11.0, 11.5]))
    assert not rows["C"]["gate_ok"] and rows["C"]["rank"] is None
    assert [rows[m]["rank"] for m in "DAB"] == [1, 2, 3]
    assert [rows[m]["pareto_params"] for m in "ABCD"] == [True, False, False, True]
    assert pareto([(1, 1.0), (1, 1.0), (2, 0.5)]) == [True, True, False]


# ------------------------------------------------------------------------------------------------ end to end
TINY = """
[protocol]
name = "tiny"
title = "tiny arena"
seeds = [0, 1]
epochs = 1
power_gate_db = 0.5
selection = "power-gated"
metric_profile = "corrected"

[training]
frame_length = 40
stride = 8
batch_size = 32
loss_window = [10, 30]
evaluation = "overlap"
test_every_epoch = false
threads = 1

[[conditions]]
id = "dpa-200mhz"
kind = "dataset"
dataset = "{dataset}"
max_train_samples = 2400
pa = {{ backbone = "gru", hidden_size = 6, epochs = 1, threads = 1 }}

[[models]]
name = "TCN-4"
backbone = "tcn"
hidden_size = 4

[[models]]
name = "DeltaGRU-5"
backbone = "deltagru"
hidden_size = 5
"""


@NEED_DPA200
def test_tiny_protocol_end_to_end(tmp_path, capsys):
    spec = tmp_path / "tiny.toml"
    spec.write_text(TINY.format(dataset=DPA200))
    out = tmp_path / "out"
    argv = ["--workspace", str(tmp_path / "ws"), "arena", str(spec), "--device", "cpu", "--out", str(out),
            "--assets", str(tmp_path / "no-assets")]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "leaderboard:" in text
    with open(out / "leaderboard.csv", newline="") as fh:
        board = list(csv.DictReader(fh))
    with open(out / "trials.csv", newline="") as fh:
        trials = list(csv.DictReader(fh))
    assert [r["model"] for r in trials] == ["TCN-4", "TCN-4", "DeltaGRU-5", "DeltaGRU-5"]
    assert {r["model"] for r in board} == {"TCN-4", "DeltaGRU-5"}
    for r in board:
        qs = [float(t["quality_db"]) for t in trials if t["model"] == r["model"]]
        assert float(r["quality_db_mean"]) == pytest.approx(statistics.fmean(qs), rel=1e-5)
        assert float(r["quality_db_sd"]) == pytest.approx(statistics.stdev(qs), rel=1e-4)
        assert int(r["params"]) == count_parameters(build_model(r["backbone"], int(r["hidden_size"])))
    doc = json.loads((out / "leaderboard.json").read_text())
    assert set(doc["sweeps"]) == {"pa::arena-tiny-dpa-200mhz-pa", "dpa-200mhz::TCN-4", "dpa-200mhz::DeltaGRU-5"}
    for t in trials:  # every trial is an ordinary DPD run of the workspace, with the protocol's settings
        rec = RunRecord.open(Path(tmp_path / "ws" / "runs" / t["run_id"]))
        assert (rec.config.step, rec.config.epochs, rec.config.evaluation, rec.config.selection) == \
            ("dpd", 1, "overlap", "power-gated")
    assert (out / "leaderboard.html").read_text().startswith("<!doctype html>")
    md = (out / "leaderboard.md").read_text()
    assert "| rank | condition | model |" in md
    from dpd_desktop.data import load_dataset
    from tests.unit.test_arena_floor import independent_aclr

    fl, ds = doc["floors"]["dpa-200mhz"], load_dataset(DPA200)  # the floor: the test input's own ACLR (issue 24)
    s, n = ds.spec, ds.test.x.shape[0]
    want = independent_aclr(ds.test.x[40:n - 40], s.sample_rate_hz, s.bw_main_hz, s.n_sub_ch, s.nperseg)
    assert (fl["aclr_l_db"], fl["aclr_r_db"]) == pytest.approx(want, abs=1e-4)
    assert f"- dpa-200mhz: ACLR {fl['aclr_l_db']:.2f} / {fl['aclr_r_db']:.2f} dBc (left / right; worse " in md
    runs = sorted(p.name for p in (tmp_path / "ws" / "runs").iterdir())
    assert main(argv) == 0  # again: the finished sweeps are reused, nothing is trained
    assert sorted(p.name for p in (tmp_path / "ws" / "runs").iterdir()) == runs


@NEED_DPA200
def test_merge_of_two_runs(tmp_path):
    spec = tmp_path / "tiny.toml"
    spec.write_text(TINY.format(dataset=DPA200))
    ws = ["--workspace", str(tmp_path / "ws"), "arena", str(spec), "--device", "cpu", "--assets", str(tmp_path / "x")]
    assert main([*ws, "--out", str(tmp_path / "a"), "--models", "DeltaGRU-5"]) == 0
    assert main([*ws, "--out", str(tmp_path / "b"), "--models", "TCN-4", "--seeds", "1"]) == 0
    assert main(["arena", "--merge", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "m")]) == 0
    with open(tmp_path / "m" / "leaderboard.csv", newline="") as fh:
        board = {r["model"]: r for r in csv.DictReader(fh)}
    assert set(board) == {"TCN-4", "DeltaGRU-5"}
    assert (board["TCN-4"]["n_seeds"], board["DeltaGRU-5"]["n_seeds"]) == ("1", "2")
    doc = json.loads((tmp_path / "m" / "leaderboard.json").read_text())
    assert [m["folder"] for m in doc["merged_from"]] == [str(tmp_path / "a"), str(tmp_path / "b")]


def test_protocol_extends_another(tmp_path):
    p = tmp_path / "cand.toml"
    p.write_text('[protocol]\nextends = "arena-v6"\nname = "cand"\nseeds = [0]\n[training]\nlr = 0.002\n'
                 '[[models]]\nname = "X"\nbackbone = "deltagru"\nhidden_size = 14\n'
                 'options = { lr_schedule = "cosine", warmup_epochs = 5 }\n')
    c, base = load_protocol(str(p)), load_protocol("arena-v6")
    assert (c.name, c.seeds, c.epochs, c.conditions) == ("cand", (0,), 240, base.conditions)
    assert c.training == {**base.training, "lr": 0.002}
    assert [(m.name, m.options) for m in c.models] == [("X", {"lr_schedule": "cosine", "warmup_epochs": 5})]
    cand = load_protocol(str(Path(__file__).resolve().parents[2] / "benchmarks" / "arena-v6-candidates.toml"))
    assert cand.training == base.training and all(m.hidden_size <= 15 for m in cand.models)
    assert all(count_parameters(build_model(m.backbone, m.hidden_size)) <= 1000 for m in cand.models)


def test_leaderboard_out_is_never_a_run_folder_a_dataset_or_someone_elses_folder(tmp_path, capsys):
    """--out (and --merge's) obeys the output rule (runs/outputs.py): refused before any training, nothing written."""
    from dpd_desktop.data import make_demo_dataset, save_split_csv

    data = save_split_csv(make_demo_dataset(seed=1, n_train=512, n_val=512, n_test=512, nperseg=256), tmp_path / "d")
    spec = tmp_path / "tiny.toml"
    spec.write_text(TINY.format(dataset=data))
    run = tmp_path / "elsewhere" / "2026-01-01-000000-pa-gru4"  # a run's record, copied out of its workspace
    run.mkdir(parents=True)
    (run / "status.json").write_text('{"run_id": "2026-01-01-000000-pa-gru4", "state": "succeeded"}')
    (run / "config.json").write_text("{}")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "trials.csv").write_text("my own table\n")
    ws = ["--workspace", str(tmp_path / "ws")]
    for out, why in ((run, "the run folder"), (data, "dataset"), (mine, "not an arena leaderboard folder"), (spec, "is a file")):
        before = {p: p.read_bytes() for p in Path(out).rglob("*") if p.is_file()} if out.is_dir() else None
        for argv in (["arena", str(spec), "--device", "cpu", "--out", str(out)],
                     ["arena", "--merge", str(tmp_path / "a"), "--out", str(out)]):
            assert main([*ws, *argv]) == 2, (out, argv)
            err = capsys.readouterr().err
            assert f"the output {out} " in err and why in err.split(str(out), 1)[1] and "Traceback" not in err, err
        if before is not None:
            assert {p: p.read_bytes() for p in Path(out).rglob("*") if p.is_file()} == before
    assert not (tmp_path / "ws" / "runs").exists() or not any((tmp_path / "ws" / "runs").iterdir())  # nothing trained


def test_missing_assets_or_no_protocol_exit_2_saying_why_and_leaving_no_folders(tmp_path, capsys):
    """Inputs that cannot be used are refused before anything is written: no empty condition or leaderboard folder."""
    p = tmp_path / "p.toml"
    p.write_text('[protocol]\nextends = "arena-v6"\nname = "p"\nseeds = [0]\n'
                 '[[models]]\nname = "X"\nbackbone = "gru"\nhidden_size = 4\n')
    ws = tmp_path / "ws"
    assert main(["--workspace", str(ws), "arena", str(p), "--device", "cpu", "--assets", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "calibration-v6-apa-b.json" in err and "make arena-data" in err and "Traceback" not in err, err
    assert not (ws / "arena").exists()
    assert main(["--workspace", str(ws), "arena"]) == 2
    out = capsys.readouterr()
    assert out.err.startswith("error: name a protocol") and "arena-v6:" in out.out
