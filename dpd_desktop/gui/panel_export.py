"""Export a plot panel to PNG, SVG or CSV through pyqtgraph's exporters (ImageExporter, SVGExporter, CSVExporter).

Figures: :data:`FIGURE_IN` (3.5 in × 2.6 in, one journal column) at :data:`FIGURE_DPI` (300 dpi), i.e. 1050 × 780
pixels, drawn from an offscreen print copy of the panel (:func:`figure_of`) laid out at the PNG's own size; the
SVG from the same copy. The CSV holds every plot's original curve data (pyqtgraph's "(x,y) per plot" layout). Each
file is written atomically.
"""
from __future__ import annotations

import csv
import io
import os
import tempfile
from pathlib import Path

import pyqtgraph as pg
from pyqtgraph.exporters import CSVExporter, ImageExporter, SVGExporter
from PySide6.QtCore import QBuffer, QIODevice, QRectF, Qt
from PySide6.QtGui import QAction, QFont, QPainter, QPen
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QApplication, QFileDialog, QMenu, QMessageBox

from ..atomic import atomic_write_bytes, atomic_write_text
from ..runs.outputs import OutputRefused, check_output, suggested_output
from .panels.base import PlotPanel, save_png_atomic

FIGURE_IN = (3.5, 2.6)  # width, height in inches
FIGURE_DPI = 300
SCREEN_DPI = 96  # the logical dpi the panel is laid out at
FIGURE_PX = (round(FIGURE_IN[0] * FIGURE_DPI), round(FIGURE_IN[1] * FIGURE_DPI))  # (1050, 780)
FORMATS = {"png": "PNG image (*.png)", "svg": "SVG vector image (*.svg)", "csv": "CSV of the plotted data (*.csv)"}


_ITEM_OPTS = ("pen", "shadowPen", "symbol", "symbolSize", "symbolPen", "symbolBrush", "fillLevel", "fillBrush",
              "connect", "name")


#: print pixels per logical pixel: the copy is laid out at the PNG's own size with every length (text, pens, symbols,
#: margins) scaled by this, since pyqtgraph's ImageExporter scales the scene but not its legends or cosmetic pens
SCALE = FIGURE_DPI / SCREEN_DPI


def _pt(points: float) -> str:
    return f"{points * SCALE:.1f}pt"


def _pen(pen) -> QPen:
    p = QPen(pg.mkPen(pen))
    p.setWidthF(max(p.widthF(), 1.0) * SCALE)
    p.setCosmetic(True)
    return p


def figure_of(panel: PlotPanel) -> pg.GraphicsLayoutWidget:
    """An offscreen print copy of ``panel``, :data:`FIGURE_PX` pixels (text in points at 96 dpi times
    :data:`SCALE`), white background, black axes: every PlotItem with its curves, markers, regions and legend, and
    the layout's text labels. Close the copy after use."""
    saved = {k: pg.getConfigOption(k) for k in ("background", "foreground", "antialias")}
    pg.setConfigOptions(background="w", foreground="k", antialias=True)
    try:
        fig = pg.GraphicsLayoutWidget()
        fig.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen, True)
        fig.ci.setContentsMargins(2 * SCALE, 6 * SCALE, 10 * SCALE, 2 * SCALE)
        for item, cells in panel.ci.items.items():
            row, col = cells[0]
            if isinstance(item, pg.PlotItem):
                _copy_plot(item, fig, row, col, stacked=len(panel._plots) > 1,  # noqa: SLF001
                           legend_right=panel.file_stem == "psd")
            elif isinstance(item, pg.LabelItem) and str(item.text).strip():
                fig.addLabel(item.text, row=row, col=col, size=_pt(7), justify="left", color="k")
        fig.resize(*FIGURE_PX)
        fig.show()
        QApplication.processEvents()
    finally:
        pg.setConfigOptions(**saved)
    return fig


