"""The instrument loop on the virtual bench (issue 25's Done-when), its safety and its record.

The bench: the demo's 4-carrier OFDM (data/synthetic.py, 16,384 samples, PAPR 10.3 dB) at -10 dBm into the default
memory-polynomial PA (instruments/virtual.py: 30 dB gain, 1.7 dB compression at the waveform's peak level), a path
delay of 3.37 samples, 40 dB SNR per capture sample, a drift of 0.05 dB and 0.5° per capture; 16 periods averaged.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dpd_desktop.instruments.connect import open_bench, parse_instrument
from dpd_desktop.instruments.virtual import FaultPlan
from dpd_desktop.loop.config import LoopConfig
from dpd_desktop.loop.dataset import capture_to_dataset
from dpd_desktop.loop.engine import LoopRunner
from dpd_desktop.loop.events import IterationEnded, LoopEnded
from dpd_desktop.loop.store import read_loop
from dpd_desktop.runs.index import RunIndex
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.data import load_dataset
from dpd_desktop.metrics.profiles import corrected_aclr

IMPAIRMENTS = dict(delay_samples=3.37, snr_db=40.0, gain_drift_db=0.05, phase_drift_deg=0.5)
TARGET_DBM = 20.0


def _bench(faults=None, **kw):
    return open_bench(parse_instrument("virtual"), parse_instrument("virtual", "--analyzer"),
                      virtual_pa={**IMPAIRMENTS, **kw}, faults=faults)


def _cfg(**kw):
    base = dict(iterations=8, power_limit_dbm=6.0, target_output_dbm=TARGET_DBM, input_level_dbm=-10.0)
    return LoopConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def ilc_loop(tmp_path_factory):
    ws = Workspace(tmp_path_factory.mktemp("loop-ws"))
    bench = _bench()
    events = []
    result = LoopRunner(_cfg(), bench, ws, observers=[events.append]).run()
    return {"ws": ws, "bench": bench, "events": events, "result": result}


def test_ilc_reaches_minus_50_dbc_within_8_iterations_at_the_target_power(ilc_loop):
    rows = ilc_loop["result"].iterations
    assert ilc_loop["result"].state == "succeeded" and len(rows) == 8
    baseline = rows[0]
    assert baseline["kind"] == "no-dpd" and -36.0 <= baseline["ACLR_AVG"] <= -30.0  # clearly worse without DPD
    first = next(r for r in rows if r["ACLR_AVG"] <= -50.0)
    assert first["index"] <= 7
    assert abs(first["output_dbm"] - TARGET_DBM) <= 0.5
    assert all(abs(r["output_dbm"] - TARGET_DBM) <= 0.5 for r in rows[first["index"]:])
    assert all(abs(r["delay_samples"] - 3.37) <= 0.01 for r in rows)
    assert rows[-1]["EVM"] < baseline["EVM"] - 15 and rows[-1]["NMSE"] < baseline["NMSE"] - 15


def test_the_reported_aclr_is_the_metrics_modules_on_the_recorded_output(ilc_loop):
    """Independent check: the corrected ACLR of results.h5's prediction equals the iteration's number."""
    last = ilc_loop["result"].iterations[-1]
    rec = RunRecord.open(ilc_loop["ws"].runs_dir / last["run_id"])
    _, splits = rec.read_results()
    left, right, avg = corrected_aclr(splits["test"]["prediction"], 640e6, 160e6, 4, 2048)
    assert avg == pytest.approx(last["ACLR_AVG"], abs=1e-4)  # results.h5 holds float32 in units of the peak
    assert rec.test_metrics["ACLR_AVG"] == pytest.approx(last["ACLR_AVG"], abs=1e-12)


def test_what_was_played_never_exceeded_the_limit_and_rf_ends_off(ilc_loop):
    bench, res = ilc_loop["bench"], ilc_loop["result"]
    peaks = [10 * np.log10(np.max(np.abs(u) ** 2)) for u in bench.virtual.played]
    assert len(peaks) == 8 * 1 and max(peaks) <= 6.0
    assert peaks == pytest.approx([r["input_peak_dbm"] for r in res.iterations], abs=1e-9)
    assert res.rf_off and not bench.virtual.rf_on and bench.generator.log[-1] == "OUTP 0"


def test_each_iteration_is_a_run_and_the_loop_a_group(ilc_loop):
    ws, res = ilc_loop["ws"], ilc_loop["result"]
    info = read_loop(res.folder)
    assert info.state == "succeeded" and [r["run_id"] for r in info.iterations] == [
        r["run_id"] for r in res.iterations]
    ended = [e for e in ilc_loop["events"] if isinstance(e, IterationEnded)]
    assert [e.row() for e in ended] == info.iterations
    with RunIndex.open(ws) as idx:
        rows = {r.run_id: r for r in idx.runs()}
    for it in res.iterations:
        row = rows[it["run_id"]]
        assert (row.state, row.step, row.run_group) == ("succeeded", "dpd", f"loop {res.loop_id}")
        assert row.test_aclr_avg == pytest.approx(it["ACLR_AVG"])
        files = {p.name for p in (ws.runs_dir / it["run_id"]).iterdir()}
        assert {"config.json", "status.json", "results.h5", "pa_input.h5", "pa_output.h5", "waveform.wv",
                "plots", "log.txt"} <= files
    cfg = json.loads((ws.runs_dir / res.iterations[3]["run_id"] / "config.json").read_text())
    assert cfg["experiment"]["extra"]["loop"] == {"id": res.loop_id, "iteration": 3, "kind": "ilc"}
    assert cfg["loop"]["signal"]["n_sub_ch"] == 4


def test_a_capture_becomes_a_dataset_in_one_step(ilc_loop, tmp_path):
    it = ilc_loop["result"].iterations[0]
    r = capture_to_dataset(ilc_loop["ws"].runs_dir / it["run_id"], tmp_path / "ds")
    ds = load_dataset(tmp_path / "ds")
    assert r.delay_integer == 3 and r.delay_fraction == pytest.approx(0.37, abs=0.01)
    assert sum(r.n_samples.values()) == 16384 - 3 == sum(getattr(ds, s).x.shape[0] for s in ("train", "val", "test"))
    assert ds.spec.sample_rate_hz == 640e6 and ds.spec.n_sub_ch == 4
    assert float(np.max(np.abs(ds.train.x[:, 0] + 1j * ds.train.x[:, 1]))) == pytest.approx(1.0, abs=1e-6)


def test_a_waveform_over_the_power_limit_is_refused_before_it_is_played(tmp_path):
    bench = _bench()
    res = LoopRunner(_cfg(power_limit_dbm=1.0), bench, Workspace(tmp_path)).run()  # iteration 1's peak: 1.3 dBm
    assert res.state == "failed" and len(res.iterations) == 1
    assert res.message.startswith("generator: refused iteration 1's waveform before playing it: its peak")
    assert "\n" not in res.message and res.rf_off and not bench.virtual.rf_on
    assert len(bench.virtual.played) == 1  # only the baseline reached the PA
    assert bench.generator.log.count("LOAD dpd_loop_01 16384 @ 6.4e+08") == 0
    runs = sorted(Workspace(tmp_path).list_runs(), key=lambda r: r.run_id)
    assert [r.state for r in runs] == ["succeeded", "failed"] and runs[1].message == res.message


@pytest.mark.parametrize("fault,expect", [
    (FaultPlan(dead={"analyzer.capture": 2}), "analyzer (DPD Desktop virtual analyzer): does not respond to capture"),
    (FaultPlan(timeout={"analyzer.capture": 3}), "analyzer (DPD Desktop virtual analyzer): no answer within 10 s"),
])
def test_a_dead_or_silent_analyzer_ends_the_loop_in_one_line_with_rf_off(tmp_path, fault, expect):
    bench = _bench(faults=fault)
    ended = []
    res = LoopRunner(_cfg(averages=2), bench, Workspace(tmp_path), observers=[ended.append]).run()
    assert res.state == "failed" and res.message.startswith(expect) and "\n" not in res.message
    assert res.rf_off and not bench.virtual.rf_on
    log = bench.generator.log
    assert log[-2:] == ["OUTP 1", "OUTP 0"]  # RF was on for the capture; muted right after the failure
    assert isinstance(ended[-1], LoopEnded) and ended[-1].rf_off and ended[-1].message == res.message
    info = read_loop(res.folder)
    assert (info.state, info.doc["message"], info.doc["rf_off"]) == ("failed", res.message, True)


def test_a_dead_generator_says_the_rf_state_is_unknown(tmp_path):
    bench = _bench(faults=FaultPlan(dead={"generator.load": 2}))
    res = LoopRunner(_cfg(averages=2), bench, Workspace(tmp_path)).run()
    assert res.state == "failed" and not res.rf_off and "\n" not in res.message
    assert res.message.startswith("generator (DPD Desktop virtual generator): does not respond to load")
    assert res.message.endswith("switch it off at the instrument")


def test_stop_mutes_the_generator_first(tmp_path):
    bench = _bench()
    runner = None

    def stop_after_two(ev):
        if isinstance(ev, IterationEnded) and ev.index == 1:
            bench.generator.log.append("-- stop requested --")
            runner.request_stop()

    runner = LoopRunner(_cfg(averages=2), bench, Workspace(tmp_path), observers=[stop_after_two])
    res = runner.run()
    assert res.state == "cancelled" and len(res.iterations) == 2 and res.rf_off
    log = bench.generator.log
    after = log[log.index("-- stop requested --") + 1:]
    assert after == ["OUTP 0"]  # the first (and only) thing after the stop: RF off
    assert read_loop(res.folder).state == "cancelled"


def test_ila_and_a_fitted_gmp_dpd_linearise_too(tmp_path):
    ws = Workspace(tmp_path)
    res = LoopRunner(_cfg(strategy="ila", iterations=4, fit="gmp", ila_memory=3), _bench(), ws).run()
    assert res.state == "succeeded", res.message
    kinds = [r["kind"] for r in res.iterations]
    assert kinds == ["no-dpd", "ila", "ila", "ila", "dpd-gmp"]
    assert min(r["ACLR_AVG"] for r in res.iterations[1:4]) <= -45.0
    assert res.iterations[-1]["ACLR_AVG"] <= -45.0 and abs(res.iterations[-1]["output_dbm"] - TARGET_DBM) <= 0.5
    fit = read_loop(res.folder).doc["fit"]
    rec = RunRecord.open(ws.runs_dir / fit["run_id"])
    assert rec.step == "pa" and rec.backbone == "gmp" and rec.state == "succeeded"
    assert rec.config.extra["loop"]["iteration"] == "fit"


def test_the_config_refuses_a_loop_without_a_power_limit():
    from dpd_desktop.config import ConfigError

    with pytest.raises(ConfigError, match="power_limit_dbm: a power limit is required"):
        LoopConfig().validate()
    with pytest.raises(ConfigError, match="^mu: "):
        LoopConfig(power_limit_dbm=0.0, mu=0).validate()
    assert math.isclose(LoopConfig.from_dict(_cfg().to_dict()).power_limit_dbm, 6.0)
