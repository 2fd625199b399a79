"""The window's job registry: cooperative stop, a bounded total wait at shutdown, orphans kept and named; and the
window's flows that go through it (a queued start, the per-step default hidden size)."""
from __future__ import annotations

import logging
import threading
import time

from PySide6.QtCore import QObject, QThreadPool, Signal

from dpd_desktop.config import ExperimentConfig, default_hidden_size
from dpd_desktop.gui import jobs
from dpd_desktop.gui.jobs import DatasetLoader, JobRegistry, PoolJob

from gui_fakes import fake_factory


class _Signals(QObject):
    ended = Signal(str)


class CooperativeJob(PoolJob):
    """Loops until asked to stop (its check point is each 5 ms step)."""

    name = "cooperative"

    def __init__(self):
        super().__init__()
        self.signals = _Signals()
        self.started = threading.Event()

    def work(self):
        self.started.set()
        while not self.stop_requested:
            time.sleep(0.005)
        self.signals.ended.emit("stopped")


class StubbornJob(PoolJob):
    """Ignores stop requests; ends only when ``release`` is set."""

    name = "stubborn"

    def __init__(self):
        super().__init__()
        self.signals = _Signals()
        self.release = threading.Event()
        self.started = threading.Event()

    def work(self):
        self.started.set()
        self.release.wait(10)


def test_shutdown_stops_cooperative_jobs_and_bounds_the_wait(qtbot, caplog):
    reg = JobRegistry()
    coop, stubborn = reg.add(CooperativeJob()), reg.add(StubbornJob())
    coop.submit()
    stubborn.submit()
    assert coop.started.wait(2) and stubborn.started.wait(2)
    assert len(reg) == 2 and reg.active(StubbornJob) == [stubborn]
    got = []
    stubborn.signals.ended.connect(got.append)
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="dpd_desktop.gui.jobs"):
        left = reg.shutdown(300)
    waited = time.monotonic() - t0
    try:
        assert left == [stubborn]
        assert 0.25 <= waited < 0.3 + 2.0, f"waited {waited:.2f} s for a 300 ms budget"  # slack for a busy machine
        assert coop.is_done() and not stubborn.is_done()
        assert stubborn in jobs.ORPHANS  # kept referenced while it runs
        assert "1 background job(s) still running after 300 ms" in caplog.text and "stubborn" in caplog.text
        assert len(reg) == 0
    finally:
        stubborn.release.set()
        assert stubborn.wait(2000)
        jobs.ORPHANS.remove(stubborn)
    stubborn.signals.ended.emit("late")  # disconnected at shutdown: nothing reaches a closed window
    assert got == []


def test_the_total_wait_is_shared_between_jobs(qtbot):
    reg = JobRegistry()
    pool = QThreadPool()
    pool.setMaxThreadCount(3)
    stubborn = [reg.add(StubbornJob()) for _ in range(3)]
    for j in stubborn:
        j.submit(pool)
    assert all(j.started.wait(2) for j in stubborn)
    t0 = time.monotonic()
    try:
        left = reg.shutdown(1000)
        assert len(left) == 3
        waited = time.monotonic() - t0
        # one shared budget: about 1 s; a budget per job would be 3 s (the slack is for a busy machine)
        assert 0.95 <= waited < 2.0, f"three jobs must not wait 3 × 1000 ms (waited {waited:.2f} s)"
    finally:
        for j in stubborn:
            j.release.set()
            j.wait(2000)
            jobs.ORPHANS.remove(j)
        pool.waitForDone(2000)


def test_a_loader_asked_to_stop_drops_its_result(qtbot, tmp_path):
    bad = tmp_path / "broken.csv"
    bad.write_text("I_in,Q_in,I_out,Q_out\n0.1,0.2,0.3,abc\n")
    loader = DatasetLoader(str(bad))
    got = []
    loader.signals.failed.connect(lambda exc, tb: got.append(exc))
    loader.request_stop()
    loader.submit()
    assert loader.wait(10_000)
    qtbot.wait(50)
    assert got == []
    loader2 = DatasetLoader(str(bad))
    loader2.signals.failed.connect(lambda exc, tb: got.append(exc))
    with qtbot.waitSignal(loader2.signals.failed, timeout=10_000):
        loader2.submit()
    assert len(got) == 1


