"""The inspector's error flags as a gate of train-pa, train-dpd, queue add and sweep.

Before a run folder (a queue entry, a sweep folder) exists, the dataset is inspected (analysis/gate.py, cached in
the workspace by the dataset's fingerprint). A flag of ``error`` severity refuses the command, exit status 2, one
line per flag naming the dataset and the flag, then a hint line. With ``--accept-flags`` the command goes on; each
accepted flag is printed as a warning and recorded in the run's config.json, ``experiment.extra.accepted_flags``:
``[{"dataset", "code", "severity", "message"}, …]``.
"""
from __future__ import annotations

import sys
from pathlib import Path

from ..analysis.gate import blocking, dataset_flags
from ..data import DatasetError, load_dataset, make_demo_dataset

#: the key of ExperimentConfig.extra that records the accepted flags
ACCEPTED = "accepted_flags"


def add_accept_option(p) -> None:
    """``--accept-flags`` on a parser (or argument group) of training options."""
    p.add_argument("--accept-flags", action="store_true",
                   help="train even when the inspector (dpd-desktop inspect) gives the dataset an error flag; the "
                        "flags are recorded in the run's config.json (default: refused, exit 2)")


def check_dataset(ds, ws, accept: bool) -> list[dict] | None:
    """The error flags of ``ds`` (an ``IQDataset``) as records, ``[]`` when it has none; None when they refuse the
    command (``accept`` false): the lines of the module docstring are then printed on stderr."""
    try:
        errors = blocking(dataset_flags(ds, cache_dir=ws.cache_dir / "inspect"))
    except Exception as exc:  # noqa: BLE001 - an inspector failure must not hide the dataset from training
        print(f"warning: {ds.source}: the inspector could not check the dataset ({type(exc).__name__}: {exc})",
              file=sys.stderr)
        return []
    where = str(ds.source)
    for f in errors:
        print(f"{'warning' if accept else 'error'}: {where}: {f.code}: {f.message}"
              + (" (accepted: --accept-flags)" if accept else ""), file=sys.stderr)
    if errors and not accept:
        print(f"error: {where}: the inspector marks this dataset unfit for training (dpd-desktop inspect shows the "
              "report); nothing was started: fix it, or give --accept-flags to train on it anyway", file=sys.stderr)
        return None
    return [{"dataset": where, **f.to_dict()} for f in errors]


def check_reference(ref: str, ws, accept: bool, loaded: list | None = None) -> list[dict] | None:
    """:func:`check_dataset` of the dataset ``ref`` names (a path or ``"demo"``), loaded here; a dataset that cannot
    be loaded refuses too (its error printed). ``loaded``: the dataset object is appended to it."""
    try:
        ds = make_demo_dataset() if ref == "demo" else load_dataset(ref)
    except (DatasetError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
    if loaded is not None:
        loaded.append(ds)
    return check_dataset(ds, ws, accept)


def exists(ref) -> bool:
    """Whether ``ref`` is ``"demo"`` or a file or folder on this machine."""
    return ref == "demo" or (isinstance(ref, str) and Path(ref).expanduser().exists())


def with_accepted(extra: dict, accepted: list[dict]) -> dict:
    """``extra`` (ExperimentConfig.extra) with ``accepted`` recorded (unchanged when there is none)."""
    return {**extra, ACCEPTED: [*extra.get(ACCEPTED, []), *accepted]} if accepted else dict(extra)

