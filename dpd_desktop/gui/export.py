"""Headless PNG export of the default plots of a run (used by the CLI at the end of a run and by the GUI).

``write_run_plots(run_dir, history_rows, plots)`` renders the learning curves, PSD, AM/AM, AM/PM and time-domain
panels offscreen with pyqtgraph's ImageExporter into ``run_dir/plots/*.png``, each written atomically.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

EXPORT_SIZE = (1000, 640)  # logical pixels of each offscreen panel
EXPORT_WIDTH = 1500  # pixel width of the PNG


def write_run_plots(run_dir: str | os.PathLike, history_rows: Sequence[Mapping], plots=None,
                    size: tuple[int, int] = EXPORT_SIZE, width: int = EXPORT_WIDTH,
                    best_epoch: int | None = None) -> list[Path]:
    """Render the default panels to ``run_dir/plots/``; returns the written paths.

    ``history_rows`` are history rows (``EpochEnded.row`` or ``history.csv`` lines as dicts; text values are fine);
    ``plots`` is the :class:`~dpd_desktop.training.events.PlotData` of the selected checkpoint (the data panels are
    skipped when it is None). ``best_epoch`` places the selected-epoch marker (default: lowest val NMSE). Creates an offscreen QApplication when none exists. Plots are drawn on a light
    background regardless of the desktop theme (they end up in reports).
    """
    from .app import ensure_app

    app = ensure_app(headless=True if _no_display() else None)
    import pyqtgraph as pg
    from PySide6.QtCore import Qt

    from .panels import AMAMPanel, AMPMPanel, LearningPanel, PSDPanel, TimeDomainPanel

    out_dir = Path(run_dir) / "plots"
    out_dir.mkdir(parents=True, exist_ok=True)
    saved_opts = {k: pg.getConfigOption(k) for k in ("background", "foreground", "antialias")}
    pg.setConfigOptions(background="w", foreground="k", antialias=True)
    written: list[Path] = []
    panels = []
    try:
        learning = LearningPanel()
        for row in history_rows:
            learning.append_row(row)
        best = best_epoch if best_epoch is not None else _best_epoch(history_rows)
        if best is not None:
            learning.set_best_epoch(best)
        panels.append(learning)
        if plots is not None:
            label = f"{getattr(plots, 'source', '')}"
            for cls in (PSDPanel, AMAMPanel, AMPMPanel, TimeDomainPanel):
                p = cls()
                p.update_from(plots, label)
                panels.append(p)
        for p in panels:
            p.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen, True)
            p.resize(*size)
            p.show()
        app.processEvents()
        for p in panels:
            written.append(p.export_png(out_dir / f"{p.file_stem}.png", width=width))
    finally:
        for p in panels:
            p.close()
            p.deleteLater()
        app.processEvents()
        pg.setConfigOptions(**saved_opts)
    return written


def _best_epoch(rows: Sequence[Mapping]) -> float | None:
    """Epoch with the lowest val NMSE (for the marker), NaN-safe; None when unknown."""
    from . import history

    best, best_v = None, None
    for i, row in enumerate(rows):
        v = history.value(row, "val_nmse")
        if v == v and (best_v is None or v < best_v):
            ep = history.value(row, "epoch")
            best, best_v = (ep if ep == ep else float(i)), v
    return best


def _no_display() -> bool:
    import sys

    return sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
