"""The QApplication of the window and of offscreen plot rendering: high-DPI, application names, icon, pyqtgraph
settings following the palette. Imports no window module, so that plot export and screenshots can use it."""
from __future__ import annotations

import os
import sys

from PySide6.QtCore import QCoreApplication, Qt
from PySide6.QtGui import QGuiApplication, QIcon
from PySide6.QtWidgets import QApplication

from ..process import Display, detect_display
from .theme import configure_pyqtgraph

APP_NAME = "DPD Desktop"
ORG_NAME = "dpd-desktop"


def ensure_app(argv: list[str] | None = None, headless: bool | None = None) -> QApplication:
    """Return the running QApplication or create one (offscreen when there is no display or ``headless``)."""
    app = QApplication.instance()
    if app is not None:
        if not isinstance(app, QApplication):
            raise RuntimeError("a QCoreApplication without widgets is running; plots need a QApplication")
        return app
    if headless or (headless is None and detect_display() is Display.NONE):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    QGuiApplication.setHighDpiScaleFactorRoundingPolicy(Qt.HighDpiScaleFactorRoundingPolicy.PassThrough)
    QCoreApplication.setOrganizationName(ORG_NAME)
    QCoreApplication.setApplicationName(APP_NAME)
    app = QApplication(list(argv) if argv is not None else sys.argv[:1])
    # No setApplicationDisplayName: Qt appends a display name that is set to every window title not ending with it
    # (QPlatformWindow::formatWindowTitle), and the main window's title already starts with the app name and version
    # ("DPD Desktop 0.1.0 — DPA_160MHz · PA · GRU-23"): the name would show twice. Unset, the display name is
    # applicationName().
    app.setDesktopFileName("dpd-desktop")
    icon = _icon_path()
    if icon:
        app.setWindowIcon(QIcon(icon))
    configure_pyqtgraph()
    return app


def _icon_path() -> str | None:
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.path.join(here, "..", "resources", "icon.png"),
                 os.path.join(here, "..", "..", "resources", "icon.png")):
        if os.path.exists(cand):
            return os.path.normpath(cand)
    return None