def _copy_plot(src: pg.PlotItem, fig: pg.GraphicsLayoutWidget, row: int, col: int, stacked: bool,
               legend_right: bool = False) -> pg.PlotItem:
    """Copy one PlotItem into ``fig`` at (row, col). In a stacked panel (several plots) each plot's y label goes
    into its title (a vertical label longer than the plot would overlap its neighbour's). A plot without a legend of
    its own (the window's data panels share one legend widget) gets one when it has two or more named curves: top
    right when ``legend_right``, else top left."""
    axes = {name: type(src.getAxis(name))(orientation=name) for name in ("left", "bottom")}
    dst = fig.addPlot(row=row, col=col, axisItems=axes)
    title = str(src.titleLabel.text or "").split("  —  ")[0]
    y_label = src.getAxis("left").labelText
    if stacked and y_label:
        title = f"{title}: {y_label}" if title else y_label
    if title:
        dst.setTitle(title, size=_pt(7 if stacked else 8), color="k")
    for name in ("left", "bottom"):
        a = src.getAxis(name)
        if not (stacked and name == "left"):
            dst.setLabel(name, a.labelText, units=a.labelUnits or None, **{"font-size": _pt(7)})
        ax = dst.getAxis(name)
        ax.enableAutoSIPrefix(False)
        ax.setStyle(tickFont=_font(7 * SCALE), tickLength=round(-4 * SCALE), tickTextOffset=round(2 * SCALE))
        ax.setPen(_pen("k"))
        ax.setTextPen(pg.mkPen("k"))
    dst.getAxis("left").setWidth(round(40 * SCALE))
    dst.getAxis("bottom").setHeight(round(30 * SCALE))
    dst.showGrid(x=True, y=True, alpha=0.12)
    log_x, log_y = src.getViewBox().state["logMode"]
    dst.setLogMode(x=log_x, y=log_y)
    named = [i for i in src.items if isinstance(i, pg.PlotDataItem) and i.isVisible() and i.name()]
    if src.legend is not None or len(named) >= 2:
        ox = (src.legend.opts.get("offset") or (-1, 1))[0] if src.legend is not None else (-1 if legend_right else 1)
        legend = dst.addLegend(offset=(-4 * SCALE, 4 * SCALE) if ox < 0 else (4 * SCALE, 4 * SCALE),
                               labelTextSize=_pt(7), verSpacing=round(-2 * SCALE),
                               colCount=src.legend.columnCount if src.legend is not None else 1,
                               brush=pg.mkBrush(255, 255, 255, 200))
        legend.setLabelTextColor("k")
    vb = src.getViewBox()
    for item in src.items:
        if isinstance(item, pg.PlotDataItem) and item.isVisible():
            x, y = item.getOriginalDataset()
            if x is None or not len(x):
                continue
            opts = {k: item.opts.get(k) for k in _ITEM_OPTS}
            for k in ("pen", "symbolPen", "shadowPen"):
                if opts[k] is not None:
                    opts[k] = _pen(opts[k])
            if opts.get("symbolSize"):
                opts["symbolSize"] = max(2.0, 0.8 * float(opts["symbolSize"])) * SCALE
            copy = pg.PlotDataItem(**opts)
            dst.addItem(copy, ignoreBounds=item not in vb.addedItems)  # kept out of the auto range there too
            copy.setData(x, y)
            copy.setZValue(item.zValue())
        elif isinstance(item, pg.InfiniteLine) and item.isVisible():
            dst.addItem(pg.InfiniteLine(pos=item.value(), angle=item.angle, pen=_pen(item.pen)), ignoreBounds=True)
        elif isinstance(item, pg.LinearRegionItem) and item.isVisible():
            region = pg.LinearRegionItem(values=item.getRegion(), movable=False, brush=item.brush, pen=pg.mkPen(None))
            for line in region.lines:
                line.setPen(pg.mkPen(None))
            region.setZValue(-10)
            dst.addItem(region, ignoreBounds=True)
    if any(vb.autoRangeEnabled()):
        vb.updateAutoRange()  # the live panel's range as its next paint would set it (data may be new)
    (x0, x1), (y0, y1) = vb.viewRange()
    dst.setRange(xRange=(x0, x1), yRange=(y0, y1), padding=0)
    return dst


