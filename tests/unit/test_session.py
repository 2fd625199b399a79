"""The window's session model without Qt: run state transitions, enabled controls, ETA and texts (exact values)."""
from __future__ import annotations

import math
import subprocess
import sys

import pytest

from dpd_desktop.gui.session import (Controls, Session, SessionState, cancelled_message, controls, epoch_pace_s,
                                     finished_message, format_duration, remaining_s)
from dpd_desktop.runs.states import RUN_STATES
from dpd_desktop.runs.events import BatchProgress, EpochEnded, RunCancelled, RunFailed, RunFinished, RunStarted


def _started(epochs=10, batches=100, n_params=1234):
    return RunStarted(run_id="r1", run_dir="/runs/r1", step="pa", config={}, device="cpu", device_name="cpu",
                      fast_path="off: CPU device", batched_loader="on", n_params=n_params, n_train_frames=500,
                      batches_per_epoch=batches, epochs=epochs, dataset_summary={})


def _batch(epoch, batch, elapsed_s, epochs=10, batches=100, eta_s=None):
    return BatchProgress(epoch=epoch, epochs=epochs, batch=batch, batches=batches, elapsed_s=elapsed_s, eta_s=eta_s)


def _epoch(epoch, seconds, lr=2.5e-3, epochs=10):
    return EpochEnded(epoch=epoch, epochs=epochs, row={"EPOCH": epoch, "LR": lr, "VAL_NMSE": -30.0}, is_best=True,
                      best_epoch=epoch, best_value=-30.0, selection_metric="VAL_NMSE", epoch_seconds=seconds,
                      plots=None)


def _finished(run_dir="/runs/r1", wall_s=125.0):
    return RunFinished(run_id="r1", run_dir=run_dir, best_epoch=3, val_metrics={"NMSE": -31.234},
                       test_metrics={"NMSE": -30.5, "ACLR_AVG": -45.678, "EVM": -33.21}, wall_s=wall_s)


