"""Export a plot panel to PNG, SVG or CSV through pyqtgraph's exporters (ImageExporter, SVGExporter, CSVExporter),
from each plot's context menu and from File ▸ Export.

Figures are at a publication size: :data:`FIGURE_IN` (3.5 in × 2.6 in, a single journal column) at
:data:`FIGURE_DPI` (300 dpi), i.e. 1050 × 780 pixels. The panel is laid out at that size in logical pixels at 96 dpi
(336 × 250: the fonts keep their point size on paper), rendered, then given back its size. The SVG has the same
logical size; the CSV holds each curve's original data (x, y columns per curve, pyqtgraph's "(x,y) per plot" layout)
of every plot of the panel, one block of columns after the other. Each file is written atomically.
"""
from __future__ import annotations

import csv
import io
import os
import tempfile
from pathlib import Path

import pyqtgraph as pg
from pyqtgraph.exporters import CSVExporter, ImageExporter, SVGExporter
from PySide6.QtCore import QBuffer, QIODevice, QRectF, QSize
from PySide6.QtGui import QAction, QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QFileDialog, QMenu, QMessageBox

from ..runs.artifacts import atomic_write_bytes, atomic_write_text
from .panels.base import PlotPanel, save_png_atomic

FIGURE_IN = (3.5, 2.6)  # width, height in inches
FIGURE_DPI = 300
SCREEN_DPI = 96  # the logical dpi the panel is laid out at
FIGURE_PX = (round(FIGURE_IN[0] * FIGURE_DPI), round(FIGURE_IN[1] * FIGURE_DPI))  # (1050, 780)
FORMATS = {"png": "PNG image (*.png)", "svg": "SVG vector image (*.svg)", "csv": "CSV of the plotted data (*.csv)"}


class _AtSize:
    """Lay ``panel`` out at ``size`` logical pixels for the duration of the block, then give its size back."""

    def __init__(self, panel: PlotPanel, size: QSize):
        self.panel, self.size, self.old = panel, size, panel.size()

    def __enter__(self):
        self.panel.resize(self.size)
        self.panel.ci.layout.activate()
        return self.panel

    def __exit__(self, *exc):
        self.panel.resize(self.old)
        self.panel.ci.layout.activate()


def _logical_size() -> QSize:
    return QSize(round(FIGURE_IN[0] * SCREEN_DPI), round(FIGURE_IN[1] * SCREEN_DPI))


def render_publication_png(panel: PlotPanel):
    """The panel as a QImage of exactly :data:`FIGURE_PX` pixels (on the panel's own background)."""
    with _AtSize(panel, _logical_size()):
        exporter = ImageExporter(panel.scene())
        params = exporter.parameters()
        # width and height are linked to the scene's aspect ratio: set both, without the link's callbacks
        params.param("width").setValue(FIGURE_PX[0], blockSignal=exporter.widthChanged)
        params.param("height").setValue(FIGURE_PX[1], blockSignal=exporter.heightChanged)
        image = exporter.export(toBytes=True)
    return image


def export_png(panel: PlotPanel, path: str | os.PathLike) -> Path:
    """Write the panel as a 3.5 in × 2.6 in, 300 dpi PNG (:data:`FIGURE_PX` pixels; the dpi is recorded)."""
    image = render_publication_png(panel)
    dots_per_m = round(FIGURE_DPI / 0.0254)
    image.setDotsPerMeterX(dots_per_m)
    image.setDotsPerMeterY(dots_per_m)
    return save_png_atomic(image, path)


def _svg_via_qt(panel: PlotPanel) -> bytes:
    """The panel's scene painted onto a QSvgGenerator (Qt's own SVG writer; vector paths and text)."""
    buf = QBuffer()
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    gen = QSvgGenerator()
    gen.setOutputDevice(buf)
    rect = panel.scene().sceneRect()
    gen.setSize(rect.size().toSize())
    gen.setViewBox(QRectF(0, 0, rect.width(), rect.height()))
    gen.setResolution(SCREEN_DPI)
    gen.setTitle(panel.title)
    painter = QPainter(gen)
    try:
        painter.fillRect(QRectF(0, 0, rect.width(), rect.height()), panel.backgroundBrush())
        panel.scene().render(painter, QRectF(0, 0, rect.width(), rect.height()), rect)
    finally:
        painter.end()
    return bytes(buf.data())


def export_svg(panel: PlotPanel, path: str | os.PathLike) -> Path:
    """Write the panel as SVG (vector; 3.5 in × 2.6 in in logical pixels at 96 dpi).

    pyqtgraph's SVGExporter first; where it fails on a closed path ("Z" in a path's data, pyqtgraph 0.14.0:
    pyqtgraph/pyqtgraph#3495, ValueError), Qt's QSvgGenerator paints the same scene.
    """
    with _AtSize(panel, _logical_size()):
        try:
            data = SVGExporter(panel.scene()).export(toBytes=True)
        except ValueError:
            data = _svg_via_qt(panel)
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


def export_panel(panel: PlotPanel, path: str | os.PathLike, fmt: str | None = None) -> Path:
    """Export ``panel`` to ``path`` in ``fmt`` ("png", "svg", "csv"; default: from the suffix).

    Raises:
        ValueError: an unknown format, or a CSV of a panel without data. OSError: the file cannot be written.
    """
    fmt = (fmt or Path(path).suffix.lstrip(".")).lower()
    if fmt not in EXPORTERS:
        raise ValueError(f"{path}: unknown export format {fmt!r}; known: {', '.join(EXPORTERS)}")
    return EXPORTERS[fmt](panel, path)


def ask_and_export(window, panel: PlotPanel, fmt: str, folder: str | None = None) -> Path | None:
    """Ask for a file name and export ``panel``; the outcome goes to the window's status bar."""
    start = Path(folder or str(Path.home())) / f"{panel.file_stem}.{fmt}"
    path, _ = QFileDialog.getSaveFileName(window, f"Export {panel.title} as {fmt.upper()}", str(start), FORMATS[fmt])
    if not path:
        return None
    if not path.lower().endswith("." + fmt):
        path += "." + fmt
    try:
        out = export_panel(panel, path, fmt)
    except (OSError, ValueError) as exc:
        QMessageBox.warning(window, "Export failed", f"Could not write {path}: {exc}")
        return None
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
    folder = lambda: (str(Path(window.session.run_dir) / "plots") if getattr(window.session, "run_dir", None)  # noqa: E731
                      else None)
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
