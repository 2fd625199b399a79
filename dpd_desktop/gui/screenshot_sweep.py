"""Render the Sweep view offscreen to a PNG (the README's figure):

    python -m dpd_desktop.gui.screenshot_sweep resources/sweep-view.png [--workspace DIR]

runs a small grid sweep on the demo dataset (GRU hidden sizes × learning rates, 2 epochs, each trial a queue entry; the
two learning rates of a size train as one group in one process) in a temporary workspace, unless ``--workspace`` names one that has a sweep, then shows the newest
sweep in the view and grabs it.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from PySide6.QtCore import QEventLoop, QTimer

from ..runs.workspace import Workspace
from ..sweep.runner import SweepRun, create_sweep
from ..sweep.spec import parse_spec
from ..sweep.store import SweepStore
from .main_window import MainWindow
from .qt_app import ensure_app

SPEC = {"sweep": {"name": "gru-size-lr", "search": "grid", "group_size": 2},  # the two lr of a size: one group
        "base": {"dataset": "demo", "epochs": 2, "frame_length": 50, "stride": 4, "max_train_samples": 6000,
                 "device": "cpu", "threads": 1},
        "space": {"hidden_size": [4, 8, 12, 16], "lr": [2e-3, 5e-3]}}


def make_sweep(ws: Workspace) -> str:
    info = create_sweep(ws, parse_spec(SPEC, "screenshot"))
    SweepRun(ws, info.id).run()
    return info.id


def render(ws: Workspace, out: Path, size=(1700, 600)) -> Path:
    app = ensure_app()
    w = MainWindow(workspace=ws)
    w.resize(1500, 950)
    w.show()
    dock = w.sweeps_dock
    dock.show()
    dock.setFloating(True)
    dock.resize(*size)
    loop = QEventLoop()
    w.sweep_view.tableLoaded.connect(lambda *a: loop.quit())
    QTimer.singleShot(30000, loop.quit)
    w.sweep_view.refresh()
    loop.exec()
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        app.processEvents()
    out.parent.mkdir(parents=True, exist_ok=True)
    if not dock.widget().grab().save(str(out)):
        raise OSError(f"{out}: cannot write the PNG")
    w.close()
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("png")
    p.add_argument("--workspace", default=None)
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace(a.workspace or tmp)
        if not SweepStore(ws.root).list():
            make_sweep(ws)
        print(render(ws, Path(a.png)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
