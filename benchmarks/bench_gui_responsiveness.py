"""The window's responsiveness on this machine (offscreen): event-loop ticks during a CPU training run, GUI-thread
work per epoch end on DPA_160MHz plot data, the run's end, and the cost and memory of 10,000 epochs in the panels.

    python benchmarks/bench_gui_responsiveness.py                       # all four parts
    python benchmarks/bench_gui_responsiveness.py --part ticks --rounds 5     # each round a fresh process, medians
    python benchmarks/bench_gui_responsiveness.py --part ticks --rounds 4 --tree /tmp/old --tree .   # A/B, interleaved
    python benchmarks/bench_gui_responsiveness.py --part epoch-end --dataset ../shared/datasets/DPA_160MHz
    python benchmarks/bench_gui_responsiveness.py --part run-end
    python benchmarks/bench_gui_responsiveness.py --part many-epochs

Targets (issues 11 and 28): 95th-percentile tick under 50 ms and no stall over 200 ms during a run, epoch ends,
previews and the run's end included; a median under 50 ms of GUI-thread work per epoch end on DPA_160MHz plot data;
10,000 epochs grow the process by under 50 MB and the cost of an epoch end stays flat (the last 1,000 within 10 % of
the first 1,000). Issue 28: met "while another process is busy": ``--busy N`` (default 1) starts N processes that
spin on the CPU for the whole measurement of each part (``--busy 0``: none), and every figure is printed with that
count and the load average. Wall times are printed with the GUI thread's CPU time (``time.thread_time``): their
difference is the time the thread waited for a core (or for the GIL).

ticks: a 10 ms QTimer (Qt.PreciseTimer) records the time between its timeouts from the window's first paint
(the window's preload runs then) through a real CPU training run on the demo data (loaded in the background, Live
batch preview on; the run trains in a child process of the supervisor, gui/worker.py), its PNGs written, and the
run reopened from the runs browser (measured until ``--settle-ms`` after it is shown). Phases: preload, dataset load,
run (Start → PNGs), run end, reopen, whole session; each with the 95th percentile and the longest interval, and the
five longest stalls, each with the GUI thread's and the process's CPU time within it, the window's handlers and the
garbage collector's passes that ran in it. A round still going after ``--deadline-s`` ends (reported incomplete),
a modal dialog it opened closed first. ``--rounds N``: N rounds, each in a fresh process (the preload and the forkserver start anew), then the median
and the range of each phase's longest stall; with ``--tree DIR`` (repeatable) the rounds alternate between source
trees (each with this script under ``benchmarks/``), e.g. a ``git archive`` of the commit before a change.

epoch-end: each EpochEnded decoded from the bytes the child sends (new arrays every epoch, the prediction of each
of four epochs another), then drawn and painted; also the size and decode time of that event (the decoding runs on
the window's supervisor thread, holding the GIL).

run-end: a run's last EpochEnded, its RunFinished (final plots) and the worker's end, emitted from another thread as
the run's worker does (queued to the GUI thread), ``--repeats`` times; each the longest event-loop pass (a 10 ms
ticker's longest interval) and the GUI-thread CPU from the first event to ``runEnded``.

many-epochs: the first and the last 1,000 of ``--n-epochs`` epoch ends timed, each with its repaint.
"""
from __future__ import annotations

import argparse
import functools
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
from PySide6.QtCore import QEventLoop, QSettings, Qt, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from dpd_desktop.gui.qt_app import ensure_app  # noqa: E402
from dpd_desktop.gui.main_window import MainWindow  # noqa: E402

TICK_MS = 10


#: A spinning process that ends when its parent is gone (a benchmark killed before its ``with`` block ended).
BUSY_CODE = ("import os, time\nparent = os.getppid()\nwhile os.getppid() == parent:\n    for _ in range(100_000):\n"
             "        time.perf_counter()\n")


class Busy:
    """``n`` other processes spinning on the CPU (a Python loop each) while the ``with`` block runs: the machine
    shared with "another process that is busy". They end with the block (terminated, then killed)."""

    def __init__(self, n: int):
        self.n = int(n)
        self.procs = []

    def __enter__(self):
        import subprocess

        self.procs = [subprocess.Popen([sys.executable, "-c", BUSY_CODE]) for _ in range(self.n)]
        time.sleep(0.3 if self.n else 0.0)  # let them reach the loop
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(5)
            except Exception:  # noqa: BLE001 - a process that ignores SIGTERM
                p.kill()
                p.wait(5)
        self.procs = []
        return False

    def __str__(self) -> str:
        return f"{self.n} busy process{'es' if self.n != 1 else ''} beside it"


def rss_mb() -> float:
    """Resident set size of this process [MB] (Linux /proc/self/statm)."""
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


EVENTS: list[tuple[float, float, str, float]] = []  # (start, seconds in the handler, what, its CPU s), GUI thread
GC_PASSES: list[tuple[float, float, int]] = []  # the ticks part's garbage collector passes (GcWatch.passes)


