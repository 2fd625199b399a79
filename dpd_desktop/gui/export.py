"""Headless PNG export of the default plots of a run (used by the CLI at the end of a run and by the GUI).

``write_run_plots(run_dir, history_rows, plots)`` renders the learning curves, PSD, AM/AM, AM/PM and time-domain
panels offscreen with pyqtgraph's ImageExporter into ``run_dir/plots/*.png``, each written atomically; the window
uses its two halves, :func:`render_run_plots` (GUI thread) and :func:`save_images` (a worker thread).
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
    """Render the default panels and write them to ``run_dir/plots/``; returns the written paths.

    The command line's way (one thread): :func:`render_run_plots` then :func:`save_images`. The window renders on its
    GUI thread and saves on a worker (MainWindow._write_plots). Raises OSError when a PNG cannot be written.
    """
    return save_images(render_run_plots(history_rows, plots, size=size, width=width, best_epoch=best_epoch),
                       Path(run_dir) / "plots")


def render_run_plots(history_rows: Sequence[Mapping], plots=None, size: tuple[int, int] = EXPORT_SIZE,
                     width: int = EXPORT_WIDTH, best_epoch: int | None = None,
                     on_image=None) -> list[tuple[str, object]]:
    """Render the default panels offscreen; returns ``[(file name, QImage), ...]`` (``width`` pixels wide).

    ``on_image(name, image)``, when given, is called as soon as each image is rendered (the window starts writing
    it on a pool thread while the next panel renders: QImage.save releases the GIL).

    Must run on the thread that owns the QApplication (pyqtgraph draws widgets). ``history_rows`` are history rows
    (``EpochEnded.row`` or ``history.csv`` lines as dicts; text values are fine); ``plots`` is the
    :class:`~dpd_desktop.runs.events.PlotData` of the selected checkpoint (the data panels are skipped when it is
    None). ``best_epoch`` places the selected-epoch marker (default: lowest val NMSE). Creates an offscreen
    QApplication when none exists. Plots are drawn on a light background regardless of the desktop theme (they end
    up in reports).
    """
    images = []
    for name, image in iter_run_plots(history_rows, plots, size=size, width=width, best_epoch=best_epoch):
        images.append((name, image))
        if on_image is not None:
            on_image(name, image)
    return images


def iter_run_plots(history_rows: Sequence[Mapping], plots=None, size: tuple[int, int] = EXPORT_SIZE,
                   width: int = EXPORT_WIDTH, best_epoch: int | None = None):
    """:func:`render_run_plots` one panel at a time: yields ``(file name, QImage)``; each step builds, renders and
    closes one panel, so that the window can return to its event loop between panels (one panel's rendering is the
    longest it waits; benchmarks/bench_gui_responsiveness.py)."""
    app = ensure_app()  # offscreen where there is no display (process.detect_display)
    rows = list(history_rows)

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
            item = (f"{p.file_stem}.png", p.render_image(width))
        finally:
            if p is not None:
                p.close()
                p.deleteLater()
            pg.setConfigOptions(**saved_opts)
        yield item
    app.processEvents()


def save_images(images: Sequence[tuple[str, object]], out_dir: str | os.PathLike) -> list[Path]:
    """Encode and write ``[(file name, QImage), ...]`` as PNGs in ``out_dir`` (created), each atomically.

    Safe on any thread (QImage, unlike QPixmap, may be used off the GUI thread). Raises OSError naming the file
    that could not be written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return [save_png_atomic(img, out / name) for name, img in images]


def _best_epoch(rows: Sequence[Mapping]) -> float | None:
    """Epoch with the lowest val NMSE (for the marker), NaN-safe; None when unknown."""
    best, best_v = None, None
    for i, row in enumerate(rows):
        v = history.value(row, "val_nmse")
        if v == v and (best_v is None or v < best_v):
            ep = history.value(row, "epoch")
            best, best_v = (ep if ep == ep else float(i)), v
    return best
