"""The main window: toolbar, dataset/model/training forms, live plot panels, progress, epoch table, status bar.

The window renders a Qt-free session model (:mod:`.session`: run state, progress texts, enabled controls) and
reacts to its changes; its parts are in :mod:`.actions` (actions, toolbar, menus, status bar), :mod:`.plot_area`
(central widget, drawing, PNGs), :mod:`.run_control` (start/stop, run events, Run DPD…) and
:mod:`.dataset_control` (opening datasets). Training and every other slow job run off the GUI thread, registered in
one :class:`~dpd_desktop.gui.jobs.JobRegistry` that a close waits for at most :data:`CLOSE_WAIT_MS`. Plots redraw at
most once per epoch / preview (latest value wins on a single-shot timer); the progress read-out at most ten times a
second.
"""
from __future__ import annotations

from typing import Any, Callable

from PySide6.QtCore import QByteArray, QEvent, QSettings, Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import QApplication, QMainWindow

from .. import __version__
from ..config import ExperimentConfig, default_hidden_size
from ..runs.workspace import Workspace
from . import theme
from .actions import PREVIEW_WARNING, WindowActions
from .close_prompt import CloseGuard
from .dataset_flags import install_dataset_flags
from .dataset_control import DATASET_FILTER, DatasetControl
from .form_state import FormState
from .inspector import install_inspector
from .jobs import JobRegistry
from .loop_view import install_loop_view
from .model_exports import install_model_exports
from .qt_app import APP_NAME
from .plot_area import PlotArea
from .panel_export import install_export_menu
from .queue_panel import install_queue_panel
from .resume_control import ResumeControl
from .retention_prompt import install_retention_prompt
from .rf_view import install_rf_view
from .runs_browser import install_runs_browser
from .sweep_view import install_sweep_view
from .run_control import DPD_OUTPUT_FILTERS, RunControl, same_dataset, validate_config
from .session import Session, format_duration
from .widgets.config_form import BACKBONES

CLOSE_WAIT_MS = 5000

__all__ = ["CLOSE_WAIT_MS", "DATASET_FILTER", "DPD_OUTPUT_FILTERS", "MainWindow", "PREVIEW_WARNING",
           "format_duration", "same_dataset", "validate_config"]


def _default_workspace():
    try:
        return Workspace()
    except Exception:  # noqa: BLE001 - the window still works; the trainer then picks its own default
        return None


