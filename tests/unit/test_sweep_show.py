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



def _pa_run(root):
    assert cli_main(["--workspace", str(root), "train-pa", *ARGS, "--no-plots"]) == 0
    return sorted((root / "runs").glob("*-pa-*"))[-1]


def test_a_dpd_sweep_refuses_a_pa_run_that_train_dpd_refuses_before_it_exists(tmp_path, capsys):
    """sweep/runner.py check_pa_runs: the checks of training/pa_check.py as train-dpd makes them (a PA run without
    its best.pt; one trained on another dataset), before the sweep or any queue entry exists."""
    from dpd_desktop.data.synthetic import write_demo_dataset

    root = tmp_path / "ws"
    pa = _pa_run(root)
    capsys.readouterr()
    dpd = ["--workspace", str(root), "sweep", "--grid", "seed=0,1", "--step", "dpd", "--base", *ARGS,
           "--pa-run", pa.name]
    (pa / "best.pt").rename(pa / "best.pt.away")
    assert cli_main(dpd) == 2
    err = capsys.readouterr().err
    assert "best.pt: checkpoint file not found (option --pa-run); the sweep was not started" in err, err
    assert SweepStore(root).list() == []
    (pa / "best.pt.away").rename(pa / "best.pt")
    other = write_demo_dataset(tmp_path / "other", seed=5, n_train=3000, n_val=8192, n_test=8192)
    mismatch = [str(other) if a == "demo" else a for a in dpd]
    assert cli_main(mismatch) == 2
    err = capsys.readouterr().err
    assert f"the PA run {pa.name} was trained on dataset" in err and "the sweep was not started" in err, err
    assert SweepStore(root).list() == []
    assert cli_main([*mismatch, "--allow-dataset-mismatch"]) == 0  # allowed, as train-dpd allows it
    assert [t["state"] for t in SweepStore(root).list()[-1].trials] == ["succeeded"] * 2


def test_grid_keys_given_twice_are_refused_and_a_dpd_grid_may_search_the_hidden_size(tmp_path, capsys):
    root = tmp_path / "ws"
    assert cli_main(["--workspace", str(root), "sweep", "--grid", "seed=0,1", "--grid", "seed=2", "--base",
                     *ARGS]) == 2
    assert "--grid seed: given twice" in capsys.readouterr().err
    pa = _pa_run(root)
    base = [a for a in ARGS]
    i = base.index("--hidden-size")
    del base[i:i + 2]  # train-dpd's own default hidden size (15) is then no conflict with the grid
    dpd = ["--workspace", str(root), "sweep", "--grid", "hidden_size=3,4", "--step", "dpd", "--epochs", "1"]
    assert cli_main([*dpd[:-2], "--base", *base, "--pa-run", pa.name, "--epochs", "1"]) == 0
    info = SweepStore(root).list()[-1]
    assert [t["params"]["hidden_size"] for t in info.trials] == [3, 4]
    assert [t["state"] for t in info.trials] == ["succeeded"] * 2
    capsys.readouterr()
    assert cli_main([*dpd[:-2], "--base", *ARGS, "--pa-run", pa.name]) == 2  # given in both places: refused
    assert "hidden_size is also given in --base" in capsys.readouterr().err
