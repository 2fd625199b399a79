"""The workspace index (runs/index.py): rows equal the run record's fields for runs of tiny trainings, a deleted or
damaged database is rebuilt to the same rows, an edited folder is refreshed, unchanged folders are not read again,
two processes sync and read one workspace at once; and `dpd-desktop runs` lists it."""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from dpd_desktop import cli
from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.runs import index as index_mod
from dpd_desktop.runs.index import INDEX_FILE, INDEX_SCHEMA, RunIndex
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.runs.writer import RunWriter, set_pinned
from dpd_desktop.training.trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]
TINY = dict(dataset="demo", backbone="gru", hidden_size=4, epochs=1, frame_length=50, stride=25, batch_size=32,
            device="cpu", threads=1)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A workspace with a PA run and a DPD run of tiny trainings, a live run and an unreadable folder."""
    ws = Workspace(tmp_path_factory.mktemp("ws"))
    demo = make_demo_dataset(seed=1, n_train=3000, n_val=1024, n_test=1024, nperseg=256)
    threads = torch.get_num_threads()
    try:
        pa = Trainer(ExperimentConfig(step="pa", **TINY), dataset=demo, workspace=ws).run()
        dpd = Trainer(ExperimentConfig(step="dpd", pa_run=str(pa.run_dir), **{**TINY, "hidden_size": 3}),
                      dataset=demo, workspace=ws).run()
    finally:
        torch.set_num_threads(threads)
    assert (pa.state, dpd.state) == ("succeeded", "succeeded"), (pa.message, dpd.message)
    live = ws.runs_dir / "2026-01-01-000000-pa-live"
    live.mkdir()
    w = RunWriter()
    w.run_id, w.run_dir, w.step, w.config_doc = live.name, live, "pa", {
        "schema": 2, "run_id": live.name, "experiment": ExperimentConfig(step="pa", **TINY).to_dict()}
    w._write_config()
    w.write_status("running")  # owned by this (live) process
    bad = ws.runs_dir / "2026-01-01-000001-pa-bad"
    bad.mkdir()
    (bad / "config.json").write_text("{not json")
    return {"ws": ws, "pa": pa.run_dir, "dpd": dpd.run_dir, "live": live, "bad": bad}


def _copy_ws(src: Workspace, dst: Path) -> Workspace:
    shutil.copytree(src.runs_dir, dst / "runs", symlinks=True)
    return Workspace(dst)


def _expected(folder: Path) -> dict:
    """The index row of ``folder`` computed here from the record's own fields (not through row_from_record)."""
    rec = RunRecord.read(folder)
    st = rec.status_doc
    test, val = st.get("test_metrics") or {}, st.get("val_metrics") or {}
    ds = rec.dataset
    return {"run_id": folder.name, "folder": str(folder), "state": rec.state, "step": rec.step,
            "family": rec.backbone, "hidden_size": rec.hidden_size, "num_layers": rec.num_layers,
            "n_params": rec.model.get("n_params"), "macs_per_sample": rec.model.get("macs_per_sample"),
            "metric_profile": rec.doc.get("experiment", {}).get("metric_profile", "legacy-2.2.1"),
            "gain_rule": (rec.doc.get("gain") or {}).get("rule") if rec.step == "dpd" else None, "dataset_name": ds and ds.name, "dataset_kind": ds and ds.kind,
            "dataset_fingerprint": ds and ds.fingerprint, "dataset_shown": ds and ds.shown,
            "selection_metric": rec.selection_metric, "best_epoch": rec.best_epoch, "best_value": rec.best_value,
            "epochs_completed": st.get("epochs_completed"), "test_nmse": test.get("NMSE"),
            "test_aclr_avg": test.get("ACLR_AVG"), "test_evm": test.get("EVM"), "val_nmse": val.get("NMSE"),
            "val_aclr_avg": val.get("ACLR_AVG"), "val_evm": val.get("EVM"), "wall_s": st.get("wall_s"),
            "device": rec.device.get("device"), "fast_path": rec.device.get("fast_path"),
            # every run here is a reference run; a folder without a readable config.json has no kernel
            "kernel": "reference" if rec.doc else None, "kernel_notes": None, "pinned": rec.pinned,
            "created": rec.doc.get("created"), "updated": st.get("updated"), "message": st.get("message"),
            "pa_run_id": (rec.pa or {}).get("run_id"),
            "run_group": None,  # none of these runs is a loop's iteration or a sweep's trial (test_loop_record.py)
            # quantisation: these runs are float runs without a quantised evaluation (tests/unit/test_deploy.py
            # checks the columns of runs that have them)
            "qat": (rec.doc.get("qat") or {}).get("label"),
            "parent_run_id": (rec.doc.get("qat") or rec.doc.get("finetune") or {}).get("parent_run"),
            "quant": None, "quant_label": None, "quant_test_nmse": None, "quant_test_aclr_avg": None,
            "quant_test_evm": None}


