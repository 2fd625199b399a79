"""The run record: the writer's files read back by the reader (round trip), schema-1 folders written by the first
releases, damaged folders (RecordError naming the file and field; "unreadable" in listings)."""
import json
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from machine import assert_csv_rows, assert_value, describe, same_arithmetic  # tests/machine.py

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.metrics.spectra import psd_db
from dpd_desktop.runs import artifacts
from dpd_desktop.runs.record import SCHEMA, DatasetChanged, DatasetRef, DatasetUnavailable, RecordError, RunRecord
from dpd_desktop.runs.writer import RunWriter
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.runs.plotdata import PSD_NPERSEG_MAX
from dpd_desktop.training.trainer import Trainer

V1 = Path(__file__).parent / "data" / "records_v1"
V1_PA = V1 / "2026-12-01-083312-pa-gru4"
#: ExperimentConfig fields added after the first release by the MP/GMP baselines (issue 13)
POLY_FIELDS = ("fit", "poly_order", "memory_depth", "poly_odd_only", "cross_order", "cross_lag", "cross_lead", "rcond",
               "grid_k", "grid_m")
V1_DPD = V1 / "2026-12-01-083313-dpd-gru3"
# the settings that wrote the v1 fixture (see its README.md)
DEMO = dict(seed=2, n_train=3000, n_val=1024, n_test=1024, nperseg=256)
BASE = dict(dataset="demo", backbone="gru", epochs=2, frame_length=40, stride=16, batch_size=32, device="cpu",
            threads=1)
#: the arithmetic of a machine that reproduces the v1 fixture bit for bit (tests/machine.py); elsewhere its numbers
#: are compared within the stated tolerances
V1_FINGERPRINT = json.loads((V1.parent / "records_v1_fingerprint.json").read_text())["fingerprint"]


@pytest.fixture(scope="module")
def demo():
    return make_demo_dataset(**DEMO)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory, demo):
    """A PA and a DPD run written by today's writer with the v1 fixture's settings."""
    ws = Workspace(tmp_path_factory.mktemp("ws"))
    threads = torch.get_num_threads()
    try:
        pa = Trainer(ExperimentConfig(step="pa", hidden_size=4, **BASE), dataset=demo, workspace=ws).run()
        assert pa.state == "succeeded", pa.message
        dpd = Trainer(ExperimentConfig(step="dpd", pa_run=str(pa.run_dir), hidden_size=3, **BASE), dataset=demo,
                      workspace=ws).run()
        assert dpd.state == "succeeded", dpd.message
    finally:
        torch.set_num_threads(threads)
    return {"ws": ws, "pa": pa, "dpd": dpd}


# ------------------------------------------------------------------------------------------------ schema 1
def test_schema_1_pa_record_opens(demo):
    rec = RunRecord.open(V1_PA)
    assert rec.schema == 1 and rec.run_id == V1_PA.name and rec.state == "succeeded" and rec.status == "succeeded"
    assert rec.config == ExperimentConfig(step="pa", hidden_size=4, **BASE)
    assert (rec.step, rec.backbone, rec.hidden_size, rec.num_layers) == ("pa", "gru", 4, 1)
    assert rec.selection_metric == "VAL_NMSE" and rec.best_epoch == 1
    assert rec.gain == demo.gain
    assert rec.pa is None and rec.device["device"] == "cpu"
    # the pseudo-path "<synthetic demo seed=2>" becomes a demo reference with the generator's settings
    ref = rec.dataset
    assert ref.kind == "demo" and ref.source is None
    assert ref.demo == dict(DEMO, qam_order=256, noise_db=-45.0)
    assert ref.fingerprint == demo.fingerprint()
    assert ref.load().fingerprint() == demo.fingerprint()  # regenerated, and the fingerprint checked
    hist = rec.history()
    assert [r["EPOCH"] for r in hist] == [0, 1] and hist[0]["VAL_NMSE"] == 0.48889524
    assert rec.best_value == pytest.approx(hist[1]["VAL_NMSE"], abs=1e-8) and hist[1]["VAL_NMSE"] < hist[0]["VAL_NMSE"]
    state, meta = artifacts.load_checkpoint(rec.best_checkpoint)
    assert meta["epoch"] == 1 and meta["hidden_size"] == 4 and meta["dataset_fingerprint"] == demo.fingerprint()
    assert state and all(v.dtype == torch.float32 for v in state.values())
    assert rec.last_checkpoint.is_file() and rec.results_path.is_file()
    assert rec.label == f"{V1_PA.name} (succeeded · best {rec.best_value:.2f})"


