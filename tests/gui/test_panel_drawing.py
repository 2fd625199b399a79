"""The panels' cheaper drawing (gui/panels/base.py; pytest-qt, offscreen) shows the same pixels and values: the
one-style scatter renders exactly as pyqtgraph's ScatterPlotItem, keeps one symbol in its atlas, and an epoch end
paints each panel once."""
from __future__ import annotations

import collections

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication

from dpd_desktop.gui.panels import AMAMPanel, LearningPanel, PSDPanel
from dpd_desktop.gui.panels.base import UniformScatter, scatter_item

from gui_fakes import FakeDataset, make_plotdata, make_row


def _pixels(widget) -> np.ndarray:
    img = widget.grab().toImage()
    return np.frombuffer(bytes(img.constBits()), np.uint8).reshape(img.height(), img.bytesPerLine())


def _plot_with(qtbot, item, x, y, **data):
    w = pg.PlotWidget()
    w.resize(300, 220)
    w.getPlotItem().getAxis("left").setWidth(40)  # the same layout for every plot, whatever the tick texts
    w.getPlotItem().getAxis("bottom").setHeight(30)
    qtbot.addWidget(w)
    w.addItem(item)
    item.setData(x, y, **data)
    w.setXRange(0, 1, padding=0)
    w.setYRange(0, 1, padding=0)
    w.show()
    qtbot.waitExposed(w)
    for _ in range(5):
        QApplication.processEvents()
    return w


def test_uniform_scatter_draws_the_pixels_of_pyqtgraphs_scatter(qtbot):
    rng = np.random.default_rng(0)
    x, y = rng.random(2000), rng.random(2000)
    brush = pg.mkBrush(30, 120, 200, 110)
    opts = dict(symbol="o", size=3, pen=None, brush=brush)
    ref = _plot_with(qtbot, pg.ScatterPlotItem(**opts), x, y)
    new = _plot_with(qtbot, UniformScatter(**opts), x, y)
    assert int((_pixels(ref) != _pixels(_plot_with(qtbot, pg.ScatterPlotItem(**opts), x, y))).sum()) == 0
    assert int((_pixels(ref) != _pixels(new)).sum()) == 0
    # a per-spot style takes pyqtgraph's own path: still the same picture
    brushes = [pg.mkBrush(200, 0, 0) if i % 2 else brush for i in range(len(x))]
    ref2 = _plot_with(qtbot, pg.ScatterPlotItem(symbol="o", size=3, pen=None), x, y, brush=brushes)
    new2 = _plot_with(qtbot, UniformScatter(symbol="o", size=3, pen=None), x, y, brush=brushes)
    assert int((_pixels(ref2) != _pixels(new2)).sum()) == 0


def test_uniform_scatter_updated_in_place_draws_what_a_new_scatter_draws(qtbot):
    rng = np.random.default_rng(1)
    brush = pg.mkBrush(30, 120, 200, 110)
    opts = dict(symbol="o", size=3, pen=None, brush=brush)
    item = UniformScatter(**opts)
    w = _plot_with(qtbot, item, rng.random(2000), rng.random(2000))
    record = item.data
    for _ in range(3):  # later updates of as many points write into the same record array
        x, y = rng.random(2000), rng.random(2000)
        item.setData(x, y, **opts)
        w.repaint()
    assert item.data is record
    ref = _plot_with(qtbot, pg.ScatterPlotItem(**opts), x, y)
    assert int((_pixels(ref) != _pixels(w)).sum()) == 0
    fresh = pg.ScatterPlotItem(**opts)
    fresh.setData(x, y, **opts)
    for field in ("x", "y", "size", "visible"):
        np.testing.assert_array_equal(item.data[field], fresh.data[field])
    assert item.getData()[0] is not x and np.array_equal(item.getData()[0], x)
    # another count of points, or a per-spot style: pyqtgraph's own way (a new record array)
    item.setData(x[:10], y[:10], **opts)
    assert item.data is not record and len(item.data) == 10
    record = item.data
    item.setData(x[:10], y[:10], symbol="o", size=3, pen=None, brush=[brush] * 10)
    assert item.data is not record


