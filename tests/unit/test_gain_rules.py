"""DPD target gain rules (training/gain.py) against independent NumPy computations, and a DPD run under the
``small-signal`` rule and the ``corrected`` profile: what config.json, status.json, results.h5 and the command line
record, and ``runs evaluate`` re-scoring the stored run."""
from __future__ import annotations

import json
import math

import h5py
import numpy as np
import pytest

from datasets_dir import DATASETS
from dpd_desktop.cli.entry import build_parser
from dpd_desktop.cli.train import config_from_args as _config_from_args
from dpd_desktop.cli.entry import main as cli_main
from dpd_desktop.config import ConfigError, ExperimentConfig
from dpd_desktop.data import load_dataset, make_demo_dataset
from dpd_desktop.runs.evaluate import evaluate_run
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training.gain import GAIN_RULES, target_gain
from dpd_desktop.training.trainer import Trainer

DPA_200 = DATASETS / "DPA_200MHz"
TINY = dict(hidden_size=4, frame_length=40, stride=16, device="cpu", batch_size=32)


@pytest.fixture(scope="module")
def dpa200():
    if not (DPA_200 / "spec.json").is_file():
        pytest.skip(f"measured dataset not found at {DPA_200}")
    return load_dataset(DPA_200)


def _complex64(a):
    return a[:, 0].astype(np.float64) + 1j * a[:, 1].astype(np.float64)


def _independent(ds) -> dict[str, float]:
    """The three rules from the float64 training samples, written another way: peak by np.abs/max; small-signal by
    np.linalg.lstsq on the samples below the 40 % order statistic (np.sort); rms from np.mean."""
    tr = ds.train
    x = tr.x64[:, 0] + 1j * tr.x64[:, 1] if tr.x64 is not None else _complex64(tr.x)
    y = tr.y64[:, 0] + 1j * tr.y64[:, 1] if tr.y64 is not None else _complex64(tr.y)
    k = int(0.4 * x.size)
    mag = np.abs(x)
    thr = np.sort(mag)[k - 1]
    sel = mag <= thr
    assert sel.sum() == k  # no tie at the threshold on these data (the rule breaks ties by time order)
    c = np.linalg.lstsq(x[sel, None], y[sel], rcond=None)[0][0]
    return {"peak": np.abs(y).max() / np.abs(x).max(), "small-signal": abs(c),
            "rms": math.sqrt(np.mean(np.abs(y) ** 2) / np.mean(np.abs(x) ** 2)), "phase": math.degrees(np.angle(c))}


def test_each_rule_against_numpy_on_dpa200(dpa200):
    want = _independent(dpa200)
    for rule in GAIN_RULES:
        g = target_gain(dpa200, rule)
        assert g.rule == rule and g.value == pytest.approx(want[rule], rel=1e-12), rule
        assert g.candidates[rule] == g.value
    assert target_gain(dpa200, "peak").value == dpa200.gain  # the reference's g, bitwise
    assert want["peak"] == pytest.approx(2.52081, abs=1e-4)  # reference §1.4
    ss = target_gain(dpa200, "small-signal").small_signal
    assert ss["phase_deg"] == pytest.approx(want["phase"], abs=1e-9) and ss["n_samples"] == int(0.4 * len(dpa200.train))
    # a compressing PA: peak gain < rms gain < small-signal gain
    assert want["peak"] < want["rms"] < want["small-signal"]


def test_gain_rule_is_validated():
    assert ExperimentConfig().gain_rule == "peak"
    with pytest.raises(ConfigError, match="gain_rule"):
        ExperimentConfig(gain_rule="max").validate()
    with pytest.raises(ValueError, match="unknown gain rule"):
        target_gain(make_demo_dataset(n_train=256, n_val=256, n_test=256, nperseg=256), "linear")


@pytest.fixture(scope="module")
def small_signal_run(tmp_path_factory):
    ds = make_demo_dataset(seed=0, n_train=2000, n_val=3000, n_test=3000, nperseg=1024)
    ws = Workspace(tmp_path_factory.mktemp("gain-rules"))
    pa = Trainer(ExperimentConfig(step="pa", dataset="demo", epochs=1, **TINY), dataset=ds, workspace=ws).run()
    assert pa.state == "succeeded", pa.message
    cfg = ExperimentConfig(step="dpd", dataset="demo", epochs=1, pa_run=str(pa.run_dir), gain_rule="small-signal",
                           metric_profile="corrected", **TINY)
    dpd = Trainer(cfg, dataset=ds, workspace=ws).run()
    assert dpd.state == "succeeded", dpd.message
    return ds, ws, pa, dpd


