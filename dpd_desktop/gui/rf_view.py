"""The RF plots: gain compression (P1dB), Pin/Pout and CCDF (PAPR) of the shown evaluation, in a dock on the
window's right (View ▸ RF plots, Ctrl+Shift+F; also the "RF plots" button at the end of the signal legend).

The curves are computed in the core with the rest of the PlotData (runs/plotdata.py ``rf_curves``, on the
training side or the replay's job), never here; the view only draws them. While the dock is hidden nothing is drawn:
the newest PlotData is kept and drawn when the dock is shown (latest value wins), one panel per event-loop pass like
the window's own panels (gui/plot_area.py ``_flush_plots``).
"""
from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDockWidget, QFrame, QPushButton, QScrollArea, QVBoxLayout, QWidget

from .panel_export import add_context_menu
from .panels.ccdf import CCDFPanel
from .panels.compression import CompressionPanel, PinPoutPanel

SHORTCUT = "Ctrl+Shift+F"
PANEL_MIN_HEIGHT = 230
DOCK_WIDTH = 440


class RFView(QWidget):
    """The three RF panels stacked (gain compression, Pin/Pout, CCDF); :meth:`offer` gives it PlotData."""

    def __init__(self, parent=None):
        super().__init__(parent)
        # no legends: each read-out names its signals in their colors (a legend covered the curves of a short plot)
        self.compression_panel = CompressionPanel(show_legend=False)
        self.pin_pout_panel = PinPoutPanel(show_legend=False)
        self.ccdf_panel = CCDFPanel(show_legend=False)
        self.panels = [self.compression_panel, self.pin_pout_panel, self.ccdf_panel]
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.setSpacing(4)
        for p in self.panels:
            p.setMinimumHeight(PANEL_MIN_HEIGHT)
            lay.addWidget(p, 1)
        self._pending: tuple | None = None  # (plots, label) not drawn yet
        self._queue: list = []
        self.draws = 0  # panels drawn (tests: nothing is drawn while hidden)

    def offer(self, plots, label: str = "") -> None:
        """The window shows new PlotData (None: a new run cleared the views). Drawn now if the view is visible,
        else when it is shown."""
        if plots is None:
            self._pending, self._queue = None, []
            for p in self.panels:
                p.clear_data()
                p.reset_view()
            return
        self._pending = (plots, label)
        if self.isVisible():
            self._start()

    def changeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            for p in self.panels:  # the window re-colours its own panels; these live in the dock
                p.apply_palette()
        super().changeEvent(event)

    def highlight(self, panel) -> None:
        """Frame ``panel`` as the current plot (None: none of these)."""
        for p in self.panels:
            p.setStyleSheet("border: 1px solid palette(highlight);" if p is panel else "border: 1px solid transparent;")

    def showEvent(self, event) -> None:  # noqa: N802 (Qt name)
        super().showEvent(event)
        if self._pending is not None:
            QTimer.singleShot(0, self._start)

    def _start(self) -> None:
        if self._pending is None:
            return
        plots, label = self._pending
        self._pending = None
        self._queue = [(p, plots, label) for p in self.panels]
        self._next()

    def _next(self) -> None:
        if not self._queue or self._pending is not None:
            return  # done, or newer data arrived (its own pass draws it)
        panel, plots, label = self._queue.pop(0)
        try:
            panel.update_from(plots, label)
            panel.settle_ranges()
            self.draws += 1
        except Exception as exc:  # noqa: BLE001 - a malformed PlotData must not break the window
            panel.readout.setText(f"could not draw: {exc}")
        if self._queue:
            QTimer.singleShot(0, self._next)


def show_rf_plots(window, on: bool = True) -> None:
    """Show (or hide) the RF plots' dock of ``window`` (what View ▸ RF plots does)."""
    if on:
        place_dock(window, window.rf_dock)
    window.rf_dock.setVisible(on)
    if on:
        window.rf_dock.raise_()


def place_dock(window, dock) -> None:
    """Before the dock is first shown: on the window's right when the window has the room beside its central
    widget's minimum width, else a floating window over the window's right side (a dock must not push the window
    past its size, or past a 1280-pixel screen). Later the user's own docking and floating stand."""
    if getattr(dock, "_placed", False):
        return
    dock._placed = True
    room = window.width() - window.centralWidget().minimumSizeHint().width()
    if room >= DOCK_WIDTH + 20:
        dock.setFloating(False)
        return
    dock.setFloating(True)
    geo = window.geometry()
    screen = window.screen().availableGeometry() if window.screen() is not None else geo
    w, h = DOCK_WIDTH + 40, max(480, int(geo.height() * 0.85))
    x = min(geo.right() - w - 12, screen.right() - w)
    y = max(screen.top(), geo.top() + 60)
    dock.setGeometry(max(screen.left(), x), y, w, min(h, screen.height()))


def install_rf_view(window) -> RFView:
    """Add the RF plots to ``window``: a right-hand dock, hidden until View ▸ RF plots (Ctrl+Shift+F) or the button
    at the end of the signal legend shows it. It gets every PlotData the window draws (``window.plot_sinks``);
    clicking one of its panels makes it the window's current plot (Ctrl+E, File ▸ Export); each has the export
    context menu of the window's panels (gui/panel_export.py)."""
    view = RFView()
    scroll = QScrollArea()
    scroll.setWidget(view)
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QFrame.Shape.NoFrame)
    scroll.setMinimumWidth(340)
    dock = QDockWidget("RF plots: compression · Pin/Pout · CCDF", window)
    dock.setObjectName("rf_dock")
    dock.setWidget(scroll)
    window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
    window.resizeDocks([dock], [DOCK_WIDTH], Qt.Orientation.Horizontal)
    dock.hide()
    toggle = QAction("RF plots (compression, Pin/Pout, CCDF)", window, checkable=True)
    toggle.setShortcut(QKeySequence(SHORTCUT))
    toggle.setToolTip(f"Gain compression with P1dB, Pin/Pout and the CCDF with PAPR of the shown evaluation ({SHORTCUT})")
    toggle.triggered.connect(lambda on: show_rf_plots(window, on))
    dock.visibilityChanged.connect(lambda _on: toggle.setChecked(dock.isVisible()))
    window.addAction(toggle)
    for action in window.menuBar().actions():
        if action.text().replace("&", "") == "View" and action.menu() is not None:
            action.menu().addSeparator()
            action.menu().addAction(toggle)
    window.rf_dock = dock  # before the first show (show_rf_plots, place_dock)
    legend = getattr(window, "signal_legend", None)
    if legend is not None and legend.layout() is not None:
        button = QPushButton("RF plots ▸")
        button.setObjectName("rf_plots_button")
        button.setFlat(True)
        button.setCheckable(True)
        button.setToolTip(toggle.toolTip())
        button.clicked.connect(lambda on: show_rf_plots(window, on))
        toggle.toggled.connect(button.setChecked)
        legend.layout().addWidget(button)
        window.rf_button = button

    def make_current(panel) -> None:
        window.plots.set_current_panel(panel)  # the window's current-plot tracking (frames its own)
        view.highlight(panel)

    for p in view.panels:
        p.activated.connect(make_current)
        add_context_menu(window, p)
    for p in window.panels:
        p.activated.connect(lambda _p: view.highlight(None))
    window.plot_sinks.append(view.offer)
    window.rf_dock = dock
    window.rf_toggle = toggle
    if window.plots.last_plots is not None:
        view.offer(window.plots.last_plots)
    return view