def test_rows_equal_the_records_of_tiny_trainings(trained, tmp_path):
    ws = _copy_ws(trained["ws"], tmp_path)
    with RunIndex.open(ws) as idx:
        assert idx.rebuilt == "missing" and not idx.in_memory and idx.path == tmp_path / INDEX_FILE
        rows = {r.run_id: r.to_dict() for r in idx.runs()}
    folders = sorted(p for p in ws.runs_dir.iterdir())
    assert sorted(rows) == [p.name for p in folders]
    for p in folders:
        assert rows[p.name] == _expected(p), p.name
    pa, dpd = rows[trained["pa"].name], rows[trained["dpd"].name]
    # real values of the tiny trainings: the record's numbers, and what they must be
    assert (pa["step"], pa["family"], pa["hidden_size"], pa["state"], pa["best_epoch"]) == ("pa", "gru", 4,
                                                                                          "succeeded", 0)
    assert (dpd["step"], dpd["hidden_size"], dpd["pa_run_id"]) == ("dpd", 3, trained["pa"].name)
    assert pa["dataset_kind"] == "demo" and pa["dataset_fingerprint"] == dpd["dataset_fingerprint"]
    assert pa["n_params"] == json.loads((trained["pa"] / "config.json").read_text())["model"]["n_params"] > 0
    pa_model = json.loads((trained["pa"] / "config.json").read_text())["model"]
    assert pa["macs_per_sample"] == pa_model["macs_per_sample"] > 0 and pa["n_params"] == pa_model["params"]
    assert (pa["metric_profile"], pa["gain_rule"], dpd["gain_rule"]) == ("legacy-2.2.1", None, "peak")
    status = json.loads((trained["dpd"] / "status.json").read_text())
    assert dpd["test_aclr_avg"] == status["test_metrics"]["ACLR_AVG"] and dpd["wall_s"] == status["wall_s"] > 0
    assert pa["device"] == "cpu" and pa["fast_path"].startswith("off")
    assert rows[trained["live"].name]["state"] == "running"
    assert rows[trained["bad"].name]["state"] == "unreadable"


def _corrupt_pages(path: Path) -> None:
    """Overwrite every page but the first (the header stays valid: the damage is found by the integrity check)."""
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big") or 65536
    for i in range(page, len(data)):
        data[i] = 0xA5
    path.write_bytes(bytes(data))


