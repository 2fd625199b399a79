"""A dataset the inspector marks with an error flag is refused by train-pa, train-dpd, queue add and sweep (exit 2,
one line per flag naming the dataset and the flag, the hint --accept-flags, nothing created); with --accept-flags
the run trains and its config.json records the accepted flags; a clean dataset trains without the option (issue
28)."""
from __future__ import annotations

import json
import shutil

import pytest

from dpd_desktop.analysis.inspect import inspect_dataset
from dpd_desktop.cli.entry import main as cli_main
from dpd_desktop.data import load_dataset
from dpd_desktop.lab.queue import RunQueue
from dpd_desktop.runs.record import RunRecord
from tests.datasets_dir import DATASETS

DPA200 = DATASETS / "DPA_200MHz"
pytestmark = pytest.mark.skipif(not (DPA200 / "spec.json").is_file(),
                                reason=f"dataset DPA_200MHz not found at {DPA200}")
TINY = ["--epochs", "1", "--hidden-size", "4", "--frame-length", "50", "--max-train-samples", "400",
        "--device", "cpu", "--threads", "1", "--no-plots", "--quiet"]


def _copy(dst, swap=False, spec=None):
    dst.mkdir()
    for s in ("train", "val", "test"):
        for role, other in (("input", "output"), ("output", "input")):
            shutil.copyfile(DPA200 / f"{s}_{role}.csv", dst / f"{s}_{other if swap else role}.csv")
    text = (DPA200 / "spec.json").read_text()
    for old, new in (spec or {}).items():
        assert old in text
        text = text.replace(old, new)
    (dst / "spec.json").write_text(text)
    return dst


@pytest.fixture(scope="module")
def swapped(tmp_path_factory):
    """DPA_200MHz with input and output exchanged: the inspector's SWAPPED error."""
    return _copy(tmp_path_factory.mktemp("data") / "swapped", swap=True)


@pytest.fixture(scope="module")
def narrow(tmp_path_factory):
    """DPA_200MHz with a 100 MHz spec: SPEC_BANDWIDTH and SPEC_LAYOUT, two errors."""
    return _copy(tmp_path_factory.mktemp("data") / "narrow", spec={'"bw_main_ch": 200e6': '"bw_main_ch": 100e6',
                                                                   '"n_sub_ch": 10': '"n_sub_ch": 5'})


def _errors(path):
    """The inspector's own error flags of ``path``, computed here without the gate or its cache."""
    return [f for f in inspect_dataset(load_dataset(str(path))).flags if f.severity == "error"]


def _runs(ws):
    d = ws / "runs"
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


def _refusal(err, path, codes):
    lines = err.strip().splitlines()
    assert len(lines) == len(codes) + 1, err
    for line, f in zip(lines, codes):
        assert line == f"error: {path}: {f.code}: {f.message}"
    assert lines[-1].startswith(f"error: {path}: the inspector marks this dataset unfit for training")
    assert "--accept-flags" in lines[-1] and "Traceback" not in err


def test_the_constructed_datasets_carry_error_flags(swapped, narrow):
    assert [f.code for f in _errors(swapped)] == ["SWAPPED"]
    assert [f.code for f in _errors(narrow)] == ["SPEC_BANDWIDTH", "SPEC_LAYOUT"]
    assert _errors(DPA200) == []


@pytest.mark.parametrize("which", ["swapped", "narrow"])
def test_train_pa_refuses_an_error_flag_with_exit_2_and_no_run_folder(tmp_path, capsys, request, which):
    path = request.getfixturevalue(which)
    rc = cli_main(["--workspace", str(tmp_path), "train-pa", "--dataset", str(path), *TINY])
    _refusal(capsys.readouterr().err, path, _errors(path))
    assert rc == 2 and _runs(tmp_path) == []


