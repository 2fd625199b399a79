"""``dpd-desktop queue add|list|move|cancel|run``: the workspace's run queue (lab/queue.py, lab/supervisor.py).

``queue add`` inspects the dataset first (cli/flags.py): an error flag refuses the entry unless --accept-flags,
which records the flags in the entry's configuration (its run's config.json).
``queue run`` runs the entries, each in a child process, one at a time per device lane, until none is left for its
lanes (``--watch``: waits for new ones until Ctrl+C). Ctrl+C: the first stops the running entries after their
current batch and starts no other; the second aborts. Queued runs write no plots/*.png.

Exit status: 0 done (``run``: whatever the entries' outcomes, which ``queue list`` shows), 2 bad arguments or an
unusable queue file (nothing queued), 3 ``run`` stopped by Ctrl+C.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..config import DEVICES, ConfigError
from ..process import CTRL_C, Exit
from ..runs.labels import epoch_of
from ..runs.settings import SettingsError, WorkspaceSettings
from ..runs.workspace import WorkspaceError
from . import flags
from .common import Outcome
from .limits import with_limit_options
from .train import add_training_options, config_from_args

STOPPING = "stopping the queue: the running entries stop after their current batch (Ctrl+C again to abort)…"


def add_parser(add) -> argparse.ArgumentParser:
    """Register ``queue`` with cli/entry.py's ``add(name, **kw)``."""

    q = add("queue", help="the run queue: add, list, move, cancel, run")
    sub = q.add_subparsers(dest="queue_command", required=True)
    a = sub.add_parser("add", help="queue a PA or DPD run (the options of train-pa / train-dpd)")
    steps = a.add_subparsers(dest="step", required=True)
    add_training_options(steps.add_parser("pa", help="queue a PA run"), "pa")
    dpd = steps.add_parser("dpd", help="queue a DPD run (--pa-run RUN, or --after ENTRY: a queued PA entry)")
    add_training_options(dpd, "dpd")
    for action in dpd._actions:  # --pa-run or --after: the check is in handle()
        if action.dest == "pa_run":
            action.required = False
            action.help = "PA run id (in the workspace) or PA run folder (default: none; give it or --after)"
    dpd.add_argument("--after", type=int, default=None, metavar="ENTRY",
                     help="wait for this queued PA entry and train through its run (default: none; give it or "
                          "--pa-run)")
    sub.add_parser("list", help="list the entries")
    m = sub.add_parser("move", help="move a queued entry to a position (1: next)")
    m.add_argument("entry", type=int)
    m.add_argument("position", type=_position)
    c = sub.add_parser("cancel", help="cancel an entry (a running one stops after its current batch)")
    c.add_argument("entry", type=int)
    r = sub.add_parser("run", help="run the queued entries, each in its own process")
    r.add_argument("--device", action="append", default=None, metavar="D", type=_lane,
                   help="serve only this device lane (cpu, cuda:0, …; repeatable; default: every lane)")
    r.add_argument("--watch", action="store_true", help="keep waiting for new entries (until Ctrl+C)")
    return q


