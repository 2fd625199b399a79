"""The learning-rate schedule of a run (``ExperimentConfig.lr_schedule``, ``warmup_epochs``), stepped once per epoch
after its checkpoint with the schedule metric (reference §4.7 step 8); rates change only at epoch boundaries.

* ``plateau`` without warm-up: the reference's ReduceLROnPlateau (optim.py) itself.
* ``plateau`` with W warm-up epochs: epoch e < W trains at lr·(e+1)/W (Goyal et al., "Accurate, Large Minibatch
  SGD", 2017); the plateau scheduler takes over at epoch W (it never sees the warm-up epochs' values).
* ``cosine``: warm-up as above, then lr_end + (lr − lr_end)·(1 + cos(π·k/K))/2 in epoch W + k, K = epochs − 1 − W
  (Loshchilov & Hutter, "SGDR", ICLR 2017, without restarts); it ignores the metric.
"""
from __future__ import annotations

import math
from typing import Any

from .optim import make_plateau

__all__ = ["EpochSchedule", "make_schedule"]


class EpochSchedule:
    """A per-epoch learning-rate schedule with warm-up (module docstring); ``plateau`` is the scheduler that takes
    over after the warm-up (None for cosine). ``state_dict``/``load_state_dict`` for last.pt; ``lr_may_change()``
    for the epoch-end overlap (training/overlap.py)."""

    def __init__(self, optimizer, *, kind: str, epochs: int, warmup: int, lr: float, lr_end: float, plateau=None):
        self.optimizer = optimizer
        self.kind, self.epochs, self.warmup, self.lr, self.lr_end = kind, int(epochs), int(warmup), lr, lr_end
        self.plateau = plateau
        self.epoch = 0  # the epoch whose learning rate is set
        self._set(self.rate(0))

    def rate(self, epoch: int) -> float:
        """The learning rate of ``epoch`` (warm-up and cosine; for plateau after the warm-up: lr)."""
        if epoch < self.warmup:
            return self.lr * (epoch + 1) / self.warmup
        if self.kind != "cosine":
            return self.lr
        span = self.epochs - 1 - self.warmup
        k = epoch - self.warmup
        if span <= 0:
            return self.lr
        return self.lr_end + (self.lr - self.lr_end) * (1.0 + math.cos(math.pi * min(k, span) / span)) / 2.0

    def _set(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def step(self, metric) -> None:
        """After epoch ``self.epoch``: set the next epoch's rate (the plateau scheduler sees ``metric`` after the
        warm-up)."""
        done = self.epoch
        self.epoch += 1
        if self.kind == "cosine" or self.epoch <= self.warmup:
            self._set(self.rate(self.epoch))
        elif self.plateau is not None and done >= self.warmup:
            self.plateau.step(metric)

    def lr_may_change(self) -> bool:
        """Whether the next :meth:`step` may change the rate (the overlap then evaluates the epoch end inline)."""
        nxt = self.epoch + 1
        if self.kind == "cosine" or nxt <= self.warmup:
            return self.rate(nxt) != self.rate(self.epoch)
        from .overlap import lr_may_change
        return lr_may_change(self.plateau)

    def state_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "epochs": self.epochs, "warmup": self.warmup, "lr": self.lr,
                "lr_end": self.lr_end, "epoch": self.epoch,
                "plateau": self.plateau.state_dict() if self.plateau is not None else None}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        self.epoch = int(sd["epoch"])
        if self.plateau is not None and sd.get("plateau") is not None:
            self.plateau.load_state_dict(sd["plateau"])


def make_schedule(optimizer, cfg):
    """The schedule of ``cfg`` (an ExperimentConfig): the reference's plateau scheduler itself for the default
    settings, else an :class:`EpochSchedule`."""
    plateau = None
    if cfg.lr_schedule == "plateau":
        plateau = make_plateau(optimizer, factor=cfg.decay_factor, patience=cfg.patience, min_lr=cfg.lr_end,
                               threshold=cfg.plateau_threshold, threshold_mode=cfg.plateau_threshold_mode)
        if cfg.warmup_epochs == 0:
            return plateau
    return EpochSchedule(optimizer, kind=cfg.lr_schedule, epochs=cfg.epochs, warmup=cfg.warmup_epochs, lr=cfg.lr,
                         lr_end=cfg.lr_end, plateau=plateau)
