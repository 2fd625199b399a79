"""The loop's HTML report, ``dpd-desktop loop`` / ``loop-dataset`` from the command line, and a trained PA run as
the virtual PA."""
from __future__ import annotations

import html
import json
import re

import pytest

from dpd_desktop import cli
from dpd_desktop.instruments.connect import open_bench, parse_instrument, parse_virtual_pa
from dpd_desktop.loop.config import LoopConfig
from dpd_desktop.loop.engine import LoopRunner
from dpd_desktop.loop.report import render_loop
from dpd_desktop.loop.store import read_loop
from dpd_desktop.runs.workspace import Workspace


@pytest.fixture(scope="module")
def small_loop(tmp_path_factory):
    ws = Workspace(tmp_path_factory.mktemp("report-ws"))
    bench = open_bench(parse_instrument("virtual"), parse_instrument("virtual"),
                       virtual_pa=dict(delay_samples=3.37, snr_db=40.0))
    res = LoopRunner(LoopConfig(iterations=3, power_limit_dbm=6.0, target_output_dbm=20.0, averages=4), bench,
                     ws).run()
    return ws, res


def test_the_report_is_one_self_contained_file_with_every_iteration(small_loop):
    ws, res = small_loop
    text = render_loop(res.folder)
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    assert "<script" not in text and not re.search(r'(src|href)="(?!#)', text)  # nothing loaded from elsewhere
    assert text.count("<svg") == 4  # linearity, output power, delay, PSD
    cells = [html.unescape(c) for c in re.findall(r'<td class="num">([^<]*)</td>', text)]
    for r in read_loop(res.folder).iterations:
        assert r["run_id"] in text
        assert f"{r['ACLR_AVG']:.2f}" in cells and f"{r['delay_samples']:.4f}" in cells
    assert "virtual bench's delay" in html.unescape(text) and "succeeded" in text


def test_loop_from_the_command_line(tmp_path, capsys):
    ws = tmp_path / "ws"
    rc = cli.main(["--workspace", str(ws), "loop", "--power-limit", "6", "--virtual-pa", "delay=3.37,snr=40",
                   "--target-output", "20", "--iterations", "3", "--averages", "4", "--samples", "8192",
                   "--dataset-out", str(tmp_path / "ds"), "--report", str(tmp_path / "r.html"), "--json"])
    out = capsys.readouterr().out
    assert rc == 0
    doc = json.loads(out[out.index("{"):])
    assert doc["state"] == "succeeded" and len(doc["iterations"]) == 3 and doc["rf_off"]
    assert abs(doc["delay_samples"] - 3.37) < 0.01
    lines = [ln for ln in out.splitlines() if re.match(r"^\s+\d+ (no-dpd|ilc)", ln)]
    assert [ln.split()[1] for ln in lines] == ["no-dpd", "ilc", "ilc"]
    assert float(lines[0].split()[2]) == pytest.approx(doc["iterations"][0]["ACLR_AVG"], abs=0.005)
    assert (tmp_path / "r.html").is_file() and (tmp_path / "ds" / "spec.json").is_file()
    run = doc["iterations"][1]["run_id"]
    assert cli.main(["--workspace", str(ws), "loop-dataset", run, "--out", str(tmp_path / "ds2")]) == 0
    assert "delay 3 samples removed" in capsys.readouterr().out


