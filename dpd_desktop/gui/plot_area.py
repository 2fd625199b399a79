"""The window's plot area (a part of :class:`~dpd_desktop.gui.main_window.MainWindow`): the banner, the dataset and
config column, the five plot panels with their shared legend, the progress read-out and the epoch table; drawing
PlotData (latest value wins on a single-shot timer), exporting a plot, and writing a run's PNGs off the GUI thread.
"""
from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (QFileDialog, QGridLayout, QHBoxLayout, QLabel, QMessageBox, QProgressBar, QScrollArea,
                               QSizePolicy, QSplitter, QVBoxLayout, QWidget)

from .. import timing
from ..runs.outputs import OutputRefused, check_output, suggested_output
from .export import iter_run_plots
from .jobs import PlotSaveJob
from .panels import AMAMPanel, AMPMPanel, LearningPanel, PSDPanel, TimeDomainPanel
from .panels.base import PlotPanel, ordered
from .run_plots import PlotsProcess
from .widgets import ConfigForm, DatasetSummary, EpochTable, OutcomeBanner, SignalLegend


class PlotArea:
    """Builds the central widget and draws into it."""

    def _build_central(self) -> None:
        central = QWidget()
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
        # the PSD's row higher than the time domain's: its ACLR read-out takes lines under the plot. At 1280×800 with
        # a DPD run's banner every panel sat at its minimum height and the PSD's plot kept 30 px; the lower row may
        # shrink further (its plots have no read-out), and gives the PSD row the height.
        for panel in (self.time_panel, self.ampm_panel):
            panel.setMinimumHeight(150)
        grid.setRowStretch(1, 3)
        grid.setRowStretch(2, 2)
        for c, s in enumerate((3, 4, 3)):  # the PSD column the widest: its read-out wraps less
            grid.setColumnStretch(c, s)
        for p in self.panels:
            p.activated.connect(self._set_current_panel)
        self._current_panel: PlotPanel = self.learning_panel
        self._set_current_panel(self.learning_panel)

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
        pl.addWidget(self.preview_warning, 0, Qt.AlignmentFlag.AlignRight)
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
        self.setCentralWidget(central)

    def _set_current_panel(self, panel: PlotPanel) -> None:
        self._current_panel = panel
        for p in self.panels:
            p.setStyleSheet("border: 1px solid palette(highlight);" if p is panel
                            else "border: 1px solid transparent;")

    @property
    def current_panel(self) -> PlotPanel:
        return self._current_panel

    def export_current_plot(self, path: str | os.PathLike | None = None, overwrite: bool = False) -> Path | None:
        """Save the current plot (the one last clicked) as PNG; asks for a file name unless ``path`` is given.

        The output rule (runs/outputs.py) applies: never a file of a run folder (the run's own plots/*.png
        included), a dataset or the workspace; an existing file only with ``overwrite`` (the dialog asks)."""
        panel = self._current_panel
        if path is None:
            suggested = str(suggested_output(f"{panel.file_stem}.png",
                                             self._settings.value("paths/last_export_dir", "", type=str),
                                             workspace=getattr(self, "workspace", None)))
            path, _ = QFileDialog.getSaveFileName(self, f"Export {panel.title} as PNG", suggested, "PNG (*.png)")
            if not path:
                return None
            if not path.lower().endswith(".png"):
                path += ".png"
            overwrite = True  # the dialog asked before replacing a file
            self._settings.setValue("paths/last_export_dir", str(Path(path).parent))
        try:
            check_output(path, overwrite=overwrite, suffixes=(".png",), workspace=getattr(self, "workspace", None),
                         option="")
        except OutputRefused as exc:
            QMessageBox.warning(self, "Not exported", str(exc))
            return None
        try:
            out = panel.export_png(path, width=max(1200, panel.width()))
        except Exception as exc:  # noqa: BLE001
            QMessageBox.warning(self, "Export failed", f"Could not write {path}: {exc}")
            return None
        self.statusBar().showMessage(f"Saved {panel.title} to {out}", 6000)
        return out

    def _reset_run_views(self) -> None:
        """Forget the previous run's drawing: data, signal legend, zoom (axes back to auto range), table, best."""
        self._plot_timer.stop()
        self._draw_queue = []
        for p in self.panels:
            p.clear_data()
            p.reset_view()
        self.signal_legend.set_signals([])
        self.epoch_table.clear_rows()
        self._history_rows = []
        self._last_plots = None
        self._pending_plots = None
        self._pending_progress = None
        self.best_label.setText("")
        self._power_caveat = None  # the DPD output-power caveat of the shown run (gui/run_control.py)
        self.set_title_run(None)
        self._offer_sinks(None, "")

    def _offer_sinks(self, plots, label: str) -> None:
        for sink in self.plot_sinks:
            try:
                sink(plots, label)
            except Exception as exc:  # noqa: BLE001 - one view's failure must not stop the others
                self.statusBar().showMessage(f"could not show the plots: {exc}", 8000)

    def _on_preview_ready(self, ev) -> None:
        if not self.preview_check.isChecked():
            return
        self._queue_plots(ev.plots, f"preview · epoch {ev.epoch} · batch {ev.batch:,}/{ev.batches:,}")
        nmse = ev.metrics.get("NMSE") if ev.metrics else None
        if nmse is not None:
            self.statusBar().showMessage(f"Preview NMSE {nmse:.2f} dB (epoch {ev.epoch}, batch {ev.batch:,})", 3000)

    def _queue_plots(self, plots, label: str) -> None:
        """Latest value wins: only the newest PlotData is drawn when the timer fires."""
        self._pending_plots = (plots, label)
        if not self._plot_timer.isActive():
            self._plot_timer.start()

    def _flush_plots(self) -> None:
        """Draw the newest pending PlotData one data panel per event-loop pass (a zero timer between panels): each
        pass sets one panel's data and the repaint that follows paints that panel alone (the four at once stalled
        the loop 220-230 ms on the 2-core machine, bench_gui_responsiveness.py --part ticks). Newer data arriving
        meanwhile restarts the sequence with it."""
        pending, self._pending_plots = self._pending_plots, None
        if pending is None:
            return
        plots, label = pending
        self._last_plots = plots
        self.signal_legend.set_signals(ordered(plots.psd.keys(), plots.target_name, plots.pred_name))
        self._draw_queue = [(p, plots, label) for p in (self.psd_panel, self.amam_panel, self.ampm_panel,
                                                        self.time_panel)]
        self._draw_next()
        self._offer_sinks(plots, label)

    def _draw_next(self) -> None:
        queue = getattr(self, "_draw_queue", None)
        if not queue or self._pending_plots is not None:
            return  # done, or newer data is pending (its own flush starts again)
        panel, plots, label = queue.pop(0)
        self._draw_panel(panel, plots, label)
        if queue:
            QTimer.singleShot(0, self._draw_next)

    def finish_drawing(self) -> None:
        """Draw now what is pending or queued (a run's end: ``runEnded`` promises its final plots)."""
        if self._pending_plots is not None:
            self._plot_timer.stop()
            self._flush_plots()
        queue = getattr(self, "_draw_queue", None) or []
        while queue:
            self._draw_panel(*queue.pop(0))

    def _draw_panel(self, panel, plots, label: str) -> None:
        try:
            panel.update_from(plots, label)
            panel.settle_ranges()  # one paint of the panel, not two (PlotPanel.settle_ranges)
        except Exception as exc:  # noqa: BLE001 - a malformed PlotData must not kill the run view
            self.statusBar().showMessage(f"{panel.title}: could not draw ({exc})", 8000)

    def show_plots(self, plots, label: str = "") -> None:
        """Draw one PlotData in every data panel now (GUI thread; arrays are small)."""
        self._last_plots = plots
        self._draw_queue = []
        self.signal_legend.set_signals(ordered(plots.psd.keys(), plots.target_name, plots.pred_name))
        for p in (self.psd_panel, self.amam_panel, self.ampm_panel, self.time_panel):
            self._draw_panel(p, plots, label)
        self._offer_sinks(plots, label)

    def _write_plots(self, run_dir: str, plots) -> None:
        """Render the run's default plots here (pyqtgraph needs the GUI thread); each image is encoded and written
        on a pool thread as soon as it is rendered, overlapping the next panel's rendering. ``plotsWritten`` gets
        the paths (in panel order) once all are on disk, or the first error."""
        out_dir = Path(run_dir) / "plots"
        names: list[str] = []
        written: dict[str, Path] = {}
        state: dict = {"rendered": False, "reported": False}

        def report(result) -> None:
            if state["reported"]:
                return
            state["reported"] = True
            try:
                if isinstance(result, Exception):
                    self._plots_failed(result)
                else:
                    timing.mark("gui_png_written")
                    self.statusBar().showMessage(f"Wrote {len(result)} plots to {out_dir}", 6000)
                    self.plotsWritten.emit(result)
            except RuntimeError:  # the window was deleted meanwhile: the files are written, nothing to show
                pass

        def finished(result, job) -> None:
            self.jobs.discard(job)
            if isinstance(result, Exception):
                report(result)
                return
            written.update((p.name, p) for p in result)
            if state["rendered"] and len(written) == len(names):
                report([written[n] for n in names])

        def submit(name: str, image) -> None:
            names.append(name)
            job = PlotSaveJob([(name, image)], out_dir)
            self.jobs.add(job)
            job.signals.done.connect(lambda result, job=job: finished(result, job))
            job.signals.failed.connect(lambda exc, job=job: finished(exc, job))
            job.submit()

        # One panel per event-loop pass (a zero timer between them), so that the window stays responsive while the
        # five PNGs render: 839 ms in one go on the 2-core machine before (bench_gui_responsiveness.py --part ticks).
        timing.mark("gui_png_render_start")
        steps = iter_run_plots(self._history_rows, plots)

        def step(then_next: bool = True) -> bool:
            """Render the next panel; False when all are done (or rendering failed)."""
            try:
                name, image = next(steps)
            except StopIteration:
                timing.mark("gui_png_rendered")
                state["rendered"] = True
                self._png_step = None
                if len(written) == len(names):  # every save already reported back while rendering
                    report([written[n] for n in names])
                return False
            except Exception as exc:  # noqa: BLE001 - the run itself succeeded; say so and move on
                self._png_step = None
                report(exc)
                return False
            submit(name, image)
            if then_next:
                QTimer.singleShot(0, self, lambda: self._png_step is step and step())
            return True

        self._png_step = step
        step()

    def _write_plots_apart(self, run_dir: str) -> None:
        """Write the run's PNGs in a process of their own (gui/run_plots.py: a QProcess, nothing on the GUI
        thread but its start); ``plotsWritten`` as for :meth:`_write_plots`."""
        job = PlotsProcess(run_dir, self)

        def ended(result, job=job) -> None:
            self.jobs.discard(job)
            if isinstance(result, Exception):
                self._plots_failed(result)
                return
            timing.mark("gui_png_written")
            self.statusBar().showMessage(f"Wrote {len(result)} plots to {Path(run_dir) / 'plots'}", 6000)
            self.plotsWritten.emit(result)

        job.written.connect(ended)
        job.failed.connect(lambda text: ended(OSError(text)))
        self.jobs.add(job)
        timing.mark("gui_png_render_start")
        job.start()

    def _finish_png_rendering(self) -> None:
        """Render the PNGs still to come now (the window is closing: they land before its jobs are waited for)."""
        step = getattr(self, "_png_step", None)
        while step is not None and self._png_step is step and step(then_next=False):
            pass

    def _plots_failed(self, exc: Exception) -> None:
        self.statusBar().showMessage(f"Could not write the plot PNGs: {exc}", 10000)
        self.plotsWritten.emit(exc)
