"""Common machinery of the plot panels: one GraphicsLayoutWidget per panel, curves created once and updated with
``setData``, PNG export through pyqtgraph's ImageExporter (atomic write)."""
from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np
import pyqtgraph as pg
from pyqtgraph.exporters import ImageExporter
from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QPoint, QRect, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QImage, QPainter, QTransform
from PySide6.QtWidgets import QGraphicsItem

from ...atomic import atomic_write_bytes
from .. import theme

#: the left axis' width [px], room for its label and 5-character tick values
LEFT_AXIS_WIDTH = 56
LINE_OPTS = dict(clipToView=True, autoDownsample=True, downsampleMethod="peak", connect="finite")


def nowrap(html: str) -> str:
    """Rich text kept on one line when a label wraps (:meth:`PlotPanel.fit_label` breaks between such pieces)."""
    return f"<span style='white-space:nowrap'>{html}</span>"


def as_f64(a) -> np.ndarray:
    """A 1-D float array from anything array-like (None → empty)."""
    if a is None:
        return np.empty(0)
    return np.asarray(a, dtype=np.float64).reshape(-1)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal shapes and values, NaN equal to NaN."""
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


class UniformScatter(pg.ScatterPlotItem):
    """A ScatterPlotItem whose spots share the item's one style (symbol, size, pen, brush: no per-spot style): the
    symbol atlas is asked once per update instead of once per spot. pyqtgraph 0.14 builds a style key per spot in
    ``updateSpots``; on DPA_160MHz plot data (2,000 points per signal) that was 4 of the 6 ms of an AM/AM update
    (cProfile, benchmarks/bench_gui_responsiveness.py --part epoch-end). The drawing is pyqtgraph's own."""

    _STYLE_FIELDS = ("symbol", "size", "pen", "brush")
    #: setData keywords the in-place update takes (PlotDataItem passes these); others go pyqtgraph's way
    _IN_PLACE_KEYS = frozenset({"x", "y", "pen", "brush", "symbol", "size", "pxMode", "antialias", "useCache", "name",
                                "data"})

    def setData(self, *args, **kargs):  # noqa: N802 (pyqtgraph name)
        """pyqtgraph's ``setData``; new x, y of as many points as shown, in one style, are written into the record
        array in place: pyqtgraph builds a new one per update, and ``numpy.empty`` of its dtype (object fields) took
        1.7 ms per 2,000 points, 7 ms of an epoch end's AM/AM and AM/PM updates (bench_gui_responsiveness.py
        --part epoch-end). The spots' state after either way is the same (tests/gui/test_panel_drawing.py)."""
        if len(args) == 2:
            kargs = dict(kargs, x=args[0], y=args[1])
            args = ()
        if args or not self._update_in_place(kargs):
            super().setData(*args, **kargs)
            self._uniform = self._uniform_style(kargs)

    @classmethod
    def _uniform_style(cls, kargs) -> bool:
        return (set(kargs) <= cls._IN_PLACE_KEYS and kargs.get("data") is None
                and not any(isinstance(kargs.get(k), (list, tuple, np.ndarray)) for k in cls._STYLE_FIELDS))

    def _update_in_place(self, kargs) -> bool:
        """Write x, y (and the one style) into the existing record array; False when pyqtgraph's way is needed (a
        per-spot style or data, another count of points, hover)."""
        if not getattr(self, "_uniform", False) or not self._uniform_style(kargs) or self.opts["hoverable"]:
            return False
        x, y = kargs.get("x"), kargs.get("y")
        if x is None or y is None:
            return False
        x, y = np.asarray(x), np.asarray(y)
        data = self.data
        if x.ndim != 1 or x.shape != y.shape or len(x) != len(data) or len(x) == 0:
            return False
        data["item"][...] = None  # as pyqtgraph: SpotItems refer to the old rows
        data["x"] = x
        data["y"] = y
        self._maxSpotWidth = 0
        self._maxSpotPxWidth = 0
        for k in ("name", "antialias", "useCache"):
            if k in kargs:
                self.opts[k] = kargs[k]
        if "pxMode" in kargs:
            self.setPxMode(kargs["pxMode"])
        for k in self._STYLE_FIELDS:
            if k in kargs:
                getattr(self, "set" + k[0].upper() + k[1:])(kargs[k], update=False, dataSet=data)
        if "data" in kargs:
            self.setPointData(kargs["data"], dataSet=data)
        self.prepareGeometryChange()
        self.informViewBoundsChanged()
        self.bounds = [None, None]
        self.invalidate()
        self.updateSpots(data)
        self.sigPlotChanged.emit(self)
        return True

    def updateSpots(self, dataSet=None):  # noqa: N802, N803 (pyqtgraph names)
        data = self.data if dataSet is None else dataSet
        if not (self.opts["pxMode"] and self.opts["useCache"]) or self.opts["hoverable"]:
            return super().updateSpots(dataSet)
        mask = data["sourceRect"]["w"] == 0
        if np.any(mask):
            for name in self._STYLE_FIELDS:  # a per-spot style somewhere: pyqtgraph's own way
                if not np.all(np.equal(data[name][mask], _SCATTER_DEFAULTS[name])):
                    return super().updateSpots(dataSet)
            first = np.flatnonzero(mask)[:1]
            symbol, size, pen, brush = (col[0] for col in self._style(list(self._STYLE_FIELDS), data=data, idx=first))
            pen, brush = self._same_objects(pen, brush)
            data["sourceRect"][mask] = self.fragmentAtlas[[(symbol, size, pen, brush)]][0]
            self._maybeRebuildAtlas()
        self._updateMaxSpotSizes(data=data)
        self.invalidate()
        return None

    def _same_objects(self, pen, brush):
        """The pen and brush first seen with these values: pyqtgraph copies them at every ``setData`` and keys its
        symbol atlas by object, so each update would render the symbol again and grow the atlas."""
        seen = self.__dict__.setdefault("_seen_styles", [])
        for p, b in seen:
            if p == pen and b == brush:
                return p, b
        seen.append((pen, brush))
        del seen[:-8]
        return pen, brush


