"""Render the runs browser and a comparison offscreen to PNGs (the README's figures):

    python -m dpd_desktop.gui.screenshot_runs resources/runs-browser.png resources/compare.png

trains a few short demo runs in a temporary workspace (unless ``--workspace`` names one with runs), opens the first
in the window from the runs browser (plots and epoch table replayed from its folder) and compares the first two.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
from PySide6.QtCore import QEventLoop, Qt, QTimer
from PySide6.QtGui import QColor, QImage

from ..config import ExperimentConfig
from ..data import make_demo_dataset
from ..runs.workspace import Workspace
from ..training.trainer import Trainer
from . import theme
from .compare import RUN_COLORS
from .main_window import MainWindow
from .panels.base import save_png_atomic
from .qt_app import ensure_app

#: the demo runs of the figures: (hidden size, learning rate)
RUNS = ((8, 5e-3), (16, 5e-3), (16, 2e-3))


def _train(ws: Workspace, epochs: int) -> None:
    ds = make_demo_dataset(seed=0, n_train=12000, n_val=8192, n_test=8192)
    for hidden, lr in RUNS:
        cfg = ExperimentConfig(step="pa", dataset="demo", backbone="gru", hidden_size=hidden, lr=lr, epochs=epochs,
                               frame_length=50, stride=4, device="cpu")
        Trainer(cfg, dataset=ds, workspace=ws).run()


def _small(pixmap):
    """The grab as an 8-bit palette image of its 256 most frequent colors (a README figure under 300 KB; a window
    is mostly flat colors, which stay exact; anti-aliased edges take the nearest palette color)."""
    img = pixmap.toImage().convertToFormat(QImage.Format.Format_RGB32)
    argb = np.frombuffer(img.constBits(), dtype=np.uint32, count=img.bytesPerLine() * img.height() // 4)
    values, counts = np.unique(argb, return_counts=True)
    # the plot colors first (a thin curve has few pixels of its own color), then the most frequent ones
    table = [QColor(c).rgb() for c in {**theme.SIGNAL_COLORS, **theme.SERIES_COLORS}.values()]
    table += [QColor(c).rgb() for c in RUN_COLORS]
    table = list(dict.fromkeys(table))
    table += [int(v) for v in values[np.argsort(counts)[::-1]] if int(v) not in table][:256 - len(table)]
    return img.convertToFormat(QImage.Format.Format_Indexed8, table, Qt.ImageConversionFlag.ThresholdDither)


def _wait(signal, timeout_ms: int = 60000):
    loop, got = QEventLoop(), []
    signal.connect(lambda *a: (got.append(a), loop.quit()))
    QTimer.singleShot(timeout_ms, loop.quit)
    loop.exec()
    if not got:
        raise RuntimeError("timed out waiting for the runs browser")
    return got[0]


def render(browser_png: str, compare_png: str, workspace: str | None = None, epochs: int = 10) -> list[Path]:
    app = ensure_app(headless=None)
    ws = Workspace(workspace or tempfile.mkdtemp(prefix="dpd-runs-shot-"))
    if not (ws.runs_dir.is_dir() and any(ws.runs_dir.glob("*/config.json"))):
        _train(ws, epochs)
    win = MainWindow(workspace=ws)
    win.write_plots_on_finish = False
    win.resize(1600, 1000)
    win.show()
    b = win.runs_browser
    win.runs_dock.show()
    win.runs_dock.raise_()
    b.refresh()
    _wait(b.rowsLoaded)
    win.resizeDocks([win.runs_dock], [230], Qt.Orientation.Vertical)
    rows = b.visible_rows()
    b.select_ids([rows[-1].run_id])
    b.open_selected()
    _wait(b.runOpened)
    for _ in range(5):
        app.processEvents()
    out = [save_png_atomic(_small(win.grab()), browser_png)]
    b.select_ids([r.run_id for r in rows[-2:]] + [rows[0].run_id])
    b.compare_selected()
    (view,) = _wait(b.compareOpened)
    view.resize(1500, 860)
    for _ in range(5):
        app.processEvents()
    out.append(save_png_atomic(_small(view.grab()), compare_png))
    view.close()
    win.close()
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("browser", nargs="?", default="resources/runs-browser.png")
    p.add_argument("compare", nargs="?", default="resources/compare.png")
    p.add_argument("--workspace", default=None)
    p.add_argument("--epochs", type=int, default=10)
    a = p.parse_args(argv)
    for path in render(a.browser, a.compare, a.workspace, a.epochs):
        print(path)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
