"""The supervisor of queued runs: each in a child process (lab/child.py), one at a time per device lane.

:class:`Supervisor` claims entries of :class:`~dpd_desktop.lab.queue.RunQueue`, starts a child for each, forwards
its events to the observers, and when a child ends decides the entry's state:

- an outcome event (RunFinished / RunFailed / RunCancelled) → succeeded / failed / cancelled;
- none, ended by SIGKILL/SIGTERM/SIGHUP (a kill, the out-of-memory killer) → ``interrupted``;
- none, another signal or a non-zero exit status → ``failed`` ("process ended by signal SIGSEGV").

A run folder the child left "running" gets its final status (:func:`~dpd_desktop.runs.writer.mark_dead_run`) and
the observers a RunFailed. A group's entries share one child (lab/group_child.py); a dead child ends every member
still without an outcome.

Children start from a ``forkserver`` with lab/child.py preloaded where the platform has one, else ``spawn``; the
forkserver ignores SIGTERM (lab/forkserver_signals.py), so a SIGTERM to the whole process group still tells each
child's end (``interrupted``) instead of losing it.
Observers are ``observer(entry, event)`` callables (``event`` one of :data:`~dpd_desktop.lab.event_codec.FORWARDED`,
:class:`EntryStarted` or :class:`EntryEnded`), run on the supervisor's thread; their errors are logged and ignored.
"""
from __future__ import annotations

import logging
import multiprocessing as mp
import signal
import threading
from dataclasses import dataclass, field
from multiprocessing.connection import wait as mp_wait
from typing import Callable, Iterable

from ..runs import events as E
from . import event_codec
from .queue import QueueEntry, RunQueue, device_lane
from ..runs.workspace import Workspace
from ..runs.writer import mark_dead_run

try:  # POSIX only (the children are spawned elsewhere)
    import multiprocessing.forkserver as mp_forkserver
except ImportError:  # pragma: no cover - Windows
    mp_forkserver = None

log = logging.getLogger("dpd_desktop.supervisor")

POLL_S = 0.2
#: Signals that mean "stopped from outside" (a user's kill, the out-of-memory killer): the run is interrupted.
KILL_SIGNALS = tuple(getattr(signal, n) for n in ("SIGKILL", "SIGTERM", "SIGHUP") if hasattr(signal, n))


@dataclass(frozen=True)
class EntryStarted:
    """The child of ``entry`` is running (its pid)."""

    entry_id: int
    pid: int | None


@dataclass(frozen=True)
class EntryEnded:
    """``entry`` ended in ``state`` (a final state of runs/states.py) with ``message``."""

    entry_id: int
    state: str
    message: str = ""
    run_dir: str | None = None


#: modules the forkserver imports besides lab/child.py (:func:`start_forkserver`'s ``extra_preload``)
_EXTRA_PRELOAD: list[str] = []


def process_context():
    """The multiprocessing context of the children: forkserver (PyTorch preloaded) where available, else spawn."""
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["dpd_desktop.lab.forkserver_signals", "dpd_desktop.lab.child",
                                    "dpd_desktop.lab.group_child", *_EXTRA_PRELOAD])
        return ctx
    return mp.get_context("spawn")


def start_forkserver(extra_preload: Iterable[str] = ()) -> bool:
    """Start the children's forkserver now, so that the first child does not wait for its imports; False where
    children are spawned. ``extra_preload``: modules it imports too (only before it first starts)."""
    _EXTRA_PRELOAD.extend(m for m in extra_preload if m not in _EXTRA_PRELOAD)
    ctx = process_context()
    if ctx.get_start_method() != "forkserver" or mp_forkserver is None:
        return False
    mp_forkserver.ensure_running()
    return True


def exit_reason(exitcode: int | None) -> tuple[str, str]:
    """(state, message) for a child that ended without reporting an outcome; ``exitcode`` as
    :attr:`multiprocessing.Process.exitcode` (negative: the signal)."""
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        if -exitcode in KILL_SIGNALS:
            hint = " (a kill, or the system's out-of-memory killer)" if name == "SIGKILL" else ""
            return "interrupted", f"process ended by signal {name}{hint}"
        return "failed", f"process ended by signal {name}"
    if exitcode:
        return "failed", f"process exited with status {exitcode} before reporting an outcome"
    return "failed", "process ended without reporting an outcome"


