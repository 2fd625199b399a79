"""The one rule for every output a user names (runs/outputs.py): ``runs report``, ``coefficients``, ``run-dpd`` and
``import-capture`` never write a file of a run folder, of a dataset or of the workspace (whatever the flags), and
replace an existing file only with ``--overwrite``; each refusal is exit status 2 naming the path and why, and the
file is left byte for byte as it was."""
from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from dpd_desktop.cli.entry import main
from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import load_dataset, make_demo_dataset, save_hdf5, save_split_csv
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training.ls_fit import make_trainer


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A split-CSV dataset folder, a workspace with an MP PA run and an MP DPD run trained on it (least squares)."""
    root = tmp_path_factory.mktemp("rule")
    data = save_split_csv(make_demo_dataset(seed=2, n_train=3000, n_val=4096, n_test=4096), root / "dataset")
    ds = load_dataset(data)
    ws = Workspace(root / "ws")
    base = dict(dataset=str(data), backbone="mp", fit="ls", poly_order=3, memory_depth=2, device="cpu",
                frame_length=40, stride=8)
    pa = make_trainer(ExperimentConfig(step="pa", **base), dataset=ds, workspace=ws).run()
    assert pa.state == "succeeded", pa.message
    dpd = make_trainer(ExperimentConfig(step="dpd", pa_run=pa.run_id, **base), dataset=ds, workspace=ws).run()
    assert dpd.state == "succeeded", dpd.message
    return {"root": root, "data": data, "ws": ws, "pa": Path(pa.run_dir), "dpd": Path(dpd.run_dir)}


def _cli(world, *argv) -> int:
    return main(["--workspace", str(world["ws"].root), *argv])


def _commands(world, out):
    """Each writer's command line with ``--out out``."""
    return {"report": ["runs", "report", world["pa"].name, "--out", str(out)],
            "coefficients": ["coefficients", "--run", world["pa"].name, "--out", str(out)],
            "run-dpd": ["run-dpd", "--run", world["dpd"].name, "--out", str(out)]}


def _victims(world):
    pa, ws = world["pa"], world["ws"]
    with sqlite3.connect(ws.root / "index.sqlite") as db:  # the workspace's databases exist once a list ran
        db.execute("CREATE TABLE IF NOT EXISTS t (x)")
    return {"best.pt": pa / "best.pt", "config.json": pa / "config.json", "status.json": pa / "status.json",
            "history.csv": pa / "history.csv", "dataset csv": world["data"] / "train_input.csv",
            "spec.json": world["data"] / "spec.json", "index.sqlite": ws.root / "index.sqlite"}


@pytest.mark.parametrize("command", ["report", "coefficients", "run-dpd"])
def test_no_writer_replaces_a_run_file_a_dataset_file_or_a_database_even_with_overwrite(world, command, capsys):
    for name, victim in _victims(world).items():
        before = victim.read_bytes()
        for flags in ([], ["--overwrite"]):
            assert _cli(world, *_commands(world, victim)[command], *flags) == 2, (command, name, flags)
            err = capsys.readouterr().err
            assert f"the output {victim}" in err and "Traceback" not in err, err
            assert any(w in err for w in ("run folder", "dataset", "workspace's own file", "SQLite")), err
            assert victim.read_bytes() == before, (command, name)
    assert not list(world["pa"].glob("*.meta.json"))


@pytest.mark.parametrize("command", ["report", "coefficients", "run-dpd"])
def test_no_writer_adds_a_file_to_a_run_folder_or_a_dataset_folder(world, command, capsys):
    ext = {"report": ".html", "coefficients": ".csv", "run-dpd": ".csv"}[command]
    for folder in (world["pa"], world["pa"] / "plots", world["data"], world["ws"].runs_dir):
        out = folder / f"new{ext}"
        if not folder.is_dir():
            continue
        assert _cli(world, *_commands(world, out)[command]) == 2
        err = capsys.readouterr().err
        assert f"the output {out} lies in the" in err or f"the output {out} lies inside the run" in err, err
        assert not out.exists()