class MainWindow(WindowActions, PlotArea, RunControl, DatasetControl, FormState, QMainWindow):
    """DPD Desktop's main window.

    Args:
        workspace: the run workspace (``Workspace``); default: the platform's user data folder.
        trainer_factory: ``factory(config, dataset=, workspace=, observers=)`` → trainer; default: the real Trainer.
        settings: QSettings for window geometry (tests pass one in a temporary folder).
        demo_kwargs: keyword arguments for ``make_demo_dataset`` when the demo data is loaded.

    ``stateChanged`` and ``runEnded`` carry the core's run-state words (:data:`dpd_desktop.runs.states.RUN_STATES`).
    """

    stateChanged = Signal(str)  # queued / running / succeeded / failed / cancelled
    datasetLoaded = Signal(object)
    datasetFailed = Signal(str)
    runEnded = Signal(str)  # the final state: succeeded / failed / cancelled
    dpdExportEnded = Signal(str)  # "succeeded" / "failed" (Run DPD…)
    plotsWritten = Signal(object)  # after a finished run: the PNG paths written, or the exception
    firstPainted = Signal()  # once, right after the window's first paint (the PyTorch preload starts then)
    coreLoaded = Signal()  # the PyTorch preload ended (gui/preload.py)

    # The training worker's signals come from its thread. PySide6 queues them to the GUI thread only for slots
    # defined in the body of the QObject class (a part's method, even re-decorated here, is called directly on the
    # training thread): these thin slots hand each event to its part.
    @Slot(object)
    def _on_run_started(self, ev) -> None:
        RunControl._on_run_started(self, ev)

    @Slot(object)
    def _on_batch_progress(self, ev) -> None:
        RunControl._on_batch_progress(self, ev)

    @Slot(object)
    def _on_epoch_ended(self, ev) -> None:
        RunControl._on_epoch_ended(self, ev)

    @Slot(object)
    def _on_preview_ready(self, ev) -> None:
        PlotArea._on_preview_ready(self, ev)

    @Slot(object)
    def _on_run_finished(self, ev) -> None:
        RunControl._on_run_finished(self, ev)

    @Slot(object)
    def _on_run_failed(self, ev) -> None:
        RunControl._on_run_failed(self, ev)

    @Slot(object)
    def _on_run_cancelled(self, ev) -> None:
        RunControl._on_run_cancelled(self, ev)

    @Slot(object)
    def _on_child_plots_written(self, result) -> None:
        RunControl._on_child_plots_written(self, result)

    @Slot(object)
    def _on_run_interrupted(self, end) -> None:
        RunControl._on_run_interrupted(self, end)

    @Slot()
    def _on_worker_done(self) -> None:
        RunControl._on_worker_done(self)

    def __init__(self, workspace: Any = None, trainer_factory: Callable | None = None,
                 settings: QSettings | None = None, demo_kwargs: dict | None = None, parent=None):
        super().__init__(parent)
        theme.configure_pyqtgraph()
        self.workspace = workspace if workspace is not None else _default_workspace()
        self._trainer_factory = trainer_factory
        self._settings = settings if settings is not None else QSettings()
        self.demo_kwargs = dict(demo_kwargs or {})

        self.session = Session()
        self.jobs = JobRegistry()
        self._shown_state: str | None = None
        self._dataset = None
        self._dataset_ref: str | None = None
        self._loader = None  # the DatasetLoader in flight
        self._worker = None  # the TrainingWorker of the live run
        self._history_rows: list[dict] = []
        self._last_plots = None
        self._pending_plots: tuple[Any, str] | None = None
        self._pending_progress = None
        self.write_plots_on_finish = True
        #: Import PyTorch and the trainer on a pool thread after the first paint (gui/preload.py).
        self.preload_core = True
        #: Train in a child process (gui/child_worker.py) with the real trainer; False: on a QThread of this process
        #: (the benchmarks' A/B, benchmarks/bench_gui_responsiveness.py --path thread).
        self.train_in_child = True
        self.child_on_cuda = False  # a CUDA run trains in this process (gui/run_control.py _launch_worker says why)
        self._painted = False
        self._suggested: tuple[int, int] | None = None  # (epochs, stride) last suggested for a dataset

        self.setWindowTitle(f"{APP_NAME} {__version__}")
        self._build_actions()
        self._build_toolbar()
        self._build_central()
        self._build_statusbar()
        self._build_menus()
        self.queue_panel = install_queue_panel(self)  # the run queue, a dock (gui/queue_panel.py)
        self.resume_control = ResumeControl(self)  # Resume, after Stop (gui/resume_control.py)
        install_dataset_flags(self)  # the inspector's flags under the dataset summary; Start asks (dataset_flags.py)
        install_inspector(self)  # Dataset ▸ Inspect… / Import capture… (gui/inspector.py)
        self.runs_browser = install_runs_browser(self)  # the runs dock: open, compare, report (gui/runs_browser.py)
        self.sweep_view = install_sweep_view(self)  # the sweeps dock: trials, Pareto plot (gui/sweep_view.py)
        self.rf_view = install_rf_view(self)  # View ▸ RF plots: compression, Pin/Pout, CCDF (gui/rf_view.py)
        install_model_exports(self)  # Run ▸ MP/GMP coefficients, Run DPD on a waveform file (gui/model_exports.py)
        self.loop_view = install_loop_view(self)  # the instrument loop dock (gui/loop_view.py)
        install_export_menu(self)  # File ▸ Export as PNG/SVG/CSV, and each plot's menu (gui/panel_export.py)

        self._plot_timer = QTimer(self, singleShot=True, interval=30)
        self._plot_timer.timeout.connect(self._flush_plots)
        self._progress_timer = QTimer(self, singleShot=True, interval=100)
        self._progress_timer.timeout.connect(self._flush_progress)

        self.form.changed.connect(self._update_title)
        self.form.changed.connect(self.update_estimate)
        self.form.preview_every.valueChanged.connect(self._on_preview_period_changed)
        self.coreLoaded.connect(self.update_estimate)  # "auto" may mean CUDA, known once torch is imported
        self.firstPainted.connect(self._start_preload)
        self.setAcceptDrops(True)
        self._restore_geometry()
        self.session.subscribe(self._render)
        self.close_guard = CloseGuard(self)  # a close while a run is live asks first (close_prompt.py)
        self._sync_pa_runs()
        self._render()
        self._update_title()
        self.update_estimate()
        self.retention_prompt = install_retention_prompt(self)  # scratch runs due for removal, shown first

    # ================================================================================================ state
    @property
    def state(self) -> str | None:
        """The run state: None before the first run, else one of RUN_STATES."""
        return self.session.state

    @property
    def _pending_start(self) -> ExperimentConfig | None:
        """The config of a run queued for its dataset (kept for gui/app.py; ``start_run(config)`` queues itself)."""
        return self.session.config if self.session.state == "queued" else None

    @_pending_start.setter
    def _pending_start(self, cfg: ExperimentConfig | None) -> None:
        if cfg is not None:
            self.session.queue(cfg)

    def _render(self, *_) -> None:
        """Show the session: enabled controls, progress read-out; ``stateChanged`` when the run state changed."""
        s = self.session
        c = s.controls()
        self.act_start.setEnabled(c.start)
        self.act_stop.setEnabled(c.stop)
        for a in (self.act_open, self.act_open_folder, self.act_demo):
            a.setEnabled(c.open_dataset)
        self.form.set_read_only(not c.form_editable)
        self.step_pa.setEnabled(c.step_choice)
        self.step_dpd.setEnabled(c.step_choice)
        self.pa_run_combo.setEnabled(c.pa_run_choice)
        self.form.set_preview_enabled(c.preview_period)
        self.act_run_dpd.setEnabled(c.run_dpd)
        self.act_run_dpd_saved.setEnabled(c.run_dpd_saved)
        self.progress_label.setText(s.progress_text)
        value = int(round(1000 * s.progress))
        if value != self.progress_bar.value():
            # QProgressBar.setValue repaints at once (and the window's backing store with it: 6.5 ms per epoch end,
            # bench_gui_responsiveness.py --part epoch-end); with updates off it only schedules the repaint
            self.progress_bar.setUpdatesEnabled(False)
            self.progress_bar.setValue(value)
            self.progress_bar.setUpdatesEnabled(True)
        if s.state != self._shown_state:
            self._shown_state = s.state
            if s.state is not None:
                self.stateChanged.emit(s.state)

    def _sync_pa_runs(self) -> None:
        combo = self.pa_run_combo
        self.session.update(pa_run_available=combo.count() > 0 and combo.itemData(0) is not None)

    # ================================================================================================ config
    def set_form_from_config(self, cfg: ExperimentConfig) -> None:
        """Fill the toolbar and forms from ``cfg``."""
        # The step first: switching it may put that step's default hidden size in the form, which cfg then overrides.
        (self.step_dpd if cfg.step == "dpd" else self.step_pa).setChecked(True)
        self.form.set_config(cfg)
        if cfg.pa_run:
            i = self.pa_run_combo.findData(cfg.pa_run)
            if i < 0:
                if self.pa_run_combo.count() == 1 and self.pa_run_combo.itemData(0) is None:
                    self.pa_run_combo.clear()
                self.pa_run_combo.addItem(str(cfg.pa_run), cfg.pa_run)
                i = self.pa_run_combo.count() - 1
            self.pa_run_combo.setCurrentIndex(i)
        self.preview_check.setChecked(cfg.preview_every is not None)
        self._sync_pa_runs()
        self._update_title()
        self.mark_form_chosen()  # a dataset load keeps these epochs and stride (gui/form_state.py)

    def config_from_form(self, validate: bool = True) -> ExperimentConfig:
        """The ExperimentConfig the form describes. Raises :class:`ConfigError` (shown next to the form)."""
        step = "dpd" if self.step_dpd.isChecked() else "pa"
        overrides: dict[str, Any] = {
            "step": step,
            "preview_every": self.form.preview_period if self.preview_check.isChecked() else None,
        }
        if step == "dpd":
            overrides["pa_run"] = self.pa_run_combo.currentData()
        if self._dataset_ref:
            overrides["dataset"] = self._dataset_ref
        cfg = self.form.config(**overrides)
        if validate:
            validate_config(cfg)
        return cfg

    def set_title_run(self, text: str | None) -> None:
        """Name a run reopened from its folder in the title ("<dataset> · <STEP> · <MODEL>-<H> · <run id>",
        gui/run_status.py) until the next run or dataset; None: the title follows the form again."""
        self._title_run = text
        self._update_title()

    def _update_title(self) -> None:
        if getattr(self, "_title_run", None):
            self.setWindowTitle(f"{APP_NAME} {__version__} — {self._title_run}")
            return
        parts = []
        if self._dataset is not None:
            parts.append(str(getattr(self._dataset, "name", "dataset")))
        parts.append("DPD" if self.step_dpd.isChecked() else "PA")
        label = dict((v, l) for v, l, _ in BACKBONES).get(self.form.backbone.currentData(),
                                                          str(self.form.backbone.currentText()))
        if self.form.is_poly:  # MP/GMP: orders, no hidden size
            parts.append(f"{label} K{self.form.poly.order.value()} M{self.form.poly.memory.value()}")
        else:
            parts.append(f"{label}-{self.form.hidden_size.value()}")
        # The app name once: ensure_app sets no display name, which Qt would append (gui/qt_app.py).
        self.setWindowTitle(f"{APP_NAME} {__version__} — " + " · ".join(parts))

    def _on_step_toggled(self, dpd: bool) -> None:
        new, old = ("dpd", "pa") if dpd else ("pa", "dpd")
        # A hidden size the user has not edited (still the other step's default) becomes this step's default
        # (config.default_hidden_size: the reference command line's PA 23, DPD 15), as on the command line.
        if self.form.hidden_size.value() == default_hidden_size(old):
            self.form.hidden_size.setValue(default_hidden_size(new))
        if dpd:
            self.refresh_pa_runs()
        self.session.update(step=new)
        self._update_title()
        self.update_estimate()

    def refresh_pa_runs(self) -> None:
        """Fill the DPD combo with PA runs from the workspace (newest first as the workspace lists them)."""
        current = self.pa_run_combo.currentData()
        self.pa_run_combo.clear()
        runs = []
        if self.workspace is not None:
            try:
                runs = list(self.workspace.list_runs(step="pa"))
            except Exception as exc:  # noqa: BLE001
                self.statusBar().showMessage(f"Could not list PA runs: {exc}", 8000)
        # Usable: succeeded runs, and cancelled ones that kept a best checkpoint.
        runs = [r for r in runs if getattr(r, "status", None) == "succeeded" or
                (getattr(r, "status", None) == "cancelled" and getattr(r, "best_epoch", None) is not None)]
        for rec in runs:
            best = getattr(rec, "best_epoch", None)
            size = "" if str(rec.backbone) in ("mp", "gmp") else f"-{rec.hidden_size}"  # MP/GMP: orders, no H
            label = f"{rec.run_id} · {str(rec.backbone).upper()}{size}"
            if getattr(rec, "status", None):
                label += f" · {rec.status}"
            if best is not None:
                label += f" · ep {best}"
            self.pa_run_combo.addItem(label, rec.run_id)
            self.pa_run_combo.setItemData(self.pa_run_combo.count() - 1, str(rec.run_dir),
                                          Qt.ItemDataRole.ToolTipRole)
        if not runs:
            self.pa_run_combo.addItem("(no PA run yet — train a PA first)", None)
        i = self.pa_run_combo.findData(current) if current is not None else -1
        self.pa_run_combo.setCurrentIndex(i if i >= 0 else 0)
        self._sync_pa_runs()

    def _on_preview_period_changed(self, n: int) -> None:
        """A new "Preview every" during a run reaches the trainer at its next batch (set_preview_every)."""
        if self._worker is not None and self.preview_check.isChecked():
            self._worker.set_preview_every(int(n))

    def _on_preview_toggled(self, on: bool) -> None:
        self.preview_warning.setVisible(on)
        self.session.update(preview=on)
        if self._worker is not None:
            self._worker.set_preview_every(self.form.preview_period if on else None)

    # ================================================================================================ window
    def _restore_geometry(self) -> None:
        geo = self._settings.value("window/geometry", QByteArray(), type=QByteArray)
        if geo is not None and not geo.isEmpty():
            self.restoreGeometry(geo)
        else:
            self.resize(1600, 1000)
        for key, splitter in (("window/main_splitter", self.main_splitter),
                              ("window/right_splitter", self.right_splitter)):
            st = self._settings.value(key, QByteArray(), type=QByteArray)
            if st is not None and not st.isEmpty():
                splitter.restoreState(st)

    def _save_geometry(self) -> None:
        self._settings.setValue("window/geometry", self.saveGeometry())
        self._settings.setValue("window/main_splitter", self.main_splitter.saveState())
        self._settings.setValue("window/right_splitter", self.right_splitter.saveState())
        self._settings.sync()

    def shutdown(self, timeout_ms: int = CLOSE_WAIT_MS) -> bool:
        """Ask every background job to stop (a running training cancels at its next batch) and wait for them at
        most ``timeout_ms`` in total; True when all have ended (else they are left running, see
        :meth:`JobRegistry.shutdown`)."""
        left = self.jobs.shutdown(timeout_ms)
        self._worker = None
        self._loader = None
        return not left

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        if not self.close_guard.allow(event):  # "Quit when it finishes" / "Cancel": the window stays
            return
        self._finish_png_rendering()
        if len(self.jobs):
            # A running training is cancelled; PNGs of a finished run land (each is written atomically anyway).
            self.statusBar().showMessage("Stopping the run…" if self._worker is not None else "Finishing…")
            QApplication.processEvents()
            self.shutdown(CLOSE_WAIT_MS)
        self._save_geometry()
        self.save_form_settings()
        self._settings.sync()
        super().closeEvent(event)

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt name)
        super().paintEvent(event)
        if not self._painted:
            self._painted = True
            # After this paint's event has returned: the children paint and the backing store flushes first.
            QTimer.singleShot(0, self.firstPainted.emit)

    def _start_preload(self) -> None:
        if not self.preload_core:
            return
        from .preload import start_preload

        job = start_preload(self.jobs)
        if job.is_done():
            self._on_core_loaded()
        else:
            job.signals.done.connect(self._on_core_loaded)

    @Slot()
    def _on_core_loaded(self, *_) -> None:
        self.form.apply_registry_labels()
        self.coreLoaded.emit()

    def changeEvent(self, event) -> None:  # noqa: N802
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            theme.configure_pyqtgraph()
            for p in getattr(self, "panels", []):
                p.apply_palette()
            if hasattr(self, "preview_warning"):
                self._style_warning()
                self._set_current_panel(self._current_panel)  # its frame's palette(highlight), set again
        super().changeEvent(event)
