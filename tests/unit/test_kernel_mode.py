"""The kernel setting where a user meets it (issue 14 point 2), without the window: config.json (round trip, old files),
the recorded kernels (kernels/record.py), status.json, RunRecord, the index (schema 4) and ``runs``, compare's
config diff, ``queue add`` → the child's run, and resume keeping the run's kernel."""
from __future__ import annotations

import json
import sqlite3
from dataclasses import replace

import pytest

from fake_kernels import STUB_REASON, install, install_stub  # tests/fake_kernels.py

from dpd_desktop import cli
from dpd_desktop.config import ConfigError, ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.kernels.dispatch import unsupported_reason
from dpd_desktop.models import build_model
from dpd_desktop.runs.compare import compare_runs
from dpd_desktop.runs.index import INDEX_FILE, INDEX_SCHEMA, RunIndex
from dpd_desktop.kernels.record import KernelRun, kernel_block, read_kernel
from dpd_desktop.lab.queue import RunQueue
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.lab.supervisor import Supervisor
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.runs import events as E
from dpd_desktop.training.resume import prepare_resume, resume_run
from dpd_desktop.training.trainer import Trainer

DEMO = dict(seed=2, n_train=3000, n_val=4096, n_test=4096)
FELL_BACK = f"model: GRU runs on the reference kernel ({STUB_REASON})"


def _cfg(**kw):
    base = dict(step="pa", dataset="demo", backbone="gru", hidden_size=4, epochs=1, frame_length=50, stride=8,
                device="cpu")
    base.update(kw)
    return ExperimentConfig(**base)


def _json(path):
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def ds():
    return make_demo_dataset(**DEMO)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, ds):
    """A workspace with a reference run, a fast run that fell back (the stub's reason) and an old run (a copy of
    the reference one whose config.json has no kernel at all, as written before the setting existed)."""
    mp = pytest.MonkeyPatch()
    root = tmp_path_factory.mktemp("ws")
    ws = Workspace(root)
    out = {"ws": ws}
    out["reference"] = Trainer(_cfg(), dataset=ds, workspace=ws).run().run_dir
    install_stub(mp)
    try:
        out["fell_back"] = Trainer(_cfg(kernel="fast"), dataset=ds, workspace=ws).run().run_dir
    finally:
        mp.undo()
    import shutil

    old = ws.runs_dir / (out["reference"].name + "-old")
    shutil.copytree(out["reference"], old)
    doc = _json(old / "config.json")
    del doc["experiment"]["kernel"], doc["device"]["kernel"]
    (old / "config.json").write_text(json.dumps(doc), encoding="utf-8")
    st = _json(old / "status.json")
    del st["kernel"]
    (old / "status.json").write_text(json.dumps(st), encoding="utf-8")
    out["old"] = old
    return out


# ------------------------------------------------------------------------------------------------ config
def test_config_round_trips_the_kernel_and_refuses_an_unknown_one():
    cfg = _cfg(kernel="fast")
    assert ExperimentConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    assert ExperimentConfig().kernel == "reference"
    with pytest.raises(ConfigError) as err:
        _cfg(kernel="turbo").validate()
    assert err.value.field == "kernel" and "turbo" in str(err.value)


