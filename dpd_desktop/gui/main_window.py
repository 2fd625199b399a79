"""The main window: toolbar, dataset/model/training forms, live plot panels, progress, epoch table, status bar.

Training and dataset loading run off the GUI thread (:mod:`.worker`); this module only reacts to their signals.
Plots redraw at most once per epoch / preview (latest value wins on a single-shot timer); the progress read-out at
most ten times a second.
"""
from __future__ import annotations

import enum
import json
import math
import os
import traceback
from pathlib import Path
from typing import Any, Callable

from PySide6.QtCore import QByteArray, QEvent, QObject, QRunnable, QSettings, Qt, QThreadPool, QTimer, Signal, Slot
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (QApplication, QButtonGroup, QCheckBox, QComboBox, QFileDialog, QGridLayout,
                               QHBoxLayout, QLabel, QMainWindow, QMessageBox, QProgressBar, QRadioButton,
                               QMenu, QScrollArea, QSizePolicy, QSplitter, QStyle, QToolBar, QToolButton, QVBoxLayout,
                               QWidget)

from .. import timing
from ..config import ConfigError, ExperimentConfig
from . import history, theme
from .panels import AMAMPanel, AMPMPanel, LearningPanel, PSDPanel, TimeDomainPanel
from .panels.base import PlotPanel
from .panels.base import ordered
from .widgets import ConfigForm, DatasetSummary, EpochTable, OutcomeBanner, SignalLegend
from .widgets.banner import warning_color
from .widgets.config_form import BACKBONES
from .worker import DatasetLoader, TrainingWorker

PREVIEW_WARNING = "⚠ Batch preview runs extra inference and slows training"
DATASET_FILTER = ("I/Q datasets (*.csv *.h5 *.hdf5 spec.json);;CSV (*.csv);;HDF5 (*.h5 *.hdf5);;"
                  "Dataset folder's spec.json (spec.json);;All files (*)")
CLOSE_WAIT_MS = 5000
#: Output formats of "Run DPD…" (filter → extension added when the name has none).
DPD_OUTPUT_FILTERS = {"CSV: I,Q,I_dpd,Q_dpd (*.csv)": ".csv", "HDF5: datasets x, u (*.h5 *.hdf5)": ".h5",
                      "MATLAB: x, u (*.mat)": ".mat"}

# Workers whose thread outlived the bounded wait on close: kept referenced so Python does not destroy a running
# QThread (which would abort the process); they end at the trainer's next batch boundary.
_ORPHANS: list[TrainingWorker] = []


class RunState(str, enum.Enum):
    """The one explicit run state; the controls are a function of it."""

    IDLE = "idle"
    RUNNING = "running"
    STOPPING = "stopping"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"


