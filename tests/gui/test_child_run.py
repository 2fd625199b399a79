"""The window's run trains in a child process through the supervisor (gui/worker.py, lab/supervisor.py
``run_entry``; pytest-qt, offscreen): a tiny demo run's rows in the window equal its history.csv, a killed or
segfaulting child leaves the run ``interrupted`` / ``failed`` in status.json and in the window, which stays up; Stop,
"Preview every" and Resume reach the child; on every device; after a run its PNGs are rendered by a process of their
own (gui/run_plots.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.gui.worker import RunWorker, child_options, rows_before_resume
from dpd_desktop.lab.queue import QUEUE_FILE, QueueEntry
from dpd_desktop.lab.supervisor import Supervisor
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.runs.workspace import Workspace

DEMO = dict(seed=3, n_train=2048, n_val=1024, n_test=1024, nperseg=256)


def _config(**kw) -> ExperimentConfig:
    base = dict(dataset="demo", epochs=1, hidden_size=4, frame_length=50, stride=8, batch_size=16, device="cpu",
                threads=1)
    base.update(kw)
    return ExperimentConfig(**base)


def _table_rows(w) -> list[list[str]]:
    m = w.epoch_table.model()
    return [[m.index(r, c).data() for c in range(m.columnCount())] for r in range(m.rowCount())]


def test_a_real_run_goes_to_a_child_and_its_rows_equal_history_csv(make_window, qtbot, workspace):
    w = make_window()
    w.set_dataset(make_demo_dataset(**DEMO), "demo")
    w.set_form_from_config(_config(epochs=2))
    with qtbot.waitSignal(w.runEnded, timeout=120_000) as blocker:
        assert w.start_run()
        assert isinstance(w.runs.worker, RunWorker)
    assert blocker.args == ["succeeded"], w.banner.message + "\n" + w.banner.detail.toPlainText()
    rec = RunRecord.open(w.session.run_dir)
    assert rec.state == "succeeded"
    history = rec.history()
    assert [int(r["EPOCH"]) for r in history] == [0, 1]
    # the rows the window received are the rows on disk, value for value (numbers as history.csv writes them)
    assert len(w.plots.history_rows) == 2
    for got, want in zip(w.plots.history_rows, history):
        for key, value in want.items():
            if key == "TIME:":
                continue
            if isinstance(value, str):
                assert str(got[key]) == value, key
            else:
                assert got[key] == pytest.approx(value, rel=1e-6, abs=1e-9, nan_ok=True), key
    assert w.epoch_table.rowCount() == 2
    for p in w.panels:
        assert p.has_data(), p.title
    # the child trained on the window's dataset: the recorded fingerprint is the loaded one's
    assert rec.dataset.fingerprint == w.data.dataset.fingerprint()
    assert rec.dataset.demo["n_train"] == DEMO["n_train"]
    # Run DPD needs a finished DPD run: a PA run leaves it off, the session knows the run folder
    assert w.session.state == "succeeded" and not w.act_run_dpd.isEnabled()


@pytest.mark.parametrize("action, state, words", [("kill", "interrupted", "SIGKILL"),
                                                   ("segfault", "failed", "SIGSEGV")])
def test_a_dead_child_leaves_the_run_ended_and_the_window_up(make_window, qtbot, monkeypatch, action, state, words):
    from child_faults import inject_child_faults  # tests/child_faults.py

    inject_child_faults(monkeypatch, f"{action}@epoch:0")
    w = make_window()
    w.set_dataset(make_demo_dataset(**DEMO), "demo")
    w.set_form_from_config(_config(epochs=3))
    with qtbot.waitSignal(w.runEnded, timeout=120_000) as blocker:
        assert w.start_run()
    assert blocker.args == [state]
    assert w.session.state == state and w.isVisible()
    assert words in w.banner.message
    rec = RunRecord.open(w.session.run_dir)
    assert rec.state == state and words in rec.status_doc.get("message", "")
    assert len(rec.history()) == 1  # epoch 0 was on disk when the child died
    assert w.runs.worker is None and w.act_start.isEnabled()
    assert w.resume_control.action.isEnabled()  # interrupted and failed runs can be resumed


def test_stop_preview_and_resume_reach_the_child(make_window, qtbot, workspace, tmp_path):
    ds = make_demo_dataset(**DEMO)
    cfg = _config(epochs=6, stride=2, lr=0.5, lr_end=1e-3, patience=0, preview_every=None)
    w = make_window()
    w.set_dataset(ds, "demo")
    w.set_form_from_config(cfg)
    w.start_run()
    worker = w.runs.worker
    assert isinstance(worker, RunWorker)
    previews = []
    w.preview_check.setChecked(True)  # during the run: "Preview every" reaches the child
    w.form.preview_every.setValue(5)
    worker.previewReady.connect(lambda ev: previews.append(ev.batch))
    qtbot.waitUntil(lambda: len(previews) >= 1 and w.epoch_table.rowCount() >= 1, timeout=60_000)
    with qtbot.waitSignal(w.runEnded, timeout=30_000) as blocker:
        w.stop_run()
    assert blocker.args == ["cancelled"]
    assert all(b % 5 == 0 for b in previews), previews
    run_dir = w.session.run_dir
    done = RunRecord.open(run_dir).status_doc["epochs_completed"]
    assert 1 <= done < 6 and RunRecord.open(run_dir).state == "cancelled"
    with qtbot.waitSignal(w.runEnded, timeout=120_000) as blocker:
        assert w.resume_control.resume()
        assert isinstance(w.runs.worker, RunWorker)
    assert blocker.args == ["succeeded"], w.banner.message + "\n" + w.banner.detail.toPlainText()
    assert w.session.run_dir == run_dir and w.epoch_table.rowCount() == 6
    rows = RunRecord.open(run_dir).history()
    assert [int(r["EPOCH"]) for r in rows] == list(range(6))
    assert [int(r["EPOCH"]) for r in w.plots.history_rows] == list(range(6))  # the rows before the resume, once


def test_a_fake_trainer_takes_the_same_path(make_window, qtbot):
    from gui_fakes import FakeDataset, fake_factory

    factory = fake_factory()
    w = make_window(trainer_factory=factory)
    w.set_dataset(FakeDataset())
    with qtbot.waitSignal(w.runEnded, timeout=20_000) as blocker:
        assert w.start_run(_config())
        assert isinstance(w.runs.worker, RunWorker)  # the window's one worker, its supervisor the tests' seam
    assert blocker.args == ["succeeded"] and len(factory.created) == 1


def test_child_options_and_an_entry_in_no_queue(tmp_path):
    ds = make_demo_dataset(**DEMO)
    opts = child_options(ds, resume="/x/run")
    assert opts["resume"] == "/x/run" and opts["dataset"]["kind"] == "demo"
    assert opts["dataset"]["fingerprint"] == ds.fingerprint() and opts["dataset"]["demo"]["seed"] == 3
    assert child_options(None) == {}
    # Supervisor.run_entry: stopped before its start, the entry ends cancelled without a child; no queue file
    ws = Workspace(tmp_path / "ws")
    seen = []
    sup = Supervisor(ws, observers=[lambda e, ev: seen.append((e.id, ev))])
    sup.request_stop()
    entry = QueueEntry(id=1, position=0, config=_config(), device="cpu", state="running")
    end = sup.run_entry(entry, opts)
    assert (end.entry_id, end.state, end.message) == (1, "cancelled", "cancelled before the run started")
    assert seen == [(1, end)] and sup.ended == [end]
    assert not (ws.root / QUEUE_FILE).exists()


def test_rows_before_resume_keep_the_epochs_up_to_the_resume(tmp_path):
    from dpd_desktop.runs import artifacts
    from dpd_desktop import atomic

    run = tmp_path / "r"
    run.mkdir()
    cfg = _config().to_dict()
    atomic.atomic_write_text(run / "config.json", json.dumps(
        {"schema": 2, "experiment": cfg, "resumes": [{"at": "x", "from_epoch": 1}]}))
    rows = [{"EPOCH": i, "TRAIN_LOSS": 0.1 * i} for i in range(4)]
    artifacts.write_history_csv(run / "history.csv", rows)
    assert [r["EPOCH"] for r in rows_before_resume(run)] == [0, 1]
    assert rows_before_resume(tmp_path / "missing") == []


def test_after_a_run_a_process_of_their_own_writes_the_pngs(make_window, qtbot, monkeypatch):
    from dpd_desktop.gui import export

    rendered_here = []
    monkeypatch.setattr(export, "write_run_plots", lambda *a, **k: rendered_here.append(1))
    w = make_window(write_plots=True)
    w.set_dataset(make_demo_dataset(**DEMO), "demo")
    w.set_form_from_config(_config(epochs=1))
    with qtbot.waitSignal(w.plotsWritten, timeout=120_000) as blocker:
        assert w.start_run()
    paths = blocker.args[0]
    assert not isinstance(paths, Exception), paths
    names = sorted(p.name for p in paths)
    assert names == ["amam.png", "ampm.png", "learning_curves.png", "psd.png", "time_domain.png"]
    for p in paths:
        assert p.parent == Path(w.session.run_dir) / "plots" and p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert p.stat().st_size > 2000
    assert not [p for p in paths[0].parent.iterdir() if p.suffix != ".png"]  # no temp files left
    assert rendered_here == []  # nothing rendered in the window's process
    assert w.runs.worker is None and len(w.jobs) == 0


def test_run_plots_main_writes_the_pngs_of_a_run_folder(make_window, qtbot, tmp_path, capsys):
    from dpd_desktop.gui import run_plots
    from dpd_desktop.runs.workspace import Workspace
    from dpd_desktop.training.trainer import Trainer

    res = Trainer(_config(epochs=1), dataset=make_demo_dataset(**DEMO), workspace=Workspace(tmp_path / "ws")).run()
    assert run_plots.main([str(res.run_dir)]) == 0
    out = capsys.readouterr().out.split()
    assert sorted(Path(p).name for p in out) == ["amam.png", "ampm.png", "learning_curves.png", "psd.png",
                                                  "time_domain.png"]
    assert run_plots.main([str(tmp_path / "nothing-here")]) == 1
    assert "were not written" in capsys.readouterr().err


def test_every_device_trains_in_a_child(make_window, qtbot):
    """One path on every device (gui/run_control.py ``launch``): a CUDA run goes to a child as a CPU run does (on a
    machine without CUDA its child reports the failure)."""
    w = make_window()
    w.set_dataset(make_demo_dataset(**DEMO), "demo")
    kinds = []
    for device in ("cuda", "auto", "cpu"):
        w.set_form_from_config(_config(device=device, epochs=1))
        with qtbot.waitSignal(w.runEnded, timeout=120_000):
            assert w.start_run()
            kinds.append(type(w.runs.worker))
        qtbot.waitUntil(lambda: w.runs.worker is None, timeout=30_000)
    assert kinds == [RunWorker, RunWorker, RunWorker]
