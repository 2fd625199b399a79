"""Command-line options of issue 24's settings for train-pa / train-dpd (config fields of the same names, config.py):
the delta thresholds, the learning-rate schedule, ILA, the gain-rule-aware loss and the Arena-protocol options.

    dpd-desktop train-dpd --dataset D --pa-run RUN --backbone deltagru --hidden-size 14 \\
        --lr-schedule cosine --warmup-epochs 5 --gain-rule small-signal --power-weight 1e-4
"""
from __future__ import annotations

import argparse

from .config import DPD_LEARNING, EVALUATIONS, LR_SCHEDULES, PLATEAU_THRESHOLD_MODES, SELECTIONS, ExperimentConfig


def _window(text: str) -> list[int]:
    try:
        a, b = (int(t) for t in str(text).split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected START,STOP (two integers), got {text!r}") from None
    return [a, b]


def add_training_options(p: argparse.ArgumentParser) -> None:
    d = ExperimentConfig()
    g = p.add_argument_group("delta thresholds, schedule, learning and protocol options")
    g.add_argument("--thx", type=float, default=d.thx, help="delta threshold on |Δx| (deltagru, tres_deltagru)")
    g.add_argument("--thh", type=float, default=d.thh, help="delta threshold on |Δh| (deltagru, tres_deltagru)")
    g.add_argument("--lr-schedule", choices=LR_SCHEDULES, default=d.lr_schedule,
                   help="plateau (ReduceLROnPlateau, the reference's) or cosine to --lr-end (default %(default)s)")
    g.add_argument("--warmup-epochs", type=int, default=d.warmup_epochs, help="linear LR warm-up epochs")
    g.add_argument("--plateau-threshold", type=float, default=d.plateau_threshold)
    g.add_argument("--plateau-threshold-mode", choices=PLATEAU_THRESHOLD_MODES, default=d.plateau_threshold_mode)
    g.add_argument("--power-weight", type=float, default=d.power_weight,
                   help="weight of the output-power term of the loss (0: off; training/losses.py)")
    g.add_argument("--loss-window", type=_window, default=None, metavar="START,STOP",
                   help="the loss counts these samples of each frame only")
    g.add_argument("--no-test-every-epoch", dest="test_every_epoch", action="store_false",
                   help="evaluate the test split for the selected checkpoint only")
    if p.prog.endswith("train-dpd"):
        g.add_argument("--dpd-learning", choices=DPD_LEARNING, default=d.dpd_learning,
                       help="direct (through the frozen PA) or ila (indirect learning)")
        g.add_argument("--gain-value", type=float, default=None, help="fixed target gain g instead of --gain-rule")
        g.add_argument("--peak-limit", type=float, default=None, help="limit |u| of the DPD output to this value")
        g.add_argument("--selection", choices=SELECTIONS, default=d.selection,
                       help="checkpoint selection (power-gated: output power within --power-gate-db first)")
        g.add_argument("--power-gate-db", type=float, default=d.power_gate_db)
        g.add_argument("--evaluation", choices=EVALUATIONS, default=d.evaluation,
                       help="segments (the reference's) or overlap (DPD windows, continuous PA)")


def training_config_fields(a) -> dict:
    """ExperimentConfig fields from the parsed options of :func:`add_training_options`."""
    out = {k: getattr(a, k) for k in ("thx", "thh", "lr_schedule", "warmup_epochs", "plateau_threshold",
                                      "plateau_threshold_mode", "power_weight", "loss_window", "test_every_epoch")}
    for k in ("dpd_learning", "gain_value", "peak_limit", "selection", "power_gate_db", "evaluation"):
        if hasattr(a, k):
            out[k] = getattr(a, k)
    return out
