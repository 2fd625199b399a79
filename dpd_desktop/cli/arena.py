"""``dpd-desktop arena``: run a named benchmark protocol and write its leaderboard (dpd_desktop/arena).

    dpd-desktop arena arena-v6 [--assets DIR] [--out DIR] [--device cuda] [--kernel fast]
                      [--epochs N] [--seeds 0,1,2] [--models DeltaGRU-14,TCN-17] [--datasets apa-200mhz-b]
    dpd-desktop arena PROTOCOL.toml ...          a protocol file of one's own (format: dpd_desktop/arena/protocol.py)
    dpd-desktop arena --list                     the named protocols and their models
    dpd-desktop arena arena-v6 --show-reference  the reference leaderboard's rows of the protocol's models
    dpd-desktop arena --merge DIR1 DIR2 --out DIR  one leaderboard of several runs (e.g. one per GPU call)

Each (condition, model) is one sweep of the workspace over the protocol's seeds (``sweep list`` shows them; in fast
mode on a GPU the seeds train together as one group). The leaderboard (leaderboard.md/.html/.csv, trials.csv,
leaderboard.json) goes to --out (default ``<workspace>/arena/<protocol>/leaderboard``); running the same command
again reuses the finished sweeps. ``--assets``: OpenDPD 2.4.2's datasets and Arena assets (``make arena-data``;
default ``.ref/opendpd-2.4.2-arena``). The overrides (a short run, or more epochs) are recorded in the leaderboard.
Ctrl+C: the first stops (running trials end after their current batch; the leaderboard holds what finished).
Exit status: 0 done, 2 bad arguments or unusable inputs (nothing trained), 3 stopped.
"""
from __future__ import annotations

import argparse
import shlex
import sys
import threading
from pathlib import Path

from ..config import KERNELS
from ..process import CTRL_C, Exit
from ..runs.outputs import OutputRefused, protected_reason
from .common import Outcome


def _leaderboard_out(out: Path, ws) -> Path:
    """``--out``: a new or empty folder, or one an arena wrote before (its ``arena-state.json`` or
    ``leaderboard.json``: the same command continues there); never where the output rule (runs/outputs.py) forbids
    the leaderboard's files. Raises OutputRefused."""
    why = protected_reason(out / "leaderboard.json", workspace=ws)
    if why:
        raise OutputRefused(out, f"cannot hold the leaderboard ({out / 'leaderboard.json'} {why})", "give another --out")
    if out.exists() and not out.is_dir():
        raise OutputRefused(out, "is a file", "give a folder name")
    if out.is_dir() and any(out.iterdir()) and not any((out / f).is_file() for f in ("arena-state.json",
                                                                                       "leaderboard.json")):
        raise OutputRefused(out, "is not an arena leaderboard folder (no arena-state.json, no leaderboard.json) and "
                            "not empty; its files would be replaced", "give another --out")
    return out


def _names(text: str) -> list[str]:
    return [t.strip() for t in str(text).split(",") if t.strip()]