_SCATTER_DEFAULTS = {"symbol": None, "size": -1, "pen": None, "brush": None}  # pyqtgraph's "no per-spot style"


def scatter_item(**opts) -> pg.PlotDataItem:
    """A PlotDataItem drawing points (``opts``: symbol, symbolSize, symbolBrush, …) through :class:`UniformScatter`:
    the PlotDataItem's own ScatterPlotItem is swapped for one before any data is set (exports, legends and
    ``getData`` see an ordinary PlotDataItem)."""
    item = pg.PlotDataItem(**opts)
    old = item.scatter
    old.sigClicked.disconnect(item.scatterClicked)
    old.sigHovered.disconnect(item.sigPointsHovered)
    old.setParentItem(None)
    new = UniformScatter()
    new.setParentItem(item)
    new.sigClicked.connect(item.scatterClicked)
    new.sigHovered.connect(item.sigPointsHovered)
    item.scatter = new
    return item


class CurveSet:
    """Named plot items on one PlotItem, created on first use and then only updated.

    ``kind`` is ``"line"`` (PlotDataItem with clip-to-view and peak downsampling) or ``"scatter"`` (points, no
    downsampling since x is not monotonic). Items whose name is absent from an update are hidden, not deleted; a
    series whose x and y equal those it shows is left as it is and painted from a pixmap cache until it changes (at
    each epoch end the measurement and the input are the same arrays again, only the prediction changes).
    ``legend=False``: the items stay out of the plot's legend (e.g. a curve drawn over the same signal's points);
    ``z_offset`` is added to their stacking order.
    """

    def __init__(self, plot: pg.PlotItem, kind: str = "line", symbol_size: float = 3.0,
                 ignore_bounds: Iterable[str] = (), legend: bool = True, z_offset: float = 0.0):
        self.plot = plot
        self.kind = kind
        self.symbol_size = symbol_size
        self.ignore_bounds = {r for r in ignore_bounds}
        self.legend = legend
        self.z_offset = z_offset
        self.items: dict[str, pg.PlotDataItem] = {}
        self._shown: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # name → (x, y) as drawn, float64

    def _item(self, name: str, width: float = 1.5) -> pg.PlotDataItem:
        item = self.items.get(name)
        if item is None:
            idx = len(self.items)
            role = theme.signal_role(name)
            label = name if self.legend else None
            if self.kind == "scatter":
                item = scatter_item(pen=None, symbol="o", symbolSize=self.symbol_size, symbolPen=None,
                                    symbolBrush=theme.brush_for(name, idx), name=label)
            else:
                item = pg.PlotDataItem(pen=theme.pen_for(name, idx, width), name=label, **LINE_OPTS)
            # The error is drawn below the signals, the model above the measurement.
            item.setZValue({"error": -1, "x": 0, "y": 1, "u": 2, "yhat": 3}.get(role, 0) + self.z_offset)
            # Named items join the plot's legend (if it has one) automatically.
            self.plot.addItem(item, ignoreBounds=role in self.ignore_bounds)
            self.items[name] = item
        return item

    def set(self, data: Mapping[str, tuple[np.ndarray, np.ndarray]],
            widths: Mapping[str, float] | None = None) -> None:
        """Update every named series (``widths``: pen width for series created now); hide those not given."""
        for name, (x, y) in data.items():
            item = self._item(name, (widths or {}).get(name, 1.5))
            x, y = as_f64(x), as_f64(y)
            shown = self._shown.get(name)
            same = shown is not None and _same(x, shown[0]) and _same(y, shown[1])
            if not same:
                item.setData(x, y)
                self._shown[name] = (x.copy(), y.copy())  # the caller may reuse its arrays
            # unchanged: painted from a pixmap of itself (Qt renders it again when the view's range changes)
            mode = QGraphicsItem.CacheMode.DeviceCoordinateCache if same else QGraphicsItem.CacheMode.NoCache
            for part in (item.curve, item.scatter):
                if part.cacheMode() != mode:
                    part.setCacheMode(mode)
            item.setVisible(True)
        for name, item in self.items.items():
            if name not in data:
                item.setVisible(False)

    def clear(self) -> None:
        self._shown.clear()
        for item in self.items.values():
            item.setData([], [])

    def point_count(self) -> int:
        """Total number of points currently held by visible items."""
        n = 0
        for item in self.items.values():
            if item.isVisible():
                x, _ = item.getData()
                n += 0 if x is None else len(x)
        return n