@pytest.mark.parametrize("command", ["report", "coefficients", "run-dpd"])
def test_an_existing_file_is_replaced_only_with_overwrite(world, command, tmp_path, capsys):
    out = tmp_path / ("mine.html" if command == "report" else "mine.csv")
    out.write_text("mine\n")
    assert _cli(world, *_commands(world, out)[command]) == 2
    err = capsys.readouterr().err
    assert f"the output {out} exists (give --overwrite to replace it, or give another --out)" in err, err
    assert out.read_text() == "mine\n"
    assert _cli(world, *_commands(world, out)[command], "--overwrite") == 0
    assert out.read_text() != "mine\n"
    if command == "run-dpd":  # the side-car too: a second export needs the flag
        assert Path(f"{out}.meta.json").is_file()
        assert _cli(world, *_commands(world, out)[command]) == 2
        assert _cli(world, *_commands(world, out)[command], "--overwrite") == 0


def test_links_and_relative_paths_into_a_run_folder_are_refused(world, tmp_path, monkeypatch, capsys):
    pa = world["pa"]
    link = tmp_path / "innocent.html"
    link.symlink_to(pa / "config.json")
    dangling = tmp_path / "new.html"
    dangling.symlink_to(pa / "not-yet.html")
    into = tmp_path / "runlink"
    into.symlink_to(pa, target_is_directory=True)
    before = (pa / "config.json").read_bytes()
    for out in (link, dangling, into / "r.html"):
        assert _cli(world, "runs", "report", pa.name, "--out", str(out), "--overwrite") == 2, out
        assert "run folder" in capsys.readouterr().err
    monkeypatch.chdir(pa / "plots" if (pa / "plots").is_dir() else pa)
    assert _cli(world, "runs", "report", pa.name, "--out", "r.html") == 2
    assert "lies inside the run folder" in capsys.readouterr().err
    assert (pa / "config.json").read_bytes() == before and not (pa / "not-yet.html").exists()


def test_datasets_and_databases_anywhere_are_refused(tmp_path):
    from dpd_desktop.runs.outputs import OutputRefused, check_output

    ds = make_demo_dataset(seed=1, n_train=512, n_val=512, n_test=512, nperseg=256)
    h5 = save_hdf5(ds, tmp_path / "capture.h5")
    single = tmp_path / "single.csv"
    single.write_text("I_in,Q_in,I_out,Q_out\n0,0,0,0\n")
    db = tmp_path / "other.sqlite"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE t (x)")
    for out, why in ((h5, "is a dataset (an HDF5 file"), (single, "is a dataset (a single CSV"),
                     (db, "is an SQLite database")):
        with pytest.raises(OutputRefused, match=re.escape(why)):
            check_output(out, overwrite=True)
    inp = tmp_path / "x.csv"
    inp.write_text("I,Q\n0,0\n")
    with pytest.raises(OutputRefused, match="is the input file"):
        check_output(tmp_path / "." / "x.csv", overwrite=True, inputs=[inp])
    ro = tmp_path / "ro.csv"
    ro.write_text("keep")
    ro.chmod(0o444)
    with pytest.raises(OutputRefused, match="exists and is read-only"):
        check_output(ro, overwrite=True)
    with pytest.raises(OutputRefused, match="is a folder"):
        check_output(tmp_path, overwrite=True)
    with pytest.raises(OutputRefused, match="does not exist"):
        check_output(tmp_path / "missing" / "u.csv")
    assert not (tmp_path / "missing").exists()
    assert check_output(tmp_path / "fine.csv") == tmp_path / "fine.csv"
    assert check_output(inp, overwrite=True) == inp  # an ordinary I,Q file: replaced with the flag
    with pytest.raises(OutputRefused, match=r"exists \(give --overwrite"):
        check_output(inp)