def test_close_mid_run_leaves_no_job_and_a_bounded_wait(make_window, qtbot):
    from gui_fakes import FakeDataset

    w = make_window(trainer_factory=fake_factory(batches=10_000, batch_delay=0.005))
    w.set_dataset(FakeDataset())
    w.start_run(ExperimentConfig(epochs=50, hidden_size=8, frame_length=50, stride=8, device="cpu"))
    qtbot.waitUntil(lambda: w.progress_label.text().startswith("Epoch 0 of 0–49 · batch"), timeout=5000)
    worker = w.runs.worker
    # the run's worker; the start-up's PyTorch preload may still be running beside it on a busy machine
    names = sorted(getattr(j, "name", type(j).__name__) for j in w.jobs.active())
    assert worker in w.jobs.active() and set(names) <= {"training run", "PyTorch preload"}, names
    assert w.shutdown(3000)
    assert len(w.jobs) == 0 and w.runs.worker is None and worker.is_done()
    assert worker not in jobs.ORPHANS


# ------------------------------------------------------------------------------------------------------ window flows
def test_step_switch_shows_that_steps_default_hidden_size_unless_edited(make_window):
    w = make_window()
    assert w.form.hidden_size.value() == default_hidden_size("pa") == 23
    w.step_dpd.setChecked(True)
    assert w.form.hidden_size.value() == default_hidden_size("dpd") == 15
    assert w.config_from_form(validate=False).hidden_size == 15
    w.step_pa.setChecked(True)
    assert w.form.hidden_size.value() == 23
    w.form.hidden_size.setValue(40)  # the user's choice stays
    w.step_dpd.setChecked(True)
    assert w.form.hidden_size.value() == 40
    # a config's own hidden size wins over the step default
    w.set_form_from_config(ExperimentConfig(step="pa", hidden_size=23))
    w.set_form_from_config(ExperimentConfig(step="dpd", hidden_size=23, pa_run="some-pa"))
    assert w.form.hidden_size.value() == 23 and w.step_dpd.isChecked()


def test_a_start_waits_for_its_dataset_as_queued(make_window, qtbot):
    factory = fake_factory()
    w = make_window(trainer_factory=factory, demo_kwargs=dict(n_train=2048, n_val=2048, n_test=2048))
    states = []
    w.stateChanged.connect(states.append)
    with qtbot.waitSignal(w.runEnded, timeout=60_000) as blocker:
        assert w.start_run(ExperimentConfig(dataset="demo", epochs=1, hidden_size=8, frame_length=50, stride=8,
                                            device="cpu"))
        assert w.state == "queued" and w.progress_label.text() == "Waiting for the dataset to load…"
        assert not w.act_start.isEnabled() and w.act_stop.isEnabled() and not w.act_demo.isEnabled()
    assert blocker.args == ["succeeded"]
    assert states == ["queued", "running", "succeeded"]
    assert factory.created and w.dataset is not None


def test_stop_while_queued_cancels_before_the_start(make_window, qtbot):
    factory = fake_factory()
    w = make_window(trainer_factory=factory, demo_kwargs=dict(n_train=2048, n_val=2048, n_test=2048))
    assert w.start_run(ExperimentConfig(dataset="demo", epochs=1, hidden_size=8, frame_length=50, stride=8,
                                        device="cpu"))
    with qtbot.waitSignal(w.runEnded, timeout=2000) as blocker:
        w.stop_run()
    assert blocker.args == ["cancelled"] and w.state == "cancelled"
    qtbot.waitUntil(lambda: w.dataset is not None, timeout=60_000)
    qtbot.wait(100)
    assert factory.created == [] and w.state == "cancelled" and w.act_start.isEnabled()
