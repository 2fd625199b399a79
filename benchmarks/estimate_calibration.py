"""The window's run-time estimate (gui/estimate.py) against measured CPU runs on this machine.

    python benchmarks/estimate_calibration.py --fit --rounds 2     # every case in the window, twice; the fit
    python benchmarks/estimate_calibration.py --how trainer        # the trainer alone, no window
    python benchmarks/estimate_calibration.py --cases 0,3          # some cases only

``--how window`` (the default) runs each case as a user does: the main window (offscreen) with the case's dataset
loaded, the form set, Start, until the outcome banner; the run trains in the window's child process (the real
trainer). The window's preload and forkserver have finished before the first case, as for a user who opened the
window a while before. The run's time is Start → banner (what the estimate beside Start announces); each epoch's
seconds come from history.csv's ``TIME:`` differences. ``--how trainer`` times ``Trainer.run`` in this process.

Printed per case: the estimate of the whole run and of an epoch, the measured ones, their ratio, and the load
average (timings on a machine shared with other jobs are not those of the idle machine: say which). ``--fit`` solves
``epoch_s = a · work + b · eval`` (work = frames × frame length × the model factor, eval = val+test samples) over the
GRU cases and ``run_s - Σ epoch_s = c + d · samples`` (samples: the whole dataset, which the child reads again) over
all, by least squares: the constants :mod:`dpd_desktop.gui.estimate` uses; and each case's model factor as measured.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dpd_desktop.training.cpu_threads import prefer_passive_wait  # noqa: E402

prefer_passive_wait()  # as the window's child process and the command line do, before PyTorch loads

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gui_responsiveness import Busy  # noqa: E402

import numpy as np  # noqa: E402

from dpd_desktop.config import ExperimentConfig  # noqa: E402
from dpd_desktop.gui import estimate  # noqa: E402
from dpd_desktop.gui.history import epoch_seconds  # noqa: E402

DPA_200 = ROOT.parent / "shared" / "datasets" / "DPA_200MHz"

#: (name, dataset: "demo:<n_train>" or a folder, config overrides)
CASES = (
    ("demo GRU-16 F100 s8", "demo:61440", dict(hidden_size=16, frame_length=100, stride=8, epochs=2)),
    ("demo GRU-23 F200 s16", "demo:61440", dict(hidden_size=23, frame_length=200, stride=16, epochs=2)),
    ("demo GRU-8 F50 s4", "demo:61440", dict(hidden_size=8, frame_length=50, stride=4, epochs=2)),
    ("demo LSTM-16 F100 s8", "demo:61440", dict(backbone="lstm", hidden_size=16, frame_length=100, stride=8,
                                                 epochs=2)),
    ("small demo GRU-16 F50 s4", "demo:12000", dict(hidden_size=16, frame_length=50, stride=4, epochs=3)),
    ("demo, small val/test, GRU-16 F100 s8", "demo:61440:4096", dict(hidden_size=16, frame_length=100, stride=8,
                                                                     epochs=2)),
    ("DPA_200MHz GRU-23 F200 s8", str(DPA_200), dict(hidden_size=23, frame_length=200, stride=8, epochs=2)),
    ("eval: demo 8k, val/test 4k, GRU-16 s64", "demo:8000:4096", dict(hidden_size=16, frame_length=100, stride=64,
                                                                     epochs=3)),
    ("eval: demo 8k, val/test 32k, GRU-16 s64", "demo:8000:32768", dict(hidden_size=16, frame_length=100,
                                                                       stride=64, epochs=3)),
    ("demo DPD GRU-15 F100 s8", "demo:61440", dict(step="dpd", hidden_size=15, frame_length=100, stride=8,
                                                    epochs=2)),
    ("demo DGRU-16 F100 s8", "demo:61440", dict(backbone="dgru", hidden_size=16, frame_length=100, stride=8,
                                                 epochs=2)),
    ("demo TRes-GRU-16 F100 s8", "demo:61440", dict(backbone="tres_gru", hidden_size=16, frame_length=100,
                                                     stride=8, epochs=2)),
    ("demo RVTDCNN-16 F100 s8", "demo:61440", dict(backbone="rvtdcnn", hidden_size=16, frame_length=100, stride=8,
                                                    epochs=2)),
)
#: the PA a DPD case trains through (not timed)
PA_OF_DPD = dict(hidden_size=8, frame_length=50, stride=16, epochs=1)


def load(spec: str):
    from dpd_desktop.data import load_dataset, make_demo_dataset

    if spec.startswith("demo:"):
        n = [int(v) for v in spec.split(":")[1:]]
        kw = dict(n_train=n[0]) if len(n) == 1 else dict(n_train=n[0], n_val=n[1], n_test=n[1])
        return make_demo_dataset(**kw), "demo"
    return load_dataset(spec), spec


class WindowRunner:
    """One main window (offscreen) that runs the cases as a user does: dataset loaded, form set, Start."""

    def __init__(self, ws):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        from PySide6.QtCore import QEventLoop, QSettings, QTimer

        from dpd_desktop.gui.main_window import MainWindow
        from dpd_desktop.gui.qt_app import ensure_app

        self.app = ensure_app()
        self.QEventLoop, self.QTimer = QEventLoop, QTimer
        self.w = MainWindow(workspace=ws, settings=QSettings(tempfile.mktemp(suffix=".ini"),
                                                            QSettings.Format.IniFormat))
        self.w.write_plots_on_finish = True
        self.w.resize(1600, 1000)
        loop = QEventLoop()
        self.w.coreLoaded.connect(loop.quit)
        self.w.show()
        QTimer.singleShot(120_000, loop.quit)
        loop.exec()  # the preload (torch, the forkserver) done, as for a user who opened the window before
        time.sleep(2.0)

    def run(self, cfg, ds) -> tuple[float, str | None]:
        """(seconds from Start to the outcome banner, the run folder)."""
        w = self.w
        w.set_dataset(ds, "demo" if cfg.dataset == "demo" else cfg.dataset)
        w.set_form_from_config(cfg)
        loop = self.QEventLoop()
        marks = {}
        w.stateChanged.connect(lambda st: st in ("succeeded", "failed", "cancelled") and
                               (marks.setdefault("end", time.perf_counter()), loop.quit()))
        t = time.perf_counter()
        assert w.start_run(), w.banner.message
        self.QTimer.singleShot(900_000, loop.quit)
        loop.exec()
        w.stateChanged.disconnect()
        assert w.state == "succeeded", w.banner.message
        while w.runs.worker is not None:  # noqa: SLF001 - the child's PNGs and exit: the next Start needs it gone
            self.app.processEvents(self.QEventLoop.ProcessEventsFlag.AllEvents, 50)
        return marks["end"] - t, w.session.run_dir


def run_case(name, ds_spec, over, ws, pa_run: dict, window: WindowRunner | None = None):
    from dpd_desktop.runs.record import RunRecord
    from dpd_desktop.training.trainer import Trainer

    ds, ref = load(ds_spec)
    cfg_kw = dict(step="pa", dataset=ref, backbone="gru", device="cpu")
    cfg_kw.update(over)
    if cfg_kw["step"] == "dpd":
        key = ds_spec
        if key not in pa_run:
            pa_cfg = ExperimentConfig(step="pa", dataset=ref, backbone="gru", device="cpu", **PA_OF_DPD)
            pa_run[key] = Trainer(pa_cfg, dataset=ds, workspace=ws).run().run_id
        cfg_kw["pa_run"] = pa_run[key]
    cfg = ExperimentConfig(**cfg_kw)
    load0 = os.getloadavg()[0]
    if window is not None:
        wall, run_dir = window.run(cfg, ds)
        per_epoch = epoch_seconds(RunRecord.open(run_dir).history())
    else:
        res = Trainer(cfg, dataset=ds, workspace=ws).run()
        assert res.state == "succeeded", res.message
        wall, per_epoch = res.wall_s, epoch_seconds(res.history)
    n_train, n_eval = len(ds.train.x), len(ds.val.x) + len(ds.test.x)
    pa_h = PA_OF_DPD["hidden_size"] if cfg.step == "dpd" else None
    est = estimate.estimate_run(n_train, n_eval, backbone=cfg.backbone, hidden_size=cfg.hidden_size,
                                epochs=cfg.epochs, batch_size=cfg.batch_size, frame_length=cfg.frame_length,
                                stride=cfg.stride, step=cfg.step, pa_hidden_size=pa_h)
    factor = estimate.model_factor(cfg.backbone, cfg.hidden_size, cfg.step, pa_h)
    return dict(name=name, wall=wall, epochs=per_epoch, est=est, load=(load0 + os.getloadavg()[0]) / 2,
                work=est.frames * cfg.frame_length * factor, eval=n_eval, samples=n_train + n_eval,
                family=cfg.backbone, factor=factor)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=None, help="comma-separated case numbers (default: all)")
    ap.add_argument("--fit", action="store_true", help="print the least-squares constants of the model")
    ap.add_argument("--busy", type=int, default=0, help="other processes spinning on the CPU meanwhile "
                    "(benchmarks/bench_gui_responsiveness.py Busy): 1 = the machine shared with one busy process")
    ap.add_argument("--how", choices=("window", "trainer"), default="window",
                    help="run each case in the main window (Start → banner) or the trainer alone")
    ap.add_argument("--rounds", type=int, default=1, help="run every case this many times, round after round "
                    "(the machine's load changes: the fit and the table use each case's median)")
    a = ap.parse_args(argv)
    picked = [CASES[int(i)] for i in a.cases.split(",")] if a.cases else list(CASES)
    from dpd_desktop.runs.workspace import Workspace

    ws = Workspace(tempfile.mkdtemp(prefix="estimate-calibration-"))
    rows, pa_run = [], {}
    runs: dict[str, list[dict]] = {}
    window = WindowRunner(ws) if a.how == "window" else None
    busy = Busy(a.busy)
    print(f"runs {'in the window (Start → banner)' if window else 'of the trainer alone'}, {busy}, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}", flush=True)
    with busy:
        for k in range(a.rounds):
            for name, ds_spec, over in picked:
                r = run_case(name, ds_spec, over, ws, pa_run, window)
                runs.setdefault(name, []).append(r)
                ep = float(np.median(r["epochs"]))
                print(f"  round {k + 1}: {name:40s} load {r['load']:5.2f} run {r['wall']:6.1f} s, epoch "
                      f"{ep:6.2f} s", flush=True)
    print(f"estimate: {'with one busy process' if a.busy else 'idle machine'} (gui/estimate.py)")
    print(f"{'case (median over the rounds)':40s} {'load':>5s} {'est run':>8s} {'meas run':>8s} {'ratio':>6s} "
          f"{'est ep':>7s} {'meas ep':>8s} {'ratio':>6s}")
    for name, rs in runs.items():
        r = dict(rs[0])
        r["wall"] = float(np.median([x["wall"] for x in rs]))
        r["epochs"] = [float(np.median([e for x in rs for e in x["epochs"]]))] * len(rs[0]["epochs"])
        r["load"] = float(np.mean([x["load"] for x in rs]))
        rows.append(r)
        ep = float(np.median(r["epochs"]))
        # the estimate's end for this machine: idle, or with a busy process beside the run (--busy)
        est_run = r["est"].seconds_busy if a.busy else r["est"].seconds
        est_ep = r["est"].epoch_s_busy if a.busy else r["est"].epoch_s
        print(f"{name:40s} {r['load']:5.2f} {est_run:7.1f}s {r['wall']:7.1f}s {est_run / r['wall']:6.2f} "
              f"{est_ep:6.2f}s {ep:7.2f}s {est_ep / ep:6.2f}", flush=True)
    if a.fit and len(rows) >= 2:
        # the GRU cases fix the per-sample-step and evaluation costs; each other family's factor follows from them
        gru = [r for r in rows if r["family"] == "gru"]
        A = np.array([[r["work"], r["eval"]] for r in gru for _ in r["epochs"]])
        y = np.array([e for r in gru for e in r["epochs"]])
        (ka, kb), *_ = np.linalg.lstsq(A, y, rcond=None)
        B = np.array([[1.0, r["samples"]] for r in rows])
        z = np.array([r["wall"] - sum(r["epochs"]) for r in rows])
        (kc, kd), *_ = np.linalg.lstsq(B, z, rcond=None)
        print(f"fit over {len(gru)} GRU cases: {ka * 1e6:.2f} µs per GRU-23 sample-step, {kb * 1e6:.2f} µs per "
              f"val+test sample per epoch; over all {len(rows)}: outside the epochs {kc:.2f} s + {kd * 1e6:.2f} µs "
              "per sample of the dataset")
        for r in rows:
            model = (float(np.median(r["epochs"])) - kb * r["eval"]) / (ka * r["work"] / r["factor"])
            print(f"  {r['name']:40s} measured model factor {model:.2f} (the estimate's {r['factor']:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
