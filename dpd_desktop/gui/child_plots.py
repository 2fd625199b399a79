"""The window's run in its child process, then the run's default plots (``plots/*.png``) written there too.

:func:`run_then_write_plots` is the child's target (lab/interactive.py ``InteractiveEntry.child_target``): the
queued run's child (lab/child.py ``child_main``) with an observer that keeps the last plot data, then, when the run
succeeded, the PNGs as ``dpd-desktop train-pa`` writes them after a run (gui/export.py, offscreen Qt in this
process). The window's process renders nothing: rendering the five panels took 80-160 ms of its GUI thread per
panel and the PNG encoding held the GIL of a pool thread (the event loop's longest stalls, 250-280 ms, came after
the PNGs: benchmarks/results/2026-12-01-window-startup-responsiveness.md), and the child already has the data.

Runs in the child process only (it imports Qt's widgets and pyqtgraph there, after the run).
"""
from __future__ import annotations

import os
import sys

from .. import timing
from ..runs.record import RunRecord
from ..runs import events as E


class _LastPlots:
    """The trainer's observer in the child: the last plot data (an epoch end's, then the finished run's)."""

    def __init__(self):
        self.plots = None
        self.best_epoch = None

    def __call__(self, ev) -> None:
        if isinstance(ev, E.EpochEnded) and ev.plots is not None:
            self.plots = ev.plots
        elif isinstance(ev, E.RunFinished):
            self.plots = ev.plots or self.plots
            self.best_epoch = ev.best_epoch


def run_then_write_plots(*args) -> None:
    """``child_main(*args)``, then the PNGs of a succeeded run into its ``plots/`` folder (a failure to write them
    is reported on stderr and leaves the run as it is)."""
    # imported here, not at the top: lab/child.py brings PyTorch and the trainer, which the window's process (that
    # imports this module for the reference to this function) never imports; in the child, whose forkserver
    # preloaded lab/child.py, it is a lookup (as lab/supervisor.py's own target does)
    from ..lab.child import child_main

    keep = _LastPlots()
    result = child_main(*args, observers=[keep])
    if result is None or getattr(result, "state", None) != "succeeded" or not result.run_dir:
        return
    timing.mark("child_png_start")
    try:
        write_plots(result.run_dir, keep.plots, keep.best_epoch)
        timing.mark("child_png_written")
    except Exception as exc:  # noqa: BLE001 - the run succeeded; its plots are a by-product
        print(f"dpd-desktop: the plots of {result.run_dir} were not written: {exc}", file=sys.stderr)


def write_plots(run_dir, plots, best_epoch=None) -> list:
    """The default PNGs of ``run_dir``: the learning curves of its history.csv (all epochs, also a resumed run's),
    the data panels of ``plots``; offscreen. Raises RecordError / OSError."""
    os.environ["QT_QPA_PLATFORM"] = "offscreen"  # this process shows nothing, whatever the window's platform
    from .export import write_run_plots  # Qt's widgets and pyqtgraph: in the child, after the run
    from .qt_app import ensure_app

    ensure_app(headless=True)
    rows = RunRecord.open(run_dir).history()
    return write_run_plots(run_dir, rows, plots, best_epoch=best_epoch)
