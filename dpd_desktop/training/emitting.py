"""Where a run's events go: the record's writer, then the observers; and the run's log lines."""
from __future__ import annotations

import logging
import time
from typing import Callable, Iterable

from ..runs.events import CheckpointReady, LogLine, ResultsReady, RunPrepared

log = logging.getLogger("dpd_desktop.trainer")

#: events only observers with a true ``record_events`` attribute receive (the writer always does)
RECORD_EVENTS = (RunPrepared, LogLine, CheckpointReady, ResultsReady)


class RunOutput:
    """The events of one run: :meth:`emit` gives each to ``writer`` first (its errors propagate: they fail the run),
    then to the ``observers`` (their errors are logged and ignored). The record events (:data:`RECORD_EVENTS`) reach
    only the observers that ask for them with a true ``record_events`` attribute. ``observers`` is a list that may
    grow while the run goes."""

    def __init__(self, writer: Callable, observers: Iterable[Callable] = ()):
        self.writer = writer
        self.observers = list(observers)

    def emit(self, event) -> None:
        self.writer(event)
        self.notify(event)

    def notify(self, event) -> None:
        """``event`` to the observers only."""
        record_event = isinstance(event, RECORD_EVENTS)
        for obs in self.observers:
            if record_event and not getattr(obs, "record_events", False):
                continue
            try:
                obs(event)
            except Exception:  # noqa: BLE001 - an observer must not kill the run
                log.exception("observer failed on %s", type(event).__name__)

    def log(self, text: str, level: int = logging.INFO, to_run_log: bool = True) -> None:
        """One line to the logger (a warning also reaches the console) and, with ``to_run_log`` (the run folder
        exists), to the run's log (a LogLine event)."""
        log.log(level, text)
        if to_run_log:
            self.emit(LogLine(text=text, level=level, clock=time.strftime("%H:%M:%S")))
