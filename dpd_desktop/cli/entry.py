"""Command line: ``dpd-desktop`` (the window) and its headless sub-commands on the same core.

Sub-commands (each module's ``--help`` has its options): ``demo``, ``train-pa``, ``train-dpd``, ``run-dpd``,
``runs [pin|unpin|clean|evaluate]`` (cli/runs.py), ``queue`` (cli/queue.py), ``resume`` (cli/resume.py), ``sweep``
(cli/sweep.py), ``arena`` (cli/arena.py), ``inspect`` / ``import-capture`` (cli/inspect.py), ``loop`` /
``loop-dataset`` (cli/loop.py), ``export`` / ``finetune`` (cli/deploy.py), ``--self-test`` (dpd_desktop.selftest).
``--workspace DIR`` is a global option, placed before the sub-command (it is accepted after it too).

Exit status (:class:`dpd_desktop.process.Exit`):
    0  success
    1  the run failed (its run folder records why: status.json, log.txt)
    2  bad arguments, or unusable input found before a run starts (unloadable or error-flagged dataset without
       --accept-flags, unusable workspace, PA/DPD run not found, no display for the window)
    3  cancelled (Ctrl+C: the run stops after the current batch and stays readable)
   130 aborted by a second Ctrl+C
"""
from __future__ import annotations

import argparse
import os
import sys

from .. import __version__
from ..config import ExperimentConfig
from ..process import CTRL_C, NO_DISPLAY_MESSAGE, Display, Exit, detect_display, quiet_broken_pipe
from ..runs.workspace import Workspace, WorkspaceError
from ..timing import mark
from ..training.cpu_threads import prefer_passive_wait
from . import arena, deploy, inspect, loop, poly, queue, resume, runs, sweep, train
from .common import Outcome

# PyTorch (the trainer, run-dpd) and Qt (the window, the plots) are imported inside the commands that need them:
# `--help` and `runs` stay fast and the Ctrl+C handler that run() installs comes first (benchmarks/results/2026-12-04-notes-core.md).

TRAINING_COMMANDS = ("train-pa", "train-dpd", "demo", "resume", "loop", "finetune")


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
    train.add_training_options(add("train-pa", help="train a PA behavioral model headless"), "pa")
    train.add_training_options(add("train-dpd", help="train a DPD through a frozen PA headless (--dataset: the PA "
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
    runs.add_parser(add)
    poly.add_parser(add)
    queue.add_parser(add)  # dpd-desktop queue add|list|move|cancel|run (cli/queue.py)
    resume.add_parser(add)
    sweep.add_parser(add)  # dpd-desktop sweep SPEC.toml | --grid ... | list|show|resume|cancel (cli/sweep.py)
    inspect.add_parser(add)  # dpd-desktop inspect / import-capture (cli/inspect.py)
    arena.add_parser(add)  # dpd-desktop arena PROTOCOL (cli/arena.py)
    loop.add_parser(add)  # dpd-desktop loop / loop-dataset (cli/loop.py)
    deploy.add_parser(add)  # dpd-desktop export / finetune (cli/deploy.py)
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


def _workspace(args) -> tuple[Workspace, bool]:
    """The workspace of the command line and whether the user named it (--workspace or $DPD_DESKTOP_WORKSPACE)."""
    if args.workspace:
        return Workspace(args.workspace), True
    return Workspace(), bool(os.environ.get("DPD_DESKTOP_WORKSPACE"))


def _window(ws: Workspace, **kw) -> int:
    """Open the window (Ctrl+C: :func:`dpd_desktop.gui.app.main` installs its own first action)."""
    from ..gui.app import main as gui_main  # Qt: see the note under the imports

    CTRL_C.uninstall()
    return gui_main(workspace=ws, **kw)


def _run_dpd(args, ws: Workspace) -> Outcome:
    from ..export.dpd_export import DpdExportError, run_dpd  # PyTorch: see the note under the imports

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
        from ..selftest import main as self_test  # PyTorch and Qt: see the note under the imports

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
        return Outcome(train.run_training(cfg, ws), skip_teardown=True)
    if cmd in ("train-pa", "train-dpd"):
        return train.handle(args, ws)
    if cmd == "run-dpd":
        return _run_dpd(args, ws)
    if cmd == "coefficients":
        return Outcome(poly.handle(args, ws))
    if cmd == "queue":
        return queue.handle(args, ws, named)
    if cmd == "resume":
        return resume.handle(args, ws)
    if cmd == "sweep":
        return sweep.handle(args, ws)
    if cmd == "arena":
        return arena.handle(args, ws)
    if cmd in inspect.COMMANDS:
        return Outcome(inspect.handle(args, ws))
    if cmd in loop.COMMANDS:
        return Outcome(loop.handle(args, ws), skip_teardown=True)
    if cmd in deploy.COMMANDS:
        return deploy.handle(args, ws)
    return Outcome(runs.handle(args, ws, named))


def run() -> None:
    """Process entry point (console script ``dpd-desktop`` and ``python -m dpd_desktop``): :func:`main`, then exit.

    Ctrl+C is cooperative from here on (:data:`~dpd_desktop.process.CTRL_C`); a KeyboardInterrupt that gets through
    is exit status 3 and a standard output closed by its reader exit status 0, never a traceback. Ends with
    ``os._exit`` when the command allows it (:attr:`Outcome.skip_teardown`).
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