def test_the_run_records_the_rule_profile_and_equal_power_report(small_signal_run):
    ds, ws, _, dpd = small_signal_run
    rec = RunRecord.open(dpd.run_dir)
    want = _independent(ds)["small-signal"]
    assert rec.metric_profile == "corrected" and rec.gain_rule == "small-signal"
    assert rec.gain == pytest.approx(want, rel=1e-12)
    block = rec.doc["gain"]
    assert set(block["candidates"]) == set(GAIN_RULES) and block["candidates"]["peak"] == ds.gain
    st = rec.status_doc
    assert st["metric_profile"] == "corrected" and st["gain_rule"] == "small-signal"
    # output powers: 10·log10 of the mean power of the stored cascade output; the change is their difference
    with h5py.File(rec.results_path) as f:
        pred, target, x = f["test/prediction"][()], f["test/target"][()], f["test/x"][()]
        attrs = dict(f.attrs)
    p_with = 10 * math.log10(np.mean(pred.astype(np.float64) ** 2) * 2)
    assert st["out_power_with_dpd_db"] == pytest.approx(p_with, abs=1e-9)
    assert st["rms_out_diff_db"] == pytest.approx(st["out_power_with_dpd_db"] - st["out_power_without_dpd_db"],
                                                  abs=1e-9)
    assert np.array_equal(target, (rec.gain * x.astype(np.float64)).astype(np.float32))  # g·x with g = |c|
    # the DPD-off PA is driven to the cascade's output power; ACLR is the run's own (it needs no reference)
    assert st["eqp_converged"] and abs(st["eqp_residual_db"]) <= 1e-3
    assert st["eqp_ACLR_with_dpd"] == st["test_metrics"]["ACLR_AVG"]
    assert all(math.isfinite(st[k]) for k in ("eqp_ACLR_without_dpd", "eqp_EVM_with_dpd", "eqp_EVM_without_dpd"))
    assert attrs["metric_profile"] == "corrected" and attrs["eqp_drive_db"] == st["eqp_drive_db"]


def test_runs_evaluate_rescores_without_retraining(small_signal_run, capsys):
    _, ws, pa, dpd = small_signal_run
    # the corrected profile uses valid samples only: re-scoring the stored predictions gives the run's numbers
    doc = evaluate_run(dpd.run_dir, "corrected")
    st = RunRecord.open(dpd.run_dir).status_doc
    assert doc["metrics"]["test"] == st["test_metrics"] and doc["metrics"]["val"] == st["val_metrics"]
    # a legacy PA run re-scored under its own profile: 3000 samples are not whole 1024-sample segments, so the
    # result says the padded tail is zeros here (the run's tail was the model's output on zero input)
    leg = evaluate_run(pa.run_dir, "legacy-2.2.1")
    assert leg["padded_tail"] == {"val": True, "test": True} and leg["recorded_profile"] == "legacy-2.2.1"
    assert leg["metrics"]["test"]["NMSE"] == pytest.approx(RunRecord.open(pa.run_dir).test_metrics["NMSE"], abs=0.5)
    assert cli_main(["--workspace", str(ws.root), "runs", "evaluate", pa.run_id, "--profile", "corrected",
                     "--json"]) == 0
    out = capsys.readouterr().out
    written = json.loads((pa.run_dir / "evaluation-corrected.json").read_text())
    assert json.loads(out) == written and written["profile"] == "corrected"
    assert written["metrics"]["test"]["NMSE"] == pytest.approx(evaluate_run(pa.run_dir, "corrected")["metrics"]
                                                               ["test"]["NMSE"], abs=1e-12)
    assert cli_main(["--workspace", str(ws.root), "runs"]) == 0  # plain `runs` still lists
    assert pa.run_id in capsys.readouterr().out
    assert cli_main(["--workspace", str(ws.root), "runs", "evaluate", "no-such-run", "--profile", "corrected"]) == 2


def test_command_line_options_reach_the_configuration():
    a = build_parser().parse_args(["train-dpd", "--dataset", "demo", "--pa-run", "r", "--gain-rule", "rms",
                                   "--metric-profile", "corrected"])
    cfg = _config_from_args(a, "dpd")
    assert (cfg.gain_rule, cfg.metric_profile) == ("rms", "corrected")
    a = build_parser().parse_args(["train-pa", "--dataset", "demo"])
    assert (_config_from_args(a, "pa").metric_profile, _config_from_args(a, "pa").gain_rule) == ("legacy-2.2.1", "peak")
    with pytest.raises(SystemExit):  # the gain rule is a DPD option; the profile choices are checked by argparse
        build_parser().parse_args(["train-pa", "--dataset", "demo", "--gain-rule", "rms"])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train-pa", "--dataset", "demo", "--metric-profile", "matlab"])
