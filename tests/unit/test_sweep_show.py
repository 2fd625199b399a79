"""`dpd-desktop sweep show`: a trial whose value is not recorded yet (running, or its sweep stopped hard) shows the
best value of its run's history so far; the columns stay apart for long states and metric names."""
from __future__ import annotations

import json

from dpd_desktop.cli.entry import main as cli_main
from dpd_desktop.runs.artifacts import read_history_csv
from dpd_desktop.sweep.store import SweepStore

ARGS = ["--dataset", "demo", "--hidden-size", "4", "--frame-length", "50", "--epochs", "2", "--max-train-samples",
        "200", "--device", "cpu", "--threads", "1", "--quiet"]


def test_show_reads_a_missing_value_from_the_run_and_keeps_columns_apart(tmp_path, capsys):
    root = tmp_path / "ws"
    assert cli_main(["--workspace", str(root), "sweep", "--grid", "seed=0,1", "--base", *ARGS]) == 0
    info = SweepStore(root).list()[-1]
    path = info.folder / "sweep.json"
    doc = json.loads(path.read_text())
    t0 = doc["trials"][0]
    t0.update(state="interrupted", value=None)  # as a sweep killed mid-way leaves it
    path.write_text(json.dumps(doc))
    capsys.readouterr()
    assert cli_main(["--workspace", str(root), "sweep", "show", info.id]) == 0
    out = capsys.readouterr().out.splitlines()
    header = next(ln for ln in out if ln.lstrip().startswith("#"))
    row0 = next(ln for ln in out if ln.lstrip().startswith("0 "))
    best = min(float(r["VAL_NMSE"]) for r in read_history_csv(t0["run_dir"] + "/history.csv"))
    assert f"{best:.3f}" in row0 and "interrupted " in row0
    assert "seed  " in header and header.split()[:3] == ["#", "STATE", "GROUP"]


def test_a_dpd_sweep_without_its_pa_run_is_refused_before_it_exists(tmp_path, capsys):
    root = tmp_path / "ws"
    assert cli_main(["--workspace", str(root), "sweep", "--grid", "seed=0,1", "--step", "dpd", "--base", *ARGS,
                     "--pa-run", "no-such-run"]) == 2
    err = capsys.readouterr().err
    assert "pa_run: run 'no-such-run' not found" in err and "the sweep was not started" in err
    assert SweepStore(root).list() == []
