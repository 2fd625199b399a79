"""Main window tests (pytest-qt, offscreen). Fakes stand in for the trainer where the real one is not needed."""
from __future__ import annotations

import dataclasses
import importlib.util
import threading
import time

import numpy as np
import pytest

from PySide6.QtCore import QSettings, Qt

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.gui.main_window import PREVIEW_WARNING, MainWindow
from dpd_desktop.gui.panels import AMAMPanel, AMPMPanel, LearningPanel, PSDPanel, TimeDomainPanel

from gui_fakes import FakeDataset, FakeRunRecord, FakeWorkspace, fake_factory, make_plotdata, make_row
from datasets_dir import DATASETS  # tests/datasets_dir.py


def _real_trainer_available() -> bool:
    try:
        return importlib.util.find_spec("dpd_desktop.training.trainer") is not None and \
            importlib.util.find_spec("dpd_desktop.data") is not None
    except Exception:  # noqa: BLE001
        return False


needs_trainer = pytest.mark.skipif(not _real_trainer_available(), reason="dpd_desktop.training.trainer not there yet")


# ------------------------------------------------------------------------------------------------------ controls
def test_preview_warning_only_while_ticked(make_window):
    w = make_window()
    assert w.preview_warning.text() == PREVIEW_WARNING
    assert not w.preview_check.isChecked()
    assert not w.preview_warning.isVisible()
    w.preview_check.setChecked(True)
    assert w.preview_warning.isVisible()
    assert w.form.preview_every.isEnabled()
    w.preview_check.setChecked(False)
    assert not w.preview_warning.isVisible()
    assert not w.form.preview_every.isEnabled()


def test_idle_state_controls(make_window):
    w = make_window()
    assert w.state is None and w.session.state is None
    assert w.act_start.isEnabled() and not w.act_stop.isEnabled()
    assert w.act_open.isEnabled() and w.act_demo.isEnabled()
    assert not w.act_run_dpd.isEnabled(), "no ended DPD run yet"
    assert not w.pa_run_combo.isEnabled(), "PA step: no PA run to choose"
    assert w.form.model_box.isEnabled() and w.form.training_box.isEnabled()
    assert w.progress_label.text() == "Idle" and w.progress_bar.value() == 0
    assert w.act_start.shortcut().toString() == "Ctrl+R"
    assert w.act_stop.shortcut().toString() == "Esc"
    assert w.act_export.shortcut().toString() == "Ctrl+E"
    assert w.act_open.shortcut().toString() == "Ctrl+O"
    labels = [w.form.backbone.itemText(i) for i in range(w.form.backbone.count())]
    assert labels == ["GRU", "DGRU", "LSTM", "TRes-GRU", "RVTDCNN", "DeltaGRU", "TRes-DeltaGRU", "GRU-amp", "GRU-gain",
                      "GRU-gain-3", "GRU-gain-3p", "GRU-gain-5", "TCN",
                      "MP", "GMP"]  # MP/GMP: least squares (issue 28)


def test_form_config_round_trip(make_window):
    w = make_window()
    cfg = ExperimentConfig(backbone="lstm", hidden_size=17, num_layers=2, epochs=7, batch_size=32, lr=1e-3,
                           lr_end=1e-5, patience=3, frame_length=100, stride=4, seed=3, device="cpu",
                           preview_every=50, weight_decay=0.02, name="round-trip", extra={"note": "kept"})
    w.set_form_from_config(cfg)
    assert w.preview_check.isChecked() and w.preview_warning.isVisible()
    assert w.config_from_form() == cfg
    # defaults too
    d = ExperimentConfig()
    w.set_form_from_config(d)
    assert w.config_from_form() == d
    assert not w.preview_warning.isVisible()
    # an edit in the form shows up in the config
    w.form.hidden_size.setValue(40)
    w.form.backbone.setCurrentIndex(w.form.backbone.findData("tres_gru"))
    got = w.config_from_form()
    assert (got.hidden_size, got.backbone) == (40, "tres_gru")
    assert "TRes-GRU-40" in w.windowTitle()


