"""The inspector's flags of a dataset before a run (:func:`dataset_flags`), cached by the dataset's fingerprint, and
the error-severity ones that stop a run unless the user accepts them (:func:`blocking`). Cache file:
``CACHE_DIR/<fingerprint>.json`` = ``{"format", "rules", "source", "flags"}``, used only when its ``rules`` are
:data:`~dpd_desktop.analysis.flags.RULES_VERSION` and its ``source`` the dataset's; written atomically; one that
cannot be read or written is ignored. Cost: benchmarks/results/2026-12-04-notes-core.md.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..atomic import atomic_write_json
from .flags import RULES_VERSION, Flag
from .inspect import inspect_dataset

__all__ = ["dataset_flags", "blocking", "CACHE_FORMAT"]

CACHE_FORMAT = "dpd-desktop-flags-1"


def _cached(path: Path, source: str) -> tuple[Flag, ...] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("format") != CACHE_FORMAT or doc.get("rules") != RULES_VERSION or doc.get("source") != source:
            return None
        return tuple(Flag(str(f["code"]), str(f["severity"]), str(f["message"])) for f in doc["flags"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def dataset_flags(ds, cache_dir: str | Path | None = None) -> tuple[Flag, ...]:
    """Every flag :func:`~dpd_desktop.analysis.inspect.inspect_dataset` raises on ``ds`` (an ``IQDataset``), in the
    inspector's order; read from / written to ``cache_dir`` when given (module docstring)."""
    source = str(ds.source)
    path = Path(cache_dir) / f"{ds.fingerprint()}.json" if cache_dir is not None else None
    if path is not None:
        hit = _cached(path, source)
        if hit is not None:
            return hit
    flags = tuple(inspect_dataset(ds).flags)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(path, {"format": CACHE_FORMAT, "rules": RULES_VERSION, "source": source,
                                     "flags": [f.to_dict() for f in flags]})
        except OSError:
            pass  # a read-only or full workspace: the next run inspects again
    return flags


def blocking(flags) -> tuple[Flag, ...]:
    """The flags of ``error`` severity: a run on such a dataset needs the user's acceptance."""
    return tuple(f for f in flags if f.severity == "error")