def test_loop_dataset_given_a_loop_or_another_run_says_what_it_needs(tmp_path, capsys):
    """loop-dataset given the loop's id said only "run not found"; given a run that is no loop iteration it said
    "(field 'loop.signal': 'loop')". Both name what is needed now."""
    ws = tmp_path / "ws"
    assert cli.main(["--workspace", str(ws), "loop", "--power-limit", "6", "--iterations", "2", "--averages", "1",
                     "--samples", "4096", "--json"]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out[out.index("{"):])
    runs = [it["run_id"] for it in doc["iterations"]]
    assert len(runs) == 2
    assert cli.main(["--workspace", str(ws), "loop-dataset", doc["loop_id"], "--out", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"; {doc['loop_id']} is a loop, whose iterations are the runs {runs[0]}, {runs[1]}: give "
                        "one of them")
    assert err.startswith(f"error: run '{doc['loop_id']}' not found")
    other = ws / "runs" / "not-a-loop-run"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"experiment": {"step": "pa"}}))
    assert cli.main(["--workspace", str(ws), "loop-dataset", "not-a-loop-run", "--out", str(tmp_path / "d")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {other / 'config.json'}: not a loop iteration's configuration (field 'loop' is missing; give the "
        "run of a loop iteration, as its loop.json lists them)")
    assert not (tmp_path / "d").exists()


def test_loop_command_line_errors_are_one_line_and_exit_2(tmp_path, capsys):
    ws = ["--workspace", str(tmp_path / "ws")]
    with pytest.raises(SystemExit) as e:
        cli.main([*ws, "loop"])  # --power-limit is required
    assert e.value.code == 2
    capsys.readouterr()
    assert cli.main([*ws, "loop", "--power-limit", "6", "--virtual-pa", "delay=x"]) == 2
    assert capsys.readouterr().err.strip() == "error: --virtual-pa 'delay=x': delay must be a number, got 'x'"
    assert cli.main([*ws, "loop", "--power-limit", "6", "--generator", "virtual", "--analyzer", "sim"]) == 2
    assert "go together" in capsys.readouterr().err
    assert cli.main([*ws, "loop", "--power-limit", "-30", "--iterations", "2"]) == 1  # refused: exit 1, one line
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["failed: generator: refused iteration 0's waveform before playing it: its peak 0.30 dBm would "
                   "exceed the power limit -30.00 dBm"]


def test_parse_virtual_pa_keys():
    assert parse_virtual_pa("delay=3.37,snr=40,gain-drift=0.1,seed=4") == {
        "delay_samples": 3.37, "snr_db": 40.0, "gain_drift_db": 0.1, "seed": 4}
    with pytest.raises(ValueError, match="keys delay, snr"):
        parse_virtual_pa("lag=3")


def test_a_trained_pa_run_is_the_virtual_pa(tmp_path):
    """A tiny GRU PA trained on the demo dataset drives the virtual bench; the loop runs and linearises it."""
    ws = Workspace(tmp_path / "ws")
    assert cli.main(["--workspace", str(ws.root), "train-pa", "--dataset", "demo", "--epochs", "2", "--hidden-size",
                     "8", "--frame-length", "50", "--stride", "8", "--max-train-samples", "8000", "--device", "cpu",
                     "--threads", "1", "--no-plots", "--quiet"]) == 0
    pa = ws.list_runs(step="pa")[0]
    bench = open_bench(parse_instrument("virtual"), parse_instrument("virtual"), workspace=ws, pa_run=pa.run_id,
                       virtual_pa=dict(delay_samples=1.25, snr_db=45.0, gain_db=0.0))
    res = LoopRunner(LoopConfig(iterations=3, power_limit_dbm=6.0, averages=4, signal_samples=8192), bench, ws).run()
    assert res.state == "succeeded", res.message
    assert read_loop(res.folder).doc["bench"]["virtual"]["pa"] == {
        "kind": "pa-run", "run": pa.run_id, "run_id": pa.run_id,
        "checkpoint_sha256": bench.virtual.pa.info["sha256"]}
    # a recurrent PA model is causal: its memory adds to the path's 1.25 samples (about 0.9 for this 2-epoch GRU)
    assert all(1.25 < r["delay_samples"] < 3.25 for r in res.iterations)
    assert res.iterations[-1]["NMSE"] < res.iterations[0]["NMSE"] - 3


def test_loop_report_replaces_an_existing_file_only_with_overwrite(tmp_path, capsys):
    ws = ["--workspace", str(tmp_path / "ws")]
    mine = tmp_path / "mine.html"
    mine.write_text("an older report")
    argv = [*ws, "loop", "--power-limit", "6", "--virtual-pa", "delay=3", "--iterations", "1", "--averages", "2",
            "--samples", "4096", "--report", str(mine)]
    assert cli.main(argv) == 2  # refused before the loop runs, naming the flag that replaces it
    assert capsys.readouterr().err.strip() == (f"error: the output {mine} exists (give --overwrite to replace it, "
                                               "or give another --report)")
    assert mine.read_text() == "an older report" and not (tmp_path / "ws" / "loops").exists()
    assert cli.main([*argv, "--overwrite"]) == 0
    assert f"report: {mine}" in capsys.readouterr().out and "<svg" in mine.read_text(encoding="utf-8")