def test_scatter_item_keeps_its_data_and_one_symbol(qtbot):
    item = scatter_item(pen=None, symbol="o", symbolSize=3, symbolPen=None, symbolBrush=pg.mkBrush("r"), name="y")
    assert isinstance(item.scatter, UniformScatter) and item.scatter.parentItem() is item
    w = _plot_with(qtbot, item, np.linspace(0, 1, 50), np.linspace(1, 0, 50))
    for k in range(5):  # pyqtgraph copies the brush at every setData: the atlas still holds one symbol
        item.setData(np.linspace(0, 1, 50), np.linspace(0, 1, 50) ** (k + 1))
        w.repaint()
    x, y = item.getData()
    np.testing.assert_array_equal(y, np.linspace(0, 1, 50) ** 5)
    assert len(item.scatter.fragmentAtlas) == 1
    assert item.name() == "y"


class _Paints(QObject):
    def __init__(self):
        super().__init__()
        self.count = collections.Counter()

    def eventFilter(self, obj, ev):  # noqa: N802 (Qt name)
        if ev.type() == QEvent.Type.Paint and isinstance(obj, pg.GraphicsView):
            self.count[type(obj).__name__] += 1
        return False


def test_an_epoch_end_paints_each_panel_once(make_window, qtbot):
    from dpd_desktop.runs.events import EpochEnded

    w = make_window()
    w.set_dataset(FakeDataset())
    plots = make_plotdata()

    def epoch_end(e):
        row = make_row(e, 10)
        w.runs._on_epoch_ended(EpochEnded(epoch=e, epochs=10, row=row, is_best=True, best_epoch=e,
                                          best_value=-20.0, selection_metric="VAL_NMSE", epoch_seconds=1.0,
                                          plots=plots))
        w.plots._timer.stop()
        w.plots.flush()
        for _ in range(20):
            QApplication.processEvents()

    for e in range(3):  # the first ones create the curves and settle the layout
        epoch_end(e)
    paints = _Paints()
    QApplication.instance().installEventFilter(paints)
    try:
        epoch_end(3)
    finally:
        QApplication.instance().removeEventFilter(paints)
    for name in ("LearningPanel", "PSDPanel", "AMAMPanel", "AMPMPanel", "TimeDomainPanel"):
        assert paints.count[name] == 1, dict(paints.count)
    assert w.learning_panel.n_epochs == 4
    # the PSD lines are 1 px wide (Qt's fast path for antialiased lines)
    assert {it.opts["pen"].widthF() for it in w.psd_panel.curves.items.values()} == {PSDPanel.LINE_WIDTH}


def test_learning_and_amam_values_unchanged_by_the_faster_items(qtbot):
    lp = LearningPanel()
    qtbot.addWidget(lp)
    rows = [make_row(e, 4) for e in range(4)]
    for r in rows:
        lp.append_row(r)
    x, y = lp._curves["val_nmse"].getData()
    assert list(x) == [0.0, 1.0, 2.0, 3.0] and list(y) == [float(r["VAL_NMSE"]) for r in rows]
    p = AMAMPanel()
    qtbot.addWidget(p)
    pd = make_plotdata()
    p.update_from(pd)
    for name, values in pd.amam.items():
        gx, gy = p.points.items[name].getData()
        np.testing.assert_array_equal(gx, np.asarray(pd.amam_in, dtype=np.float64))
        np.testing.assert_array_equal(gy, np.asarray(values, dtype=np.float64))


@pytest.fixture(autouse=True)
def _no_preload(monkeypatch):
    """These windows need no PyTorch."""
    from dpd_desktop.gui import main_window

    monkeypatch.setattr(main_window.MainWindow, "_start_preload", lambda self: None)
