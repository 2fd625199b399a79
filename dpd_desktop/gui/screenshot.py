"""Render the main window to a PNG offscreen (``QWidget.grab``), optionally after a short demo run.

    python -m dpd_desktop.gui.screenshot resources/screenshot-main-window.png --epochs 12

produces the screenshot in the README. Uses a temporary workspace unless one is given.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from PySide6.QtCore import QEventLoop, QTimer

from ..config import ExperimentConfig
from ..data import make_demo_dataset
from ..runs.workspace import Workspace
from .qt_app import ensure_app
from .main_window import MainWindow
from .panels.base import save_png_atomic


def render_main_window(path: str | os.PathLike, window=None, size: tuple[int, int] = (1600, 1000),
                       config=None, dataset=None, workspace=None, run: bool = True, at_epoch: int | None = None,
                       timeout_s: float = 600.0, preview: bool = False, scheme: str | None = None) -> Path:
    """Grab the whole main window into ``path`` (PNG, written atomically); returns the path.

    Args:
        window: an existing MainWindow to grab as it is (``run`` is then ignored).
        size: window size in logical pixels.
        config: the ExperimentConfig of the demo run (default: a short GRU-16 run on the demo data).
        dataset: an IQDataset (default: ``make_demo_dataset()``).
        workspace: a Workspace (default: a temporary folder).
        run: train before grabbing, so that every panel holds data.
        at_epoch: grab while running, once this many epochs are done (then stop the run); None: after the end.
        preview: tick "Live batch preview" (shows the warning label) for the shot.
        scheme: "light" or "dark" colors for the shot (:func:`dpd_desktop.gui.theme.apply_scheme`); None: as is.
    """
    app = ensure_app(headless=None)
    if scheme is not None:
        from .theme import apply_scheme

        apply_scheme(scheme)
    own = window is None
    if own:
        if workspace is None:
            workspace = Workspace(tempfile.mkdtemp(prefix="dpd-screenshot-"))
        window = MainWindow(workspace=workspace)
        window.preload_core = run  # an idle shot needs no PyTorch
        window.write_plots_on_finish = False
        window.resize(*size)
        window.show()
        if config is None:
            config = ExperimentConfig(step="pa", dataset="demo", epochs=12, hidden_size=16, frame_length=100,
                                      stride=4, device="cpu")
        window.set_form_from_config(config)
        window.preview_check.setChecked(preview)
        if run:
            if dataset is None:
                dataset = make_demo_dataset()
            window.set_dataset(dataset, "demo")
            loop = QEventLoop()
            window.runEnded.connect(lambda *_: loop.quit())
            if at_epoch is not None:
                def _check():
                    if window.epoch_table.rowCount() >= at_epoch and loop.isRunning():
                        loop.quit()
                timer = QTimer(window, interval=200)
                timer.timeout.connect(_check)
                timer.start()
            QTimer.singleShot(int(timeout_s * 1000), loop.quit)
            if not window.start_run():
                raise RuntimeError("the run did not start: " + window.banner.message)
            loop.exec()
    else:
        window.resize(*size)
        window.show()
    for _ in range(5):
        app.processEvents()
    QTimer.singleShot(100, lambda: None)
    app.processEvents()
    pixmap = window.grab()
    path = save_png_atomic(pixmap, path)
    if own:
        window.close()
    return path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path", nargs="?", default="resources/screenshot-main-window.png")
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--at-epoch", type=int, default=None, help="grab mid-run after this many epochs")
    p.add_argument("--width", type=int, default=1600)
    p.add_argument("--height", type=int, default=1000)
    p.add_argument("--preview", action="store_true", help="tick Live batch preview for the shot")
    p.add_argument("--idle", action="store_true", help="the window before any run (no dataset)")
    p.add_argument("--scheme", choices=("light", "dark"), default=None, help="colors of the shot")
    a = p.parse_args(argv)
    cfg = ExperimentConfig(step="pa", dataset="demo", epochs=a.epochs, hidden_size=16, frame_length=100, stride=4,
                           device="cpu", preview_every=50 if a.preview else None)
    out = render_main_window(a.path, size=(a.width, a.height), config=cfg, at_epoch=a.at_epoch, preview=a.preview,
                             run=not a.idle, scheme=a.scheme)
    print(out)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
