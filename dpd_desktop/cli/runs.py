"""``dpd-desktop runs [list|pin|unpin|clean|report|evaluate]``: the workspace's runs, read through the index
(runs/index.py), and their retention. Each sub-action is one entry of :data:`ACTIONS`: ``name →
(add_arguments(parser), handler(args, ws) -> exit status)``; ``--json`` lists every field of
:class:`~dpd_desktop.runs.index.IndexedRun`.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Callable

from . import evaluate as evaluate_cmd
from ..process import Exit
from ..runs import retention
from ..runs.index import RunIndex, quant_text
from ..runs.labels import dataset_label, format_duration
from ..runs.settings import SettingsError, WorkspaceSettings
from ..runs.states import DAMAGED, RUN_STATES, UNREADABLE
from ..runs.writer import set_pinned

STATE_CHOICES = (*RUN_STATES, UNREADABLE, DAMAGED)
_SUPPRESS_WS = dict(default=argparse.SUPPRESS, help="workspace folder (a global option; accepted here too)")


# ------------------------------------------------------------------------------------------------ list
def _add_list(p: argparse.ArgumentParser, top: bool = False) -> None:
    d = {} if top else dict(default=argparse.SUPPRESS)  # a sub-action must not reset what `runs --json list` set
    p.add_argument("--step", choices=("pa", "dpd"), help="only PA or only DPD runs", **({"default": None} | d))
    p.add_argument("--state", choices=STATE_CHOICES, action="append",
                   help="only runs in this state (repeat for several)", **({"default": None} | d))
    p.add_argument("--json", action="store_true", help="one JSON array of every field, for programs",
                   **({"default": False} | d))


def _cell(v, fmt: str = "{:.2f}") -> str:
    return "-" if v is None else fmt.format(v)


COLUMNS = (("RUN", 40), ("STEP", 4), ("FAMILY", 8), ("H", 4), ("STATE", 11), ("PIN", 4), ("DATASET", 20),
           ("EP", 3), ("VAL NMSE", 8), ("VAL ACLR", 8), ("TEST NMSE", 9), ("TEST ACLR", 9), ("QUANT", 9),
           ("Q ACLR", 7), ("PROFILE", 12),
           ("PARAMS", 7), ("MACS/S", 7), ("TIME", 8), ("KERNEL", 16))


def table_row(row) -> list[str]:
    """The text cells of one index row, in :data:`COLUMNS` order (NMSE in dB, ACLR in dBc; KERNEL: the recurrence
    kernels that ran, kernels/record.py ``KernelRun.label``; QUANT / Q ACLR: the bit widths and test ACLR of the
    quantised DPD through the frozen PA, runs/index.py ``shown_quantized``)."""
    return [row.run_id, row.step, row.family, _cell(row.hidden_size, "{}"), row.state,
            "kept" if row.pinned else "-", dataset_label(row)[:20], _cell(row.best_epoch, "{}"),
            _cell(row.val_nmse), _cell(row.val_aclr_avg), _cell(row.test_nmse), _cell(row.test_aclr_avg),
            quant_cell(row), _cell(row.quant_test_aclr_avg), row.metric_profile or "-", _cell(row.n_params, "{}"),
            _cell(row.macs_per_sample, "{}"),
            format_duration(row.wall_s), row.kernel or "-"]


def quant_cell(row) -> str:
    """runs/index.py ``quant_text``, "-" when empty."""
    return quant_text(row) or "-"


def _format(cells: list[str]) -> str:
    out = []
    for (name, width), c in zip(COLUMNS, cells):
        right = name in ("H", "EP", "VAL NMSE", "VAL ACLR", "TEST NMSE", "TEST ACLR", "Q ACLR", "PARAMS", "MACS/S",
                         "TIME")
        out.append(c.rjust(width) if right else c.ljust(width))
    return " ".join(out).rstrip()


def _open_index(ws) -> RunIndex:
    return RunIndex.open(ws)


def _list(args, ws) -> int:
    if not ws.root.is_dir():
        if getattr(args, "workspace_named", False):
            print(f"error: workspace {ws.root}: no such folder", file=sys.stderr)
            return Exit.USAGE
        print(f"no runs yet (workspace {ws.root})", file=sys.stderr)
        return Exit.OK
    try:
        with _open_index(ws) as idx:
            rows = idx.runs(step=getattr(args, "step", None), state=getattr(args, "state", None))
    except OSError as exc:
        print(f"error: workspace {ws.root}: cannot list {ws.runs_dir} ({exc.strerror or exc})", file=sys.stderr)
        return Exit.USAGE
    if getattr(args, "json", False):
        print(json.dumps([r.to_dict() for r in rows], indent=1))
        return Exit.OK
    if not rows:
        print(f"no runs in {ws.runs_dir}" + (" matching the filters" if args.step or args.state else ""),
              file=sys.stderr)
        return Exit.OK
    print(_format([name for name, _ in COLUMNS]))
    for r in rows:
        print(_format(table_row(r)))
    return Exit.OK


# ------------------------------------------------------------------------------------------------ pin / unpin
def _add_pin(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", nargs="+", help="run id (in the workspace) or run folder")


def _pin(args, ws, pinned: bool = True) -> int:
    status = Exit.OK
    done = []
    for run in args.run:
        try:
            folder = ws.resolve(run)
            if retention.inside_runs_dir(folder, ws.runs_dir) is not None:
                raise FileNotFoundError(f"{folder}: not a run folder of the workspace {ws.root} (only its runs "
                                        "are kept or removed)")
            set_pinned(folder, pinned)
        except OSError as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = Exit.USAGE
            continue
        done.append(folder.name)
        print(f"{'kept' if pinned else 'scratch'}: {folder.name}")
    if done and ws.root.is_dir():
        with _open_index(ws) as idx:
            idx.refresh(done)
    return status


def _unpin(args, ws) -> int:
    return _pin(args, ws, pinned=False)


# ------------------------------------------------------------------------------------------------ clean
def _add_clean(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dry-run", action="store_true", help="print what would be removed and why; remove nothing")
    p.add_argument("--older-than", type=float, default=None, metavar="HOURS",
                   help=f"age limit in hours (default: the workspace's retention_hours, {WorkspaceSettings.retention_hours:g})")


def _clean(args, ws) -> int:
    if args.older_than is not None and not args.older_than >= 0:
        print(f"error: --older-than {args.older_than}: expected hours >= 0", file=sys.stderr)
        return Exit.USAGE
    if not ws.runs_dir.is_dir():
        print(f"nothing to clean: no runs in {ws.root}", file=sys.stderr)
        return Exit.OK
    try:
        plan = retention.plan_retention(ws, args.older_than)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return Exit.USAGE
    verb = "would remove" if args.dry_run else "removing"
    for item in plan.due:
        print(f"{verb} {item.run_id}  {retention.format_size(item.size_bytes)}  {item.state}  {item.reason}")
    for item in plan.kept:
        if item.reason.startswith(("kept", "live", "PA of", "unreadable", "a symbolic", "not a folder")):
            print(f"keeping {item.run_id}  {item.reason}")
    total = retention.format_size(plan.due_bytes)
    if args.dry_run:
        print(f"dry run: {len(plan.due)} run(s), {total} would be removed (scratch runs older than "
              f"{plan.retention_hours:g} h); nothing removed")
        return Exit.OK
    retention.purge_trash(ws)
    with _open_index(ws) as idx:
        report = retention.remove_due(ws, plan, index=idx)
        idx.sync()
    for run_id, why in report.skipped:
        print(f"not removed: {run_id}  {why}", file=sys.stderr)
    print(f"removed {len(report.removed)} run(s), {total}")
    return Exit.OK


# ------------------------------------------------------------------------------------------------ report
def _add_report(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", nargs="+", help="run id (in the workspace) or run folder; two or more: a comparison")
    p.add_argument("--out", required=True, metavar="FILE.html", help="the HTML file to write (atomically); never a "
                   "file of a run folder, a dataset or the workspace")
    p.add_argument("--overwrite", action="store_true", help="replace an existing FILE.html")


def _report(args, ws) -> int:
    # report_html is imported here: it pulls numpy and SciPy's Welch (~0.6 s), which `runs list` never needs
    from ..runs.compare import CompareError
    from ..runs.outputs import OutputRefused
    from ..runs.report_html import write_report

    folders = []
    for run in args.run:
        try:
            folders.append(ws.resolve(run))
        except OSError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return Exit.USAGE
    try:
        out = write_report(folders, args.out, overwrite=args.overwrite, workspace=ws)
    except (CompareError, OutputRefused) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return Exit.USAGE
    except OSError as exc:
        print(f"error: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return Exit.USAGE
    kind = "report of" if len(folders) == 1 else "comparison of"
    print(f"wrote {out} ({kind} {', '.join(f.name for f in folders)})")
    return Exit.OK


#: sub-actions of ``runs``: name → (help, add_arguments, handler(args, ws) -> exit status)
ACTIONS: dict[str, tuple[str, Callable, Callable]] = {
    "list": ("list the runs (the default)", _add_list, _list),
    "pin": ("keep runs: retention never removes them", _add_pin, _pin),
    "unpin": ("make runs scratch again (removed once older than retention_hours)", _add_pin, _unpin),
    "clean": (f"remove scratch runs older than retention_hours (settings.json, default "
               f"{WorkspaceSettings.retention_hours:g} h)", _add_clean, _clean),
    "evaluate": (evaluate_cmd.HELP, evaluate_cmd.add_arguments, evaluate_cmd.handle),
    "report": ("write a self-contained HTML report of a run, or a comparison of several", _add_report, _report),
}


def add_parser(add: Callable[..., argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Register ``runs`` and its sub-actions with cli/entry.py's ``add(name, **kw)``; returns the ``runs`` parser."""
    p = add("runs", help="list the runs of the workspace; pin, unpin, clean (retention); evaluate (re-score); report",
            description="The runs of the workspace. Without a sub-action: the list.")
    _add_list(p, top=True)
    sub = p.add_subparsers(dest="runs_action", metavar="{" + ",".join(ACTIONS) + "}")
    for name, (help_text, add_args, _) in ACTIONS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        sp.add_argument("--workspace", **_SUPPRESS_WS)
        add_args(sp)
    return p


def handle(args, ws, named: bool = False) -> int:
    """Run the ``runs`` sub-action that ``args`` names (default: list) in the workspace ``ws`` (``named``: the user
    named it, so a missing one is an error); returns the exit status (process.Exit; cli/entry.py wraps it in its Outcome,
    which this module cannot import: cli/entry.py imports it)."""
    args.workspace_named = named
    _, _, handler = ACTIONS[getattr(args, "runs_action", None) or "list"]
    return handler(args, ws)
