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
    w._dataset_ref = "demo"
    w.close()
    w2 = make_window()
    w2.load_demo = lambda: w2.set_dataset(FakeDataset(n=(61_440, 16_384, 16_384)), "demo")
    assert w2.restore_last_session()
    # the CPU suggestion for this size would be 10 epochs, stride 2 (test_window_polish.py): the saved values win
    assert (w2.form.epochs.value(), w2.form.stride.value()) == (7, 3)


def test_saved_values_equal_to_the_defaults_are_kept_too(make_window, settings):
    w = make_window()
    w.form.device.setCurrentIndex(w.form.device.findData("cpu"))
    w._dataset_ref = "demo"  # epochs 150, stride 1: the config's defaults, saved as the user left them
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