def test_schema_1_dpd_record_opens():
    rec = RunRecord.open(V1_DPD)
    assert rec.config.step == "dpd" and rec.config.pa_run.endswith(V1_PA.name) and rec.hidden_size == 3
    assert rec.pa["run_id"] == V1_PA.name and rec.pa["hidden_size"] == 4
    assert rec.test_metrics["ACLR_AVG"] == -29.79544426067245 and rec.status_doc["power_warning"] is True
    assert rec.dataset.kind == "demo" and rec.dataset.demo["seed"] == 2


def test_schema_1_workspace_lists_and_a_dpd_trains_through_an_old_pa(tmp_path, demo):
    shutil.copytree(V1, tmp_path / "runs", ignore=shutil.ignore_patterns("*.md"))
    ws = Workspace(tmp_path)
    runs = ws.list_runs()
    assert [(r.run_id, r.step, r.backbone, r.hidden_size, r.status) for r in runs] == [
        (V1_DPD.name, "dpd", "gru", 3, "succeeded"), (V1_PA.name, "pa", "gru", 4, "succeeded")]
    assert [r.run_id for r in ws.list_runs(step="pa")] == [V1_PA.name]
    res = Trainer(ExperimentConfig(step="dpd", pa_run=V1_PA.name, hidden_size=3, **dict(BASE, epochs=1)),
                  dataset=demo, workspace=ws).run()
    assert res.state == "succeeded", res.message
    assert RunRecord.open(res.run_dir).pa["run_id"] == V1_PA.name


# ------------------------------------------------------------------------------------------------ round trip
def test_round_trip_writer_to_reader(fresh, demo):
    pa = fresh["pa"]
    rec = RunRecord.open(pa.run_dir)
    assert rec.schema == SCHEMA and rec.doc["format"] == "dpd-desktop-run-1" and rec.doc["run_id"] == pa.run_id
    assert rec.config == ExperimentConfig(step="pa", hidden_size=4, **BASE).validate()
    assert rec.dataset == DatasetRef.from_dataset(demo)
    assert rec.dataset.kind == "demo" and rec.dataset.demo == dict(DEMO, qam_order=256, occupancy=0.9,
                                                                   noise_db=-45.0)
    assert rec.state == "succeeded" and rec.best_epoch == pa.best_epoch
    assert rec.test_metrics == pa.test_metrics and rec.val_metrics == pa.val_metrics
    hist = rec.history()
    assert len(hist) == len(pa.history) == 2
    for got, row in zip(hist, pa.history):
        assert got["EPOCH"] == row["EPOCH"] and got["HIDDEN_SIZE"] == 4
        assert got["VAL_NMSE"] == pytest.approx(row["VAL_NMSE"], abs=1e-8)
    state, meta = artifacts.load_checkpoint(rec.best_checkpoint)
    assert meta["epoch"] == pa.best_epoch and meta["run_id"] == pa.run_id
    last = torch.load(rec.last_checkpoint, weights_only=True)
    assert last["epoch"] == 1 and set(last["model"]) == set(state)
    assert rec.training["optimizer"].startswith("torch-private")
    # hidden_size is stored once in config.json (the experiment block), not again in its model block
    assert "hidden_size" not in rec.doc["model"] and rec.doc["experiment"]["hidden_size"] == 4
    dpd = RunRecord.open(fresh["dpd"].run_dir)
    assert dpd.pa["run_id"] == pa.run_id and dpd.dataset.load().fingerprint() == demo.fingerprint()


def test_succeeded_status_counts_its_epochs(fresh):
    """status.json of a succeeded run keeps ``epochs_completed`` (the rows of history.csv), so the index and
    ``runs --json`` do not report null for a run that finished every epoch."""
    from dpd_desktop.runs.index import RunIndex

    for which in ("pa", "dpd"):
        run = fresh[which]
        status = json.loads((Path(run.run_dir) / "status.json").read_text())
        assert status["state"] == "succeeded" and status["epochs_completed"] == len(run.history) == 2
    with RunIndex.open(fresh["ws"]) as index:
        rows = {r.run_id: r for r in index.runs()}
    assert rows[fresh["pa"].run_id].epochs_completed == 2


