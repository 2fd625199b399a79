"""A queued run's child process: builds the trainer (training/ls_fit.py ``make_trainer``: a Trainer, or an MP/GMP
least-squares fit), runs it, and forwards its events to the supervisor.

The child's :class:`~dpd_desktop.runs.writer.RunWriter` writes the run folder as an in-process run does; the events
of :data:`~dpd_desktop.lab.event_codec.FORWARDED` go to the supervisor (lab/supervisor.py) as JSON over a pipe.
A second pipe carries the supervisor's requests: ``cancel`` (stop after the current batch; ``cancel:REASON`` records
REASON in status.json, e.g. a sweep's pruner), ``preview:N`` /
``preview:off``; when that pipe closes (the supervisor is gone) the run cancels itself. SIGINT is ignored: a
terminal's Ctrl+C reaches the whole process group, and the supervisor decides what it means.

Test hook ``DPD_DESKTOP_TEST_FAULT`` (its value is handed to the child when the child starts and read only there):
``[ENTRY:]ACTION@POINT`` items separated by ``;``. ENTRY (optional) limits the item to that queue entry id.
ACTION: ``segfault`` (the process ends by SIGSEGV), ``kill`` (SIGKILL), ``exit`` (``os._exit(70)``), ``raise`` (a
RuntimeError inside the run: it fails as any error does), ``oom`` (a MemoryError). POINT: ``start`` (after
RunStarted), ``epoch:N`` (after epoch N, 0-based as in history.csv, is on disk), ``batch:N`` (at the first progress
report at or past batch N, 1-based). Example: ``1:segfault@epoch:0`` — entry 1 segfaults after its first epoch.
"""
from __future__ import annotations

import faulthandler
import os
import signal
import threading
import traceback
from dataclasses import dataclass

from ..training.cpu_threads import prefer_passive_wait

prefer_passive_wait()  # before PyTorch loads OpenMP below (training/cpu_threads.py); the parent usually set it already

# The forkserver imports this module once (Supervisor's preload), so every child starts with PyTorch, the trainer
# and the libraries of the first epoch end and the results file already imported: measured on the 2-core development
# machine, `import torch` + trainer 0.99 s, and the first tiny run's lazy imports (scipy.signal, h5py) 0.5 s more.
import h5py  # noqa: F401,E402 - preloaded for the results file (see above)
import scipy.signal  # noqa: F401,E402 - preloaded for the metrics (see above)

from ..config import ExperimentConfig
from ..runs import events as E
from ..training.report import describe_error
from ..training.ls_fit import make_trainer
from ..training.resume import prepare_resume, resume_trainer
from ..training.trainer import load_dataset_for
from . import event_codec
from ..runs.record import DatasetRef
from ..runs.workspace import Workspace
from ..runs.writer import RunWriter

FAULT_ENV = "DPD_DESKTOP_TEST_FAULT"
FAULT_ACTIONS = ("segfault", "kill", "exit", "raise", "oom")
EXIT_FAULT_STATUS = 70


class FaultSpecError(ValueError):
    """A ``DPD_DESKTOP_TEST_FAULT`` value that cannot be parsed."""


@dataclass(frozen=True)
class Fault:
    action: str
    point: str  # "start", "epoch", "batch"
    n: int = 0

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
            raise MemoryError(f"test fault ({FAULT_ENV}) at {where}")
        raise RuntimeError(f"test fault ({FAULT_ENV}): raise at {where}")


def parse_faults(spec: str | None, entry_id: int | None) -> list[Fault]:
    """The faults of ``spec`` that apply to queue entry ``entry_id``. Raises :class:`FaultSpecError`."""
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
            raise FaultSpecError(f"{FAULT_ENV}: cannot read {item!r} (expected [ENTRY:]ACTION@POINT with ACTION one "
                                 f"of {', '.join(FAULT_ACTIONS)} and POINT start, epoch:N or batch:N)")
        if target is None or target == entry_id:
            out.append(Fault(action, kind, int(num) if num else 0))
    return out


class _FaultWriter:
    """The run's writer, then the due fault: the writer's errors fail the run, so ``raise`` fails it as a real
    error would, after the files of that point are on disk."""

    def __init__(self, writer: RunWriter, faults: list[Fault]):
        self._writer, self._faults = writer, list(faults)

    def __call__(self, ev) -> None:
        self._writer(ev)
        for f in list(self._faults):
            if f.due(ev):
                self._faults.remove(f)
                f.fire()

    def __getattr__(self, name):
        return getattr(self._writer, name)


