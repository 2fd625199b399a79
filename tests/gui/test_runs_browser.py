"""The runs browser, the compare view and the exports, offscreen, on tiny finished runs (tests/tiny_runs.py)."""
from __future__ import annotations

import csv
import xml.etree.ElementTree as ET

import h5py
import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage

from tiny_runs import B_DIFFERS, make_tiny_workspace, model_block, status  # tests/tiny_runs.py

from dpd_desktop.runs.artifacts import read_history_csv
from dpd_desktop.runs.index import RunIndex
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.runs.report_html import format_value
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.gui import panel_export
from dpd_desktop.gui.runs_browser import COLUMNS


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ws")
    out = make_tiny_workspace(root)
    out["root"] = root
    return out


@pytest.fixture
def win(make_window, runs, qtbot):
    w = make_window(ws=Workspace(runs["root"]))
    with qtbot.waitSignal(w.runs_browser.rowsLoaded, timeout=20000):
        w.runs_browser.refresh()
    return w


def _col(header):
    return [c[0] for c in COLUMNS].index(header)


def test_rows_equal_the_index_sorted_and_filtered(win, runs):
    b = win.runs_browser
    with RunIndex.open(runs["root"]) as idx:
        want = idx.runs(sort="run_id", descending=True)
    assert b.visible_rows() == want
    # sort by test NMSE, ascending: the index's own order by that column (None last), ties by run id
    b.table.sortByColumn(_col("test NMSE [dB]"), Qt.SortOrder.AscendingOrder)
    got = [r.run_id for r in b.visible_rows()]
    expect = sorted(want, key=lambda r: (r.test_nmse is None, r.test_nmse if r.test_nmse is not None else 0,
                                         r.run_id))
    assert got == [r.run_id for r in expect]
    # the displayed cells are the index's values
    proxy = b.proxy
    for i, r in enumerate(b.visible_rows()):
        cell = proxy.index(i, _col("test NMSE [dB]")).data()
        assert cell == ("" if r.test_nmse is None else f"{r.test_nmse:.2f}")
    # a text filter hides exactly the rows without the text in a cell
    b.filter_edit.setText("damaged")
    assert [r.run_id for r in b.visible_rows()] == [runs["damaged"].name]
    b.filter_edit.setText("")
    b.state_combo.setCurrentIndex(b.state_combo.findData("succeeded"))
    assert {r.run_id for r in b.visible_rows()} == {runs[k].name for k in ("a", "b", "c")}
    b.step_combo.setCurrentIndex(b.step_combo.findData("dpd"))
    assert b.visible_rows() == []


def _curve(item):
    x, y = item.getOriginalDataset()
    return np.asarray(x), np.asarray(y)


def test_open_restores_learning_curve_epoch_table_and_psd(win, runs, qtbot):
    b = win.runs_browser
    b.select_ids([runs["a"].name])
    with qtbot.waitSignal(b.runOpened, timeout=20000):
        b.open_selected()
    rows = read_history_csv(runs["a"] / "history.csv")
    x, y = _curve(win.learning_panel._curves["val_nmse"])
    assert list(x) == [float(r["EPOCH"]) for r in rows]
    assert list(y) == [float(r["VAL_NMSE"]) for r in rows]
    assert win.epoch_table.rowCount() == len(rows)
    best = status(runs["a"])["best_epoch"]
    assert win.epoch_table.item(best, 0).text() == "★"
    with h5py.File(runs["a"] / "results.h5", "r") as f:
        psd = f["test/psd_prediction_db"][()]
        freq = f["test/psd_freq_hz"][()]
    fx, fy = _curve(win.psd_panel.curves.items["predicted ŷ"])
    assert np.array_equal(fy, psd.astype(np.float32).astype(np.float64))
    assert np.array_equal(fx, (freq / 1e6).astype(np.float32).astype(np.float64))
    assert "nothing was retrained" in win.banner.message


def test_damaged_and_unreadable_runs_say_why(win, runs, qtbot):
    b = win.runs_browser
    rows = {r.run_id: r for r in b.visible_rows()}
    assert rows[runs["unreadable"].name].state == "unreadable"
    assert rows[runs["damaged"].name].state == "damaged"
    b.select_ids([runs["unreadable"].name])
    with qtbot.waitSignal(b.openFailed, timeout=20000) as sig:
        b.open_selected()
    assert "config.json" in sig.args[0] and "cannot be opened" in sig.args[0]
    assert win.banner.kind == "error"
    b.select_ids([runs["damaged"].name])
    with qtbot.waitSignal(b.runOpened, timeout=20000):
        b.open_selected()
    assert win.banner.kind == "warning" and "best.pt" in win.banner.message


def test_new_run_from_these_settings_fills_the_form(win, runs, qtbot):
    b = win.runs_browser
    b.select_ids([runs["b"].name])
    with qtbot.waitSignal(b.formFilled, timeout=20000):
        b.fill_form_from_selected()
    assert win.config_from_form(validate=False).to_dict() == RunRecord.open(runs["b"]).config.to_dict()


