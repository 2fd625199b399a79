"""Process start → main window shown and painted, as a user launches it (``dpd-desktop``), median of N launches.

    python benchmarks/bench_window_startup.py                  # this checkout, 5 launches
    python benchmarks/bench_window_startup.py --src OTHER_TREE  # another source tree (e.g. the commit before)

Each launch is a fresh process running the console script's code path (``dpd_desktop.cli.entry.run()`` with no
sub-command) offscreen, with a temporary workspace and settings folder. The clock starts in this process right
before the child is spawned (so the interpreter's own start is included) and stops at the main window's first
paint event; the child then waits for the window's PyTorch preload (gui/preload.py: torch, the trainer, Run DPD's
module) to end and reports when it did (without a preload: torch was imported before the paint). "Cold-ish": the
files are in the page cache after the first launch; the first launch is printed separately and not counted.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Runs in the child. PySide6 is imported first here only to install the paint probe; the window's own import order
# (torch after Qt on Linux) is the same as without the probe, since dpd_desktop.gui.app imports PySide6 first too.
PROBE = r"""
import json, os, sys, time
from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication, QMainWindow

def report(**kw):
    print("PROBE " + json.dumps(kw), flush=True)

class Probe(QObject):
    painted = None
    def eventFilter(self, obj, ev):
        if self.painted is None and ev.type() == QEvent.Type.Paint and isinstance(obj.window(), QMainWindow) \
                and obj.window().isVisible():
            self.painted = time.time()
            report(painted=self.painted, torch_loaded_at_paint="torch" in sys.modules)
            QTimer.singleShot(0, self.wait_torch)
        return False
    def wait_torch(self):
        deadline = time.time() + 60
        def poll():
            pre = sys.modules.get("dpd_desktop.gui.preload")
            job = pre.preload_job() if pre is not None else None
            if (job is not None and job.is_done()) or (pre is None and "torch" in sys.modules):
                report(torch_ready=time.time())
                os._exit(0)
            if time.time() > deadline:
                report(torch_ready=None)
                os._exit(0)
            QTimer.singleShot(20, poll)
        poll()

_exec = QApplication.exec
def exec_with_probe(self=None):
    app = QApplication.instance()
    probe = Probe(app)
    app.installEventFilter(probe)
    app._probe = probe
    return _exec()
QApplication.exec = exec_with_probe

sys.argv = ["dpd-desktop", "--workspace", os.environ["BENCH_WS"]]
from dpd_desktop.cli.entry import run
run()
"""


def launch(src: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-start-") as tmp:
        env = dict(os.environ, PYTHONPATH=str(src), QT_QPA_PLATFORM="offscreen", BENCH_WS=str(Path(tmp) / "ws"),
                   XDG_CONFIG_HOME=str(Path(tmp) / "config"), XDG_DATA_HOME=str(Path(tmp) / "data"))
        t0 = time.time()
        out = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=tmp, capture_output=True, text=True,
                             timeout=120)
    marks: dict = {}
    for line in out.stdout.splitlines():
        if line.startswith("PROBE "):
            marks.update(json.loads(line[6:]))
    if "painted" not in marks:
        raise RuntimeError(f"no paint reported (rc {out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
    ready = marks.get("torch_ready")
    return {"painted_s": marks["painted"] - t0, "torch_at_paint": marks["torch_loaded_at_paint"],
            "torch_ready_s": None if ready is None else ready - t0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", default=str(ROOT), help="source tree whose dpd_desktop is launched (default: this one)")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args(argv)
    src = Path(a.src).resolve()
    print(f"source {src}; {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}")
    rows = []
    for i in range(a.runs + 1):
        r = launch(src)
        tr = "—" if r["torch_ready_s"] is None else f"{r['torch_ready_s']:.2f} s"
        print(f"  launch {i}{' (first, not counted)' if i == 0 else ''}: window painted {r['painted_s']:.2f} s, "
              f"torch imported before paint: {r['torch_at_paint']}, torch ready {tr}")
        if i:
            rows.append(r)
    med = statistics.median(r["painted_s"] for r in rows)
    ready = [r["torch_ready_s"] for r in rows if r["torch_ready_s"] is not None]
    print(f"median of {len(rows)}: window painted {med:.2f} s after process start"
          + (f"; torch ready {statistics.median(ready):.2f} s" if ready else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
