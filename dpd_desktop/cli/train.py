"""``dpd-desktop train-pa`` / ``train-dpd``: the training options, the console's progress and metrics table, and
:func:`run_training`, the one headless run of an experiment.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..config import (AUGMENTS, DPD_LEARNING, EVALUATIONS, GAIN_RULES, KERNELS, LOSSES, LR_SCHEDULES,
                      METRIC_PROFILES, OOB_SIDES, PLATEAU_THRESHOLD_MODES, SELECTIONS, ConfigError, ExperimentConfig,
                      default_hidden_size)
from ..data import DatasetError
from ..kernels.record import read_kernel
from ..process import CTRL_C, Exit
from ..runs import events as E
from ..runs.labels import epoch_of
from ..runs.settings import SettingsError, WorkspaceSettings
from ..runs.workspace import Workspace
from ..timing import Throttle, mark
from .checks import option_message, preflight
from .common import Outcome
from .flags import add_accept_option, check_dataset, with_accepted
from .limits import add_limit_options, with_limit_options
from .poly import add_poly_options, poly_config_fields, poly_summary

# PyTorch (the trainer) and Qt (the plots) are imported inside run_training / write_plots: see cli/entry.py.

STOPPING = "stopping after the current batch (Ctrl+C again to abort)…"


def add_training_options(p: argparse.ArgumentParser, step: str) -> None:
    """The options of train-pa / train-dpd (also queue add and sweep's --base), each with its default from
    config.py's :class:`~dpd_desktop.config.ExperimentConfig`."""
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
    p.add_argument("--loss", default=d.loss, choices=LOSSES,
                   help="l2 = mean squared error (the reference's), l1 = mean absolute error (default %(default)s)")
    p.add_argument("--device", default=None, help=f"auto, cpu, cuda or cuda:N (default: the workspace's, else "
                   f"{d.device})")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads, at most the core count (default: "
                   "the workspace's, else PyTorch's)")
    add_limit_options(p)
    p.add_argument("--max-train-samples", type=int, default=None,
                   help="train on the first N samples only (default: the whole training split)")
    p.add_argument("--preview-every", type=int, default=None,
                   help="live batch preview every N batches (default: none, plots once per epoch)")
    p.add_argument("--no-plots", action="store_true", help="do not write plots/*.png at the end (default: written)")
    p.add_argument("--quiet", action="store_true", help="no progress bar (default: shown)")
    add_accept_option(p)
    add_poly_options(p)
    _add_schedule_options(p, step)


def _start_stop(text: str) -> list[int]:
    try:
        a, b = (int(t) for t in str(text).split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected START,STOP (two integers), got {text!r}") from None
    return [a, b]


def _add_schedule_options(p: argparse.ArgumentParser, step: str) -> None:
    d = ExperimentConfig()
    g = p.add_argument_group("delta thresholds, schedule, learning and protocol options")
    g.add_argument("--thx", type=float, default=d.thx,
                   help="delta threshold on |Δx|, input units (deltagru, tres_deltagru; 0: dense; default %(default)s)")
    g.add_argument("--thh", type=float, default=d.thh,
                   help="delta threshold on |Δh|, state units (deltagru, tres_deltagru; 0: dense; default %(default)s)")
    g.add_argument("--lr-schedule", choices=LR_SCHEDULES, default=d.lr_schedule,
                   help="plateau (ReduceLROnPlateau, the reference's) or cosine to --lr-end (default %(default)s)")
    g.add_argument("--warmup-epochs", type=int, default=d.warmup_epochs,
                   help="linear LR warm-up, epochs (default %(default)s)")
    g.add_argument("--plateau-threshold", type=float, default=d.plateau_threshold,
                   help="plateau schedule: the least improvement that counts, relative or dB (see "
                        "--plateau-threshold-mode; default %(default)s)")
    g.add_argument("--plateau-threshold-mode", choices=PLATEAU_THRESHOLD_MODES, default=d.plateau_threshold_mode,
                   help="rel: value < best·(1 − t), the reference's; abs: value < best − t dB (default %(default)s)")
    g.add_argument("--power-weight", type=float, default=d.power_weight,
                   help="weight of the output-power term of the loss (0: off; training/losses.py; default "
                        "%(default)s)")
    g.add_argument("--oob-weight", type=float, default=d.oob_weight,
                   help="the squared error outside the main channel counts 1 + W times (0: off; needs the "
                        "dataset's input_signal_fs and bw_main_ch; training/losses.py; default %(default)s)")
    g.add_argument("--oob-side", choices=OOB_SIDES, default=d.oob_side,
                   help="the out-of-band term counts both sides of the main channel, or twice the worse side of "
                        "each batch (the side of the worse-side ACLR) (default %(default)s)")
    g.add_argument("--augment", choices=AUGMENTS, default=d.augment,
                   help="phase: every epoch turns the training input and target by a phase ramp of a random start "
                        "and one turn over the series (training/augment.py; default %(default)s)")
    g.add_argument("--loss-window", type=_start_stop, default=None, metavar="START,STOP",
                   help="the loss counts these samples of each frame only, [START, STOP) (default: all)")
    g.add_argument("--no-test-every-epoch", dest="test_every_epoch", action="store_false",
                   help="evaluate the test split for the selected checkpoint only (default: every epoch)")
    if step == "dpd":  # by step, not by program name: queue add and sweep --base build these parsers too
        g.add_argument("--dpd-learning", choices=DPD_LEARNING, default=d.dpd_learning,
                       help="direct (through the frozen PA) or ila (indirect learning) (default %(default)s)")
        g.add_argument("--gain-value", type=float, default=None,
                       help="fixed target gain g, linear, instead of --gain-rule (default: the rule's)")
        g.add_argument("--peak-limit", type=float, default=None,
                       help="limit |u| of the DPD output to this magnitude, linear (default: none)")
        g.add_argument("--target-cfr-db", type=float, default=None, metavar="DB",
                       help="reduce the target g·x's peaks to max|y_train| + DB by repeated clipping and filtering "
                            "to the main channel (training/cfr.py; -20 to 6; direct learning, gradient fit; the "
                            "run's metrics are then against that target; default: none)")
        g.add_argument("--target-cfr-iterations", type=int, default=d.target_cfr_iterations, metavar="N",
                       help="clip-and-filter rounds of --target-cfr-db, 1 to 100 (default %(default)s)")
        g.add_argument("--target-cfr-band-hz", type=float, default=None, metavar="HZ",
                       help="the band --target-cfr-db's filter keeps, [-HZ/2, HZ/2), at most the sample rate "
                            "(default: the main channel)")
        g.add_argument("--selection", choices=SELECTIONS, default=d.selection,
                       help="checkpoint selection (power-gated: output power within --power-gate-db first; default "
                            "%(default)s)")
        g.add_argument("--power-gate-db", type=float, default=d.power_gate_db,
                       help="power-gated selection: accepted output power error, dB (default %(default)s)")
        g.add_argument("--evaluation", choices=EVALUATIONS, default=d.evaluation,
                       help="segments (the reference's) or overlap (DPD windows, continuous PA) (default "
                            "%(default)s)")


def _schedule_config_fields(a) -> dict:
    """ExperimentConfig fields from the parsed options of :func:`_add_schedule_options`."""
    out = {k: getattr(a, k) for k in ("thx", "thh", "lr_schedule", "warmup_epochs", "plateau_threshold",
                                      "plateau_threshold_mode", "power_weight", "oob_weight", "oob_side", "augment",
                                      "loss_window", "test_every_epoch")}
    for k in ("dpd_learning", "gain_value", "peak_limit", "target_cfr_db", "target_cfr_iterations",
              "target_cfr_band_hz", "selection", "power_gate_db", "evaluation"):
        if hasattr(a, k):
            out[k] = getattr(a, k)
    return out


class ConsoleObserver:
    """Prints a progress bar (stderr, at most ~10 updates/s) and a per-epoch metrics table (stdout)."""

    COLS = (("EPOCH", "ep", "{:>3d}"), ("LR", "lr", "{:>8.1e}"), ("TRAIN_LOSS", "train loss", "{:>10.3e}"),
            ("VAL_LOSS", "val loss", "{:>10.3e}"), ("VAL_NMSE", "val NMSE", "{:>9.3f}"),
            ("VAL_ACLR_AVG", "val ACLR", "{:>9.3f}"), ("VAL_EVM", "val EVM", "{:>8.3f}"),
            ("TEST_NMSE", "test NMSE", "{:>9.3f}"), ("EPOCH_SECONDS", "s", "{:>7.1f}"))

    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.header_done = False
        self.profile = ExperimentConfig.metric_profile
        self.tty = sys.stderr.isatty()
        self._lines = Throttle(10.0)  # without a terminal: a progress line every 10 s

    def __call__(self, ev) -> None:
        if isinstance(ev, E.RunStarted):
            print(f"run {ev.run_id} → {ev.run_dir}")
            self.profile = (ev.config or {}).get("metric_profile", ExperimentConfig.metric_profile)
            gain = (ev.setup or {}).get("gain") or {}
            gain_text = (f" · DPD target gain {gain['value']:.5f} ({gain.get('rule')})"
                         if ev.step == "dpd" and gain.get("value") is not None else "")
            print(f"metric profile: {self.profile}{gain_text}")
            cfr = (ev.setup or {}).get("target_cfr")
            if ev.step == "dpd" and cfr:
                tr = cfr["splits"]["train"]
                print(f"target: g·x with crest-factor reduction to {cfr['limit_db']:+.2f} dB re max|y_train| "
                      f"({cfr['iterations']} rounds, band {cfr['band_hz'] / 1e6:g} MHz): power "
                      f"{tr['power_change_db']:+.3f} dB, error {tr['error_db']:.1f} dB against g·x, peak "
                      f"{tr['peak_before_db']:+.2f} -> {tr['peak_after_db']:+.2f} dB re the limit; the metrics "
                      f"below are against this target")
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
            if ev.extra.get("target_cfr_db") is not None:
                print(f"  (NMSE and EVM against the crest-factor-reduced target, itself "
                      f"{ev.extra['target_cfr_error_db']:.1f} dB from g·x on the test split)")
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
        elif self._lines.ready(final=ev.batch == ev.batches):
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
        from ..gui.export import write_run_plots  # Qt: see the note under the imports

        paths = write_run_plots(Path(run_dir), rec.rows, rec.plots)
        print(f"plots: {len(paths)} PNG files in {Path(run_dir) / 'plots'}")
    except OSError as exc:  # e.g. "learning_curves.png: cannot write: No space left on device"
        print(f"warning: plots not written: {exc}", file=sys.stderr)
    except Exception as exc:  # noqa: BLE001
        print(f"warning: plots not written ({type(exc).__name__}: {exc})", file=sys.stderr)


def config_from_args(a, step: str) -> ExperimentConfig:
    """The :class:`~dpd_desktop.config.ExperimentConfig` of parsed :func:`add_training_options` (not validated);
    an option the command lacks (train-pa has no --pa-run, --gain-rule) takes the configuration's default."""
    given = {k: getattr(a, k) for k in (
        "dataset", "backbone", "hidden_size", "num_layers", "epochs", "batch_size", "batch_size_eval", "lr", "lr_end",
        "decay_factor", "patience", "weight_decay", "grad_clip", "frame_length", "stride", "seed", "loss", "threads",
        "max_train_samples", "preview_every", "metric_profile")}
    given.update({k: getattr(a, k) for k in ("pa_run", "allow_dataset_mismatch", "gain_rule", "kernel")
                  if hasattr(a, k)})
    return ExperimentConfig(step=step, device=a.device or ExperimentConfig.device, **given,
                            **poly_config_fields(a), **_schedule_config_fields(a))


def _cancelled_before_start() -> int:
    print("cancelled before training started", file=sys.stderr, flush=True)
    return Exit.CANCELLED


def run_training(config: ExperimentConfig, workspace: Workspace, dataset=None, quiet: bool = False,
                 plots: bool = True, observers=(), accept_flags: bool | None = None) -> int:
    """Run one experiment headless with the console observer; returns the exit status (module docstring).

    The dataset (``config.dataset`` unless an ``IQDataset`` is given) is loaded before the trainer exists: one that
    cannot be loaded is exit status 2 with no run folder. Ctrl+C (:data:`~dpd_desktop.process.CTRL_C`, installed for
    the run when it is not): the first cancels, the second aborts (130). ``observers`` see the events after the
    console; without ``plots`` the run computes no plot data (its events carry none). ``accept_flags`` not None:
    the inspector's flags are checked first (cli/flags.py): an error flag is exit status 2 unless ``accept_flags``,
    which records them in ``config.extra``.
    """
    from ..training.ls_fit import make_trainer  # PyTorch: see the note under the imports
    from ..training.trainer import load_dataset_for

    own_handler = not CTRL_C.installed and CTRL_C.install()
    try:
        if CTRL_C.pressed.is_set():
            return _cancelled_before_start()
        if dataset is None:
            # in line, after PyTorch is imported: a thread parsing it during the import did not pay (benchmarks/results/2026-12-04-notes-core.md)
            try:
                mark("dataset_load_start")
                dataset = load_dataset_for(config.dataset)
                dataset.spec.require_metrics(str(dataset.source))
            except (DatasetError, OSError) as exc:
                print(f"error: {exc}", file=sys.stderr, flush=True)
                return Exit.USAGE
        if accept_flags is not None:
            accepted = check_dataset(dataset, workspace, accept_flags)
            if accepted is None:
                return Exit.USAGE
            config.extra = with_accepted(config.extra, accepted)
        if CTRL_C.pressed.is_set():
            return _cancelled_before_start()
        rec = PlotRecorder()
        trainer = make_trainer(config, dataset=dataset, workspace=workspace,
                               observers=[ConsoleObserver(quiet), rec, *observers], plot_data=plots)
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


def handle(args, ws: Workspace) -> Outcome:
    """``train-pa`` / ``train-dpd``."""
    cfg = config_from_args(args, "pa" if args.command == "train-pa" else "dpd")
    try:
        with_limit_options(cfg, args, WorkspaceSettings.load(ws.root)).validate()
        preflight(cfg, ws)  # device, PA run: exit 2 before a dataset is read or a run folder exists
    except (ConfigError, SettingsError) as exc:
        print(f"error: {option_message(exc) if isinstance(exc, ConfigError) else exc}", file=sys.stderr)
        return Outcome(Exit.USAGE)
    return Outcome(run_training(cfg, ws, quiet=args.quiet, plots=not args.no_plots, accept_flags=args.accept_flags),
                   skip_teardown=True)
