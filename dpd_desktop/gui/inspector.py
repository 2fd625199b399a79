"""Dataset ▸ Inspect…: the capture inspector (summary table, flags, AM/AM, AM/PM, PSD, cross-correlation).

``install_inspector(window)`` (one line in main_window.py) adds the Dataset menu (Inspect…, Import capture…) and an
"Inspect…" button under the dataset summary. The analysis (:func:`dpd_desktop.analysis.inspect.inspect_dataset`)
runs in an :class:`InspectJob` in the window's job registry, never on the GUI thread; the dialog only draws.
"""
from __future__ import annotations

import traceback

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QAction, QColor, QKeySequence
from PySide6.QtWidgets import (QApplication, QDialog, QDialogButtonBox, QHeaderView, QLabel, QMenu, QPushButton,
                               QSplitter, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from ..analysis.inspect import CaptureReport, inspect_dataset, summary_rows
from . import theme
from .capture_import_dialog import open_import_dialog
from .jobs import PoolJob
from .panels.base import save_png_atomic

__all__ = ["InspectJob", "InspectorDialog", "install_inspector", "SEVERITY_COLORS"]

#: Row background of a flag by severity (light tints: readable with the dark text of both palettes' tables).
SEVERITY_COLORS = {"error": "#f4c7c3", "warning": "#fce8b2", "info": "#d2e3fc"}


class _InspectSignals(QObject):
    done = Signal(object)  # CaptureReport
    failed = Signal(object, str)  # exception, traceback text


class InspectJob(PoolJob):
    """``inspect_dataset(dataset, frame_length)`` in the thread pool; reports ``signals.done(report)``."""

    name = "dataset inspector"

    def __init__(self, dataset, frame_length: int | None = None):
        super().__init__()
        self.dataset = dataset
        self.frame_length = frame_length
        self.signals = _InspectSignals()

    def work(self) -> None:
        try:
            rep = inspect_dataset(self.dataset, frame_length=self.frame_length)
        except Exception as exc:  # noqa: BLE001 - shown to the user
            if not self.stop_requested:
                self.signals.failed.emit(exc, traceback.format_exc())
            return
        if not self.stop_requested:
            self.signals.done.emit(rep)


class InspectorDialog(QDialog):
    """Shows one :class:`CaptureReport`: ``summary`` (label, value) table, ``flags`` table, four plots."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Inspect dataset")
        self.resize(1200, 820)
        self.report: CaptureReport | None = None
        lay = QVBoxLayout(self)
        self.status = QLabel("Analysing…")
        lay.addWidget(self.status)
        split = QSplitter(Qt.Orientation.Horizontal)
        left = QWidget()
        ll = QVBoxLayout(left)
        ll.setContentsMargins(0, 0, 0, 0)
        self.summary = QTableWidget(0, 2)
        self.summary.setHorizontalHeaderLabels(["Measure", "Value"])
        self.flags = QTableWidget(0, 3)
        self.flags.setHorizontalHeaderLabels(["Severity", "Code", "Message"])
        for t in (self.summary, self.flags):
            t.verticalHeader().setVisible(False)
            t.verticalHeader().setDefaultSectionSize(22)
            t.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
            t.setWordWrap(True)
            t.horizontalHeader().setSectionResizeMode(t.columnCount() - 1, QHeaderView.ResizeMode.Stretch)
        ll.addWidget(self.summary, 3)
        ll.addWidget(QLabel("Flags"))
        ll.addWidget(self.flags, 2)
        split.addWidget(left)
        self.plots = pg.GraphicsLayoutWidget()
        split.addWidget(self.plots)
        split.setSizes([470, 730])
        lay.addWidget(split, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)
        self._build_plots()

    def _build_plots(self) -> None:
        p = self.plots
        self.p_amam = p.addPlot(0, 0, title="AM/AM")
        self.p_amam.setLabels(left="|y|", bottom="|x|")
        self.p_ampm = p.addPlot(0, 1, title="AM/PM")
        self.p_ampm.setLabels(left="phase [°]", bottom="|x|")
        self.p_psd = p.addPlot(1, 0, title="PSD")
        self.p_psd.setLabels(left="PSD [dB/Hz]", bottom="frequency [MHz]")
        self.p_xcorr = p.addPlot(1, 1, title="Cross-correlation |r| around the peak")
        self.p_xcorr.setLabels(left="|r| / peak", bottom="lag [samples]")
        for plot, corner in ((self.p_amam, (8, 8)), (self.p_ampm, (-8, 8)), (self.p_psd, (8, 8)),
                             (self.p_xcorr, (-8, 8))):
            plot.showGrid(x=True, y=True, alpha=0.25)
            plot.addLegend(offset=corner, brush=pg.mkBrush(255, 255, 255, 200), labelTextColor="#202124")

    # ----------------------------------------------------------------------------------------------------- states
    def show_failure(self, exc: BaseException) -> None:
        self.status.setText(f"<b>The analysis failed:</b> {exc}")

    def show_report(self, r: CaptureReport) -> None:
        self.report = r
        n_err = len(r.errors)
        self.status.setText(f"<b>{r.name}</b> — {len(r.flags)} flag(s), {n_err} error(s); analysed in "
                            f"{r.elapsed_s:.2f} s")
        self.setWindowTitle(f"Inspect dataset — {r.name}")
        rows = summary_rows(r)
        self.summary.setRowCount(len(rows))
        for i, (k, v) in enumerate(rows):
            self.summary.setItem(i, 0, QTableWidgetItem(k))
            self.summary.setItem(i, 1, QTableWidgetItem(v))
        self.summary.resizeColumnToContents(0)
        self.summary.resizeRowsToContents()
        shown = r.flags or ()
        self.flags.setRowCount(max(len(shown), 1))
        if not shown:
            self.flags.setItem(0, 2, QTableWidgetItem("No flags: the capture looks usable."))
        for i, f in enumerate(shown):
            for j, text in enumerate((f.severity, f.code, f.message)):
                it = QTableWidgetItem(text)
                it.setBackground(QColor(SEVERITY_COLORS.get(f.severity, "#ffffff")))
                it.setForeground(QColor("#202124"))
                it.setToolTip(f.message)
                self.flags.setItem(i, j, it)
        self.flags.resizeColumnsToContents()
        self.flags.horizontalHeader().setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        self.flags.resizeRowsToContents()
        self._draw(r)

    def _draw(self, r: CaptureReport) -> None:
        d = r.plots
        for plot in (self.p_amam, self.p_ampm, self.p_psd, self.p_xcorr):
            plot.clear()
        cx, cy = theme.color_for("x"), theme.color_for("y")
        fit_pen = pg.mkPen("#d93025", width=2)
        self.p_amam.plot(d["am_am_x"], d["am_am_y"], pen=None, symbol="o", symbolSize=2, symbolPen=None,
                         symbolBrush=pg.mkBrush(cy), name="measured")
        self.p_amam.plot(d["fit_x"], d["am_am_fit"], pen=fit_pen, name="fit")
        self.p_amam.plot(d["fit_x"], d["small_signal"], pen=pg.mkPen("#5f6368", width=1, style=Qt.PenStyle.DashLine),
                         name="small-signal")
        if r.p1db_input_amplitude is not None:
            self.p_amam.addItem(pg.InfiniteLine(r.p1db_input_amplitude, angle=90, label="P1dB",
                                                pen=pg.mkPen("#d93025", style=Qt.PenStyle.DotLine),
                                                labelOpts={"position": 0.9, "color": "#d93025"}))
        self.p_ampm.plot(d["am_am_x"], d["am_pm_deg"], pen=None, symbol="o", symbolSize=2, symbolPen=None,
                         symbolBrush=pg.mkBrush(cy), name="measured")
        self.p_ampm.plot(d["fit_x"], d["am_pm_fit"], pen=fit_pen, name="fit")
        a_top = max(float(np.max(d["fit_x"], initial=0)), 1e-30)
        ph = np.asarray(d["am_pm_deg"])[np.asarray(d["am_am_x"]) > 0.2 * a_top]  # the range without the noisy tail
        if ph.size:
            lo, hi = np.percentile(ph, [1, 99])
            pad = max(hi - lo, 1.0) * 0.3
            self.p_ampm.setYRange(lo - pad, hi + pad)
        fs_known = bool(r.spec.get("input_signal_fs"))
        scale = 1e-6 if fs_known else 1.0
        self.p_psd.setLabels(bottom="frequency [MHz]" if fs_known else "frequency [× fs]")
        f = np.asarray(d["psd_f_hz"]) * scale
        if f.size:
            self.p_psd.plot(f, d["psd_x_db"], pen=pg.mkPen(cx, width=1.5), name="x (PA input)")
            self.p_psd.plot(f, d["psd_y_db"], pen=pg.mkPen(cy, width=1.5), name="y (PA output)")
            top = float(np.max(d["psd_y_db"]))
            self.p_psd.setYRange(max(float(np.min(d["psd_y_db"])) - 25, top - 120), top + 25)
        for e in np.asarray(d["channel_edges_hz"]) * scale:
            self.p_psd.addItem(pg.InfiniteLine(float(e), angle=90, pen=pg.mkPen("#5f6368", width=1,
                                                                                 style=Qt.PenStyle.DashLine)))
        self.p_xcorr.plot(d["xcorr_lags"], d["xcorr_mag"], pen=pg.mkPen(cy, width=1.5), symbol="o", symbolSize=4,
                          symbolBrush=pg.mkBrush(cy), name="|r[k]|")
        self.p_xcorr.addItem(pg.InfiniteLine(r.delay_samples, angle=90, label=f"{r.delay_samples:+.2f}",
                                             pen=pg.mkPen("#d93025"), labelOpts={"position": 0.15, "color": "#d93025"}))


def _frame_length(window) -> int | None:
    try:
        return int(window.form.config().frame_length)
    except Exception:  # noqa: BLE001 - an invalid form: inspect without the frame-length check
        return None


def open_inspector(window) -> InspectorDialog | None:
    """Open the inspector on ``window.dataset`` and start its job; None when no dataset is loaded."""
    ds = window.dataset
    if ds is None:
        window.statusBar().showMessage("Load a dataset first (Open dataset… or Demo data)", 5000)
        return None
    dlg = InspectorDialog(window)
    dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    job = InspectJob(ds, _frame_length(window))
    job.signals.done.connect(dlg.show_report)
    job.signals.failed.connect(lambda exc, _tb: dlg.show_failure(exc))
    dlg.finished.connect(lambda *_: job.request_stop())
    window.jobs.add(job)
    window.inspector = dlg
    window.inspect_job = job
    job.submit()
    dlg.show()
    return dlg


def _import_then_inspect(window):
    """Import capture…: once the new dataset has loaded into the window, inspect it."""
    dlg = open_import_dialog(window)

    def imported(res):
        folder = res.folder.resolve()

        def loaded(ds):
            window.datasetLoaded.disconnect(loaded)
            if getattr(ds, "source", None) == folder:
                open_inspector(window)

        window.datasetLoaded.connect(loaded)

    dlg.imported.connect(imported)
    return dlg


def install_inspector(window) -> None:
    """Add Dataset ▸ Inspect… / Import capture… and an Inspect… button under the dataset summary."""
    act = window.act_inspect = QAction("&Inspect…", window)
    act.setShortcut(QKeySequence("Ctrl+I"))
    act.setToolTip("Check the loaded dataset before training: delay, gain, AM/AM, P1dB, spectra, flags")
    act.triggered.connect(lambda: open_inspector(window))
    imp = window.act_import_capture = QAction("Import &capture…", window)
    imp.setToolTip("Make a dataset from a measured PA input and output (CSV, HDF5 or MAT)")
    imp.triggered.connect(lambda: _import_then_inspect(window))
    menus = [m for m in window.menuBar().actions() if m.menu() is not None]
    before = next((m for m in menus if m.text() == "&Help"), None)  # after File and Run (tests index Run at 1)
    if before is None:
        menu = window.menuBar().addMenu("&Dataset")
    else:
        menu = QMenu("&Dataset", window)
        window.menuBar().insertMenu(before, menu)
    menu.addAction(act)
    menu.addAction(imp)
    window.dataset_menu = menu
    btn = window.inspect_button = QPushButton("Inspect…")
    btn.setToolTip(act.toolTip())
    btn.clicked.connect(act.trigger)
    window.dataset_box.layout().addWidget(btn)
    act.setEnabled(False)
    btn.setEnabled(False)

    def on_loaded(*_):
        act.setEnabled(True)
        btn.setEnabled(True)

    window.datasetLoaded.connect(on_loaded)


def render_inspector(report: CaptureReport, path, size: tuple[int, int] = (1200, 820)):
    """Draw ``report`` in an :class:`InspectorDialog` offscreen and save it as a PNG (atomic); returns the path.
    ``python -m dpd_desktop.gui.inspector DATASET resources/inspector.png`` makes the README's picture."""
    dlg = InspectorDialog()
    dlg.resize(*size)
    dlg.show_report(report)
    dlg.show()
    for _ in range(5):
        QApplication.processEvents()
    out = save_png_atomic(dlg.grab(), path)
    dlg.close()
    return out


if __name__ == "__main__":  # pragma: no cover
    import sys

    from ..data import load_dataset
    from .qt_app import ensure_app

    ensure_app(headless=None)
    print(render_inspector(inspect_dataset(load_dataset(sys.argv[1])), sys.argv[2]))