def _font(pt: float):
    f = QFont()
    f.setPointSizeF(pt)
    return f


def render_publication_png(panel: PlotPanel):
    """The panel as a QImage of exactly :data:`FIGURE_PX` pixels (the print copy of :func:`figure_of`)."""
    fig = figure_of(panel)
    try:
        exporter = ImageExporter(fig.scene())
        params = exporter.parameters()
        # width and height are linked to the scene's aspect ratio: set both, without the link's callbacks
        params.param("width").setValue(FIGURE_PX[0], blockSignal=exporter.widthChanged)
        params.param("height").setValue(FIGURE_PX[1], blockSignal=exporter.heightChanged)
        image = exporter.export(toBytes=True)
    finally:
        fig.close()
        fig.deleteLater()
    return image


def export_png(panel: PlotPanel, path: str | os.PathLike) -> Path:
    """Write the panel as a 3.5 in × 2.6 in, 300 dpi PNG (:data:`FIGURE_PX` pixels; the dpi is recorded)."""
    image = render_publication_png(panel)
    dots_per_m = round(FIGURE_DPI / 0.0254)
    image.setDotsPerMeterX(dots_per_m)
    image.setDotsPerMeterY(dots_per_m)
    return save_png_atomic(image, path)


def _svg_via_qt(fig) -> bytes:
    """The figure's scene painted onto a QSvgGenerator (Qt's own SVG writer; vector paths and text)."""
    buf = QBuffer()
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    gen = QSvgGenerator()
    gen.setOutputDevice(buf)
    rect = fig.scene().sceneRect()
    gen.setSize(rect.size().toSize())
    gen.setViewBox(QRectF(0, 0, rect.width(), rect.height()))
    gen.setResolution(SCREEN_DPI)
    painter = QPainter(gen)
    try:
        painter.fillRect(QRectF(0, 0, rect.width(), rect.height()), fig.backgroundBrush())
        fig.scene().render(painter, QRectF(0, 0, rect.width(), rect.height()), rect)
    finally:
        painter.end()
    return bytes(buf.data())


def export_svg(panel: PlotPanel, path: str | os.PathLike) -> Path:
    """Write the panel as SVG (the print copy, 3.5 in × 2.6 in in logical pixels at 96 dpi): pyqtgraph's SVGExporter,
    or Qt's QSvgGenerator where it fails on a closed path (pyqtgraph/pyqtgraph#3495)."""
    fig = figure_of(panel)
    try:
        try:
            data = SVGExporter(fig.scene()).export(toBytes=True)
        except ValueError:
            data = _svg_via_qt(fig)
    finally:
        fig.close()
        fig.deleteLater()
    return atomic_write_bytes(path, data)


def export_csv(panel: PlotPanel, path: str | os.PathLike) -> Path:
    """Write the original data of every curve of the panel as CSV (pyqtgraph's CSVExporter per plot; the plots'
    columns side by side, padded with empty cells)."""
    blocks = []
    for plot in panel._plots:  # noqa: SLF001 - the panel's PlotItems, in layout order
        if not any(isinstance(i, pg.PlotDataItem) and i.getData()[0] is not None and len(i.getData()[0])
                   for i in plot.items):
            continue
        with tempfile.TemporaryDirectory() as tmp:  # CSVExporter writes only to a named file
            part = Path(tmp) / "plot.csv"
            CSVExporter(plot).export(str(part))
            text = part.read_text(encoding="utf-8")
        blocks.append([row for row in csv.reader(io.StringIO(text)) if row])
    if not blocks:
        raise ValueError(f"{panel.title}: no data to export")
    n = max(len(b) for b in blocks)
    widths = [max(len(r) for r in b) for b in blocks]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    for i in range(n):
        cells = []
        for b, w in zip(blocks, widths):
            row = b[i] if i < len(b) else []
            cells.extend(row + [""] * (w - len(row)))
        writer.writerow(cells)
    return atomic_write_text(path, buf.getvalue())


EXPORTERS = {"png": export_png, "svg": export_svg, "csv": export_csv}


