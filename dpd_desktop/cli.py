"""Command line: ``dpd-desktop`` (the window) and its headless sub-commands on the same core.

    dpd-desktop                         open the window
    dpd-desktop demo                    the embedded demo: window when a display exists, else headless + plots
    dpd-desktop train-pa --dataset PATH [options]
    dpd-desktop train-dpd --dataset PATH --pa-run RUN [options]
    dpd-desktop run-dpd --run RUN [--input FILE | --split test] --out FILE.{csv,h5,mat}
    dpd-desktop runs [pin|unpin|clean]  list the runs of the workspace (cli_runs.py); keep them; retention
    dpd-desktop queue add|list|move|cancel|run   the run queue (cli_queue.py)
    dpd-desktop resume RUN              continue an interrupted/cancelled/failed run (cli_resume.py)
    dpd-desktop sweep SPEC.toml | --grid KEY=V1,V2 ... --base OPTIONS   grid/random/Optuna sweep (cli_sweep.py)
    dpd-desktop sweep list|show|resume|cancel SWEEP
    dpd-desktop arena PROTOCOL [--epochs N --seeds ... --models ... --datasets ...]   benchmark leaderboard (cli_arena.py)
    dpd-desktop runs evaluate RUN --profile NAME [--json]   re-score a finished run under a metric profile
    dpd-desktop inspect DATASET | import-capture ...   check a capture / make a dataset of one (cli_inspect.py)
    dpd-desktop loop --power-limit DBM [--generator ... --analyzer ... --pa-run|--virtual-pa ...]   the instrument
                                        loop with iterative DPD (cli_loop.py); loop-dataset RUN --out DIR
    dpd-desktop export RUN --format fixed|onnx [--weights W --activations A]   deploy a DPD (cli_deploy.py)
    dpd-desktop finetune RUN --qat W,A  quantisation-aware fine-tune of a DPD run (cli_deploy.py)
    dpd-desktop --self-test             check the installation (dpd_desktop.selftest); with --workspace the run stays

``--workspace DIR`` is a global option, placed before the sub-command (it is accepted after it too).

Exit status (:class:`dpd_desktop.process.Exit`):
    0  success
    1  the run failed (its run folder records why: status.json, log.txt)
    2  bad arguments, or unusable input found before a run starts (dataset that cannot be loaded or that the
       inspector gives an error flag without --accept-flags, unusable workspace, PA/DPD run not found, no display
       for the window)
    3  cancelled (Ctrl+C: the run stops after the current batch and stays readable)
   130 aborted by a second Ctrl+C
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from . import __version__, cli_arena, cli_deploy, cli_flags, cli_inspect, cli_limits, cli_loop, cli_poly, cli_queue, \
    cli_resume, cli_runs, cli_sweep
from .cli_checks import option_message, preflight
from .config import GAIN_RULES, KERNELS, METRIC_PROFILES, ConfigError, ExperimentConfig, default_hidden_size
from .data import DatasetError
from .process import CTRL_C, NO_DISPLAY_MESSAGE, Display, Exit, detect_display, quiet_broken_pipe
from .kernels.record import read_kernel
from .runs.labels import epoch_of
from .runs.settings import SettingsError, WorkspaceSettings
from .runs.workspace import Workspace, WorkspaceError
from .cli_poly import add_poly_options, poly_config_fields, poly_summary
from .cli_training import add_training_options, training_config_fields
from .timing import mark
from .runs import events as E
from .training.cpu_threads import prefer_passive_wait

# Imported inside the commands that need them, to keep `dpd-desktop --help` and `runs` fast (measured on the 2-core
# development machine, median of 3): the trainer and run-dpd bring PyTorch (`import torch` 0.75 s here, 2-3 s on the
# GPU machine); the window and the plots bring Qt (`import dpd_desktop.gui.app` 0.3 s: PySide6, pyqtgraph, the
# window). `dpd-desktop --help` takes 0.2 s; these imports would also delay the Ctrl+C handler that run() installs.

STOPPING = "stopping after the current batch (Ctrl+C again to abort)…"
# cooperative Ctrl+C, workspace created
TRAINING_COMMANDS = ("train-pa", "train-dpd", "demo", "resume", "loop", "finetune")


def _add_training_options(p: argparse.ArgumentParser, step: str) -> None:
    d = ExperimentConfig()
    p.add_argument("--dataset", required=True, help="split-CSV folder, single CSV, HDF5 file, or 'demo'")
    if step == "dpd":
        p.add_argument("--pa-run", required=True, help="PA run id (in the workspace) or PA run folder")
        p.add_argument("--allow-dataset-mismatch", action="store_true",
                       help="train even when --dataset is not the dataset the PA run was trained on (default: "
                            "refused)")
        p.add_argument("--gain-rule", default=d.gain_rule, choices=GAIN_RULES,
                       help="DPD target gain g of g·x: peak = max|y|/max|x| (the reference's), small-signal = "
                            "least squares on the lowest 40 %% of |x|, rms = rms(y)/rms(x) (default %(default)s)")
    p.add_argument("--kernel", default=d.kernel, choices=KERNELS,
                   help="recurrence kernels: reference = nn.GRU/nn.LSTM (cuDNN), bitwise equal to OpenDPD 2.2.1; "
                        "fast = ours (default %(default)s)")
    p.add_argument("--metric-profile", default=d.metric_profile, choices=METRIC_PROFILES,
                   help="metric definitions: legacy-2.2.1 = OpenDPD 2.2.1's numbers bitwise; corrected = valid "
                        "samples, half-open bands, full adjacent channels, pooled NMSE (default %(default)s)")
    p.add_argument("--backbone", default=d.backbone,
                   help="gru, dgru, lstm, tres_gru, rvtdcnn, mp, gmp (default %(default)s)")
    p.add_argument("--hidden-size", type=int, default=default_hidden_size(step),
                   help="hidden size (default %(default)s: the reference command line's for this step, the "
                        "window's too)")
    p.add_argument("--num-layers", type=int, default=d.num_layers, help="recurrent layers (default %(default)s)")
    p.add_argument("--epochs", type=int, default=d.epochs, help="training epochs (default %(default)s)")
    p.add_argument("--batch-size", type=int, default=d.batch_size,
                   help="training batch, frames (default %(default)s)")
    p.add_argument("--batch-size-eval", type=int, default=d.batch_size_eval,
                   help="evaluation batch, nperseg segments (default %(default)s)")
    p.add_argument("--lr", type=float, default=d.lr, help="AdamW learning rate (default %(default)s)")
    p.add_argument("--lr-end", type=float, default=d.lr_end,
                   help="lowest learning rate of the schedule (default %(default)s)")
    p.add_argument("--decay-factor", type=float, default=d.decay_factor,
                   help="plateau schedule: lr × this after --patience epochs without improvement "
                        "(default %(default)s)")
    p.add_argument("--patience", type=int, default=d.patience,
                   help="plateau schedule: epochs without improvement before the lr decays (default %(default)s)")
    p.add_argument("--weight-decay", type=float, default=d.weight_decay,
                   help="AdamW weight decay (default %(default)s)")
    p.add_argument("--grad-clip", type=float, default=d.grad_clip,
                   help="gradient clip, global L2 norm; 0: off (default %(default)s)")
    p.add_argument("--frame-length", type=int, default=d.frame_length,
                   help="training frame, samples (default %(default)s)")
    p.add_argument("--stride", type=int, default=d.stride,
                   help="hop between training frames, samples (default %(default)s)")
    p.add_argument("--seed", type=int, default=d.seed, help="random seed, 0 to 2**32 - 1 (default %(default)s)")
    p.add_argument("--loss", default=d.loss, choices=("l2", "l1"),
                   help="l2 = mean squared error (the reference's), l1 = mean absolute error (default %(default)s)")
    p.add_argument("--device", default=None, help=f"auto, cpu, cuda or cuda:N (default: the workspace's, else "
                   f"{d.device})")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads, at most the core count (default: "
                   "the workspace's, else PyTorch's)")
    cli_limits.add_limit_options(p)
    p.add_argument("--max-train-samples", type=int, default=None,
                   help="train on the first N samples only (default: the whole training split)")
    p.add_argument("--preview-every", type=int, default=None,
                   help="live batch preview every N batches (default: none, plots once per epoch)")
    p.add_argument("--no-plots", action="store_true", help="do not write plots/*.png at the end (default: written)")
    p.add_argument("--quiet", action="store_true", help="no progress bar (default: shown)")
    cli_flags.add_accept_option(p)
    add_poly_options(p)
    add_training_options(p)


WORKSPACE_HELP = ("workspace folder (default: $DPD_DESKTOP_WORKSPACE or the platform's user data folder); a global "
                  "option, placed before the sub-command")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dpd-desktop", description="Neural PA modeling and DPD for measured I/Q data.",
                                epilog="Without a sub-command the window opens. Exit status: 0 success, 1 the run "
                                       "failed, 2 bad arguments or unusable input before a run starts, 3 cancelled, "
                                       "130 aborted (second Ctrl+C).")
    p.add_argument("--version", action="version", version=f"dpd-desktop {__version__}")
    p.add_argument("--workspace", default=None, help=WORKSPACE_HELP)
    p.add_argument("--self-test", action="store_true",
                   help="check this installation: PyTorch, one demo epoch on the CPU, the run reopened, the window "
                        "offscreen (into a temporary workspace unless --workspace is given); exit 0 when it passed")
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
    r.add_argument("--out", required=True, help="output file: .csv, .h5/.hdf5 or .mat (and FILE.meta.json beside "
                   "it); never a file of a run folder, a dataset or the workspace")
    r.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    r.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto (default %(default)s)")
    cli_runs.add_parser(add)
    cli_poly.add_parser(add)
    cli_queue.add_parser(add)  # dpd-desktop queue add|list|move|cancel|run (cli_queue.py)
    cli_resume.add_parser(add)
    cli_sweep.add_parser(add)  # dpd-desktop sweep SPEC.toml | --grid ... | list|show|resume|cancel (cli_sweep.py)
    cli_inspect.add_parser(add)  # dpd-desktop inspect / import-capture (cli_inspect.py)
    cli_arena.add_parser(add)  # dpd-desktop arena PROTOCOL (cli_arena.py)
    cli_loop.add_parser(add)  # dpd-desktop loop / loop-dataset (cli_loop.py)
    cli_deploy.add_parser(add)  # dpd-desktop export / finetune (cli_deploy.py)
    no_abbreviations(p)
    return p


def no_abbreviations(parser: argparse.ArgumentParser) -> None:
    """Refuse abbreviated options in ``parser`` and every sub-command below it (``--e 3`` was read as
    ``--epochs 3``, or as whichever option it happened to prefix once another was added)."""
    parser.allow_abbrev = False
    for action in parser._actions:  # argparse keeps its sub-parsers only here
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                no_abbreviations(sub)


class ConsoleObserver:
    """Prints a progress bar (stderr, at most ~10 updates/s) and a per-epoch metrics table (stdout)."""

    COLS = (("EPOCH", "ep", "{:>3d}"), ("LR", "lr", "{:>8.1e}"), ("TRAIN_LOSS", "train loss", "{:>10.3e}"),
            ("VAL_LOSS", "val loss", "{:>10.3e}"), ("VAL_NMSE", "val NMSE", "{:>9.3f}"),
            ("VAL_ACLR_AVG", "val ACLR", "{:>9.3f}"), ("VAL_EVM", "val EVM", "{:>8.3f}"),
            ("TEST_NMSE", "test NMSE", "{:>9.3f}"), ("EPOCH_SECONDS", "s", "{:>7.1f}"))

    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.header_done = False
        self.profile = "legacy-2.2.1"
        self.tty = sys.stderr.isatty()
        self.last_line = 0.0

    def __call__(self, ev) -> None:
        if isinstance(ev, E.RunStarted):
            print(f"run {ev.run_id} → {ev.run_dir}")
            self.profile = (ev.config or {}).get("metric_profile", "legacy-2.2.1")
            gain = (ev.setup or {}).get("gain") or {}
            gain_text = (f" · DPD target gain {gain['value']:.5f} ({gain.get('rule')})"
                         if ev.step == "dpd" and gain.get("value") is not None else "")
            print(f"metric profile: {self.profile}{gain_text}")
            kernel = read_kernel({"experiment": ev.config or {}, "device": (ev.setup or {}).get("device") or {}})
            print(f"device {ev.device} ({ev.device_name}) · CUDA graph: {ev.fast_path} · kernel {kernel.label} · "
                  f"{param_text(ev)} · {work_text(ev)}", flush=True)
            for note in kernel.notes:  # why fast fell back (also in log.txt and config.json device.kernel)
                print(f"kernel: {note}", flush=True)
            for line in poly_summary(ev):
                print(line, flush=True)
        elif isinstance(ev, E.BatchProgress) and not self.quiet:
            self._progress(ev)
        elif isinstance(ev, E.EpochEnded):
            self._epoch_row(ev)
        elif isinstance(ev, E.RunFinished):
            m = ev.test_metrics
            print(f"selected epoch {ev.best_epoch}; test [{ev.extra.get('metric_profile', self.profile)}] NMSE "
                  f"{m['NMSE']:.4f} dB, ACLR L/R/avg "
                  f"{m['ACLR_L']:.4f}/{m['ACLR_R']:.4f}/{m['ACLR_AVG']:.4f} dBc, EVM {m['EVM']:.4f} dB "
                  f"({ev.wall_s:.1f} s)")
            if ev.extra.get("rms_out_diff_db") is not None:
                d = ev.extra["rms_out_diff_db"]
                print(f"cascade RMS output with vs without DPD: {d:+.3f} dB" +
                      ("  WARNING: more than 0.5 dB — the DPD changes the gain" if ev.extra.get("power_warning")
                       else ""))
            print(equal_power_text(ev.extra))
            print(f"artifacts: {ev.run_dir}", flush=True)
        elif isinstance(ev, E.RunFailed):
            print(f"error: {ev.message}", file=sys.stderr, flush=True)
        elif isinstance(ev, E.RunCancelled):
            why = f" ({ev.reason})" if getattr(ev, "reason", "") else ""
            print(f"cancelled{why} after {ev.epochs_completed} epoch(s); run kept at {ev.run_dir}", file=sys.stderr)

    def _progress(self, ev) -> None:
        bar = "#" * int(30 * ev.batch / ev.batches)
        eta = f"{ev.eta_s:5.0f} s left" if ev.eta_s is not None else ""
        text = f"epoch {epoch_of(ev.epoch, ev.epochs)} [{bar:<30}] {ev.batch}/{ev.batches} {eta}"
        if self.tty:
            sys.stderr.write("\r" + text)
            sys.stderr.flush()
        elif time.monotonic() - self.last_line > 10 or ev.batch == ev.batches:
            self.last_line = time.monotonic()
            print(text, file=sys.stderr, flush=True)

    def _epoch_row(self, ev) -> None:
        if self.tty and not self.quiet:
            sys.stderr.write("\r" + " " * 80 + "\r")
        if not self.header_done:
            print(f"metrics: {self.profile}")
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


def equal_power_text(extra) -> str:
    """The DPD summary's equal-output-power line (training/gain.py ``equal_power_report``), "" when absent."""
    if extra.get("eqp_ACLR_without_dpd") is None:
        return ""
    ok = "" if extra.get("eqp_converged") else " (drive not matched)"
    return (f"output power {extra['out_power_with_dpd_db']:.2f} dB with DPD vs {extra['out_power_without_dpd_db']:.2f}"
            f" dB without; at equal output power (PA driven {extra['eqp_drive_db']:+.2f} dB{ok}): ACLR "
            f"{extra['eqp_ACLR_with_dpd']:.2f} vs {extra['eqp_ACLR_without_dpd']:.2f} dBc without DPD, EVM (gain-"
            f"normalised) {extra['eqp_EVM_with_dpd']:.2f} vs {extra['eqp_EVM_without_dpd']:.2f} dB")


