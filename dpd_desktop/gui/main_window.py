"""The main window: toolbar, dataset/model/training forms, live plot panels, progress, epoch table, status bar.

Widgets: :class:`~.actions.Actions` and :class:`~.plot_area.PlotArea`; state and work: :class:`~.session.Session`,
:class:`~.dataset_control.DatasetController`, :class:`~.form_state.FormState`, :class:`~.run_control.RunController`,
:class:`~.model_exports.RunDpd`. Slow jobs run off the GUI thread in a :class:`~.jobs.JobRegistry` that a close
waits for at most :data:`CLOSE_WAIT_MS`.
"""
from __future__ import annotations

from typing import Any, Callable

from PySide6.QtCore import QByteArray, QEvent, QSettings, QTimer, Signal, Slot
from PySide6.QtWidgets import QApplication, QMainWindow

from .. import __version__
from ..config import ExperimentConfig
from ..lab.supervisor import Supervisor
from ..runs.workspace import Workspace
from . import theme
from .actions import PREVIEW_WARNING, Actions
from .close_prompt import CloseGuard
from .dataset_control import DATASET_FILTER, DatasetController
from .dataset_flags import install_dataset_flags
from .form_state import FormState, coerce
from .inspector import install_inspector
from .jobs import JobRegistry
from .loop_view import install_loop_view
from .model_exports import DPD_OUTPUT_FILTERS, RunDpd, install_model_exports
from .panel_export import install_export_menu
from .plot_area import PlotArea
from .preload import start_preload
from .qt_app import APP_NAME
from .queue_panel import install_queue_panel
from .resume_control import ResumeControl
from .retention_prompt import install_retention_prompt
from .rf_view import install_rf_view
from .run_control import RunController, same_dataset, validate_config
from .runs_browser import install_runs_browser
from .session import Session, format_duration
from .sweep_view import install_sweep_view
from .widgets.config_form import BACKBONES

CLOSE_WAIT_MS = 5000

__all__ = ["CLOSE_WAIT_MS", "DATASET_FILTER", "DPD_OUTPUT_FILTERS", "MainWindow", "PREVIEW_WARNING",
           "format_duration", "same_dataset", "validate_config"]


def _default_workspace():
    try:
        return Workspace()
    except Exception:  # noqa: BLE001 - the window still works; a run then reports the workspace's error
        return None


