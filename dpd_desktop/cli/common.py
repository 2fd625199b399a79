"""What every command of the command line returns (:class:`Outcome`), and the option types commands share."""
from __future__ import annotations

import argparse
from dataclasses import dataclass


@dataclass(frozen=True)
class Outcome:
    """What a command leaves: its exit status, and whether the process may end without the interpreter's teardown.

    ``skip_teardown`` is set by the headless commands, after which every artifact is written and closed: the
    teardown (module garbage collection, PyTorch's thread pools) then only delays the exit (benchmarks/results/2026-12-04-notes-core.md).
    """

    status: int
    skip_teardown: bool = False


def split_ratios(text: str) -> tuple[float, float, float]:
    """``--split`` "0.6,0.2,0.2" → (train, val, test); argparse.ArgumentTypeError otherwise."""
    try:
        v = tuple(float(t) for t in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected three comma-separated ratios, got {text!r}") from None
    if len(v) != 3:
        raise argparse.ArgumentTypeError(f"expected three ratios train,val,test, got {text!r}")
    return v