def work_text(ev) -> str:
    """What one epoch trains on, for the run's first lines: frames and batches (a least-squares fit has neither: its
    samples are in the fit's own line)."""
    if (ev.config or {}).get("fit") == "ls":
        return "least-squares fit (no frames, no batches)"
    return f"{ev.n_train_frames} frames, {ev.batches_per_epoch} batches/epoch"


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
        if isinstance(ev, E.EpochEnded):
            self.rows.append(dict(ev.row))
            self.plots = ev.plots or self.plots
        elif isinstance(ev, E.RunFinished) and ev.plots is not None:
            self.plots = ev.plots


def write_plots(run_dir, rec: PlotRecorder) -> None:
    """Render the default plots to ``run_dir/plots`` (offscreen Qt); a failure is reported, never fatal."""
    try:
        from .gui.export import write_run_plots  # Qt: see the note under the imports

        paths = write_run_plots(Path(run_dir), rec.rows, rec.plots)
        print(f"plots: {len(paths)} PNG files in {Path(run_dir) / 'plots'}")
    except OSError as exc:  # e.g. "learning_curves.png: cannot write: No space left on device"
        print(f"warning: plots not written: {exc}", file=sys.stderr)
    except Exception as exc:  # noqa: BLE001
        print(f"warning: plots not written ({type(exc).__name__}: {exc})", file=sys.stderr)


