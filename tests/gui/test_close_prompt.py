"""Closing the window during a run asks first (gui/close_prompt.py), with the real trainer on a tiny demo run:
"Stop and quit" → a cancelled, readable run on disk and a clean exit; "Cancel" → the run goes on; "Quit when it
finishes" → the run goes on and the window closes itself at its end."""
from __future__ import annotations

import pytest

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.gui import close_prompt, jobs
from dpd_desktop.runs import artifacts
from dpd_desktop.runs.record import RunRecord

DEMO = dict(seed=1, n_train=4096, n_val=1024, n_test=1024, nperseg=256)


def _config(epochs: int) -> ExperimentConfig:
    return ExperimentConfig(dataset="demo", epochs=epochs, hidden_size=4, frame_length=40, stride=8, batch_size=16,
                            device="cpu", threads=1)


@pytest.fixture
def answer(monkeypatch):
    """Set the dialog's answer; records the busy lists it was asked with."""
    asked: list[list[str]] = []

    def set_answer(value: str):
        def ask(parent, busy):
            asked.append(list(busy))
            return value

        monkeypatch.setattr(close_prompt, "ask", ask)
        return asked

    return set_answer


def _start(w, qtbot, epochs: int, epochs_done: int = 0):
    assert w.start_run(_config(epochs))
    qtbot.waitUntil(lambda: w.state == "running" and w.session.run_id is not None
                    and w.session.epochs_done >= epochs_done, timeout=60_000)


def test_stop_and_quit_leaves_a_cancelled_readable_run_and_exits_cleanly(make_window, qtbot, answer):
    asked = answer(close_prompt.STOP_AND_QUIT)
    w = make_window(demo_kwargs=DEMO)
    _start(w, qtbot, epochs=500, epochs_done=1)
    run_id = w.session.run_id
    worker = w.runs.worker
    orphans = len(jobs.ORPHANS)
    w.close()
    assert len(asked) == 1 and asked[0][0].startswith(f"the PA run {run_id} (epoch ")
    assert not w.isVisible() and w.runs.worker is None and worker.is_done() and len(jobs.ORPHANS) == orphans
    rec = RunRecord.open(w.workspace.runs_dir / run_id)
    assert rec.state == "cancelled" and rec.status_doc["epochs_completed"] >= 1
    assert len(rec.history()) == rec.status_doc["epochs_completed"]
    _, meta = artifacts.load_checkpoint(rec.best_checkpoint)
    assert meta["epoch"] == rec.best_epoch


def test_cancel_leaves_the_run_going_and_the_window_open(make_window, qtbot, answer):
    asked = answer(close_prompt.CANCEL)
    w = make_window(demo_kwargs=DEMO)
    _start(w, qtbot, epochs=500)
    worker = w.runs.worker
    w.close()
    assert len(asked) == 1 and w.isVisible() and w.state == "running" and w.runs.worker is worker
    assert not worker.is_done() and not w.session.cancel_requested
    with qtbot.waitSignal(w.runEnded, timeout=60_000):
        w.stop_run()
    assert w.state == "cancelled"


def test_quit_when_it_finishes_closes_the_window_at_the_end_of_the_run(make_window, qtbot, answer):
    asked = answer(close_prompt.QUIT_WHEN_DONE)
    w = make_window(demo_kwargs=DEMO)
    _start(w, qtbot, epochs=2)
    run_id = w.session.run_id
    w.close()
    assert len(asked) == 1 and w.isVisible() and w.state == "running"
    assert w.statusBar().currentMessage() == close_prompt.WAITING_MESSAGE
    qtbot.waitUntil(lambda: not w.isVisible(), timeout=120_000)
    assert len(asked) == 1  # the close at the end did not ask again
    assert RunRecord.open(w.workspace.runs_dir / run_id).state == "succeeded"


def test_no_question_when_nothing_runs_and_a_queue_can_add_its_busy_state(make_window, answer):
    asked = answer(close_prompt.CANCEL)
    w = make_window()
    w.session.add_busy_check(lambda: "2 queued runs")
    w.close()
    assert asked == [["2 queued runs"]] and w.isVisible()
    w.session._busy_checks.clear()
    w.close()
    assert asked == [["2 queued runs"]] and not w.isVisible()


def test_the_dialog_offers_the_three_answers(qtbot):
    box, answers = close_prompt.build_dialog(None, ["the PA run 2026-12-01-101500-pa-gru23 (epoch 3 of 150)"])
    qtbot.addWidget(box)
    assert sorted(answers.values()) == sorted([close_prompt.STOP_AND_QUIT, close_prompt.QUIT_WHEN_DONE,
                                              close_prompt.CANCEL])
    assert [b.text() for b in answers] == ["Stop and quit", "Quit when it finishes", "Cancel"]
    assert answers[box.defaultButton()] == close_prompt.CANCEL and answers[box.escapeButton()] == close_prompt.CANCEL
    assert box.text() == "Still running:\n• the PA run 2026-12-01-101500-pa-gru23 (epoch 3 of 150)"


def test_a_running_queue_is_busy_too(make_window, answer):
    """The queue dock adds its busy state: while its runner works, a close asks even between two entries."""
    asked = answer(close_prompt.CANCEL)
    w = make_window()
    assert w.session.busy() == []
    w.queue_panel.worker = object()  # the runner between two entries (no run followed by the window)
    try:
        w.close()
        assert asked == [["the run queue"]] and w.isVisible()
    finally:
        w.queue_panel.worker = None