def test_training_options_fold_round_trip_and_name_their_errors(make_window):
    """Issue 24's schedule, augmentation and loss terms are on the form, folded; folded, the button names the ones
    set; a run's options come back from the form unchanged; an error in one unfolds it and marks the field."""
    w = make_window(trainer_factory=fake_factory())
    opts = w.form.options
    assert not opts.body.isVisible() and opts.title == "Training options"
    cfg = ExperimentConfig(epochs=40, lr_schedule="cosine", lr_end=1e-5, warmup_epochs=5, augment="phase", oob_weight=3.0,
                           oob_side="worse", power_weight=1e-4)
    w.set_form_from_config(cfg)
    assert w.config_from_form() == cfg
    assert opts.title == "Training options: cosine, final LR 1e-05, warm-up 5, phase ramp, out-of-band 3, worse side, power 0.0001"
    assert opts.title in opts.toggle.toolTip()
    shown = opts.toggle.text()  # elided to the form's width, never widening it
    assert shown == opts.title or (shown.endswith("…") and opts.title.startswith(shown[:-1])), shown
    assert opts.oob_weight.text() == "3" and opts.power_weight.text() == "0.0001" and opts.oob_side.isEnabled()
    opts.oob_weight.setValue(0.0)
    assert opts.oob_weight.text() == "off" and w.config_from_form().oob_weight == 0.0
    assert not opts.oob_side.isEnabled()  # the side of a term that is off
    assert "out-of-band" not in opts.title
    opts.oob_weight.stepBy(1)
    assert opts.oob_weight.value() == 1.0  # off → the first useful weight
    opts.oob_weight.stepBy(-1)
    assert opts.oob_weight.value() == 0.0
    opts.set_open(False)
    w.form.epochs.setValue(5)  # warm-up 5 of 5 epochs: Start refuses it, naming the field, which it unfolds
    w.set_dataset(FakeDataset())
    assert not w.start_run() and w.state is None
    assert w.form.error_label.text().startswith("Warm-up: expected an integer from 0 to epochs - 1 (4)"), \
        w.form.error_label.text()
    assert opts.body.isVisibleTo(w.form) and "c62828" in opts.warmup_epochs.styleSheet()
    w.form.set_read_only(True)
    assert not opts.body.isEnabled() and opts.toggle.isEnabled()
    w.form.set_read_only(False)
    assert opts.body.isEnabled()


def test_dpd_step_lists_pa_runs_and_round_trips(make_window, tmp_path):
    ws = FakeWorkspace(tmp_path / "ws2")
    ws.runs.append(FakeRunRecord("2026-01-01-pa-gru23", tmp_path / "ws2" / "runs" / "a"))
    w = make_window(ws=ws)
    w.step_dpd.setChecked(True)
    assert w.pa_run_combo.count() == 1 and w.pa_run_combo.isEnabled()
    cfg = w.config_from_form()
    assert cfg.step == "dpd" and cfg.pa_run == "2026-01-01-pa-gru23"
    w.set_form_from_config(cfg)
    assert w.config_from_form() == cfg


def test_config_error_in_plain_words(make_window):
    w = make_window(trainer_factory=fake_factory())
    w.set_dataset(FakeDataset())
    w.step_dpd.setChecked(True)  # no PA run in the empty workspace
    assert not w.start_run()
    assert w.state is None
    assert w.banner.isVisible() and "PA run" in w.banner.message
    assert w.form.error_label.isVisible()


# ------------------------------------------------------------------------------------------------------ panels
@pytest.mark.parametrize("cls", [PSDPanel, AMAMPanel, AMPMPanel, TimeDomainPanel])
def test_panels_accept_plotdata(qtbot, cls):
    p = cls()
    qtbot.addWidget(p)
    assert not p.has_data()
    p.update_from(make_plotdata(), "validation · epoch 0")
    assert p.has_data()
    items = [it for plot in p._plots for it in plot.listDataItems() if it.isVisible()]
    assert len(items) >= 2
    for it in items:
        x, y = it.getData()
        assert x is not None and len(x) > 0 and len(x) == len(y)
    # a second update reuses the curve objects
    before = [id(it) for plot in p._plots for it in plot.listDataItems()]
    p.update_from(make_plotdata(1))
    assert [id(it) for plot in p._plots for it in plot.listDataItems()] == before
    p.clear_data()
    assert not p.has_data()