def _config_from_args(a, step: str) -> ExperimentConfig:
    return ExperimentConfig(
        step=step, dataset=a.dataset, backbone=a.backbone, hidden_size=a.hidden_size, num_layers=a.num_layers,
        pa_run=getattr(a, "pa_run", None), epochs=a.epochs, batch_size=a.batch_size,
        batch_size_eval=a.batch_size_eval, lr=a.lr, lr_end=a.lr_end, decay_factor=a.decay_factor,
        patience=a.patience, weight_decay=a.weight_decay, grad_clip=a.grad_clip, frame_length=a.frame_length,
        stride=a.stride, seed=a.seed, loss=a.loss, device=a.device or "auto", threads=a.threads,
        max_train_samples=a.max_train_samples, preview_every=a.preview_every,
        allow_dataset_mismatch=bool(getattr(a, "allow_dataset_mismatch", False)), **poly_config_fields(a),
        metric_profile=a.metric_profile, gain_rule=getattr(a, "gain_rule", "peak"),
        kernel=getattr(a, "kernel", "reference"), **training_config_fields(a))


def _cancelled_before_start() -> int:
    print("cancelled before training started", file=sys.stderr, flush=True)
    return Exit.CANCELLED


def run_training(config: ExperimentConfig, workspace: Workspace, dataset=None, quiet: bool = False,
                 plots: bool = True, observers=(), accept_flags: bool | None = None) -> int:
    """Run one experiment headless with the console observer; returns the exit status (module docstring).

    The dataset (``config.dataset`` unless ``dataset``, an ``IQDataset``, is given) is loaded here, before the
    trainer exists, so that one that cannot be loaded is exit status 2 with no run folder. Ctrl+C
    (:data:`~dpd_desktop.process.CTRL_C`): the first cancels (before the trainer exists no run starts; then the
    trainer stops after the current batch), the second aborts (130). When the handler is not installed (a call from
    Python in the main thread), it is installed for the duration of the run. ``observers`` see the run's events
    too (after the console's). ``accept_flags`` not None: the dataset's inspector flags are checked before the
    trainer exists (cli_flags.py): an error flag is exit status 2 with no run folder unless ``accept_flags``, which
    records the accepted flags in ``config.extra`` (config.json).
    """
    from .training.ls_fit import make_trainer  # PyTorch: see the note under the imports
    from .training.trainer import load_dataset_for

    own_handler = not CTRL_C.installed and CTRL_C.install()
    try:
        if CTRL_C.pressed.is_set():
            return _cancelled_before_start()
        if dataset is None:
            # In line, after PyTorch is imported. Parsing the dataset on a thread while PyTorch imports did not pay:
            # `train-pa --dataset DPA_160MHz`, process start → first batch, medians of 4 rounds of 3–4 runs on the
            # 2-core development machine: 1.17/1.26/1.25/1.23 s in line, 1.26/1.54/1.26/1.46 s threaded (parsing and
            # importing take turns on the GIL).
            try:
                mark("dataset_load_start")
                dataset = load_dataset_for(config.dataset)
                dataset.spec.require_metrics(str(dataset.source))
            except (DatasetError, OSError) as exc:
                print(f"error: {exc}", file=sys.stderr, flush=True)
                return Exit.USAGE
        if accept_flags is not None:
            accepted = cli_flags.check_dataset(dataset, workspace, accept_flags)
            if accepted is None:
                return Exit.USAGE
            config.extra = cli_flags.with_accepted(config.extra, accepted)
        if CTRL_C.pressed.is_set():
            return _cancelled_before_start()
        rec = PlotRecorder()
        trainer = make_trainer(config, dataset=dataset, workspace=workspace,
                               observers=[ConsoleObserver(quiet), rec, *observers])
        CTRL_C.on_first(trainer.request_cancel, STOPPING)  # runs at once after a Ctrl+C while it was being built
        result = trainer.run()
    finally:
        CTRL_C.on_first(None)
        if own_handler:
            CTRL_C.uninstall()
    if result.state == "succeeded" and plots:
        if CTRL_C.pressed.is_set():
            print(f"plots skipped (Ctrl+C); artifacts: {result.run_dir}", file=sys.stderr)
        else:
            write_plots(result.run_dir, rec)
    if result.state == "failed" and result.run_dir is None:
        return Exit.USAGE  # refused before a run folder existed: a setting or input (device, PA run, …)
    return {"succeeded": Exit.OK, "failed": Exit.FAILED, "cancelled": Exit.CANCELLED}[result.state]


