"""The window's Resume action (pytest-qt, offscreen): cancel a tiny run, press Resume, the run ends succeeded in the
same folder with the history of an uninterrupted run."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from PySide6.QtWidgets import QToolBar

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.runs.artifacts import read_history_csv
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training.trainer import Trainer


def test_cancel_then_resume_from_the_window(make_window, qtbot, workspace, tmp_path):
    ds = make_demo_dataset(seed=2, n_train=4000, n_val=4096, n_test=4096)
    cfg = ExperimentConfig(epochs=4, hidden_size=6, frame_length=40, stride=4, batch_size=32, device="cpu",
                           lr=0.5, lr_end=1e-3, patience=0)
    w = make_window()
    w.set_dataset(ds, "demo")
    w.set_form_from_config(cfg)
    assert not w.resume_control.action.isEnabled()  # no run yet
    w.start_run()
    qtbot.waitUntil(lambda: w.epoch_table.rowCount() >= 1, timeout=60_000)
    with qtbot.waitSignal(w.runEnded, timeout=30_000) as blocker:
        w.stop_run()
    assert blocker.args == ["cancelled"]
    run_dir = w.session.run_dir
    done = len(read_history_csv(f"{run_dir}/history.csv"))
    assert 1 <= done < 4 and w.resume_control.action.isEnabled()
    bar = w.findChild(QToolBar, "main_toolbar").actions()
    assert bar.index(w.resume_control.action) == bar.index(w.act_stop) + 1
    with qtbot.waitSignal(w.runEnded, timeout=120_000) as blocker:
        w.resume_control.action.trigger()
        assert not w.resume_control.action.isEnabled() and w.state == "running"
    assert blocker.args == ["succeeded"], w.banner.message + "\n" + w.banner.detail.toPlainText()
    assert w.session.run_dir == run_dir and not w.resume_control.action.isEnabled()
    assert w.epoch_table.rowCount() == 4  # the epochs before the resume are shown too
    # the same history as an uninterrupted run of the same configuration
    ref = Trainer(dataclasses.replace(w.session.config), dataset=ds, workspace=Workspace(tmp_path / "ref")).run()
    assert ref.state == "succeeded"
    got, want = read_history_csv(f"{run_dir}/history.csv"), read_history_csv(ref.run_dir / "history.csv")
    for row in got + want:
        row.pop("TIME:")
    assert got == want and len(got) == 4
    assert f"resumed from epoch {done - 1} (last.pt)" in Path(run_dir, "log.txt").read_text()


def test_resume_is_not_offered_for_a_run_stopped_before_its_first_epoch(make_window, qtbot):
    """Such a run has no last.pt: Resume would only fail ("has no last.pt") and show the untouched run as failed."""
    ds = make_demo_dataset(seed=2, n_train=40_000, n_val=4096, n_test=4096)
    cfg = ExperimentConfig(epochs=4, hidden_size=6, frame_length=40, stride=1, batch_size=32, device="cpu")
    w = make_window()
    w.set_dataset(ds, "demo")
    w.set_form_from_config(cfg)
    w.start_run()
    qtbot.waitUntil(lambda: w.state == "running" and w.session.run_dir is not None, timeout=60_000)
    with qtbot.waitSignal(w.runEnded, timeout=60_000) as blocker:
        w.stop_run()
    assert blocker.args == ["cancelled"] and w.state == "cancelled"
    assert not Path(w.session.run_dir, "last.pt").exists()
    assert not w.resume_control.action.isEnabled() and w.resume_control.resume() is False
    assert w.state == "cancelled"
