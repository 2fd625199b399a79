"""MP/GMP runs end to end: a least-squares fit leaves the same run folder as a neural run (RunRecord opens it, run-dpd
exports it), the (K, M) grid search, an MP DPD trained by gradient through a frozen neural PA, coefficient export."""
from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
import scipy.io

from dpd_desktop.cli.entry import main
from dpd_desktop.config import ConfigError, ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.models.poly import basis, fit_least_squares
from dpd_desktop.runs import artifacts
from dpd_desktop.export.coef_export import export_coefficients, read_coefficients
from dpd_desktop.export.dpd_export import run_dpd
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training.ls_fit import LeastSquaresFit, make_trainer
from dpd_desktop.training.trainer import Trainer

RUN_FILES = ("config.json", "status.json", "history.csv", "best.pt", "best.csv", "last.pt", "results.h5", "log.txt")


@pytest.fixture(scope="module")
def ds():
    return make_demo_dataset(seed=2, n_train=3000, n_val=4096, n_test=4096)


def cfg(**kw):
    base = dict(step="pa", dataset="demo", backbone="mp", fit="ls", poly_order=5, memory_depth=3, device="cpu",
                frame_length=40, stride=8, batch_size=32)
    base.update(kw)
    return ExperimentConfig(**base)


def _f64(split, name):
    """The split's samples as complex128, from the float64 values when the reader kept them (as the fit does)."""
    a = getattr(split, f"{name}64", None)
    return (a if a is not None else getattr(split, name)).astype(np.float64) @ np.array([1, 1j])


def rec_coef(run_dir):
    """best.pt's float32 coefficient tensor as complex64 (what the model evaluates with)."""
    c = artifacts.load_checkpoint(run_dir / "best.pt")[0]["backbone.coef"].numpy()
    return (c[:, 0] + 1j * c[:, 1]).astype(np.complex64)


def _run(c, ds, ws):
    res = make_trainer(c, dataset=ds, workspace=ws).run()
    assert res.state == "succeeded", res.message
    return res


@pytest.fixture(scope="module")
def pa_run(ds, tmp_path_factory):
    """A tiny neural PA (GRU, H=4, one epoch) that the DPDs train through or are evaluated with."""
    ws = Workspace(tmp_path_factory.mktemp("ws"))
    res = Trainer(ExperimentConfig(step="pa", dataset="demo", backbone="gru", hidden_size=4, epochs=1,
                                   frame_length=40, stride=8, batch_size=32, device="cpu"),
                  dataset=ds, workspace=ws).run()
    assert res.state == "succeeded", res.message
    return ws, res.run_id


def test_ls_pa_run_folder_reads_like_a_neural_run(tmp_path, ds):
    ws = Workspace(tmp_path)
    res = _run(cfg(), ds, ws)
    rec = RunRecord.open(res.run_dir)
    assert rec.state == "succeeded" and rec.step == "pa" and rec.backbone == "mp"
    for name in RUN_FILES:
        assert (res.run_dir / name).is_file(), name
    assert len(rec.history()) == 1 and int(rec.history()[0]["EPOCH"]) == 0
    doc = json.loads((res.run_dir / "config.json").read_text())
    assert doc["fit"]["rank"] == doc["fit"]["n_coefficients"] == 15
    assert doc["model"]["params"] == 30 and doc["model"]["macs_per_sample"] == 4 * 15 + 2 + 2 + 2 * 4
    assert doc["model"]["model_id"] == "PA_S_0_M_MP_K_5_M_3_F_40_P_30"
    # the exported coefficients are the float64 solve of the training split (best.pt: float32 tensor + float64 meta)
    x, y = (_f64(ds.train, "x"), _f64(ds.train, "y"))
    spec = rec.config.poly_spec()
    expect = fit_least_squares(basis(x, spec), y, rec.config.rcond).coefficients
    w, _, _ = read_coefficients(ws, res.run_id)
    np.testing.assert_array_equal(w, expect)
    np.testing.assert_array_equal(rec_coef(res.run_dir), expect.astype(np.complex64))
    with h5py.File(res.run_dir / "results.h5") as h:
        for split in ("val", "test"):
            assert split in h
        assert h["test"]["prediction"].shape == ds.test.x.shape
    # the test NMSE is that of the stored model on the test split (segments of nperseg, delays zero at each start)
    assert np.isfinite(res.test_metrics["NMSE"]) and res.test_metrics["NMSE"] < -10


