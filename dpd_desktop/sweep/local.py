"""The local executor: each trial a queue entry of the workspace, trained in a child process by the supervisor.

The trials enter ``<workspace>/queue.sqlite`` (so ``queue list`` and the queue dock show them) and a
:class:`~dpd_desktop.lab.supervisor.Supervisor` restricted to them runs one child per trial, one at a time per
device lane. A group's trials carry the tag ``<sweep id>#<group>`` and train in one child (lab/group_child.py).
``stop`` set: running trials end ``cancelled`` after their batch, queued ones are cancelled. An entry another
supervisor took first is followed through the queue file until it ends (unseen epochs: it cannot be pruned).
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Sequence

from ..lab.queue import RunQueue
from ..runs.states import FINAL_STATES
from ..lab.supervisor import EntryEnded, Supervisor
from ..runs.workspace import Workspace
from ..runs import events as E
from .executor import Trial, TrialEnd, report

POLL_S = 0.2


def group_tag(trial: Trial) -> str | None:
    """The queue's group tag of a trial (lab/queue.py ``group``): ``<sweep id>#<group>``; None for a lone trial."""
    return None if trial.group is None else f"{trial.sweep_id}#{trial.group}"


class LocalExecutor:
    """Runs trials on this machine through the workspace's queue (see the module docstring).

    Args:
        workspace: the workspace of the runs and the queue.
        lanes: the device lanes served (None: every lane the trials name).
        context: a multiprocessing context for the children (tests), as Supervisor's.
    """

    def __init__(self, workspace: Workspace, lanes: Sequence[str] | None = None, context=None):
        self.workspace = workspace
        self.lanes = lanes
        self.context = context

    def run(self, trials: Sequence[Trial], on_done: Callable[[TrialEnd], None], stop: threading.Event,
            on_epoch: Callable[[Trial, object], str | None] | None = None,
            on_start: Callable[[Trial, str], None] | None = None,
            on_many: Callable[[list[TrialEnd]], None] | None = None) -> None:
        if not trials:
            return
        if stop.is_set():  # stopped before anything was queued: nothing enters the queue
            report([TrialEnd(t, "cancelled", None, "cancelled before it started") for t in trials], on_done, on_many)
            return
        with RunQueue(self.workspace.root) as q:
            # one transaction for the whole sweep, not a commit per trial (benchmarks/results/2026-12-04-notes-core.md)
            ids = q.add_many([(t.config, group_tag(t)) for t in trials])
            by_entry = dict(zip(ids, trials))
            ended: set[int] = set()
            pruned: dict[int, str] = {}
            runs: dict[int, str | None] = {}
            sup: Supervisor | None = None

            def observe(entry, ev) -> None:
                t = by_entry.get(entry.id)
                if t is None:
                    return
                if isinstance(ev, (E.RunPrepared, E.RunStarted)):
                    if entry.id not in runs and on_start is not None and ev.run_dir:
                        on_start(t, ev.run_dir)
                    runs[entry.id] = ev.run_dir
                elif isinstance(ev, E.EpochEnded) and on_epoch is not None and entry.id not in pruned:
                    reason = on_epoch(t, ev)
                    if reason:
                        pruned[entry.id] = reason
                        sup.send(entry.id, f"cancel:{reason}")
                elif isinstance(ev, EntryEnded) and entry.id not in ended:
                    ended.add(entry.id)
                    msg = pruned[entry.id] if ev.state == "cancelled" and entry.id in pruned else ev.message
                    on_done(TrialEnd(t, ev.state, ev.run_dir or runs.get(entry.id), msg))

            # its observer reads the epoch rows only: the trials compute no plot data
            sup = Supervisor(self.workspace, lanes=self.lanes, observers=[observe], queue=q, context=self.context,
                             entries=list(by_entry), plot_data=False)
            finished = threading.Event()

            def watch_stop() -> None:
                while not finished.wait(POLL_S):
                    if stop.is_set():
                        sup.request_stop()
                        return

            watcher = threading.Thread(target=watch_stop, name="dpd-sweep-stop", daemon=True)
            watcher.start()
            try:
                while True:
                    sup.run()
                    if not self._settle(q, by_entry, ended, on_done, stop, on_many):
                        break
                    time.sleep(POLL_S)
            finally:
                finished.set()
                watcher.join()

    def _settle(self, q: RunQueue, by_entry: dict, ended: set, on_done, stop: threading.Event,
                on_many=None) -> bool:
        """After a supervisor pass: end the entries that ended elsewhere (another supervisor ran them) or, after a
        stop, cancel ours that are left (one transaction, one record of their ends, not one per entry); True while some
        are still to run or to end."""
        left = [i for i in by_entry if i not in ended]
        if stop.is_set():
            q.cancel_many(left)
        entries = q.ended_among(left)
        ends = []
        for i in left:
            e = entries.get(i)
            if e is not None and e.state in FINAL_STATES:
                ended.add(i)
                ends.append(TrialEnd(by_entry[i], e.state, e.run_dir, e.message))
        report(ends, on_done, on_many)
        return any(i not in ended for i in by_entry)