def _timed(cls, name, what):
    """Wrap the window part's handler ``cls.name`` (GUI thread); ``what``: a text, or ``what(self, first
    argument)`` → text."""
    fn = getattr(cls, name, None)
    if fn is None:  # a tree without this part (``--tree``)
        return

    @functools.wraps(fn)  # keeps a Qt slot a slot: a signal from a worker's thread stays queued to the GUI thread
    def wrapper(self, *args):
        t, c = time.perf_counter(), time.thread_time()
        out = fn(self, *args)
        ev = args[0] if args else None
        EVENTS.append((t, time.perf_counter() - t, what(self, ev) if callable(what) else what,
                       time.thread_time() - c))
        return out

    setattr(cls, name, wrapper)


def instrument() -> None:
    from dpd_desktop.gui.dataset_control import DatasetController
    from dpd_desktop.gui.main_window import MainWindow as W
    from dpd_desktop.gui.panels.base import PlotPanel
    from dpd_desktop.gui.plot_area import PlotArea
    from dpd_desktop.gui.run_control import RunController
    from dpd_desktop.gui.runs_browser import RunsBrowser

    _timed(RunController, "launch", "worker launched")
    _timed(RunController, "_on_run_started", "run started")
    _timed(RunController, "_on_epoch_ended", lambda w, ev: f"epoch {ev.epoch} end")
    _timed(RunController, "_flush_progress", "progress")
    _timed(RunController, "_on_preview_ready", lambda w, ev: f"preview e{ev.epoch} b{ev.batch}")
    _timed(RunController, "_on_run_finished", "run finished")
    _timed(RunController, "_on_worker_done", "worker done")
    _timed(RunController, "write_run_plots", "PNG process started")
    _timed(PlotArea, "flush", "plots drawn")
    _timed(PlotArea, "_draw_panel", lambda w, panel: f"{panel.title} data set")
    _timed(PlotArea, "finish_drawing", "final drawing")
    _timed(DatasetController, "_on_loaded", "dataset shown")
    _timed(W, "_on_core_loaded", "core loaded")
    _timed(RunsBrowser, "_show_replay", "reopened run shown")
    _timed(PlotPanel, "paintEvent", lambda panel, ev: f"{panel.title} painted")


class GcWatch:
    """The cyclic garbage collector's passes in this process (``gc.callbacks``): (start, seconds, generation) each.
    A pass holds the GIL: every thread of the window waits for it."""

    def __init__(self):
        self.passes: list[tuple[float, float, int]] = []
        self._t = 0.0

    def _cb(self, phase, info):
        if phase == "start":
            self._t = time.perf_counter()
        else:
            self.passes.append((self._t, time.perf_counter() - self._t, info["generation"]))

    def __enter__(self):
        import gc

        gc.callbacks.append(self._cb)
        return self

    def __exit__(self, *exc):
        import gc

        gc.callbacks.remove(self._cb)
        return False

    def summary(self, t0: float) -> str:
        import gc

        by = {g: [d for _, d, gg in self.passes if gg == g] for g in (0, 1, 2)}
        worst = max(self.passes, key=lambda p: p[1], default=None)
        return ("garbage collector: " + ", ".join(f"generation {g}: {len(v)} passes, {sum(v) * 1e3:.0f} ms in all"
                                                  for g, v in by.items())
                + (f"; the longest {worst[1] * 1e3:.0f} ms (generation {worst[2]}, at {worst[0] - t0:.2f} s)"
                   if worst else "") + f"; {len(gc.get_objects()):,} objects tracked, {gc.get_freeze_count():,} frozen")


