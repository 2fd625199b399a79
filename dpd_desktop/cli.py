"""Command line: ``dpd-desktop`` (the window) and its headless sub-commands on the same core.

    dpd-desktop                         open the window
    dpd-desktop demo                    the embedded demo: window when a display exists, else headless + plots
    dpd-desktop train-pa --dataset PATH [options]
    dpd-desktop train-dpd --dataset PATH --pa-run RUN [options]
    dpd-desktop run-dpd --run RUN [--input FILE | --split test] --out FILE.{csv,h5,mat}
    dpd-desktop runs                    list the runs of the workspace

``--workspace DIR`` is a global option, placed before the sub-command (it is accepted after it too).

Exit status:
    0  success
    1  the run failed (its run folder records why: status.json, log.txt)
    2  bad arguments, or unusable input found before a run starts (dataset that cannot be loaded, unusable
       workspace, PA/DPD run not found, no display for the window)
    3  cancelled (Ctrl+C: the run stops after the current batch and stays readable)
   130 aborted by a second Ctrl+C
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path

from . import __version__

# ---------------------------------------------------------------------- Ctrl+C
# The process entry point (run) installs _on_sigint before any heavy import, so that a Ctrl+C at any moment is a
# plain cancel: it sets CANCEL, and asks the trainer to stop once there is one (run_training checks CANCEL before
# and right after building it). A second Ctrl+C aborts at once (exit 130), even while the main thread is inside a
# long PyTorch call: Python runs signal handlers only between bytecodes of the main thread (and merges signals that
# arrive meanwhile), so a watchdog thread also counts the raw arrivals through signal.set_wakeup_fd.
CANCEL = threading.Event()
_SIGINT: dict = {"count": 0, "trainer": None, "installed": False, "prev": None, "arrived": 0, "wakeup": None}
ABORT_EXIT = 130


def _say(text: str) -> None:
    """Write a line to stderr from a signal handler (os.write: no reentrant buffered-stream call)."""
    try:
        os.write(2, (text + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def abort_second_ctrl_c() -> None:
    """Say so on stderr and exit at once with status 130 (the command line's and the window's second Ctrl+C)."""
    _say("\naborted (second Ctrl+C)")
    os._exit(ABORT_EXIT)


def _on_sigint(signum, frame) -> None:
    _SIGINT["count"] += 1
    if _SIGINT["count"] >= 2 or _SIGINT["arrived"] >= 2:
        abort_second_ctrl_c()
    CANCEL.set()
    trainer = _SIGINT["trainer"]
    if trainer is not None:
        trainer.request_cancel()
        _say("\nstopping after the current batch (Ctrl+C again to abort)…")
    else:
        _say("\ncancelling (Ctrl+C again to abort)…")


def _install_sigint() -> bool:
    """Install the cooperative Ctrl+C handler (fresh state); False when it cannot be (not the main thread)."""
    try:
        prev = signal.signal(signal.SIGINT, _on_sigint)
    except (ValueError, OSError):
        return False
    CANCEL.clear()
    _SIGINT.update(count=0, trainer=None, installed=True, prev=prev, arrived=0)
    _start_abort_watchdog()
    return True


def _start_abort_watchdog() -> None:
    """Count SIGINTs as they arrive (the C-level handler writes one byte per signal to the wakeup socket) on a
    daemon thread, and abort on the second even when the main thread cannot run its Python handler yet."""
    import socket

    try:
        reader, writer = socket.socketpair()
        writer.setblocking(False)
        signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    except (ValueError, OSError, AttributeError):
        return

    def watch() -> None:
        try:
            while True:
                data = reader.recv(64)
                if not data:
                    return
                _SIGINT["arrived"] += data.count(int(signal.SIGINT))
                if _SIGINT["arrived"] >= 2 and _SIGINT["installed"]:
                    abort_second_ctrl_c()
        except OSError:
            return
        finally:
            reader.close()

    _SIGINT["wakeup"] = writer
    threading.Thread(target=watch, name="dpd-ctrl-c", daemon=True).start()


def _restore_sigint() -> None:
    if _SIGINT["installed"]:
        try:
            signal.signal(signal.SIGINT, _SIGINT["prev"] or signal.default_int_handler)
        except (ValueError, OSError, TypeError):
            pass
        _SIGINT.update(installed=False, trainer=None)
        writer = _SIGINT.get("wakeup")
        if writer is not None:
            try:
                signal.set_wakeup_fd(-1)
            except (ValueError, OSError):
                pass
            writer.close()  # the watchdog reads end-of-file and ends
            _SIGINT["wakeup"] = None


def _add_training_options(p: argparse.ArgumentParser, step: str) -> None:
    from .config import ExperimentConfig

    d = ExperimentConfig()
    p.add_argument("--dataset", required=True, help="split-CSV folder, single CSV, HDF5 file, or 'demo'")
    if step == "dpd":
        p.add_argument("--pa-run", required=True, help="PA run id (in the workspace) or PA run folder")
        p.add_argument("--allow-dataset-mismatch", action="store_true",
                       help="train even when --dataset is not the dataset the PA run was trained on")
    p.add_argument("--backbone", default=d.backbone, help="gru, dgru, lstm, tres_gru, rvtdcnn (default %(default)s)")
    p.add_argument("--hidden-size", type=int, default=d.hidden_size if step == "pa" else 15,
                   help="hidden size (default %(default)s)")
    p.add_argument("--num-layers", type=int, default=d.num_layers)
    p.add_argument("--epochs", type=int, default=d.epochs, help="default %(default)s")
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--batch-size-eval", type=int, default=d.batch_size_eval)
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--lr-end", type=float, default=d.lr_end)
    p.add_argument("--decay-factor", type=float, default=d.decay_factor)
    p.add_argument("--patience", type=int, default=d.patience)
    p.add_argument("--weight-decay", type=float, default=d.weight_decay)
    p.add_argument("--grad-clip", type=float, default=d.grad_clip)
    p.add_argument("--frame-length", type=int, default=d.frame_length)
    p.add_argument("--stride", type=int, default=d.stride)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--loss", default=d.loss, choices=("l2", "l1"))
    p.add_argument("--device", default=d.device, help="auto, cpu, cuda or cuda:N (default %(default)s)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: PyTorch's)")
    p.add_argument("--max-train-samples", type=int, default=None, help="train on the first N samples only")
    p.add_argument("--preview-every", type=int, default=None, help="live batch preview every N batches")
    p.add_argument("--no-plots", action="store_true", help="do not write plots/*.png at the end")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


WORKSPACE_HELP = ("workspace folder (default: $DPD_DESKTOP_WORKSPACE or the platform's user data folder); a global "
                  "option, placed before the sub-command")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dpd-desktop", description="Neural PA modeling and DPD for measured I/Q data.",
                                epilog="Without a sub-command the window opens. Exit status: 0 success, 1 the run "
                                       "failed, 2 bad arguments or unusable input before a run starts, 3 cancelled.")
    p.add_argument("--version", action="version", version=f"dpd-desktop {__version__}")
    p.add_argument("--workspace", default=None, help=WORKSPACE_HELP)
    sub = p.add_subparsers(dest="command")

    def add(name: str, **kw) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, **kw)
        # accepted after the sub-command too (same dest); SUPPRESS keeps a global --workspace when it is not given
        sp.add_argument("--workspace", default=argparse.SUPPRESS, help=WORKSPACE_HELP)
        return sp

    g = add("gui", help="open the window (the default)")
    g.add_argument("--dataset", default=None)
    dm = add("demo", help="embedded demo: window with a display, else a headless run with plots")
    dm.add_argument("--headless", action="store_true", help="force the headless demo")
    dm.add_argument("--epochs", type=int, default=3)
    dm.add_argument("--device", default="auto")
    _add_training_options(add("train-pa", help="train a PA behavioral model headless"), "pa")
    _add_training_options(add("train-dpd", help="train a DPD through a frozen PA headless (--dataset: the PA "
                                                "run's dataset)"), "dpd")
    r = add("run-dpd", help="write u = DPD(x) for a split or an input file")
    r.add_argument("--run", required=True, help="DPD run id or run folder")
    r.add_argument("--input", default=None, help="input file (CSV I,Q / HDF5 / .mat); default: --split of the "
                   "run's dataset")
    r.add_argument("--split", default="test", choices=("train", "val", "test"))
    r.add_argument("--out", required=True, help="output file: .csv, .h5/.hdf5 or .mat")
    r.add_argument("--device", default="cpu")
    add("runs", help="list the runs of the workspace")
    return p


class ConsoleObserver:
    """Prints a progress bar (stderr, at most ~10 updates/s) and a per-epoch metrics table (stdout)."""

    COLS = (("EPOCH", "ep", "{:>3d}"), ("LR", "lr", "{:>8.1e}"), ("TRAIN_LOSS", "train loss", "{:>10.3e}"),
            ("VAL_LOSS", "val loss", "{:>10.3e}"), ("VAL_NMSE", "val NMSE", "{:>9.3f}"),
            ("VAL_ACLR_AVG", "val ACLR", "{:>9.3f}"), ("VAL_EVM", "val EVM", "{:>8.3f}"),
            ("TEST_NMSE", "test NMSE", "{:>9.3f}"), ("EPOCH_SECONDS", "s", "{:>7.1f}"))

    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.header_done = False
        self.tty = sys.stderr.isatty()
        self.last_line = 0.0

    def __call__(self, ev) -> None:
        from .training import events as E

        if isinstance(ev, E.RunStarted):
            print(f"run {ev.run_id} → {ev.run_dir}")
            print(f"device {ev.device} ({ev.device_name}) · CUDA graph: {ev.fast_path} · {param_text(ev)} · "
                  f"{ev.n_train_frames} frames, {ev.batches_per_epoch} batches/epoch", flush=True)
        elif isinstance(ev, E.BatchProgress) and not self.quiet:
            frac = ev.batch / ev.batches
            bar = "#" * int(30 * frac)
            eta = f"{ev.eta_s:5.0f} s left" if ev.eta_s is not None else ""
            text = f"epoch {ev.epoch + 1}/{ev.epochs} [{bar:<30}] {ev.batch}/{ev.batches} {eta}"
            if self.tty:
                sys.stderr.write("\r" + text)
                sys.stderr.flush()
            elif time.monotonic() - self.last_line > 10 or ev.batch == ev.batches:
                self.last_line = time.monotonic()
                print(text, file=sys.stderr, flush=True)
        elif isinstance(ev, E.EpochEnded):
            if self.tty and not self.quiet:
                sys.stderr.write("\r" + " " * 80 + "\r")
            if not self.header_done:
                print(" ".join(f"{h:>{len(f.format(0) if 'd' in f else f.format(0.0))}}" for _, h, f in self.COLS)
                      + "  sel")
                self.header_done = True
            cells = []
            for key, _, fmt in self.COLS:
                v = ev.row.get(key)
                try:
                    cells.append(fmt.format(v if key == "EPOCH" else float(v)))
                except (TypeError, ValueError):
                    cells.append(str(v))
            print(" ".join(cells) + ("  ★" if ev.is_best else ""), flush=True)
        elif isinstance(ev, E.RunFinished):
            m = ev.test_metrics
            print(f"selected epoch {ev.best_epoch}; test NMSE {m['NMSE']:.4f} dB, ACLR L/R/avg "
                  f"{m['ACLR_L']:.4f}/{m['ACLR_R']:.4f}/{m['ACLR_AVG']:.4f} dBc, EVM {m['EVM']:.4f} dB "
                  f"({ev.wall_s:.1f} s)")
            if ev.extra.get("rms_out_diff_db") is not None:
                d = ev.extra["rms_out_diff_db"]
                print(f"cascade RMS output with vs without DPD: {d:+.3f} dB" +
                      ("  WARNING: more than 0.5 dB — the DPD changes the gain" if ev.extra.get("power_warning")
                       else ""))
            print(f"artifacts: {ev.run_dir}", flush=True)
        elif isinstance(ev, E.RunFailed):
            print(f"error: {ev.message}", file=sys.stderr, flush=True)
        elif isinstance(ev, E.RunCancelled):
            print(f"cancelled after {ev.epochs_completed} epoch(s); run kept at {ev.run_dir}", file=sys.stderr)


def param_text(ev) -> str:
    """"442 parameters" for a PA; "306 parameters (DPD) + 442 frozen PA" for a DPD (its model id's P_ is 306)."""
    model = getattr(ev, "n_params_model", None)
    if ev.step == "dpd" and model is not None:
        return f"{model} parameters (DPD) + {ev.n_params - model} frozen PA"
    return f"{ev.n_params} parameters"


class PlotRecorder:
    """Keeps the last plot data and the history rows so that the CLI can write plots/*.png at the end."""

    def __init__(self):
        self.rows, self.plots = [], None

    def __call__(self, ev) -> None:
        from .training import events as E

        if isinstance(ev, E.EpochEnded):
            self.rows.append(dict(ev.row))
            self.plots = ev.plots or self.plots
        elif isinstance(ev, E.RunFinished) and ev.plots is not None:
            self.plots = ev.plots


def write_plots(run_dir, rec: PlotRecorder) -> None:
    """Render the default plots to ``run_dir/plots`` (offscreen Qt); a failure is reported, never fatal."""
    try:
        from .gui.export import write_run_plots

        paths = write_run_plots(Path(run_dir), rec.rows, rec.plots)
        print(f"plots: {len(paths)} PNG files in {Path(run_dir) / 'plots'}")
    except Exception as exc:  # noqa: BLE001
        print(f"warning: plots not written ({type(exc).__name__}: {exc})", file=sys.stderr)


def _config_from_args(a, step: str):
    from .config import ExperimentConfig

    return ExperimentConfig(
        step=step, dataset=a.dataset, backbone=a.backbone, hidden_size=a.hidden_size, num_layers=a.num_layers,
        pa_run=getattr(a, "pa_run", None), epochs=a.epochs, batch_size=a.batch_size,
        batch_size_eval=a.batch_size_eval, lr=a.lr, lr_end=a.lr_end, decay_factor=a.decay_factor,
        patience=a.patience, weight_decay=a.weight_decay, grad_clip=a.grad_clip, frame_length=a.frame_length,
        stride=a.stride, seed=a.seed, loss=a.loss, device=a.device, threads=a.threads,
        max_train_samples=a.max_train_samples, preview_every=a.preview_every,
        allow_dataset_mismatch=bool(getattr(a, "allow_dataset_mismatch", False)))


def _cancelled_before_start() -> int:
    print("cancelled before training started", file=sys.stderr, flush=True)
    return 3


def run_training(config, workspace, dataset=None, quiet=False, plots=True, prefetch=None) -> int:
    """Run one experiment headless with the console observer; returns the exit status (module docstring).

    The dataset is loaded here, before the trainer exists, so that one that cannot be loaded is exit status 2 with
    no run folder. Ctrl+C: see :data:`CANCEL`; when :func:`run` did not install the handler (a call from Python in
    the main thread), it is installed for the duration of the run. ``prefetch``: a
    :class:`~dpd_desktop.data.prefetch.DatasetPrefetch` already parsing ``config.dataset`` (None: load here).
    """
    own_handler = not _SIGINT["installed"] and _install_sigint()
    try:
        if CANCEL.is_set():
            return _cancelled_before_start()
        from .data import DatasetError
        from .timing import mark
        from .training.trainer import Trainer, load_dataset_for

        if dataset is None and prefetch is not None:
            mark("dataset_prefetch_wait")
            dataset = prefetch.result()  # None: the child could not load it; the error is reported below
        if dataset is None:
            try:
                mark("dataset_load_start")
                dataset = load_dataset_for(config.dataset)
                dataset.spec.require_metrics(str(dataset.source))
            except (DatasetError, OSError) as exc:
                print(f"error: {exc}", file=sys.stderr, flush=True)
                return 2
        if CANCEL.is_set():
            return _cancelled_before_start()
        rec = PlotRecorder()
        trainer = Trainer(config, dataset=dataset, workspace=workspace, observers=[ConsoleObserver(quiet), rec])
        _SIGINT["trainer"] = trainer
        if CANCEL.is_set():  # Ctrl+C while the trainer was being built
            trainer.request_cancel()
        result = trainer.run()
        _SIGINT["trainer"] = None
    finally:
        if own_handler:
            _restore_sigint()
    if result.state == "succeeded" and plots:
        if CANCEL.is_set():
            print(f"plots skipped (Ctrl+C); artifacts: {result.run_dir}", file=sys.stderr)
        else:
            write_plots(result.run_dir, rec)
    if result.state == "failed" and result.run_dir is None:
        return 2  # refused before a run folder existed: a setting or input (device, PA run, …), not a run failure
    return {"succeeded": 0, "failed": 1, "cancelled": 3}[result.state]


def has_display() -> bool:
    """True when a window can be shown (Windows/macOS, or X11/Wayland with a display variable)."""
    if os.environ.get("QT_QPA_PLATFORM") == "offscreen":
        return False
    if sys.platform in ("win32", "darwin"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


NO_DISPLAY_MESSAGE = ("no display found: the window cannot open here; use `dpd-desktop demo --headless` or "
                      "`dpd-desktop train-pa --dataset ...`")


def window_unavailable() -> bool:
    """True when the window would open on no screen: no display, and QT_QPA_PLATFORM not chosen by the user
    (an explicit QT_QPA_PLATFORM, e.g. offscreen for tests or vnc, is respected)."""
    return not has_display() and not os.environ.get("QT_QPA_PLATFORM")


def _workspace(args):
    """The workspace of the command line and whether the user named it (--workspace or $DPD_DESKTOP_WORKSPACE)."""
    from .runs.workspace import Workspace

    if args.workspace:
        return Workspace(args.workspace), True
    return Workspace(), bool(os.environ.get("DPD_DESKTOP_WORKSPACE"))


def main(argv=None) -> int:
    """Entry point of ``dpd-desktop`` and ``python -m dpd_desktop``; returns the exit status (module docstring)."""
    args = build_parser().parse_args(argv)
    from .runs.workspace import WorkspaceError

    cmd = args.command or "gui"
    if cmd not in ("train-pa", "train-dpd", "demo") and _SIGINT["installed"]:
        # only training stops cooperatively; run-dpd and runs keep Python's default Ctrl+C (KeyboardInterrupt,
        # turned into exit status 3 by run(); run-dpd's files are written atomically); the window installs its own
        # (gui.app._close_on_ctrl_c: close the window)
        cancelled = CANCEL.is_set()
        _restore_sigint()
        if cancelled:
            raise KeyboardInterrupt
    try:
        ws, named = _workspace(args)
        ws.check(create=cmd in ("train-pa", "train-dpd", "demo"))
    except WorkspaceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if cmd == "gui":
        if window_unavailable():
            print(NO_DISPLAY_MESSAGE, file=sys.stderr)
            return 2
        from .gui.app import main as gui_main

        return gui_main(dataset=getattr(args, "dataset", None), workspace=ws)
    if cmd == "demo":
        from .config import ExperimentConfig

        cfg = ExperimentConfig(step="pa", dataset="demo", epochs=args.epochs, device=args.device, hidden_size=16,
                               frame_length=100, stride=4)
        if has_display() and not args.headless:
            from .gui.app import main as gui_main

            _restore_sigint()  # the window keeps Python's default Ctrl+C behavior
            return gui_main(dataset="demo", workspace=ws, autostart_config=cfg)
        print("no display: running the demo headless (plots are written to the run folder)")
        return run_training(cfg, ws)
    if cmd in ("train-pa", "train-dpd"):
        from .config import ConfigError
        from .data.prefetch import DatasetPrefetch

        # parse the dataset in a child process while this one imports PyTorch (validation below imports it), and
        # bring up the CUDA driver on a helper thread meanwhile (after the fork)
        prefetch = DatasetPrefetch(args.dataset)
        if not os.environ.get("DPD_DESKTOP_NO_EARLY_CUDA"):
            from .cuda_driver import retain_primary_context_in_background

            retain_primary_context_in_background(args.device)
        try:
            cfg = _config_from_args(args, "pa" if cmd == "train-pa" else "dpd")
            try:
                cfg.validate()
            except ConfigError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
            return run_training(cfg, ws, quiet=args.quiet, plots=not args.no_plots, prefetch=prefetch)
        finally:
            prefetch.cancel()
    if cmd == "run-dpd":
        from .runs.dpd_export import DpdExportError, run_dpd

        try:
            meta = run_dpd(ws, args.run, out=args.out, input_file=args.input, split=args.split, device=args.device)
        except (DpdExportError, FileNotFoundError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"wrote {meta['samples']} samples of u = DPD(x) to {args.out} (+ {args.out}.meta.json)")
        return 0
    if cmd == "runs":
        if not ws.root.is_dir():
            if named:
                print(f"error: workspace {ws.root}: no such folder", file=sys.stderr)
                return 2
            print(f"no runs yet (workspace {ws.root})", file=sys.stderr)
            return 0
        try:
            runs = ws.list_runs()
        except OSError as exc:
            print(f"error: workspace {ws.root}: cannot list {ws.runs_dir} ({exc.strerror or exc})", file=sys.stderr)
            return 2
        if not runs:
            print(f"no runs in {ws.runs_dir}", file=sys.stderr)
        for r in runs:
            print(f"{r.run_id:48s} {r.step:4s} {r.backbone:9s} H={r.hidden_size!s:4s} {r.status}")
        return 0
    return 2


HEADLESS_COMMANDS = {"train-pa", "train-dpd", "run-dpd", "demo"}


def run(early_sigints: list | None = None) -> None:
    """Process entry point (console script and ``python -m``, through :mod:`dpd_desktop._entry`): :func:`main`,
    then exit.

    The cooperative Ctrl+C handler is installed first, before any heavy import (see :data:`CANCEL`); Ctrl+Cs that
    arrived while this module was imported (``early_sigints``, counted by ``_entry``) are handled as if they came
    now; a KeyboardInterrupt that still gets through is a plain cancel (exit 3), never a traceback.

    After a headless command every artifact is written and closed, so the interpreter's teardown (module garbage
    collection, CUDA context destruction), which only delays the exit, is skipped with ``os._exit``.
    """
    _install_sigint()
    for _ in range(len(early_sigints or ())):
        _SIGINT["arrived"] += 1
        _on_sigint(signal.SIGINT, None)
    from .timing import mark

    mark("cli_start")
    try:
        rc = main()
    except KeyboardInterrupt:
        print("\ncancelled", file=sys.stderr)
        rc = 3
    if HEADLESS_COMMANDS & set(sys.argv[1:]):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc or 0)
    sys.exit(rc)