def test_psd_panel_bands_and_aclr_readout(qtbot):
    p = PSDPanel()
    qtbot.addWidget(p)
    p.update_from(make_plotdata())
    assert all(r.isVisible() for r in p.regions.values())
    assert p.regions["main"].getRegion() == (-80.0, 80.0)
    assert p.aclr_text.startswith("ACLR [dBc]") and "measured y: L -45.2 / R -44.7" in p.aclr_text


def test_signal_colors_consistent_across_panels(qtbot):
    panels = [PSDPanel(), TimeDomainPanel()]
    for p in panels:
        qtbot.addWidget(p)
        p.update_from(make_plotdata())
    psd_pen = panels[0].curves.items["predicted ŷ"].opts["pen"].color().name()
    td_pen = panels[1].i_curves.items["predicted ŷ"].opts["pen"].color().name()
    assert psd_pen == td_pen


def test_learning_panel_rows(qtbot):
    p = LearningPanel()
    qtbot.addWidget(p)
    for e in range(3):
        p.append_row(make_row(e, 3), is_best=True)
    assert p.n_epochs == 3
    x, y = p._curves["val_nmse"].getData()
    assert list(x) == [0, 1, 2] and np.allclose(y, [-20, -23, -26])
    assert p._best_lines[0].isVisible() and p._best_lines[0].value() == 2
    # rows read from history.csv (text values) work too
    p.append_row({k: str(v) for k, v in make_row(3, 4).items()})
    assert p.n_epochs == 4


# ------------------------------------------------------------------------------------------------------ fake runs
def _tiny_config(**kw) -> ExperimentConfig:
    base = dict(epochs=2, hidden_size=8, frame_length=50, stride=8, device="cpu")
    base.update(kw)
    return ExperimentConfig(**base)


def test_fake_run_fills_everything(make_window, qtbot):
    factory = fake_factory()
    w = make_window(trainer_factory=factory)
    w.set_dataset(FakeDataset())
    w.set_form_from_config(_tiny_config(epochs=3))
    states, render_threads = [], set()
    w.stateChanged.connect(states.append)
    w.session.subscribe(lambda s: render_threads.add(threading.get_ident()))
    with qtbot.waitSignal(w.runEnded, timeout=20_000) as blocker:
        assert w.start_run()
        assert w.state == "running"
        assert not w.act_start.isEnabled() and w.act_stop.isEnabled()
        assert not w.form.model_box.isEnabled()
        assert not w.start_run(), "double start must be refused"
    assert blocker.args == ["succeeded"]
    assert w.state == "succeeded" and states == ["running", "succeeded"]
    assert w.progress_bar.value() == 1000 and w.progress_label.text().startswith("Finished · 3 epochs · ")
    assert threading.main_thread().ident not in factory.created[0].thread_ids  # trained off the GUI thread
    assert render_threads == {threading.main_thread().ident}  # every event reached the window on its thread
    assert w.epoch_table.rowCount() == 3
    assert w.epoch_table.item(w.epoch_table.best_row, 0).text() == "★"
    for p in w.panels:
        assert p.has_data(), p.title
    assert "CUDA graph: off" in w.fastpath_label.text()
    assert "best val NMSE" in w.best_label.text() and "(ep 2)" in w.best_label.text()
    assert w.banner.isVisible() and w.banner.kind == "success" and "fake-run" in w.banner.message
    assert w.act_start.isEnabled() and w.form.model_box.isEnabled()
    assert "test" in w.psd_panel._plots[0].titleLabel.text  # the final test-split plots stay


