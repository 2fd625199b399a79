"""The window's actions, toolbar, menus and status bar: the widgets, built for the window, which connects what they
trigger; which of them are enabled follows the session model (:func:`dpd_desktop.gui.session.controls`).
"""
from __future__ import annotations

import sys
from importlib import metadata

import PySide6
from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence, QPalette
from PySide6.QtWidgets import (QButtonGroup, QCheckBox, QComboBox, QHBoxLayout, QLabel, QMainWindow, QMenu,
                               QMessageBox, QRadioButton, QStyle, QToolBar, QToolButton, QWidget)

from .. import __version__
from . import theme
from .widgets.banner import warning_color
from .widgets.elided_label import ElidedLabel

PREVIEW_WARNING = "⚠ Batch preview runs extra inference and slows training"


def _torch_version() -> str:
    """PyTorch's version without importing it (the window imports torch behind its first paint, gui/preload.py)."""
    torch = sys.modules.get("torch")
    if getattr(torch, "__version__", None):
        return str(torch.__version__)
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "not installed"


class Actions(QObject):
    """The actions (open, demo, start/stop, export, Run DPD…, quit, about), the toolbar (step, PA run, estimate,
    live preview), the menus and the status bar's read-outs (device, CUDA graph, run folder, best metric) of
    ``window``; :attr:`WIDGETS` are the widgets the window keeps under the same names."""

    WIDGETS = ("act_open", "act_open_folder", "act_demo", "act_start", "act_stop", "act_export", "act_run_dpd",
               "act_run_dpd_saved", "act_quit", "act_about", "toolbar", "step_pa", "step_dpd", "pa_run_combo",
               "estimate_label", "preview_check", "preview_warning", "device_label", "fastpath_label",
               "run_folder_label", "best_label", "scheme_actions")

    def __init__(self, window: QMainWindow, settings, workspace_root: str | None = None):
        super().__init__(window)
        self.window = window
        self._settings = settings
        self.fast_path_shown: str | None = None
        self.about_box: QMessageBox | None = None
        self._build_actions()
        self._build_toolbar()
        self._build_statusbar(workspace_root)
        self._build_menus()

    def _build_actions(self) -> None:
        w, st = self.window, self.window.style()
        self.act_open = QAction(st.standardIcon(QStyle.StandardPixmap.SP_DialogOpenButton), "Open dataset…", w)
        self.act_open.setShortcut(QKeySequence.StandardKey.Open)
        self.act_open.setToolTip("Open a .csv / .h5 / .hdf5 dataset file, or a folder's spec.json (Ctrl+O); "
                                 "the arrow opens a folder. You can also drop a file or folder on the window.")
        self.act_open_folder = QAction("Open dataset folder…", w)
        self.act_demo = QAction(st.standardIcon(QStyle.StandardPixmap.SP_ComputerIcon), "Demo data", w)
        self.act_demo.setToolTip("Load the built-in synthetic PA (multi-carrier OFDM through a virtual PA)")
        self.act_start = QAction(st.standardIcon(QStyle.StandardPixmap.SP_MediaPlay), "Start", w)
        self.act_start.setShortcut(QKeySequence("Ctrl+R"))
        self.act_start.setToolTip("Start training (Ctrl+R)")
        self.act_stop = QAction(st.standardIcon(QStyle.StandardPixmap.SP_MediaStop), "Stop", w)
        self.act_stop.setShortcut(QKeySequence(Qt.Key.Key_Escape))
        self.act_stop.setToolTip("Stop after the current batch; completed epochs stay on disk (Esc)")
        self.act_export = QAction("Export current plot…", w)
        self.act_export.setShortcut(QKeySequence("Ctrl+E"))
        self.act_export.setToolTip("Save the plot you last clicked as PNG (Ctrl+E)")
        self.act_run_dpd = QAction(st.standardIcon(QStyle.StandardPixmap.SP_DialogSaveButton), "Run DPD…", w)
        self.act_run_dpd.setToolTip("Write u = DPD(x), the predistorted PA input, of the finished DPD run for its "
                                    "test split: CSV, HDF5 or MAT, plus a .meta.json side-car")
        self.act_run_dpd_saved = QAction("Run DPD of a saved DPD run…", w)
        self.act_run_dpd_saved.setToolTip("Pick a DPD run folder and write u = DPD(x) for its test split")
        self.act_quit = QAction("Quit", w)
        self.act_quit.setShortcut(QKeySequence.StandardKey.Quit)
        self.act_quit.triggered.connect(w.close)
        self.act_about = QAction("About DPD Desktop", w)
        self.act_about.triggered.connect(self.show_about)
        for a in (self.act_open, self.act_start, self.act_stop, self.act_export, self.act_quit):
            a.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
            w.addAction(a)

    def _build_toolbar(self) -> None:
        tb = QToolBar("Main", self.window)
        tb.setObjectName("main_toolbar")
        tb.setMovable(False)
        tb.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.window.addToolBar(tb)
        self.toolbar = tb
        tb.addAction(self.act_open)
        # The button opens a file; its arrow offers a folder (split-CSV datasets are folders).
        open_button = tb.widgetForAction(self.act_open)
        if isinstance(open_button, QToolButton):
            menu = QMenu(open_button)
            menu.addAction("Open dataset file (.csv, .h5, .hdf5)…", self.act_open.trigger)
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
        self.pa_run_combo.setMinimumContentsLength(20)
        self.pa_run_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.pa_run_combo.setToolTip("The PA run whose selected checkpoint the DPD trains through")
        self.pa_run_combo.setPlaceholderText("PA run (for the DPD step)")
        sl.addWidget(self.step_pa)
        sl.addWidget(self.step_dpd)
        sl.addWidget(self.pa_run_combo)
        tb.addWidget(step_box)
        tb.addSeparator()

        tb.addAction(self.act_start)
        self.estimate_label = QLabel("≈ —")
        self.estimate_label.setObjectName("run_estimate")
        self.estimate_label.setContentsMargins(0, 0, 8, 0)
        # the palette's role, not a style sheet: a style sheet's palette() colors stay those of the scheme at polish
        self.estimate_label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        tb.addWidget(self.estimate_label)
        tb.addAction(self.act_stop)
        tb.addAction(self.act_run_dpd)
        tb.addSeparator()

        preview_box = QWidget()
        pl = QHBoxLayout(preview_box)
        pl.setContentsMargins(6, 0, 6, 0)
        self.preview_check = QCheckBox("Live batch preview")
        self.preview_check.setToolTip("Refresh the plots every N batches (set in Training → Preview every) from a "
                                      "frozen copy of the model")
        # under the toolbar, over the plots (gui/plot_area.py): beside the tick it pushed the tick into the
        # toolbar's overflow menu at 1280 px
        self.preview_warning = QLabel(PREVIEW_WARNING)
        self.preview_warning.setObjectName("preview_warning")
        self.style_warning()
        self.preview_warning.setVisible(False)
        pl.addWidget(self.preview_check)
        tb.addWidget(preview_box)

    def style_warning(self) -> None:
        """The preview warning's color (again after a palette change)."""
        self.preview_warning.setStyleSheet(f"color: {warning_color()}; font-weight: 600;")

    def _build_statusbar(self, workspace_root: str | None) -> None:
        """Permanent read-outs (device, fast path, run folder, best metric); transient messages on the left."""
        sb = self.window.statusBar()
        # Each read-out shows as much as fits and elides the rest (the whole text in its tooltip); the best metric
        # keeps its whole text longest; a path loses its start.
        self.device_label = ElidedLabel("device: —", min_chars=14)
        self.fastpath_label = ElidedLabel("CUDA graph: —", min_chars=16)
        self.run_folder_label = ElidedLabel("", Qt.TextElideMode.ElideLeft, min_chars=16)
        self.best_label = ElidedLabel("", min_chars=52)
        for w, stretch in ((self.device_label, 1), (self.fastpath_label, 1), (self.run_folder_label, 2),
                           (self.best_label, 0)):
            w.setContentsMargins(6, 0, 6, 0)
            sb.addPermanentWidget(w, stretch)
        if workspace_root is not None:
            self.run_folder_label.setText(f"workspace {workspace_root}")
            self.run_folder_label.setToolTip(str(workspace_root))

    def show_fast_path(self, fast_path) -> None:
        """Status bar text "CUDA graph: on" or "CUDA graph: off — <reason>" (full text in the tooltip)."""
        fp = str(fast_path)
        shown = "off — " + fp[4:].strip() if fp.startswith("off:") else fp
        self.fastpath_label.setText(f"CUDA graph: {shown}")
        self.fastpath_label.setToolTip(f"CUDA graph fast path: {fp}")
        self.fast_path_shown = fp

    def _build_menus(self) -> None:
        mb = self.window.menuBar()
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
        v = mb.addMenu("&View")
        scheme_menu = v.addMenu("Colors")
        group = QActionGroup(self)
        self.scheme_actions: dict[str, QAction] = {}
        for scheme, label in (("system", "System"), ("light", "Light"), ("dark", "Dark")):
            a = QAction(label, self.window, checkable=True)
            a.setChecked(scheme == "system")
            a.triggered.connect(lambda _=False, sc=scheme: self.set_color_scheme(sc))
            group.addAction(a)
            scheme_menu.addAction(a)
            self.scheme_actions[scheme] = a
        h = mb.addMenu("&Help")
        h.addAction(self.act_about)

    def set_color_scheme(self, scheme: str) -> None:
        """View → Colors: "system", "light" or "dark" for the whole application (kept in QSettings)."""
        theme.apply_scheme(scheme)
        self.scheme_actions[scheme].setChecked(True)
        self._settings.setValue("window/scheme", scheme)

    def about_text(self) -> str:
        """The About box's text: the app's version and the versions of the libraries it runs on (rich text)."""
        return (f"<h3>DPD Desktop {__version__}</h3>"
                "<p>Neural PA behavioral modeling and digital predistortion for measured I/Q data.</p>"
                f"<p>PyTorch {_torch_version()} · Qt (PySide6) {PySide6.__version__}</p>"
                "<p>License: Apache-2.0</p>")

    def show_about(self) -> None:
        """Help → About: a modeless box with :meth:`about_text`."""
        w = self.window
        box = QMessageBox(QMessageBox.Icon.Information, "About DPD Desktop", self.about_text(),
                          QMessageBox.StandardButton.Ok, w)
        box.setTextFormat(Qt.TextFormat.RichText)
        if not w.windowIcon().isNull():
            box.setIconPixmap(w.windowIcon().pixmap(64, 64))
        box.setModal(False)
        box.open()
        self.about_box = box