@dataclass
class _Member:
    """One entry of a child: what its run reported so far."""

    entry: QueueEntry
    run_dir: str | None = None
    run_id: str | None = None
    outcome: object = None
    cancel_sent: bool = False
    ended: bool = False  # its queue entry is final (a group's member ends on its outcome, before the child exits)
    queued: bool = True  # False: an entry of :meth:`Supervisor.run_entry`, in no queue


@dataclass
class _Child:
    """One child process and its entries (one, or a group's: lab/group_child.py, whose events and requests carry
    the entry id)."""

    members: dict  # entry id -> _Member, in queue order
    proc: object
    events: object  # the read end of the events pipe
    control: object  # the write end of the control pipe
    grouped: bool = False
    eof: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def entry(self) -> QueueEntry:
        """The first entry (the only one of an ungrouped child)."""
        return next(iter(self.members.values())).entry


class Supervisor:
    """Run the queue's entries in child processes (see the module docstring).

    Args:
        lanes: the device lanes served (``cpu``, ``cuda:0``, …; None: every lane).
        observers: ``observer(entry, event)`` callables.
        queue: a :class:`RunQueue` (default: the workspace's); the supervisor closes only one it opened.
        entries: run only these entry ids (a sweep's trials, sweep/local.py); None: every entry.
        faults: lab/faults.py ``Fault`` s handed to every child (tests).
        plot_data: False: the children's runs compute no plot data (the events' ``plots`` None), for observers that
            draw none (a sweep's).
    """

    def __init__(self, workspace: Workspace, lanes: Iterable[str] | None = None,
                 observers: Iterable[Callable] = (), queue: RunQueue | None = None, context=None,
                 entries: Iterable[int] | None = None, faults: Iterable = (), plot_data: bool = True):
        self.workspace = workspace
        self.plot_data = plot_data
        self.lanes = None if lanes is None else [device_lane(x) for x in lanes]
        self.only = None if entries is None else frozenset(int(x) for x in entries)
        self.observers = list(observers)
        self.faults = tuple(faults)
        self._own_queue = queue is None
        self._queue = queue
        self._ctx = context
        self._stop = threading.Event()
        self._children: dict[int, _Child] = {}
        self._lock = threading.Lock()
        self.ended: list[EntryEnded] = []

    @property
    def queue(self) -> RunQueue:
        """The queue given, else the workspace's (opened on first use: :meth:`run_entry` opens none)."""
        if self._queue is None:
            self._queue = RunQueue(self.workspace.root)
        return self._queue

    # ------------------------------------------------------------------------------------------------ control
    def request_stop(self) -> None:
        """Stop the queue (thread-safe): running children stop after their current batch, none starts."""
        self._stop.set()

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def send(self, entry_id: int | None, message: str) -> None:
        """Send ``message`` (``cancel``, ``cancel:REASON``, ``preview:N``, ``preview:off``) to a running child (None: every child);
        thread-safe, ignored when it has ended."""
        if entry_id is None:
            targets = [(c, message) for c in self._distinct_children()]
        else:
            with self._lock:
                c = self._children.get(entry_id)
            # a group's child reads "ENTRY MESSAGE" for one of its entries (lab/group_child.py)
            targets = [] if c is None else [(c, f"{entry_id} {message}" if c.grouped else message)]
        for c, msg in targets:
            try:
                c.control.send_bytes(msg.encode("ascii"))
            except (OSError, ValueError):
                pass

    def running_entries(self) -> list[int]:
        """The entries still running (a group's member that reported its outcome is no longer one)."""
        with self._lock:
            return [i for i, c in self._children.items() if not c.members[i].ended]

    # ------------------------------------------------------------------------------------------------ the loop
    def run(self, watch: bool = False) -> list[EntryEnded]:
        """Run entries until none is ready for the served lanes and no child runs (``watch``: until
        :meth:`request_stop`); returns the ends of this call's entries, in order."""
        try:
            for e in self.queue.recover():
                self._notify(e, EntryEnded(e.id, e.state, e.message, e.run_dir))
            while True:
                if not self._stop.is_set():
                    self._start_ready()
                children = self._distinct_children()
                if not children:
                    if self._stop.is_set() or not watch:
                        break
                    self._stop.wait(POLL_S * 5)
                    continue
                self._poll(children)
        finally:
            self._stop_children()
            if self._own_queue:
                self.queue.close()
        return list(self.ended)

    def run_entry(self, entry: QueueEntry, options: dict | None = None) -> EntryEnded:
        """Run ``entry``, which is in no queue (the window's own run), in a child as :meth:`run` runs a claimed one,
        and return its end; ``options`` go to lab/child.py ``child_main``. After a :meth:`request_stop` it ends
        ``cancelled`` without a child."""
        try:
            if self._stop.is_set():
                end = EntryEnded(entry.id, "cancelled", "cancelled before the run started")
                self.ended.append(end)
                self._notify(entry, end)
                return end
            self._launch([entry], options=options, queued=False)
            while children := self._distinct_children():
                self._poll(children)
        finally:
            self._stop_children()
        return self.ended[-1]

    def _distinct_children(self) -> list[_Child]:
        """The running children, each once (a group's child is filed under each of its entries)."""
        with self._lock:
            return list({id(c): c for c in self._children.values()}.values())

    def _start_ready(self) -> None:
        while True:
            with self._lock:
                busy = {c.entry.device for c in self._children.values()}
            entry = self.queue.claim_next(self.lanes, busy=busy, only=self.only)
            if entry is None:
                return
            if getattr(entry, "group", None) is not None:
                self._launch(self.queue.claim_group(entry, only=self.only))
            else:
                self._launch([entry])

    def _launch(self, entries: list[QueueEntry], options: dict | None = None, queued: bool = True) -> None:
        ctx = self._ctx or process_context()
        self._ctx = ctx
        entry = entries[0]
        grouped = getattr(entry, "group", None) is not None
        ev_r, ev_w = ctx.Pipe(duplex=False)
        ct_r, ct_w = ctx.Pipe(duplex=False)
        if grouped:  # one child for the group's entries (lab/group_child.py)
            proc = ctx.Process(target=_group_child_entry, name=f"dpd-queue-group-{entry.id}",
                               args=([e.id for e in entries], [e.config.to_dict() for e in entries],
                                     str(self.workspace.root), ev_w, ct_r, self.faults, self.plot_data))
        else:
            proc = ctx.Process(target=_child_entry, name=f"dpd-queue-entry-{entry.id}",
                               args=(entry.id, entry.config.to_dict(), str(self.workspace.root), ev_w, ct_r,
                                     self.faults, options, (), self.plot_data))
        members = {e.id: _Member(e, queued=queued) for e in entries}
        try:
            proc.start()
        except Exception as exc:  # noqa: BLE001 - the entries fail; the queue goes on
            for c in (ev_r, ev_w, ct_r, ct_w):
                c.close()
            child = _Child(members, None, None, None, grouped)
            for m in members.values():
                self._end_member(child, m, "failed", f"the run's process could not start: {exc}")
            self._close(child)
            return
        ev_w.close()  # the child holds its own copies
        ct_r.close()
        child = _Child(members, proc, ev_r, ct_w, grouped)
        with self._lock:
            for e in entries:
                self._children[e.id] = child
        for e in entries:
            self._notify(e, EntryStarted(e.id, proc.pid))

    def _poll(self, children: list[_Child]) -> None:
        waitables = [c.events for c in children if not c.eof] + [c.proc.sentinel for c in children]
        ready = set(mp_wait(waitables, timeout=POLL_S))
        for c in children:
            if not c.eof and c.events in ready:
                self._read(c)
            if c.proc.sentinel in ready:
                # what the child sent before it ended (bounded: a copy of the pipe elsewhere would hold off EOF)
                while not c.eof and c.events.poll(0.5):
                    self._read(c)
                self._reap(c)
            else:
                for m in c.members.values():
                    if not (m.cancel_sent or m.ended) and (
                            self._stop.is_set() or (m.queued and self.queue.cancel_requested(m.entry.id))):
                        m.cancel_sent = True
                        self.send(m.entry.id, "cancel")

    def _read(self, c: _Child) -> None:
        try:
            data = c.events.recv_bytes()
        except (EOFError, OSError):
            c.eof = True
            return
        m = c.members[c.entry.id]
        if c.grouped:  # "ENTRY\n" + the event (lab/group_child.py)
            head, _, data = data.partition(b"\n")
            m = c.members.get(int(head)) if head.isdigit() else None
            if m is None:
                log.warning("group of entry %s: an event for entry %r, not one of its entries", c.entry.id, head)
                return
        try:
            ev = event_codec.decode(data)
        except event_codec.CodecError as exc:
            log.warning("entry %s: %s", m.entry.id, exc)
            return
        if isinstance(ev, (E.RunPrepared, E.RunStarted)) and m.run_dir is None:
            m.run_id, m.run_dir = ev.run_id, ev.run_dir
            if m.queued:
                self.queue.set_run(m.entry.id, ev.run_id, ev.run_dir)
        elif isinstance(ev, (E.RunFinished, E.RunFailed, E.RunCancelled)):
            m.outcome = ev
        self._notify(m.entry, ev)
        if c.grouped and m.outcome is ev:  # the others may train on for a while: this entry is done now
            self._end_member(c, m, *_outcome_state(ev))

    def _reap(self, c: _Child) -> None:
        c.proc.join()
        code = c.proc.exitcode
        for m in c.members.values():
            if m.ended:
                continue
            if m.outcome is not None:
                state, message = _outcome_state(m.outcome)
            else:
                state, message = exit_reason(code)
                if c.grouped:  # "the group's process (entries 3, 4) ended by signal SIGKILL …"
                    ids = ", ".join(str(i) for i in c.members)
                    message = f"the group's process (entries {ids}) {message.removeprefix('process ')}"
                if m.run_dir:
                    try:
                        mark_dead_run(m.run_dir, state, message)
                    except OSError as exc:
                        log.warning("entry %s: status of %s not written: %s", m.entry.id, m.run_dir, exc)
                if state == "failed":  # the window follows a dead child as it follows an in-process failure
                    self._notify(m.entry, E.RunFailed(run_id=m.run_id, run_dir=m.run_dir, message=message))
            self._end_member(c, m, state, message)
        with self._lock:
            for i in c.members:
                self._children.pop(i, None)
        self._close(c)

    def _close(self, c: _Child) -> None:
        for conn in (c.events, c.control):
            if conn is not None:
                conn.close()
        if c.proc is not None:
            c.proc.close()

    def _end_member(self, c: _Child, m: _Member, state: str, message: str) -> None:
        m.ended = True  # the child stays filed under its entries until it is reaped (its lane is busy until then)
        entry = self.queue.finish(m.entry.id, state, message) if m.queued else m.entry
        end = EntryEnded(entry.id, state, message, m.run_dir)
        self.ended.append(end)
        self._notify(entry, end)

    def _stop_children(self) -> None:
        """On the way out (an error in this loop, or a stop): cancel the children still running and wait for them."""
        children = self._distinct_children()
        if not children:
            return
        self.send(None, "cancel")
        for c in children:
            while c.proc.is_alive() or not c.eof:
                self._poll([c])
                if c.entry.id not in self._children:
                    break

    def _notify(self, entry: QueueEntry, event) -> None:
        for obs in self.observers:
            try:
                obs(entry, event)
            except Exception:  # noqa: BLE001 - an observer must not stop the queue
                log.exception("queue observer failed on %s", type(event).__name__)


def _outcome_state(ev) -> tuple[str, str]:
    """The queue state and message of an outcome event (RunFinished / RunCancelled / RunFailed)."""
    if isinstance(ev, E.RunFinished):
        return "succeeded", ""
    if isinstance(ev, E.RunCancelled):
        n = ev.epochs_completed
        after = f"after {n} epoch{'' if n == 1 else 's'}"
        return "cancelled", f"{ev.reason} ({after})" if ev.reason else f"cancelled {after}"
    return "failed", ev.message


def _child_entry(*args) -> None:
    """The children's target; imported here: the supervisor itself never imports PyTorch."""
    from .child import child_main

    child_main(*args)


def _group_child_entry(*args) -> None:
    from .group_child import group_child_main

    group_child_main(*args)

