"""The window's training run in a child process (lab/interactive.py, lab/supervisor.py, lab/child.py).

:class:`ChildTrainingWorker` has the interface of :class:`~dpd_desktop.gui.worker.TrainingWorker` (the same signals
carrying the same event dataclasses; ``request_cancel``, ``set_preview_every``, ``wait``, ``is_done``), so the window
follows it as it follows an in-process run. The trainer runs in a child of the forkserver (PyTorch and the trainer
preloaded there, gui/preload.py starts it behind the first paint); the window's process only decodes the child's
events (JSON, lab/event_codec.py) on this worker's QThread. Why: a training thread in the window's process holds
the GIL during its epoch-end evaluation and the PNG writing, which stalled the event loop 200-260 ms
(benchmarks/results/2026-12-01-window-startup-responsiveness.md).

A child that ends without reporting an outcome (killed, crashed) gets its final status.json from the supervisor;
the window hears ``failed`` (RunFailed, "process ended by signal SIGSEGV") or :attr:`interrupted` (a kill: the
:class:`~dpd_desktop.lab.supervisor.EntryEnded` with state ``interrupted``), and stays up.
"""
from __future__ import annotations

import threading
import traceback
from pathlib import Path

from PySide6.QtCore import QObject, Slot

from ..timing import Throttle
from ..lab.interactive import ENTRY_ID, InteractiveEntry, SingleRunQueue, child_options
from ..runs.record import RecordError, RunRecord
from ..lab.supervisor import EntryEnded, Supervisor
from ..runs.events import (BatchProgress, EpochEnded, PreviewReady, RunCancelled, RunFailed, RunFinished,
                               RunStarted)
from .child_plots import run_then_write_plots
from .worker import RunSignals

_SIGNAL_OF = {RunStarted: "started", EpochEnded: "epochEnded", PreviewReady: "previewReady",
              RunFinished: "finished", RunFailed: "failed", RunCancelled: "cancelled"}


class ChildTrainingWorker(RunSignals):
    """Runs one training run (``config`` on the loaded ``dataset``, or the resume of ``resume`` — a run folder) in
    a child process and forwards its events as signals; see the module docstring.

    ``resumed_rows``: for a resume, the history rows of the epochs done before it (history.csv as the child's
    writer rewrote it from last.pt), set before ``started`` is emitted.
    """

    THREAD_NAME = "dpd-training-child"

    def __init__(self, config, dataset=None, workspace=None, resume: str | None = None, write_plots: bool = False,
                 supervisor_factory=Supervisor, parent: QObject | None = None):
        super().__init__(parent)
        self.write_plots = write_plots
        self.config = config
        self.dataset = dataset
        self.workspace = workspace
        self.resume = resume
        self._factory = supervisor_factory
        self._lock = threading.Lock()
        self._queue: SingleRunQueue | None = None
        self._sup: Supervisor | None = None
        self._cancel = False
        self._preview: tuple[bool, int | None] | None = None
        self._progress = Throttle(self.PROGRESS_MIN_INTERVAL_S)
        self._outcome_emitted = False
        self.resumed_rows: list[dict] = []
        self.end: EntryEnded | None = None
        self.pid: int | None = None

    # -- control (GUI thread) -------------------------------------------------------------------------------------
    def request_cancel(self) -> None:
        """Ask the child to stop after its current batch (safe from any thread; before the child starts: it never
        starts)."""
        with self._lock:
            self._cancel = True
            queue = self._queue
        if queue is not None:
            queue.request_cancel()  # the supervisor's poll sends "cancel" to a running child within 0.2 s

    request_stop = request_cancel

    @property
    def cancel_requested(self) -> bool:
        return self._cancel

    def set_preview_every(self, n: int | None) -> None:
        """A live change of the preview period, sent to the child (applied at its next batch)."""
        with self._lock:
            sup = self._sup
            self._preview = (True, n)  # (re)sent when the child's RunStarted arrives: a send before it starts is lost
        if sup is not None:
            sup.send(ENTRY_ID, f"preview:{int(n)}" if n else "preview:off")

    # -- the run (worker thread) ----------------------------------------------------------------------------------
    @Slot()
    def run(self) -> None:
        try:
            # the DatasetRef hashes the whole dataset (its fingerprint): here, not on the GUI thread
            opts = child_options(self.dataset, resume=self.resume)
            target = run_then_write_plots if self.write_plots else None
            queue = SingleRunQueue(InteractiveEntry(self.config, opts, child_target=target))
            sup = self._factory(self.workspace, observers=[self._observe], queue=queue)
            with self._lock:
                self._queue, self._sup = queue, sup
                cancel = self._cancel
            if cancel:
                queue.request_cancel()
            sup.run(watch=False)
        except Exception as exc:  # noqa: BLE001 - the run's own failures come from the child
            if not self._outcome_emitted:
                self._outcome_emitted = True
                self.failed.emit(RunFailed(run_id=None, run_dir=None, message=f"The run could not start: {exc}",
                                           detail=traceback.format_exc()))
        finally:
            with self._lock:
                self._sup = None
            self._end()

    def _observe(self, entry, ev) -> None:
        """The supervisor's observer (this worker's thread): only emits signals."""
        if isinstance(ev, EntryEnded):
            self.end = ev
            if ev.state == "interrupted" and not self._outcome_emitted:
                self._outcome_emitted = True
                self.interrupted.emit(ev)
            elif ev.state == "succeeded" and self.write_plots and ev.run_dir:
                self.plotsWritten.emit(written_plots(ev.run_dir))
            return
        if isinstance(ev, BatchProgress):
            if self._progress.ready(final=ev.batch >= ev.batches):
                self.batchProgress.emit(ev)
            return
        if isinstance(ev, RunStarted):
            self._on_child_started(ev)
        name = _SIGNAL_OF.get(type(ev))
        if name is None:
            if hasattr(ev, "pid"):
                self.pid = ev.pid  # EntryStarted
            return
        if name in ("finished", "failed", "cancelled"):
            if self._outcome_emitted:
                return
            self._outcome_emitted = True
        getattr(self, name).emit(ev)

    def _on_child_started(self, ev) -> None:
        with self._lock:
            sup, preview = self._sup, self._preview
        if preview is not None and sup is not None:
            sup.send(ENTRY_ID, f"preview:{int(preview[1])}" if preview[1] else "preview:off")
        if self.resume:
            self.resumed_rows = rows_before_resume(ev.run_dir)


def written_plots(run_dir) -> list[Path] | OSError:
    """The PNGs the child wrote into ``run_dir/plots`` (file order), or an OSError saying none were."""
    paths = sorted(Path(run_dir, "plots").glob("*.png"))
    return paths or OSError(f"the run's process wrote no plots into {Path(run_dir) / 'plots'} (see its stderr)")


def rows_before_resume(run_dir) -> list[dict]:
    """The history rows of a resumed run up to the epoch it resumed from (config.json's last ``resumes`` entry): the
    child may have appended the resumed run's first rows by the time its RunStarted is read here."""
    try:
        rec = RunRecord.open(run_dir)
        resumes = rec.doc.get("resumes") or []
        last = int(resumes[-1]["from_epoch"]) if resumes else None
        rows = [dict(r) for r in rec.history()]
    except (RecordError, OSError, ValueError, KeyError, TypeError):
        return []
    return [r for r in rows if last is None or int(r["EPOCH"]) <= last]