class FittedLabel(pg.LabelItem):
    """A LabelItem of a :class:`PlotPanel` (read-outs, legend rows) that wraps to the panel's width when its text is
    wider (:meth:`PlotPanel.fit_label`), instead of widening the panel's scene past the panel."""

    def __init__(self, text: str = " ", panel: "PlotPanel | None" = None, **args):
        self._panel = panel
        super().__init__(text, **args)

    def setText(self, text, **args):  # noqa: N802 (pyqtgraph name)
        super().setText(text, **args)
        if getattr(self, "_panel", None) is not None:
            self._panel.fit_label(self)


class PlotPanel(pg.GraphicsLayoutWidget):
    """Base class of the plot panels.

    Subclasses build their PlotItems in ``__init__`` and implement :meth:`update_from` (PlotData) and/or
    :meth:`append_row` (one history row). ``title`` is shown above the plot and used for export; ``file_stem`` names
    the exported PNG (``plots/<file_stem>.png``).
    """

    title = "Plot"
    file_stem = "plot"
    #: Shown in the middle of the empty panel, instead of 0–1 ticks that mean nothing.
    placeholder = "Plots appear when\nthe first epoch ends"
    #: Emitted when the user clicks into the panel (the main window tracks the "current" plot for Ctrl+E).
    activated = Signal(object)

    #: the scene's margins left and right of its layout [px] (``ci.setContentsMargins``)
    MARGINS = (4, 18)

    def __init__(self, parent=None, show_legend: bool = True):
        super().__init__(parent=parent)
        self.show_legend = show_legend
        self.setMinimumSize(260, 200)
        self.ci.setContentsMargins(self.MARGINS[0], 4, self.MARGINS[1], 4)
        # GraphicsLayoutWidget puts its layout's addLabel on the instance: ours instead
        self.addLabel = self.add_fitted_label
        self._plots: list[pg.PlotItem] = []
        self._placeholder_item: pg.TextItem | None = None
        self._empty_look: bool | None = None

    # -- texts that fit the panel ----------------------------------------------------------------------------------
    def add_fitted_label(self, text: str = " ", row=None, col=None, rowspan: int = 1, colspan: int = 1, **args):
        """pyqtgraph's ``addLabel`` (which it is, on a panel), with a :class:`FittedLabel`."""
        label = FittedLabel(text, self, **args)
        self.ci.addItem(label, row, col, rowspan, colspan)
        return label

    def _text_width(self) -> float:
        """The width [px] a text of the panel may take: the panel's, less the scene's margins and a little air."""
        return max(40.0, self.width() - sum(self.MARGINS) - 8)

    def fit_label(self, label: pg.LabelItem, width: float | None = None) -> None:
        """Wrap ``label`` (a title or read-out) at ``width`` (default :meth:`_text_width`) when its text is wider,
        else let it take its natural width: a label's minimum width is its text's (pyqtgraph), and a long title or
        ACLR read-out made the scene wider than the panel, which then showed it clipped (half the PSD's axis and
        the DPD's ACLR read-out at 1280 px)."""
        width = self._text_width() if width is None else width
        item = label.item
        item.setTextWidth(-1)
        if item.boundingRect().width() > width:
            item.setTextWidth(width)
            option = item.document().defaultTextOption()
            option.setAlignment({"left": Qt.AlignmentFlag.AlignLeft, "right": Qt.AlignmentFlag.AlignRight}.get(
                label.opts.get("justify"), Qt.AlignmentFlag.AlignHCenter))
            item.document().setDefaultTextOption(option)
        label.updateMin()
        label.resizeEvent(None)

    def _title_width(self, plot: pg.PlotItem, width: float | None = None) -> float:
        """The width a plot's title may take: above the view box, between the plot's left and right axes."""
        width = self._text_width() if width is None else width
        for name in ("left", "right"):
            ax = plot.getAxis(name)
            if ax.isVisible():
                width -= max(ax.width(), ax.minimumWidth())
        return max(40.0, width)

    def fit_title(self, plot: pg.PlotItem, width: float | None = None) -> None:
        """:meth:`fit_label` on a plot's title, and its row as high as the title's lines (pyqtgraph fixes that row's
        height at ``setTitle``, to one line: a wrapped title then pushed the plot's bottom axis out of the panel)."""
        label = plot.titleLabel
        self.fit_label(label, self._title_width(plot, width))
        if label.isVisible():
            plot.layout.setRowFixedHeight(0, label.minimumHeight())

    def fit_labels(self, width: float | None = None) -> None:
        """:meth:`fit_label` on the plots' titles and the layout's labels."""
        for plot in self._plots:
            self.fit_title(plot, width)
        for item in self.ci.items:
            if isinstance(item, pg.LabelItem):
                self.fit_label(item, width)

    def resizeEvent(self, ev):  # noqa: N802 (Qt name)
        # the labels first: the layout below then fits the new width (pyqtgraph calls this with None while building)
        if ev is not None and getattr(self, "_plots", None) is not None and not getattr(self, "closed", False):
            self.fit_labels(max(40.0, ev.size().width() - sum(self.MARGINS) - 8))
        super().resizeEvent(ev)
        if ev is not None and getattr(self, "_plots", None) is not None:
            # The layout took its new size while its minimum was still the wider labels' (their new minimum reaches
            # it with Qt's next layout pass): a narrowed panel kept its old width, its right side clipped (AM/AM's
            # last tick at 1280 px). Once that pass has run, the layout is sized to the panel again.
            QTimer.singleShot(0, self, self._fit_layout)

    def _fit_layout(self) -> None:
        if not getattr(self, "closed", False) and self.ci.geometry() != self.range:
            self.ci.setGeometry(self.range)

    # -- building helpers ------------------------------------------------------------------------------------------
    def _add_plot(self, row: int = 0, col: int = 0, title: str | None = None, left: str = "", bottom: str = "",
                  left_units: str | None = None, bottom_units: str | None = None, axisItems=None) -> pg.PlotItem:
        axisItems = {"left": GridAxis("left"), "bottom": GridAxis("bottom"), **(axisItems or {})}
        plot = self.addPlot(row=row, col=col, axisItems=axisItems)
        if title:
            plot.setTitle(title, size="10pt")
            self.fit_title(plot)
        plot.setLabel("left", left, units=left_units)
        plot.setLabel("bottom", bottom, units=bottom_units)
        for ax in ("left", "bottom"):
            plot.getAxis(ax).enableAutoSIPrefix(False)
            # Major ticks and one minor level (pyqtgraph's default draws two): the grid is drawn by the axes and
            # replayed at every repaint; on DPA_160MHz plot data this cut the repaint of an epoch end from 137 to
            # 83-92 ms on the 2-core machine (benchmarks/bench_gui_responsiveness.py --part epoch-end).
            plot.getAxis(ax).setStyle(maxTickLevel=1)
        for ax in ("top", "right"):  # hidden: no SI prefix label re-rendered at every range change
            plot.getAxis(ax).enableAutoSIPrefix(False)
        plot.showGrid(x=True, y=True, alpha=0.25)
        plot.setMenuEnabled(True)
        # A fixed width (a panel may set another): the title's room beside it is known before the first tick
        # labels (pyqtgraph widens an axis at its paint), see fit_labels.
        plot.getAxis("left").setWidth(LEFT_AXIS_WIDTH)
        self._plots.append(plot)
        return plot

    def _add_legend(self, plot: pg.PlotItem, offset=(-8, 8), columns: int = 1, force: bool = False):
        """A compact legend (only when the panel shows legends, or ``force``); None otherwise."""
        if not (self.show_legend or force):
            return None
        bg, fg = theme.palette_colors()
        legend = plot.addLegend(offset=offset, labelTextSize="9pt", verSpacing=-8, colCount=columns)
        c = QColor(bg)
        c.setAlpha(190)
        legend.setBrush(pg.mkBrush(c))
        legend.setLabelTextColor(fg)
        return legend

    # -- data -----------------------------------------------------------------------------------------------------
    def update_from(self, plots, label: str = "") -> None:  # pragma: no cover - overridden
        """Show one :class:`~dpd_desktop.runs.events.PlotData`."""

    def append_row(self, row: Mapping) -> None:  # pragma: no cover - overridden where it applies
        """Append one history row (learning curves only)."""

    def clear_data(self) -> None:  # pragma: no cover - overridden
        """Forget all data (a new run starts)."""

    def point_count(self) -> int:  # pragma: no cover - overridden
        """Number of points held (for tests and "is there anything to export")."""
        return 0

    def has_data(self) -> bool:
        return self.point_count() > 0

    def settle_ranges(self) -> None:
        """Compute the auto ranges and view matrices now, after new data, rather than at the next paint: pyqtgraph
        updates them in its paint preparation, and the items that follow the view then ask for a second paint of
        the panel (the learning panel painted twice per epoch end, 11 ms of the 48 ms on DPA_160MHz plot data,
        bench_gui_responsiveness.py --part epoch-end)."""
        # a changed axis or title size: the plots' new geometry now (their own layouts, then the panel's, which
        # shares the height out anew, then theirs again), not after the paint (a second and third paint)
        for layout in (*(p.layout for p in self._plots), self.ci.layout, *(p.layout for p in self._plots)):
            layout.activate()
        for _ in range(2):  # twice: a linked x axis moved by a later plot flags the earlier one again
            for plot in self._plots:
                vb = plot.getViewBox()
                vb.prepareForPaint()  # what pyqtgraph does before a paint: the auto range, then the view matrix

    def reset_view(self) -> None:
        """Back to auto range on every axis (a zoom of the previous run does not carry over)."""
        for plot in self._plots:
            plot.enableAutoRange()

    def _sync_empty(self) -> None:
        """Empty: no tick values and no grid, a placeholder text instead; with data: the axes come back."""
        empty = not self.has_data()
        if empty == self._empty_look or not self._plots:
            return
        self._empty_look = empty
        for plot in self._plots:
            for name in ("left", "bottom"):
                plot.getAxis(name).setStyle(showValues=not empty)
            plot.showGrid(x=not empty, y=not empty, alpha=0.25)
        if self._placeholder_item is None:
            _, fg = theme.palette_colors()
            self._placeholder_item = pg.TextItem(self.placeholder, color=fg, anchor=(0.5, 0.5))
            self._plots[0].addItem(self._placeholder_item, ignoreBounds=True)
        if empty:
            vb = self._plots[0].getViewBox()
            (x0, x1), (y0, y1) = vb.viewRange()
            self._placeholder_item.setPos((x0 + x1) / 2, (y0 + y1) / 2)
        self._placeholder_item.setVisible(empty)

    @property
    def shows_placeholder(self) -> bool:
        """The panel shows its placeholder text (no data)."""
        return bool(self._placeholder_item is not None and self._placeholder_item.isVisible())

    def set_source_label(self, label: str) -> None:
        """Show where the data came from (e.g. "validation · epoch 3") in the first plot's title."""
        if self._plots:
            # breaks only between the title and the label's "·" parts when the panel is narrow
            t = nowrap(self.title) + ("  —  " + " · ".join(nowrap(p) for p in label.split(" · ")) if label else "")
            self._plots[0].setTitle(t, size="10pt")
            self.fit_title(self._plots[0])

    # -- theme & export -------------------------------------------------------------------------------------------
    def apply_palette(self) -> None:
        """Re-read the application palette (light/dark switch) for background, axes and texts."""
        bg, fg = theme.palette_colors()
        self.setBackground(bg)
        pen = pg.mkPen(fg)
        for plot in self._plots:
            for name in ("left", "bottom", "right", "top"):
                ax = plot.getAxis(name)
                ax.setPen(pen)
                ax.setTextPen(pen)
            plot.titleLabel.setAttr("color", fg)
            plot.titleLabel.setText(plot.titleLabel.text)
            if plot.legend is not None:
                c = QColor(bg)
                c.setAlpha(190)
                plot.legend.setBrush(pg.mkBrush(c))
                plot.legend.setLabelTextColor(fg)
                for _, label in plot.legend.items:  # pyqtgraph stores the color but does not re-render
                    label.setText(label.text)
        if self._placeholder_item is not None:
            self._placeholder_item.setColor(fg)
        for item in self.ci.items:  # LabelItems of the layout (e.g. the PSD's ACLR read-out)
            if isinstance(item, pg.LabelItem) and item not in [p.titleLabel for p in self._plots]:
                item.setAttr("color", fg)
                item.setText(item.text)
        self.fit_labels()

    def render_image(self, width: int | None = None):
        """Render the panel's scene to a QImage (ImageExporter)."""
        exporter = ImageExporter(self.scene())
        if width:
            exporter.parameters()["width"] = int(width)
        return exporter.export(toBytes=True)

    def export_png(self, path: str | os.PathLike, width: int | None = None) -> Path:
        """Write the panel as PNG atomically (temporary file in the same folder, then ``os.replace``)."""
        return save_png_atomic(self.render_image(width), path)

    def mousePressEvent(self, ev):  # noqa: N802 (Qt name)
        self.activated.emit(self)
        super().mousePressEvent(ev)