class MainWindow(QMainWindow):
    """DPD Desktop's main window.

    Args:
        workspace: the run workspace (``Workspace``); default: the platform's user data folder.
        settings: QSettings for window geometry.
        demo_kwargs: keyword arguments for ``make_demo_dataset`` when the demo data is loaded.
        supervisor_factory: builds the supervisor that trains each run (lab/supervisor.py).

    ``stateChanged`` and ``runEnded`` carry the core's run-state words (:data:`dpd_desktop.runs.states.RUN_STATES`).
    """

    stateChanged = Signal(str)  # queued / running / succeeded / failed / cancelled / interrupted
    datasetLoaded = Signal(object)
    datasetFailed = Signal(str)
    runEnded = Signal(str)  # the final state
    dpdExportEnded = Signal(str)  # "succeeded" / "failed" (Run DPD…)
    plotsWritten = Signal(object)  # after a succeeded run: the PNG paths written, or the exception
    firstPainted = Signal()  # once, right after the window's first paint (the PyTorch preload starts then)
    coreLoaded = Signal()  # the PyTorch preload ended (gui/preload.py)

    def __init__(self, workspace: Any = None, settings: QSettings | None = None, demo_kwargs: dict | None = None,
                 supervisor_factory: Callable = Supervisor, parent=None):
        super().__init__(parent)
        theme.configure_pyqtgraph()
        self.workspace = workspace if workspace is not None else _default_workspace()
        self._settings = settings if settings is not None else QSettings()
        self.session = Session()
        self.jobs = JobRegistry()
        #: Import PyTorch and Run DPD's module on a pool thread after the first paint (gui/preload.py).
        self.preload_core = True
        self._shown_state: str | None = None
        self._title_run: str | None = None
        self._painted = False
        status = self._status

        self.setWindowTitle(f"{APP_NAME} {__version__}")
        root = getattr(self.workspace, "root", None)
        self.menus = Actions(self, self._settings, None if root is None else str(root))
        self.plots = PlotArea(self.menus.preview_warning, self._settings, self.workspace, status, self)
        for name in Actions.WIDGETS + PlotArea.WIDGETS:  # the window's widgets, under their own names
            setattr(self, name, getattr(self.menus if name in Actions.WIDGETS else self.plots, name))
        self.setCentralWidget(self.plots.central)
        self.data = DatasetController(self.jobs, self.session, self.dataset_box, self.banner, self._settings,
                                      dict(demo_kwargs or {}), status, self)
        self.form_state = FormState(self.form, self.menus, self.data, self.session, self._settings, self.workspace,
                                    status)
        self.runs = RunController(self.session, self.jobs, self.workspace, self.plots, self.menus, self.data,
                                  self.form_state.config, self.reset_run_views, status, supervisor_factory, self)
        self.dpd = RunDpd(self.session, self.jobs, self.workspace, self._settings, self.banner,
                          lambda: self.data.dataset, status, self)
        self._connect()

        self.queue_panel = install_queue_panel(self)  # the run queue, a dock (gui/queue_panel.py)
        self.resume_control = ResumeControl(self)  # Resume, after Stop (gui/resume_control.py)
        self.runs.gate = install_dataset_flags(self)  # the inspector's flags under the dataset summary; Start asks
        install_inspector(self)  # Dataset ▸ Inspect… / Import capture… (gui/inspector.py)
        self.runs_browser = install_runs_browser(self)  # the runs dock: open, compare, report (gui/runs_browser.py)
        self.sweep_view = install_sweep_view(self)  # the sweeps dock: trials, Pareto plot (gui/sweep_view.py)
        self.rf_view = install_rf_view(self)  # View ▸ RF plots: compression, Pin/Pout, CCDF (gui/rf_view.py)
        install_model_exports(self, self.dpd)  # Run ▸ MP/GMP coefficients, Run DPD on a waveform file
        self.loop_view = install_loop_view(self)  # the instrument loop dock (gui/loop_view.py)
        install_export_menu(self)  # File ▸ Export as PNG/SVG/CSV, and each plot's menu (gui/panel_export.py)

        self.setAcceptDrops(True)
        self._restore_geometry()
        self.session.subscribe(self._render)
        self.close_guard = CloseGuard(self)  # a close while a run is live asks first (close_prompt.py)
        self.form_state.sync_pa_runs()
        self._render()
        self._update_title()
        self.form_state.update_estimate()
        self.retention_prompt = install_retention_prompt(self)  # scratch runs due for removal, shown first

    def _connect(self) -> None:
        m, fs, runs, data = self.menus, self.form_state, self.runs, self.data
        m.act_open.triggered.connect(lambda: data.ask_open(folder=False))
        m.act_open_folder.triggered.connect(lambda: data.ask_open(folder=True))
        m.act_demo.triggered.connect(self.load_demo)
        m.act_start.triggered.connect(lambda: self.start_run())
        m.act_stop.triggered.connect(self.stop_run)
        m.act_export.triggered.connect(lambda: self.export_current_plot())
        m.act_run_dpd.triggered.connect(lambda: self.run_dpd_export())
        m.act_run_dpd_saved.triggered.connect(self.dpd.ask_saved_run)
        m.step_dpd.toggled.connect(fs.on_step_toggled)
        m.step_dpd.toggled.connect(self._update_title)
        m.preview_check.toggled.connect(self._on_preview_toggled)
        self.form.changed.connect(self._update_title)
        self.form.changed.connect(fs.update_estimate)
        self.form.preview_every.valueChanged.connect(self._on_preview_period_changed)
        self.coreLoaded.connect(fs.update_estimate)  # "auto" may mean CUDA, known once torch is imported
        self.firstPainted.connect(self._start_preload)
        data.datasetSet.connect(self._on_dataset_set)
        data.loaded.connect(self._on_dataset_arrived)
        data.loadFailed.connect(self._on_dataset_failed)
        runs.ended.connect(self.runEnded)
        runs.plotsWritten.connect(self.plotsWritten)
        self.dpd.ended.connect(self.dpdExportEnded)

    def _status(self, text: str, ms: int = 0) -> None:
        self.statusBar().showMessage(text, ms)

    # ================================================================================================ state
    @property
    def state(self) -> str | None:
        """The run state: None before the first run, else one of RUN_STATES."""
        return self.session.state

    @property
    def dataset(self):
        return self.data.dataset

    @property
    def write_plots_on_finish(self) -> bool:
        """Write a succeeded run's PNGs into its ``plots/`` folder (gui/run_plots.py)."""
        return self.runs.write_plots

    @write_plots_on_finish.setter
    def write_plots_on_finish(self, on: bool) -> None:
        self.runs.write_plots = bool(on)

    @property
    def current_panel(self):
        """The plot of Ctrl+E: the one last clicked."""
        return self.plots.current_panel

    @property
    def about_box(self):
        return self.menus.about_box

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
            # QProgressBar.setValue repaints at once (the window's backing store with it); with updates off it only
            # schedules the repaint
            self.progress_bar.setUpdatesEnabled(False)
            self.progress_bar.setValue(value)
            self.progress_bar.setUpdatesEnabled(True)
        if s.state != self._shown_state:
            self._shown_state = s.state
            if s.state is not None:
                self.stateChanged.emit(s.state)

    # ================================================================================================ commands
    def start_run(self, config: ExperimentConfig | None = None) -> bool:
        """:meth:`RunController.start`: start a run (from the form unless ``config`` is given); False when refused."""
        return self.runs.start(config)

    def stop_run(self) -> None:
        """:meth:`RunController.stop`: the run stops after its current batch; a queued run ends at once."""
        self.runs.stop()

    def run_dpd_export(self, out=None, run_dir=None, split: str = "test", input_file=None,
                       overwrite: bool | None = None) -> bool:
        """:meth:`RunDpd.run`: u = DPD(x) of a DPD run (default: the ended one) written to ``out``."""
        return self.dpd.run(out=out, run_dir=run_dir, split=split, input_file=input_file, overwrite=overwrite)

    def finished_dpd_run(self) -> str | None:
        return self.dpd.finished_dpd_run()

    def open_dataset(self, path) -> None:
        """Load a dataset from disk in the thread pool; the summary and title update when it arrives."""
        self.data.open(path)

    def load_demo(self) -> None:
        """Load the built-in synthetic demo dataset in the thread pool."""
        self.data.load_demo()

    def set_dataset(self, dataset, ref: str | None = None) -> None:
        """Use an already loaded dataset (``ref``: ``"demo"`` or its path; default: from ``dataset.source``)."""
        self.data.set(dataset, ref)

    def config_from_form(self, validate: bool = True) -> ExperimentConfig:
        """The ExperimentConfig the form describes. Raises :class:`ConfigError` (shown next to the form)."""
        return self.form_state.config(validate)

    def set_form_from_config(self, cfg: ExperimentConfig) -> None:
        """Fill the toolbar and forms from ``cfg``."""
        self.form_state.set_config(cfg)
        self._update_title()

    def refresh_pa_runs(self) -> None:
        """Fill the DPD step's PA run combo from the workspace."""
        self.form_state.refresh_pa_runs()

    def show_plots(self, plots, label: str = "") -> None:
        """Draw one PlotData in every data panel now."""
        self.plots.show_plots(plots, label)

    def export_current_plot(self, path=None, overwrite: bool = False):
        """:meth:`PlotArea.export_current_plot`: the current plot as PNG (asks for the file unless ``path``)."""
        return self.plots.export_current_plot(path, overwrite)

    def set_color_scheme(self, scheme: str) -> None:
        """View → Colors: "system", "light" or "dark"."""
        self.menus.set_color_scheme(scheme)

    def about_text(self) -> str:
        return self.menus.about_text()

    def reset_run_views(self) -> None:
        """Forget what shows the last run: plots, table, rows, best metric, and a reopened run's title."""
        self.plots.reset()
        self.best_label.setText("")
        self.set_title_run(None)

    def restore_last_session(self) -> bool:
        """Fill the form, step and preview tick from QSettings and load the saved dataset in the background;
        False when nothing was saved."""
        scheme = coerce(self._settings.value("window/scheme"), str)
        if scheme in ("light", "dark"):
            self.set_color_scheme(scheme)
        if not self._settings.contains("form/epochs") and not self._settings.contains("form/dataset"):
            return False
        cfg, other = self.form_state.saved_form()
        self.set_form_from_config(cfg)
        if "preview_every" in other:
            self.form.preview_every.setValue(int(other["preview_every"]))
        self.preview_check.setChecked(bool(other.get("preview", False)))
        self.form_state.mark_chosen()  # the user's values: the dataset load below keeps them
        ds = other.get("dataset")
        if ds == "demo":
            self.load_demo()
        elif ds:
            self.open_dataset(ds)
        return True

    # ================================================================================================ the dataset
    def _on_dataset_set(self, dataset, ref: str) -> None:
        cfg = self.session.config
        if not self.session.is_live and cfg is not None and not same_dataset(getattr(cfg, "dataset", None), ref):
            # Another dataset than the ended run's: its plots, legend, axis ranges and Run DPD go with it.
            self.reset_run_views()
            if self.session.forget_ended_run() and self.banner.isVisible() and self.banner.kind != "error":
                self.banner.setVisible(False)
        if not self.session.is_live:
            self.form_state.suggest_defaults(dataset)
        self._update_title()
        self.form_state.update_estimate()
        self.datasetLoaded.emit(dataset)

    def _on_dataset_arrived(self) -> None:
        if self.session.state == "queued":  # a start waited for this dataset
            self.start_run(self.session.config)

    def _on_dataset_failed(self, message: str) -> None:
        self.datasetFailed.emit(message)
        if self.session.fail_queued("its dataset could not be loaded"):
            self.runEnded.emit("failed")

    # ================================================================================================ the form
    def set_title_run(self, text: str | None) -> None:
        """Name a run reopened from its folder in the title ("<dataset> · <STEP> · <MODEL>-<H> · <run id>",
        gui/run_status.py) until the next run or dataset; None: the title follows the form again."""
        self._title_run = text
        self._update_title()

    def _update_title(self, *_) -> None:
        if self._title_run:
            self.setWindowTitle(f"{APP_NAME} {__version__} — {self._title_run}")
            return
        parts = []
        if self.data.dataset is not None:
            parts.append(str(getattr(self.data.dataset, "name", "dataset")))
        parts.append("DPD" if self.step_dpd.isChecked() else "PA")
        label = dict((v, l) for v, l, _ in BACKBONES).get(self.form.backbone.currentData(),
                                                          str(self.form.backbone.currentText()))
        if self.form.is_poly:  # MP/GMP: orders, no hidden size
            parts.append(f"{label} K{self.form.poly.order.value()} M{self.form.poly.memory.value()}")
        else:
            parts.append(f"{label}-{self.form.hidden_size.value()}")
        # The app name once: ensure_app sets no display name, which Qt would append (gui/qt_app.py).
        self.setWindowTitle(f"{APP_NAME} {__version__} — " + " · ".join(parts))

    def _on_preview_period_changed(self, n: int) -> None:
        """A new "Preview every" during a run reaches the trainer at its next batch."""
        if self.preview_check.isChecked():
            self.runs.set_preview_every(int(n))

    def _on_preview_toggled(self, on: bool) -> None:
        self.preview_warning.setVisible(on)
        self.session.update(preview=on)
        self.runs.set_preview_every(self.form.preview_period if on else None)

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
        """Ask every background job to stop and wait at most ``timeout_ms`` in total; True when all have ended
        (:meth:`JobRegistry.shutdown`)."""
        left = self.jobs.shutdown(timeout_ms)
        self.runs.worker = None
        self.data.loader = None
        return not left

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        if not self.close_guard.allow(event):  # "Quit when it finishes" / "Cancel": the window stays
            return
        if len(self.jobs):
            # A running training is cancelled; PNGs being written land (each is written atomically).
            self._status("Stopping the run…" if self.runs.worker is not None else "Finishing…")
            QApplication.processEvents()
            self.shutdown(CLOSE_WAIT_MS)
        self._save_geometry()
        self.form_state.save()
        self._settings.sync()
        super().closeEvent(event)

    def dragEnterEvent(self, event) -> None:  # noqa: N802 (Qt name)
        if self.data.accepts_drop(event):
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:  # noqa: N802
        """Drop a dataset folder or file on the window to load it."""
        self.data.drop(event)
        event.acceptProposedAction()

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt name)
        super().paintEvent(event)
        if not self._painted:
            self._painted = True
            # After this paint's event has returned: the children paint and the backing store flushes first.
            QTimer.singleShot(0, self.firstPainted.emit)

    def _start_preload(self) -> None:
        if not self.preload_core:
            return
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
            if hasattr(self, "plots"):
                self.plots.apply_palette()
                self.menus.style_warning()
        super().changeEvent(event)
