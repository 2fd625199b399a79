"""The window's interactive run in a child process: one entry for :class:`~dpd_desktop.lab.supervisor.Supervisor`,
kept in memory instead of the workspace's queue file.

Why not an entry of queue.sqlite: the interactive run is the window's own; in the queue file a ``queue run`` of the
command line (or the window's queue panel) could claim it, the queue panel would list it, and a window that crashes
would leave a "running" entry for :meth:`~dpd_desktop.lab.queue.RunQueue.recover`. :class:`SingleRunQueue` offers
the supervisor the few calls it makes on a queue (``recover``, ``claim_next``, ``set_run``, ``cancel_requested``,
``finish``, ``close``), for exactly one entry. The child (lab/child.py) trains, writes the run folder and forwards
its events as for a queued run; a child that dies without an outcome gets its final status.json from the supervisor
(``interrupted`` for a kill, ``failed`` for a crash).

:func:`child_options` tells the child which dataset to train on: the :class:`~dpd_desktop.runs.record.DatasetRef`
block of the window's loaded dataset (the child reloads the folder, or regenerates the demo from its settings, and
checks the fingerprint), so that the child trains on exactly the data the window shows.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable

from ..config import ExperimentConfig
from ..data.synthetic import demo_settings
from .queue import device_lane
from ..runs.record import DatasetRef

#: the id of the one entry (the child's fault hook, lab/child.py, may name it: ``1:kill@epoch:0``)
ENTRY_ID = 1


@dataclass(frozen=True)
class InteractiveEntry:
    """The one entry: the fields of :class:`~dpd_desktop.lab.queue.QueueEntry` the supervisor reads, and the
    ``child_options`` handed to lab/child.py ``child_main``."""

    config: ExperimentConfig
    child_options: dict[str, Any] = field(default_factory=dict)
    #: the child's target (called with lab/child.py child_main's arguments; None: child_main itself), a
    #: module-level function, which the process start pickles by name (gui/child_plots.py)
    child_target: Callable | None = None
    id: int = ENTRY_ID
    state: str = "queued"
    run_id: str | None = None
    run_dir: str | None = None
    message: str = ""

    @property
    def device(self) -> str:
        return device_lane(self.config.device)

    @property
    def step(self) -> str:
        return self.config.step

    def label(self) -> str:
        c = self.config
        return f"{c.step.upper()} {str(c.backbone).upper()}-{c.hidden_size} {c.dataset}"


class SingleRunQueue:
    """An in-memory queue of one :class:`InteractiveEntry` (see the module docstring); thread-safe."""

    def __init__(self, entry: InteractiveEntry):
        self._entry = entry
        self._lock = threading.Lock()
        self._claimed = False
        self._cancel = False

    @property
    def entry(self) -> InteractiveEntry:
        with self._lock:
            return self._entry

    def request_cancel(self) -> None:
        """Cancel the entry: before its child starts it never starts; a running child gets ``cancel``."""
        with self._lock:
            self._cancel = True

    # -- the calls of Supervisor ----------------------------------------------------------------------------------
    def recover(self) -> list:
        return []

    def claim_next(self, lanes: Iterable[str] | None = None, busy: Iterable[str] = (),
                   only: Iterable[int] | None = None) -> InteractiveEntry | None:
        with self._lock:
            if only is not None and self._entry.id not in {int(x) for x in only}:
                return None
            if self._claimed:
                return None
            self._claimed = True
            if self._cancel:  # stopped before the child started: it ends cancelled, without a run folder
                self._entry = replace(self._entry, state="cancelled", message="cancelled before the run started")
                return None
            self._entry = replace(self._entry, state="running")
            return self._entry

    def set_run(self, entry_id: int, run_id: str | None, run_dir: str | None) -> None:
        with self._lock:
            self._entry = replace(self._entry, run_id=run_id, run_dir=run_dir)

    def cancel_requested(self, entry_id: int) -> bool:
        with self._lock:
            return self._cancel

    def finish(self, entry_id: int, state: str, message: str = "") -> InteractiveEntry:
        with self._lock:
            self._entry = replace(self._entry, state=state, message=message)
            return self._entry

    def close(self) -> None:
        pass


def reloadable(dataset) -> bool:
    """Whether a child process can load ``dataset`` again: a demo with its generator settings, or a dataset read
    from a path that exists (an in-memory dataset without either trains in the window's process)."""
    if dataset is None:
        return False
    if demo_settings(dataset) is not None:
        return True
    source = getattr(dataset, "source", None)
    try:
        return source is not None and Path(source).exists()
    except (OSError, TypeError, ValueError):
        return False


def child_options(dataset=None, resume: str | None = None) -> dict[str, Any]:
    """The ``options`` of lab/child.py ``child_main``: ``dataset`` (the DatasetRef block of ``dataset``, which
    hashes the data: call it off the GUI thread) and ``resume`` (a run folder to continue)."""
    opts: dict[str, Any] = {}
    if dataset is not None:
        opts["dataset"] = DatasetRef.from_dataset(dataset).to_dict()
    if resume:
        opts["resume"] = str(resume)
    return opts