class GridAxis(pg.AxisItem):
    """pyqtgraph's AxisItem whose grid lines are filled as 1-px rectangles when painted on the screen (Qt's raster
    engine draws a translucent aliased line pixel by pixel).

    In a view's viewport without scaling (a translation only, device pixel ratio 1) each grid line is filled onto
    the pixels Qt's aliased line covers (the columns and rows ``floor`` of its ends, both included), with the same
    colour: the same pixels. Elsewhere (an export, SVG, a scaled view) the lines are drawn as pyqtgraph draws them."""

    def __init__(self, *args, **kwargs):
        self._grid: list = []  # (pen, p1, p2) of the grid lines, kept out of pyqtgraph's picture
        self._fills: tuple = (None, None)  # (translation, (rects, strips)) of the last fast paint
        super().__init__(*args, **kwargs)

    def drawPicture(self, p, axisSpec, tickSpecs, textSpecs):  # noqa: N802 (pyqtgraph name)
        self._grid = list(tickSpecs) if self.grid is not False else []
        self._fills = (None, None)
        super().drawPicture(p, axisSpec, [] if self._grid else tickSpecs, textSpecs)

    def paint(self, p, opt, widget):
        if self.picture is None:
            self._grid = []
        super().paint(p, opt, widget)
        if not self._grid:
            return
        t = p.transform()
        # a view's viewport (an export renders the scene without one); the painter's device and engine are not
        # asked: PySide deletes the engine it wraps
        fills = None
        if widget is not None and t.type() in _UNSCALED and widget.devicePixelRatioF() == 1.0:
            fills = self._fills_at(t.dx(), t.dy())
        p.save()
        if fills is None:
            p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
            for pen, p1, p2 in self._grid:
                p.setPen(pen)
                p.drawLine(p1, p2)
        else:
            p.resetTransform()
            rects, strips = fills
            for rect, color in rects:
                p.fillRect(rect, color)
            for point, image in strips:  # a 1-px wide image: Qt fills a 1-px wide rectangle row by row
                p.drawImage(point, image)
        p.restore()

    def _fills_at(self, dx: float, dy: float):
        """The grid's (rects, strips) in device pixels under a translation by (dx, dy); None when a line is not a
        thin solid one along an axis."""
        key, fills = self._fills
        if key == (dx, dy):
            return fills
        rects, strips, images = [], [], {}
        for pen, p1, p2 in self._grid:
            x0, x1 = sorted((math.floor(p1.x() + dx), math.floor(p2.x() + dx)))
            y0, y1 = sorted((math.floor(p1.y() + dy), math.floor(p2.y() + dy)))
            if not _thin_solid(pen) or (x0 != x1 and y0 != y1):
                return None
            color = pen.color()
            if y0 == y1:
                rects.append((QRect(x0, y0, x1 - x0 + 1, 1), color))
                continue
            image = images.get((color.rgba(), y1 - y0))
            if image is None:
                image = images[(color.rgba(), y1 - y0)] = QImage(1, y1 - y0 + 1,
                                                                 QImage.Format.Format_ARGB32_Premultiplied)
                image.fill(color)
            strips.append((QPoint(x0, y0), image))
        self._fills = ((dx, dy), (rects, strips))
        return rects, strips


