"""Replay, compare and the HTML report of tiny finished runs (runs/replay.py, runs/compare.py, runs/report_html.py,
`dpd-desktop runs report`)."""
from __future__ import annotations

import html.parser
import math
import re

import h5py
import numpy as np
import pytest

from tiny_runs import B_DIFFERS, make_tiny_workspace, model_block, status  # tests/tiny_runs.py

from dpd_desktop.runs.artifacts import read_history_csv
from dpd_desktop.runs.compare import METRIC_ROWS, QUANT_ROWS, CompareError, compare_runs
from dpd_desktop.runs.record import RecordError
from dpd_desktop.runs.replay import load_replay
from dpd_desktop.runs.report_html import format_value, write_report
from dpd_desktop.runs.svg_plot import nice_step


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ws")
    out = make_tiny_workspace(root)
    out["root"] = root
    return out


def test_replay_history_and_psd_equal_the_files(runs):
    rep = load_replay(runs["a"])
    rows = read_history_csv(runs["a"] / "history.csv")
    assert [r["VAL_NMSE"] for r in rep.history] == [float(r["VAL_NMSE"]) for r in rows]
    assert rep.best_epoch == status(runs["a"])["best_epoch"]
    with h5py.File(runs["a"] / "results.h5", "r") as f:
        psd = f["test/psd_prediction_db"][()]
        freq = f["test/psd_freq_hz"][()]
        x = f["test/x"][()]
    p = rep.plots
    assert np.array_equal(p.psd[p.pred_name], psd.astype(np.float32))
    assert np.array_equal(p.psd_freq_mhz, (freq / 1e6).astype(np.float32))
    # AM/AM: |x| at the PlotData's decimation of the stored test input
    idx = np.linspace(0, len(x) - 1, num=min(2000, len(x))).astype(np.int64)
    assert np.allclose(p.amam_in, np.abs(x[idx, 0] + 1j * x[idx, 1]), rtol=1e-6)
    st = status(runs["a"])
    assert p.aclr[p.pred_name] == (st["test_metrics"]["ACLR_L"], st["test_metrics"]["ACLR_R"])


def test_replay_of_unreadable_names_the_file(runs):
    with pytest.raises(RecordError, match="config.json"):
        load_replay(runs["unreadable"])
    rep = load_replay(runs["damaged"])  # damaged: plots still come from results.h5, with a note
    assert rep.record.state == "damaged" and any("best.pt" in n for n in rep.notes)


def test_compare_metrics_equal_status_and_diff_is_exact(runs):
    cmp = compare_runs([runs["a"], runs["b"]])
    assert cmp.same_dataset and not cmp.notes
    table = cmp.metric_table()
    rows = [m for m in METRIC_ROWS if m[2] not in QUANT_ROWS]  # float runs without a quantised evaluation
    assert [t[0] for t in table] == [m[0] for m in rows]
    for j, d in enumerate((runs["a"], runs["b"])):
        st, model = status(d), model_block(d)
        want = {**{k: st["test_metrics"][k] for k in ("NMSE", "ACLR_L", "ACLR_R", "ACLR_AVG", "EVM")},
                "params": model["params"], "macs_per_sample": model["macs_per_sample"], "wall_s": st["wall_s"]}
        for (label, unit, values), (_, _, key) in zip(table, rows):
            assert values[j] == pytest.approx(want[key], abs=0), (label, j)
    assert dict(cmp.config_diff) == {f"experiment.{k}": (getattr_cfg(runs["a"], k), v) for k, v in B_DIFFERS.items()}


def getattr_cfg(run_dir, key):
    from dpd_desktop.runs.record import RunRecord
    return getattr(RunRecord.open(run_dir).config, key)


def test_compare_of_different_datasets_says_so(runs):
    cmp = compare_runs([runs["a"], runs["c"]])
    assert not cmp.same_dataset
    assert any("different datasets" in n for n in cmp.notes)
    assert {k for k, _ in cmp.config_diff} == {"dataset.fingerprint"}
    with pytest.raises(CompareError, match="two or more"):
        compare_runs([runs["a"]])


