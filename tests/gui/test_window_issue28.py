"""Issue 28, "The window": the saved form survives a restart, the layout at 1280×800, docks raised by their
shortcuts, the banner follows light/dark, a reopened run's title and status bar, the DPD's output-power caveat,
per-epoch seconds of reopened and resumed runs."""
from __future__ import annotations

from gui_fakes import FakeDataset


# ------------------------------------------------------------------------------------------------------ saved form
def test_saved_epochs_and_stride_survive_the_restart_and_the_dataset_load(make_window, settings):
    w = make_window()
    w.form.device.setCurrentIndex(w.form.device.findData("cpu"))
    w.form.epochs.setValue(7)
    w.form.stride.setValue(3)
    w.data.ref = "demo"
    w.close()
    w2 = make_window()
    w2.load_demo = lambda: w2.set_dataset(FakeDataset(n=(61_440, 16_384, 16_384)), "demo")
    assert w2.restore_last_session()
    # the CPU suggestion for this size would be 10 epochs, stride 2 (test_window_polish.py): the saved values win
    assert (w2.form.epochs.value(), w2.form.stride.value()) == (7, 3)


def test_saved_values_equal_to_the_defaults_are_kept_too(make_window, settings):
    w = make_window()
    w.form.device.setCurrentIndex(w.form.device.findData("cpu"))
    w.data.ref = "demo"  # epochs 150, stride 1: the config's defaults, saved as the user left them
    w.close()
    w2 = make_window()
    w2.load_demo = lambda: w2.set_dataset(FakeDataset(n=(61_440, 16_384, 16_384)), "demo")
    assert w2.restore_last_session()
    assert (w2.form.epochs.value(), w2.form.stride.value()) == (150, 1)


def test_a_fresh_window_still_suggests_cpu_defaults(make_window):
    w = make_window()
    w.form.device.setCurrentIndex(w.form.device.findData("cpu"))
    w.set_dataset(FakeDataset(n=(61_440, 16_384, 16_384)))
    assert (w.form.epochs.value(), w.form.stride.value()) == (10, 2)


def test_mp_gmp_settings_survive_the_restart(make_window, settings):
    w = make_window()
    f, poly = w.form, w.form.poly
    f.backbone.setCurrentIndex(f.backbone.findData("gmp"))
    poly.fit.setCurrentIndex(poly.fit.findData("ls"))
    poly.order.setValue(7)
    poly.memory.setValue(6)
    poly.odd_only.setChecked(True)
    poly.cross_order.setValue(3)
    poly.cross_lag.setValue(4)
    poly.cross_lead.setValue(0)
    poly.grid_k.setText("3, 5,7")
    poly.grid_m.setText("2,4")
    w.close()
    w2 = make_window()
    assert w2.restore_last_session()
    cfg = w2.form.config()
    assert (cfg.backbone, cfg.fit, cfg.poly_order, cfg.memory_depth, cfg.poly_odd_only) == ("gmp", "ls", 7, 6, True)
    assert (cfg.cross_order, cfg.cross_lag, cfg.cross_lead) == (3, 4, 0)
    assert (cfg.grid_k, cfg.grid_m) == ([3, 5, 7], [2, 4])
    assert w2.form.is_poly and w2.form.poly.cross_lag.isVisibleTo(w2.form)
    # a gradient-fitted MP with the cross order on "auto": the same values back, the grids cleared
    w2.form.backbone.setCurrentIndex(w2.form.backbone.findData("mp"))
    w2.form.poly.fit.setCurrentIndex(w2.form.poly.fit.findData("gradient"))
    w2.form.poly.cross_order.setValue(w2.form.poly.cross_order.minimum())
    w2.form.poly.grid_k.setText("")
    w2.close()
    w3 = make_window()
    assert w3.restore_last_session()
    cfg = w3.form.config()
    assert (cfg.backbone, cfg.fit, cfg.poly_order, cfg.cross_order, cfg.grid_k, cfg.grid_m) == \
        ("mp", "gradient", 7, None, None, None)
    assert w3.form.poly.grid_m.text() == "2,4"  # kept in its field (used again with least squares)


