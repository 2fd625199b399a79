"""The loop against pyvisa-sim instruments answering the R&S SMW200A / FSW commands (instruments/sim.py): the SCPI
sent, in order, and a silent analyzer ending the loop in one line with the generator's RF off."""
from __future__ import annotations

import numpy as np
import pytest

from dpd_desktop.instruments.connect import open_bench, parse_instrument
from dpd_desktop.instruments.rs_wv import decode_wv
from dpd_desktop.instruments.sim import sim_capture, write_sim_yaml
from dpd_desktop.loop.config import LoopConfig
from dpd_desktop.loop.engine import LoopRunner
from dpd_desktop.loop.signal import load_signal
from dpd_desktop.runs.workspace import Workspace

N = 4096
LEVEL = -10.0


@pytest.fixture()
def sim(tmp_path):
    signal = load_signal("demo", N)
    x = signal.x * 10 ** (LEVEL / 20) / np.sqrt(np.mean(np.abs(signal.x) ** 2))
    yaml = write_sim_yaml(tmp_path / "sim.yaml", sim_capture(x, LEVEL))
    share = tmp_path / "share"
    share.mkdir()
    return {"signal": signal, "yaml": yaml, "share": share, "ws": Workspace(tmp_path / "ws")}


def _run(sim, analyzer="sim", timeout_s=5.0, iterations=2):
    bench = open_bench(parse_instrument("sim"), parse_instrument(analyzer, "--analyzer"), sim_yaml=sim["yaml"],
                       share_dir=sim["share"], timeout_s=timeout_s)
    cfg = LoopConfig(iterations=iterations, power_limit_dbm=6.0, input_level_dbm=LEVEL, averages=1, signal_samples=N,
                     nperseg=1024, center_hz=2.14e9, ref_level_dbm=33.0, timeout_s=timeout_s)
    gen_log, ana_log = bench.generator.session.log, bench.analyzer.session.log
    res = LoopRunner(cfg, bench, sim["ws"], signal=sim["signal"]).run()
    return res, bench, gen_log, ana_log


CHECK = ["? *OPC?", "? SYST:ERR?"]


def _generator_iteration(k: int, share, level: float) -> list[str]:
    return ["> OUTP1:STAT 0", *CHECK, f"> SOUR1:BB:ARB:WAV:SEL '{share}/dpd_loop_{k:02d}.wv'",
            "> SOUR1:BB:ARB:CLOC 640000000.000000", *CHECK, f"> SOUR1:POW:LEV:IMM:AMPL {level:.3f}", *CHECK,
            "> SOUR1:BB:ARB:STAT 1", "> SOUR1:BB:ARB:TRIG:OUTP1:MODE REST", *CHECK, "> OUTP1:STAT 1", *CHECK]


def test_the_loop_sends_the_smw_and_fsw_commands_in_order(sim):
    res, bench, gen_log, ana_log = _run(sim)
    assert res.state == "succeeded", res.message
    assert [r["kind"] for r in res.iterations] == ["no-dpd", "ilc"]
    levels = [r["input_rms_dbm"] for r in res.iterations]
    assert levels[0] == pytest.approx(LEVEL, abs=1e-9)
    expected_gen = ["? *IDN?", "> *RST", "> *CLS", *CHECK, "> SOUR1:POW:LIM:AMPL 6.000", *CHECK,
                    "> SOUR1:FREQ:CW 2140000000.000000", *CHECK,
                    *_generator_iteration(0, sim["share"], levels[0]), *_generator_iteration(1, sim["share"], levels[1]),
                    "> OUTP1:STAT 0", *CHECK]
    assert gen_log == expected_gen
    capture = ["> INIT:IMM", "? *OPC?", f"? TRAC:IQ:DATA:MEM? 0,{N}"]
    assert ana_log == ["? *IDN?", "> *RST", "> *CLS", *CHECK, "> INST:SEL IQ", "> INIT:CONT OFF",
                       "> FREQ:CENT 2140000000.000000", "> DISP:TRAC:Y:SCAL:RLEV 33.00",
                       "> TRAC:IQ:SRAT 640000000.000000", f"> TRAC:IQ:RLEN {N}", "> TRIG:SOUR EXT",
                       "> TRAC:IQ:DATA:FORM IQP", "> FORM ASC", *CHECK, *capture, *capture]
    # the instruments' own state, asked through pyvisa-sim: RF off at the end, the last waveform selected
    gres = bench.generator.session.resource
    assert gres.query("OUTP1:STAT?") == "0"
    assert gres.query("SOUR1:BB:ARB:WAV:SEL?") == f"'{sim['share']}/dpd_loop_01.wv'"
    assert float(gres.query("SOUR1:POW:LIM:AMPL?")) == 6.0


def test_the_waveform_files_are_what_was_played(sim):
    res, bench, _, _ = _run(sim)
    x = sim["signal"].x
    wv0, tags = decode_wv((sim["share"] / "dpd_loop_00.wv").read_bytes())
    assert np.max(np.abs(wv0 - x / np.max(np.abs(x)))) < 3e-5 and float(tags["CLOCK"]) == 640e6
    # the capture is the simulated analyzer's fixed answer: the loop measured the PA without DPD from it
    assert -36 <= res.iterations[0]["ACLR_AVG"] <= -30 and res.iterations[0]["delay_samples"] == pytest.approx(3.37,
                                                                                                               abs=0.01)


def test_a_silent_analyzer_gives_a_one_line_error_with_rf_off(sim):
    res, bench, gen_log, ana_log = _run(sim, analyzer="sim:timeout", timeout_s=0.3)
    assert res.state == "failed" and "\n" not in res.message
    assert res.message == f"analyzer (Rohde&Schwarz FSW-26): no answer within 0.3 s to 'TRAC:IQ:DATA:MEM? 0,{N}'"
    assert res.rf_off and gen_log[-3:] == ["> OUTP1:STAT 0", *CHECK] and gen_log[-6] == "> OUTP1:STAT 1"
    assert bench.generator.session.resource.query("OUTP1:STAT?") == "0"
