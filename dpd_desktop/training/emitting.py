"""What the trainer tells the outside, as a mixin of :class:`~dpd_desktop.training.trainer.Trainer`: the events to
the record's writer and the observers, the run's log lines, the plot data and the live batch preview. (A module of
its own to keep trainer.py, whose set-up steps and epoch loop read in one place, within ~600 lines.)

The mixin uses the trainer's ``writer``, ``observers``, ``run_dir``, ``evaluator``, ``net``, ``device``, ``dataset``
and ``_preview*`` attributes.
"""
from __future__ import annotations

import logging
import time
from typing import Any

from ..runs.events import CheckpointReady, LogLine, PreviewReady, ResultsReady, RunPrepared
from .preview import BatchPreview

log = logging.getLogger("dpd_desktop.trainer")

RECORD_EVENTS = (RunPrepared, LogLine, CheckpointReady, ResultsReady)


class TrainerOutput:
    """The trainer's events, log, plots and preview (see the module docstring)."""

    def set_preview_every(self, n: int | None) -> None:
        """Turn the live batch preview on (every ``n`` batches) or off (None) while a run is going (thread-safe:
        one attribute, read at each batch boundary). The setting is recorded in the log at the epoch's end, by the
        training thread (the caller, the window's thread, never waits for the disk)."""
        if n is not None and (not isinstance(n, int) or n < 1):
            raise ValueError(f"preview_every: expected a positive integer or None, got {n!r}")
        self._preview_every = n
        self._notes.append(f"live batch preview: {'every %d batches' % n if n else 'off'}")

    # ------------------------------------------------------------------ plots and preview
    def _dataset_summary(self) -> dict[str, Any]:
        ds = self.dataset
        try:
            return dict(ds.summary())
        except Exception:  # noqa: BLE001 - summary is cosmetic
            return {"name": ds.name}

    def _plots(self, source: str, ev: dict[str, Any], split: str, net):
        try:
            return self.evaluator.plots(source, ev, split, net)
        except Exception as exc:  # noqa: BLE001 - plots must never break training
            self._log(f"plot data skipped: {type(exc).__name__}: {exc}")
            return None

    def _emit_preview(self, epoch: int, batch: int, n_batches: int) -> None:
        try:
            if self._preview is None:
                self._preview = BatchPreview(self.net, self.eval_sets["val"], self.device)
            plots, nmse = self._preview.plots(self.net, self.dataset.spec, self.evaluator.signal_names())
            self._emit(PreviewReady(epoch=epoch, batch=batch, batches=n_batches, plots=plots,
                                    metrics={"NMSE": nmse}))
        except Exception as exc:  # noqa: BLE001
            self._log(f"preview disabled: {type(exc).__name__}: {exc}")
            self._preview_failed = True

    # ------------------------------------------------------------------ events and log
    def _emit(self, event) -> None:
        """The record's writer first (its errors fail the run), then the observers (errors logged, ignored). The
        record events (RunPrepared, LogLine, CheckpointReady, ResultsReady) reach only the observers that ask for
        them with a true ``record_events`` attribute: the others (the window, the command line) keep the seven
        events they were written for."""
        self.writer(event)
        self._notify(event)

    def _notify(self, event) -> None:
        record_event = isinstance(event, RECORD_EVENTS)
        for obs in self.observers:
            if record_event and not getattr(obs, "record_events", False):
                continue
            try:
                obs(event)
            except Exception:  # noqa: BLE001 - an observer must not kill the run
                log.exception("observer failed on %s", type(event).__name__)

    def _log(self, text: str, level: int = logging.INFO) -> None:
        """One line to the logger (a warning also reaches the console) and, once the run folder exists, to the
        run's log (a LogLine event)."""
        log.log(level, text)
        if self.run_dir is not None:
            self._emit(LogLine(text=text, level=level, clock=time.strftime("%H:%M:%S")))