def test_train_dpd_refuses_an_error_flag_before_a_run_folder(tmp_path, capsys, swapped):
    pa = tmp_path / "runs" / "2026-01-01-000000-pa-gru4"  # a PA run record is all the refusal needs to reach
    pa.mkdir(parents=True)
    (pa / "config.json").write_text(json.dumps({"schema": 2, "experiment": {
        "step": "pa", "backbone": "gru", "hidden_size": 4, "num_layers": 1}}))
    rc = cli_main(["--workspace", str(tmp_path), "train-dpd", "--dataset", str(swapped), "--pa-run", pa.name,
                   *TINY])
    _refusal(capsys.readouterr().err, swapped, _errors(swapped))
    assert rc == 2 and _runs(tmp_path) == [pa.name]


def test_accept_flags_trains_and_records_them_in_config_json(tmp_path, capsys, swapped):
    rc = cli_main(["--workspace", str(tmp_path), "train-pa", "--dataset", str(swapped), "--accept-flags", *TINY])
    err = capsys.readouterr().err
    assert rc == 0, err
    (run,) = _runs(tmp_path)
    doc = json.loads((tmp_path / "runs" / run / "config.json").read_text())
    want = [{"dataset": str(swapped), **f.to_dict()} for f in _errors(swapped)]
    assert doc["experiment"]["extra"]["accepted_flags"] == want
    assert RunRecord.open(tmp_path / "runs" / run).state == "succeeded"
    assert f"warning: {swapped}: SWAPPED: " in err


def test_a_clean_dataset_trains_without_the_option_and_records_nothing(tmp_path, capsys):
    rc = cli_main(["--workspace", str(tmp_path), "train-pa", "--dataset", str(DPA200), *TINY])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "accept-flags" not in captured.err
    (run,) = _runs(tmp_path)
    doc = json.loads((tmp_path / "runs" / run / "config.json").read_text())
    assert "accepted_flags" not in doc["experiment"]["extra"]


def test_queue_add_refuses_then_records_the_accepted_flags_in_the_entry(tmp_path, capsys, narrow):
    argv = ["--workspace", str(tmp_path), "queue", "add", "pa", "--dataset", str(narrow), *TINY]
    assert cli_main(argv) == 2
    _refusal(capsys.readouterr().err, narrow, _errors(narrow))
    with RunQueue(tmp_path) as q:
        assert q.entries() == []
    assert cli_main(argv + ["--accept-flags"]) == 0
    with RunQueue(tmp_path) as q:
        (entry,) = q.entries()
    assert entry.config.extra["accepted_flags"] == [{"dataset": str(narrow), **f.to_dict()} for f in _errors(narrow)]
    assert _runs(tmp_path) == []


def test_queue_add_refuses_a_dataset_that_cannot_be_loaded(tmp_path, capsys):
    bad = tmp_path / "set.csv"
    bad.write_text("I_in,Q_in,I_out,Q_out\n")
    rc = cli_main(["--workspace", str(tmp_path / "ws"), "queue", "add", "pa", "--dataset", str(bad), *TINY])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: set.csv") and "Traceback" not in err, err
    with RunQueue(tmp_path / "ws") as q:
        assert q.entries() == []


def test_sweep_refuses_before_the_sweep_exists_and_its_trials_record_accepted_flags(tmp_path, capsys, swapped):
    argv = ["--workspace", str(tmp_path), "sweep", "--grid", "seed=0", "--name", "flags", "--base",
            "--dataset", str(swapped), *[t for t in TINY if t != "--no-plots"]]
    assert cli_main(argv) == 2
    _refusal(capsys.readouterr().err, swapped, _errors(swapped))
    assert not (tmp_path / "sweeps").exists() and _runs(tmp_path) == []
    assert cli_main(argv + ["--accept-flags"]) == 0, capsys.readouterr().err
    (run,) = _runs(tmp_path)
    rec = RunRecord.open(tmp_path / "runs" / run)
    assert rec.state == "succeeded"
    assert rec.config.extra["accepted_flags"] == [{"dataset": str(swapped), **f.to_dict()}
                                                  for f in _errors(swapped)]
