"""A run reopened from its folder (issue 28): the title and the status bar describe it (not the run shown before),
its epoch table has each epoch's seconds (from history.csv's TIME: column), and a DPD's output-power caveat is shown
on reopening and stays after Run DPD."""
from __future__ import annotations

import shutil

import h5py
import pytest

from gui_fakes import FakeDataset, fake_factory
from tiny_runs import DEMO, tiny_config  # tests/tiny_runs.py

from dpd_desktop import __version__
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.gui import history
from dpd_desktop.gui.qt_app import APP_NAME
from dpd_desktop.gui.widgets.epoch_table import COLUMNS
from dpd_desktop.runs.artifacts import read_history_csv
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training.trainer import Trainer


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ws")
    ws = Workspace(root)
    ds = make_demo_dataset(**DEMO)
    pa = Trainer(tiny_config(epochs=3), dataset=ds, workspace=ws).run()
    dpd = Trainer(tiny_config(step="dpd", pa_run=pa.run_id, epochs=1), dataset=ds, workspace=ws).run()
    # a copy of the DPD run whose output power changed by 1.39 dB (more than the 0.5 dB of the caveat)
    loud = ws.runs_dir / (dpd.run_dir.name + "-loud")
    shutil.copytree(dpd.run_dir, loud)
    with h5py.File(loud / "results.h5", "a") as f:
        f.attrs["rms_out_diff_db"] = 1.39
    return {"root": root, "pa": pa.run_dir, "dpd": dpd.run_dir, "loud": loud}


def _open(w, qtbot, run_dir):
    b = w.runs_browser
    with qtbot.waitSignal(b.rowsLoaded, timeout=20000):
        b.refresh()
    b.select_ids([run_dir.name])
    with qtbot.waitSignal(b.runOpened, timeout=20000):
        b.open_selected()


def test_title_and_status_bar_describe_the_reopened_run(make_window, runs, qtbot):
    w = make_window(trainer_factory=fake_factory(), ws=Workspace(runs["root"]))
    w.set_dataset(FakeDataset(name="other-ds"), "/data/other-ds")
    cfg = tiny_config(epochs=2, hidden_size=8, dataset="/data/other-ds")
    with qtbot.waitSignal(w.runEnded, timeout=20_000):
        assert w.start_run(cfg)
    assert "other-ds" in w.windowTitle() and "fake-run" in w.run_folder_label.text()
    _open(w, qtbot, runs["pa"])
    rec = RunRecord.open(runs["pa"])
    assert w.windowTitle() == f"{APP_NAME} {__version__} — demo seed 2 · PA · GRU-4 · {rec.run_id}"
    assert w.run_folder_label.toolTip() == str(rec.run_dir) and "fake-run" not in w.run_folder_label.text()
    assert w.device_label.text() == "cpu · kernel reference"
    assert w.fastpath_label.text() == "CUDA graph: off — " + rec.device["fast_path"][4:].strip()
    best = history.fmt(rec.best_value)
    assert w.best_label.text() == f"best val NMSE {best} dB (ep {rec.best_epoch}) · metrics: legacy-2.2.1"
    # a new run takes the title back to the form
    with qtbot.waitSignal(w.runEnded, timeout=20_000):
        assert w.start_run(cfg)
    assert "other-ds" in w.windowTitle() and rec.run_id not in w.windowTitle()


def test_reopened_epochs_show_their_seconds(make_window, runs, qtbot):
    w = make_window(ws=Workspace(runs["root"]))
    _open(w, qtbot, runs["pa"])
    rows = read_history_csv(runs["pa"] / "history.csv")
    minutes = [float(r["TIME:"]) for r in rows]
    want = [60 * (b - a) for a, b in zip([0.0] + minutes, minutes)]
    col = [label for label, _, _ in COLUMNS].index("s")
    shown = [w.epoch_table.item(r, col).text() for r in range(w.epoch_table.rowCount())]
    assert shown == [f"{s:.1f}" for s in want] and all(s > 0 for s in want)


def test_epoch_seconds_from_time_minutes():
    rows = [{"TIME:": 0.5}, {"TIME:": "0.75"}, {"TIME:": ""}, {"TIME:": 1.0}, {"EPOCH": 4}]
    got = history.epoch_seconds(rows)
    assert got[:2] == [30.0, 15.0] and got[3] == 15.0
    assert got[2] != got[2] and got[4] != got[4]  # NaN: no readable time


def test_dpd_output_power_caveat_on_reopen_and_after_run_dpd(make_window, runs, qtbot, tmp_path):
    w = make_window(ws=Workspace(runs["root"]))
    _open(w, qtbot, runs["dpd"])  # a small change: no caveat
    assert "output power" not in w.banner.message
    _open(w, qtbot, runs["loud"])
    caveat = "The DPD changes the output power by +1.39 dB"
    assert caveat in w.banner.message and w.banner.kind == "warning"
    assert "output power with DPD +1.39 dB" in w.psd_panel.aclr_text  # beside the ACLR read-out
    with qtbot.waitSignal(w.dpdExportEnded, timeout=60_000) as blocker:
        assert w.run_dpd_export(out=tmp_path / "u.csv")
    assert blocker.args == ["succeeded"]
    assert "Wrote u = DPD(x)" in w.banner.message and caveat in w.banner.message
    assert "output power with DPD +1.39 dB" in w.psd_panel.aclr_text
    # another dataset: the run and its caveat go
    w.set_dataset(FakeDataset(name="other"), "/data/other")
    assert w.psd_panel.aclr_text == "" and w.session.power_caveat is None
