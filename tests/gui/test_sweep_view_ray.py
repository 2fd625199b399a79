"""The Sweep view's Ray path (gui/sweep_ray.py, gui/sweep_view.py) with a fake helper client: Resume with the Ray bar
on sends the sweep's trials to the helper at the field's address, the running trial's row shows its epoch and
best-so-far metrics from the helper's events, sweep.json records the address (and the view shows it again), and a
refused cluster is shown as a message under the bar; the override only through its own, warned checkbox."""
from __future__ import annotations

import threading

import pytest

from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.sweep.executor import TrialEnd
from dpd_desktop.sweep.ray_helper import RayHelperClient
from dpd_desktop.sweep.ray_security import RISK
from dpd_desktop.sweep.runner import create_sweep
from dpd_desktop.sweep.spec import parse_spec
from dpd_desktop.sweep.store import SweepStore

TINY = {"dataset": "demo", "frame_length": 50, "epochs": 3, "max_train_samples": 300, "device": "cpu", "threads": 1}


class FakeHelper:
    """RayHelperClient's surface: ``script`` yields dicts and ('done', n, state, message); ('wait', event) blocks."""

    def __init__(self, trials, script, error=None, refused=False, rc=0):
        self.trials = {t.number: t for t in trials}
        self.script, self.error, self.refused, self.rc = script, error, refused, rc
        self.sent: list = []

    def __iter__(self):
        for item in self.script:
            if isinstance(item, tuple) and item[0] == "wait":
                assert item[1].wait(60)
            elif isinstance(item, tuple):
                _, n, state, msg = item
                yield TrialEnd(self.trials[n], state, None, msg)
            else:
                yield item

    def stop(self):
        self.sent.append("stop")

    def stop_trial(self, number, reason):
        self.sent.append(("stop_trial", number, reason))

    def close(self):
        return self.rc


@pytest.fixture
def fake_start(monkeypatch):
    calls: list = []
    box: dict = {}

    def start(cls, address, trials, workspace, **kw):
        calls.append((address, [t.number for t in trials], kw))
        box["client"] = FakeHelper(trials, *box["script"](trials))
        return box["client"]

    monkeypatch.setattr(RayHelperClient, "start", classmethod(start))
    return calls, box


def _sweep(ws, seeds):
    return create_sweep(ws, parse_spec({"sweep": {"name": "ray"}, "base": TINY, "space": {"seed": seeds}}, "t"))


def test_resume_on_a_cluster_shows_live_rows_from_the_helper(make_window, tmp_path, qtbot, fake_start):
    calls, box = fake_start
    ws = Workspace(tmp_path / "ws")
    info = _sweep(ws, [0, 1])
    gate = threading.Event()
    row = {"VAL_NMSE": -12.345, "VAL_ACLR_AVG": -30.5, "TEST_NMSE": -11.0, "TEST_ACLR_AVG": -29.25, "N_PARAM": 106}
    worse = {**row, "VAL_NMSE": -10.0}
    box["script"] = lambda trials: ([
        {"event": "cluster", "address": "127.0.0.1:6379", "dashboard_url": "127.0.0.1:8265", "folder": "/tmp/x"},
        {"event": "started", "trial": 0, "run_id": "r0"},
        {"event": "epoch", "trial": 0, "epoch": 0, "epochs": 3, "is_best": True, "row": row},
        {"event": "epoch", "trial": 0, "epoch": 1, "epochs": 3, "is_best": False, "row": worse},
        ("wait", gate), ("done", 0, "succeeded", ""), ("done", 1, "succeeded", "")],)
    w = make_window(ws=ws)
    v = w.sweep_view
    with qtbot.waitSignal(v.tableLoaded, timeout=30000):
        v.refresh(info.id)
    assert not v.ray_bar.enabled_box.isChecked() and not v.ray_bar.address_edit.isEnabled()
    v.ray_bar.enabled_box.setChecked(True)
    assert v.ray_bar.address_edit.text() == "local" and v.ray_bar.address_edit.isEnabled()
    worker = v.resume_sweep()
    assert worker is not None and worker.ray_address == "local"
    cols = v.columns()

    def running_row():
        cells = v.cell_texts()
        return dict(zip(cols, cells[0])) if cells else {}

    qtbot.waitUntil(lambda: running_row().get("state") == "running (epoch 1 of 0–2)", timeout=30000)
    got = running_row()  # the best epoch's metrics (epoch 0), not the last one's
    assert (got["val NMSE [dB]"], got["val ACLR [dBc]"], got["test NMSE [dB]"], got["test ACLR [dBc]"],
            got["params"]) == ("-12.35", "-30.50", "-11.00", "-29.25", "106")
    assert dict(zip(cols, v.cell_texts()[1]))["state"] == "queued"
    assert v.ray_bar.message.text().startswith("Local Ray cluster at 127.0.0.1:6379 (dashboard 127.0.0.1:8265")
    running = SweepStore(ws.root).open(info.id)
    assert running.doc["ray"] == {"address": "local"}
    assert running.trials[0]["state"] == "running" and running.trials[0]["run_dir"] == str(ws.runs_dir / "r0")
    gate.set()
    qtbot.waitUntil(lambda: v.worker is None, timeout=30000)
    (address, numbers, kw), = calls
    assert (address, numbers, kw["allow_unauthenticated"]) == ("local", [0, 1], False)
    final = SweepStore(ws.root).open(info.id)
    assert final.state == "succeeded" and [t["state"] for t in final.trials] == ["succeeded"] * 2
    qtbot.waitUntil(lambda: [c[1] for c in v.cell_texts()] == ["succeeded", "succeeded"], timeout=30000)
    # another window reads where the sweep ran: its Ray bar is on, at that address
    w2 = make_window(ws=ws)
    with qtbot.waitSignal(w2.sweep_view.tableLoaded, timeout=30000):
        w2.sweep_view.refresh(info.id)
    assert w2.sweep_view.ray_bar.enabled_box.isChecked() and w2.sweep_view.ray_bar.address() == "local"


