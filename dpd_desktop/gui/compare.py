"""The compare view: two or more runs (runs/compare.py ``Comparison``) in one window — learning curves overlaid,
the metrics side by side, PSD and AM/AM overlays of the test predictions (same dataset only: otherwise a note says
so and only the curves are overlaid) and the config diff (only the fields that differ).

Its panels are :class:`~dpd_desktop.gui.panels.base.PlotPanel` s, so they export like the window's (right-click:
PNG/SVG/CSV, gui/panel_export.py); Report… writes the comparison as HTML (runs/report_html.py) on a pool thread.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QGridLayout, QHBoxLayout, QHeaderView, QLabel,
                               QPushButton, QSplitter, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from ..runs.compare import CURVES, Comparison, reference_name
from ..runs.report_html import format_value
from .panel_export import add_context_menu
from .panels.base import IntegerAxis, LogAxis, PlotPanel
from .runs_jobs import write_report_job

#: one color per run, in selection order (the reference signal is drawn in the foreground color)
RUN_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def _pen(i: int, width: float = 2.0):
    return pg.mkPen(RUN_COLORS[i % len(RUN_COLORS)], width=width)


class CurvesPanel(PlotPanel):
    """One learning-curve series (a :data:`~dpd_desktop.runs.compare.CURVES` column) of every run vs epoch."""

    title = "Learning curves"
    file_stem = "compare_learning"

    def __init__(self, cmp: Comparison, parent=None):
        super().__init__(parent, show_legend=True)
        self.cmp = cmp
        self.plot = self._add_plot(0, 0, self.title, left="", bottom="epoch",
                                   axisItems={"bottom": IntegerAxis("bottom"), "left": LogAxis("left")})
        self.plot.getAxis("left").setWidth(56)
        # room around the points: a run of one epoch (MP/GMP) is a single dot, which the default 2 % left on the
        # axes' edge, half cut
        self.plot.getViewBox().setDefaultPadding(0.1)
        self.legend = self._add_legend(self.plot, force=True)
        self.curves = []
        for i, r in enumerate(cmp.runs):
            item = pg.PlotDataItem(pen=_pen(i), symbol="o", symbolSize=5, symbolBrush=RUN_COLORS[i % 8],
                                   symbolPen=None, name=r.run_id)
            self.plot.addItem(item)
            self.curves.append(item)
        self.column = ""
        self.show_column(CURVES[0][1])

    def show_column(self, column: str) -> None:
        """Draw history.csv's ``column`` (e.g. VAL_NMSE) of every run; losses on a log axis."""
        self.column = column
        label = dict((c, lab) for lab, c in CURVES).get(column, column)
        log = "LOSS" in column
        self.plot.setLogMode(x=False, y=log)
        self.plot.setLabel("left", label)
        for item, r in zip(self.curves, self.cmp.runs):
            x, y = r.curve(column)
            if log:
                keep = y > 0
                x, y = x[keep], y[keep]
            item.setData(x, y)
        self.plot.enableAutoRange()


class OverlayPanel(PlotPanel):
    """PSD or AM/AM of the test split: the reference signal of the first run and each run's prediction."""

    def __init__(self, cmp: Comparison, kind: str, parent=None):
        self.overlay_kind = kind
        self.title = "PSD (test)" if kind == "psd" else "AM/AM (test)"
        self.file_stem = f"compare_{kind}"
        super().__init__(parent, show_legend=True)
        left, bottom = (("PSD [dB/Hz rel.]", "frequency [MHz]") if kind == "psd" else
                        ("|out| [lin., data units]", "|x| [lin., data units]"))
        self.plot = self._add_plot(0, 0, self.title, left=left, bottom=bottom)
        self.plot.getAxis("left").setWidth(56)
        self.legend = self._add_legend(self.plot, force=True, offset=(8, 8))
        if kind == "psd":  # bottom centre: below the channel, above the noise floor's edges
            self.legend.anchor(itemPos=(0.5, 1), parentPos=(0.5, 1), offset=(0, -8))
        self.overlay_items: dict[str, pg.PlotDataItem] = {}
        if not cmp.same_dataset or not cmp.runs or cmp.runs[0].test is None:
            return
        first = cmp.runs[0]
        fg = pg.getConfigOption("foreground")
        if kind == "amam":
            self._add(reference_name(first.step), first.target_amam(), pen=None, brush=pg.mkBrush(fg), scatter=True)
        elif cmp.reference_psd is not None:
            name, f, p = cmp.reference_psd
            self._add(name, (f, p), pen=pg.mkPen(fg, width=1.2))
        for i, r in enumerate(cmp.runs):
            data = r.psd() if kind == "psd" else r.amam()
            if data is None:
                continue
            if kind == "psd":
                self._add(r.run_id, data, pen=_pen(i, 1.2))
            else:
                c = pg.mkColor(RUN_COLORS[i % 8])
                c.setAlpha(150)
                self._add(r.run_id, data, pen=None, brush=pg.mkBrush(c), scatter=True)

    def _add(self, name, data, pen=None, brush=None, scatter=False) -> None:
        x, y = (np.asarray(a, dtype=np.float64) for a in data)
        if scatter:  # created empty, data after addItem (pyqtgraph: data before the item has its ViewBox fails)
            item = pg.PlotDataItem(pen=None, symbol="o", symbolSize=3, symbolPen=None, symbolBrush=brush,
                                   name=name)
        else:
            item = pg.PlotDataItem(pen=pen, name=name, clipToView=True, autoDownsample=True,
                                   downsampleMethod="peak")
        self.plot.addItem(item)
        item.setData(x, y)
        self.overlay_items[name] = item


