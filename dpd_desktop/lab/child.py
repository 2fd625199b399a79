"""A queued run's child process: builds the trainer (training/ls_fit.py ``make_trainer``), runs it, and forwards the
events of :data:`~dpd_desktop.lab.event_codec.FORWARDED` to the supervisor as JSON over a pipe; its own
:class:`~dpd_desktop.runs.writer.RunWriter` writes the run folder. A second pipe carries the supervisor's requests:
``cancel`` (``cancel:REASON`` records REASON in status.json), ``preview:N`` / ``preview:off``; when it closes the run
cancels itself. SIGINT is ignored: a terminal's Ctrl+C reaches the whole process group, the supervisor decides.
"""
from __future__ import annotations

import faulthandler
import signal
import threading
import traceback

from ..training.cpu_threads import prefer_passive_wait

prefer_passive_wait()  # before PyTorch loads OpenMP below (training/cpu_threads.py); the parent usually set it already

# The forkserver preloads this module, so every child starts with PyTorch, the trainer, the first epoch end's and
# the results file's libraries imported (benchmarks/results/2026-12-04-notes-training.md).
import h5py  # noqa: F401,E402 - preloaded for the results file (see above)
import scipy.signal  # noqa: F401,E402 - preloaded for the metrics (see above)

from ..config import ExperimentConfig
from ..runs import events as E
from ..training.report import describe_error
from ..training.ls_fit import make_trainer
from ..training.resume import prepare_resume, resume_trainer
from ..training.trainer import load_dataset_for
from . import event_codec
from .faults import FaultWriter, faults_of
from ..runs.record import DatasetRef
from ..runs.workspace import Workspace
from ..runs.writer import RunWriter

class _Forwarder:
    """A trainer's observer in a child: the forwarded events onto the pipe, after ``head`` (a group's ``b"ENTRY\\n"``;
    its members share ``lock`` and ``gone``). Once the pipe is broken (the supervisor is gone: the control listener
    then cancels the run) the events are dropped: ``supervisor_gone``."""

    record_events = True  # RunPrepared names the run folder before RunStarted

    def __init__(self, conn, lock: threading.Lock | None = None, head: bytes = b"", gone: list | None = None):
        self._conn, self._lock, self._head = conn, lock or threading.Lock(), head
        self._gone = [] if gone is None else gone

    @property
    def supervisor_gone(self) -> bool:
        return bool(self._gone)

    def __call__(self, ev) -> None:
        if isinstance(ev, event_codec.FORWARDED) and not self._gone:
            data = self._head + event_codec.encode(ev)
            with self._lock:  # on CUDA epoch ends come from a worker thread, a group's members from theirs
                try:
                    self._conn.send_bytes(data)
                except OSError:  # BrokenPipeError, or a closed handle: nobody reads any more
                    self._gone.append(True)


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


def start_child_process() -> None:
    """A child's signals (SIGINT ignored, SIGTERM ends it: a forked one inherits the CLI's handler) and faulthandler
    (a real segfault leaves the Python traceback on stderr)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    faulthandler.enable()


def child_main(entry_id: int, config: dict, workspace_root: str, events_conn, control_conn,
               faults=(), options: dict | None = None, observers=(), plot_data: bool = True):
    """The child's whole life (the target of the supervisor's process): one run, then return.

    ``options`` (the window's own run; None for a queue entry): ``dataset``, the :class:`DatasetRef` block of the
    window's dataset (reloaded here, fingerprint checked); ``resume``, a run folder to continue instead of a new run.
    ``observers``: more observers in this process. ``faults``: lab/faults.py ``Fault`` s (tests). ``plot_data``
    False: the run computes no plot data (its supervisor's observers draw none: a sweep's). Returns the
    trainer's RunResult, or None when the run could not start.
    """
    start_child_process()
    send = _Forwarder(events_conn)
    box: list = []
    stop = threading.Event()
    threading.Thread(target=_listen, args=(control_conn, box, stop), name="dpd-queue-control", daemon=True).start()
    try:
        faults = faults_of(faults, entry_id)
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
                trainer.output.writer = FaultWriter(trainer.output.writer, faults)
        else:
            dataset.spec.require_metrics(str(dataset.source))
            writer = FaultWriter(RunWriter(), faults) if faults else None
            trainer = make_trainer(cfg, dataset=dataset, workspace=ws, observers=[send, *observers], writer=writer,
                                   plot_data=plot_data)
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
