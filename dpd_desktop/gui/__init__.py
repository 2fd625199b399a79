"""The Qt face of DPD Desktop (PySide6 + pyqtgraph). The core (data, models, training, runs) never imports Qt.

Entry points: :func:`dpd_desktop.gui.app.main` (the window), :func:`dpd_desktop.gui.export.write_run_plots`
(headless PNGs at the end of a run), :func:`dpd_desktop.gui.screenshot.render_main_window`. Importing the package
imports no Qt (the Qt-free session model and the command line import modules of this package).
"""
from __future__ import annotations

import sys


def import_torch_first(platform: str = sys.platform, importer=None) -> bool:
    """Import PyTorch now when ``platform`` needs it imported before Qt; returns whether it did.

    On Windows some PyTorch builds fail to load their DLLs once Qt's are loaded (pytorch#166628: ``import torch``
    after ``import PySide6`` raises an OSError from c10.dll), so there torch is imported before any Qt module. On
    Linux and macOS the window imports torch after it is shown (gui/preload.py).
    ``importer``: ``importlib.import_module`` unless given (tests).
    """
    if platform != "win32":
        return False
    if importer is None:
        import importlib

        importer = importlib.import_module
    importer("torch")
    return True


# Every Qt module of the window is a submodule of this package, so this runs before any of them.
import_torch_first()