def _ints(text: str) -> list[int]:
    try:
        return [int(t) for t in _names(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def add_parser(add) -> argparse.ArgumentParser:
    p = add("arena", help="run a benchmark protocol (e.g. arena-v6) and write its leaderboard", description=__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("protocol", nargs="?", default=None, help="a protocol name (arena-v6) or a .toml file")
    p.add_argument("--list", action="store_true", help="list the named protocols")
    p.add_argument("--assets", default=None, help="OpenDPD 2.4.2 datasets/Arena assets (default .ref/opendpd-2.4.2-arena)")
    p.add_argument("--out", default=None, help="leaderboard folder (default <workspace>/arena/<protocol>/leaderboard)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default auto)")
    p.add_argument("--kernel", default=None, choices=KERNELS, help="recurrence kernels of the trials")
    p.add_argument("--group-size", default="auto", help="trials per group (default auto: 8 fast / 4 reference on CUDA)")
    p.add_argument("--epochs", type=int, default=None, help="override: epochs per trial (recorded in the leaderboard)")
    p.add_argument("--seeds", type=_ints, default=None, help="override: seeds, e.g. 0,1")
    p.add_argument("--models", type=_names, default=None, help="override: model names of the protocol")
    p.add_argument("--datasets", type=_names, default=None, help="override: condition ids or dataset names")
    p.add_argument("--merge", nargs="+", default=None, metavar="DIR",
                   help="merge these arena leaderboard folders into --out (no training)")
    p.add_argument("--show-reference", action="store_true",
                   help="print the reference leaderboard's rows of the protocol's models and exit")
    return p


def handle(args, ws):
    from ..arena.assets import ArenaAssetError, default_root, reference_rows
    from ..arena.protocol import ProtocolError, load_protocol, protocol_names
    from ..config import ConfigError

    if args.merge:
        from ..arena.runner import merge_leaderboards

        if not args.out:
            print("error: --merge needs --out DIR", file=sys.stderr)
            return Outcome(Exit.USAGE)
        try:
            paths = merge_leaderboards([Path(d) for d in args.merge], _leaderboard_out(Path(args.out), ws),
                                       Path(args.assets) if args.assets else default_root(),
                                       command="dpd-desktop " + " ".join(shlex.quote(a) for a in sys.argv[1:]))
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return Outcome(Exit.USAGE)
        print(Path(paths["md"]).read_text(encoding="utf-8"))
        return Outcome(Exit.OK)
    if args.list or not args.protocol:
        if not args.list:
            print("error: name a protocol (or a .toml file) to run; the named protocols:", file=sys.stderr)
        for name in protocol_names():
            proto = load_protocol(name)
            print(f"{name}: {proto.title} — conditions {', '.join(c.id for c in proto.conditions)}; models "
                  + ", ".join(m.name for m in proto.models))
        return Outcome(Exit.OK if args.list else Exit.USAGE)
    assets = Path(args.assets) if args.assets else default_root()
    try:
        proto = load_protocol(args.protocol).with_overrides(epochs=args.epochs, seeds=args.seeds, models=args.models,
                                                            datasets=args.datasets)
        if args.show_reference:
            return Outcome(_show_reference(proto, reference_rows(assets, proto.reference_rows)))
    except (ProtocolError, ArenaAssetError, ConfigError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return Outcome(Exit.USAGE)
    from ..arena.runner import run_arena
    from ..sweep.store import SweepError
    from ..data import DatasetError

    out = Path(args.out) if args.out else ws.root / "arena" / proto.name / "leaderboard"
    try:
        _leaderboard_out(out, ws)
    except OutputRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return Outcome(Exit.USAGE)
    ws.check(create=True)
    stop = threading.Event()
    own = not CTRL_C.installed and CTRL_C.install()
    if CTRL_C.installed:
        CTRL_C.on_first(stop.set, "stopping the arena after the running trials' current batch (Ctrl+C again to abort)…")
    command = "dpd-desktop " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    try:
        paths = run_arena(ws, proto, assets, out, device=args.device, kernel=args.kernel,
                          group_size=_group(args.group_size), command=command, stop=stop,
                          log=lambda line: print(line, flush=True))
    except (ArenaAssetError, ProtocolError, ConfigError, SweepError, DatasetError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return Outcome(Exit.USAGE)
    finally:
        CTRL_C.on_first(None)
        if own:
            CTRL_C.uninstall()
    print(Path(paths["md"]).read_text(encoding="utf-8"))
    print("leaderboard: " + ", ".join(str(p) for p in paths.values()), flush=True)
    return Outcome(Exit.CANCELLED if stop.is_set() else Exit.OK, skip_teardown=True)


def _group(text: str):
    t = str(text).strip().lower()
    return "auto" if t == "auto" else int(t)


def _show_reference(proto, rows) -> int:
    from ..arena.leaderboard import reference_summary

    print(f"{'model':<18} {'row':<24} {'params':>6} {'NMSE':>16} {'ACLR worse':>16} {'EVM':>16} {'q':>16}")
    for m in proto.models:
        if not m.arena_row:
            continue
        ref = reference_summary(rows, *m.arena_row)
        if ref is None:
            print(f"{m.name:<18} (no row {m.arena_row})")
            continue
        s = ref["stats"]
        cell = lambda k: f"{s[k][0]:.2f} ± {s[k][1]:.2f}"  # noqa: E731
        print(f"{m.name:<18} {ref['display_name'] + ' @' + str(ref['budget']):<24} {ref['params']:>6} "
              f"{cell('nmse_db'):>16} {cell('aclr_db'):>16} {cell('evm_db'):>16} {cell('quality_db'):>16}")
    return Exit.OK
