"""The window's retention prompt (gui/retention_prompt.py, pytest-qt offscreen): at start-up it lists exactly the
runs the core says are due, before anything goes; "Remove now" removes exactly those, "Keep them (pin)" keeps
them, "Not now" leaves everything."""
from __future__ import annotations


import pytest

from dpd_desktop.gui.panels.base import save_png_atomic
from dpd_desktop.runs import retention
from dpd_desktop.runs.index import RunIndex
from dpd_desktop.runs.record import RunRecord

from run_folders import make_run  # tests/run_folders.py


@pytest.fixture
def populated(workspace):
    """Three due scratch runs, one young, one kept, one live, and the PA of a kept DPD run."""
    due = [make_run(workspace, "2026-01-01-000001-pa-gru4", payload=40_000),
           make_run(workspace, "2026-01-01-000002-pa-gru8", state="failed", ended_h=30),
           make_run(workspace, "2026-01-01-000003-dpd-gru3", step="dpd", state="cancelled", ended_h=200)]
    base = make_run(workspace, "2026-01-01-000004-pa-base")
    stay = [make_run(workspace, "2026-01-01-000005-pa-young", ended_h=3), base,
            make_run(workspace, "2026-01-01-000006-pa-kept", pinned=True),
            make_run(workspace, "2026-01-01-000007-pa-live", state="running"),
            make_run(workspace, "2026-01-01-000008-dpd-kept", step="dpd", pa=base, pinned=True)]
    return workspace, due, stay


def test_the_prompt_lists_what_the_core_says_is_due_and_removes_exactly_those(make_window, qtbot, populated,
                                                                              tmp_path):
    ws, due, stay = populated
    expected = retention.plan_retention(ws)
    assert [i.run_id for i in expected.due] == [d.name for d in due]
    w = make_window()
    prompt = w.retention_prompt
    assert all(d.is_dir() for d in due)  # nothing goes before it is shown and chosen
    qtbot.waitUntil(lambda: prompt.plan is not None, timeout=10000)
    assert prompt.isVisible()
    assert prompt.shown_run_ids == [i.run_id for i in expected.due]
    rows = [[prompt.list.topLevelItem(r).text(c) for c in range(4)] for r in range(prompt.list.topLevelItemCount())]
    assert rows == [[i.run_id, i.state, f"{retention.format_age(i.age_s)} ago", retention.format_size(i.size_bytes)]
                    for i in expected.due]
    assert "3 scratch runs ended more than 24 h ago" in prompt.text.text()
    assert all(d.is_dir() for d in due)
    w.resize(1400, 900)
    qtbot.wait(50)
    save_png_atomic(w.grab(), tmp_path / "retention-prompt.png")
    assert (tmp_path / "retention-prompt.png").stat().st_size > 10_000

    with qtbot.waitSignal(prompt.finished, timeout=10000) as blocker:
        prompt.remove_button.click()
    assert blocker.args == ["removed"]
    assert not prompt.isVisible()
    assert [d.exists() for d in due] == [False, False, False]
    assert all(s.is_dir() for s in stay)
    assert sorted(prompt.report.removed) == [d.name for d in due]
    with RunIndex.open(ws, sync=False) as idx:  # the index was updated by the removal
        assert sorted(r.run_id for r in idx.runs()) == sorted(s.name for s in stay)
    assert "Removed 3 scratch run(s)" in w.statusBar().currentMessage()


def test_keep_them_pins_the_runs_shown_and_removes_nothing(make_window, qtbot, populated):
    ws, due, stay = populated
    w = make_window()
    prompt = w.retention_prompt
    qtbot.waitUntil(lambda: prompt.plan is not None, timeout=10000)
    with qtbot.waitSignal(prompt.finished, timeout=10000) as blocker:
        prompt.pin_button.click()
    assert blocker.args == ["pinned"]
    assert [RunRecord.read(d).pinned for d in due] == [True, True, True]
    assert retention.plan_retention(ws).due == ()
    assert all(p.is_dir() for p in due + stay)


def test_not_now_hides_the_prompt_and_changes_nothing(make_window, qtbot, populated):
    ws, due, stay = populated
    w = make_window()
    prompt = w.retention_prompt
    qtbot.waitUntil(lambda: prompt.plan is not None, timeout=10000)
    with qtbot.waitSignal(prompt.finished, timeout=2000) as blocker:
        prompt.later_button.click()
    assert blocker.args == ["not now"] and not prompt.isVisible()
    assert all(p.is_dir() for p in due + stay)
    assert [RunRecord.read(d).pinned for d in due] == [False, False, False]


def test_no_prompt_when_nothing_is_due(make_window, qtbot, workspace):
    make_run(workspace, "2026-01-01-000001-pa-young", ended_h=1)
    w = make_window()
    qtbot.waitUntil(lambda: w.retention_prompt.plan is not None, timeout=10000)
    assert w.retention_prompt.plan.due == () and not w.retention_prompt.isVisible()


def test_no_scan_for_a_workspace_without_runs(make_window, workspace):
    w = make_window()
    assert w.retention_prompt is not None and w.retention_prompt.plan is None and not w.retention_prompt.isVisible()
    assert not workspace.runs_dir.exists()


def test_run_menu_keeps_the_run_that_ended(make_window, qtbot, workspace):
    run = make_run(workspace, "2026-01-01-000001-pa-gru4", ended_h=0.1)
    w = make_window()
    act = w.retention_prompt.pin_action
    assert act in w.menuBar().actions()[1].menu().actions() and not act.isEnabled()
    w.session.run_dir = str(run)  # what the session holds once a run has ended
    w.runEnded.emit("succeeded")
    assert act.isEnabled() and not act.isChecked()
    for on in (True, False):
        act.trigger()
        assert act.isChecked() is on
        qtbot.waitUntil(lambda: RunRecord.read(run).pinned is on, timeout=10000)
        qtbot.waitUntil(lambda: not w.jobs.active(), timeout=10000)
    with RunIndex.open(workspace) as idx:
        assert idx.get(run.name).pinned is False
