"""GUI overhead: the same PA run driven from the window (QThread worker, default per-epoch plots) vs headless.

    QT_QPA_PLATFORM=offscreen python benchmarks/gui_overhead.py --dataset demo --epochs 3 --repeats 2
    # the headline PA run on the GPU machine (DPA_160MHz, GRU-23, frame 200, stride 1, 4 epochs):
    python3 benchmarks/gui_overhead.py --dataset .ref/datasets/DPA_160MHz --hidden 23 --frame 200 --stride 1 \
        --epochs 4 --device cuda --repeats 2

Runs headless and GUI alternately, each in a fresh process (so that neither inherits the other's thread pools), with
the data loaded before timing, and prints the median wall times (run start → finished) and the ratio GUI / headless.
"""
import argparse
import os
import statistics
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
    a = ap.parse_args()
    if a.mode is None:
        import subprocess

        heads, guis = [], []
        for i in range(a.repeats):
            for mode, acc in (("headless", heads), ("gui", guis)):
                r = subprocess.run([sys.executable, __file__, *sys.argv[1:], "--mode", mode],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    sys.exit(f"{mode} run failed:\n{r.stderr[-3000:]}")
                acc.append(float(r.stdout.strip().splitlines()[-1]))
                status = [ln for ln in r.stderr.splitlines() if ln.startswith("status bar:")]
                if status:
                    print(f"  GUI {status[-1]}", flush=True)
            print(f"repeat {i}: headless {heads[-1]:.2f} s, GUI {guis[-1]:.2f} s", flush=True)
        h, g = statistics.median(heads), statistics.median(guis)
        print(f"median headless {h:.2f} s, GUI {g:.2f} s, GUI / headless = {g / h:.3f}")
        return
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QEventLoop, QTimer

    from dpd_desktop.config import ExperimentConfig
    from dpd_desktop.gui.app import ensure_app
    from dpd_desktop.gui.main_window import MainWindow
    from dpd_desktop.runs.workspace import Workspace
    from dpd_desktop.training.trainer import Trainer, load_dataset_for

    ds = load_dataset_for(a.dataset)
    cfg = ExperimentConfig(step="pa", dataset=a.dataset, hidden_size=a.hidden, epochs=a.epochs,
                           frame_length=a.frame, stride=a.stride, device=a.device)
    tmp = Path(tempfile.mkdtemp(prefix="gui-overhead-"))
    if a.mode == "headless":
        t = time.perf_counter()
        res = Trainer(cfg, dataset=ds, workspace=Workspace(tmp)).run()
        assert res.state == "succeeded", res.message
        print(time.perf_counter() - t)
        return
    ensure_app([])
    win = MainWindow(workspace=Workspace(tmp))
    win.resize(1600, 1000)
    win.show()
    win.set_dataset(ds)
    loop = QEventLoop()
    t = time.perf_counter()
    assert win.start_run(cfg)
    win._worker.done.connect(loop.quit)
    QTimer.singleShot(3_600_000, loop.quit)
    loop.exec()
    el = time.perf_counter() - t
    print(f"status bar: {win.fastpath_label.text()} | {win.device_label.text()}", file=sys.stderr)
    if a.screenshot:
        from dpd_desktop.gui.screenshot import render_main_window

        render_main_window(a.screenshot, window=win)
    print(el)
    win.close()


if __name__ == "__main__":
    main()