_UNSCALED = (QTransform.TransformationType.TxNone, QTransform.TransformationType.TxTranslate)


def _thin_solid(pen) -> bool:
    """A cosmetic solid pen of at most 1 px in one colour (a grid line's, which :class:`GridAxis` fills)."""
    return (pen.style() == Qt.PenStyle.SolidLine and pen.isCosmetic() and pen.widthF() <= 1.0
            and pen.brush().style() == Qt.BrushStyle.SolidPattern)


class LogAxis(GridAxis):
    """Log-scale axis that labels only 1, 2 and 5 × 10^k (pyqtgraph labels every minor tick)."""

    def logTickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph name)
        out = self._labels(values, only_125=True)
        if sum(1 for t in out if t) < 2:  # less than a decade in view: label every tick
            out = self._labels(values, only_125=False)
        return out

    @staticmethod
    def _labels(values, only_125: bool) -> list[str]:
        out = []
        for v in values:
            val = 10.0 ** float(v)
            exp = int(np.floor(np.log10(val) + 1e-9))
            mant = round(val / 10.0**exp, 3)
            if only_125 and mant not in (1.0, 2.0, 5.0):
                out.append("")
            elif -4 <= exp <= 3:
                out.append(f"{val:g}")
            else:
                out.append(f"{mant:g}e{exp}")
        return out


