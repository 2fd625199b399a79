"""Issue 28: the inspector's flags show in the dataset panel (severity-tinted from the palette, light and dark), and
Start on a dataset with an error flag asks first (No: nothing starts)."""
from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QMessageBox

from gui_fakes import fake_factory


def _swap(split):
    return dataclasses.replace(split, x=split.y, y=split.x)


@pytest.fixture(scope="module")
def datasets():
    """(clean, swapped): the small demo, and the same with input and output exchanged (the SWAPPED error)."""
    from dpd_desktop.data import make_demo_dataset

    ds = make_demo_dataset(n_train=16384, n_val=8192, n_test=8192)
    bad = dataclasses.replace(ds, name="swapped-demo", train=_swap(ds.train), val=_swap(ds.val), test=_swap(ds.test))
    return ds, bad


def _checked(w, qtbot):
    qtbot.waitUntil(lambda: not w.dataset_flags.pending, timeout=60_000)


def _mix(a: QColor, b: str, share: float) -> tuple[int, int, int]:
    hue = QColor(b)
    return tuple(round((1 - share) * x + share * y) for x, y in zip(a.getRgb()[:3], hue.getRgb()[:3]))


def _answer(button, seen: list):
    """Answer the next modal message box with ``button``; its text and informative text go into ``seen``."""
    def poll():
        box = QApplication.activeModalWidget()
        if isinstance(box, QMessageBox):
            seen.append(box.text() + "\n" + box.informativeText())
            box.button(button).click()
        else:
            QTimer.singleShot(20, poll)

    QTimer.singleShot(0, poll)


def test_flags_show_in_the_dataset_panel_tinted_from_the_palette(make_window, qtbot, datasets):
    from dpd_desktop.gui.theme import apply_scheme

    clean, bad = datasets
    w = make_window(inspect=True)
    w.set_dataset(bad)
    assert w.dataset_flags.pending and w.dataset_flags.view.state.text() == "Checking the dataset…"
    _checked(w, qtbot)
    view = w.dataset_flags.view
    assert [(r.severity, r.code) for r in view.rows] == [("error", "SWAPPED")]
    row = view.rows[0]
    assert row.isVisible() and "look swapped" in row.text() and view.state.text() == "Checks: 1 flag(s), 1 error(s)"
    assert w.dataset_box.isAncestorOf(row)
    try:
        for scheme in ("light", "dark"):
            apply_scheme(scheme)
            qtbot.wait(50)
            img = row.grab().toImage()
            got = img.pixelColor(2, row.height() // 2)
            want = _mix(row.palette().color(QPalette.ColorRole.Window), "#d62728", 0.22)
            assert max(abs(a - b) for a, b in zip(got.getRgb()[:3], want)) <= 2, (scheme, got.getRgb(), want)
            assert (got.lightness() < 100) == (scheme == "dark")
            assert got.red() > got.green() + 8 and got.red() > got.blue() + 8  # red-tinted: an error
            text = row.palette().color(QPalette.ColorRole.WindowText)
            assert abs(text.lightness() - got.lightness()) > 120  # the sentence reads on its row
    finally:
        apply_scheme("system")
    # another dataset: its own checks replace the flags
    w.set_dataset(clean)
    _checked(w, qtbot)
    assert view.rows == [] and view.state.text() == "Checks: no flags, the capture looks usable."


def test_start_with_an_error_flag_asks_and_no_starts_nothing(make_window, qtbot, datasets):
    from dpd_desktop.config import ExperimentConfig

    factory = fake_factory()
    w = make_window(trainer_factory=factory, inspect=True)
    w.set_dataset(datasets[1])
    w.set_form_from_config(ExperimentConfig(epochs=2, hidden_size=8, frame_length=50, stride=8, device="cpu"))
    _checked(w, qtbot)
    seen: list[str] = []
    _answer(QMessageBox.StandardButton.No, seen)
    assert w.start_run() is False
    assert len(seen) == 1 and "1 error(s)" in seen[0] and "error SWAPPED: Input and output look swapped" in seen[0]
    assert factory.created == [] and w.state is None and w.act_start.isEnabled()
    _answer(QMessageBox.StandardButton.Yes, seen)
    with qtbot.waitSignal(w.runEnded, timeout=20_000) as ended:
        assert w.start_run() is True
    assert len(seen) == 2 and len(factory.created) == 1 and ended.args == ["succeeded"]


def test_a_start_before_the_checks_end_waits_for_them_then_asks(make_window, qtbot, datasets):
    from dpd_desktop.config import ExperimentConfig

    factory = fake_factory()
    w = make_window(trainer_factory=factory, inspect=True)
    w.set_form_from_config(ExperimentConfig(epochs=2, hidden_size=8, frame_length=50, stride=8, device="cpu"))
    w.set_dataset(datasets[1], "demo")
    assert w.dataset_flags.pending
    seen: list[str] = []
    ended = []
    w.runEnded.connect(ended.append)
    assert w.start_run() is True and w.state == "queued"
    _answer(QMessageBox.StandardButton.No, seen)
    qtbot.waitUntil(lambda: ended == ["cancelled"], timeout=60_000)
    assert len(seen) == 1 and "SWAPPED" in seen[0]
    assert factory.created == [] and w.progress_label.text().startswith("Not started: the dataset has error flags")


def test_a_clean_dataset_starts_without_asking(make_window, qtbot, datasets, monkeypatch):
    from dpd_desktop.config import ExperimentConfig
    from dpd_desktop.gui import dataset_flags

    asked = []
    monkeypatch.setattr(dataset_flags, "ask_start", lambda *a: asked.append(a) or False)
    factory = fake_factory()
    w = make_window(trainer_factory=factory, inspect=True)
    w.set_form_from_config(ExperimentConfig(epochs=2, hidden_size=8, frame_length=50, stride=8, device="cpu"))
    w.set_dataset(datasets[0], "demo")
    with qtbot.waitSignal(w.runEnded, timeout=60_000) as ended:
        assert w.start_run() is True  # waits for the checks, then starts
    assert ended.args == ["succeeded"] and asked == [] and len(factory.created) == 1
