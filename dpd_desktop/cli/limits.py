"""The resource-limit options of train-pa / train-dpd / resume (``--cuda-memory-fraction``, ``--time-limit``) and the
workspace's device default (runs/settings.py). No PyTorch here: argument parsing stays fast."""
from __future__ import annotations

import argparse
import re

from ..config import ExperimentConfig
from ..runs.settings import WorkspaceSettings

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([smhd]?)\s*$", re.IGNORECASE)
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> float:
    """``"90"`` → 90.0 s, ``"30m"`` → 1800.0, ``"2h"`` → 7200.0, ``"1.5d"`` → 129600.0 (seconds, > 0).

    Raises:
        argparse.ArgumentTypeError: anything else (argparse reports it as a usage error, exit status 2).
    """
    m = _DURATION.match(str(text))
    seconds = float(m.group(1)) * _UNIT_S[m.group(2).lower()] if m else 0.0
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive duration in seconds or with a unit, e.g. 90, 30m, "
                                         f"2h; got {text!r}")
    return seconds


def add_limit_options(p: argparse.ArgumentParser, default: str = "the workspace's setting, else none") -> None:
    """``--cuda-memory-fraction F`` and ``--time-limit T``; ``default`` says in their help what applies when they are
    not given (a new run: the workspace's settings.json; ``resume``: the run's recorded limits)."""
    p.add_argument("--cuda-memory-fraction", type=float, default=None, metavar="F",
                   help=f"CUDA memory ceiling, a fraction 0 < F <= 1 of the card (default: {default})")
    p.add_argument("--time-limit", type=parse_duration, default=None, metavar="T",
                   help="wall-clock limit: seconds or 30m, 2h...; the run then stops after the current batch and "
                        f"ends cancelled (default: {default})")


def with_limit_options(cfg: ExperimentConfig, args, settings: WorkspaceSettings) -> ExperimentConfig:
    """``cfg`` with the limits given on the command line; ``--device`` not given → the workspace's
    ``default_device`` (the other limits' defaults are applied by the trainer, training/limits.py)."""
    cfg.cuda_memory_fraction = getattr(args, "cuda_memory_fraction", None)
    cfg.time_limit_s = getattr(args, "time_limit", None)
    if getattr(args, "device", None) is None:
        cfg.device = settings.default_device
    return cfg
