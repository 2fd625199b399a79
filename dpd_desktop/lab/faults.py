"""Faults that tests inject into queued runs' child processes: ``Supervisor(workspace, faults=parse_faults(SPEC))``
hands them to each child with its start arguments; the child fires the faults of its entry (:class:`FaultWriter`).

SPEC: ``[ENTRY:]ACTION@POINT`` items separated by ``;``. ENTRY (optional) limits the item to that queue entry id.
ACTION: ``segfault`` (the process ends by SIGSEGV), ``kill`` (SIGKILL), ``exit`` (``os._exit(70)``), ``raise`` (a
RuntimeError inside the run: it fails as any error does), ``oom`` (a MemoryError). POINT: ``start`` (after
RunStarted), ``epoch:N`` (after epoch N, 0-based as in history.csv, is on disk), ``batch:N`` (at the first progress
report at or past batch N, 1-based). Example: ``1:segfault@epoch:0`` — entry 1 segfaults after its first epoch.
"""
from __future__ import annotations

import faulthandler
import os
import signal
from dataclasses import dataclass
from typing import Sequence

from ..runs import events as E

FAULT_ACTIONS = ("segfault", "kill", "exit", "raise", "oom")
EXIT_FAULT_STATUS = 70


class FaultSpecError(ValueError):
    """A fault SPEC that cannot be parsed."""


@dataclass(frozen=True)
class Fault:
    """``action`` at ``point`` ("start", "epoch", "batch") ``n`` of queue entry ``entry`` (None: every entry)."""

    action: str
    point: str
    n: int = 0
    entry: int | None = None

    def due(self, ev) -> bool:
        if self.point == "start":
            return isinstance(ev, E.RunStarted)
        if self.point == "epoch":
            return isinstance(ev, E.EpochEnded) and ev.epoch == self.n
        return isinstance(ev, E.BatchProgress) and ev.batch >= self.n

    def fire(self) -> None:
        where = f"{self.point}" + (f":{self.n}" if self.point != "start" else "")
        if self.action == "segfault":
            faulthandler.disable()  # no traceback dump: the test wants the plain signal
            if hasattr(signal, "SIGSEGV") and os.name != "nt":
                os.kill(os.getpid(), signal.SIGSEGV)
            import ctypes

            ctypes.string_at(0)
        elif self.action == "kill":
            os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))
        elif self.action == "exit":
            os._exit(EXIT_FAULT_STATUS)
        elif self.action == "oom":
            raise MemoryError(f"test fault at {where}")
        raise RuntimeError(f"test fault: raise at {where}")


def parse_faults(spec: str | None) -> tuple[Fault, ...]:
    """The faults of ``spec`` (module docstring). Raises :class:`FaultSpecError`."""
    out = []
    for item in filter(None, (s.strip() for s in (spec or "").split(";"))):
        target = None
        head, sep, rest = item.partition(":")
        if sep and head.isdigit():
            target, item = int(head), rest
        action, at, point = item.partition("@")
        kind, _, num = point.partition(":")
        if action not in FAULT_ACTIONS or not at or kind not in ("start", "epoch", "batch") or \
                (kind != "start" and not num.isdigit()):
            raise FaultSpecError(f"test fault: cannot read {item!r} (expected [ENTRY:]ACTION@POINT with ACTION one "
                                 f"of {', '.join(FAULT_ACTIONS)} and POINT start, epoch:N or batch:N)")
        out.append(Fault(action, kind, int(num) if num else 0, target))
    return tuple(out)


def faults_of(faults: Sequence[Fault], entry_id: int | None) -> list[Fault]:
    """The faults that apply to queue entry ``entry_id``."""
    return [f for f in faults if f.entry is None or f.entry == entry_id]


class FaultWriter:
    """A run's writer, then the due fault: the writer's errors fail the run, so ``raise`` fails it as a real
    error would, after the files of that point are on disk."""

    def __init__(self, writer, faults: Sequence[Fault]):
        self._writer, self._faults = writer, list(faults)

    def __call__(self, ev) -> None:
        self._writer(ev)
        for f in list(self._faults):
            if f.due(ev):
                self._faults.remove(f)
                f.fire()

    def __getattr__(self, name):
        return getattr(self._writer, name)