def test_saved_mp_values_out_of_range_are_ignored(make_window, settings):
    w = make_window()
    w.form.backbone.setCurrentIndex(w.form.backbone.findData("mp"))
    w.close()
    settings.setValue("form/poly_order", 99)
    settings.setValue("form/memory_depth", "x")
    settings.setValue("form/cross_lag", 6)
    settings.setValue("form/grid_k", "3,oops")
    settings.setValue("form/fit", "magic")
    w2 = make_window()
    assert w2.restore_last_session()
    cfg = w2.form.config()
    # each odd value gives way to the config's default (fit: gradient, K 5, M 4), the sound one stays
    assert (cfg.backbone, cfg.fit, cfg.poly_order, cfg.memory_depth, cfg.grid_k) == ("mp", "gradient", 5, 4, None)
    assert cfg.cross_lag == 6


# ------------------------------------------------------------------------------------------------------ docks
def _on_top(dock) -> bool:
    """The dock is shown and its tab is the current one (a dock behind another tab has no visible region)."""
    return dock.isVisible() and not dock.visibleRegion().isEmpty()


def test_dock_shortcuts_raise_the_tab_they_add(make_window, qtbot):
    from PySide6.QtCore import Qt

    w = make_window()
    w.activateWindow()  # window shortcuts need the active window
    qtbot.waitUntil(w.isActiveWindow, timeout=2000)
    assert _on_top(w.queue_dock)
    qtbot.keyClick(w, Qt.Key.Key_B, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: _on_top(w.runs_dock), timeout=2000)
    assert not _on_top(w.queue_dock)
    qtbot.keyClick(w, Qt.Key.Key_W, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: _on_top(w.sweeps_dock), timeout=2000)
    assert not _on_top(w.runs_dock) and not _on_top(w.queue_dock)
    # the shortcut again hides it; pressed once more it comes back on top
    qtbot.keyClick(w, Qt.Key.Key_B, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: not w.runs_dock.isVisible(), timeout=2000)
    qtbot.keyClick(w, Qt.Key.Key_B, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: _on_top(w.runs_dock), timeout=2000)


# ------------------------------------------------------------------------------------------------------ palettes
def _ink(widget):
    """(background, ink) of the widget's image: its most frequent color and the pixel whose lightness differs most
    from it."""
    from collections import Counter

    img = widget.grab().toImage()
    pixels = [img.pixelColor(x, y) for x in range(img.width()) for y in range(img.height())]
    common = Counter(c.rgb() for c in pixels).most_common(1)[0][0]
    bg = next(c for c in pixels if c.rgb() == common)
    ink = max(pixels, key=lambda c: abs(c.lightness() - bg.lightness()))
    return bg, ink


def test_dark_then_light_the_banner_and_the_estimate_follow(make_window, qtbot):
    from PySide6.QtGui import QGuiApplication, QPalette

    w = make_window()
    try:
        w.set_color_scheme("dark")
        w.banner.show_message("success", "Run finished in 26 s.", run_dir=str(w.workspace.root))
        w.estimate_label.setText("≈ 5 min")
        qtbot.wait(20)
        assert w.banner.text.palette().color(QPalette.ColorRole.WindowText).lightness() > 170
        w.set_color_scheme("light")
        qtbot.wait(20)
        R = QPalette.ColorRole
        app = QGuiApplication.palette()
        # the banner's text and buttons take the light palette (they stayed in the dark one)
        assert w.banner.text.palette().color(R.WindowText) == app.color(R.WindowText)
        assert w.banner.open_button.palette().color(R.Button) == app.color(R.Button)
        bg, ink = _ink(w.banner.text)
        assert bg.lightness() > 170 and ink.lightness() < 80, (bg.name(), ink.name())
        bg, ink = _ink(w.banner.open_button)
        assert bg.lightness() > 170 and ink.lightness() < 80, (bg.name(), ink.name())
        # the estimate beside Start: the light palette's placeholder grey, on the light window
        label = w.estimate_label
        assert label.palette().color(label.foregroundRole()) == app.color(R.PlaceholderText)
        assert _ink(label)[0].lightness() > 170
    finally:
        w.set_color_scheme("system")