#: experiment fields of issue 24 (delta thresholds, training options, Arena options), at their defaults
ISSUE24_FIELDS = ("thx", "thh", "lr_schedule", "warmup_epochs", "plateau_threshold", "plateau_threshold_mode",
                  "dpd_learning", "power_weight", "oob_weight", "oob_side", "augment", "gain_value", "peak_limit", "loss_window", "selection",
                  "power_gate_db", "evaluation", "test_every_epoch", "target_cfr_db", "target_cfr_iterations",
                  "target_cfr_band_hz")
ISSUE24_DEFAULTS = {k: v for k, v in ExperimentConfig().to_dict().items() if k in ISSUE24_FIELDS}


@pytest.mark.parametrize("which", ["pa", "dpd"])
def test_writer_writes_what_the_first_release_wrote(fresh, which):
    """The same run today and as aefdcf9 wrote it: the same files, the same history bytes (but the clock column),
    the same checkpoint tensors and results datasets; config.json and status.json have the same fields (config.json
    adds schema, the dataset's kind and demo, training.optimizer; drops the model block's arch copies; the experiment
    adds metric_profile, gain_rule and kernel; status.json adds the kernels that ran; status.json and results.h5 add the metric profile and, for a DPD, the gain
    rule and the equal-output-power report of training/gain.py). The numbers are bitwise equal on a machine with the
    fixture's arithmetic fingerprint, within tests/machine.py's tolerances elsewhere."""
    bitwise = same_arithmetic(V1_FINGERPRINT)
    old = V1_PA if which == "pa" else V1_DPD
    new = Path(fresh[which].run_dir)
    assert sorted(p.name for p in new.iterdir()) == sorted(p.name for p in old.iterdir())

    def rows(p):
        lines = (p).read_text().splitlines()
        head = lines[0].split(",")
        t = head.index("TIME:")
        return [",".join(v for i, v in enumerate(line.split(",")) if i != t) for line in lines]

    why = "bitwise" if bitwise else f"within tolerance: {describe(V1_FINGERPRINT)}"
    assert_csv_rows(rows(new / "history.csv"), rows(old / "history.csv"), bitwise, f"history.csv ({why})")
    assert_csv_rows(rows(new / "best.csv"), rows(old / "best.csv"), bitwise, f"best.csv ({why})")
    for name in ("best.pt", "last.pt"):
        a = torch.load(old / name, weights_only=True)
        b = torch.load(new / name, weights_only=True)
        sa, sb = (a["state_dict"], b["state_dict"]) if name == "best.pt" else (a["model"], b["model"])
        assert list(sa) == list(sb), name
        for k in sa:
            assert sa[k].dtype == sb[k].dtype, (name, k)
            assert_value(sb[k], sa[k], bitwise, f"{name} {k} ({why})")
        ma, mb = a["meta"], b["meta"]
        assert set(ma) == set(mb), name
        for k in ma:
            if k != "run_id":
                assert_value(mb[k], ma[k], bitwise, f"{name} meta {k} ({why})")
    oc, nc = (json.loads((d / "config.json").read_text()) for d in (old, new))
    assert set(nc) == set(oc) | {"schema"}
    assert set(nc["dataset"]) == set(oc["dataset"]) | {"kind", "demo"}
    # issue 13: the model's cost (models/cost.py) and the MP/GMP fields of the experiment (their defaults here)
    assert set(nc["model"]) == set(oc["model"]) - {"backbone", "hidden_size", "num_layers"} | {
        "params", "macs_per_sample", "cost"}
    assert set(nc["training"]) == set(oc["training"]) | {"optimizer"}
    # the MP/GMP fields (issue 13) take their defaults; the limits fields (issue 10) are null when the run sets none; the profile/gain rule (issue 13) their defaults
    poly_fields = {k: v for k, v in ExperimentConfig().to_dict().items() if k in POLY_FIELDS}
    assert nc["experiment"] == {**oc["experiment"], "pa_run": nc["experiment"]["pa_run"], **poly_fields,
                                "cuda_memory_fraction": None, "time_limit_s": None,
                                "metric_profile": "legacy-2.2.1", "gain_rule": "peak", "kernel": "reference",
                                **ISSUE24_DEFAULTS, "qat": None, "parent_run": None}  # issue 26: a float run
    os_, ns = (json.loads((d / "status.json").read_text()) for d in (old, new))
    added = {"metric_profile"} | (set() if which == "pa" else {
        "gain_rule", "out_power_with_dpd_db", "out_power_without_dpd_db", "eqp_profile", "eqp_drive_db",
        "eqp_residual_db", "eqp_converged", "eqp_ACLR_with_dpd", "eqp_ACLR_without_dpd", "eqp_EVM_with_dpd",
        "eqp_EVM_without_dpd"})
    # a succeeded run now says how many epochs it ran, and on which kernels (issue 14)
    assert set(ns) == set(os_) | added | {"epochs_completed", "kernel"}
    assert ns["kernel"] == {"requested": "reference", "ran": "reference"}
    with h5py.File(old / "results.h5") as fa, h5py.File(new / "results.h5") as fb:
        assert set(fa) == set(fb) == {"val", "test"}
        assert set(fb.attrs) == set(fa.attrs) | added
        for k in fa.attrs:
            if k not in ("run_id", "config_json"):
                assert_value(fb.attrs[k], fa.attrs[k], bitwise, f"results.h5 {k} ({why})")
        for g in fa:
            assert set(fa[g]) == set(fb[g]) and set(fa[g].attrs) == set(fb[g].attrs)
            for k in fa[g].attrs:
                assert_value(fb[g].attrs[k], fa[g].attrs[k], bitwise, f"results.h5 {g} {k} ({why})")
            for d in fa[g]:
                if d == "psd_prediction_db":
                    # the one deliberate change: the plots' PSD (no detrend, reference §8.2) replaced the
                    # first release's own copy (scipy's default constant detrend)
                    _, want = psd_db(fb[g]["prediction"][()], fb.attrs["spec_sample_rate_hz"],
                                     min(int(fb.attrs["spec_nperseg"]), PSD_NPERSEG_MAX))
                    assert np.array_equal(fb[g][d][()], want), (g, d)
                    assert fb[g][d].shape == fa[g][d].shape, (g, d)
                    continue
                assert_value(fb[g][d][()], fa[g][d][()], bitwise, f"results.h5 {g}/{d} ({why})")