def test_fake_run_stop_is_clean(make_window, qtbot):
    w = make_window(trainer_factory=fake_factory(batches=10_000, batch_delay=0.005))
    w.set_dataset(FakeDataset())
    w.set_form_from_config(_tiny_config(epochs=50))
    w.start_run()
    qtbot.waitUntil(lambda: w.progress_label.text().startswith("Epoch 0 of 0–49 · batch"), timeout=5000)
    t0 = time.monotonic()
    with qtbot.waitSignal(w.runEnded, timeout=2000) as blocker:
        qtbot.keyClick(w, Qt.Key.Key_Escape)
    assert time.monotonic() - t0 < 2.0
    assert blocker.args == ["cancelled"]
    assert w.state == "cancelled"
    assert w.banner.kind == "warning" and "stopped" in w.banner.message.lower()
    assert w.progress_label.text() == "Stopped · 0 epochs completed"
    assert w.act_start.isEnabled()


def test_fake_run_failure_shows_plain_words_with_details(make_window, qtbot):
    w = make_window(trainer_factory=fake_factory(fail_at_epoch=0))
    w.set_dataset(FakeDataset())
    w.set_form_from_config(_tiny_config())
    with qtbot.waitSignal(w.runEnded, timeout=10_000):
        w.start_run()
    assert w.state == "failed"
    assert "lower the batch size" in w.banner.message
    assert "Traceback" not in w.banner.message
    assert w.banner.details_button.isVisible() and not w.banner.detail.isVisible()
    w.banner.details_button.click()
    assert w.banner.detail.isVisible() and "Traceback" in w.banner.detail.toPlainText()


def test_trainer_construction_error_is_reported(make_window, qtbot):
    def broken(config, **kw):
        raise ValueError("backbone 'gru' needs frame_length >= 2")

    w = make_window(trainer_factory=broken)
    w.set_dataset(FakeDataset())
    with qtbot.waitSignal(w.runEnded, timeout=5000):
        w.start_run(_tiny_config())
    assert w.state == "failed" and "frame_length" in w.banner.message


def test_close_mid_run_requests_cancel_and_waits(make_window, qtbot):
    factory = fake_factory(batches=10_000, batch_delay=0.005)
    w = make_window(trainer_factory=factory)
    w.set_dataset(FakeDataset())
    w.start_run(_tiny_config(epochs=50))
    qtbot.waitUntil(lambda: w.state == "running" and bool(factory.created), timeout=5000)
    worker = w.runs.worker
    t0 = time.monotonic()
    w.close()
    assert time.monotonic() - t0 < 5.5
    assert w.runs.worker is None
    assert not worker.thread.isRunning()
    assert factory.created[0]._cancel.is_set()


def test_preview_events_drawn_only_when_ticked(make_window, qtbot):
    from dpd_desktop.runs.events import PreviewReady

    w = make_window()
    ev = PreviewReady(epoch=0, batch=10, batches=100, plots=make_plotdata(), metrics={"NMSE": -25.0})
    w.runs._on_preview_ready(ev)
    qtbot.wait(80)
    assert not w.psd_panel.has_data()
    w.preview_check.setChecked(True)
    for i in range(5):  # a burst: only the newest is drawn
        w.runs._on_preview_ready(dataclasses.replace(ev, batch=10 * (i + 1)))
    qtbot.waitUntil(w.psd_panel.has_data, timeout=2000)
    assert "batch 50/100" in w.psd_panel._plots[0].titleLabel.text


# ------------------------------------------------------------------------------------------------------ export
def test_export_current_plot(make_window, qtbot, tmp_path):
    w = make_window()
    w.show_plots(make_plotdata(), "validation")
    qtbot.mouseClick(w.psd_panel.viewport(), Qt.MouseButton.LeftButton)
    assert w.current_panel is w.psd_panel
    out = w.export_current_plot(tmp_path / "psd_export.png")
    assert out.exists() and out.stat().st_size > 1000


def test_write_run_plots(tmp_path, qtbot):
    from dpd_desktop.gui.export import write_run_plots

    rows = [make_row(e, 3) for e in range(3)]
    paths = write_run_plots(tmp_path / "run", rows, make_plotdata(source="test"))
    names = sorted(p.name for p in paths)
    assert names == sorted(["learning_curves.png", "psd.png", "amam.png", "ampm.png", "time_domain.png"])
    for p in paths:
        assert p.parent == tmp_path / "run" / "plots" and p.stat().st_size > 2000
    assert not [p for p in (tmp_path / "run" / "plots").iterdir() if p.suffix != ".png"]  # no temp files left
    # without PlotData only the learning curves
    assert [p.name for p in write_run_plots(tmp_path / "run2", rows, None)] == ["learning_curves.png"]


