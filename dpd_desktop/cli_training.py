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
    g.add_argument("--thx", type=float, default=d.thx,
                   help="delta threshold on |Δx|, input units (deltagru, tres_deltagru; 0: dense; default %(default)s)")
    g.add_argument("--thh", type=float, default=d.thh,
                   help="delta threshold on |Δh|, state units (deltagru, tres_deltagru; 0: dense; default %(default)s)")
    g.add_argument("--lr-schedule", choices=LR_SCHEDULES, default=d.lr_schedule,
                   help="plateau (ReduceLROnPlateau, the reference's) or cosine to --lr-end (default %(default)s)")
    g.add_argument("--warmup-epochs", type=int, default=d.warmup_epochs,
                   help="linear LR warm-up, epochs (default %(default)s)")
    g.add_argument("--plateau-threshold", type=float, default=d.plateau_threshold,
                   help="plateau schedule: the least improvement that counts, relative or dB (see "
                        "--plateau-threshold-mode; default %(default)s)")
    g.add_argument("--plateau-threshold-mode", choices=PLATEAU_THRESHOLD_MODES, default=d.plateau_threshold_mode,
                   help="rel: value < best·(1 − t), the reference's; abs: value < best − t dB (default %(default)s)")
    g.add_argument("--power-weight", type=float, default=d.power_weight,
                   help="weight of the output-power term of the loss (0: off; training/losses.py; default "
                        "%(default)s)")
    g.add_argument("--loss-window", type=_window, default=None, metavar="START,STOP",
                   help="the loss counts these samples of each frame only, [START, STOP) (default: all)")
    g.add_argument("--no-test-every-epoch", dest="test_every_epoch", action="store_false",
                   help="evaluate the test split for the selected checkpoint only (default: every epoch)")
    if p.prog.endswith("train-dpd"):
        g.add_argument("--dpd-learning", choices=DPD_LEARNING, default=d.dpd_learning,
                       help="direct (through the frozen PA) or ila (indirect learning) (default %(default)s)")
        g.add_argument("--gain-value", type=float, default=None,
                       help="fixed target gain g, linear, instead of --gain-rule (default: the rule's)")
        g.add_argument("--peak-limit", type=float, default=None,
                       help="limit |u| of the DPD output to this magnitude, linear (default: none)")
        g.add_argument("--selection", choices=SELECTIONS, default=d.selection,
                       help="checkpoint selection (power-gated: output power within --power-gate-db first; default "
                            "%(default)s)")
        g.add_argument("--power-gate-db", type=float, default=d.power_gate_db,
                       help="power-gated selection: accepted output power error, dB (default %(default)s)")
        g.add_argument("--evaluation", choices=EVALUATIONS, default=d.evaluation,
                       help="segments (the reference's) or overlap (DPD windows, continuous PA) (default "
                            "%(default)s)")


def training_config_fields(a) -> dict:
    """ExperimentConfig fields from the parsed options of :func:`add_training_options`."""
    out = {k: getattr(a, k) for k in ("thx", "thh", "lr_schedule", "warmup_epochs", "plateau_threshold",
                                      "plateau_threshold_mode", "power_weight", "loss_window", "test_every_epoch")}
    for k in ("dpd_learning", "gain_value", "peak_limit", "selection", "power_gate_db", "evaluation"):
        if hasattr(a, k):
            out[k] = getattr(a, k)
    return out