def test_status_is_written_after_the_files_it_describes(tmp_path, demo):
    """At every EpochEnded the observer sees status.json count only epochs whose history rows and last.pt exist."""
    seen = []

    def observer(ev):
        if type(ev).__name__ == "EpochEnded":
            d = Path(res_dir[0])
            st = json.loads((d / "status.json").read_text())
            seen.append((st["epochs_completed"], len(artifacts.read_history_csv(d / "history.csv")),
                         torch.load(d / "last.pt", weights_only=True)["epoch"] + 1))
        elif type(ev).__name__ == "RunStarted":
            res_dir.append(ev.run_dir)

    res_dir = []
    res = Trainer(ExperimentConfig(step="pa", hidden_size=4, **BASE), dataset=demo, workspace=Workspace(tmp_path),
                  observers=[observer]).run()
    assert res.state == "succeeded" and seen == [(1, 1, 1), (2, 2, 2)]


def test_record_events_reach_only_observers_that_ask(tmp_path, demo):
    plain, wants = [], []

    class Recorder:
        record_events = True

        def __call__(self, ev):
            wants.append(type(ev).__name__)

    res = Trainer(ExperimentConfig(step="pa", hidden_size=4, **dict(BASE, epochs=1)), dataset=demo,
                  workspace=Workspace(tmp_path), observers=[lambda ev: plain.append(type(ev).__name__),
                                                            Recorder()]).run()
    assert res.state == "succeeded"
    assert plain[0] == "RunStarted" and plain[-1] == "RunFinished" and "LogLine" not in plain
    assert wants[0] == "RunPrepared" and {"LogLine", "CheckpointReady", "ResultsReady"} <= set(wants)


