"""``dpd-desktop`` with its timing marks recorded (dpd_desktop/timing.py), and the trainer's diagnostic switches:

    python benchmarks/timed.py MARKS.jsonl [--children] [--eager] [--plain-loader] [--autograd-step] \\
        -- DPD-DESKTOP-ARGUMENTS...

Each mark appends one JSON line to MARKS.jsonl. ``--children``: the marks of queued runs' children too (this
module is preloaded in their forkserver, lab/supervisor.py, and installs the recorder there from :data:`MARKS_ENV`;
processes spawned otherwise, e.g. Ray workers, record nothing). The switches give every Trainer of the command
``fast_path=False`` (no CUDA graph), ``batched_loader=False`` (the per-frame DataLoader) or ``fused_step=False``
(the autograd step in the graph); they import the trainer (PyTorch) before the command starts.
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dpd_desktop import timing  # noqa: E402

#: where a preloaded copy of this module (a queued run's forkserver) records its process's marks
MARKS_ENV = "DPD_BENCH_MARKS"


def record_to(path, children: bool = False) -> None:
    """Record this process's marks to ``path`` (``children``: its queued runs' children's too)."""
    timing.install(timing.Recorder(path))
    if children:
        os.environ[MARKS_ENV] = str(path)
        from dpd_desktop.lab import supervisor

        supervisor._EXTRA_PRELOAD.append("timed")  # benchmarks/ is on the forkserver's path (the parent's)


def switch_trainers(**switches) -> None:
    """Every Trainer made from now on in this process gets ``switches`` (its diagnostic keyword arguments)."""
    from dpd_desktop.training.trainer import Trainer

    Trainer.__init__ = functools.partialmethod(Trainer.__init__, **switches)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("marks")
    ap.add_argument("--children", action="store_true")
    ap.add_argument("--eager", action="store_true")
    ap.add_argument("--plain-loader", action="store_true")
    ap.add_argument("--autograd-step", action="store_true")
    argv = sys.argv[1:] if argv is None else list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    a, command = ap.parse_args(argv[:cut]), argv[cut + 1:]
    record_to(a.marks, a.children)
    switches = {k: False for k, on in (("fast_path", a.eager), ("batched_loader", a.plain_loader),
                                       ("fused_step", a.autograd_step)) if on}
    if switches:
        switch_trainers(**switches)
    sys.argv = ["dpd-desktop", *command]
    from dpd_desktop.cli import run

    run()


if os.environ.get(MARKS_ENV) and __name__ != "__main__":  # preloaded in a queued run's forkserver
    timing.install(timing.Recorder(os.environ[MARKS_ENV]))

if __name__ == "__main__":
    main()
