"""Screenshots of the main window after a short PA and DPD run, at two sizes in light and dark (issue 28):

    python -m dpd_desktop.gui.screenshot_sizes DATASET resources/screenshots

``DATASET`` is a dataset folder or file (``demo``: the built-in demo data), copied into a temporary folder first (the
shots then name no path of this machine). The window trains a GRU PA, then a DPD
through it, as a user would (Start; the runs train in the window's child process, in a temporary workspace), and
writes ``main-<W>x<H>-<scheme>.png`` for 1280×800 and 1920×1080, light and dark. Prints each path with the window's
minimum width (``minimumSizeHint``), which must stay within the smaller size.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from PySide6.QtCore import QEventLoop, QSettings, QTimer

from ..config import ExperimentConfig
from ..runs.workspace import Workspace
from . import theme
from .main_window import MainWindow
from .panels.base import save_png_atomic
from .qt_app import ensure_app

SIZES = ((1280, 800), (1920, 1080))
SCHEMES = ("light", "dark")


def _wait(signal, timeout_s: float) -> list:
    """Run the event loop until ``signal`` fires (its arguments) or ``timeout_s`` passes (RuntimeError)."""
    loop, got = QEventLoop(), []

    def fired(*args):
        got.append(args)
        loop.quit()

    signal.connect(fired)
    QTimer.singleShot(int(timeout_s * 1000), loop.quit)
    loop.exec()
    signal.disconnect(fired)
    if not got:
        raise RuntimeError(f"no {signal} within {timeout_s:.0f} s")
    return list(got[0])


def _settle(app, ms: int = 300) -> None:
    loop = QEventLoop()
    QTimer.singleShot(ms, loop.quit)
    loop.exec()
    app.processEvents()


def _run(window, cfg: ExperimentConfig, timeout_s: float) -> str:
    window.set_form_from_config(cfg)
    if not window.start_run():
        raise RuntimeError("the run did not start: " + window.banner.message)
    state = _wait(window.runEnded, timeout_s)[0]
    if state != "succeeded":
        raise RuntimeError(f"the {cfg.step.upper()} run ended {state}: {window.banner.message}")
    return window.session.run_id


def render_sizes(dataset: str, out_dir: str | Path, epochs: int = 4, timeout_s: float = 600.0) -> list[Path]:
    """Train a PA and a DPD on ``dataset`` in a window, then grab it at :data:`SIZES` × :data:`SCHEMES`; returns
    the PNG paths (written atomically). Raises RuntimeError when a run does not succeed."""
    app = ensure_app(headless=None)
    tmp = Path(tempfile.mkdtemp(prefix="dpd-screenshots-"))
    window = MainWindow(workspace=Workspace(tmp / "workspace"),
                        settings=QSettings(str(tmp / "window.ini"), QSettings.Format.IniFormat))
    window.write_plots_on_finish = False
    window.resize(*SIZES[-1])
    window.show()
    if dataset == "demo":
        window.load_demo()
    else:
        src = Path(dataset)
        copy = tmp / src.name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, copy)
        window.open_dataset(copy)
    _wait(window.datasetLoaded, timeout_s)
    base = dict(dataset=window.data.ref, backbone="gru", epochs=epochs, frame_length=50, stride=2, device="cpu",
                batch_size=64)
    pa = _run(window, ExperimentConfig(step="pa", hidden_size=16, **base), timeout_s)
    window.step_dpd.setChecked(True)
    window.refresh_pa_runs()
    _run(window, ExperimentConfig(step="dpd", hidden_size=12, pa_run=pa, **base), timeout_s)
    out: list[Path] = []
    for scheme in SCHEMES:
        theme.apply_scheme(scheme)
        for w, h in SIZES:
            window.resize(w, h)
            _settle(app)
            path = save_png_atomic(window.grab(), Path(out_dir) / f"main-{w}x{h}-{scheme}.png")
            print(f"{path}  (window {window.width()}×{window.height()}, minimum width "
                  f"{window.minimumSizeHint().width()})")
            out.append(path)
    window.close()
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dataset", help="a dataset folder or file, or 'demo'")
    p.add_argument("out_dir", nargs="?", default="resources/screenshots")
    p.add_argument("--epochs", type=int, default=4)
    a = p.parse_args(argv)
    render_sizes(a.dataset, a.out_dir, epochs=a.epochs)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