def _workspace(args) -> tuple[Workspace, bool]:
    """The workspace of the command line and whether the user named it (--workspace or $DPD_DESKTOP_WORKSPACE)."""
    if args.workspace:
        return Workspace(args.workspace), True
    return Workspace(), bool(os.environ.get("DPD_DESKTOP_WORKSPACE"))


def _window(ws: Workspace, **kw) -> int:
    """Open the window (Ctrl+C: :func:`dpd_desktop.gui.app.main` installs its own first action)."""
    from .gui.app import main as gui_main  # Qt: see the note under the imports

    CTRL_C.uninstall()
    return gui_main(workspace=ws, **kw)


@dataclass(frozen=True)
class Outcome:
    """What a command leaves: its exit status, and whether the process may end without the interpreter's teardown.

    ``skip_teardown`` is set by the headless commands, after which every artifact is written and closed: the
    teardown (module garbage collection, PyTorch's thread pools) then only delays the exit. Measured on the 2-core
    development machine, ``train-pa --dataset demo --epochs 1``, 4 runs each way: from the run's last mark to the
    process's end 0.38–0.65 s (median 0.55 s) with the teardown, 0.02–0.03 s with ``os._exit``.
    """

    status: int
    skip_teardown: bool = False


def _train(args, ws: Workspace) -> Outcome:
    cfg = _config_from_args(args, "pa" if args.command == "train-pa" else "dpd")
    try:
        cli_limits.with_limit_options(cfg, args, WorkspaceSettings.load(ws.root)).validate()
        preflight(cfg, ws)  # device, PA run: exit 2 before a dataset is read or a run folder exists
    except (ConfigError, SettingsError) as exc:
        print(f"error: {option_message(exc) if isinstance(exc, ConfigError) else exc}", file=sys.stderr)
        return Outcome(Exit.USAGE)
    return Outcome(run_training(cfg, ws, quiet=args.quiet, plots=not args.no_plots, accept_flags=args.accept_flags),
                   skip_teardown=True)


