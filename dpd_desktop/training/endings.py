"""How a run ends when it does not succeed: cancelled (a user's Stop, a sweep's pruning, a time limit) or failed
(any error of a run). A mixin of :class:`~dpd_desktop.training.trainer.Trainer` (its ``run`` calls these), and
:class:`RunResult`, what ``run`` returns."""
from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import limits
from .errors import TrainingError
from ..runs.events import RunCancelled, RunFailed
from .report import describe_error


@dataclass
class RunResult:
    """Outcome of :meth:`Trainer.run`: ``state`` is "succeeded", "failed" or "cancelled"."""

    state: str
    run_id: str | None = None
    run_dir: Path | None = None
    best_epoch: int | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    val_metrics: dict[str, float] = field(default_factory=dict)
    test_metrics: dict[str, float] = field(default_factory=dict)
    message: str = ""
    wall_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


class RunEndings:
    """``_on_cancel`` and ``_on_failure`` of the trainer: drain the pending epoch end, log, emit the event (the
    record's writer first: a failure that cannot be written is still reported), return the :class:`RunResult`."""

    def _wall_s(self, t0: float) -> float:
        """Seconds of the run: since ``t0`` (``time.perf_counter()`` at :meth:`run`'s start) plus, for a resumed
        run, the time before the resume (its last epoch's ``TIME:``, training/resume_state.py)."""
        return time.perf_counter() - t0 + float(getattr(self, "elapsed_before_s", 0.0) or 0.0)

    def _on_cancel(self, t0: float) -> RunResult:
        try:
            self._drain()
        except Exception as exc:  # noqa: BLE001
            self._log(f"epoch end failed during cancel: {exc}")
        done = len(self.history)
        fired = self._time_limit is not None and self._time_limit.fired
        reason = limits.TIME_LIMIT_REASON if fired else self._cancel_reason
        self._log(f"cancelled{': ' + reason if reason else ''} after {done} completed epoch(s)")
        self._emit(RunCancelled(run_id=self.run_id, run_dir=str(self.run_dir), epochs_completed=done,
                                best_epoch=self.best_epoch, reason=reason))
        return RunResult("cancelled", self.run_id, self.run_dir, self.best_epoch, self.history,
                         wall_s=self._wall_s(t0), message=reason or "cancelled")

    def _on_failure(self, exc: BaseException, t0: float) -> RunResult:
        if limits.is_oom(exc) and not isinstance(exc, TrainingError):  # outside a training batch (evaluation)
            exc = limits.oom_error(self.device, len(self.history), "outside a training batch", exc)
        msg = describe_error(exc)
        detail = traceback.format_exc()
        try:
            self._drain()
        except Exception:  # noqa: BLE001 - the first error is the one reported
            pass
        if self.run_dir is not None:
            try:
                self._log(f"FAILED: {msg}\n{detail}")
            except OSError:  # the log cannot be written either: the status below still says "failed"
                pass
        event = RunFailed(run_id=self.run_id, run_dir=str(self.run_dir) if self.run_dir else None, message=msg,
                          detail=detail, epochs_completed=len(self.history), best_epoch=self.best_epoch)
        try:
            self.writer(event)
        except OSError:  # the folder cannot take the failure either; the event still reaches the observers
            pass
        self._notify(event)
        return RunResult("failed", self.run_id, self.run_dir, self.best_epoch, self.history, message=msg,
                         wall_s=self._wall_s(t0))