def test_import_capture_never_makes_a_dataset_inside_a_run_folder_or_a_dataset(world, tmp_path, capsys):
    x = tmp_path / "x.csv"
    y = tmp_path / "y.csv"
    rng = np.random.default_rng(0)
    z = (rng.standard_normal(20000) + 1j * rng.standard_normal(20000)) * 0.3
    x.write_text("I,Q\n" + "".join(f"{v.real:.6f},{v.imag:.6f}\n" for v in z))
    y.write_text("I,Q\n" + "".join(f"{2 * v.real:.6f},{2 * v.imag:.6f}\n" for v in z))
    for out in (world["pa"] / "ds", world["data"] / "ds", world["ws"].runs_dir / "ds"):
        assert main(["import-capture", "--input", str(x), "--output", str(y), "--sample-rate", "800e6",
                     "--bandwidth", "200e6", "--nperseg", "256", "--out", str(out)]) == 2
        assert "the output" in capsys.readouterr().err and not out.exists()
    assert main(["import-capture", "--input", str(x), "--output", str(y), "--sample-rate", "800e6",
                 "--bandwidth", "200e6", "--nperseg", "256", "--out", str(tmp_path / "ok" / "ds")]) == 0
    assert (tmp_path / "ok" / "ds" / "spec.json").is_file()
    os.chmod(x, 0o644)


@pytest.mark.parametrize("command", ["report", "coefficients", "run-dpd"])
def test_no_writer_touches_a_loop_record_or_the_workspace_cache(world, command, capsys):
    """A loop's folder (loops/<id>: loop.json, report.html) and the workspace's cache are records like runs/."""
    loop = world["ws"].root / "loops" / f"2026-01-01-000000-ilc-{command}"
    loop.mkdir(parents=True, exist_ok=True)
    (loop / "loop.json").write_text("{}")
    ext = {"report": ".html", "coefficients": ".csv", "run-dpd": ".csv"}[command]
    own = loop / f"report{ext}"
    own.write_text("the loop's own report")
    (world["ws"].root / "cache").mkdir(exist_ok=True)
    for out in (own, loop / f"new{ext}", loop.parent / f"new{ext}", world["ws"].root / "cache" / f"new{ext}"):
        assert _cli(world, *_commands(world, out)[command], "--overwrite") == 2, out
        err = capsys.readouterr().err
        assert (f"the output {out} lies in the workspace's" in err or f"the output {out} lies in the loop folder" in err) \
            and "Traceback" not in err, err
    assert own.read_text() == "the loop's own report"
    assert sorted(p.name for p in loop.iterdir()) == ["loop.json", f"report{ext}"]
    assert not (loop.parent / f"new{ext}").exists() and not (world["ws"].root / "cache" / f"new{ext}").exists()
    # a loop folder outside any workspace with databases (a loop-only workspace has no index.sqlite)
    elsewhere = world["root"] / f"loop-only-{command}" / "loops" / "2026-01-01-000000-ilc"
    elsewhere.mkdir(parents=True)
    (elsewhere / "loop.json").write_text("{}")
    (elsewhere / f"report{ext}").write_text("the loop's own report")
    assert _cli(world, *_commands(world, elsewhere / f"report{ext}")[command], "--overwrite") == 2
    assert f"lies in the loop folder {elsewhere}" in capsys.readouterr().err
    assert (elsewhere / f"report{ext}").read_text() == "the loop's own report"


def test_the_workspace_itself_is_refused_as_an_output_folder(world, capsys):
    """``export --out WORKSPACE`` answered "exists; the folder is not replaced unless --overwrite is given", as if
    --overwrite could replace the workspace; it names the workspace now, with and without --overwrite."""
    _victims(world)  # the workspace's index exists
    root = world["ws"].root
    before = sorted(p.name for p in root.iterdir())
    for extra in ([], ["--overwrite"]):
        assert _cli(world, "export", world["dpd"].name, "--format", "fixed", "--out", str(root), *extra) == 2
        assert capsys.readouterr().err.strip() == (f"error: the output {root} is the workspace {root}, which holds "
                                                   "its runs and records; it is never replaced (give another --out)")
    assert sorted(p.name for p in root.iterdir()) == before