def _table(headers, rows, numeric_from: int = 1) -> QTableWidget:
    t = QTableWidget(len(rows), len(headers))
    t.setHorizontalHeaderLabels(headers)
    t.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    t.verticalHeader().setVisible(False)
    t.verticalHeader().setDefaultSectionSize(20)
    t.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    t.horizontalHeader().setStretchLastSection(True)
    for i, row in enumerate(rows):
        for j, v in enumerate(row):
            item = QTableWidgetItem(str(v))
            if j >= numeric_from:
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            t.setItem(i, j, item)
    return t


class CompareView(QWidget):
    """A top-level window comparing the runs of ``cmp`` (see the module docstring)."""

    def __init__(self, cmp: Comparison, window=None, parent=None):
        super().__init__(parent)
        self.cmp = cmp
        self.window_ = window
        self.setWindowFlag(Qt.WindowType.Window, True)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        self.setWindowTitle(f"Compare {len(cmp.runs)} runs — DPD Desktop")
        ids = [r.run_id for r in cmp.runs]
        lay = QVBoxLayout(self)
        top = QHBoxLayout()
        self.note = QLabel("<br>".join(cmp.notes))
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: #b36b00;")
        self.note.setVisible(bool(cmp.notes))
        self.curve_combo = QComboBox()
        for label, col in CURVES:
            self.curve_combo.addItem(label, col)
        self.report_button = QPushButton("Report…")
        self.report_button.setToolTip("Write this comparison as a self-contained HTML report")
        top.addWidget(QLabel("Learning curve:"))
        top.addWidget(self.curve_combo)
        top.addStretch(1)
        top.addWidget(self.report_button)
        lay.addLayout(top)
        lay.addWidget(self.note)

        self.curves_panel = CurvesPanel(cmp)
        self.psd_panel = OverlayPanel(cmp, "psd")
        self.amam_panel = OverlayPanel(cmp, "amam")
        self.panels = [self.curves_panel, self.psd_panel, self.amam_panel]
        plots = QWidget()
        grid = QGridLayout(plots)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.addWidget(self.curves_panel, 0, 0)
        grid.addWidget(self.psd_panel, 0, 1)
        grid.addWidget(self.amam_panel, 0, 2)
        for p in (self.psd_panel, self.amam_panel):
            p.setVisible(cmp.same_dataset)

        self.metrics_table = _table(["metric", "unit", *ids], [[label, unit, *(format_value(v, unit) for v in values)]
                                                               for label, unit, values in cmp.metric_table()], 2)
        diff_rows = [[k, *(format_value(v) for v in values)] for k, values in cmp.config_diff]
        self.diff_table = _table(["config field (differs)", *ids], diff_rows or [["(identical)"] + [""] * len(ids)],
                                 numeric_from=99)
        tables = QSplitter(Qt.Orientation.Horizontal)
        tables.addWidget(self.metrics_table)
        tables.addWidget(self.diff_table)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(plots)
        split.addWidget(tables)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        split.setSizes([520, 250])  # the metrics table whole (eight rows)
        lay.addWidget(split, 1)
        self.resize(1400, 820)

        self.curve_combo.currentIndexChanged.connect(
            lambda _: self.curves_panel.show_column(self.curve_combo.currentData()))
        self.report_button.clicked.connect(lambda: self.write_report())
        for p in self.panels:
            add_context_menu(window if window is not None else self, p)

    def write_report(self, path: str | None = None, on_end=None) -> None:
        """The comparison as HTML (asks for the file unless ``path``); needs the main window's jobs registry."""
        if self.window_ is None:
            return
        write_report_job(self.window_, [r.run_dir for r in self.cmp.runs], path, on_end)