# ------------------------------------------------------------------------------------------------------ resumed run
def test_a_resumed_run_reports_its_whole_duration(make_window, qtbot):
    import json
    from pathlib import Path

    from dpd_desktop.config import ExperimentConfig
    from dpd_desktop.data import make_demo_dataset
    from dpd_desktop.gui.session import format_duration
    from dpd_desktop.runs.artifacts import read_history_csv

    ds = make_demo_dataset(seed=2, n_train=8000, n_val=4096, n_test=4096)
    cfg = ExperimentConfig(epochs=4, hidden_size=6, frame_length=40, stride=2, batch_size=32, device="cpu")
    w = make_window()
    w.set_dataset(ds, "demo")
    w.set_form_from_config(cfg)
    w.start_run()
    qtbot.waitUntil(lambda: w.epoch_table.rowCount() >= 2, timeout=120_000)
    with qtbot.waitSignal(w.runEnded, timeout=60_000):
        w.stop_run()
    run_dir = Path(w.session.run_dir)
    before_s = 60 * float(read_history_csv(run_dir / "history.csv")[-1]["TIME:"])
    with qtbot.waitSignal(w.runEnded, timeout=120_000) as blocker:
        w.resume_control.action.trigger()
    assert blocker.args == ["succeeded"], w.banner.message
    rows = read_history_csv(run_dir / "history.csv")
    wall = json.loads((run_dir / "status.json").read_text())["wall_s"]
    # the whole run: the epochs before the resume, then those after it (its last TIME: counts both), then the
    # final evaluation; the resumed part alone was reported before
    assert wall >= 60 * float(rows[-1]["TIME:"]) > before_s > 0
    assert f"Run finished in {format_duration(wall)}" in w.banner.message


# ------------------------------------------------------------------------------------------------------ 1280×800
def _dpd_like_plotdata():
    """make_plotdata with a DPD run's six signal names (the longest legend and ACLR read-out)."""
    import dataclasses

    from gui_fakes import make_plotdata

    pd = make_plotdata()
    names = {"measured y": "target g·x", "predicted ŷ": "PA(DPD(x))"}

    def rename(d):
        return {names.get(k, k): v for k, v in d.items()}

    psd = rename(pd.psd)
    psd["PA(x) no DPD"] = psd["target g·x"] + 3
    psd["DPD output u"] = psd["target g·x"] - 20
    psd["input x"] = psd["target g·x"] - 25
    aclr = rename(pd.aclr)
    aclr["PA(x) no DPD"] = (-31.2, -30.8)
    return dataclasses.replace(pd, psd=psd, amam=rename(pd.amam), ampm=rename(pd.ampm), time=rename(pd.time),
                               aclr=aclr, target_name="target g·x", pred_name="PA(DPD(x))")


def _fits(panel) -> list[str]:
    """What of a plot panel's scene lies outside the panel (it would be clipped): its layout and each text."""
    import pyqtgraph as pg

    out = []
    view = panel.viewport().rect()
    ci = panel.ci
    if ci.size().width() > panel.width() + 0.5 or ci.size().height() > panel.height() + 0.5:
        out.append(f"layout {ci.size().width():.0f}×{ci.size().height():.0f} in {panel.width()}×{panel.height()}")
    labels = [p.titleLabel for p in panel._plots] + [it for it in ci.items if isinstance(it, pg.LabelItem)]
    for label in labels:
        r = panel.mapFromScene(label.mapToScene(label.item.mapRectToParent(label.item.boundingRect()))).boundingRect()
        if label.text.strip() and not view.adjusted(-1, -1, 1, 1).contains(r):
            out.append(f"{panel.title}: label {label.text[:40]!r} at {r} outside {view}")
    for plot in panel._plots:  # the axes with their tick labels
        for name in ("left", "bottom"):
            ax = plot.getAxis(name)
            r = panel.mapFromScene(ax.mapToScene(ax.boundingRect())).boundingRect()
            if ax.isVisible() and not view.adjusted(-1, -1, 1, 1).contains(r.adjusted(0, 0, -1, -1)):
                out.append(f"{panel.title}: {name} axis at {r} outside {view}")
    return out