def test_a_run_folder_that_cannot_be_drawn_reports_its_error(make_window, qtbot, tmp_path, monkeypatch):
    """The window writes a run's PNGs in a process of their own (gui/run_plots.py; nothing rendered in the window's
    process): plotsWritten gets the error when the run folder cannot be drawn, and the status bar says so (the
    paths of a real run: tests/gui/test_child_run.py)."""
    from dpd_desktop.gui import export

    rendered_here = []
    monkeypatch.setattr(export, "write_run_plots", lambda *a, **k: rendered_here.append(1))
    w = make_window(write_plots=True)
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("x")
    with qtbot.waitSignal(w.plotsWritten, timeout=60_000) as sig:
        w.runs.write_run_plots(str(blocked))
    assert isinstance(sig.args[0], OSError) and "were not written" in str(sig.args[0])
    assert "Could not write the plot PNGs" in w.statusBar().currentMessage()
    assert rendered_here == [] and len(w.jobs) == 0


def test_window_geometry_saved_to_its_settings_and_restored(make_window, settings, qtbot):
    """The window writes its geometry and splitter states to the QSettings it was given (nothing to the
    application's default settings) and a new window restores them."""
    w = make_window()
    w.resize(1234, 650)  # the offscreen screen is 800 px high: restoreGeometry keeps a window within it
    w.main_splitter.setSizes([420, 800])
    state = bytes(w.main_splitter.saveState())
    w.close()
    settings.sync()
    assert set(settings.allKeys()) >= {"window/geometry", "window/main_splitter", "window/right_splitter"}
    assert not QSettings().contains("window/geometry"), "geometry leaked into the default settings"
    w2 = MainWindow(workspace=w.workspace, settings=settings)
    qtbot.addWidget(w2)
    assert abs(w2.height() - 650) <= 5, "geometry not restored (the default is 1600 × 1000)"
    assert bytes(settings.value("window/main_splitter")) == state


# ------------------------------------------------------------------------------------------------------ real trainer
def _demo_dataset(n_train: int = 4096):
    from dpd_desktop.data import make_demo_dataset

    try:
        return make_demo_dataset(n_train=n_train, n_val=4096, n_test=4096)
    except TypeError:
        return make_demo_dataset()


@needs_trainer
def test_real_demo_run(make_window, qtbot, workspace):
    w = make_window()
    w.set_dataset(_demo_dataset(), "demo")
    w.set_form_from_config(_tiny_config())
    with qtbot.waitSignal(w.runEnded, timeout=120_000) as blocker:
        assert w.start_run()
    assert blocker.args == ["succeeded"], w.banner.message + "\n" + w.banner.detail.toPlainText()
    assert w.epoch_table.rowCount() == 2
    for p in w.panels:
        assert p.has_data(), p.title
    # a CPU run: the fast path is off and the status bar says why
    assert w.fastpath_label.text() == "CUDA graph: off — CPU device (CUDA graphs need a CUDA GPU)"
    assert w.banner.run_dir and str(workspace.root) in w.banner.run_dir
    assert w.session.run_dir == w.banner.run_dir and w.progress_label.text().startswith("Finished · 2 epochs · ")


@needs_trainer
def test_real_run_stop_mid_run(make_window, qtbot):
    w = make_window()
    w.set_dataset(_demo_dataset(n_train=61440), "demo")  # ~7,700 batches of 8 frames an epoch: tens of seconds
    w.set_form_from_config(_tiny_config(epochs=200, batch_size=8, stride=1))
    w.start_run()
    qtbot.waitUntil(lambda: "batch" in w.progress_label.text(), timeout=60_000)
    t0 = time.monotonic()
    with qtbot.waitSignal(w.runEnded, timeout=30_000) as blocker:
        w.stop_run()
    stop_s = time.monotonic() - t0
    # after the current batch of 8 frames (milliseconds), then the child's files and exit; an epoch of this run takes
    # tens of seconds, so a bound of seconds still shows the stop did not wait for the epoch's end, with room for a
    # slow or busy machine
    assert stop_s < 10.0, f"stop took {stop_s:.2f} s"
    assert blocker.args == ["cancelled"]
    assert w.state == "cancelled"


