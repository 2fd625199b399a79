"""``dpd-desktop --self-test``: checks that an installation (pip install or packaged bundle) works end to end.

Steps, each printed as it passes: import PyTorch and report the device; train one epoch of a small PA model (GRU,
hidden size 8) on the embedded demo dataset on the CPU into a workspace (a temporary one unless given); reopen the
run folder with :meth:`~dpd_desktop.runs.record.RunRecord.open` and check its files, its state, its metrics and its
best checkpoint; open the main window offscreen on that workspace and check that it lists the run. Exit status 0 when
every step passed, 1 with a line ``self-test FAILED at <step>: <reason>`` otherwise.

Each step imports what it checks (PyTorch before Qt: torch after Qt fails to load c10.dll on some Windows builds,
pytorch#166628), so an import that fails is that step's finding.
"""
from __future__ import annotations

import math
import os
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np

from . import __version__
from .process import Exit

#: the files every succeeded run folder holds (the run record's writer, :mod:`dpd_desktop.runs.record`)
RUN_FILES = ("config.json", "status.json", "history.csv", "best.csv", "log.txt", "best.pt", "last.pt", "results.h5")
#: a small, fast experiment: ~2 s of training on one CPU core
SELF_TEST_CONFIG = dict(step="pa", dataset="demo", backbone="gru", hidden_size=8, num_layers=1, epochs=1,
                        frame_length=50, stride=8, device="cpu", max_train_samples=8192, seed=0)


class SelfTestError(RuntimeError):
    """A step of the self-test failed; ``step`` names it."""

    def __init__(self, step: str, reason: str):
        super().__init__(f"{step}: {reason}")
        self.step = step


def _check(cond: bool, step: str, reason: str) -> None:
    if not cond:
        raise SelfTestError(step, reason)


def check_torch() -> str:
    """Import PyTorch and run one small matrix product; returns "torch X on cpu (CUDA: …)"."""
    import torch

    a = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    prod = (a @ a.T).tolist()
    _check(prod == [[5.0, 14.0], [14.0, 50.0]], "torch", f"2×3 matrix product gave {prod}")
    cuda = (f"CUDA {torch.version.cuda}, {torch.cuda.device_count()} GPU(s)" if torch.cuda.is_available()
            else "no CUDA device" if torch.version.cuda else "CPU build")
    return f"torch {torch.__version__}, training device cpu ({cuda})"


def train_demo(workspace_root: Path):
    """Train :data:`SELF_TEST_CONFIG` into ``workspace_root``; returns the trainer's RunResult (state succeeded)."""
    from .config import ExperimentConfig
    from .runs.workspace import Workspace
    from .training.trainer import Trainer

    ws = Workspace(workspace_root)
    ws.check(create=True)
    res = Trainer(ExperimentConfig(**SELF_TEST_CONFIG), workspace=ws).run()
    _check(res.state == "succeeded", "training", f"run {res.state}: {res.message}")
    return res


def check_run(run_dir: Path) -> str:
    """Reopen ``run_dir`` and check its files and contents; returns a one-line summary.

    Raises:
        SelfTestError: a file is missing or empty, the run is not "succeeded", a test metric is not finite, or the
            best checkpoint does not load into a model of the recorded architecture.
    """
    from .models import build_model
    from .runs.artifacts import load_state_checked
    from .runs.record import RecordError, RunRecord
    from .runs.states import DAMAGED

    try:
        rec = RunRecord.open(run_dir)
    except RecordError as exc:
        raise SelfTestError("reopen", str(exc)) from exc
    for name in RUN_FILES:
        f = run_dir / name
        _check(f.is_file() and f.stat().st_size > 0, "files", f"{f} is missing or empty")
    _check(rec.state != DAMAGED, "checkpoint", f"{rec.best_checkpoint}: not a checkpoint file (the run reads "
           f"'{DAMAGED}')")
    _check(rec.state == "succeeded", "reopen", f"state {rec.state!r}, expected 'succeeded'")
    rows = rec.history()
    _check(len(rows) == SELF_TEST_CONFIG["epochs"], "reopen", f"history.csv has {len(rows)} rows")
    nmse = rec.test_metrics.get("NMSE")
    # below 0 dB: better than predicting zero, which one epoch of this seed reaches (about -1.9 dB)
    _check(nmse is not None and math.isfinite(nmse) and nmse < 0, "reopen", f"test NMSE {nmse!r} is not < 0 dB")
    # the recorded NMSE again from results.h5 (h5py + numpy): 10·log10(Σ|ŷ−y|² / Σ|y|²), float64 here, float32 in
    # the trainer; the two agree to ~1e-4 dB
    with h5py.File(rec.results_path, "r") as f:
        pred = np.asarray(f["test/prediction"], dtype=np.float64)
        target = np.asarray(f["test/target"], dtype=np.float64)
    again = 10 * math.log10(float(((pred - target) ** 2).sum() / (target ** 2).sum()))
    _check(abs(again - nmse) < 0.01, "results", f"results.h5 gives test NMSE {again:.4f} dB, status.json {nmse:.4f}")
    _check(rec.doc.get("versions", {}).get("dpd_desktop") == __version__, "reopen",
           f"config.json records version {rec.doc.get('versions', {}).get('dpd_desktop')!r}, this is {__version__}")
    model = build_model(rec.arch["backbone"], rec.arch["hidden_size"], rec.arch["num_layers"])
    try:
        load_state_checked(model, rec.best_checkpoint, rec.arch)
    except Exception as exc:  # noqa: BLE001 - any failure to load is the finding
        raise SelfTestError("checkpoint", f"{rec.best_checkpoint}: {exc}") from exc
    return (f"reopened {rec.run_id}: {rec.state}, test NMSE {nmse:.2f} dB (results.h5: {again:.2f}), "
            f"{len(RUN_FILES)} files, best.pt loads into {rec.arch['backbone']} H={rec.arch['hidden_size']}")