class _Parser(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.srcs, self.paths = [], [], 0

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        a = dict(attrs)
        for k in ("src", "href"):
            if k in a:
                self.srcs.append(a[k])
        if tag == "path" and a.get("d"):
            self.paths += 1


def _check_html(text):
    p = _Parser()
    p.feed(text)
    p.close()
    assert "script" not in p.tags and "link" not in p.tags
    assert all(s.startswith("data:") for s in p.srcs), p.srcs  # nothing external
    assert p.tags.count("svg") >= 4 and p.paths >= 4
    return p


def test_report_of_one_run_holds_metrics_config_and_images(runs, tmp_path):
    out = write_report([runs["a"]], tmp_path / "a.html")
    text = out.read_text(encoding="utf-8")
    _check_html(text)
    st = status(runs["a"])
    for k in ("NMSE", "ACLR_L", "ACLR_R", "ACLR_AVG", "EVM"):
        assert f">{format_value(st['test_metrics'][k], 'dB')}<" in text
    assert f">{model_block(runs['a'])['macs_per_sample']}<" in text
    for key in ("experiment.lr", "experiment.hidden_size", "experiment.frame_length"):
        assert re.search(rf"<td>{re.escape(key)}</td>\s*<td[^>]*>[^<]+</td>", text)
    assert ">0.005<" in text and ">50<" in text  # lr, frame_length


def test_report_of_a_comparison_and_the_cli(runs, tmp_path):
    from dpd_desktop.cli.entry import main

    out = tmp_path / "cmp.html"
    rc = main(["--workspace", str(runs["root"]), "runs", "report", runs["a"].name, str(runs["b"]), "--out", str(out)])
    assert rc == 0
    text = out.read_text(encoding="utf-8")
    _check_html(text)
    for d in (runs["a"], runs["b"]):
        assert f">{format_value(status(d)['test_metrics']['NMSE'], 'dB')}<" in text
    assert "<td>experiment.lr</td>" in text and "<td>experiment.hidden_size</td>" not in text  # the diff only
    assert main(["--workspace", str(runs["root"]), "runs", "report", "no-such-run", "--out", str(out)]) == 2


def test_nice_step():
    assert [nice_step(s) for s in (1.0, 6.0, 13.0, 0.07)] == [0.2, 1.0, 5.0, 0.02]
    assert math.isclose(nice_step(600.0), 100.0)


def test_compare_of_runs_under_different_metric_profiles_says_so(runs, tmp_path):
    """Runs recorded under different metric profiles: the config diff lists the profile and a note names each run's
    profile and how to re-score them under one."""
    import json
    import shutil

    b = tmp_path / runs["b"].name
    shutil.copytree(runs["b"], b)
    doc = json.loads((b / "config.json").read_text())
    doc["experiment"]["metric_profile"] = "corrected"
    (b / "config.json").write_text(json.dumps(doc))
    cmp = compare_runs([runs["a"], b])
    assert ("experiment.metric_profile", ("legacy-2.2.1", "corrected")) in cmp.config_diff
    (note,) = [n for n in cmp.notes if "metric profiles" in n]
    assert f"{runs['a'].name}: legacy-2.2.1" in note and f"{b.name}: corrected" in note and "runs evaluate" in note


@pytest.mark.parametrize("damage", ["extra cell", "missing cell", "trailing empty cell"])
def test_a_history_row_that_does_not_match_its_header_is_a_clear_error(runs, tmp_path, capsys, damage):
    """One extra cell in a row of history.csv: `runs report` exit 2 naming the file and the line (it was a
    traceback, exit 1); so is a missing cell. An empty cell past the last column (a spreadsheet's trailing comma)
    is read as the row it is."""
    import shutil

    from dpd_desktop.cli.entry import main

    run = runs["root"] / "runs" / f"{runs['a'].name}-{damage.replace(' ', '-')}"
    shutil.copytree(runs["a"], run)
    lines = (run / "history.csv").read_text().splitlines()
    lines[2] = {"extra cell": lines[2] + ",99", "missing cell": lines[2].rsplit(",", 1)[0],
                "trailing empty cell": lines[2] + ","}[damage]
    (run / "history.csv").write_text("\n".join(lines) + "\n")
    out = tmp_path / "r.html"
    rc = main(["--workspace", str(runs["root"]), "runs", "report", run.name, "--out", str(out)])
    err = capsys.readouterr().err
    if damage == "trailing empty cell":
        assert rc == 0 and out.is_file(), err
        assert len(read_history_csv(run / "history.csv")) == len(read_history_csv(runs["a"] / "history.csv"))
        return
    n = len(lines[0].split(","))
    cells = n + 1 if damage == "extra cell" else n - 1
    assert rc == 2 and not out.exists(), err
    assert f"{run / 'history.csv'} line 3: {cells} cells, but the header names {n} columns" in err, err
    assert "Traceback" not in err
    with pytest.raises(RecordError, match="line 3"):
        load_replay(run)