def test_a_writer_error_fails_the_run_and_status_says_failed(tmp_path, demo):
    class Broken(RunWriter):
        def _checkpoint(self, ev):
            raise OSError(28, "No space left on device")

    import dpd_desktop.runs.writer as writer
    from dpd_desktop.runs.events import CheckpointReady

    handlers = dict(writer._WRITER_HANDLERS)
    writer._WRITER_HANDLERS[CheckpointReady] = Broken._checkpoint
    try:
        res = Trainer(ExperimentConfig(step="pa", hidden_size=4, **BASE), dataset=demo,
                      workspace=Workspace(tmp_path)).run()
    finally:
        writer._WRITER_HANDLERS.clear()
        writer._WRITER_HANDLERS.update(handlers)
    assert res.state == "failed" and "No space left on device" in res.message
    rec = RunRecord.open(res.run_dir)
    assert rec.state == "failed" and "No space left" in rec.message and rec.status_doc["epochs_completed"] == 0
    assert "FAILED" in rec.log_path.read_text()


# ------------------------------------------------------------------------------------------------ damaged
def _copy(tmp_path, src=V1_PA):
    d = tmp_path / "runs" / src.name
    shutil.copytree(src, d)
    return d


@pytest.mark.parametrize("content,field", [
    ("{broken", "not valid JSON"),
    ("[]", "field 'experiment' is missing or not an object"),
    ('{"experiment": "pa"}', "field 'experiment' is missing or not an object"),
])
def test_damaged_config_raises_naming_the_file_and_lists_unreadable(tmp_path, content, field):
    d = _copy(tmp_path)
    (d / "config.json").write_text(content)
    with pytest.raises(RecordError) as ei:
        RunRecord.open(d)
    assert str(d / "config.json") in str(ei.value) and field in str(ei.value)
    rec, = Workspace(tmp_path).list_runs()
    assert rec.run_id == d.name and rec.state == rec.status == "unreadable" and rec.step == "?"


@pytest.mark.parametrize("change,field", [
    (lambda c: c["experiment"].pop("hidden_size"), "field 'experiment.hidden_size' is missing"),
    (lambda c: c["experiment"].update(num_layers=0), "field 'experiment.num_layers' is 0"),
    (lambda c: c["experiment"].update(bogus=1), "field 'experiment.bogus'"),
    (lambda c: c.update(schema=99), "field 'schema' is 99"),
])
def test_config_fields_are_checked(tmp_path, change, field):
    d = _copy(tmp_path)
    cfg = json.loads((d / "config.json").read_text())
    change(cfg)
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(RecordError, match=field) as ei:
        RunRecord.open(d)
    assert str(d / "config.json") in str(ei.value)
    rec, = Workspace(tmp_path).list_runs()  # listed with what it says (as before this record existed)
    assert rec.step == "pa" and rec.config is None and rec.state == "succeeded"


def test_damaged_or_missing_status(tmp_path):
    d = _copy(tmp_path)
    (d / "status.json").write_text("{broken")
    rec = RunRecord.open(d)
    assert rec.state == "unreadable" and rec.config.hidden_size == 4 and rec.best_epoch is None
    (d / "status.json").write_text("[1, 2]")
    assert RunRecord.open(d).state == "unreadable"
    (d / "status.json").unlink()
    assert RunRecord.open(d).state == "interrupted"  # the process died before writing it


def test_not_a_run_folder(tmp_path):
    with pytest.raises(RecordError, match="not a run folder"):
        RunRecord.open(tmp_path)
    assert RunRecord.read(tmp_path) is None
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "stray").mkdir()
    assert Workspace(tmp_path).list_runs() == []


def test_dataset_ref_load_checks_the_fingerprint(tmp_path, demo):
    ref = RunRecord.open(V1_PA).dataset
    other = make_demo_dataset(**dict(DEMO, seed=3))
    with pytest.raises(DatasetChanged, match="not the run's dataset"):
        ref.load(other)
    assert ref.load(demo) is demo
    changed = DatasetRef(kind="demo", source=None, fingerprint=ref.fingerprint, demo=dict(ref.demo, seed=3),
                         recorded_in="x/config.json")
    with pytest.raises(DatasetChanged, match=r"has changed since the run .*'dataset.fingerprint' in x/config.json"):
        changed.load()
    with pytest.raises(DatasetUnavailable, match="cannot be regenerated"):
        DatasetRef(kind="demo", source=None, fingerprint=None, demo={"n_train": 0}).load()
    with pytest.raises(DatasetUnavailable, match="field 'dataset.source' missing"):
        DatasetRef(kind="split-folder", source=None, fingerprint=None).load()
    with pytest.raises(DatasetUnavailable, match=r"field 'dataset.source' names .*nothing, which does not exist"):
        DatasetRef(kind="split-folder", source=str(tmp_path / "nothing"), fingerprint=None).load()
    (tmp_path / "afile.h5").write_bytes(b"not HDF5")
    with pytest.raises(DatasetUnavailable, match="cannot reload the run's dataset from"):
        DatasetRef(kind="hdf5", source=str(tmp_path / "afile.h5"), fingerprint=None).load()