def test_session_imports_no_qt():
    code = ("import sys, dpd_desktop.gui.session; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'shiboken6', 'pyqtgraph')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ------------------------------------------------------------------------------------------------------ durations, ETA
@pytest.mark.parametrize("seconds, text", [(0, "0 s"), (42.4, "42 s"), (59.4, "59 s"), (300, "5 min"),
                                           (3599, "60 min"), (4320, "1 h 12 min"), (7200, "2 h 0 min"),
                                           (None, "—"), (math.nan, "—"), (math.inf, "—"), (-1, "—")])
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


def test_eta_first_epoch_extrapolates_the_pace_so_far():
    # 25 of 100 batches in 5 s: 20 s per epoch; 15 s left in this one, 9 more epochs
    assert epoch_pace_s(25, 100, 5.0, None) == 20.0
    assert remaining_s(0, 10, 25, 100, 5.0, None, None) == pytest.approx(15.0 + 9 * 20.0)


def test_eta_later_epochs_use_the_last_epoch_and_the_trainers_eta():
    assert remaining_s(3, 10, 50, 100, 99.0, None, 12.0) == pytest.approx(0.5 * 12.0 + 6 * 12.0)
    assert remaining_s(3, 10, 50, 100, 99.0, 4.0, 12.0) == pytest.approx(4.0 + 6 * 12.0)
    assert remaining_s(9, 10, 100, 100, 99.0, None, 12.0) == 0.0


def test_eta_unknown_without_a_pace():
    assert epoch_pace_s(1, 100, 0.0, None) is None
    assert remaining_s(0, 10, 1, 100, 0.0, None, None) is None
    assert remaining_s(0, 10, 1, 100, None, 3.0, None) is None


# ------------------------------------------------------------------------------------------------------ controls
def test_controls_before_any_run():
    assert controls(SessionState()) == Controls(start=True, stop=False, open_dataset=True, form_editable=True,
                                                step_choice=True, pa_run_choice=False, preview_period=False,
                                                run_dpd=False, run_dpd_saved=True)


@pytest.mark.parametrize("run", ["queued", "running"])
def test_controls_while_live(run):
    c = controls(SessionState(run=run, step="dpd", pa_run_available=True, preview=True, dpd_run_ready=True))
    assert (c.start, c.stop, c.open_dataset, c.form_editable, c.step_choice, c.pa_run_choice, c.preview_period,
            c.run_dpd) == (False, True, False, False, False, False, True, False)
    assert c.run_dpd_saved  # another, saved run can be exported meanwhile
    # "Preview every" stays editable during a run (the trainer's set_preview_every), only while the preview is on
    assert not controls(SessionState(run=run, preview=False)).preview_period


def test_controls_cancel_pending_disables_stop_only():
    c = controls(SessionState(run="running", cancel_requested=True))
    assert not c.stop and not c.start and not c.form_editable


@pytest.mark.parametrize("run, ready, run_dpd", [("succeeded", True, True), ("cancelled", True, True),
                                                 ("failed", True, False), ("interrupted", True, False),
                                                 ("succeeded", False, False)])
def test_controls_run_dpd_after_an_ended_run(run, ready, run_dpd):
    c = controls(SessionState(run=run, dpd_run_ready=ready))
    assert c.start and c.form_editable and c.run_dpd is run_dpd
    assert not controls(SessionState(run=run, dpd_run_ready=ready, exporting=True)).run_dpd


def test_controls_loading_and_exporting_and_step():
    c = controls(SessionState(loading=True))
    assert not c.start and not c.open_dataset and c.form_editable
    assert not controls(SessionState(exporting=True)).run_dpd_saved
    assert not controls(SessionState(step="pa", pa_run_available=True)).pa_run_choice
    assert not controls(SessionState(step="dpd", pa_run_available=False)).pa_run_choice
    assert controls(SessionState(step="dpd", pa_run_available=True)).pa_run_choice
    assert controls(SessionState(preview=True)).preview_period


# ------------------------------------------------------------------------------------------------------ transitions
def test_a_run_from_start_to_success_with_its_texts():
    checked = []
    s = Session(dpd_run_check=lambda d: checked.append(d) or False)
    seen = []
    s.subscribe(lambda sess: seen.append(sess.state))
    assert s.state is None and s.progress_text == "Idle"
    assert s.start(config=None)
    assert s.state == "running" and s.progress_text == "Preparing data and model…" and s.progress == 0.0
    assert not s.start(), "a double start is refused"
    s.on_started(_started())
    assert s.progress_text == "10 epochs (0–9) · 100 batches per epoch · 1,234 parameters"
    assert (s.run_id, s.run_dir, s.epochs) == ("r1", "/runs/r1", 10)
    s.on_batch(_batch(0, 25, 5.0))
    assert s.progress == pytest.approx(0.025)
    assert s.progress_text == "Epoch 0 of 0–9 · batch 25/100 · 3 min left"  # 195 s
    s.on_epoch(_epoch(0, 12.0))
    assert s.progress == pytest.approx(0.1) and s.sec_per_epoch == 12.0 and s.lr == 2.5e-3
    assert s.progress_text == "Epoch 0 of 0–9 done · 12.0 s/epoch · 2 min left · lr 0.0025"  # 108 s
    s.on_batch(_batch(1, 50, 18.0))
    assert s.progress_text == "Epoch 1 of 0–9 · batch 50/100 · 12.0 s/epoch · 2 min left · lr 0.0025"  # 6 + 96 s
    s.on_finished(_finished())
    assert s.state == "succeeded" and s.progress == 1.0
    assert s.progress_text == "Finished · 1 epoch · 2 min"
    assert checked == ["/runs/r1"]
    assert seen[0] == "running" and seen[-1] == "succeeded" and None not in seen
    assert s.on_worker_done() is None  # the outcome had arrived


def test_cancel_is_a_flag_then_the_trainers_word():
    s = Session(dpd_run_check=lambda d: True)
    assert not s.request_cancel(), "nothing to stop"
    s.start()
    s.on_started(_started())
    s.on_batch(_batch(0, 10, 2.0))
    assert s.request_cancel() and s.state == "running" and s.cancel_requested
    assert not s.request_cancel(), "already pending"
    assert s.progress_text == "Epoch 0 of 0–9 · batch 10/100 · 3 min left · stopping after this batch…"
    assert not s.controls().stop
    s.on_cancelled(RunCancelled(run_id="r1", run_dir="/runs/r1", epochs_completed=0, best_epoch=None))
    assert s.state == "cancelled" and not s.cancel_requested
    assert s.progress_text == "Stopped · 0 epochs completed"
    assert s.controls().run_dpd  # the check said DPD run with a checkpoint


def test_failure_and_a_lost_outcome():
    s = Session(dpd_run_check=lambda d: pytest.fail("not asked for a failed run"))
    s.start()
    s.on_failed(RunFailed(run_id=None, run_dir=None, message="boom"))
    assert s.state == "failed" and s.progress_text == "Failed"
    s.start()
    assert s.on_worker_done() == "failed"
    s.start()
    s.request_cancel()
    assert s.on_worker_done() == "cancelled" and s.state == "cancelled"


def test_batch_progress_after_the_end_is_ignored():
    s = Session(dpd_run_check=lambda d: False)
    s.start()
    s.on_finished(_finished(wall_s=42.0))
    s.on_batch(_batch(0, 5, 1.0))
    assert s.progress == 1.0 and s.progress_text == "Finished · 0 epochs · 42 s"


def test_queued_run_starts_is_cancelled_or_fails():
    s = Session(dpd_run_check=lambda d: False)
    assert s.queue("cfg-a") and s.state == "queued" and s.config == "cfg-a"
    assert s.progress_text == "Waiting for the dataset to load…"
    assert s.controls().stop and not s.controls().start
    assert s.start() and s.state == "running" and s.config == "cfg-a"
    assert not s.queue("cfg-b"), "no queueing over a running run"
    s.on_finished(_finished())
    assert s.queue("cfg-b") and s.request_cancel() and s.state == "cancelled"
    assert s.progress_text == "Stopped before it started"
    assert s.queue("cfg-c") and s.fail_queued()
    assert s.state == "failed" and s.progress_text == "Not started: the dataset could not be loaded"
    assert not s.fail_queued()


def test_only_transitions_change_the_run_state():
    s = Session()
    with pytest.raises(ValueError):
        s.update(run="running")
    with pytest.raises(ValueError):
        s.update(cancel_requested=True)
    calls = []
    s.subscribe(lambda sess: calls.append(sess.snapshot))
    s.update(step="dpd", pa_run_available=True)
    s.update(step="dpd", pa_run_available=True)  # no change, no notification
    assert len(calls) == 1 and s.controls().pa_run_choice


def test_every_state_the_session_enters_is_a_core_word():
    s = Session(dpd_run_check=lambda d: False)
    entered = []
    s.subscribe(lambda sess: entered.append(sess.state))
    s.queue()
    s.start()
    s.on_failed(RunFailed(run_id=None, run_dir=None, message="x"))
    s.start()
    s.request_cancel()
    s.on_cancelled(RunCancelled(run_id="r", run_dir="/r", epochs_completed=2, best_epoch=1))
    s.start()
    s.on_finished(_finished())
    assert set(entered) <= set(RUN_STATES) and {"queued", "running", "failed", "cancelled", "succeeded"} <= set(entered)


def test_outcome_messages():
    assert finished_message(_finished()) == ("Run finished in 2 min. Selected epoch 3 · val NMSE -31.23 dB · "
                                             "test NMSE -30.50 dB · test ACLR -45.68 dBc · test EVM -33.21 dB.")
    dpd = RunFinished(run_id="r1", run_dir="/runs/r1", best_epoch=3, val_metrics={}, wall_s=125.0,
                      test_metrics={"ACLR_AVG": -45.678},
                      extra={"rms_out_diff_db": -2.071, "metric_profile": "corrected"})
    assert finished_message(dpd) == ("Run finished in 2 min. Selected epoch 3 · test ACLR -45.68 dBc (output power "
                                     "-2.07 dB with DPD) · metrics: corrected.\nThe DPD changes the output power by "
                                     "-2.07 dB (more than 0.5 dB): part of its ACLR gain may come from a lower drive "
                                     "level.")
    assert cancelled_message(RunCancelled(run_id="r", run_dir="/r", epochs_completed=1, best_epoch=0)) == \
        "Run stopped after 1 completed epoch; the best checkpoint so far (epoch 0) is kept."
    assert cancelled_message(RunCancelled(run_id="r", run_dir="/r", epochs_completed=0, best_epoch=None)) == \
        "Run stopped after 0 completed epochs; no epoch completed, so there is no checkpoint."


def test_every_progress_text_numbers_epochs_as_the_record_does(capsys):
    """history.csv's EPOCH and the selected epoch count from 0: the command line's progress line, the queue's
    line and the window's progress text name the same epoch (was: 1-based beside a 0-based table)."""
    from dpd_desktop.cli.train import ConsoleObserver
    from dpd_desktop.runs.labels import epoch_of
    from dpd_desktop.runs.events import BatchProgress

    assert epoch_of(0, 1) == "0 of 0–0" and epoch_of(2, 4) == "2 of 0–3"
    obs = ConsoleObserver()
    obs.tty = False
    obs(BatchProgress(epoch=3, epochs=4, batch=10, batches=10, elapsed_s=1.0, eta_s=None))
    assert capsys.readouterr().err.startswith("epoch 3 of 0–3 [")