def _set_pragma(path: Path, pragma: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute(pragma)
    conn.commit()
    conn.close()


@pytest.mark.parametrize("damage,reason", [
    (lambda p: p.unlink(), "missing"),
    (lambda p: p.write_bytes(b"this is not a database" * 100), "not a usable database"),
    (lambda p: p.write_bytes(b""), "empty"),
    (lambda p: _set_pragma(p, f"PRAGMA user_version = {INDEX_SCHEMA + 1}"), f"index schema {INDEX_SCHEMA + 1}"),
    (lambda p: _set_pragma(p, "PRAGMA application_id = 7"), "not an index of this program"),
    (_corrupt_pages, ("not a usable database (database disk image is malformed)", "integrity check failed")),
], ids=["deleted", "garbage", "empty", "schema", "other-app", "pages"])
def test_a_missing_or_damaged_index_is_rebuilt_to_the_same_rows(trained, tmp_path, damage, reason):
    ws = _copy_ws(trained["ws"], tmp_path)
    with RunIndex.open(tmp_path) as idx:  # the workspace's root folder does as well as the Workspace
        assert idx.path == tmp_path / INDEX_FILE
        before = idx.runs()
    damage(tmp_path / INDEX_FILE)
    with RunIndex.open(ws) as idx:
        assert idx.rebuilt is not None and idx.rebuilt.startswith(reason), idx.rebuilt
        assert idx.runs() == before and len(before) == 4
    with RunIndex.open(ws) as idx:  # and the rebuilt file is a good index
        assert idx.rebuilt is None and idx.runs() == before


def test_an_edited_folder_is_refreshed_and_a_removed_one_dropped(trained, tmp_path):
    ws = _copy_ws(trained["ws"], tmp_path)
    pa = ws.runs_dir / trained["pa"].name
    dpd = ws.runs_dir / trained["dpd"].name
    with RunIndex.open(ws) as idx:
        st = json.loads((pa / "status.json").read_text())
        st["test_metrics"]["NMSE"] = -12.5
        (pa / "status.json").write_text(json.dumps(st))
        set_pinned(dpd, True)
        (ws.runs_dir / trained["bad"].name / "config.json").unlink()  # no config.json: no longer a run
        report = idx.sync()
        assert report.refreshed == tuple(sorted([pa.name, dpd.name])) and report.added == ()
        assert report.removed == (trained["bad"].name,)
        assert report.unchanged == 1  # the live run: re-read, still live, nothing written
        assert idx.get(pa.name).test_nmse == -12.5 and idx.get(dpd.name).pinned is True
        (pa / "best.pt").write_bytes(b"overwritten")  # a broken checkpoint: the reader says damaged
        shutil.rmtree(dpd)
        report = idx.sync()
        assert report.refreshed == (pa.name,) and report.removed == (dpd.name,)
        assert idx.get(pa.name).state == "damaged" and idx.get(dpd.name) is None
        assert [r.run_id for r in idx.runs()] == sorted([pa.name, trained["live"].name], reverse=True)


def test_a_live_run_whose_process_died_reads_interrupted_at_the_next_sync(trained, tmp_path):
    ws = _copy_ws(trained["ws"], tmp_path)
    live = ws.runs_dir / trained["live"].name
    with RunIndex.open(ws) as idx:
        assert idx.get(live.name).state == "running"
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        st = json.loads((live / "status.json").read_text())
        st["pid"] = dead.pid
        (live / "status.json").write_text(json.dumps(st))
        idx.sync()
        assert idx.get(live.name).state == "interrupted"


def test_syncing_200_unchanged_runs_reads_none(trained, tmp_path, monkeypatch):
    ws = Workspace(tmp_path)
    for i in range(200):
        shutil.copytree(trained["pa"], ws.runs_dir / f"2026-02-01-{i:06d}-pa", ignore=shutil.ignore_patterns(
            "*.h5", "last.pt", "log.txt", "history.csv"))
    with RunIndex.open(ws) as idx:
        assert len(idx) == 200
        reads = []
        real = RunRecord.read
        monkeypatch.setattr(index_mod.RunRecord, "read", staticmethod(lambda p: reads.append(p) or real(p)))
        report = idx.sync()
        assert reads == [] and report.unchanged == 200 and report.refreshed == report.added == ()
        set_pinned(ws.runs_dir / "2026-02-01-000007-pa", True)
        assert idx.sync().refreshed == ("2026-02-01-000007-pa",) and [p.name for p in reads] == [
            "2026-02-01-000007-pa"]


def test_query_filters_and_sorts(trained, tmp_path):
    ws = _copy_ws(trained["ws"], tmp_path)
    pa, dpd = trained["pa"].name, trained["dpd"].name
    with RunIndex.open(ws) as idx:
        assert [r.run_id for r in idx.runs(step="dpd")] == [dpd]
        assert [r.run_id for r in idx.runs(state="succeeded", descending=False)] == sorted([pa, dpd])
        assert {r.run_id for r in idx.runs(state=("running", "unreadable"))} == {trained["live"].name,
                                                                                  trained["bad"].name}
        fp = idx.get(pa).dataset_fingerprint
        assert sorted(r.run_id for r in idx.runs(dataset=fp)) == sorted([pa, dpd])  # the live run has no dataset
        assert [r.run_id for r in idx.runs(dataset="synthetic demo, seed 1", step="pa")] == [pa]
        by_best = idx.runs(state="succeeded", sort="best_value", descending=False)
        assert [r.best_value for r in by_best] == sorted(r.best_value for r in by_best)
        assert idx.runs(sort="wall_s")[-1].wall_s is None  # NULLs last
        assert idx.runs(pinned=True) == [] and len(idx.runs(limit=2)) == 2
        with pytest.raises(ValueError, match="unknown sort key 'nope'"):
            idx.runs(sort="nope")
        before = idx.runs()
        report = idx.rebuild()
        assert report.added == tuple(sorted(r.run_id for r in before)) and idx.runs() == before


# ------------------------------------------------------------------------------------------------ two processes
_WORKER = r"""
import json, sys, time
from pathlib import Path
from dpd_desktop.runs.index import RunIndex
from dpd_desktop.runs.writer import set_pinned
ws, go, toggle, other = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
Path(str(go) + "." + toggle).touch()  # ready
while not go.exists():
    time.sleep(0.002)
seen = []
began = time.time()
for i in range(25):
    if i == 1:
        Path(str(go) + "." + toggle + ".working").touch()
    if i == 24:  # the last round waits until the other has worked once: the two overlap by construction
        end = time.monotonic() + 120
        while not Path(str(go) + "." + other + ".working").exists() and time.monotonic() < end:
            time.sleep(0.002)
    with RunIndex.open(ws) as idx:
        set_pinned(Path(ws) / "runs" / toggle, i % 2 == 0)
        idx.sync()
        rows = idx.runs()
        seen.append([sorted(r.run_id for r in rows), sorted(r.state for r in rows)])
print(json.dumps({"seen": seen, "began": began, "ended": time.time()}))
"""


def test_two_processes_sync_and_read_one_workspace_at_once(trained, tmp_path):
    ws = _copy_ws(trained["ws"], tmp_path)
    (tmp_path / INDEX_FILE).write_bytes(b"damaged " * 64)  # both start by finding the index damaged
    go = tmp_path / "go"
    a, b = trained["pa"].name, trained["dpd"].name
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(tmp_path), str(go), t, o], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for t, o in ((a, b), (b, a))]
    deadline = time.monotonic() + 120
    while not all(Path(f"{go}.{t}").exists() for t in (a, b)) and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0 and "Traceback" not in err, err
    ids = sorted(p.name for p in ws.runs_dir.iterdir())
    docs = [json.loads(out) for out, _ in outs]
    assert max(d["began"] for d in docs) < min(d["ended"] for d in docs), "the two did not overlap"
    for doc in docs:
        seen = doc["seen"]
        assert len(seen) == 25 and all(s[0] == ids for s in seen)
        assert all(s[1] == sorted(["running", "succeeded", "succeeded", "unreadable"]) for s in seen)
    # the index the two left equals one rebuilt from the folders
    with RunIndex.open(ws) as idx:
        assert idx.rebuilt is None
        left = idx.runs()
    (tmp_path / INDEX_FILE).unlink()
    with RunIndex.open(ws) as idx:
        assert idx.rebuilt == "missing" and idx.runs() == left
    # each process's last toggle (i = 24) pinned its run: the folders say so, and so does the index
    assert {r.run_id: r.pinned for r in left if r.run_id in (a, b)} == {a: True, b: True}
    assert RunRecord.read(ws.runs_dir / a).pinned and RunRecord.read(ws.runs_dir / b).pinned