def test_at_1280x800_plots_fit_readouts_show_and_the_preview_tick_is_in_the_toolbar(make_window, qtbot):
    from PySide6.QtWidgets import QToolButton

    from gui_fakes import make_row

    w = make_window()
    w.resize(1280, 800)
    w.set_dataset(FakeDataset(name="DPA_160MHz"))
    w.preview_check.setChecked(True)
    w.step_dpd.setChecked(True)
    plots = _dpd_like_plotdata()
    for e in range(3):
        w.learning_panel.append_row(make_row(e, 3))
    w.show_plots(plots, "test · selected epoch 2")
    w.psd_panel.set_power_change(-1.39)
    w.best_label.setText("best val NMSE -37.25 dB (ep 2) · metrics: legacy-2.2.1")
    w.run_folder_label.setText("run " + "/a/long/workspace/path" * 4 + "/runs/2026-12-02-193519-pa-gru16")
    qtbot.wait(100)
    assert w.width() == 1280 and w.height() == 800
    problems = [p for panel in w.panels for p in _fits(panel)]
    assert problems == [], "\n".join(problems)
    # every read-out of the PSD panel is there: each signal's ACLR, the DPD's gain and the output-power change
    text = w.psd_panel.aclr_text
    assert "PA(DPD(x)): L" in text and "before DPD" in text and "output power with DPD -1.39 dB" in text
    # the toolbar shows all it holds: no overflow menu; the tick in it, its red warning in the window
    ext = w.toolbar.findChild(QToolButton, "qt_toolbar_ext_button")
    assert ext is None or not ext.isVisible()
    tick = w.preview_check
    assert tick.isVisible() and tick.visibleRegion().boundingRect().width() >= tick.sizeHint().width()
    warning = w.preview_warning
    assert warning.isVisible() and warning.width() >= warning.sizeHint().width()
    top_left = warning.mapTo(w, warning.rect().topLeft())
    assert 0 <= top_left.x() and top_left.x() + warning.width() <= w.width()
    # the status bar: the best metric whole, a long path shortened at its start (the whole one in its tooltip)
    assert not w.best_label.elided and w.best_label.isVisible()
    assert w.run_folder_label.shown_text.endswith("2026-12-02-193519-pa-gru16")


def test_at_1280x800_a_dpd_runs_banner_and_plots_fit_and_keep_the_minimum_width(make_window, qtbot):
    """A finished DPD run: its banner (outcome, output-power caveat, run folder) above the plots, its six-signal PSD
    read-out with the power change: nothing of the panels is clipped and the window may still be 1280 px wide."""
    from gui_fakes import make_row

    w = make_window()
    w.resize(1280, 800)
    w.set_dataset(FakeDataset(name="DPA_200MHz"))
    w.step_dpd.setChecked(True)
    for e in range(4):
        w.learning_panel.append_row(make_row(e, 4))
    w.show_plots(_dpd_like_plotdata(), "test · selected epoch 3")
    w.psd_panel.set_power_change(-2.03)
    w.banner.show_message(
        "warning", "Run finished in 57 s. Selected epoch 3 · val NMSE -31.39 dB · test NMSE -31.01 dB · test ACLR "
        "-35.08 dBc (output power -2.03 dB with DPD) · test EVM -33.12 dB · metrics: legacy-2.2.1.\nThe DPD changes "
        "the output power by -2.03 dB (more than 0.5 dB): part of its ACLR gain may come from a lower drive level.",
        run_dir="/a/workspace/runs/2026-12-03-060500-dpd-gru12")
    w.progress_label.setText("Finished · 4 epochs · 57 s")
    qtbot.wait(100)
    assert (w.width(), w.height()) == (1280, 800)
    problems = [p for panel in w.panels for p in _fits(panel)]
    assert problems == [], "\n".join(problems)
    # each plot keeps a readable height (the PSD's was 30 px under its read-out)
    for panel, least in ((w.psd_panel, 80), (w.amam_panel, 80), (w.ampm_panel, 70)):
        assert min(p.vb.height() for p in panel._plots) >= least, panel.title
    assert w.minimumSizeHint().width() <= 1280 and w.centralWidget().minimumSizeHint().width() <= 1280
    table = w.epoch_table  # two rows in view at least (it scrolls)
    assert table.isVisible() and table.viewport().height() >= 2 * table.verticalHeader().defaultSectionSize()


def test_a_window_narrowed_to_1280_after_drawing_fits_its_panels_again(make_window, qtbot):
    """Drawn at 1920×1080, then narrowed: each panel's layout follows (it kept the wide labels' width, and AM/AM's
    last tick and the plots' right side were cut)."""
    w = make_window()
    w.resize(1920, 1080)
    w.set_dataset(FakeDataset(name="DPA_200MHz"))
    w.step_dpd.setChecked(True)
    w.show_plots(_dpd_like_plotdata(), "test · selected epoch 3")
    w.plots.finish_drawing()
    qtbot.wait(100)
    w.resize(1280, 800)
    qtbot.waitUntil(lambda: w.width() == 1280, timeout=2000)
    qtbot.wait(100)
    widths = {p.title: (round(p.ci.size().width()), p.width()) for p in w.panels}
    assert all(ci <= width for ci, width in widths.values()), widths
    problems = [p for panel in w.panels for p in _fits(panel)]
    assert problems == [], "\n".join(problems)
