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
from dpd_desktop.gui.panels.base import CurveSet, GridAxis, IntegerAxis, LogAxis, UniformScatter, scatter_item

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


def test_the_first_epoch_end_lays_the_panels_out_before_their_one_paint(make_window, qtbot):
    """The first data shows the axes' values (taller bottom axes): each panel's plots take their new geometry before
    the paint, which is the only one, and the geometry stays as it was painted."""
    from dpd_desktop.runs.events import EpochEnded

    w = make_window()
    w.set_dataset(FakeDataset())
    for _ in range(20):
        QApplication.processEvents()
    panels = [w.learning_panel, w.psd_panel, w.amam_panel, w.ampm_panel, w.time_panel]
    empty = [p._plots[0].getViewBox().geometry() for p in panels]
    paints = _Paints()
    QApplication.instance().installEventFilter(paints)
    try:
        w.runs._on_epoch_ended(EpochEnded(epoch=0, epochs=10, row=make_row(0, 10), is_best=True, best_epoch=0,
                                     best_value=-20.0, selection_metric="VAL_NMSE", epoch_seconds=1.0,
                                     plots=make_plotdata()))
        w.plots._timer.stop()
        w.plots.flush()
        for _ in range(30):
            QApplication.processEvents()
        painted = [p._plots[0].getViewBox().geometry() for p in panels]
        for _ in range(10):
            QApplication.processEvents()
    finally:
        QApplication.instance().removeEventFilter(paints)
    for name in ("LearningPanel", "PSDPanel", "AMAMPanel", "AMPMPanel", "TimeDomainPanel"):
        assert paints.count[name] == 1, dict(paints.count)
    for p, before, at_paint in zip(panels, empty, painted):
        assert at_paint.height() < before.height()  # the axes' values took room
        assert p._plots[0].getViewBox().geometry() == at_paint
    assert all(p.has_data() for p in panels)


def _bin_extremes(values: np.ndarray, size: int) -> set[int]:
    """Each bin's lowest and highest finite value's epoch, computed directly (the first of a bin without any)."""
    out = set()
    for start in range(0, len(values), size):
        chunk = values[start:start + size]
        if np.all(np.isnan(chunk)):
            out.add(start)
        else:
            out |= {start + int(np.nanargmin(chunk)), start + int(np.nanargmax(chunk))}
    return out | {len(values) - 1}


def test_learning_curve_holds_each_bins_extremes_after_many_epochs_and_after_a_clear(qtbot):
    lp = LearningPanel()
    qtbot.addWidget(lp)
    rng = np.random.default_rng(3)
    nmse = -20 - 10 * np.log10(np.arange(1, 4001)) + rng.normal(0, 1.0, 4000)
    nmse[1500:1540] = np.nan  # epochs without a value
    for run in range(2):  # the second run other values: nothing of the first one's bins is kept
        n = 2600 if run == 0 else 4000
        values = nmse if run == 0 else nmse[::-1].copy()
        for e in range(n):
            lp.append_row({"EPOCH": e, "TRAIN_LOSS": 1.0 / (e + 1), "VAL_NMSE": values[e]})
            if e in (999, 1000, 1777, 2047, 2048, n - 1):  # every epoch drawn, then bins of 4, 8
                size = lp.bin_size()
                assert size == (1 if e < 1000 else 4 if e < 2000 else 8)
                x, y = lp._curves["val_nmse"].getData()
                want = sorted(_bin_extremes(values[:e + 1], size))
                assert list(x) == [float(i) for i in want]
                np.testing.assert_array_equal(y, values[want])
                assert len(x) <= LearningPanel.MAX_DRAWN + 1
        lp.clear_data()
        assert lp.n_epochs == 0 and lp.point_count() == 0


def test_a_cached_measurement_is_drawn_at_the_new_range_when_the_prediction_moves_it(qtbot):
    """The measurement, unchanged, is painted from its pixmap; a prediction 1.6 times larger changes the view's range:
    the picture is the one of a panel that drew the second data only (antialiased edges within a few levels; a point
    drawn at the first range would be off by whole pixels, far more than that)."""
    first, second = make_plotdata(seed=4), make_plotdata(seed=4, scale=1.6)
    panels, tops = [], []
    for data in ((first, second), (second,), (first,)):
        p = AMAMPanel(show_legend=False)
        p.resize(372, 390)
        qtbot.addWidget(p)
        p.show()
        qtbot.waitExposed(p)
        for d in data:
            p.update_from(d, "validation")
            p.settle_ranges()
            p.repaint()
            QApplication.processEvents()
            tops.append(p.plot.getViewBox().viewRange()[1][1])
        panels.append(p)
    assert tops[1] > 1.3 * tops[0]  # the second data moved the range
    cached = pg.QtWidgets.QGraphicsItem.CacheMode.DeviceCoordinateCache
    assert panels[0].points.items["measured y"].scatter.cacheMode() == cached
    assert panels[1].points.items["measured y"].scatter.cacheMode() != cached
    a, b, old = (_pixels(p).astype(int) for p in panels)
    assert a.shape == b.shape == old.shape
    assert int((np.abs(a - b) > 16).sum()) == 0
    assert int((np.abs(old - b) > 16).sum()) > 1000  # the first range's picture is another one


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


