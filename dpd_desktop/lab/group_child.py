"""A group's child process: the queue entries of one group (lab/queue.py ``claim_group``) trained together through
:class:`~dpd_desktop.training.group.TrainerGroup` on ONE loaded dataset.

Each entry has its own trainer, writer and run folder, as in lab/child.py; its events go to the supervisor after a
line with its entry id (``b"ENTRY\\n" + event``). Requests: ``ENTRY MESSAGE`` for one member (``3 cancel:pruned by
the sweep at epoch 1``), a bare ``MESSAGE`` for all; a closed pipe cancels every member. A member whose trainer cannot
be built fails alone; a dataset that cannot be loaded fails all. Test faults (lab/faults.py) apply per entry.
"""
from __future__ import annotations

import threading
import traceback

from ..config import ExperimentConfig
from ..runs import events as E
from ..training.group import TrainerGroup
from ..training.ls_fit import make_trainer
from ..training.report import describe_error
from ..training.trainer import load_dataset_for
from .child import SUPERVISOR_GONE, _Forwarder, start_child_process
from .faults import FaultWriter, faults_of
from ..runs.workspace import Workspace
from ..runs.writer import RunWriter



class _Members:
    """The requests of the supervisor, routed to the members (thread-safe): those that arrive before the group is
    built are kept and applied once it is."""

    def __init__(self, entry_ids: list[int]):
        self.ids = list(entry_ids)
        self._lock = threading.Lock()
        self._group: TrainerGroup | None = None
        self._index: dict[int, int] = {}
        self._cancels: dict[int, str] = {}  # entry id -> reason, before the group exists

    def attach(self, group: TrainerGroup, entry_ids: list[int]) -> None:
        with self._lock:
            self._group, self._index = group, {e: i for i, e in enumerate(entry_ids)}
            pending = dict(self._cancels)
        for eid, reason in pending.items():
            if eid in self._index:
                group.request_cancel(self._index[eid], reason)

    def cancel(self, entry_id: int | None, reason: str) -> None:
        with self._lock:
            group, index = self._group, dict(self._index)
            if group is None:
                for eid in (self.ids if entry_id is None else [entry_id]):
                    self._cancels.setdefault(eid, reason)
                return
        if entry_id is None:
            group.cancel_all(reason)
        elif entry_id in index:
            group.request_cancel(index[entry_id], reason)

    def preview(self, entry_id: int | None, every: int | None) -> None:
        with self._lock:
            group, index = self._group, dict(self._index)
        if group is None:
            return
        for eid, i in index.items():
            if entry_id is None or eid == entry_id:
                try:
                    group.trainers[i].set_preview_every(every)
                except ValueError:
                    pass


def _listen(control, members: _Members) -> None:
    """The supervisor's requests until its pipe closes (then every member cancels: :data:`SUPERVISOR_GONE`)."""
    while True:
        try:
            text = control.recv_bytes().decode("ascii", "replace")
        except (EOFError, OSError):
            members.cancel(None, SUPERVISOR_GONE)
            return
        head, sep, rest = text.partition(" ")
        entry_id, msg = (int(head), rest) if sep and head.isdigit() else (None, text)
        if msg == "cancel" or msg.startswith("cancel:"):
            members.cancel(entry_id, msg.split(":", 1)[1] if ":" in msg else "")
        elif msg.startswith("preview:"):
            n = msg.split(":", 1)[1]
            members.preview(entry_id, int(n) if n.isdigit() else None)


def group_child_main(entry_ids: list[int], configs: list[dict], workspace_root: str, events_conn, control_conn,
                     faults=(), plot_data: bool = True) -> list | None:
    """The whole life of a group's child (the target of the supervisor's process): the members' runs, then return
    their RunResults in order (None when the dataset could not be loaded: every member failed). ``plot_data``: as
    lab/child.py's."""
    start_child_process()
    lock, gone = threading.Lock(), []
    sends = {eid: _Forwarder(events_conn, lock, f"{int(eid)}\n".encode("ascii"), gone) for eid in entry_ids}
    members = _Members(entry_ids)
    threading.Thread(target=_listen, args=(control_conn, members), name="dpd-queue-group-control",
                     daemon=True).start()

    def fail(eid: int, exc: BaseException) -> None:
        sends[eid](E.RunFailed(run_id=None, run_dir=None, message=f"the run could not start: {describe_error(exc)}",
                               detail=traceback.format_exc()))

    try:
        cfgs = [ExperimentConfig.from_dict(c).validate() for c in configs]
        ws = Workspace(workspace_root)
        dataset = load_dataset_for(cfgs[0].dataset)  # ONE dataset object for every member (training/group.py)
        dataset.spec.require_metrics(str(dataset.source))
    except Exception as exc:  # noqa: BLE001 - every member's failure, reported to the supervisor
        for eid in entry_ids:
            fail(eid, exc)
        events_conn.close()
        return None
    trainers, built = [], []
    for eid, cfg in zip(entry_ids, cfgs):
        try:
            mine = faults_of(faults, eid)
            writer = FaultWriter(RunWriter(), mine) if mine else None
            trainers.append(make_trainer(cfg, dataset=dataset, workspace=ws, observers=[sends[eid]], writer=writer,
                                         plot_data=plot_data))
            built.append(eid)
        except Exception as exc:  # noqa: BLE001 - this member fails alone
            fail(eid, exc)
    results = []
    if trainers:
        group = TrainerGroup(trainers)
        members.attach(group, built)
        results = group.run()
    events_conn.close()
    return results