def format_duration(seconds: float | None) -> str:
    """Human time span: "42 s", "5 min", "1 h 12 min"."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "—"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    h, m = divmod(int(round(seconds / 60)), 60)
    return f"{h} h {m} min"


def _default_workspace():
    try:
        from ..runs.workspace import Workspace

        return Workspace()
    except Exception:  # noqa: BLE001 - the window still works; the trainer then picks its own default
        return None


class _DpdExportSignals(QObject):
    done = Signal(object)  # the metadata dict of run_dpd
    failed = Signal(object, str)  # exception, traceback text


class DpdExportJob(QRunnable):
    """Runs :func:`dpd_desktop.runs.dpd_export.run_dpd` in the thread pool (never on the GUI thread).

    ``dataset`` (the window's loaded dataset) is passed on only when it is the run's dataset (same fingerprint);
    otherwise run_dpd reloads the dataset recorded in the run's config.json. The DPD runs on the run's own device
    type when it is available (so that u is bit for bit the scored one), else on the CPU.
    """

    def __init__(self, workspace, run_dir: str, out: str, split: str = "test", dataset=None):
        super().__init__()
        self.workspace = workspace
        self.run_dir = str(run_dir)
        self.out = str(out)
        self.split = split
        self.dataset = dataset
        self.signals = _DpdExportSignals()
        self.setAutoDelete(False)

    def _recorded(self) -> dict:
        try:
            return json.loads((Path(self.run_dir) / "config.json").read_text())
        except (OSError, ValueError):
            return {}

    def _device(self, cfg: dict) -> str:
        dev = str((cfg.get("device") or {}).get("device", "cpu"))
        if dev.startswith("cuda"):
            try:
                import torch

                if torch.cuda.is_available():
                    return "cuda"
            except ImportError:  # pragma: no cover
                pass
        return "cpu"

    def run(self) -> None:
        try:
            from ..runs.dpd_export import run_dpd

            cfg = self._recorded()
            ds = self.dataset
            want = (cfg.get("dataset") or {}).get("fingerprint")
            if ds is not None and not (want and callable(getattr(ds, "fingerprint", None))
                                       and ds.fingerprint() == want):
                ds = None
            meta = run_dpd(self.workspace, self.run_dir, out=self.out, split=self.split,
                           device=self._device(cfg), dataset=ds)
        except Exception as exc:  # noqa: BLE001 - shown to the user in plain words
            self.signals.failed.emit(exc, traceback.format_exc())
            return
        self.signals.done.emit(meta)


class _PlotSaveSignals(QObject):
    done = Signal(object)  # list of written paths
    failed = Signal(object)  # the exception


class PlotSaveJob(QRunnable):
    """Encodes and writes rendered plot images (``[(file name, QImage), ...]``) as PNGs on a pool thread, so that
    the GUI thread never waits for the disk (:func:`dpd_desktop.gui.export.save_images`, atomic writes)."""

    def __init__(self, images, out_dir: str | os.PathLike):
        super().__init__()
        self.images = images
        self.out_dir = Path(out_dir)
        self.signals = _PlotSaveSignals()
        self.setAutoDelete(False)

    def run(self) -> None:
        try:
            from .export import save_images

            paths = save_images(self.images, self.out_dir)
        except Exception as exc:  # noqa: BLE001 - shown in the status bar
            self.signals.failed.emit(exc)
            return
        self.signals.done.emit(paths)


class MainWindow(QMainWindow):
    """DPD Desktop's main window.

    Args:
        workspace: the run workspace (``Workspace``); default: the platform's user data folder.
        trainer_factory: ``factory(config, dataset=, workspace=, observers=)`` → trainer; default: the real Trainer.
        settings: QSettings for window geometry (tests pass one in a temporary folder).
        demo_kwargs: keyword arguments for ``make_demo_dataset`` when the demo data is loaded.
    """

    stateChanged = Signal(str)
    datasetLoaded = Signal(object)
    datasetFailed = Signal(str)
    runEnded = Signal(str)  # final state value: finished / failed / cancelled
    dpdExportEnded = Signal(str)  # "succeeded" / "failed" (Run DPD…)
    plotsWritten = Signal(object)  # after a finished run: the PNG paths written, or the exception

    def __init__(self, workspace: Any = None, trainer_factory: Callable | None = None,
                 settings: QSettings | None = None, demo_kwargs: dict | None = None, parent=None):
        super().__init__(parent)
        theme.configure_pyqtgraph()
        self.workspace = workspace if workspace is not None else _default_workspace()
        self._trainer_factory = trainer_factory
        self._settings = settings if settings is not None else QSettings()
        self.demo_kwargs = dict(demo_kwargs or {})

        self.state = RunState.IDLE
        self._dataset = None
        self._dataset_ref: str | None = None
        self._loader: DatasetLoader | None = None
        self._pending_start: ExperimentConfig | None = None
        self._worker: TrainingWorker | None = None
        self._run_info: dict[str, Any] = {}
        self._history_rows: list[dict] = []
        self._last_plots = None
        self._pending_plots: tuple[Any, str] | None = None
        self._pending_progress = None
        self._sec_per_epoch: float | None = None
        self._current_lr: float | None = None
        self._epochs_total = 0
        self._export_job: DpdExportJob | None = None
        self.write_plots_on_finish = True
        self._plot_jobs: list[PlotSaveJob] = []  # PNG writers in flight (kept referenced until they report)

        self.setWindowTitle("DPD Desktop")
        self._build_actions()
        self._build_toolbar()
        self._build_central()
        self._build_statusbar()
        self._build_menus()

        self._plot_timer = QTimer(self, singleShot=True, interval=30)
        self._plot_timer.timeout.connect(self._flush_plots)
        self._progress_timer = QTimer(self, singleShot=True, interval=100)
        self._progress_timer.timeout.connect(self._flush_progress)

        self.form.changed.connect(self._update_title)
        self.setAcceptDrops(True)
        self._restore_geometry()
        self._apply_state()
        self._update_title()

    # ================================================================================================ construction
    def _build_actions(self) -> None:
        st = self.style()
        self.act_open = QAction(st.standardIcon(QStyle.StandardPixmap.SP_DialogOpenButton), "Open dataset…", self)
        self.act_open.setShortcut(QKeySequence.StandardKey.Open)
        self.act_open.setToolTip("Open a .csv / .h5 / .hdf5 dataset file, or a folder's spec.json (Ctrl+O); "
                                 "the arrow opens a folder. You can also drop a file or folder on the window.")
        self.act_open.triggered.connect(lambda: self._on_open_triggered(folder=False))
        self.act_open_folder = QAction("Open dataset folder…", self)
        self.act_open_folder.triggered.connect(lambda: self._on_open_triggered(folder=True))
        self.act_demo = QAction(st.standardIcon(QStyle.StandardPixmap.SP_ComputerIcon), "Demo data", self)
        self.act_demo.setToolTip("Load the built-in synthetic PA (multi-carrier OFDM through a virtual PA)")
        self.act_demo.triggered.connect(self.load_demo)
        self.act_start = QAction(st.standardIcon(QStyle.StandardPixmap.SP_MediaPlay), "Start", self)
        self.act_start.setShortcut(QKeySequence("Ctrl+R"))
        self.act_start.setToolTip("Start training (Ctrl+R)")
        self.act_start.triggered.connect(lambda: self.start_run())
        self.act_stop = QAction(st.standardIcon(QStyle.StandardPixmap.SP_MediaStop), "Stop", self)
        self.act_stop.setShortcut(QKeySequence(Qt.Key.Key_Escape))
        self.act_stop.setToolTip("Stop after the current batch; completed epochs stay on disk (Esc)")
        self.act_stop.triggered.connect(self.stop_run)
        self.act_export = QAction("Export current plot…", self)
        self.act_export.setShortcut(QKeySequence("Ctrl+E"))
        self.act_export.setToolTip("Save the plot you last clicked as PNG (Ctrl+E)")
        self.act_export.triggered.connect(lambda: self.export_current_plot())
        self.act_run_dpd = QAction(st.standardIcon(QStyle.StandardPixmap.SP_DialogSaveButton), "Run DPD…", self)
        self.act_run_dpd.setToolTip("Write u = DPD(x), the predistorted PA input, of the finished DPD run for its "
                                    "test split: CSV, HDF5 or MAT, plus a .meta.json side-car")
        self.act_run_dpd.triggered.connect(lambda: self.run_dpd_export())
        self.act_run_dpd_saved = QAction("Run DPD of a saved DPD run…", self)
        self.act_run_dpd_saved.setToolTip("Pick a DPD run folder and write u = DPD(x) for its test split")
        self.act_run_dpd_saved.triggered.connect(self._on_run_dpd_saved)
        self.act_quit = QAction("Quit", self)
        self.act_quit.setShortcut(QKeySequence.StandardKey.Quit)
        self.act_quit.triggered.connect(self.close)
        for a in (self.act_open, self.act_start, self.act_stop, self.act_export, self.act_quit):
            a.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
            self.addAction(a)

    def _build_toolbar(self) -> None:
        tb = QToolBar("Main", self)
        tb.setObjectName("main_toolbar")
        tb.setMovable(False)
        tb.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.addToolBar(tb)
        self.toolbar = tb
        tb.addAction(self.act_open)
        # The button opens a file; its arrow offers a folder (split-CSV datasets are folders).
        open_button = tb.widgetForAction(self.act_open)
        if isinstance(open_button, QToolButton):
            menu = QMenu(open_button)
            menu.addAction("Open dataset file (.csv, .h5, .hdf5)…", lambda: self._on_open_triggered(folder=False))
            menu.addAction(self.act_open_folder)
            open_button.setMenu(menu)
            open_button.setPopupMode(QToolButton.ToolButtonPopupMode.MenuButtonPopup)
        tb.addAction(self.act_demo)
        tb.addSeparator()

        step_box = QWidget()
        sl = QHBoxLayout(step_box)
        sl.setContentsMargins(6, 0, 6, 0)
        sl.addWidget(QLabel("Step:"))
        self.step_pa = QRadioButton("PA")
        self.step_pa.setToolTip("Train a PA behavioral model: input x → measured output y")
        self.step_dpd = QRadioButton("DPD")
        self.step_dpd.setToolTip("Train a DPD through a frozen PA model from an earlier PA run")
        self.step_group = QButtonGroup(self)
        self.step_group.addButton(self.step_pa)
        self.step_group.addButton(self.step_dpd)
        self.step_pa.setChecked(True)
        self.pa_run_combo = QComboBox()
        self.pa_run_combo.setMinimumContentsLength(26)
        self.pa_run_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.pa_run_combo.setToolTip("The PA run whose selected checkpoint the DPD trains through")
        self.pa_run_combo.setPlaceholderText("PA run (for the DPD step)")
        sl.addWidget(self.step_pa)
        sl.addWidget(self.step_dpd)
        sl.addWidget(self.pa_run_combo)
        tb.addWidget(step_box)
        self.step_dpd.toggled.connect(self._on_step_toggled)
        tb.addSeparator()

        tb.addAction(self.act_start)
        tb.addAction(self.act_stop)
        tb.addAction(self.act_run_dpd)
        tb.addSeparator()

        preview_box = QWidget()
        pl = QHBoxLayout(preview_box)
        pl.setContentsMargins(6, 0, 6, 0)
        self.preview_check = QCheckBox("Live batch preview")
        self.preview_check.setToolTip("Refresh the plots every N batches (set in Training → Preview every) from a "
                                      "frozen copy of the model")
        self.preview_warning = QLabel(PREVIEW_WARNING)
        self.preview_warning.setObjectName("preview_warning")
        self._style_warning()
        self.preview_warning.setVisible(False)
        pl.addWidget(self.preview_check)
        pl.addWidget(self.preview_warning)
        tb.addWidget(preview_box)
        self.preview_check.toggled.connect(self._on_preview_toggled)

    def _style_warning(self) -> None:
        self.preview_warning.setStyleSheet(f"color: {warning_color()}; font-weight: 600;")

    def _build_central(self) -> None:
        central = QWidget()
        outer = QVBoxLayout(central)
        outer.setContentsMargins(6, 6, 6, 0)
        outer.setSpacing(6)
        self.banner = OutcomeBanner()
        outer.addWidget(self.banner)

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
        grid.setRowStretch(1, 1)
        grid.setRowStretch(2, 1)
        for c, s in enumerate((4, 4, 3)):
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

        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(grid_w)
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

    def _build_statusbar(self) -> None:
        """Permanent read-outs (device, fast path, run folder, best metric); transient messages on the left."""
        sb = self.statusBar()
        self.device_label = QLabel("device: —")
        self.fastpath_label = QLabel("CUDA graph: —")
        self.run_folder_label = QLabel("")
        self.run_folder_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.best_label = QLabel("")
        for w in (self.device_label, self.fastpath_label, self.run_folder_label, self.best_label):
            w.setContentsMargins(6, 0, 6, 0)
            sb.addPermanentWidget(w)
        if self.workspace is not None:
            root = str(getattr(self.workspace, "root", ""))
            self.run_folder_label.setText(self._elide_left(f"workspace {root}", 70))
            self.run_folder_label.setToolTip(root)

    @staticmethod
    def _elide_left(text: str, n: int) -> str:
        return text if len(text) <= n else "…" + text[-(n - 1):]

    def _build_menus(self) -> None:
        mb = self.menuBar()
        m = mb.addMenu("&File")
        for a in (self.act_open, self.act_open_folder, self.act_demo):
            m.addAction(a)
        m.addSeparator()
        m.addAction(self.act_export)
        m.addSeparator()
        m.addAction(self.act_quit)
        r = mb.addMenu("&Run")
        r.addAction(self.act_start)
        r.addAction(self.act_stop)
        r.addSeparator()
        r.addAction(self.act_run_dpd)
        r.addAction(self.act_run_dpd_saved)

    # ================================================================================================ state
    def _set_state(self, state: RunState) -> None:
        self.state = state
        self._apply_state()
        self.stateChanged.emit(state.value)

    def _apply_state(self) -> None:
        running = self.state in (RunState.RUNNING, RunState.STOPPING)
        loading = self._loader is not None
        self.act_start.setEnabled(not running and not loading)
        self.act_stop.setEnabled(self.state == RunState.RUNNING)
        self.act_open.setEnabled(not running and not loading)
        self.act_open_folder.setEnabled(not running and not loading)
        self.act_demo.setEnabled(not running and not loading)
        self.form.set_read_only(running)
        self.step_pa.setEnabled(not running)
        self.step_dpd.setEnabled(not running)
        self.pa_run_combo.setEnabled(not running and self.step_dpd.isChecked() and self.pa_run_combo.count() > 0
                                     and self.pa_run_combo.itemData(0) is not None)
        self.form.set_preview_enabled(self.preview_check.isChecked() and not running)
        exporting = self._export_job is not None
        self.act_run_dpd.setEnabled(not running and not exporting and self.finished_dpd_run() is not None)
        self.act_run_dpd_saved.setEnabled(not exporting)

    @property
    def is_running(self) -> bool:
        return self.state in (RunState.RUNNING, RunState.STOPPING)

    # ================================================================================================ config
    def set_form_from_config(self, cfg: ExperimentConfig) -> None:
        """Fill the toolbar and forms from ``cfg``."""
        self.form.set_config(cfg)
        (self.step_dpd if cfg.step == "dpd" else self.step_pa).setChecked(True)
        if cfg.pa_run:
            i = self.pa_run_combo.findData(cfg.pa_run)
            if i < 0:
                if self.pa_run_combo.count() == 1 and self.pa_run_combo.itemData(0) is None:
                    self.pa_run_combo.clear()
                self.pa_run_combo.addItem(str(cfg.pa_run), cfg.pa_run)
                i = self.pa_run_combo.count() - 1
            self.pa_run_combo.setCurrentIndex(i)
        self.preview_check.setChecked(cfg.preview_every is not None)
        self._update_title()
        self._apply_state()

    def config_from_form(self, validate: bool = True) -> ExperimentConfig:
        """The ExperimentConfig the form describes. Raises :class:`ConfigError` (shown next to the form)."""
        step = "dpd" if self.step_dpd.isChecked() else "pa"
        base = self.form.config()
        overrides: dict[str, Any] = {
            "step": step,
            "preview_every": self.form.preview_period if self.preview_check.isChecked() else None,
        }
        if step == "dpd":
            overrides["pa_run"] = self.pa_run_combo.currentData()
        if self._dataset_ref:
            overrides["dataset"] = self._dataset_ref
        cfg = self.form.config(**overrides) if overrides else base
        if validate:
            validate_config(cfg)
        return cfg

    def _update_title(self) -> None:
        parts = []
        if self._dataset is not None:
            parts.append(str(getattr(self._dataset, "name", "dataset")))
        parts.append("DPD" if self.step_dpd.isChecked() else "PA")
        label = dict((v, l) for v, l, _ in BACKBONES).get(self.form.backbone.currentData(),
                                                          str(self.form.backbone.currentText()))
        parts.append(f"{label}-{self.form.hidden_size.value()}")
        self.setWindowTitle("DPD Desktop — " + " · ".join(parts))

    def _on_step_toggled(self, dpd: bool) -> None:
        if dpd:
            self.refresh_pa_runs()
        self._update_title()
        self._apply_state()

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
        # Usable: finished runs, and stopped ones that kept a best checkpoint.
        runs = [r for r in runs if getattr(r, "status", "succeeded") in ("succeeded", "finished") or
                (getattr(r, "status", "") == "cancelled" and getattr(r, "best_epoch", None) is not None)]
        for rec in runs:
            best = getattr(rec, "best_epoch", None)
            label = f"{rec.run_id} · {str(rec.backbone).upper()}-{rec.hidden_size}"
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

    def _on_preview_toggled(self, on: bool) -> None:
        self.preview_warning.setVisible(on)
        self._apply_state()
        if self._worker is not None:
            self._worker.set_preview_every(self.form.preview_period if on else None)

    # ================================================================================================ dataset
    def _on_open_triggered(self, folder: bool = False) -> None:
        start = str(self._settings.value("paths/last_dataset_dir", str(Path.home()), type=str))
        if folder:
            path = QFileDialog.getExistingDirectory(self, "Open dataset folder", start)
        else:
            dlg = QFileDialog(self, "Open dataset — a .csv / .h5 / .hdf5 file, or a folder with spec.json", start)
            dlg.setNameFilter(DATASET_FILTER)
            dlg.setFileMode(QFileDialog.FileMode.ExistingFile)
            dlg.setOption(QFileDialog.Option.DontUseNativeDialog, False)
            path = dlg.selectedFiles()[0] if dlg.exec() and dlg.selectedFiles() else ""
            if path and os.path.basename(path) == "spec.json":
                path = os.path.dirname(path)
        if path:
            self._settings.setValue("paths/last_dataset_dir", str(Path(path).parent))
            self.open_dataset(path)

    def open_dataset(self, path: str | os.PathLike) -> None:
        """Load a dataset from disk in the thread pool; the summary and title update when it arrives."""
        self._load(str(path), Path(path).name)

    def load_demo(self) -> None:
        """Load the built-in synthetic demo dataset in the thread pool."""
        self._load("demo", "the demo data")

    def set_dataset(self, dataset, ref: str | None = None) -> None:
        """Use an already loaded dataset (``ref``: ``"demo"`` or its path; default: ``dataset.source``)."""
        self._dataset = dataset
        if ref is None:
            src = getattr(dataset, "source", None)
            ref = "demo" if src in (None, "") or str(src) == "demo" or str(src).startswith("<") else str(src)
        self._dataset_ref = ref
        self.dataset_box.set_dataset(dataset)
        self._update_title()
        self.datasetLoaded.emit(dataset)

    def _load(self, source: str, what: str) -> None:
        if self._loader is not None or self.is_running:
            return
        loader = DatasetLoader(source, self.demo_kwargs if source == "demo" else None)
        loader.signals.loaded.connect(self._on_dataset_loaded)
        loader.signals.failed.connect(self._on_dataset_failed)
        self._loader = loader
        self.dataset_box.set_loading(what)
        self.statusBar().showMessage(f"Loading {what}…")
        self._apply_state()
        loader.submit()

    @Slot(object, str)
    def _on_dataset_loaded(self, dataset, ref: str) -> None:
        self._loader = None
        self.statusBar().showMessage(f"Loaded {getattr(dataset, 'name', ref)}", 5000)
        if self.banner.kind == "error":
            self.banner.setVisible(False)
        self.set_dataset(dataset, ref)
        self._apply_state()
        pending, self._pending_start = self._pending_start, None
        if pending is not None:
            self.start_run(pending)

    @Slot(object, str)
    def _on_dataset_failed(self, exc: Exception, tb: str) -> None:
        source = self._loader.source if self._loader is not None else ""
        self._loader = None
        self._pending_start = None
        what = "the demo data" if source == "demo" else (f"the dataset {source}" if source else "the dataset")
        msg = f"Could not load {what}: {exc}"
        hint = ("Check that the folder holds spec.json and the six split CSVs (I,Q columns), or that the file is a "
                ".csv with I_in,Q_in,I_out,Q_out columns or an .h5/.hdf5 file in the documented layout.")
        self.banner.show_message("error", f"{msg}\n{hint}", detail=tb)
        self.dataset_box.hint.setText("No dataset loaded. <b>Open dataset…</b> (Ctrl+O) or <b>Demo data</b>.")
        self.dataset_box.hint.setVisible(self._dataset is None)
        self.statusBar().showMessage("Dataset not loaded", 5000)
        self._apply_state()
        self.datasetFailed.emit(str(exc))

    @property
    def dataset(self):
        return self._dataset

    # ================================================================================================ run control
    def start_run(self, config: ExperimentConfig | None = None) -> bool:
        """Start a training run (from the form unless ``config`` is given). Returns False when refused.

        When no matching dataset is loaded yet, it is loaded first (the demo when the config says ``"demo"``) and the
        run starts when it arrives.
        """
        if self.is_running or self._worker is not None or self._loader is not None:
            return False
        try:
            cfg = config if config is not None else self.config_from_form()
            if config is not None:
                validate_config(cfg)
        except ConfigError as err:
            text = self.form.show_error(err)
            self.banner.show_message("error", f"Cannot start: {text}")
            return False
        if self._dataset is None or not same_dataset(self._dataset_ref, cfg.dataset):
            self._pending_start = cfg
            if cfg.dataset in (None, "demo"):
                self.load_demo()
            else:
                self.open_dataset(cfg.dataset)
            return True
        self.banner.setVisible(False)
        self.form.clear_error()
        self._reset_run_views()
        self._epochs_total = cfg.epochs
        self._run_info = {"config": cfg}
        worker = TrainingWorker(cfg, dataset=self._dataset, workspace=self.workspace,
                                trainer_factory=self._trainer_factory)
        worker.started.connect(self._on_run_started)
        worker.batchProgress.connect(self._on_batch_progress)
        worker.epochEnded.connect(self._on_epoch_ended)
        worker.previewReady.connect(self._on_preview_ready)
        worker.finished.connect(self._on_run_finished)
        worker.failed.connect(self._on_run_failed)
        worker.cancelled.connect(self._on_run_cancelled)
        worker.done.connect(self._on_worker_done)
        self._worker = worker
        self._set_state(RunState.RUNNING)
        self.progress_label.setText("Preparing data and model…")
        self.statusBar().showMessage("Starting…", 3000)
        worker.start()
        return True

    def stop_run(self) -> None:
        """Cooperative stop: the trainer ends at the next batch boundary and reports RunCancelled."""
        if self._worker is None or self.state != RunState.RUNNING:
            return
        self._worker.request_cancel()
        self._set_state(RunState.STOPPING)
        self.progress_label.setText(self.progress_label.text() + " · stopping after this batch…")

    def _reset_run_views(self) -> None:
        for p in self.panels:
            p.clear_data()
        self.epoch_table.clear_rows()
        self._history_rows = []
        self._last_plots = None
        self._pending_plots = None
        self._pending_progress = None
        self._sec_per_epoch = None
        self._current_lr = None
        self.progress_bar.setValue(0)
        self.best_label.setText("")

    # ---------------------------------------------------------------------------------------------- run events
    @Slot(object)
    def _on_run_started(self, ev) -> None:
        self._run_info.update(run_id=ev.run_id, run_dir=ev.run_dir, n_params=ev.n_params)
        self._epochs_total = ev.epochs
        name = str(ev.device_name or "")
        dev = str(ev.device) + (f" · {name}" if name and name.lower() != str(ev.device).lower() else "")
        self.device_label.setText(dev)
        self.device_label.setToolTip(f"batched loader: {ev.batched_loader}")
        self._show_fast_path(ev.fast_path)
        self.run_folder_label.setText(self._elide_left(f"run {ev.run_dir}", 70))
        self.run_folder_label.setToolTip(str(ev.run_dir))
        if ev.dataset_summary and self._dataset is None:
            from .widgets.dataset_summary import describe_summary

            self.dataset_box.set_fields(describe_summary(ev.dataset_summary))
        self.progress_label.setText(f"Epoch 1/{ev.epochs} · {ev.batches_per_epoch:,} batches per epoch · "
                                    f"{ev.n_params:,} parameters")
        self.statusBar().showMessage(f"Run {ev.run_id} started: {ev.n_train_frames:,} training frames", 5000)

    @staticmethod
    def _elide(text: str, n: int) -> str:
        return text if len(text) <= n else text[: n - 1] + "…"

    @Slot(object)
    def _on_batch_progress(self, ev) -> None:
        self._pending_progress = ev
        if not self._progress_timer.isActive():
            self._progress_timer.start()

    def _flush_progress(self) -> None:
        ev, self._pending_progress = self._pending_progress, None
        if ev is None or not self.is_running:
            return
        frac = (ev.epoch + ev.batch / max(ev.batches, 1)) / max(ev.epochs, 1)
        self.progress_bar.setValue(int(1000 * min(max(frac, 0.0), 1.0)))
        # eta_s is the rest of this epoch's training; later epochs at the measured (or estimated) pace.
        spe = self._sec_per_epoch or (ev.elapsed_s / max(ev.batch, 1) * ev.batches if ev.elapsed_s else None)
        this_epoch = ev.eta_s if ev.eta_s is not None else (
            spe * (1 - ev.batch / max(ev.batches, 1)) if spe else None)
        left = None if this_epoch is None or spe is None else this_epoch + (ev.epochs - ev.epoch - 1) * spe
        parts = [f"Epoch {ev.epoch + 1}/{ev.epochs}", f"batch {ev.batch:,}/{ev.batches:,}"]
        if self._sec_per_epoch:
            parts.append(f"{self._sec_per_epoch:.1f} s/epoch")
        if left is not None:
            parts.append(f"{format_duration(left)} left")
        if self._current_lr is not None:
            parts.append(f"lr {self._current_lr:.3g}")
        text = " · ".join(parts)
        if self.state == RunState.STOPPING:
            text += " · stopping after this batch…"
        self.progress_label.setText(text)

    def _show_fast_path(self, fast_path) -> None:
        """Status bar text "CUDA graph: on" or "CUDA graph: off — <reason>" (full text in the tooltip)."""
        fp = str(fast_path)
        shown = "off — " + fp[4:].strip() if fp.startswith("off:") else fp
        self.fastpath_label.setText(self._elide(f"CUDA graph: {shown}", 70))
        self.fastpath_label.setToolTip(f"CUDA graph fast path: {fp}")
        self._fast_path_shown = fp

    @Slot(object)
    def _on_epoch_ended(self, ev) -> None:
        if ev.fast_path and ev.fast_path != getattr(self, "_fast_path_shown", None):
            self._show_fast_path(ev.fast_path)  # e.g. the capture failed during the first epoch
        row = dict(ev.row)
        self._history_rows.append(row)
        self._sec_per_epoch = ev.epoch_seconds if ev.epoch_seconds and ev.epoch_seconds > 0 else self._sec_per_epoch
        lr = history.value(row, "lr")
        self._current_lr = lr if math.isfinite(lr) else self._current_lr
        self.epoch_table.append_row(row, is_best=ev.is_best, epoch=ev.epoch, seconds=ev.epoch_seconds)
        if not ev.is_best:
            self.epoch_table.mark_best_epoch(ev.best_epoch)
        self.learning_panel.append_row(row, is_best=ev.is_best)
        self.learning_panel.set_best_epoch(ev.best_epoch)
        name, unit = history.metric_label(ev.selection_metric)
        self.best_label.setText(f"best {name} {history.fmt(ev.best_value)} {unit} (ep {ev.best_epoch})")
        done = (ev.epoch + 1) / max(ev.epochs, 1)
        self.progress_bar.setValue(int(1000 * min(done, 1.0)))
        left = (ev.epochs - ev.epoch - 1) * (self._sec_per_epoch or 0)
        parts = [f"Epoch {ev.epoch + 1}/{ev.epochs} done"]
        if self._sec_per_epoch:
            parts += [f"{self._sec_per_epoch:.1f} s/epoch", f"{format_duration(left)} left"]
        if self._current_lr is not None:
            parts.append(f"lr {self._current_lr:.3g}")
        self.progress_label.setText(" · ".join(parts))
        if ev.plots is not None:
            self._queue_plots(ev.plots, f"validation · epoch {ev.epoch}")

    @Slot(object)
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
        pending, self._pending_plots = self._pending_plots, None
        if pending is None:
            return
        plots, label = pending
        self.show_plots(plots, label)

    def show_plots(self, plots, label: str = "") -> None:
        """Draw one PlotData in every data panel (GUI thread; arrays are small)."""
        self._last_plots = plots
        self.signal_legend.set_signals(ordered(plots.psd.keys(), plots.target_name, plots.pred_name))
        for p in (self.psd_panel, self.amam_panel, self.ampm_panel, self.time_panel):
            try:
                p.update_from(plots, label)
            except Exception as exc:  # noqa: BLE001 - a malformed PlotData must not kill the run view
                self.statusBar().showMessage(f"{p.title}: could not draw ({exc})", 8000)

    @Slot(object)
    def _on_run_finished(self, ev) -> None:
        timing.mark("gui_run_finished")
        self._run_info.update(run_dir=ev.run_dir, outcome=ev)
        if ev.plots is not None:
            self._pending_plots = None
            self.show_plots(ev.plots, f"{ev.plots.source} · selected epoch {ev.best_epoch}")
        timing.mark("gui_final_plots_shown")
        self.epoch_table.mark_best_epoch(ev.best_epoch)
        self.learning_panel.set_best_epoch(ev.best_epoch)
        self.progress_bar.setValue(1000)
        v, t = dict(ev.val_metrics or {}), dict(ev.test_metrics or {})
        bits = [f"Run finished in {format_duration(ev.wall_s)}. Selected epoch {ev.best_epoch}"]
        if "NMSE" in v:
            bits.append(f"val NMSE {history.fmt(history.to_float(v['NMSE']))} dB")
        if "NMSE" in t:
            bits.append(f"test NMSE {history.fmt(history.to_float(t['NMSE']))} dB")
        if "ACLR_AVG" in t and math.isfinite(history.to_float(t["ACLR_AVG"])):
            bits.append(f"test ACLR {history.to_float(t['ACLR_AVG']):.2f} dBc")
        if "EVM" in t and math.isfinite(history.to_float(t["EVM"])):
            bits.append(f"test EVM {history.to_float(t['EVM']):.2f} dB")
        self.progress_label.setText(f"Finished · {len(self._history_rows)} epochs · "
                                    f"{format_duration(ev.wall_s)}")
        self.banner.show_message("success", " · ".join(bits) + ".", run_dir=ev.run_dir)
        self._set_state(RunState.FINISHED)
        if self.write_plots_on_finish and ev.run_dir:
            QTimer.singleShot(0, lambda d=ev.run_dir, p=(ev.plots or self._last_plots): self._write_plots(d, p))

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
            if job in self._plot_jobs:
                self._plot_jobs.remove(job)
            if isinstance(result, Exception):
                report(result)
                return
            written.update((p.name, p) for p in result)
            if state["rendered"] and len(written) == len(names):
                report([written[n] for n in names])

        def submit(name: str, image) -> None:
            names.append(name)
            job = PlotSaveJob([(name, image)], out_dir)
            self._plot_jobs.append(job)
            job.signals.done.connect(lambda result, job=job: finished(result, job))
            job.signals.failed.connect(lambda exc, job=job: finished(exc, job))
            QThreadPool.globalInstance().start(job)

        try:
            from .export import render_run_plots

            timing.mark("gui_png_render_start")
            render_run_plots(self._history_rows, plots, on_image=submit)
            timing.mark("gui_png_rendered")
        except Exception as exc:  # noqa: BLE001 - the run itself succeeded; say so and move on
            report(exc)
            return
        state["rendered"] = True
        if len(written) == len(names):  # every save already reported back while rendering
            report([written[n] for n in names])

    def _plots_failed(self, exc: Exception) -> None:
        self.statusBar().showMessage(f"Could not write the plot PNGs: {exc}", 10000)
        self.plotsWritten.emit(exc)

    @Slot(object)
    def _on_run_failed(self, ev) -> None:
        self._run_info.update(run_dir=ev.run_dir, outcome=ev)
        text = f"The run failed: {ev.message}"
        self.banner.show_message("error", text, run_dir=ev.run_dir, detail=ev.detail)
        self.progress_label.setText("Failed")
        self._set_state(RunState.FAILED)

    @Slot(object)
    def _on_run_cancelled(self, ev) -> None:
        self._run_info.update(run_dir=ev.run_dir, outcome=ev)
        best = (f"; the best checkpoint so far (epoch {ev.best_epoch}) is kept" if ev.best_epoch is not None
                else "; no epoch completed, so there is no checkpoint")
        self.banner.show_message("warning", f"Run stopped after {ev.epochs_completed} completed "
                                 f"epoch{'s' if ev.epochs_completed != 1 else ''}{best}.", run_dir=ev.run_dir)
        self.progress_label.setText(f"Stopped · {ev.epochs_completed} epochs completed")
        self._set_state(RunState.CANCELLED)

    @Slot()
    def _on_worker_done(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None and worker.thread is not None:
            worker.thread.wait(2000)
        if self.is_running:  # no outcome event arrived (should not happen): do not leave the window stuck
            if worker is not None and worker.cancel_requested:
                self.banner.show_message("warning", "Run stopped.", run_dir=self._run_info.get("run_dir"))
                self._set_state(RunState.CANCELLED)
            else:
                self.banner.show_message("error", "The run ended without reporting an outcome.",
                                         run_dir=self._run_info.get("run_dir"))
                self._set_state(RunState.FAILED)
        self._apply_state()
        self.runEnded.emit(self.state.value)

    # ================================================================================================ run DPD
    def finished_dpd_run(self) -> str | None:
        """The run folder of the current run when it ended (finished, or stopped with a checkpoint) and is a DPD
        run with a ``best.pt``; None otherwise."""
        if self.state not in (RunState.FINISHED, RunState.CANCELLED):
            return None
        run_dir = self._run_info.get("run_dir")
        if not run_dir:
            return None
        from ..runs.dpd_export import is_dpd_run

        return str(run_dir) if is_dpd_run(run_dir) else None

    def _on_run_dpd_saved(self) -> None:
        root = getattr(self.workspace, "runs_dir", None) or getattr(self.workspace, "root", None) or Path.home()
        folder = QFileDialog.getExistingDirectory(self, "Choose a DPD run folder", str(root))
        if folder:
            self.run_dpd_export(run_dir=folder)

    def run_dpd_export(self, out: str | os.PathLike | None = None, run_dir: str | os.PathLike | None = None,
                       split: str = "test") -> bool:
        """Write u = DPD(x) of a DPD run (default: the finished one) for ``split`` to ``out`` in the thread pool.

        Asks for the output file (CSV / HDF5 / MAT) unless ``out`` is given. The outcome is shown in the banner and
        signalled by :attr:`dpdExportEnded`. Returns False when nothing was started.
        """
        if self._export_job is not None:
            return False
        run_dir = str(run_dir) if run_dir is not None else self.finished_dpd_run()
        if run_dir is None:
            self.banner.show_message("error", "Run DPD needs a finished DPD run: train one (Step: DPD), or choose a "
                                     "saved DPD run folder with Run → Run DPD of a saved DPD run….")
            return False
        if out is None:
            start = str(self._settings.value("paths/last_dpd_dir", run_dir, type=str))
            suggested = str(Path(start) / f"{Path(run_dir).name}_u_{split}.csv")
            out, chosen = QFileDialog.getSaveFileName(self, f"Run DPD: write u = DPD(x) of the {split} split",
                                                      suggested, ";;".join(DPD_OUTPUT_FILTERS))
            if not out:
                return False
            if Path(out).suffix.lower() not in (".csv", ".h5", ".hdf5", ".mat"):
                out += DPD_OUTPUT_FILTERS.get(chosen, ".csv")
            self._settings.setValue("paths/last_dpd_dir", str(Path(out).parent))
        job = DpdExportJob(self.workspace, run_dir, str(out), split=split, dataset=self._dataset)
        job.signals.done.connect(self._on_dpd_export_done)
        job.signals.failed.connect(self._on_dpd_export_failed)
        self._export_job = job
        self.banner.show_message("info", f"Running the DPD of {Path(run_dir).name} on the {split} split → {out} …")
        self.statusBar().showMessage("Run DPD: computing u = DPD(x)…")
        self._apply_state()
        QThreadPool.globalInstance().start(job)
        return True

    @Slot(object)
    def _on_dpd_export_done(self, meta) -> None:
        self._export_job = None
        what = f"the {meta.get('split')} split" if meta.get("split") else f"{meta.get('input_file')}"
        text = (f"Wrote u = DPD(x) of {what} ({meta.get('samples', 0):,} samples; peak |x| "
                f"{meta.get('peak_abs_x', float('nan')):.4g}, peak |u| {meta.get('peak_abs_u', float('nan')):.4g}) "
                f"to {meta.get('file')}\nMetadata: {meta.get('file')}.meta.json")
        if meta.get("nonfinite_u_samples"):
            self.banner.show_message("warning", text + f"\n{meta['nonfinite_u_samples']} samples of u are not finite.")
        else:
            self.banner.show_message("success", text)
        self.statusBar().showMessage(f"Run DPD: wrote {meta.get('file')}", 8000)
        self._apply_state()
        self.dpdExportEnded.emit("succeeded")

    @Slot(object, str)
    def _on_dpd_export_failed(self, exc, tb: str) -> None:
        self._export_job = None
        msg = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
        self.banner.show_message("error", f"Run DPD failed: {msg}", detail=tb)
        self.statusBar().showMessage("Run DPD failed", 8000)
        self._apply_state()
        self.dpdExportEnded.emit("failed")

    # ================================================================================================ export
    def _set_current_panel(self, panel: PlotPanel) -> None:
        self._current_panel = panel
        for p in self.panels:
            p.setStyleSheet("border: 1px solid palette(highlight);" if p is panel
                            else "border: 1px solid transparent;")

    @property
    def current_panel(self) -> PlotPanel:
        return self._current_panel

    def export_current_plot(self, path: str | os.PathLike | None = None) -> Path | None:
        """Save the current plot (the one last clicked) as PNG; asks for a file name unless ``path`` is given."""
        panel = self._current_panel
        if path is None:
            run_dir = self._run_info.get("run_dir")
            folder = Path(run_dir) / "plots" if run_dir else Path(
                str(self._settings.value("paths/last_export_dir", str(Path.home()), type=str)))
            suggested = str(folder / f"{panel.file_stem}.png")
            path, _ = QFileDialog.getSaveFileName(self, f"Export {panel.title} as PNG", suggested, "PNG (*.png)")
            if not path:
                return None
            if not path.lower().endswith(".png"):
                path += ".png"
            self._settings.setValue("paths/last_export_dir", str(Path(path).parent))
        try:
            out = panel.export_png(path, width=max(1200, panel.width()))
        except Exception as exc:  # noqa: BLE001
            QMessageBox.warning(self, "Export failed", f"Could not write {path}: {exc}")
            return None
        self.statusBar().showMessage(f"Saved {panel.title} to {out}", 6000)
        return out

    # ================================================================================================ window
    def dragEnterEvent(self, event) -> None:  # noqa: N802 (Qt name)
        urls = event.mimeData().urls() if event.mimeData().hasUrls() else []
        if len(urls) == 1 and urls[0].isLocalFile() and not self.is_running and self._loader is None:
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:  # noqa: N802
        """Drop a dataset folder or file on the window to load it."""
        path = event.mimeData().urls()[0].toLocalFile()
        if os.path.basename(path) == "spec.json":
            path = os.path.dirname(path)
        self.open_dataset(path)
        event.acceptProposedAction()

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
        """Request cancel of a running training, wait at most ``timeout_ms``; True when the thread has ended."""
        worker = self._worker
        if worker is None:
            return True
        worker.request_cancel()
        ended = worker.wait(timeout_ms)
        for sig in (worker.started, worker.batchProgress, worker.epochEnded, worker.previewReady, worker.finished,
                    worker.failed, worker.cancelled, worker.done):
            try:
                sig.disconnect()
            except (RuntimeError, TypeError):
                pass
        if not ended:
            _ORPHANS.append(worker)
        self._worker = None
        return ended

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        if self._worker is not None:
            self.statusBar().showMessage("Stopping the run…")
            QApplication.processEvents()
            self.shutdown(CLOSE_WAIT_MS)
        if self._plot_jobs:  # PNGs of a run that just finished: let them land (each is written atomically anyway)
            QThreadPool.globalInstance().waitForDone(CLOSE_WAIT_MS)
        self._save_geometry()
        super().closeEvent(event)

    def changeEvent(self, event) -> None:  # noqa: N802
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            theme.configure_pyqtgraph()
            for p in getattr(self, "panels", []):
                p.apply_palette()
            if hasattr(self, "preview_warning"):
                self._style_warning()
        super().changeEvent(event)


def same_dataset(a: str | None, b: str | None) -> bool:
    """Whether two dataset references (``"demo"`` or paths) name the same data."""
    if a is None or b is None:
        return a is None and b is None or (a or b) == "demo"
    if a == b:
        return True
    if "demo" in (a, b):
        return False
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


def validate_config(cfg: ExperimentConfig) -> ExperimentConfig:
    """``cfg.validate()``; when the model registry cannot be imported yet, check the rest by hand."""
    try:
        return cfg.validate()
    except ImportError:
        known = {v for v, _, _ in BACKBONES}
        if str(cfg.backbone).lower() not in known:
            raise ConfigError("backbone", f"expected one of {tuple(sorted(known))}, got {cfg.backbone!r}")
        if cfg.step == "dpd" and not cfg.pa_run:
            raise ConfigError("pa_run", "a DPD run needs the PA run (id or folder) whose model it trains through")
        return cfg