def _run_dpd(args, ws: Workspace) -> Outcome:
    from .export.dpd_export import DpdExportError, run_dpd  # PyTorch: see the note under the imports

    try:
        meta = run_dpd(ws, args.run, out=args.out, input_file=args.input, split=args.split, device=args.device,
                       overwrite=args.overwrite)
    except (DpdExportError, FileNotFoundError, ValueError) as exc:  # ValueError: OutputRefused (runs/outputs.py)
        print(f"error: {exc}", file=sys.stderr)
        return Outcome(Exit.USAGE)
    print(f"wrote {meta['samples']} samples of u = DPD(x) to {args.out} (+ {args.out}.meta.json)")
    return Outcome(Exit.OK, skip_teardown=True)


def main(argv=None) -> int:
    """Run the command that ``argv`` (default ``sys.argv[1:]``) names; returns its exit status (module docstring)."""
    return execute(argv).status


def execute(argv=None) -> Outcome:
    """:func:`main`, also saying whether the process may skip the interpreter's teardown (:class:`Outcome`)."""
    args = build_parser().parse_args(argv)
    if args.self_test:
        from .selftest import main as self_test  # PyTorch and Qt: see the note under the imports

        CTRL_C.uninstall()
        return Outcome(self_test(workspace=args.workspace), skip_teardown=True)
    cmd = args.command or "gui"
    if cmd not in TRAINING_COMMANDS and CTRL_C.installed:
        # only training stops cooperatively; run-dpd and runs keep Python's default Ctrl+C (KeyboardInterrupt,
        # exit status 3 through run(); run-dpd writes its files atomically); the window installs its own
        pressed = CTRL_C.pressed.is_set()
        CTRL_C.uninstall()
        if pressed:
            raise KeyboardInterrupt
    try:
        ws, named = _workspace(args)
        ws.check(create=cmd in TRAINING_COMMANDS)
    except WorkspaceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return Outcome(Exit.USAGE)
    if cmd == "gui":
        if detect_display() is Display.NONE:
            print(NO_DISPLAY_MESSAGE, file=sys.stderr)
            return Outcome(Exit.USAGE)
        return Outcome(_window(ws, dataset=getattr(args, "dataset", None)))  # no sub-command: no --dataset
    if cmd == "demo":
        cfg = ExperimentConfig(step="pa", dataset="demo", epochs=args.epochs, device=args.device, hidden_size=16,
                               frame_length=100, stride=4)
        if detect_display() is Display.SCREEN and not args.headless:
            return Outcome(_window(ws, dataset="demo", autostart_config=cfg))
        print("no display: running the demo headless (plots are written to the run folder)")
        return Outcome(run_training(cfg, ws), skip_teardown=True)
    if cmd in ("train-pa", "train-dpd"):
        return _train(args, ws)
    if cmd == "run-dpd":
        return _run_dpd(args, ws)
    if cmd == "coefficients":
        return Outcome(cli_poly.handle(args, ws))
    if cmd == "queue":
        return cli_queue.handle(args, ws, named)
    if cmd == "resume":
        return cli_resume.handle(args, ws)
    if cmd == "sweep":
        return cli_sweep.handle(args, ws)
    if cmd == "arena":
        return cli_arena.handle(args, ws)
    if cmd in cli_inspect.COMMANDS:
        return Outcome(cli_inspect.handle(args, ws))
    if cmd in cli_loop.COMMANDS:
        return Outcome(cli_loop.handle(args, ws), skip_teardown=True)
    if cmd in cli_deploy.COMMANDS:
        return cli_deploy.handle(args, ws)
    return Outcome(cli_runs.handle(args, ws, named))


