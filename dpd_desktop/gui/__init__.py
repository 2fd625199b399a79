"""The Qt face of DPD Desktop (PySide6 + pyqtgraph). The core (data, models, training, runs) never imports Qt.

Entry points: :func:`dpd_desktop.gui.app.main` (the window), :func:`dpd_desktop.gui.export.write_run_plots`
(headless PNGs at the end of a run), :func:`dpd_desktop.gui.screenshot.render_main_window`.
"""
from __future__ import annotations

__all__ = ["main", "write_run_plots"]

# The two entry points import their modules when called, not at the top: importing the package must not import Qt
# (the Qt-free session model and the command line import modules of this package).


def main(argv=None, dataset=None, autostart_config=None, workspace=None) -> int:
    """See :func:`dpd_desktop.gui.app.main`."""
    from .app import main as _main

    return _main(argv, dataset=dataset, autostart_config=autostart_config, workspace=workspace)


def write_run_plots(run_dir, history_rows, plots):
    """See :func:`dpd_desktop.gui.export.write_run_plots`."""
    from .export import write_run_plots as _w

    return _w(run_dir, history_rows, plots)