def _grid_plot(qtbot, axis_type, log_y: bool = False):
    axes = {"left": axis_type("left"), "bottom": axis_type("bottom")}
    w = pg.PlotWidget(axisItems=axes)
    w.resize(331, 237)  # an odd size: the grid lines fall between pixels
    qtbot.addWidget(w)
    x = np.linspace(0.3, 97.1, 400)
    y = 10 ** (-1 - 3 * x / 100) if log_y else np.sin(x / 7) * 3.3 + 0.17
    w.plot(x, y, pen=pg.mkPen("b", width=2))
    w.getPlotItem().setLogMode(x=False, y=log_y)
    w.getPlotItem().showGrid(x=True, y=True, alpha=0.25)
    for ax in axes.values():
        ax.setStyle(maxTickLevel=1)
    w.show()
    qtbot.waitExposed(w)
    for _ in range(5):
        QApplication.processEvents()
    return w


@pytest.mark.parametrize("ours, log_y", [(GridAxis, False), (LogAxis, True), (IntegerAxis, False)])
def test_grid_axis_fills_the_pixels_of_pyqtgraphs_grid_lines(qtbot, ours, log_y):
    # the same ticks and labels, drawn as pyqtgraph draws them (the grid lines in its picture)
    plain = type("Plain", (ours,), {"paint": pg.AxisItem.paint, "drawPicture": pg.AxisItem.drawPicture})
    ref = _grid_plot(qtbot, plain, log_y)
    new = _grid_plot(qtbot, ours, log_y)
    left = new.getPlotItem().getAxis("left")
    assert left._fills[0] is not None  # painted the fast way: filled rectangles, not lines
    rects, strips = new.getPlotItem().getAxis("bottom")._fills[1]
    assert len(left._fills[1][0]) >= 3 and len(strips) >= 3 and not rects
    assert int((_pixels(ref) != _pixels(new)).sum()) == 0
    # an export (a scaled painter, no viewport) draws the lines as pyqtgraph does
    from pyqtgraph.exporters import ImageExporter

    images = []
    for w in (ref, new):
        ex = ImageExporter(w.getPlotItem())
        ex.parameters()["width"] = 700
        img = ex.export(toBytes=True)
        images.append(np.frombuffer(bytes(img.constBits()), np.uint8).reshape(img.height(), img.bytesPerLine()))
    assert int((images[0] != images[1]).sum()) == 0


def test_curve_set_redraws_only_the_series_that_changed(qtbot):
    w = pg.PlotWidget()
    qtbot.addWidget(w)
    curves = CurveSet(w.getPlotItem(), "line")
    x = np.arange(50, dtype=np.float32)
    y, p = np.sin(x / 5), np.cos(x / 5)
    curves.set({"y": (x, y), "p": (x, p)})
    calls = collections.Counter()
    for name, item in curves.items.items():
        item.setData = (lambda f, name=name: lambda *a, **k: (calls.update([name]), f(*a, **k)))(item.setData)
    curves.set({"y": (x.copy(), y.copy()), "p": (x, p + 1)})  # the measurement again (new arrays), a new prediction
    assert calls == {"p": 1}
    cached = pg.QtWidgets.QGraphicsItem.CacheMode.DeviceCoordinateCache
    assert curves.items["y"].curve.cacheMode() == cached  # painted from its pixmap while it stays
    assert curves.items["p"].curve.cacheMode() != cached
    np.testing.assert_array_equal(curves.items["p"].getData()[1], p + 1)
    p2 = p + 1
    curves.set({"y": (x, y), "p": (x, p2)})
    p2[:] = 7.0  # the caller reuses its array: the next update with it is a change
    curves.set({"y": (x, y), "p": (x, p2)})
    assert calls == {"p": 2}
    np.testing.assert_array_equal(curves.items["p"].getData()[1], np.full(50, 7.0))
    curves.set({"p": (x, p2)})  # "y" absent: hidden, and drawn again when it comes back after a clear
    assert not curves.items["y"].isVisible()
    curves.clear()
    curves.set({"y": (x, y), "p": (x, p2)})
    assert calls == {"p": 4, "y": 2} and curves.items["y"].isVisible()
    assert curves.items["y"].curve.cacheMode() != cached  # drawn anew: no stale pixmap
    np.testing.assert_array_equal(curves.items["y"].getData()[1], y.astype(np.float64))


@pytest.fixture(autouse=True)
def _no_preload(monkeypatch):
    """These windows need no PyTorch."""
    from dpd_desktop.gui import main_window

    monkeypatch.setattr(main_window.MainWindow, "_start_preload", lambda self: None)