class GilWatch:
    """A thread that sleeps 5 ms at a time; when it wakes more than ``threshold_s`` late, the GIL was held (by C code
    that does not release it) or the machine was busy: it records the innermost dpd_desktop (else any) frame of the
    other threads at that moment, i.e. who held it."""

    def __init__(self, threshold_s: float = 0.15):
        import threading

        self.threshold_s = threshold_s
        self.late: list[tuple[float, float, list[str]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gil-watch", daemon=True)

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join(2)

    def _run(self):
        import threading
        import traceback

        me = threading.get_ident()
        names = {}
        while not self._stop.is_set():
            t = time.perf_counter()
            time.sleep(0.005)
            late = time.perf_counter() - t - 0.005
            if late > self.threshold_s:
                names = {th.ident: th.name for th in threading.enumerate()}
                where = []
                for ident, frame in sys._current_frames().items():
                    if ident == me:
                        continue
                    stack = traceback.extract_stack(frame)
                    own = [f for f in stack if "dpd_desktop" in f.filename] or stack
                    f = own[-1]
                    where.append(f"{names.get(ident, ident)}: {Path(f.filename).name}:{f.lineno} {f.name}")
                self.late.append((t, late, where))


def summarize(name: str, ticks: list[tuple[float, float, float]], events, t_from: float, t_to: float) -> dict:
    """``ticks``: (wall, GUI-thread CPU, process CPU) [s] at each timeout. Each stall is printed with the GUI
    thread's and the whole process's CPU time within it: a stall whose GUI-thread CPU is far below its length was
    spent waiting (for the GIL another thread of the process held, or for a core the other processes had).
    Returns {"p95", "max" [ms], "worst": the longest stall's last window event} ({} with too few ticks)."""
    before = [t for t in ticks if t[0] < t_from][-1:]  # the interval in which the phase began is the phase's
    tk = np.array(before + [t for t in ticks if t_from <= t[0] <= t_to]).reshape(-1, 3)
    ts = tk[:, 0]
    iv = np.diff(ts) * 1e3
    if len(iv) < 2:
        print(f"  {name}: too few ticks")
        return {}
    gui_cpu, proc_cpu = np.diff(tk[:, 1]) * 1e3, np.diff(tk[:, 2]) * 1e3
    p95 = float(np.percentile(iv, 95))
    span = ts[-1] - ts[0]
    print(f"  {name}: {len(iv)} ticks over {t_to - t_from:.1f} s; interval p50 {np.median(iv):.1f} ms, "
          f"p95 {p95:.1f} ms, max {iv.max():.0f} ms  (targets: p95 < 50, max < 200); GUI thread busy "
          f"{gui_cpu.sum() / 1e3 / span:.0%} of the time, the process {proc_cpu.sum() / 1e3 / span:.0%} of a core")
    worst = np.argsort(iv)[::-1][:5]
    out = {"p95": round(p95, 1), "max": round(float(iv.max()), 1), "worst": ""}
    for i in sorted(worst, key=lambda k: -iv[k]):
        start = ts[i]
        before = [e for e in events if e[0] <= ts[i + 1]]
        last = before[-1] if before else None
        what = f"{last[2]} ({last[1] * 1e3:.0f} ms in its slot, {(start - last[0]) * 1e3:+.0f} ms)" if last else "—"
        print(f"      stall {iv[i]:6.0f} ms at {start - t_from:6.2f} s (CPU: GUI thread {gui_cpu[i]:4.0f} ms, process "
              f"{proc_cpu[i]:4.0f} ms); last window event: {what}")
        inside = sorted((e for e in events if start <= e[0] <= ts[i + 1]), key=lambda e: -e[1])
        out["worst"] = out["worst"] or (inside[0][2] if inside else f"(waiting; last: {last[2] if last else '—'})")
        gcs = [g for g in GC_PASSES if start <= g[0] <= ts[i + 1]]
        if gcs:
            print(f"        garbage collection within it: {len(gcs)} passes, {sum(g[1] for g in gcs) * 1e3:.0f} ms "
                  f"(generations {sorted({g[2] for g in gcs})})")
        if inside:
            print("        within it: " + ", ".join(f"{e[2]} {e[1] * 1e3:.0f} ms (CPU {e[3] * 1e3:.0f})"
                                                   for e in inside[:4])
                  + (f" and {len(inside) - 4} more" if len(inside) > 4 else ""))
    return out


def part_ticks(a) -> None:
    import gc
    import json

    from dpd_desktop.config import ExperimentConfig
    from dpd_desktop.runs.workspace import Workspace

    ensure_app()
    tmp = tempfile.mkdtemp(prefix="bench-gui-")
    instrument()
    w = MainWindow(workspace=Workspace(Path(tmp) / "ws"), settings=QSettings(str(Path(tmp) / "w.ini"),
                                                                             QSettings.Format.IniFormat))
    ticks: list[tuple[float, float, float]] = []
    timer = QTimer(w)
    timer.setTimerType(Qt.TimerType.PreciseTimer)
    timer.setInterval(TICK_MS)
    timer.timeout.connect(lambda: ticks.append((time.perf_counter(), time.thread_time(), time.process_time())))
    marks: dict[str, float] = {}
    loop = QEventLoop()
    w.firstPainted.connect(lambda: (marks.setdefault("painted", time.perf_counter()), timer.start()))
    w.coreLoaded.connect(lambda: marks.setdefault("core loaded", time.perf_counter()))
    w.datasetLoaded.connect(lambda d: marks.setdefault("dataset loaded", time.perf_counter()))
    ended_state: list[str] = []

    def run_ended(state):
        marks.setdefault("run ended", time.perf_counter())
        ended_state.append(state)
        if state != "succeeded":  # no PNGs follow: the round ends here (and says so below)
            loop.quit()

    def reopen(result):
        """The PNGs are written: reopen the run as the runs browser's Open does (its replay loaded on the pool,
        drawn on the GUI thread), and measure until ``--settle-ms`` after it is shown."""
        from types import SimpleNamespace

        marks.setdefault("PNGs written", time.perf_counter())
        run_dir = w.session.run_dir
        w.runs_browser.open_run(SimpleNamespace(folder=Path(run_dir), run_id=Path(run_dir).name))

    w.runEnded.connect(run_ended)
    w.plotsWritten.connect(reopen)
    w.runs_browser.runOpened.connect(lambda r: (marks.setdefault("reopened", time.perf_counter()),
                                                QTimer.singleShot(a.settle_ms, loop.quit)))
    w.runs_browser.openFailed.connect(lambda text: (print(f"reopen failed: {text}"), loop.quit()))
    w.resize(1600, 1000)
    watch = GilWatch()
    watch.start()
    gcw = GcWatch().__enter__()
    gcw.passes = GC_PASSES
    w.show()

    def start():
        marks["start"] = time.perf_counter()
        cfg = ExperimentConfig(step="pa", dataset="demo", epochs=a.epochs, hidden_size=16, frame_length=100,
                               stride=a.stride, device="cpu", preview_every=a.preview_every)
        w.set_form_from_config(cfg)
        w.preview_check.setChecked(True)
        w.start_run(cfg)  # queued: the demo data loads in the background first

    # the run starts after the paint, while the preload may still be going (the worst case)
    w.firstPainted.connect(lambda: QTimer.singleShot(a.start_after_ms, start))
    def give_up():
        """A round still going at ``--deadline-s`` ends, reported as incomplete; a modal dialog (e.g. a prompt the
        run asked) runs its own event loop, which is left first."""
        print(f"  ENDED EARLY (deadline {a.deadline_s:.0f} s or Ctrl+C); modal dialog open: "
              f"{QApplication.activeModalWidget()}", flush=True)
        while (modal := QApplication.activeModalWidget()) is not None:
            modal.done(0)
            modal.hide()
        loop.quit()

    QTimer.singleShot(int(a.deadline_s * 1e3), give_up)
    # Ctrl+C: Qt's loop would swallow the KeyboardInterrupt (raised inside a slot); leave it, then raise it here, so
    # that the busy processes end (Busy.__exit__)
    interrupted: list[int] = []
    old_handler = signal.signal(signal.SIGINT, lambda *_: (interrupted.append(1), give_up()))
    try:
        loop.exec()
    finally:
        signal.signal(signal.SIGINT, old_handler)
    if interrupted:  # the run stopped (its child ends) and the window closed first
        watch.stop()
        w.stop_run()
        t = time.perf_counter()
        while w.runs.worker is not None and time.perf_counter() - t < 15:
            QApplication.processEvents(QEventLoop.ProcessEventsFlag.WaitForMoreEvents, 50)
        w.close()
        raise KeyboardInterrupt
    timer.stop()
    watch.stop()
    t_paint = marks["painted"]
    load = os.getloadavg()[0]
    print(f"ticks ({TICK_MS} ms QTimer), demo data, GRU-16, {a.epochs} epochs, stride {a.stride}, preview every "
          f"{a.preview_every} batches, CPU, training in a child process; {Busy(a.busy)}; load average {load:.2f}")
    for k, v in sorted(marks.items(), key=lambda kv: kv[1]):
        print(f"    {k:14s} {v - t_paint:7.2f} s after the first paint")
    ev = EVENTS
    res = {"load": round(load, 2)}
    res["preload"] = summarize("preload (paint → core loaded)", ticks, ev, t_paint, marks.get("core loaded", t_paint))
    if "reopened" not in marks:
        print(f"  INCOMPLETE: the round ended before the run was reopened (run state {ended_state or 'none'})")
    res["dataset"] = summarize("dataset load (Start → dataset loaded)", ticks, ev, marks["start"],
                               marks.get("dataset loaded", marks["start"]))
    res["run"] = summarize("run (Start → PNGs written)", ticks, ev, marks["start"],
                           marks.get("PNGs written", ticks[-1][0]))
    res["end"] = summarize("run end (run ended → PNGs written)", ticks, ev, marks.get("run ended", ticks[-1][0]) - 0.5,
                           marks.get("PNGs written", ticks[-1][0]))
    res["reopen"] = summarize("reopen (PNGs written → settled)", ticks, ev, marks.get("PNGs written", ticks[-1][0]),
                              ticks[-1][0])
    res["whole"] = summarize("whole session", ticks, ev, t_paint, ticks[-1][0])
    by = {}
    for _, dt, what, cpu in ev:
        key = ("epoch end" if what.endswith(" end") else "preview" if what.startswith("preview") else
               "panel data set" if what.endswith("data set") else "a panel painted" if what.endswith(" painted")
               else what)
        by.setdefault(key, []).append((dt * 1e3, cpu * 1e3))
    for k, v in by.items():
        wall, cpu = [d for d, _ in v], [c for _, c in v]
        print(f"    {k:20s} n={len(v):4d}  median {statistics.median(wall):6.1f} ms  max {max(wall):6.1f} ms  "
              f"(GUI-thread CPU median {statistics.median(cpu):5.1f} ms, max {max(cpu):5.1f} ms)")
    gcw.__exit__()
    res["gen2"] = sum(1 for p in GC_PASSES if p[2] == 2)
    res["frozen"] = gc.get_freeze_count()
    res["torch"] = "torch" in sys.modules
    print(f"  {gcw.summary(t_paint)}; torch imported in this process: {res['torch']}")
    print(f"  a 5 ms sleeper thread woke over {watch.threshold_s * 1e3:.0f} ms late {len(watch.late)} times; the other "
          "threads were then at (innermost dpd_desktop frame):")
    for t, late, where in sorted(watch.late, key=lambda r: -r[1])[:8]:
        print(f"    {late * 1e3:5.0f} ms at {t - t_paint:6.2f} s: " + " | ".join(where))
    print("ROUND " + json.dumps(res))
    w.close()


def ticks_rounds(a) -> None:
    """``--rounds N`` / ``--tree``: each ticks round in a fresh process (the preload and the forkserver start anew),
    the trees alternating, each round printed with the load average; then per tree the median and the range of the
    longest stall of each phase."""
    import json
    import subprocess

    trees = [Path(t).resolve() for t in (a.tree or [str(ROOT)])]
    args = ["--part", "ticks", "--rounds", "1", "--epochs", str(a.epochs), "--stride", str(a.stride),
            "--preview-every", str(a.preview_every), "--start-after-ms", str(a.start_after_ms), "--busy", str(a.busy),
            "--settle-ms", str(a.settle_ms), "--deadline-s", str(a.deadline_s)]
    results: dict[Path, list[dict]] = {t: [] for t in trees}
    for r in range(a.rounds):
        for tree in trees:
            print(f"==== round {r + 1}, tree {tree} (load average before: {os.getloadavg()[0]:.2f})", flush=True)
            script = tree / "benchmarks" / Path(__file__).name
            out = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                                 env=dict(os.environ, PYTHONPATH=str(tree)))
            lines = [ln for ln in out.stdout.splitlines() if ln.strip()]
            print("\n".join(ln for ln in lines if not ln.startswith("ROUND ")), flush=True)
            results[tree] += [json.loads(ln[6:]) for ln in lines if ln.startswith("ROUND ")]
            if out.returncode:
                print(out.stderr[-2000:], flush=True)
    print(f"==== summary: longest stall per phase [ms], median (min–max) over the rounds; {Busy(a.busy)}")
    for tree, rs in results.items():
        if not rs:
            continue

        def stat(key, phase):
            v = [r[phase][key] for r in rs if r.get(phase)]
            return f"{statistics.median(v):.0f} ({min(v):.0f}–{max(v):.0f})" if v else "—"

        loads = [r["load"] for r in rs]
        print(f"  {tree}: {len(rs)} rounds, load {statistics.median(loads):.1f} ({min(loads):.1f}–{max(loads):.1f}); "
              f"preload max {stat('max', 'preload')}; run max {stat('max', 'run')}, run p95 {stat('p95', 'run')}; "
              f"dataset load max {stat('max', 'dataset')}; run end max {stat('max', 'end')}; reopen max "
              f"{stat('max', 'reopen')}; "
              f"generation-2 passes {[r['gen2'] for r in rs]}; torch in the window's process "
              f"{sorted({r['torch'] for r in rs})}")
        print("    the run's longest stalls: " + "; ".join(f"{r['run'].get('max', 0):.0f} ms {r['run'].get('worst', '')}"
                                                         for r in rs))


def codec_figures(plots) -> str:
    """Size and decode time of an EpochEnded with these plots as the child sends it (lab/event_codec.py): the
    window's supervisor thread decodes it holding the GIL."""
    from dpd_desktop.lab import event_codec

    data = event_codec.encode(epoch_event(0, plots))
    ts = []
    for _ in range(20):
        t = time.perf_counter()
        event_codec.decode(data)
        ts.append(time.perf_counter() - t)
    return (f"the child's EpochEnded with these plots: {len(data) / 1e3:.0f} kB of JSON, decoded in median "
            f"{np.median(ts) * 1e3:.2f} ms, max {max(ts) * 1e3:.2f} ms")


def dpa_plotdata(dataset: str, variants: int = 1):
    """PlotData of the dataset's validation split as the trainer builds it (build_plot_data), the prediction a
    slightly distorted copy of the measurement; ``variants`` > 1: a list of that many, each prediction with noise of
    its own (as the epochs of a run: the measurement and the input the same, the prediction not)."""
    from dpd_desktop.data import load_dataset
    from dpd_desktop.runs.plotdata import build_plot_data

    ds = load_dataset(dataset)
    y = ds.val.y.astype(np.float32)
    out = []
    for k in range(variants):
        pred = (0.98 * y + 0.003 * np.random.default_rng(k).standard_normal(y.shape)).astype(np.float32)
        out.append(build_plot_data("validation", ds.val.x, {"measured y": y, "predicted ŷ": pred}, ds.spec,
                                   target_name="measured y", pred_name="predicted ŷ",
                                   aclr={"measured y": (-40.0, -41.0), "predicted ŷ": (-39.0 - 0.1 * k, -40.0)},
                                   error_of=("predicted ŷ", "measured y")))
    return ds, (out if variants > 1 else out[0])


def epoch_event(e: int, plots, epochs: int = 10_000):
    """The EpochEnded of epoch ``e``: a learning curve that falls as 1/(e+1) with 10 % noise (seeded by ``e``), so
    that each bin of a long run's drawn curve has a low and a high point of its own."""
    from dpd_desktop.runs.events import EpochEnded

    r = np.random.default_rng(e).random(3)
    row = {"EPOCH": e, "N_EPOCH": epochs, "LR": 5e-3, "TRAIN_LOSS": 1e-2 / (e + 1) * (1 + 0.1 * r[0]),
           "VAL_LOSS": 1.2e-2 / (e + 1) * (1 + 0.1 * r[1]), "VAL_NMSE": -20.0 - 0.001 * e - 0.5 * r[2],
           "VAL_EVM": -18.0, "VAL_ACLR_AVG": -40.5, "TEST_NMSE": -20.3}
    return EpochEnded(epoch=e, epochs=epochs, row=row, is_best=True, best_epoch=e, best_value=row["VAL_NMSE"],
                      selection_metric="VAL_NMSE", epoch_seconds=1.0, plots=plots)


def bench_window(dataset=None):
    """A shown 1600×1000 window on a workspace of its own, without the PyTorch preload."""
    from dpd_desktop.runs.workspace import Workspace

    app = ensure_app()
    tmp = tempfile.mkdtemp(prefix="bench-gui-")
    w = MainWindow(workspace=Workspace(Path(tmp) / "ws"), settings=QSettings(str(Path(tmp) / "w.ini"),
                                                                             QSettings.Format.IniFormat))
    w.preload_core = False
    w.resize(1600, 1000)
    w.show()
    if dataset is not None:
        w.set_dataset(dataset)
    for _ in range(10):
        app.processEvents()
    t = time.perf_counter()
    while w.jobs.active() and time.perf_counter() - t < 120:  # the dataset's inspection (gui/dataset_flags.py):
        app.processEvents()  # measured alongside, it held the GIL the GUI thread then waited for
        time.sleep(0.01)
    for _ in range(10):
        app.processEvents()
    return app, w


def part_epoch_end(a) -> None:
    """Each epoch end as the child's EpochEnded arrives (decoded from its bytes: new arrays, the measurement equal to
    the last epoch's, the prediction not), then everything it posts drawn and painted. Wall and GUI-thread CPU."""
    from dpd_desktop.lab import event_codec

    ds, variants = dpa_plotdata(a.dataset, variants=4)
    app, w = bench_window(ds)
    encoded = [event_codec.encode(epoch_event(e, variants[e % len(variants)], a.repeats)) for e in range(a.repeats)]
    times, cpu = [], []
    for e in range(a.repeats):
        ev = event_codec.decode(encoded[e])  # the window's supervisor thread does this
        t, c = time.perf_counter(), time.thread_time()
        w.runs._on_epoch_ended(ev)
        w.plots._timer.stop()
        w.plots.flush()
        app.processEvents()  # the repaints the changes posted
        while w.plots._draw_queue:  # the panels drawn one per event-loop pass, and their repaints
            app.processEvents()
        app.processEvents()
        times.append(time.perf_counter() - t)
        cpu.append(time.thread_time() - c)
    ms = np.array(times[1:]) * 1e3  # the first draw creates the curves
    cpu_ms = np.array(cpu[1:]) * 1e3
    pts = sum(p.point_count() for p in w.panels)
    print(f"epoch end on {Path(a.dataset).name} plot data ({pts:,} points in the panels), {Busy(a.busy)}, load "
          f"average {os.getloadavg()[0]:.2f}: GUI-thread work per epoch end (row, table, curves, plots, repaint) "
          f"wall median {np.median(ms):.1f} ms, max {ms.max():.1f} ms over {len(ms)} (first {times[0] * 1e3:.1f} ms); "
          f"GUI-thread CPU median {np.median(cpu_ms):.1f} ms, max {cpu_ms.max():.1f} ms (the wall time less the "
          "waits for a core); target: median < 50 ms")
    print(f"  {codec_figures(variants[0])}")
    w.close()


def part_run_end(a) -> None:
    """A run's end as the window receives it: the last EpochEnded (its plots pending), RunFinished with the final
    plots and the worker's end, emitted from another thread one after the other as the run's worker does (each
    queued to the GUI thread), ``--repeats`` times in one window (each after a new start, the banner hidden). Each
    repeat: the longest interval of a 10 ms ticker from the first event until ``--settle-ms`` after ``runEnded``
    (the longest event-loop pass), the GUI-thread CPU over that span, and when ``runEnded`` came."""
    import threading

    from PySide6.QtCore import QObject, Signal

    from dpd_desktop.config import ExperimentConfig
    from dpd_desktop.gui.preload import start_preload
    from dpd_desktop.runs.events import RunFinished

    ds, variants = dpa_plotdata(a.dataset, variants=4)
    instrument()
    app, w = bench_window(ds)
    job = start_preload(w.jobs)  # as in the window long after its start: whatever its preload imports, imported
    t = time.perf_counter()
    while not job.is_done() and time.perf_counter() - t < 120:
        app.processEvents()
        time.sleep(0.01)
    w.runs.write_plots = False  # the PNGs' process is not part of this

    class Emitter(QObject):  # the run worker's signals, emitted from its thread
        epochEnded, finished, done = Signal(object), Signal(object), Signal()

    em = Emitter()
    em.epochEnded.connect(w.runs._on_epoch_ended)
    em.finished.connect(w.runs._on_run_finished)
    em.done.connect(w.runs._on_worker_done)
    ticks: list[float] = []
    timer = QTimer(w)
    timer.setTimerType(Qt.TimerType.PreciseTimer)
    timer.setInterval(TICK_MS)
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    ended: list[float] = []
    w.runEnded.connect(lambda s: ended.append(time.perf_counter()))
    cfg = ExperimentConfig(step="pa", dataset=str(a.dataset), epochs=3, device="cpu")
    rows = []
    for r in range(a.repeats):
        w.plots.banner.setVisible(False)
        w.reset_run_views()
        w.session.start(cfg)
        for e in range(2):  # the run's first epochs, drawn
            w.runs._on_epoch_ended(epoch_event(e, variants[(r + e) % 4], 3))
            w.plots.flush()
            while w.plots._draw_queue:
                app.processEvents()
        for _ in range(20):
            app.processEvents()
        last = epoch_event(2, variants[(r + 2) % 4], 3)
        fin = RunFinished(run_id=f"r{r}", run_dir=str(Path(tempfile.mkdtemp(prefix="bench-run-"))), best_epoch=2,
                          val_metrics={"NMSE": -30.0}, test_metrics={"NMSE": -30.1}, wall_s=12.0,
                          plots=variants[(r + 3) % 4], best_value=-30.0)
        ticks.clear()
        ended.clear()
        timer.start()
        app.processEvents()
        t0, c0 = time.perf_counter(), time.thread_time()
        th = threading.Thread(target=lambda: (em.epochEnded.emit(last), time.sleep(a.finish_gap_ms / 1e3),
                                              em.finished.emit(fin), em.done.emit()))
        th.start()
        while (not ended or time.perf_counter() - ended[0] < a.settle_ms / 1e3) and time.perf_counter() - t0 < 30:
            app.processEvents(QEventLoop.ProcessEventsFlag.WaitForMoreEvents, 5)
        c1 = time.thread_time()
        timer.stop()
        th.join()
        ts = [t0, *ticks]
        iv = np.diff(ts) * 1e3
        k = int(np.argmax(iv))
        inside = sorted((e for e in EVENTS if ts[k] <= e[0] <= ts[k + 1]), key=lambda e: -e[1])
        rows.append((float(iv.max()), (c1 - c0) * 1e3, (ended[0] - t0) * 1e3 if ended else float("nan"),
                     ", ".join(f"{e[2]} {e[1] * 1e3:.0f} ms (CPU {e[3] * 1e3:.0f})" for e in inside[:5])))
    mx = np.array([r[0] for r in rows])
    cpu = np.array([r[1] for r in rows])
    print(f"run end on {Path(a.dataset).name} plot data ({Busy(a.busy)}, load average {os.getloadavg()[0]:.2f}; the "
          f"last epoch end, {a.finish_gap_ms} ms, RunFinished and the worker's end; {len(rows)} repeats): longest "
          f"event-loop pass median {np.median(mx):.0f} ms, max {mx.max():.0f} ms (target < 200); GUI-thread CPU from "
          f"the first event to {a.settle_ms} ms after runEnded median {np.median(cpu):.0f} ms; runEnded after median "
          f"{np.median([r[2] for r in rows]):.0f} ms; each repeat's longest pass: "
          + ", ".join(f"{m:.0f}" for m in mx))
    worst = max(rows, key=lambda r: r[0])
    print(f"  the longest pass ({worst[0]:.0f} ms) held: {worst[3] or '—'}")
    w.close()


def _feed(app, w, events, timed, paint_every: int = 1):
    """Epoch ends into the window; (wall, GUI-thread CPU) [ms] of each one in ``timed`` (indices), with its repaint."""
    wall, cpu = [], []
    for e, ev in enumerate(events):
        t, c = time.perf_counter(), time.thread_time()
        w.runs._on_epoch_ended(ev)
        if e in timed or e % paint_every == 0:
            app.processEvents()  # the repaints the append posted
        if e in timed:
            wall.append(time.perf_counter() - t)
            cpu.append(time.thread_time() - c)
    app.processEvents()
    return np.array(wall) * 1e3, np.array(cpu) * 1e3


def part_many_epochs(a) -> None:
    """``--n-epochs`` epoch ends fed to the window; each of the first and the last 1,000 timed with the repaint it
    posts (the cost per epoch at the start and at the end of a long run), the epochs between repainted every
    ``--paint-every`` (their cost is not measured; the panels hold the same history either way). Then the first
    1,000 again in a fresh window: the start's cost measured before and after the end's, so that a load that drifts
    over the part (other processes) weighs on both sides of the ratio alike."""
    app, w = bench_window()
    n = a.n_epochs
    window = min(1000, n // 2)
    events = [epoch_event(e, None, n) for e in range(n)]
    timed = set(range(window)) | set(range(n - window, n))
    rss0 = rss_mb()
    t_part = time.perf_counter()
    wall, cpu = _feed(app, w, events, timed, a.paint_every)
    rss1 = rss_mb()
    pts = w.learning_panel.point_count()
    w.close()
    app2, w2 = bench_window()
    wall2, cpu2 = _feed(app2, w2, events[:window], set(range(window)))
    w2.close()
    first_wall = (wall[:window].mean() + wall2.mean()) / 2
    first_cpu = (cpu[:window].mean() + cpu2.mean()) / 2
    l_wall, l_cpu = wall[window:].mean(), cpu[window:].mean()
    print(f"{n:,} epochs fed to the window (learning curves + epoch table, {pts:,} points drawn at the end; "
          f"{Busy(a.busy)}, load average {os.getloadavg()[0]:.2f}; the part took {time.perf_counter() - t_part:.0f} s): "
          f"memory +{rss1 - rss0:.1f} MB (target < 50 MB); per epoch end with its repaint [ms, mean (median)]: first "
          f"{window:,} wall {wall[:window].mean():.2f} ({np.median(wall[:window]):.2f}), GUI-thread CPU "
          f"{cpu[:window].mean():.2f}; last {window:,} wall {l_wall:.2f} ({np.median(wall[window:]):.2f}), CPU "
          f"{l_cpu:.2f}; first {window:,} again in a fresh window wall {wall2.mean():.2f} ({np.median(wall2):.2f}), CPU "
          f"{cpu2.mean():.2f}; ratio last / first (the two firsts' mean): wall {l_wall / first_wall:.2f}, CPU "
          f"{l_cpu / first_cpu:.2f} (target: within 10 %)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("ticks", "epoch-end", "run-end", "many-epochs", "all"), default="all")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--stride", type=int, default=8)
    ap.add_argument("--preview-every", type=int, default=20)
    ap.add_argument("--start-after-ms", type=int, default=1000)
    ap.add_argument("--dataset", default=str(ROOT.parent / "shared" / "datasets" / "DPA_160MHz"))
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--n-epochs", type=int, default=10_000)
    ap.add_argument("--paint-every", type=int, default=100,
                    help="many-epochs: a repaint every N epochs between the first and the last 1,000 (each timed "
                         "epoch has its own)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="ticks: rounds, each in a fresh process, then the medians (1: this process)")
    ap.add_argument("--tree", action="append", help="ticks: a source tree to measure (repeatable: the rounds "
                    "alternate between the trees; default: this script's)")
    ap.add_argument("--finish-gap-ms", type=int, default=0,
                    help="run-end: the time between the last EpochEnded and RunFinished (0: the worst case)")
    ap.add_argument("--settle-ms", type=int, default=500,
                    help="run-end: measured until this long after runEnded; ticks: after the reopened run is shown")
    ap.add_argument("--deadline-s", type=float, default=300.0, help="ticks: a round still going then ends")
    ap.add_argument("--busy", type=int, default=1, help="other processes spinning on the CPU during each part "
                    "(default 1: the targets hold while another process is busy; 0: none)")
    a = ap.parse_args(argv)
    if a.part in ("ticks", "all"):
        if a.rounds > 1 or a.tree:
            ticks_rounds(a)  # each round a process of its own, which starts its busy processes
        else:
            with Busy(a.busy):
                part_ticks(a)
    if a.part in ("epoch-end", "all"):
        with Busy(a.busy):
            part_epoch_end(a)
    if a.part in ("run-end", "all"):
        with Busy(a.busy):
            part_run_end(a)
    if a.part in ("many-epochs", "all"):
        with Busy(a.busy):
            part_many_epochs(a)
    app = QApplication.instance()  # none when only the rounds ran (each in a process of its own)
    if app is not None:
        app.processEvents()
    return 0


if __name__ == "__main__":
    sys.exit(main())
