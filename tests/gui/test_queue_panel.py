"""The window's queue panel (gui/queue_panel.py, gui/worker.py QueueWorker): entries from the form, run in child processes
in order, the plots following the running entry; a segfaulting entry fails with the signal named, the next one
succeeds, the window stays."""
from __future__ import annotations

from dataclasses import replace

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.lab.queue import RunQueue
from dpd_desktop.runs.record import RunRecord

TINY = ExperimentConfig(step="pa", dataset="demo", hidden_size=4, frame_length=50, epochs=2, max_train_samples=200,
                        device="cpu", threads=1)


def _queue_two(window, qtbot):
    window.data.ref = "demo"  # the form's dataset: the demo (as after File → Demo data)
    window.set_form_from_config(TINY)
    panel = window.queue_panel
    first = panel.add_current_form()
    window.set_form_from_config(replace(TINY, seed=7, hidden_size=5))
    second = panel.add_current_form()
    assert (first, second) == (1, 2)
    assert panel.states() == [(1, "queued"), (2, "queued")]
    return panel


def _run(window, panel, qtbot):
    ended = []
    window.runEnded.connect(ended.append)
    assert panel.run_queue()
    assert not panel.btn_run.isEnabled() and panel.btn_stop.isEnabled()
    qtbot.waitUntil(lambda: panel.worker is None, timeout=240_000)
    return ended


def test_two_entries_run_in_order_and_the_panel_shows_their_states(make_window, qtbot, workspace):
    w = make_window()
    panel = _queue_two(w, qtbot)
    started = []
    w.stateChanged.connect(started.append)
    ended = _run(w, panel, qtbot)
    assert panel.ended == [(1, "succeeded"), (2, "succeeded")]
    assert ended == ["succeeded", "succeeded"]
    assert panel.states() == [(1, "succeeded"), (2, "succeeded")]
    with RunQueue(workspace.root) as q:
        runs = [q.get(1).run_id, q.get(2).run_id]
    recs = [RunRecord.open(workspace.resolve(r)) for r in runs]
    assert [(r.state, r.hidden_size, r.config.seed) for r in recs] == [("succeeded", 4, 0), ("succeeded", 5, 7)]
    # the window followed the second run last: its epoch table, its run folder, its final state
    assert w.epoch_table.rowCount() == 2
    assert w.state == "succeeded" and w.session.run_dir == str(recs[1].run_dir)
    assert panel.table.item(1, 4).text() == runs[1]
    assert w.runs.worker is None and len(w.jobs) == 0
    assert w.act_start.isEnabled()


def test_segfaulting_entry_fails_with_the_signal_and_the_next_succeeds(make_window, qtbot, workspace, monkeypatch,
                                                                     tmp_path):
    from child_faults import inject_child_faults  # tests/child_faults.py

    inject_child_faults(monkeypatch, "1:segfault@epoch:0")
    w = make_window()
    panel = _queue_two(w, qtbot)
    ended = _run(w, panel, qtbot)
    assert panel.ended == [(1, "failed"), (2, "succeeded")]
    assert ended == ["failed", "succeeded"]
    assert panel.states() == [(1, "failed"), (2, "succeeded")]
    assert panel.table.item(0, 5).text() == "process ended by signal SIGSEGV"
    with RunQueue(workspace.root) as q:
        first = RunRecord.open(workspace.resolve(q.get(1).run_id))
    assert first.state == "failed" and first.status_doc["message"] == "process ended by signal SIGSEGV"
    assert first.status_doc["epochs_completed"] == 1
    assert w.isVisible() and w.state == "succeeded"  # the window is alive and followed the next entry
    from dpd_desktop.gui.screenshot import render_main_window

    out = render_main_window(tmp_path / "queue-panel.png", window=w)
    assert out.stat().st_size > 10_000


def test_move_and_cancel_buttons_and_entries_added_elsewhere(make_window, qtbot, workspace):
    w = make_window()
    assert w.queue_panel.states() == [] and not (workspace.root / "queue.sqlite").exists()  # nothing until used
    panel = _queue_two(w, qtbot)
    with RunQueue(workspace.root) as q:  # the command line adds one while the window is open
        q.add(replace(TINY, seed=9))
    panel.refresh()
    assert [i for i, _ in panel.states()] == [1, 2, 3]
    panel.table.selectRow(2)
    assert panel.btn_up.isEnabled() and panel.btn_cancel.isEnabled()
    panel.btn_up.click()
    assert [i for i, _ in panel.states()] == [1, 3, 2]
    assert panel.selected_entry() == 3  # the moved entry stays selected
    panel.btn_up.click()
    panel.btn_down.click()
    panel.btn_down.click()
    assert [i for i, _ in panel.states()] == [1, 2, 3]
    panel.btn_cancel.click()
    assert panel.states() == [(1, "queued"), (2, "queued"), (3, "cancelled")]
    assert not panel.btn_cancel.isEnabled() and not panel.btn_up.isEnabled()
    assert panel.table.item(2, 5).text() == "cancelled before it started"
    w.step_dpd.setChecked(True)  # a DPD step without a PA run is refused, nothing queued
    assert panel.add_current_form() is None
    assert panel.status.text() == ("Not queued: PA run: a DPD run needs the PA run (id or folder) whose model it "
                                   "trains through")
    assert len(panel.states()) == 3


def test_closing_the_window_stops_the_queue_and_its_running_entry(make_window, qtbot, workspace):
    w = make_window()
    w.data.ref = "demo"
    w.set_form_from_config(replace(TINY, epochs=500))
    panel = w.queue_panel
    panel.add_current_form(), panel.add_current_form()
    with qtbot.waitSignal(w.epoch_table.model().rowsInserted, timeout=120_000):
        assert panel.run_queue()
    w.close()
    assert w.runs.worker is None and len(w.jobs) == 0  # the queue's thread ended within the close's wait
    with RunQueue(workspace.root) as q:
        first, second = q.entries()
        rec = RunRecord.open(workspace.resolve(first.run_id))
    assert (first.state, second.state) == ("cancelled", "queued")
    assert rec.state == "cancelled" and 1 <= rec.status_doc["epochs_completed"] < 500


def test_a_grouped_entry_shows_its_group_and_its_members(make_window, workspace):
    with RunQueue(workspace.root) as q:
        q.add(replace(TINY, seed=1), group="2026-12-01-120000-s#3")
        q.add(TINY)
        q.add(replace(TINY, seed=2), group="2026-12-01-120000-s#3")
    w = make_window()
    panel = w.queue_panel
    panel.refresh()
    texts = [panel.table.item(r, 2).text() for r in range(3)]
    words = "sweep 2026-12-01-120000-s group 3"  # the sweep named: every sweep numbers its groups from 0
    assert texts == [f"PA GRU-{TINY.hidden_size} demo · {words}", f"PA GRU-{TINY.hidden_size} demo",
                     f"PA GRU-{TINY.hidden_size} demo · {words}"]
    assert panel.table.item(0, 2).toolTip() == ("group 2026-12-01-120000-s#3: entries #1, #3 train together in one "
                                                "process")
    assert panel.table.item(1, 2).toolTip() == ""