def check_window(workspace_root: Path, run_id: str) -> str:
    """Open the main window offscreen on ``workspace_root`` and check that its PA-run list shows ``run_id``."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QSettings

    from .gui.main_window import MainWindow
    from .gui.qt_app import ensure_app
    from .runs.workspace import Workspace

    app = ensure_app(headless=True)
    settings = QSettings(str(workspace_root / "self-test-settings.ini"), QSettings.Format.IniFormat)
    win = MainWindow(workspace=Workspace(workspace_root), settings=settings)
    # no PyTorch preload and no forkserver for the runs' child processes: this check trains nothing, and the
    # self-test ends with os._exit, which would leave the forkserver's socket folder (pymp-*) in TMPDIR
    win.preload_core = False
    try:
        win.show()
        app.processEvents()
        win.refresh_pa_runs()
        items = [str(win.pa_run_combo.itemData(i)) + " " + win.pa_run_combo.itemText(i)
                 for i in range(win.pa_run_combo.count())]
        _check(any(run_id in it for it in items), "window", f"the PA run list {items} lacks {run_id}")
        title = win.windowTitle()
        _check(__version__ in title, "window", f"title {title!r} lacks the version {__version__}")
        return f"{app.platformName()} window {title!r} lists the run"
    finally:
        win.write_plots_on_finish = False
        win.close()
        win.deleteLater()
        app.processEvents()


def main(workspace: str | Path | None = None, out=None) -> int:
    """Run every step; returns the exit status (0 passed, 1 failed). ``workspace`` keeps the run there (a
    temporary folder, removed afterwards, when None)."""
    out = out or sys.stdout
    t0 = time.perf_counter()

    def say(text: str) -> None:
        print(f"self-test [{time.perf_counter() - t0:6.2f} s] {text}", file=out, flush=True)

    say(f"dpd-desktop {__version__}, Python {sys.version.split()[0]}, "
        f"{'bundle' if getattr(sys, 'frozen', False) else 'Python install'} at {Path(__file__).resolve().parent}")
    tmp = None
    step = "torch"
    try:
        say(check_torch())
        if workspace is None:
            tmp = tempfile.TemporaryDirectory(prefix="dpd-desktop-selftest-")
            root = Path(tmp.name)
        else:
            root = Path(workspace)
        step = "training"
        res = train_demo(root)
        say(f"trained 1 epoch on the demo into {res.run_dir}")
        step = "reopen"
        say(check_run(Path(res.run_dir)))
        step = "window"
        say(check_window(root, res.run_id))
    except SelfTestError as exc:
        print(f"self-test FAILED at {exc}", file=sys.stderr, flush=True)
        return Exit.FAILED
    except Exception as exc:  # noqa: BLE001 - a broken installation shows as any exception: report, exit 1
        print(f"self-test FAILED at {step}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return Exit.FAILED
    finally:
        if tmp is not None:
            tmp.cleanup()
    say("passed")
    return Exit.OK
