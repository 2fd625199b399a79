"""GUI overhead: the same PA run driven from the window (default per-epoch plots) vs headless.

    QT_QPA_PLATFORM=offscreen python benchmarks/gui_overhead.py --dataset demo --epochs 3 --repeats 2
    # the headline PA run on the GPU machine (DPA_160MHz, GRU-23, frame 200, stride 1, 4 epochs):
    python3 benchmarks/gui_overhead.py --dataset .ref/datasets/DPA_160MHz --hidden 23 --frame 200 --stride 1 \
        --epochs 4 --device cuda --repeats 2

Runs headless and GUI alternately, each in a fresh process (so that neither inherits the other's thread pools), with
PyTorch imported and the data loaded before timing, and prints the median wall times (run start → finished), the
ratio GUI / headless, and per run the trainer's epoch starts (timing marks, benchmarks/timed.py). Both modes end with the
run's plots written as PNGs (the command line writes them after the run, the window when the run finishes).

The window trains every run in a child process through the supervisor (gui/worker.py ``RunWorker``), a child of
the forkserver, which the window starts
behind its first paint; here it is started and ready before timing (as it is by the time a user presses Start),
so the GUI time holds what the child path adds: the child's start, its reload of the dataset (the headless run has
it loaded before timing), the events' decoding.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="demo")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=16)
    ap.add_argument("--frame", type=int, default=100)
    ap.add_argument("--stride", type=int, default=4)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--screenshot", default=None, help="GUI mode: save the window after the run to this PNG")
    ap.add_argument("--mode", default=None, choices=("gui", "headless"), help=argparse.SUPPRESS)
    ap.add_argument("--marks", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.mode is None:
        heads, guis = [], []
        for i in range(a.repeats):
            for mode, acc in (("headless", heads), ("gui", guis)):
                timing = Path(tempfile.mkdtemp(prefix="gui-overhead-t-")) / "marks.jsonl"
                r = subprocess.run([sys.executable, __file__, *sys.argv[1:], "--mode", mode, "--marks", str(timing)],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    sys.exit(f"{mode} run failed:\n{r.stderr[-3000:]}")
                acc.append(float(r.stdout.strip().splitlines()[-1]))
                status = [ln for ln in r.stderr.splitlines() if ln.startswith("status bar:")]
                if status:
                    print(f"  GUI {status[-1]}", flush=True)
                print(f"  {mode}: {marks_summary(timing)}", flush=True)
            print(f"repeat {i}: headless {heads[-1]:.2f} s, GUI {guis[-1]:.2f} s", flush=True)
        h, g = statistics.median(heads), statistics.median(guis)
        print(f"median headless {h:.2f} s, GUI {g:.2f} s, GUI / headless = {g / h:.3f}")
        return
    # Qt and our package only in the child modes (the parent only starts them): after QT_QPA_PLATFORM is set
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from timed import record_to  # benchmarks/timed.py

    record_to(a.marks, children=True)  # the window's child runs record too
    from PySide6.QtCore import QEventLoop, QTimer

    from dpd_desktop.config import ExperimentConfig
    from dpd_desktop.gui.app import ensure_app
    from dpd_desktop.gui.main_window import MainWindow
    from dpd_desktop.runs.workspace import Workspace
    from dpd_desktop.training.trainer import Trainer, load_dataset_for

    import torch  # noqa: F401 - imported before timing in both modes (the window imports it at start-up anyway)

    ds = load_dataset_for(a.dataset)
    cfg = ExperimentConfig(step="pa", dataset=a.dataset, hidden_size=a.hidden, epochs=a.epochs,
                           frame_length=a.frame, stride=a.stride, device=a.device)
    tmp = Path(tempfile.mkdtemp(prefix="gui-overhead-"))
    if a.mode == "headless":
        # as `dpd-desktop train-pa` runs it: trainer on the main thread, plot data recorded, PNGs written at the end
        # (the window writes the same PNGs when a run finishes)
        from dpd_desktop.cli.train import PlotRecorder, write_plots

        t = time.perf_counter()
        rec = PlotRecorder()
        res = Trainer(cfg, dataset=ds, workspace=Workspace(tmp), observers=[rec]).run()
        assert res.state == "succeeded", res.message
        from dpd_desktop import timing

        timing.mark("headless_png_start")
        write_plots(res.run_dir, rec)
        timing.mark("headless_png_written")
        print(time.perf_counter() - t)
        return
    ensure_app([])
    win = MainWindow(workspace=Workspace(tmp))
    warm_forkserver()
    win.resize(1600, 1000)
    win.show()
    win.set_dataset(ds)
    loop = QEventLoop()
    pending = {"done", "plots"}  # the run has ended and the window has written its PNGs (a deferred call)

    def arrived(what):
        pending.discard(what)
        if not pending:
            loop.quit()

    win.plotsWritten.connect(lambda *_: arrived("plots"))  # rendered on the GUI thread, written on a pool thread
    t = time.perf_counter()
    assert win.start_run(cfg)
    win.runEnded.connect(lambda *_: arrived("done"))
    QTimer.singleShot(3_600_000, loop.quit)
    loop.exec()
    el = time.perf_counter() - t
    print(f"status bar: {win.fastpath_label.text()} | {win.device_label.text()}", file=sys.stderr)
    if a.screenshot:
        from dpd_desktop.gui.screenshot import render_main_window

        render_main_window(a.screenshot, window=win)
    print(el)
    win.close()


def warm_forkserver() -> None:
    """Start the children's forkserver and wait until it forks (its imports done), as the window's preload has
    done by the time a user presses Start (gui/preload.py)."""
    from dpd_desktop.lab.supervisor import process_context, start_forkserver

    if start_forkserver():
        p = process_context().Process(target=time.sleep, args=(0,))
        p.start()
        p.join()


def marks_summary(path) -> str:
    """Epoch starts and the end of the run, in seconds from the run's start (the trainer's timing marks)."""
    if not Path(path).exists():
        return "no timing marks"
    marks = [json.loads(line) for line in open(path)]
    t0 = next(m["t"] for m in marks if m["mark"] == "run_start")
    starts = [round(m["t"] - t0, 3) for m in marks if m["mark"] == "first_batch"]
    end = next((round(m["t"] - t0, 3) for m in marks if m["mark"] == "run_end"), None)
    steps = [round(b - a, 3) for a, b in zip(starts, starts[1:])]
    after = " ".join(f"{m['mark']} {m['t'] - t0:.3f}" for m in marks
                     if m["mark"].startswith(("gui_", "headless_png", "child_png")))
    return f"epoch starts {starts} (intervals {steps}), run end {end}" + (f"; after the run: {after}" if after else "")


if __name__ == "__main__":
    main()