def test_coefficient_export_csv_and_mat_in_the_comm_dpd_layout(tmp_path, ds):
    ws = Workspace(tmp_path)
    res = _run(cfg(backbone="gmp", cross_lag=1, cross_lead=1, cross_order=3), ds, ws)
    w, spec, _ = read_coefficients(ws, res.run_id)
    info = export_coefficients(ws, res.run_id, tmp_path / "c.mat")
    m = scipy.io.loadmat(tmp_path / "c.mat")
    a = m["Coefficients"]
    assert a.shape == (3, 5) == tuple(info["shape"])  # M-by-K
    terms = spec.terms
    for c, t in zip(w, terms):
        if t.delay == t.env_delay:
            assert a[t.delay, t.order - 1] == c
    np.testing.assert_array_equal(m["w"].ravel(), w)
    np.testing.assert_array_equal(m["terms"], [[t.order, t.delay, t.env_delay] for t in terms])
    export_coefficients(ws, res.run_id, tmp_path / "c.csv")
    lines = (tmp_path / "c.csv").read_text().splitlines()
    assert lines[0] == "k=1,k=2,k=3,k=4,k=5" and len(lines) == 4
    back = np.array([[complex(c.replace("i", "j")) for c in ln.split(",")] for ln in lines[1:]])
    np.testing.assert_array_equal(back, a)
    cross = (tmp_path / "c-cross.csv").read_text().splitlines()
    assert cross[0] == "kind,order,delay,envelope_delay,real,imag"
    assert len(cross) - 1 == sum(1 for t in terms if t.delay != t.env_delay) == 2 * 3 * 2
    assert main(["--workspace", str(tmp_path), "coefficients", "--run", res.run_id, "--out",
                 str(tmp_path / "c.txt")]) == 2


def test_grid_search_picks_the_lowest_validation_nmse_and_records_the_table(tmp_path, ds):
    ws = Workspace(tmp_path)
    res = _run(cfg(grid_k=[1, 3, 5], grid_m=[1, 3]), ds, ws)
    doc = json.loads((res.run_dir / "config.json").read_text())
    table = doc["fit"]["grid"]
    assert [(r["K"], r["M"]) for r in table] == [(1, 1), (1, 3), (3, 1), (3, 3), (5, 1), (5, 3)]
    best = min(table, key=lambda r: r["val_nmse_db"])
    rec = RunRecord.open(res.run_dir)
    assert (rec.config.poly_order, rec.config.memory_depth) == (best["K"], best["M"])
    assert rec.history()[0]["VAL_NMSE"] == pytest.approx(best["val_nmse_db"], abs=1e-4)
    assert doc["fit"]["n_coefficients"] == best["K"] * best["M"]


def test_ls_dpd_by_indirect_learning_opens_and_run_dpd_exports_it(tmp_path, ds, pa_run):
    ws, pa = pa_run
    res = _run(cfg(step="dpd", pa_run=pa), ds, ws)
    rec = RunRecord.open(res.run_dir)
    assert rec.step == "dpd" and rec.state == "succeeded"
    assert "indirect learning" in rec.doc["fit"]["method"]
    # the postdistorter: Φ(y/g)·w ≈ x on the measured training split
    g = ds.gain
    x, y = (_f64(ds.train, "x"), _f64(ds.train, "y"))
    expect = fit_least_squares(basis(y / g, rec.config.poly_spec()), x, rec.config.rcond).coefficients
    w, _, _ = read_coefficients(ws, res.run_id)
    np.testing.assert_array_equal(w, expect)
    meta = run_dpd(ws, res.run_id, out=tmp_path / "u.h5", dataset=ds)
    with h5py.File(tmp_path / "u.h5") as h, h5py.File(res.run_dir / "results.h5") as r:
        np.testing.assert_array_equal(h["u"][()], r["test"]["dpd_output"][()])
    assert meta["samples"] == ds.test.x.shape[0]


def test_mp_dpd_trained_through_the_frozen_neural_pa_for_one_epoch(tmp_path, ds, pa_run):
    ws, pa = pa_run
    c = cfg(step="dpd", pa_run=pa, fit="gradient", epochs=1)
    trainer = make_trainer(c, dataset=ds, workspace=ws)
    assert type(trainer) is Trainer
    res = trainer.run()
    assert res.state == "succeeded", res.message
    rec = RunRecord.open(res.run_dir)
    assert rec.doc["model"]["params"] == 30 and "fit" not in rec.doc
    w, _, _ = read_coefficients(ws, res.run_id)
    assert not np.allclose(w, np.r_[1, np.zeros(14)])  # moved away from the identity initialization
    meta = run_dpd(ws, res.run_id, out=tmp_path / "u.csv", dataset=ds)
    assert meta["samples"] == ds.test.x.shape[0]