class IntegerAxis(GridAxis):
    """Axis with integer ticks only (epochs)."""

    def tickValues(self, minVal, maxVal, size):  # noqa: N802
        levels = super().tickValues(minVal, maxVal, size)
        out = []
        for spacing, values in levels:
            if spacing < 1:
                continue
            out.append((spacing, [v for v in values if abs(v - round(v)) < 1e-9]))
        if not out:
            lo, hi = int(np.ceil(minVal)), int(np.floor(maxVal))
            out = [(1.0, [float(v) for v in range(lo, hi + 1)])]
        return out


def set_readout(label, html: str) -> None:
    """Set a read-out LabelItem's rich text without letting its width set the panel's minimum width (pyqtgraph's
    LabelItem makes its text's width its minimum: a long read-out widened a docked panel, and the window with it)."""
    label.setText(html or " ")
    label.setMinimumWidth(0)


def plain_text(html: str) -> str:
    """A read-out's rich text without markup (tests, tooltips)."""
    text = re.sub(r"<br\s*/?>", "\n", str(html))
    return re.sub(r"<[^>]+>", "", text).replace("&nbsp;", " ").replace("■", "").strip()


def ordered(names: Iterable[str], target: str, pred: str) -> list[str]:
    """Order signal names so that the reference comes first and the prediction second."""
    names = list(names)
    first = [n for n in (target, pred) if n in names]
    return first + [n for n in names if n not in first]


def save_png_atomic(image, path: str | os.PathLike) -> Path:
    """Save a QImage/QPixmap as PNG atomically: encoded in memory, then written by
    :func:`~dpd_desktop.atomic.atomic_write_bytes` (temp file, fsync, os.replace, folder fsync).

    Raises:
        OSError: Qt could not encode the image, or the file could not be written
            (:class:`~dpd_desktop.atomic.ArtifactWriteError`, naming the file).
    """
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    ok = image.save(buf, "PNG")
    buf.close()
    if not ok:
        raise OSError(f"could not encode the PNG image {path}")
    return atomic_write_bytes(path, bytes(data))
