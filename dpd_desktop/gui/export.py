"""The one writer of a run's default plots (``plots/*.png``): the command line after a run (cli/train.py) and the
window's PNG process (gui/run_plots.py).

``write_run_plots(run_dir, history_rows, plots)`` renders the learning curves, PSD, AM/AM, AM/PM and time-domain
panels offscreen with pyqtgraph's ImageExporter into ``run_dir/plots/*.png``, each written atomically.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

import pyqtgraph as pg
from PySide6.QtCore import Qt

from . import history
from .qt_app import ensure_app
from .panels import AMAMPanel, AMPMPanel, LearningPanel, PSDPanel, TimeDomainPanel
from .panels.base import save_png_atomic

EXPORT_SIZE = (1000, 640)  # logical pixels of each offscreen panel
EXPORT_WIDTH = 1500  # pixel width of the PNG


def write_run_plots(run_dir: str | os.PathLike, history_rows: Sequence[Mapping], plots=None,
                    size: tuple[int, int] = EXPORT_SIZE, width: int = EXPORT_WIDTH,
                    best_epoch: int | None = None) -> list[Path]:
    """Render the default panels offscreen and write them to ``run_dir/plots/`` (created); returns the paths.

    Must run on the thread that owns the QApplication (pyqtgraph draws widgets; an offscreen one is created when
    none exists). ``history_rows`` are history rows (``EpochEnded.row`` or ``history.csv`` lines as dicts; text
    values are fine); ``plots`` is the :class:`~dpd_desktop.runs.events.PlotData` of the selected checkpoint (the
    data panels are skipped when it is None); ``best_epoch`` places the selected-epoch marker (default: lowest val
    NMSE). Plots are drawn on a light background regardless of the desktop theme (they end up in reports).
    Raises OSError naming the file that could not be written.
    """
    app = ensure_app()  # offscreen where there is no display (process.detect_display)
    rows = list(history_rows)
    out = Path(run_dir) / "plots"
    out.mkdir(parents=True, exist_ok=True)

    def learning():
        p = LearningPanel()
        for row in rows:
            p.append_row(row)
        best = best_epoch if best_epoch is not None else _best_epoch(rows)
        if best is not None:
            p.set_best_epoch(best)
        return p

    def data_panel(cls):
        def make():
            p = cls()
            p.update_from(plots, f"{getattr(plots, 'source', '')}")
            return p
        return make

    makers = [learning] + ([data_panel(c) for c in (PSDPanel, AMAMPanel, AMPMPanel, TimeDomainPanel)]
                           if plots is not None else [])
    paths = []
    for make in makers:
        saved_opts = {k: pg.getConfigOption(k) for k in ("background", "foreground", "antialias")}
        pg.setConfigOptions(background="w", foreground="k", antialias=True)
        p = None
        try:
            p = make()
            p.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen, True)
            p.resize(*size)
            p.show()
            app.processEvents()
            name, image = f"{p.file_stem}.png", p.render_image(width)
        finally:
            if p is not None:
                p.close()
                p.deleteLater()
            pg.setConfigOptions(**saved_opts)
        paths.append(save_png_atomic(image, out / name))
    app.processEvents()
    return paths


def _best_epoch(rows: Sequence[Mapping]) -> float | None:
    """Epoch with the lowest val NMSE (for the marker), NaN-safe; None when unknown."""
    best, best_v = None, None
    for i, row in enumerate(rows):
        v = history.value(row, "val_nmse")
        if v == v and (best_v is None or v < best_v):
            ep = history.value(row, "epoch")
            best, best_v = (ep if ep == ep else float(i)), v
    return best