def test_dataset_ref_of_a_folder_dataset(tmp_path):
    from dpd_desktop.data import load_dataset, write_demo_dataset

    folder = write_demo_dataset(tmp_path / "data", **DEMO)
    ds = load_dataset(folder)
    ref = DatasetRef.from_dataset(ds)
    assert ref.kind == "split-folder" and ref.demo is None and ref.source == str(ds.source)
    back = DatasetRef.from_record(ref.to_dict(), SCHEMA)
    assert back == ref and back.load().fingerprint() == ds.fingerprint()


@pytest.mark.parametrize("damage", ["truncated", "overwritten", "missing"])
def test_a_run_whose_best_checkpoint_is_damaged_is_listed_damaged_and_refused_as_pa(tmp_path, demo, damage):
    """A succeeded run whose best.pt is cut short, overwritten or gone reads "damaged" (not succeeded), in the
    listing too, and a DPD refuses it as its PA before a run folder exists."""
    d = _copy(tmp_path)
    assert RunRecord.open(d).state == "succeeded"
    best = d / "best.pt"
    if damage == "truncated":
        best.write_bytes(best.read_bytes()[:200])
    elif damage == "overwritten":
        best.write_bytes(b"\0" * 4096)
    else:
        best.unlink()
    assert RunRecord.open(d).state == "damaged"
    assert [r.state for r in Workspace(tmp_path).list_runs()] == ["damaged"]
    res = Trainer(ExperimentConfig(step="dpd", pa_run=d.name, hidden_size=3, **BASE), dataset=demo,
                  workspace=Workspace(tmp_path)).run()
    assert res.state == "failed" and res.run_dir is None and str(best) in res.message
    assert ("checkpoint file not found" if damage == "missing" else "not a readable checkpoint") in res.message
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [d.name]


@pytest.mark.parametrize("damage", ["overwritten", "truncated"])
def test_a_succeeded_run_whose_results_file_is_not_hdf5_is_listed_damaged(tmp_path, damage):
    """results.h5 overwritten by other bytes or cut to nothing: the run reads "damaged", not succeeded (the index
    too)."""
    from dpd_desktop.runs.index import RunIndex

    d = _copy(tmp_path)
    assert RunRecord.open(d).state == "succeeded"
    with RunIndex.open(Workspace(tmp_path)) as idx:
        assert [r.state for r in idx.runs()] == ["succeeded"]
    res = d / "results.h5"
    res.write_bytes(b"x\n" if damage == "overwritten" else b"")
    assert RunRecord.open(d).state == "damaged"
    with RunIndex.open(Workspace(tmp_path)) as idx:
        assert [r.state for r in idx.runs()] == ["damaged"]


@pytest.mark.parametrize("damage", ["extra cell", "missing cell", "not utf-8"])
def test_a_finished_run_whose_history_is_damaged_is_listed_damaged(tmp_path, damage):
    """history.csv edited or damaged after the run ended: `runs report` refuses it, so the listing (record and
    index, whose folder signature includes history.csv) says "damaged" instead of the state it ended in."""
    from dpd_desktop.runs.index import RunIndex

    d = _copy(tmp_path)
    with RunIndex.open(Workspace(tmp_path)) as idx:
        assert [r.state for r in idx.runs()] == ["succeeded"]
    hist = d / "history.csv"
    lines = hist.read_bytes().splitlines(keepends=True)
    if damage == "extra cell":
        lines[2] = lines[2].rstrip(b"\r\n") + b",999\n"
    elif damage == "missing cell":
        lines[2] = lines[2].rsplit(b",", 1)[0] + b"\n"
    else:
        lines[2] = b"\xff\xfe" + lines[2]
    hist.write_bytes(b"".join(lines))
    assert RunRecord.open(d).state == "damaged"
    with RunIndex.open(Workspace(tmp_path)) as idx:
        assert [r.state for r in idx.runs()] == ["damaged"]
