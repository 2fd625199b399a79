"""``dpd-desktop runs evaluate RUN --profile NAME [--json]``: re-score a finished run under a metric profile from its
stored results.h5, without retraining (runs/evaluate.py); the result is written beside results.h5 as
``evaluation-<profile>.json`` and printed (a table, or the JSON with ``--json``)."""
from __future__ import annotations

import sys

from ..metrics.profiles import PROFILES
from ..process import Exit
from ..runs.record import RecordError

__all__ = ["HELP", "add_arguments", "handle"]

HELP = "re-score a finished run under a metric profile (no retraining)"


def add_arguments(p) -> None:
    """The ``runs evaluate`` arguments, on its parser (cli/runs.py ACTIONS)."""
    p.add_argument("run", help="run id (in the workspace) or run folder")
    p.add_argument("--profile", required=True, choices=PROFILES,
                   help="legacy-2.2.1 (OpenDPD 2.2.1's numbers) or corrected (metrics/profiles.py)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _table(doc) -> str:
    lines = [f"run {doc['run_id']} ({doc['step']}) under metric profile {doc['profile']} "
             f"(recorded under {doc['recorded_profile']})",
             f"{'split':6s} {'':12s} {'NMSE dB':>9s} {'EVM dB':>9s} {'ACLR_L':>9s} {'ACLR_R':>9s} {'ACLR_avg':>9s}"]
    for split, m in doc["metrics"].items():
        for label, row in ((doc["profile"], m), (doc["recorded_profile"], doc["recorded"].get(split, {}))):
            cells = " ".join(f"{row.get(k, float('nan')):9.3f}" for k in ("NMSE", "EVM", "ACLR_L", "ACLR_R",
                                                                           "ACLR_AVG"))
            lines.append(f"{split:6s} {label:12s} {cells}")
        if doc["padded_tail"].get(split):
            lines.append(f"       ({split}: {doc['n_valid'][split]} samples, not whole segments: the legacy profile "
                         "pads the stored prediction with zeros, see runs/evaluate.py)")
    return "\n".join(lines)


def handle(args, ws) -> int:
    """Run ``runs evaluate``; returns the exit status (0, or 2 for a run that cannot be scored)."""
    # runs.evaluate brings h5py and scipy.signal, which `dpd-desktop runs` and `--help` do not need
    from ..runs.evaluate import evaluate_run, save_evaluation

    try:
        doc = evaluate_run(ws.resolve(args.run), args.profile)
        path = save_evaluation(ws.resolve(args.run), doc)
    except (RecordError, ValueError, FileNotFoundError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return Exit.USAGE
    print(path.read_text(encoding="utf-8") if args.json else _table(doc))  # the file as written (NaN → null)
    print(f"written to {path}", file=sys.stderr)
    return Exit.OK
