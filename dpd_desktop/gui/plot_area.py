"""The window's plot area: the banner, the dataset and config column, the five plot panels with their shared legend,
the progress read-out and the epoch table; it draws what a run sends (PlotData: latest value wins on a single-shot
timer, one panel per event-loop pass; epoch rows) and exports the current plot.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtWidgets import (QFileDialog, QGridLayout, QHBoxLayout, QLabel, QMessageBox, QProgressBar, QScrollArea,
                               QSizePolicy, QSplitter, QVBoxLayout, QWidget)

from ..runs.outputs import OutputRefused, check_output, suggested_output
from .panels import AMAMPanel, AMPMPanel, LearningPanel, PSDPanel, TimeDomainPanel
from .panels.base import PlotPanel, ordered
from .widgets import ConfigForm, DatasetSummary, EpochTable, OutcomeBanner, SignalLegend


class PlotArea(QObject):
    """The central widget (:attr:`central`) and its drawing.

    Args:
        preview_warning: the toolbar's live-preview warning, shown above the plots.
        settings: QSettings (the export dialog's last folder).
        workspace: the run workspace (the output rule of exports), or None.
        status: ``status(text, ms)`` shows a transient message.
    """

    WIDGETS = ("banner", "dataset_box", "form", "left_panel", "learning_panel", "psd_panel", "amam_panel",
               "ampm_panel", "time_panel", "signal_legend", "panels", "progress_bar", "progress_label",
               "epoch_table", "right_splitter", "main_splitter", "plot_sinks")

    def __init__(self, preview_warning: QLabel, settings, workspace, status: Callable[[str, int], None],
                 parent: QWidget | None = None):
        super().__init__(parent)
        self._settings, self.workspace, self._status = settings, workspace, status
        self.history_rows: list[dict] = []  # the shown run's epoch rows
        self.last_plots = None  # the PlotData drawn last
        self._pending = None  # (PlotData, label) to draw when the timer fires
        self._draw_queue: list = []
        self._then: list = []  # finish_drawing's callbacks, called once the queue is drawn
        # the next step of a drawing: a zero timer, not a posted call (two of those can run in one pass)
        self._next = QTimer(self, singleShot=True, interval=0)
        self._next.timeout.connect(self._step)
        self._timer = QTimer(self, singleShot=True, interval=30)
        self._timer.timeout.connect(self.flush)

        central = self.central = QWidget(parent)
        outer = QVBoxLayout(central)
        outer.setContentsMargins(6, 6, 6, 0)
        outer.setSpacing(6)
        # The banner sits above the plots, not above the whole window: showing it never moves the dataset box or
        # the form (the plots give up the height).
        self.banner = OutcomeBanner()

        # -- left column: dataset summary + forms
        self.dataset_box = DatasetSummary()
        self.form = ConfigForm()
        left_inner = QWidget()
        ll = QVBoxLayout(left_inner)
        ll.setContentsMargins(0, 0, 4, 0)
        ll.addWidget(self.dataset_box)
        ll.addWidget(self.form)
        ll.addStretch(1)
        left = QScrollArea()
        left.setWidgetResizable(True)
        left.setWidget(left_inner)
        left.setFrameShape(QScrollArea.Shape.NoFrame)
        left.setMinimumWidth(left_inner.minimumSizeHint().width() + left.verticalScrollBar().sizeHint().width() + 4)
        left.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.left_panel = left

        # -- plots grid
        # Signal colors are the same in every panel: one shared legend instead of one per plot.
        self.learning_panel = LearningPanel()
        self.psd_panel = PSDPanel(show_legend=False)
        self.amam_panel = AMAMPanel(show_legend=False)
        self.ampm_panel = AMPMPanel(show_legend=False)
        self.time_panel = TimeDomainPanel(show_legend=False)
        self.signal_legend = SignalLegend()
        self.panels: list[PlotPanel] = [self.learning_panel, self.psd_panel, self.amam_panel, self.ampm_panel,
                                        self.time_panel]
        #: Callables ``sink(plots, label)`` given every PlotData drawn here (None: the views were reset), e.g. the
        #: RF plots' dock (gui/rf_view.py), which draws them itself when it is shown.
        self.plot_sinks: list = []
        grid_w = QWidget()
        grid = QGridLayout(grid_w)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setSpacing(4)
        grid.addWidget(self.learning_panel, 0, 0, 3, 1)
        grid.addWidget(self.signal_legend, 0, 1, 1, 2)
        grid.addWidget(self.psd_panel, 1, 1)
        grid.addWidget(self.amam_panel, 1, 2)
        grid.addWidget(self.time_panel, 2, 1)
        grid.addWidget(self.ampm_panel, 2, 2)
        # the PSD's row higher than the time domain's: its ACLR read-out takes lines under the plot; the lower row
        # may shrink further (its plots have no read-out)
        for panel in (self.time_panel, self.ampm_panel):
            panel.setMinimumHeight(150)
        grid.setRowStretch(1, 3)
        grid.setRowStretch(2, 2)
        for c, s in enumerate((3, 4, 3)):  # the PSD column the widest: its read-out wraps less
            grid.setColumnStretch(c, s)
        for p in self.panels:
            p.activated.connect(self.set_current_panel)
        self.current_panel: PlotPanel = self.learning_panel
        self.set_current_panel(self.learning_panel)

        # -- progress + epoch table
        bottom = QWidget()
        bl = QVBoxLayout(bottom)
        bl.setContentsMargins(0, 0, 0, 0)
        prow = QHBoxLayout()
        self.progress_bar = QProgressBar()
        self.progress_bar.setRange(0, 1000)
        self.progress_bar.setValue(0)
        self.progress_bar.setTextVisible(False)
        self.progress_bar.setMaximumHeight(14)
        self.progress_bar.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.progress_label = QLabel("Idle")
        self.progress_label.setMinimumWidth(420)
        prow.addWidget(self.progress_label)
        prow.addWidget(self.progress_bar, 1)
        bl.addLayout(prow)
        self.epoch_table = EpochTable()
        bl.addWidget(self.epoch_table)

        plots_w = QWidget()
        pl = QVBoxLayout(plots_w)
        pl.setContentsMargins(0, 0, 0, 0)
        pl.setSpacing(4)
        # "Live batch preview"'s warning, right under the toolbar's tick, only while it is ticked (as the banner,
        # it takes the plots' height, never moves the form)
        pl.addWidget(preview_warning, 0, Qt.AlignmentFlag.AlignRight)
        pl.addWidget(self.banner)
        pl.addWidget(grid_w, 1)
        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(plots_w)
        right.addWidget(bottom)
        right.setStretchFactor(0, 5)
        right.setStretchFactor(1, 1)
        right.setSizes([800, 150])
        right.setChildrenCollapsible(False)
        self.right_splitter = right

        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(left)
        split.addWidget(right)
        split.setStretchFactor(0, 0)
        split.setStretchFactor(1, 1)
        split.setSizes([max(left.minimumWidth(), 300), 1300])
        split.setChildrenCollapsible(False)
        self.main_splitter = split
        outer.addWidget(split, 1)

    def set_current_panel(self, panel: PlotPanel) -> None:
        """The plot of Ctrl+E (framed in the palette's highlight)."""
        self.current_panel = panel
        for p in self.panels:
            p.setStyleSheet("border: 1px solid palette(highlight);" if p is panel
                            else "border: 1px solid transparent;")

    def apply_palette(self) -> None:
        for p in self.panels:
            p.apply_palette()
        self.set_current_panel(self.current_panel)  # its frame's palette(highlight), set again

    def export_current_plot(self, path: str | os.PathLike | None = None, overwrite: bool = False) -> Path | None:
        """Save the current plot (the one last clicked) as PNG; asks for a file name unless ``path`` is given.

        The output rule (runs/outputs.py) applies: never a file of a run folder (the run's own plots/*.png
        included), a dataset or the workspace; an existing file only with ``overwrite`` (the dialog asks)."""
        panel, parent = self.current_panel, self.central.window()
        if path is None:
            suggested = str(suggested_output(f"{panel.file_stem}.png",
                                             self._settings.value("paths/last_export_dir", "", type=str),
                                             workspace=self.workspace))
            path, _ = QFileDialog.getSaveFileName(parent, f"Export {panel.title} as PNG", suggested, "PNG (*.png)")
            if not path:
                return None
            if not path.lower().endswith(".png"):
                path += ".png"
            overwrite = True  # the dialog asked before replacing a file
            self._settings.setValue("paths/last_export_dir", str(Path(path).parent))
        try:
            check_output(path, overwrite=overwrite, suffixes=(".png",), workspace=self.workspace, option="")
        except OutputRefused as exc:
            QMessageBox.warning(parent, "Not exported", str(exc))
            return None
        try:
            out = panel.export_png(path, width=max(1200, panel.width()))
        except Exception as exc:  # noqa: BLE001
            QMessageBox.warning(parent, "Export failed", f"Could not write {path}: {exc}")
            return None
        self._status(f"Saved {panel.title} to {out}", 6000)
        return out

    def reset(self) -> None:
        """Forget the shown run's drawing: data, signal legend, zoom (axes back to auto range), table, rows."""
        self._timer.stop()
        self._draw_queue = []
        if self._then:  # a finished drawing's callbacks still run (nothing is left to draw)
            self._next.start()
        for p in self.panels:
            p.clear_data()
            p.reset_view()
        self.signal_legend.set_signals([])
        self.epoch_table.clear_rows()
        self.history_rows = []
        self.last_plots = None
        self._pending = None
        self._offer_sinks(None, "")

    def add_rows(self, rows, seconds, best: int | None = None) -> None:
        """Show history rows (history.csv's) in the table and the learning curves; ``seconds``: each epoch's
        duration; ``best`` marks the selected epoch."""
        for i, row in enumerate(rows):
            ep = row.get("EPOCH", i)
            ep = int(ep) if isinstance(ep, (int, float)) else i
            self.history_rows.append(dict(row))
            self.epoch_table.append_row(row, is_best=(ep == best), epoch=ep, seconds=seconds[i])
            self.learning_panel.append_row(row, is_best=(ep == best))
        if best is not None:
            self.learning_panel.set_best_epoch(best)
            self.epoch_table.mark_best_epoch(best)

    def add_epoch(self, ev) -> None:
        """An EpochEnded: its row in the table and the learning curves, its plots queued."""
        row = dict(ev.row)
        self.history_rows.append(row)
        self.epoch_table.append_row(row, is_best=ev.is_best, epoch=ev.epoch, seconds=ev.epoch_seconds)
        if not ev.is_best:
            self.epoch_table.mark_best_epoch(ev.best_epoch)
        self.learning_panel.append_row(row, is_best=ev.is_best)
        self.learning_panel.set_best_epoch(ev.best_epoch)
        if ev.plots is not None:
            self.queue(ev.plots, f"validation · epoch {ev.epoch}")

    def mark_best(self, epoch) -> None:
        self.epoch_table.mark_best_epoch(epoch)
        self.learning_panel.set_best_epoch(epoch)

    def _offer_sinks(self, plots, label: str) -> None:
        for sink in self.plot_sinks:
            try:
                sink(plots, label)
            except Exception as exc:  # noqa: BLE001 - one view's failure must not stop the others
                self._status(f"could not show the plots: {exc}", 8000)

    def queue(self, plots, label: str) -> None:
        """Latest value wins: only the newest PlotData is drawn when the timer fires."""
        self._pending = (plots, label)
        if not self._timer.isActive():
            self._timer.start()

    def flush(self) -> None:
        """Draw the newest pending PlotData one data panel per event-loop pass (a zero timer between panels): each
        pass sets one panel's data and the repaint that follows paints that panel alone. Newer data arriving
        meanwhile restarts the sequence with it."""
        self._timer.stop()
        pending, self._pending = self._pending, None
        if pending is None:
            return
        plots, label = pending
        self.last_plots = plots
        self.signal_legend.set_signals(ordered(plots.psd.keys(), plots.target_name, plots.pred_name))
        self._draw_queue = [(p, plots, label) for p in (self.psd_panel, self.amam_panel, self.ampm_panel,
                                                        self.time_panel)]
        self._draw_next()
        self._offer_sinks(plots, label)

    def _draw_next(self) -> None:
        if not self._draw_queue or self._pending is not None:
            return  # done, or newer data is pending (its own flush starts again)
        self._draw_panel(*self._draw_queue.pop(0))
        if self._draw_queue or self._then:  # the next panel, or finish_drawing's callbacks, in a pass of their own
            self._next.start()

    def _step(self) -> None:
        if self._draw_queue:
            self._draw_next()
        else:
            self._finish_step()

    def finish_drawing(self, then: Callable[[], None] | None = None) -> None:
        """Draw what is pending or queued, one data panel per event-loop pass, then call ``then()`` in a pass of
        its own (a run's end: ``runEnded`` promises its final plots)."""
        if then is not None:
            self._then.append(then)
        self._next.start()

    def _finish_step(self) -> None:
        if self._pending is not None:
            self.flush()  # its panels one per pass; the last one's pass schedules this step again
        elif not self._draw_queue:
            then, self._then = self._then, []
            for fn in then:
                fn()

    def _draw_panel(self, panel, plots, label: str) -> None:
        try:
            panel.update_from(plots, label)
            panel.settle_ranges()  # one paint of the panel, not two (PlotPanel.settle_ranges)
        except Exception as exc:  # noqa: BLE001 - a malformed PlotData must not kill the run view
            self._status(f"{panel.title}: could not draw ({exc})", 8000)

    def show_plots(self, plots, label: str = "") -> None:
        """Draw one PlotData in every data panel now (GUI thread; arrays are small)."""
        self.last_plots = plots
        self._draw_queue = []
        if self._then:
            self._next.start()
        self.signal_legend.set_signals(ordered(plots.psd.keys(), plots.target_name, plots.pred_name))
        for p in (self.psd_panel, self.amam_panel, self.ampm_panel, self.time_panel):
            self._draw_panel(p, plots, label)
        self._offer_sinks(plots, label)