def _position(text: str) -> int:
    """A queue position, 1-based (a larger one than the queue holds means the end)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer of at least 1 (1: next), got {text!r}")
    return value


def _lane(text: str) -> str:
    """A device lane of ``queue run --device`` (the device names of config.py)."""
    d = str(text).strip().lower()
    if not (d in DEVICES or d.startswith("cuda:") and d[5:].isdigit()):
        raise argparse.ArgumentTypeError(f"expected auto, cpu, cuda or cuda:N, got {text!r}")
    return d


def _open_queue(ws):
    from ..lab.queue import RunQueue

    return RunQueue(ws.root)


def handle(args, ws, named: bool = False):
    """Run ``queue …``; returns an Outcome. ``named``: the user named the workspace (a missing one is an error)."""
    from ..lab.queue import QueueError

    cmd = args.queue_command
    try:
        if cmd == "add":
            return Outcome(_add(args, ws))
        if cmd == "run":
            return Outcome(_run(args, ws), skip_teardown=True)
        if not ws.root.is_dir():  # reading commands create nothing (a mistyped --workspace)
            if cmd == "list" and not named:
                print(f"the queue is empty (workspace {ws.root})", file=sys.stderr)
                return Outcome(Exit.OK)
            raise WorkspaceError(f"workspace {ws.root}: no such folder")
        with _open_queue(ws) as q:
            if cmd == "list":
                _print(q.entries())
            elif cmd == "move":
                entries = q.move(args.entry, args.position)
                moved = next(e for e in entries if e.id == args.entry)
                print(f"entry {moved.id} moved to position {moved.position}")
                _print(entries)
            elif cmd == "cancel":
                e = q.cancel(args.entry)
                print(f"entry {e.id}: " + ("stops after its current batch" if e.state == "running" else e.state))
        return Outcome(Exit.OK)
    except (QueueError, ConfigError, SettingsError, WorkspaceError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return Outcome(Exit.USAGE)


def _add(args, ws) -> int:
    step = args.step
    if step == "dpd" and (args.pa_run is None) == (args.after is None):
        print("error: queue add dpd: give --pa-run RUN or --after ENTRY (one of them)", file=sys.stderr)
        return Exit.USAGE
    settings = WorkspaceSettings.load(ws.root) if ws.root.is_dir() else WorkspaceSettings()
    cfg = with_limit_options(config_from_args(args, step), args, settings)  # as train-pa does
    if step == "dpd" and args.after is not None:
        cfg.pa_run = None
    if cfg.dataset != "demo" and not Path(cfg.dataset).expanduser().exists():
        print(f"error: dataset {cfg.dataset}: no such file or folder", file=sys.stderr)
        return Exit.USAGE
    if cfg.dataset != "demo":  # the entry runs later, from another process and maybe another working folder
        cfg.dataset = os.path.abspath(Path(cfg.dataset).expanduser())
    accepted = flags.check_reference(cfg.dataset, ws, args.accept_flags)  # before the entry exists
    if accepted is None:
        return Exit.USAGE
    cfg.extra = flags.with_accepted(cfg.extra, accepted)  # the entry's child records them in config.json
    if cfg.pa_run:
        try:
            ws.resolve(cfg.pa_run)
        except FileNotFoundError as exc:
            print(f"error: --pa-run: {exc}", file=sys.stderr)
            return Exit.USAGE
        if (Path(cfg.pa_run).expanduser() / "config.json").exists():  # given as a folder, not a run id
            cfg.pa_run = os.path.abspath(Path(cfg.pa_run).expanduser())
    ws.check(create=True)
    with _open_queue(ws) as q:
        e = q.add(cfg, after=getattr(args, "after", None))
    print(f"entry {e.id} queued at position {e.position}: {e.label()} on {e.device}"
          + (f", after entry {e.after}" if e.after is not None else ""))
    return Exit.OK


QUEUE_HEADER = f"{'ID':>4s} {'POS':>4s}  {'STATE':11s} {'DEVICE':7s} {'EXPERIMENT':40s} RUN"


def _print(entries) -> None:
    if not entries:
        print("the queue is empty", file=sys.stderr)
        return
    print(QUEUE_HEADER)
    for e in entries:
        run = e.run_id or (f"after entry {e.after}" if e.after is not None and e.state == "queued" else "")
        label = e.label() + (f" · {e.group_words()}" if e.group is not None else "")  # trains in one child with it
        line = f"{e.id:4d} {e.position:4d}  {e.state:11s} {e.device:7s} {label:40s} {run}"
        print(line + (f"  — {e.message}" if e.message and e.state != "queued" else ""))


class _Console:
    """The supervisor's observer on the command line: one line per entry start and end, and per epoch."""

    def __call__(self, entry, ev) -> None:
        from ..lab.supervisor import EntryEnded, EntryStarted
        from ..runs import events as E

        if isinstance(ev, EntryStarted):
            print(f"entry {entry.id}: {entry.label()} on {entry.device} (pid {ev.pid})", flush=True)
        elif isinstance(ev, E.RunStarted):
            print(f"entry {entry.id}: run {ev.run_id} → {ev.run_dir}", flush=True)
        elif isinstance(ev, E.EpochEnded):
            value = ev.row.get(ev.selection_metric)
            unit = "dBc" if "ACLR" in ev.selection_metric else "dB"
            text = f"{value:.4f} {unit}" if isinstance(value, (int, float)) else ""
            print(f"entry {entry.id}: epoch {epoch_of(ev.epoch, ev.epochs)} {ev.selection_metric} {text}"
                  + (" (best)" if ev.is_best else ""), flush=True)
        elif isinstance(ev, EntryEnded):
            print(f"entry {entry.id}: {ev.state}" + (f" — {ev.message}" if ev.message else ""), flush=True)


def _run(args, ws) -> int:
    from ..lab.supervisor import Supervisor

    ws.check(create=True)
    sup = Supervisor(ws, lanes=args.device, observers=[_Console()])
    own = not CTRL_C.installed and CTRL_C.install()
    if CTRL_C.installed:
        CTRL_C.on_first(sup.request_stop, STOPPING)
    try:
        ends = sup.run(watch=args.watch)
    finally:
        CTRL_C.on_first(None)
        if own:
            CTRL_C.uninstall()
    if not ends:
        with _open_queue(ws) as q:
            queued = [e for e in q.entries() if e.state == "queued"]
        waiting = len(queued)
        swept = sum(bool(e.config.extra.get("sweep")) for e in queued)  # only their sweep runs them (lab/queue.py)
        print("nothing to run" if not waiting else
              f"nothing ready: {waiting} queued entr{'y waits' if waiting == 1 else 'ies wait'} (for a running "
              f"entry's lane or its PA entry" + (f"; {swept} of a sweep: only the sweep runs them, sweep resume"
                                                 if swept else "") + ")", file=sys.stderr)
    return Exit.CANCELLED if sup.stop_requested else Exit.OK