def export_panel(panel: PlotPanel, path: str | os.PathLike, fmt: str | None = None, overwrite: bool = False,
                 workspace=None) -> Path:
    """Export ``panel`` to ``path`` in ``fmt`` ("png", "svg", "csv"; default: from the suffix), under the output rule
    (runs/outputs.py; an existing file only with ``overwrite``).

    Raises:
        OutputRefused (a ValueError): the rule refuses ``path``. ValueError: an unknown format, or a CSV of a panel
        without data. OSError: the file cannot be written.
    """
    fmt = (fmt or Path(path).suffix.lstrip(".")).lower()
    if fmt not in EXPORTERS:
        raise ValueError(f"{path}: unknown export format {fmt!r}; known: {', '.join(EXPORTERS)}")
    check_output(path, overwrite=overwrite, workspace=workspace, option="")
    return EXPORTERS[fmt](panel, path)


def ask_and_export(window, panel: PlotPanel, fmt: str, folder: str | None = None) -> Path | None:
    """Ask for a file name and export ``panel``; the outcome goes to the window's status bar. The dialog starts in
    ``folder`` unless the output rule refuses it (a run folder: its plots/ are the run's own), else home."""
    workspace = getattr(window, "workspace", None)
    start = suggested_output(f"{panel.file_stem}.{fmt}", folder, workspace=workspace)
    path, _ = QFileDialog.getSaveFileName(window, f"Export {panel.title} as {fmt.upper()}", str(start), FORMATS[fmt])
    if not path:
        return None
    if not path.lower().endswith("." + fmt):
        path += "." + fmt
    try:  # overwrite: the dialog asked before replacing a file
        out = export_panel(panel, path, fmt, overwrite=True, workspace=workspace)
    except OutputRefused as exc:
        QMessageBox.warning(window, "Not exported", str(exc))
        return None
    except (OSError, ValueError) as exc:
        QMessageBox.warning(window, "Export failed", f"Could not write {path}: {exc}")
        return None
    settings = getattr(window, "_settings", None)
    if settings is not None:
        settings.setValue("paths/last_export_dir", str(Path(path).parent))
    bar = getattr(window, "statusBar", None)
    if callable(bar):
        bar().showMessage(f"Saved {panel.title} to {out}", 6000)
    return out


def add_context_menu(window, panel: PlotPanel, folder=lambda: None) -> None:
    """Add "Export PNG (3.5 × 2.6 in, 300 dpi) / SVG / CSV…" to every plot's right-click menu of ``panel``."""
    for plot in panel._plots:  # noqa: SLF001
        menu = plot.getViewBox().menu
        menu.addSeparator()
        for fmt, text in (("png", f"Export PNG ({FIGURE_IN[0]} × {FIGURE_IN[1]} in, {FIGURE_DPI} dpi)…"),
                          ("svg", "Export SVG…"), ("csv", "Export data as CSV…")):
            act = QAction(text, menu)
            act.triggered.connect(lambda _=False, f=fmt: ask_and_export(window, panel, f, folder()))
            menu.addAction(act)


def install_export_menu(window) -> QMenu:
    """File ▸ Export: the current plot (the one last clicked) as PNG, SVG or CSV; and each panel's context menu."""
    menu = QMenu("Export current plot as", window)

    def folder():  # the last export's folder (never the run's own plots/: runs/outputs.py refuses it)
        settings = getattr(window, "_settings", None)
        return settings.value("paths/last_export_dir", "", type=str) if settings is not None else None

    for fmt, text in (("png", f"PNG ({FIGURE_IN[0]} × {FIGURE_IN[1]} in, {FIGURE_DPI} dpi)…"), ("svg", "SVG…"),
                      ("csv", "CSV (the plotted data)…")):
        menu.addAction(text, lambda f=fmt: ask_and_export(window, window.current_panel, f, folder()))
    for action in window.menuBar().actions():
        if action.text().replace("&", "") == "File" and action.menu() is not None:
            file_menu = action.menu()
            file_menu.insertMenu(window.act_export, menu)
    for p in window.panels:
        add_context_menu(window, p, folder)
    window.export_menu = menu
    return menu