def test_ls_settings_are_validated():
    with pytest.raises(ConfigError, match="fit"):
        cfg(backbone="gru").validate()
    with pytest.raises(ConfigError, match="grid_k"):
        cfg(fit="gradient", grid_k=[3]).validate()
    with pytest.raises(ConfigError, match="rcond"):
        cfg(rcond=1.5).validate()
    with pytest.raises(ConfigError, match="poly_order"):
        cfg(poly_order=0).validate()
    assert isinstance(make_trainer(cfg()), LeastSquaresFit)


def test_cli_least_squares_pa_prints_the_rank_and_the_cost(tmp_path, capsys):
    code = main(["--workspace", str(tmp_path), "train-pa", "--dataset", "demo", "--backbone", "gmp",
                 "--poly-order", "3", "--memory-depth", "2", "--cross-lag", "1", "--cross-lead", "0",
                 "--max-train-samples", "3000", "--no-plots", "--quiet", "--device", "cpu"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "least squares: K=3 M=2, effective rank 10 of 10 coefficients (rcond 1e-10)" in out
    assert "model cost: 20 parameters" in out


def test_dpd_through_an_mp_pa_run_and_a_tampered_order_is_named(tmp_path, ds):
    """An MP PA run can be the frozen PA of a DPD (its orders travel in the record's arch); a config.json whose
    orders no longer match best.pt is refused naming the field."""
    ws = Workspace(tmp_path)
    pa = _run(cfg(), ds, ws)
    dpd = _run(cfg(step="dpd", pa_run=pa.run_id, backbone="gmp", cross_lag=1, cross_lead=0), ds, ws)
    rec = RunRecord.open(dpd.run_dir)
    assert rec.pa["poly"]["order"] == 5 and rec.pa["backbone"] == "mp"
    doc = json.loads((dpd.run_dir / "config.json").read_text())
    doc["experiment"]["poly_order"] = 3
    (dpd.run_dir / "config.json").write_text(json.dumps(doc))
    with pytest.raises(Exception, match="field 'poly'"):
        run_dpd(ws, dpd.run_id, out=tmp_path / "u.csv", dataset=ds)


@pytest.mark.parametrize("grid_k, grid_m, label", [
    (None, None, "mp-k5m4"),            # no search: the orders fitted are the ones named
    ([3, 5], [2], "mp-grid"),           # the search picks K and M after the run folder is named
    ([3], None, "mp-grid"),             # --grid-k alone: K=3 is fitted, not the default K=5 of the name
])
def test_run_folder_name_does_not_claim_orders_a_grid_search_chooses(grid_k, grid_m, label):
    cfg = ExperimentConfig(step="pa", dataset="demo", backbone="mp", poly_order=5, memory_depth=4,
                           grid_k=grid_k, grid_m=grid_m)
    assert cfg.size_label == label


def test_coefficient_export_never_overwrites_a_run_folder_file_nor_makes_folders(tmp_path, ds, capsys):
    """``coefficients --out`` refuses what run-dpd refuses: an existing file of a run folder (its best.csv stays
    byte for byte), a missing folder (not created), a read-only file, a folder; exit 2 naming the path."""
    ws = Workspace(tmp_path)
    res = _run(cfg(), ds, ws)
    best_csv = res.run_dir / "best.csv"
    before = best_csv.read_bytes()
    ro = tmp_path / "ro.csv"
    ro.write_text("mine\n")
    ro.chmod(0o444)
    cases = [(best_csv, f"the output {best_csv} is a file of the run folder {res.run_dir}"),
             (tmp_path / "no" / "c.csv", f"the output {tmp_path / 'no' / 'c.csv'} cannot be written: the folder "
                                         f"{tmp_path / 'no'} does not exist"),
             (ro, f"the output {ro} exists and is read-only"),
             (tmp_path / "d.csv", f"the output {tmp_path / 'd.csv'} is a folder")]
    (tmp_path / "d.csv").mkdir()
    for out, message in cases:
        assert main(["--workspace", str(tmp_path), "coefficients", "--run", res.run_id, "--out", str(out)]) == 2
        assert message in capsys.readouterr().err, out
    assert best_csv.read_bytes() == before and ro.read_text() == "mine\n"
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("text", ["3,,5", "3,", ",3", "a,3", ""])
def test_grid_lists_with_an_empty_or_bad_item_are_refused(text):
    import argparse

    from dpd_desktop.cli.poly import _int_list

    with pytest.raises(argparse.ArgumentTypeError, match="comma-separated integers|at least one"):
        _int_list(text)
    assert _int_list("3, 5,7") == [3, 5, 7]
