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