def test_the_command_line_refuses_an_unknown_kernel_before_any_run(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--workspace", str(tmp_path), "train-pa", "--dataset", "demo", "--kernel", "turbo"])
    assert exit_.value.code == 2
    assert "--kernel" in capsys.readouterr().err and not (tmp_path / "runs").exists()


def test_an_old_config_json_without_a_kernel_reads_as_reference(runs):
    rec = RunRecord.open(runs["old"])
    assert rec.config.kernel == "reference"
    assert rec.kernel == KernelRun(requested="reference", used={}, notes=(), recorded=False)
    assert rec.kernel.label == "reference"


# ------------------------------------------------------------------------------------------------ the record
@pytest.mark.parametrize("requested, used, ran, label, fell_back", [
    ("reference", {"model": "reference"}, "reference", "reference", ()),
    ("fast", {"model": "fast"}, "fast", "fast", ()),
    ("fast", {"model": "reference"}, "reference", "fast → reference", ("model",)),
    ("fast", {"dpd": "reference", "pa": "reference"}, "reference", "fast → reference", ("dpd", "pa")),
    ("fast", {"dpd": "fast", "pa": "reference"}, "mixed", "fast, pa → reference", ("pa",)),
    ("fast", {}, "none", "fast (no recurrence)", ()),
    ("reference", {}, "none", "reference", ()),
])
def test_kernel_block_and_its_label(requested, used, ran, label, fell_back):
    block = kernel_block(requested, used, ["why"] if fell_back else [])
    assert block == {"requested": requested, "used": used, "ran": ran, "notes": ["why"] if fell_back else []}
    k = read_kernel({"experiment": {"kernel": requested}, "device": {"kernel": block}})
    assert (k.ran, k.label, k.fell_back, k.recorded) == (ran, label, fell_back, True)
    assert (k.requested, k.ran) == (requested, ran)


@pytest.mark.parametrize("doc", [None, [], {"experiment": 3}, {"device": {"kernel": "fast"}},
                                 {"experiment": {"kernel": 7}, "device": []}])
def test_a_hand_edited_kernel_block_reads_leniently(doc):
    assert read_kernel(doc) == KernelRun()
    k = read_kernel({"experiment": {"kernel": "fast"}, "device": {"kernel": {"used": {"model": 1, "pa": "fast"},
                                                                             "notes": "x"}}})
    assert (k.requested, dict(k.used), k.notes, k.label) == ("fast", {"pa": "fast"}, (), "fast")


def test_record_status_and_index_say_what_ran(runs):
    fb = runs["fell_back"]
    assert _json(fb / "config.json")["experiment"]["kernel"] == "fast"
    assert _json(fb / "status.json")["kernel"] == {"requested": "fast", "ran": "reference"}
    assert _json(runs["reference"] / "status.json")["kernel"] == {"requested": "reference", "ran": "reference"}
    rec = RunRecord.open(fb)
    assert (rec.kernel.label, rec.kernel.notes) == ("fast → reference", (FELL_BACK,))
    with RunIndex.open(runs["ws"]) as idx:
        rows = {r.run_id: r for r in idx.runs()}
    assert rows[fb.name].kernel == "fast → reference" and rows[fb.name].kernel_notes == FELL_BACK
    assert rows[runs["reference"].name].kernel == "reference" and rows[runs["reference"].name].kernel_notes is None
    assert rows[runs["old"].name].kernel == "reference"


def test_an_index_of_schema_3_is_rebuilt_with_the_kernel_column(runs, tmp_path):
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(runs["ws"].root, root, ignore=shutil.ignore_patterns(INDEX_FILE + "*"))
    with RunIndex.open(root) as idx:
        assert len(idx) == 3
    conn = sqlite3.connect(root / INDEX_FILE)
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    assert INDEX_SCHEMA == 6
    with RunIndex.open(root) as idx:
        assert idx.rebuilt == "index schema 3, this version writes 6"
        assert sorted(r.kernel for r in idx.runs()) == ["fast → reference", "reference", "reference"]


def test_runs_shows_the_kernel_column(runs, capsys):
    ws = ["--workspace", str(runs["ws"].root)]
    assert cli.main([*ws, "runs"]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split()[-1] == "KERNEL"
    by_id = {ln.split()[0]: ln for ln in lines}
    assert by_id[runs["fell_back"].name].endswith(" fast → reference")
    assert by_id[runs["reference"].name].endswith(" reference") and by_id[runs["old"].name].endswith(" reference")
    assert cli.main([*ws, "runs", "--json"]) == 0
    rows = {r["run_id"]: r for r in json.loads(capsys.readouterr().out)}
    assert (rows[runs["fell_back"].name]["kernel"], rows[runs["fell_back"].name]["kernel_notes"]) == \
        ("fast → reference", FELL_BACK)


def test_compare_config_diff_shows_a_kernel_difference(runs):
    diff = dict(compare_runs([runs["reference"], runs["fell_back"]]).config_diff)
    assert diff["experiment.kernel"] == ("reference", "fast")
    assert diff["device.kernel"] == ("reference", "fast → reference")
    # a run recorded before the setting existed ran the reference kernels: no difference to a reference run
    same = dict(compare_runs([runs["reference"], runs["old"]]).config_diff)
    assert "experiment.kernel" not in same and "device.kernel" not in same


# ------------------------------------------------------------------------------------------------ resume
def test_a_resumed_run_keeps_its_kernel_and_ends_bitwise_equal(monkeypatch, tmp_path, ds):
    fake = install(monkeypatch)
    cfg = _cfg(kernel="fast", epochs=3, hidden_size=5)
    whole = Trainer(cfg, dataset=ds, workspace=Workspace(tmp_path / "whole")).run()
    ws = Workspace(tmp_path / "ws")
    tr = Trainer(cfg, dataset=ds, workspace=ws)
    tr.observers.append(lambda ev: isinstance(ev, E.BatchProgress) and ev.epoch == 1 and tr.request_cancel())
    first = tr.run()
    assert first.state == "cancelled" and len(first.history) in (1, 2)
    plan = prepare_resume(ws, first.run_id, dataset=ds)
    assert plan.config.kernel == "fast"
    fake.calls.clear()
    seen = []
    final = resume_run(first.run_dir, ws, observers=[seen.append], dataset=ds)
    assert final.state == "succeeded" and len(fake.calls) > 0  # the resumed epochs ran through the backend
    started = next(ev for ev in seen if isinstance(ev, E.RunStarted))
    assert started.config["kernel"] == "fast" and started.setup["device"]["kernel"]["used"] == {"model": "fast"}
    doc = _json(first.run_dir / "config.json")
    assert doc["experiment"]["kernel"] == "fast" and doc["device"]["kernel"]["ran"] == "fast"
    assert len(doc["resumes"]) == 1
    for a, b in zip(whole.history, final.history):
        a, b = dict(a), dict(b)
        a.pop("TIME:"), b.pop("TIME:")
        assert a == b
    assert final.test_metrics == whole.test_metrics


# ------------------------------------------------------------------------------------------------ queue
TINY = ["--dataset", "demo", "--hidden-size", "4", "--frame-length", "50", "--epochs", "1", "--max-train-samples",
        "200", "--device", "cpu", "--threads", "1"]


def _expected_used(backbone: str, hidden: int) -> str:
    """What fast mode runs a model on here (the real backend's answer, in this process)."""
    net = build_model(backbone, hidden, 1)
    return "reference" if unsupported_reason(net.backbone.rnn, "cpu") else "fast"


def test_queue_add_carries_the_kernel_to_the_child_run(tmp_path, capsys):
    ws = ["--workspace", str(tmp_path)]
    assert cli.main([*ws, "queue", "add", "pa", *TINY, "--kernel", "fast"]) == 0
    assert cli.main([*ws, "queue", "add", "dpd", *TINY, "--after", "1", "--hidden-size", "3", "--kernel", "fast"]) == 0
    assert cli.main([*ws, "queue", "add", "pa", *TINY]) == 0
    capsys.readouterr()
    with RunQueue(tmp_path) as q:
        assert [e.config.kernel for e in q.entries()] == ["fast", "fast", "reference"]
        ends = Supervisor(Workspace(tmp_path), queue=q).run()
        entries = {e.id: e for e in q.entries()}
    assert [e.state for e in ends] == ["succeeded"] * 3
    pa, dpd, plain = (RunRecord.open(entries[i].run_dir) for i in (1, 2, 3))
    assert (pa.config.kernel, dpd.config.kernel, plain.config.kernel) == ("fast", "fast", "reference")
    assert pa.kernel.requested == "fast" and dict(pa.kernel.used) == {"model": _expected_used("gru", 4)}
    assert dpd.kernel.requested == "fast"
    assert dict(dpd.kernel.used) == {"dpd": _expected_used("gru", 3), "pa": _expected_used("gru", 4)}
    assert len(dpd.kernel.notes) == list(dpd.kernel.used.values()).count("reference")
    assert dict(plain.kernel.used) == {"model": "reference"} and plain.kernel.notes == ()


def test_queue_entry_config_keeps_the_kernel_across_a_restart(tmp_path):
    with RunQueue(tmp_path) as q:
        q.add(replace(_cfg(), kernel="fast", max_train_samples=200))
    with RunQueue(tmp_path) as q:
        (e,) = q.entries()
    assert e.config.kernel == "fast"


def test_train_pa_prints_the_kernel_and_why_it_fell_back(monkeypatch, tmp_path, capsys):
    install_stub(monkeypatch)
    args = ["--workspace", str(tmp_path), "train-pa", *TINY, "--quiet", "--no-plots"]
    assert cli.main([*args, "--kernel", "fast"]) == 0
    out = capsys.readouterr().out.splitlines()
    (device,) = [ln for ln in out if ln.startswith("device cpu")]
    assert " · kernel fast → reference · " in device
    assert out[out.index(device) + 1] == f"kernel: {FELL_BACK}"
    assert cli.main(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert " · kernel reference · " in next(ln for ln in out if ln.startswith("device cpu"))
    assert not any(ln.startswith("kernel:") for ln in out)


@pytest.mark.parametrize("backbone, fit", [("rvtdcnn", "gradient"), ("mp", "ls")])
def test_families_without_recurrence_record_that_fast_changes_nothing(tmp_path, ds, backbone, fit):
    from dpd_desktop.training.ls_fit import make_trainer

    ws = Workspace(tmp_path)
    res = make_trainer(_cfg(backbone=backbone, fit=fit, kernel="fast"), dataset=ds, workspace=ws).run()
    assert res.state == "succeeded", res.message
    assert _json(res.run_dir / "config.json")["device"]["kernel"] == {"requested": "fast", "used": {}, "ran": "none",
                                                                      "notes": []}
    assert RunRecord.open(res.run_dir).kernel.label == "fast (no recurrence)"


def test_an_mp_dpd_through_a_gru_pa_runs_the_pa_on_the_chosen_kernel(monkeypatch, tmp_path, ds):
    from dpd_desktop.training.ls_fit import make_trainer

    fake = install(monkeypatch)
    ws = Workspace(tmp_path)
    pa = Trainer(_cfg(), dataset=ds, workspace=ws).run()
    tr = make_trainer(_cfg(step="dpd", pa_run=pa.run_id, backbone="mp", fit="ls", kernel="fast"), dataset=ds,
                      workspace=ws)
    res = tr.run()
    assert res.state == "succeeded", res.message
    assert fake.saw(tr.net.pa.backbone.rnn.weight_hh_l0) > 0
    assert _json(res.run_dir / "config.json")["device"]["kernel"]["used"] == {"pa": "fast"}


def test_a_resume_cannot_change_the_kernel(tmp_path, ds):
    ws = Workspace(tmp_path)
    tr = Trainer(_cfg(epochs=3), dataset=ds, workspace=ws)
    tr.observers.append(lambda ev: isinstance(ev, E.BatchProgress) and ev.epoch == 1 and tr.request_cancel())
    first = tr.run()
    from dpd_desktop.training.resume import ResumeRefused

    with pytest.raises(ResumeRefused, match="kernel cannot be changed by a resume"):
        prepare_resume(ws, first.run_id, dataset=ds, kernel="fast")