# ------------------------------------------------------------------------------------------------ `runs`
def test_runs_lists_the_index(trained, tmp_path, capsys):
    ws = _copy_ws(trained["ws"], tmp_path)
    pa, dpd = trained["pa"].name, trained["dpd"].name
    assert cli.main(["--workspace", str(tmp_path), "runs", "pin", dpd]) == 0
    assert capsys.readouterr().out == f"kept: {dpd}\n"
    assert cli.main(["--workspace", str(tmp_path), "runs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["RUN", "STEP", "FAMILY", "H", "STATE", "PIN", "DATASET", "EP", "VAL", "NMSE", "VAL",
                                "ACLR", "TEST", "NMSE", "TEST", "ACLR", "QUANT", "Q", "ACLR", "PROFILE", "PARAMS",
                                "MACS/S", "TIME", "KERNEL"]
    assert [ln.split()[0] for ln in lines[1:]] == sorted(p.name for p in ws.runs_dir.iterdir())[::-1]
    row = RunRecord.read(ws.runs_dir / dpd)
    cells = next(ln for ln in lines if ln.startswith(dpd)).split()
    assert cells[1:6] == ["dpd", "gru", "3", "succeeded", "kept"]
    assert cells[6:9] == ["demo", "seed", "1"] and cells[9] == str(row.best_epoch)
    assert cells[10:14] == [f"{row.val_metrics['NMSE']:.2f}", f"{row.val_metrics['ACLR_AVG']:.2f}",
                            f"{row.test_metrics['NMSE']:.2f}", f"{row.test_metrics['ACLR_AVG']:.2f}"]
    model = json.loads((ws.runs_dir / dpd / "config.json").read_text())["model"]
    assert cells[14:16] == ["-", "-"]  # no quantised evaluation (tests/unit/test_deploy.py has runs with them)
    assert cells[16:19] == ["legacy-2.2.1", str(model["n_params"]), str(model["macs_per_sample"])]
    assert cells[19:] == [f"{row.status_doc['wall_s']:.1f}", "s", "reference"]
    assert cli.main(["--workspace", str(tmp_path), "runs", "--step", "pa", "--state", "succeeded", "--json"]) == 0
    (only,) = json.loads(capsys.readouterr().out)
    assert only == _expected(ws.runs_dir / pa)
    assert cli.main(["--workspace", str(tmp_path), "runs", "list", "--state", "running", "--state",
                     "unreadable"]) == 0
    assert sorted(ln.split()[0] for ln in capsys.readouterr().out.splitlines()[1:]) == sorted(
        [trained["live"].name, trained["bad"].name])
    assert cli.main(["--workspace", str(tmp_path), "runs", "unpin", dpd, "no-such-run"]) == 2
    out = capsys.readouterr()
    assert out.out == f"scratch: {dpd}\n" and "run 'no-such-run' not found" in out.err
    assert RunRecord.read(ws.runs_dir / dpd).pinned is False


def test_a_workspace_that_cannot_hold_the_file_is_indexed_in_memory(trained, tmp_path):
    ws = _copy_ws(trained["ws"], tmp_path)
    (tmp_path / INDEX_FILE).mkdir()  # in the way of the database file
    with RunIndex.open(ws) as idx:
        assert idx.in_memory and sorted(r.run_id for r in idx.runs()) == sorted(p.name for p in ws.runs_dir.iterdir())
    assert (tmp_path / INDEX_FILE).is_dir()


def test_pin_refuses_a_run_folder_outside_the_workspace(trained, tmp_path, capsys):
    _copy_ws(trained["ws"], tmp_path / "a")
    assert cli.main(["--workspace", str(tmp_path / "b"), "runs", "pin", str(tmp_path / "a" / "runs" /
                                                                             trained["pa"].name)]) == 2
    assert "not a run folder of the workspace" in capsys.readouterr().err
    assert not (tmp_path / "a" / "runs" / trained["pa"].name / "pinned.json").exists()


def test_mp_and_gmp_rows_have_no_hidden_size(tmp_path):
    """An MP/GMP run's config.json carries the (unused) default hidden size; its index row, ``runs`` and
    ``runs --json`` do not show it as if the model had one."""
    from run_folders import make_run  # tests/run_folders.py
    from dpd_desktop.cli.runs import table_row

    ws = Workspace(tmp_path)
    for name, backbone in (("r-mp", "mp"), ("r-gmp", "gmp"), ("r-gru", "gru")):
        d = make_run(ws, name)
        doc = json.loads((d / "config.json").read_text())
        doc["experiment"].update(backbone=backbone, hidden_size=23)
        (d / "config.json").write_text(json.dumps(doc))
    with RunIndex.open(ws) as idx:
        rows = {r.run_id: r for r in idx.runs()}
    assert {k: r.hidden_size for k, r in rows.items()} == {"r-mp": None, "r-gmp": None, "r-gru": 23}
    assert table_row(rows["r-mp"])[3] == "-" and table_row(rows["r-gru"])[3] == "23"


def test_a_cancelled_run_shows_its_best_epochs_metrics(tmp_path):
    """A run that ends without RunFinished (here cancelled after its second epoch) keeps the selected epoch's
    validation metrics and selection value in status.json (runs/writer.py ``_remember_best``), so `runs` and the
    browser show them, equal to that epoch's row of history.csv."""
    ws = Workspace(tmp_path)
    demo = make_demo_dataset(seed=1, n_train=1500, n_val=1024, n_test=1024, nperseg=256)
    box = []

    def cancel_after_two(ev):
        if type(ev).__name__ == "EpochEnded" and ev.epoch == 1:
            box[0].request_cancel()

    tr = Trainer(ExperimentConfig(step="pa", **{**TINY, "epochs": 5}), dataset=demo, workspace=ws,
                 observers=[cancel_after_two])
    box.append(tr)
    res = tr.run()
    assert res.state == "cancelled", res.message
    rec = RunRecord.open(res.run_dir)
    best = int(rec.status_doc["best_epoch"])
    row = next(r for r in rec.history() if int(r["EPOCH"]) == best)
    assert rec.val_metrics["NMSE"] == pytest.approx(float(row["VAL_NMSE"]), rel=1e-6)
    assert rec.best_value == pytest.approx(float(row[rec.selection_metric]), rel=1e-6)
    with RunIndex.open(ws) as idx:
        got = next(r for r in idx.runs() if r.run_id == res.run_id)
    assert got.state == "cancelled" and got.val_nmse == pytest.approx(float(row["VAL_NMSE"]), rel=1e-6)