def test_a_refused_cluster_is_a_message_and_the_override_is_warned(make_window, tmp_path, qtbot, fake_start):
    calls, box = fake_start
    ws = Workspace(tmp_path / "ws")
    info = _sweep(ws, [0])
    refusal = f"refusing the Ray cluster at 203.0.113.7:6379: no token authentication; {RISK}"
    box["script"] = lambda trials: ([{"event": "error", "kind": "refused", "message": refusal}], refusal, True, 2)
    w = make_window(ws=ws)
    v = w.sweep_view
    with qtbot.waitSignal(v.tableLoaded, timeout=30000):
        v.refresh(info.id)
    bar = v.ray_bar
    bar.enabled_box.setChecked(True)
    bar.address_edit.setText("203.0.113.7:6379")
    assert not bar.message.isVisibleTo(v)
    v.resume_sweep()
    qtbot.waitUntil(lambda: v.worker is None, timeout=30000)
    assert bar.message.isVisibleTo(v) and bar.message.text().startswith("The Ray cluster was refused")
    assert refusal in bar.message.text() and "c0392b" in bar.message.styleSheet()
    assert calls[-1][0] == "203.0.113.7:6379" and calls[-1][2]["allow_unauthenticated"] is False
    after = SweepStore(ws.root).open(info.id)
    assert after.state == "failed" and [t["state"] for t in after.trials] == ["queued"]  # resumable, nothing ran
    # the override: its own checkbox, whose warning shows while it is ticked, and reaches the helper
    bar.override_box.setChecked(True)
    assert bar.message.text().startswith("WARNING: token authentication is not required") and RISK in \
        bar.message.text()
    box["script"] = lambda trials: ([("done", 0, "succeeded", "")],)
    qtbot.waitUntil(lambda: v.resume_button.isEnabled(), timeout=30000)
    v.resume_sweep()
    qtbot.waitUntil(lambda: v.worker is None, timeout=30000)
    assert calls[-1][2]["allow_unauthenticated"] is True
    bar.override_box.setChecked(False)
    assert not bar.message.isVisibleTo(v)


def test_a_helper_that_cannot_run_the_sweep_is_a_message(make_window, tmp_path, qtbot, fake_start):
    calls, box = fake_start
    ws = Workspace(tmp_path / "ws")
    info = _sweep(ws, [0])
    why = "RayUnavailable: cannot connect to the Ray cluster at 127.0.0.1:9: no GCS"
    box["script"] = lambda trials: ([{"event": "error", "kind": "failed", "message": why}], why, False, 1)
    w = make_window(ws=ws)
    v = w.sweep_view
    with qtbot.waitSignal(v.tableLoaded, timeout=30000):
        v.refresh(info.id)
    v.ray_bar.enabled_box.setChecked(True)
    v.ray_bar.address_edit.setText("127.0.0.1:9")
    v.resume_sweep()
    qtbot.waitUntil(lambda: v.worker is None, timeout=30000)
    assert v.ray_bar.message.text() == f"the Ray sweep failed: {why}" and v.ray_bar.message.isVisibleTo(v)
    after = SweepStore(ws.root).open(info.id)
    assert after.state == "failed" and after.trials[0]["state"] == "failed"
    assert why in after.trials[0]["message"] and after.doc["ray"] == {"address": "127.0.0.1:9"}