@needs_trainer
def test_dataset_error_is_plain_words(make_window, qtbot, tmp_path):
    bad = tmp_path / "broken.csv"
    bad.write_text("I_in,Q_in,I_out,Q_out\n0.1,0.2,0.3,abc\n")
    w = make_window()
    with qtbot.waitSignal(w.datasetFailed, timeout=30_000):
        w.open_dataset(bad)
    assert w.banner.isVisible() and w.banner.kind == "error"
    assert "broken.csv" in w.banner.message
    assert "Traceback" not in w.banner.message and "Traceback" in w.banner.detail.toPlainText()
    assert w.dataset is None and w.act_start.isEnabled()


@needs_trainer
def test_real_pa_then_dpd_from_the_window(make_window, qtbot):
    w = make_window()
    w.set_dataset(_demo_dataset(), "demo")
    w.set_form_from_config(_tiny_config(epochs=1))
    with qtbot.waitSignal(w.runEnded, timeout=120_000) as blocker:
        w.start_run()
    assert blocker.args == ["succeeded"], w.banner.message
    pa_run_dir = w.banner.run_dir
    w.step_dpd.setChecked(True)
    assert w.pa_run_combo.count() == 1 and w.pa_run_combo.currentData() in pa_run_dir
    with qtbot.waitSignal(w.runEnded, timeout=120_000) as blocker:
        assert w.start_run()
    assert blocker.args == ["succeeded"], w.banner.message + w.banner.detail.toPlainText()
    assert "ACLR" in w.best_label.text()
    assert "DPD output u" in w.signal_legend.names
    for p in w.panels:
        assert p.has_data(), p.title


@pytest.mark.dataset
def test_open_measured_dataset_folder(make_window, qtbot):

    folder = DATASETS / "DPA_200MHz"
    if not folder.is_dir():
        pytest.skip(f"{folder} not present")
    w = make_window()
    with qtbot.waitSignal(w.datasetLoaded, timeout=60_000):
        w.open_dataset(folder)
    fields = w.dataset_box.text()
    assert "800 MHz" in fields and "23,040" in fields
    assert "DPA_200MHz" in w.windowTitle()
    assert w.config_from_form().dataset == str(folder)


def _cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


@needs_trainer
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not _cuda_available(), reason="needs a CUDA GPU (run on the GPU machine with benchmarks/gpu_gui_env.sh)"))])
@pytest.mark.parametrize("backbone", ["gru", "dgru", "lstm", "tres_gru", "rvtdcnn"])
def test_every_family_trains_as_pa_and_dpd_from_the_window(make_window, qtbot, backbone, device):
    """Each family, chosen in the form, trains as the PA and then as the DPD through that PA, from the window
    (on CPU everywhere; on CUDA too where a GPU is present, with the fast path on)."""
    w = make_window()
    w.set_dataset(_demo_dataset(), "demo")
    w.set_form_from_config(_tiny_config(epochs=1, backbone=backbone, stride=16, device=device))
    assert w.config_from_form().backbone == backbone
    assert w.config_from_form().device == device
    with qtbot.waitSignal(w.runEnded, timeout=120_000) as blocker:
        assert w.start_run()
    assert blocker.args == ["succeeded"], w.banner.message
    w.step_dpd.setChecked(True)
    assert w.pa_run_combo.count() == 1
    with qtbot.waitSignal(w.runEnded, timeout=120_000) as blocker:
        assert w.start_run()
    assert blocker.args == ["succeeded"], w.banner.message + w.banner.detail.toPlainText()
    cfg = w.config_from_form()
    assert cfg.step == "dpd" and cfg.backbone == backbone
    for p in w.panels:
        assert p.has_data(), p.title
    if device == "cuda":
        assert w.fastpath_label.text() == "CUDA graph: on"