def run() -> None:
    """Process entry point (console script ``dpd-desktop`` and ``python -m dpd_desktop``): :func:`main`, then exit.

    Ctrl+C is cooperative from here on (:data:`~dpd_desktop.process.CTRL_C`: first cancels, second aborts); a
    KeyboardInterrupt that still gets through (Python's default handler, before this point or in ``runs`` and
    ``run-dpd``) is a plain cancel (exit status 3), never a traceback; nor is a standard output closed by its reader
    (exit status 0). The process ends with ``os._exit`` when the command allows it (:attr:`Outcome.skip_teardown`).
    """
    prefer_passive_wait()  # before PyTorch loads OpenMP: waiting threads sleep (training/cpu_threads.py)
    quiet_broken_pipe()  # `dpd-desktop … | head`: every print of every thread, not only the main one's
    CTRL_C.install()
    mark("cli_start")
    try:
        outcome = execute()
    except KeyboardInterrupt:
        print("\ncancelled", file=sys.stderr)
        outcome = Outcome(Exit.CANCELLED)
    except BrokenPipeError:  # stdout closed by its reader (`dpd-desktop runs | head`): what was wanted was read
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at the final flush
        outcome = Outcome(Exit.OK)
    if outcome.skip_teardown:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(outcome.status))
    sys.exit(int(outcome.status))
