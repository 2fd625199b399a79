"""A reopened run (runs browser → Open; pytest-qt, offscreen): a DPD run shows the "PA(x) no DPD" curve the live
run showed (from its PA run's results.h5, runs/replay.py ``pa_baseline``), and the reopened run becomes the
window's current run for Run DPD and Resume."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from tiny_runs import DEMO, tiny_config  # tests/tiny_runs.py

from dpd_desktop.data import make_demo_dataset
from dpd_desktop.runs.labels import dataset_label
from dpd_desktop.runs.replay import BASELINE_NAME, load_replay
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.runs.events import EpochEnded, RunFinished
from dpd_desktop.training.trainer import Trainer


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ws")
    ws = Workspace(root)
    ds = make_demo_dataset(**DEMO)
    pa = Trainer(tiny_config(epochs=1), dataset=ds, workspace=ws).run()
    live = []
    dpd = Trainer(tiny_config(step="dpd", pa_run=pa.run_id, epochs=2), dataset=ds, workspace=ws,
                  observers=[lambda ev: isinstance(ev, RunFinished) and live.append(ev)]).run()
    cancelled = Trainer(tiny_config(epochs=3), dataset=ds, workspace=ws)
    cancelled.request_cancel()  # before the first batch: cancelled with no epoch
    res = cancelled.run()
    after = Trainer(tiny_config(epochs=3), dataset=ds, workspace=ws)  # cancelled after its first epoch: last.pt
    after.observers.append(lambda ev: isinstance(ev, EpochEnded) and ev.epoch == 0 and after.request_cancel())
    res_after = after.run()
    assert res_after.state == "cancelled" and len(res_after.history) == 1
    return {"root": root, "pa": pa.run_dir, "dpd": dpd.run_dir, "live": live[0], "cancelled": res.run_dir,
            "cancelled_after_epoch": res_after.run_dir}


def test_replay_of_a_dpd_run_has_the_live_pa_baseline(runs):
    rep = load_replay(runs["dpd"])
    live = runs["live"].plots
    assert BASELINE_NAME in live.psd and BASELINE_NAME in rep.plots.psd
    np.testing.assert_allclose(rep.plots.psd[BASELINE_NAME], live.psd[BASELINE_NAME], rtol=0, atol=1e-4)
    np.testing.assert_allclose(rep.plots.amam[BASELINE_NAME], live.amam[BASELINE_NAME], rtol=0, atol=1e-6)
    assert rep.plots.aclr[BASELINE_NAME] == pytest.approx(live.aclr[BASELINE_NAME], abs=1e-3)
    assert not any("baseline" in n for n in rep.notes), rep.notes


def test_without_its_pa_run_the_baseline_is_left_out_with_a_note(runs, tmp_path):
    copy = tmp_path / "runs" / runs["dpd"].name
    shutil.copytree(runs["dpd"], copy)
    # the recorded PA folder is changed into one that does not exist
    import json

    cfg = json.loads((copy / "config.json").read_text())
    cfg["pa"]["run_dir"] = str(tmp_path / "gone")
    (copy / "config.json").write_text(json.dumps(cfg))
    rep = load_replay(copy)
    assert BASELINE_NAME not in rep.plots.psd
    assert any("baseline is not drawn" in n and "gone" in n for n in rep.notes), rep.notes


def _open(w, qtbot, run_dir):
    b = w.runs_browser
    with qtbot.waitSignal(b.rowsLoaded, timeout=20000):
        b.refresh()
    b.select_ids([run_dir.name])
    with qtbot.waitSignal(b.runOpened, timeout=20000):
        b.open_selected()


def test_an_opened_dpd_run_draws_the_baseline_and_is_current_for_run_dpd(make_window, runs, qtbot, tmp_path):
    w = make_window(ws=Workspace(runs["root"]))
    assert not w.act_run_dpd.isEnabled()
    _open(w, qtbot, runs["dpd"])
    assert BASELINE_NAME in w.psd_panel.curves.items
    x, y = w.psd_panel.curves.items[BASELINE_NAME].getData()
    assert len(y) == len(runs["live"].plots.psd[BASELINE_NAME])
    assert w.session.state == "succeeded" and w.session.run_dir == str(runs["dpd"])
    assert w.act_run_dpd.isEnabled() and w.finished_dpd_run() == str(runs["dpd"])
    assert not w.resume_control.action.isEnabled()  # succeeded: nothing to resume
    out = tmp_path / "u.csv"
    with qtbot.waitSignal(w.dpdExportEnded, timeout=60_000) as blocker:
        assert w.run_dpd_export(out=out)
    assert blocker.args == ["succeeded"] and out.is_file()


def test_an_opened_cancelled_run_can_be_resumed(make_window, runs, qtbot):
    w = make_window(ws=Workspace(runs["root"]))
    _open(w, qtbot, runs["cancelled_after_epoch"])
    assert w.session.state == "cancelled" and w.session.run_dir == str(runs["cancelled_after_epoch"])
    assert w.resume_control.can_resume() and w.resume_control.action.isEnabled()
    assert not w.act_run_dpd.isEnabled()  # a PA run
    # one cancelled before its first epoch has no last.pt: it is shown, Resume is not offered (it would be refused)
    _open(w, qtbot, runs["cancelled"])
    assert w.session.state == "cancelled" and w.session.run_dir == str(runs["cancelled"])
    assert not w.resume_control.can_resume() and not w.resume_control.action.isEnabled()


def test_dataset_label_lives_in_the_core():
    from types import SimpleNamespace as NS

    from dpd_desktop.cli import runs as cli_runs
    from dpd_desktop.gui import runs_browser

    assert cli_runs.dataset_label is dataset_label and runs_browser.dataset_label is dataset_label
    assert dataset_label(NS(dataset_kind="demo", dataset_shown="synthetic demo, seed 2")) == "demo seed 2"
    assert dataset_label(NS(dataset_kind="split-folder", dataset_shown="/d/DPA_160MHz/", dataset_name="x")) == \
        "DPA_160MHz"
    assert dataset_label(NS(dataset_kind="hdf5", dataset_shown="?", dataset_name="n")) == "n"