def test_compare_view_tables_and_overlays(win, runs, qtbot):
    b = win.runs_browser
    b.select_ids([runs["a"].name, runs["b"].name])
    with qtbot.waitSignal(b.compareOpened, timeout=20000) as sig:
        b.compare_selected()
    view = sig.args[0]
    ids = [r.run_id for r in view.cmp.runs]
    t = view.metrics_table
    assert [t.horizontalHeaderItem(j).text() for j in range(t.columnCount())] == ["metric", "unit", *ids]
    keys = ("NMSE", "ACLR_L", "ACLR_R", "ACLR_AVG", "EVM")
    for j, rid in enumerate(ids):
        d = runs["a"] if rid == runs["a"].name else runs["b"]
        st, model = status(d), model_block(d)
        for i, k in enumerate(keys):
            assert t.item(i, 2 + j).text() == format_value(st["test_metrics"][k], "dB")
        assert t.item(5, 2 + j).text() == str(model["params"])
        assert t.item(6, 2 + j).text() == str(model["macs_per_sample"])
        assert t.item(7, 2 + j).text() == f"{st['wall_s']:.1f}"
    diff = view.diff_table
    assert {diff.item(i, 0).text() for i in range(diff.rowCount())} == {f"experiment.{k}" for k in B_DIFFERS}
    x, y = _curve(view.curves_panel.curves[0])
    rows = read_history_csv(view.cmp.runs[0].run_dir / "history.csv")
    assert list(y) == [float(r["VAL_NMSE"]) for r in rows]
    with h5py.File(view.cmp.runs[1].run_dir / "results.h5", "r") as f:
        psd = f["test/psd_prediction_db"][()]
    assert np.array_equal(_curve(view.psd_panel.overlay_items[ids[1]])[1], psd.astype(np.float64))
    assert view.psd_panel.isVisibleTo(view) and not view.note.isVisibleTo(view)
    view.close()


def test_compare_of_different_datasets_overlays_only_curves(win, runs, qtbot):
    b = win.runs_browser
    b.select_ids([runs["a"].name, runs["c"].name])
    with qtbot.waitSignal(b.compareOpened, timeout=20000) as sig:
        b.compare_selected()
    view = sig.args[0]
    assert "different datasets" in view.note.text() and view.note.isVisibleTo(view)
    assert not view.psd_panel.isVisibleTo(view) and view.psd_panel.overlay_items == {}
    view.close()


def test_exports_png_svg_csv(win, runs, qtbot, tmp_path):
    b = win.runs_browser
    b.select_ids([runs["a"].name])
    with qtbot.waitSignal(b.runOpened, timeout=20000):
        b.open_selected()
    size_before = win.psd_panel.size()
    png = panel_export.export_panel(win.psd_panel, tmp_path / "psd.png")
    img = QImage(str(png))
    assert (img.width(), img.height()) == panel_export.FIGURE_PX == (1050, 780)
    assert round(img.dotsPerMeterX() * 0.0254) == 300
    assert win.psd_panel.size() == size_before
    svg = panel_export.export_panel(win.learning_panel, tmp_path / "learning.svg")
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg") and any(el.tag.endswith("path") for el in root.iter())
    out = panel_export.export_panel(win.learning_panel, tmp_path / "learning.csv")
    with open(out, newline="", encoding="utf-8") as fh:
        table = list(csv.reader(fh))
    head = table[0]
    rows = read_history_csv(runs["a"] / "history.csv")
    i = head.index("val NMSE_y")
    assert [float(r[i]) for r in table[1:] if r[i]] == [float(r["VAL_NMSE"]) for r in rows]
    j = head.index("train loss_y")  # the log-axis plot's original (not log10) values
    assert [float(r[j]) for r in table[1:] if r[j]] == pytest.approx([float(r["TRAIN_LOSS"]) for r in rows],
                                                                       rel=1e-9)


def test_report_from_the_window(win, runs, qtbot, tmp_path):
    b = win.runs_browser
    b.select_ids([runs["a"].name, runs["b"].name])
    with qtbot.waitSignal(b.reportWritten, timeout=30000) as sig:
        b.report_selected(str(tmp_path / "r.html"))
    text = sig.args[0].read_text(encoding="utf-8")
    assert "<svg" in text and format_value(status(runs["a"])["test_metrics"]["NMSE"], "dB") in text


def test_menus_and_dock_toggle(win, qtbot):
    texts = [a.text() for a in win.export_menu.actions()]
    assert len(texts) == 3 and texts[0].startswith("PNG (3.5 × 2.6 in, 300 dpi)")
    menu_texts = [a.text() for a in win.psd_panel.plot.getViewBox().menu.actions()]
    assert any(t.startswith("Export PNG (3.5 × 2.6 in") for t in menu_texts) and "Export SVG…" in menu_texts
    assert not win.runs_dock.isVisible()
    with qtbot.waitSignal(win.runs_browser.rowsLoaded, timeout=20000):
        win.runs_dock.toggleViewAction().trigger()  # showing the dock reads the index again
    assert win.runs_dock.isVisible()


def test_open_draws_the_runs_plots_one_panel_per_pass_then_says_opened(win, runs, monkeypatch):
    """Reopening a run (issue 28, the longest stall): the replay's slot draws no data panel itself, each is drawn
    in an event-loop pass of its own, and ``runOpened`` comes after the last."""
    from dpd_desktop.runs.replay import load_replay

    from PySide6.QtWidgets import QApplication

    app, b = QApplication.instance(), win.runs_browser
    replay = load_replay(runs["a"])
    passes, drawn, opened = [0], [], []
    draw = win.plots._draw_panel
    monkeypatch.setattr(win.plots, "_draw_panel",
                        lambda panel, plots, label: (drawn.append((panel.title, passes[0])), draw(panel, plots, label)))
    b.runOpened.connect(lambda r: opened.append(passes[0]))
    b._show_replay(replay)  # the replay job's done slot
    assert drawn == [] and opened == [] and win.epoch_table.rowCount() == len(replay.history)
    while not opened and passes[0] < 500:
        passes[0] += 1
        app.processEvents()
    assert [t for t, _ in drawn] == [p.title for p in (win.psd_panel, win.amam_panel, win.ampm_panel,
                                                       win.time_panel)]
    at = [p for _, p in drawn]
    assert all(b > a for a, b in zip(at, at[1:])) and opened[0] > at[-1], (drawn, opened)
    assert win.plots.last_plots is replay.plots