class _Forwarder:
    """The trainer's observer in the child: encodes the forwarded events onto the pipe (one lock: on CUDA epoch
    ends come from a worker thread). Once the pipe is broken (the supervisor is gone: the control listener then
    cancels the run) the events are dropped: ``supervisor_gone``."""

    record_events = True  # RunPrepared names the run folder before RunStarted

    def __init__(self, conn):
        self._conn, self._lock = conn, threading.Lock()
        self.supervisor_gone = False

    def __call__(self, ev) -> None:
        if isinstance(ev, event_codec.FORWARDED) and not self.supervisor_gone:
            data = event_codec.encode(ev)
            with self._lock:
                try:
                    self._conn.send_bytes(data)
                except OSError:  # BrokenPipeError, or a closed handle: nobody reads any more
                    self.supervisor_gone = True


#: the cancel reason of a child whose supervisor's pipe closed (the supervisor was killed or ended)
SUPERVISOR_GONE = "the queue's supervising process ended"


def _listen(control, trainer_box: list, stop: threading.Event) -> None:
    """The supervisor's requests, until its pipe closes (then: cancel, with that reason in status.json)."""
    while True:
        reason = ""
        try:
            msg = control.recv_bytes().decode("ascii", "replace")
        except (EOFError, OSError):
            msg, reason = "cancel", SUPERVISOR_GONE
        trainer = trainer_box[0] if trainer_box else None
        if msg.startswith("cancel:"):
            msg, reason = "cancel", msg.split(":", 1)[1]
        if msg == "cancel":
            stop.set()
            if trainer is not None:
                trainer.request_cancel(reason)
            return
        if msg.startswith("preview:") and trainer is not None:
            n = msg.split(":", 1)[1]
            try:
                trainer.set_preview_every(int(n) if n.isdigit() else None)
            except ValueError:
                pass


def child_main(entry_id: int, config: dict, workspace_root: str, events_conn, control_conn,
               fault_spec: str | None = None, options: dict | None = None, observers=()):
    """The child's whole life (the target of the supervisor's process): one run, then return.

    ``options`` (the window's own run, gui/worker.py; None for a queue entry): ``dataset``, the
    :class:`~dpd_desktop.runs.record.DatasetRef` block of the window's loaded dataset (reloaded or regenerated here,
    its fingerprint checked); ``resume``, a run folder to continue (training/resume.py) instead of a new run.
    ``observers``: more observers of the trainer's events (in this process). Returns the trainer's RunResult, or
    None when the run could not start.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a SIGTERM ends a child (a forked one inherits the CLI's handler)
    faulthandler.enable()  # a real segfault leaves the Python traceback on stderr
    send = _Forwarder(events_conn)
    box: list = []
    stop = threading.Event()
    threading.Thread(target=_listen, args=(control_conn, box, stop), name="dpd-queue-control", daemon=True).start()
    try:
        faults = parse_faults(fault_spec, entry_id)
        cfg = ExperimentConfig.from_dict(config).validate()
        opts = dict(options or {})
        ws = Workspace(workspace_root)
        dataset = None
        if opts.get("dataset") is not None:
            dataset = DatasetRef.from_record(opts["dataset"], schema=2, recorded_in="the window's dataset").load()
        elif not opts.get("resume"):  # a resume without one reloads the run's recorded dataset
            dataset = load_dataset_for(cfg.dataset)
        if opts.get("resume"):
            trainer = resume_trainer(prepare_resume(ws, opts["resume"], dataset=dataset), ws, [send, *observers])
            if faults:
                trainer.writer = _FaultWriter(trainer.writer, faults)
        else:
            dataset.spec.require_metrics(str(dataset.source))
            writer = _FaultWriter(RunWriter(), faults) if faults else None
            trainer = make_trainer(cfg, dataset=dataset, workspace=ws, observers=[send, *observers], writer=writer)
    except Exception as exc:  # noqa: BLE001 - reported to the supervisor as the run's failure
        send(E.RunFailed(run_id=None, run_dir=None, message=f"the run could not start: {describe_error(exc)}",
                         detail=traceback.format_exc()))
        return None
    box.append(trainer)
    if stop.is_set():
        trainer.request_cancel()
    result = trainer.run()
    events_conn.close()
    return result
