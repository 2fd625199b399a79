"""The workspace's run queue: experiments that wait their turn, kept in ``<workspace>/queue.sqlite``.

One SQLite file (WAL journal, a busy timeout, every change one short transaction) shared by the window and the
command line. An entry holds its :class:`~dpd_desktop.config.ExperimentConfig` as JSON, its device lane, its state
(queued → running → a final state), the run id once its folder exists, and a message. A "running" entry records its
supervisor (runs/owner.py); when that process is gone the entry reads ``interrupted`` (:meth:`RunQueue.recover`).

Lanes: one run at a time per lane; ``cpu``, ``cuda:0``, ``cuda:1``… run side by side (``cuda`` is ``cuda:0``;
``auto`` is a lane of its own). A DPD entry may wait for a queued PA entry (``after``): that entry's run id becomes
its ``pa_run``, or its failure fails it. Entries with one ``group`` tag (a sweep's trials, training/group.py) are
claimed together (:meth:`RunQueue.claim_group`) and train in one child (lab/group_child.py). A schema version 1 file
gains version 2's ``group_id`` when opened.

Errors: :class:`QueueError` (a ``ValueError``) names the queue file, and the entry and field at fault.
"""
from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable

from ..config import ConfigError, ExperimentConfig
from ..runs.index import connect, transaction
from ..runs.owner import owner_gone, process_identity
from ..runs.record import RunRecord
from ..runs.states import FINAL_STATES, RUN_STATES

QUEUE_FILE = "queue.sqlite"
SCHEMA_VERSION = 2
#: older schema versions this version upgrades in place when it opens their file (version → its column list)
_UPGRADES = {"1": "ALTER TABLE entries ADD COLUMN group_id TEXT"}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    position INTEGER NOT NULL,
    step TEXT NOT NULL,
    config TEXT NOT NULL,
    device TEXT NOT NULL,
    after INTEGER,
    state TEXT NOT NULL,
    run_id TEXT,
    run_dir TEXT,
    message TEXT NOT NULL DEFAULT '',
    owner TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    created TEXT NOT NULL,
    updated TEXT NOT NULL,
    group_id TEXT
);
"""
_COLUMNS = ("id", "position", "step", "config", "device", "after", "state", "run_id", "run_dir", "message", "owner",
            "cancel_requested", "created", "updated", "group_id")


class QueueError(ValueError):
    """The queue file cannot be used, or a request is refused; ``entry`` and ``field`` name what is at fault."""

    def __init__(self, path: str | Path, message: str, entry: int | None = None, field: str | None = None):
        where = f"queue file {path}" + (f": entry {entry}" if entry is not None else "")
        super().__init__(f"{where}: {message}")
        self.path, self.entry, self.field = Path(path), entry, field


def device_lane(device: str) -> str:
    """The lane of a device setting: ``cuda`` → ``cuda:0``; ``cpu``, ``cuda:N`` and ``auto`` as they are."""
    d = str(device).strip().lower()
    return "cuda:0" if d == "cuda" else d


@dataclass(frozen=True)
class QueueEntry:
    """One queued experiment: ``state`` one of :data:`RUN_STATES`, ``after`` the PA entry a DPD entry waits for."""

    id: int
    position: int
    config: ExperimentConfig
    device: str
    state: str
    after: int | None = None
    run_id: str | None = None
    run_dir: str | None = None
    message: str = ""
    cancel_requested: bool = False
    created: str = ""
    updated: str = ""
    group: str | None = None  # the tag of the entries that train together in one child (None: alone)

    @property
    def step(self) -> str:
        return self.config.step

    def label(self) -> str:
        """Short words for lists: ``PA GRU-23 demo`` ."""
        c = self.config
        return f"{c.step.upper()} {str(c.backbone).upper()}-{c.hidden_size} {c.dataset}"

    def group_words(self) -> str:
        """``sweep <sweep id> group 0`` for a sweep's tag ``<sweep id>#0``, else ``group TAG``; "" without a group."""
        if self.group is None:
            return ""
        if "#" in self.group:
            sweep, number = self.group.rsplit("#", 1)
            return f"sweep {sweep} group {number}"
        return f"group {self.group}"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


class RunQueue:
    """The queue of one workspace: ``RunQueue(workspace_root)`` or ``RunQueue.at(queue_file)``, created on first use.
    Raises :class:`QueueError` for a file that is not a queue of a readable schema version, or an invalid entry."""

    def __init__(self, root: str | Path, *, path: str | Path | None = None):
        self.path = Path(path) if path is not None else Path(root) / QUEUE_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = connect(self.path)
            self._init_schema()  # first: a file that is not our queue is left exactly as it was
            self._db.execute("PRAGMA journal_mode = WAL")  # SQLite keeps its default journal where WAL cannot work
        except QueueError:
            self.close()
            raise
        except sqlite3.DatabaseError as exc:
            self.close()
            raise QueueError(self.path, f"not a queue database ({exc}); move it away to start a new queue") from exc

    @classmethod
    def at(cls, path: str | Path) -> "RunQueue":
        return cls(Path(path).parent, path=path)

    def close(self) -> None:
        db = getattr(self, "_db", None)
        if db is not None:
            db.close()
            self._db = None

    def __enter__(self) -> "RunQueue":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------------ schema
    def _init_schema(self) -> None:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if not tables:
                for stmt in filter(str.strip, _SCHEMA.split(";")):  # DDL is transactional in SQLite
                    db.execute(stmt)
                db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                return
            if "meta" not in tables or "entries" not in tables:
                raise QueueError(self.path, f"not a queue database (tables {sorted(tables)}; expected meta and "
                                            f"entries); move it away to start a new queue", field="schema_version")
            row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            found = None if row is None else str(row[0])
            if found != str(SCHEMA_VERSION) and found not in _UPGRADES:
                readable = " and ".join([*sorted(_UPGRADES), str(SCHEMA_VERSION)])
                raise QueueError(self.path, f"schema version {found or 'none'}, this version of DPD Desktop reads "
                                            f"{readable}", field="schema_version")
            cols = {r[1] for r in db.execute("PRAGMA table_info(entries)")}
            upgrade = _UPGRADES.get(found)
            missing = [c for c in _COLUMNS if c not in cols and not (upgrade and c == "group_id")]
            if missing:
                raise QueueError(self.path, f"table entries lacks the columns {missing}", field="schema_version")
            if upgrade:  # checked first: a refused file is left exactly as it was
                db.execute(upgrade)
                db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))
        finally:
            if db.in_transaction:
                db.execute("COMMIT")

    def _tx(self):
        """A write transaction taken at once (BEGIN IMMEDIATE: no two writers interleave a read-modify-write)."""
        return transaction(self._db)

    # ------------------------------------------------------------------------------------------------ reading
    def _entry(self, row: sqlite3.Row | tuple) -> QueueEntry:
        d = dict(zip(_COLUMNS, row))
        eid = d["id"]
        try:
            raw = json.loads(d["config"])
        except (TypeError, ValueError) as exc:
            raise QueueError(self.path, f"config is not valid JSON ({exc})", entry=eid, field="config") from exc
        if not isinstance(raw, dict):
            raise QueueError(self.path, "config is not a JSON object", entry=eid, field="config")
        try:
            cfg = ExperimentConfig.from_dict(raw)
            _validated(cfg, d["after"])
        except ConfigError as exc:
            raise QueueError(self.path, f"config field {exc}", entry=eid, field=exc.field) from exc
        except TypeError as exc:
            raise QueueError(self.path, f"config: {exc}", entry=eid, field="config") from exc
        state = d["state"]
        if state not in RUN_STATES:
            raise QueueError(self.path, f"state {state!r} is not one of {RUN_STATES}", entry=eid, field="state")
        message = d["message"] or ""
        if state == "running" and _supervisor_gone(d["owner"]):
            state, message = _orphan_outcome(d)
        return QueueEntry(id=eid, position=d["position"], config=cfg, device=d["device"], state=state,
                          after=d["after"], run_id=d["run_id"], run_dir=d["run_dir"], message=message,
                          cancel_requested=bool(d["cancel_requested"]), created=d["created"], updated=d["updated"],
                          group=d["group_id"])

    def entries(self) -> list[QueueEntry]:
        """Every entry, in queue order (position, then id)."""
        rows = self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM entries ORDER BY position, id").fetchall()
        return [self._entry(r) for r in rows]

    def get(self, entry_id: int) -> QueueEntry:
        row = self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM entries WHERE id=?", (int(entry_id),)).fetchone()
        if row is None:
            raise QueueError(self.path, "no such entry", entry=int(entry_id), field="entry")
        return self._entry(row)

    # ------------------------------------------------------------------------------------------------ changes
    def add(self, config: ExperimentConfig, after: int | None = None, group: str | None = None) -> QueueEntry:
        """Append ``config`` (validated; a DPD entry with ``after`` needs no ``pa_run``); ``group``: the tag of the
        entries that train together.

        Raises:
            ConfigError: the config is invalid (nothing queued).
            QueueError: ``after`` is not a PA entry of this queue, or it already ended other than succeeded; an
                entry with both ``after`` and ``group``.
        """
        if group is not None and after is not None:
            raise QueueError(self.path, "an entry that waits for another (after) cannot train in a group",
                             field="group")
        cfg = _validated(config, after)
        if after is not None:
            if cfg.step != "dpd":
                raise ConfigError("after", "only a DPD entry can wait for a queued PA entry")
            cfg = replace(cfg, pa_run=None)
        with self._tx() as db:
            if after is not None:
                dep = self.get(after)
                if dep.step != "pa":
                    raise QueueError(self.path, f"entry {after} is a {dep.step.upper()} entry; --after needs a PA "
                                                f"entry", entry=after, field="after")
                if dep.state in FINAL_STATES and dep.state != "succeeded":
                    raise QueueError(self.path, f"entry {after} ended {dep.state}; a DPD entry cannot wait for it",
                                     entry=after, field="after")
                if dep.state == "succeeded":  # already there: name its run directly
                    cfg, after = replace(cfg, pa_run=dep.run_id), None
            pos = db.execute("SELECT COALESCE(MAX(position), 0) + 1 FROM entries").fetchone()[0]
            now = _now()
            cur = db.execute(
                "INSERT INTO entries (position, step, config, device, after, state, message, created, updated, "
                "group_id) VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?)",
                (pos, cfg.step, json.dumps(cfg.to_dict()), device_lane(cfg.device), after,
                 f"waits for entry {after}" if after is not None else "", now, now,
                 None if group is None else str(group)))
            eid = cur.lastrowid
        return self.get(eid)

    def add_many(self, items: Iterable[tuple[ExperimentConfig, str | None]]) -> list[int]:
        """Append ``(config, group)`` pairs in one transaction; returns their ids in order. Raises ConfigError for an
        invalid config (nothing queued)."""
        rows = []
        now = _now()
        for cfg, group in items:
            cfg = _validated(cfg, None)
            rows.append((cfg.step, json.dumps(cfg.to_dict()), device_lane(cfg.device), now, now,
                         None if group is None else str(group)))
        if not rows:
            return []
        with self._tx() as db:
            pos = db.execute("SELECT COALESCE(MAX(position), 0) FROM entries").fetchone()[0]
            first = db.execute("SELECT COALESCE(MAX(id), 0) FROM entries").fetchone()[0]
            db.executemany(
                "INSERT INTO entries (position, step, config, device, after, state, message, created, updated, "
                "group_id) VALUES (?, ?, ?, ?, NULL, 'queued', '', ?, ?, ?)",
                [(pos + 1 + i, *r) for i, r in enumerate(rows)])
            ids = [r[0] for r in db.execute("SELECT id FROM entries WHERE id > ? ORDER BY id", (first,))]
        return ids

    def get_many(self, entry_ids: Iterable[int]) -> dict[int, QueueEntry]:
        """The entries of ``entry_ids`` that exist, by id."""
        out: dict[int, QueueEntry] = {}
        for part, marks in _chunks(entry_ids):
            for r in self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM entries WHERE id IN ({marks})", part):
                out[r[0]] = self._entry(r)
        return out

    def ended_among(self, entry_ids: Iterable[int]) -> dict[int, QueueEntry]:
        """The entries of ``entry_ids`` that have ended (final, or running under a gone supervisor), by id; the
        others' configs are not read."""
        done: list[int] = []
        for part, marks in _chunks(entry_ids):
            rows = self._db.execute(f"SELECT id, state, owner FROM entries WHERE id IN ({marks})", part).fetchall()
            done += [i for i, state, owner in rows
                     if state in FINAL_STATES or (state == "running" and _supervisor_gone(owner))]
        return self.get_many(done)

    def cancel_many(self, entry_ids: Iterable[int]) -> list[int]:
        """:meth:`cancel` for many entries in one transaction (ended ones are left as they are, not refused);
        returns the ids whose state or request changed."""
        changed: list[int] = []
        now = _now()
        with self._tx() as db:
            for part, marks in _chunks(entry_ids):
                rows = db.execute(f"SELECT id, state, owner, cancel_requested FROM entries WHERE id IN ({marks})",
                                  part).fetchall()
                queued = [i for i, state, _, _ in rows if state == "queued"]
                running = [i for i, state, owner, asked in rows
                           if state == "running" and not asked and not _supervisor_gone(owner)]
                db.executemany("UPDATE entries SET state='cancelled', message='cancelled before it started', "
                               "cancel_requested=0, updated=? WHERE id=?", [(now, i) for i in queued])
                db.executemany("UPDATE entries SET cancel_requested=1, updated=? WHERE id=?",
                               [(now, i) for i in running])
                waiting = db.execute(f"SELECT id FROM entries WHERE after IN ({marks}) AND state='queued'",
                                     part).fetchall()
                for (w,) in waiting:  # a DPD entry that waits for a cancelled PA entry (never a sweep's)
                    dep = self.get(db.execute("SELECT after FROM entries WHERE id=?", (w,)).fetchone()[0])
                    if dep.state not in ("queued", "running", "succeeded"):
                        self._set_final(db, w, "failed", _dependency_message(dep))
                changed += queued + running
        return changed

    def move(self, entry_id: int, position: int) -> list[QueueEntry]:
        """Put a queued entry at ``position`` (1-based, clamped) and renumber; returns the queue. Raises QueueError
        for an entry that is not queued."""
        with self._tx() as db:
            e = self.get(entry_id)
            if e.state != "queued":
                raise QueueError(self.path, f"is {e.state}; only a queued entry can move", entry=e.id,
                                 field="state")
            ids = [r[0] for r in db.execute("SELECT id FROM entries ORDER BY position, id")]
            ids.remove(e.id)
            pos = min(max(int(position), 1), len(ids) + 1)
            ids.insert(pos - 1, e.id)
            db.executemany("UPDATE entries SET position=? WHERE id=?", [(i + 1, x) for i, x in enumerate(ids)])
        return self.entries()

    def cancel(self, entry_id: int) -> QueueEntry:
        """Cancel an entry: a queued one ends ``cancelled`` now (and the DPD entries waiting for it fail); a running
        one is asked to stop after its current batch (its supervisor reads :attr:`QueueEntry.cancel_requested`).
        Raises QueueError for an entry that has ended."""
        with self._tx() as db:
            e = self.get(entry_id)
            if e.state == "queued":
                self._set_final(db, e.id, "cancelled", "cancelled before it started")
            elif e.state == "running":
                db.execute("UPDATE entries SET cancel_requested=1, updated=? WHERE id=?", (_now(), e.id))
            else:
                raise QueueError(self.path, f"has already ended ({e.state})", entry=e.id, field="state")
        return self.get(entry_id)

    def recover(self) -> list[QueueEntry]:
        """Write ``interrupted`` into every running entry whose supervisor is gone (and fail the DPD entries waiting
        for it); returns those entries."""
        out = []
        with self._tx() as db:
            for row in db.execute(f"SELECT {', '.join(_COLUMNS)} FROM entries WHERE state='running'").fetchall():
                d = dict(zip(_COLUMNS, row))
                if _supervisor_gone(d["owner"]):
                    self._set_final(db, d["id"], *_orphan_outcome(d))
                    out.append(d["id"])
        return [self.get(i) for i in out]

    def claim_next(self, lanes: Iterable[str] | None = None, busy: Iterable[str] = (),
                   only: Iterable[int] | None = None) -> QueueEntry | None:
        """Take the first ready queued entry whose lane is in ``lanes`` (None: any) and free, mark it running under
        this process and return it (``pa_run`` filled in from its PA entry); None when nothing is ready. DPD entries
        whose PA entry failed are failed on the way. ``only``: these entry ids alone; without it a sweep's entries
        (config ``extra["sweep"]``) are never taken: only their sweep runs them."""
        allowed = None if lanes is None else {device_lane(x) for x in lanes}
        only = only if only is None or isinstance(only, (set, frozenset)) else {int(x) for x in only}
        with self._tx() as db:
            # the lanes of the running entries whose supervisor lives (a gone one's entry reads interrupted)
            taken = {dev for dev, owner in db.execute("SELECT device, owner FROM entries WHERE state='running'")
                     if not _supervisor_gone(owner)} | set(busy)
            # a config is read only when its entry could be the one (one read per claim, not one per queued entry)
            queued = db.execute("SELECT id, device FROM entries WHERE state='queued' ORDER BY position, id").fetchall()
            for eid, device in queued:
                if device in taken or (allowed is not None and device not in allowed):
                    continue
                if only is not None and eid not in only:
                    continue
                e = self.get(eid)
                if only is None and isinstance(e.config.extra, dict) and e.config.extra.get("sweep"):
                    continue
                cfg = e.config
                if e.after is not None:
                    dep = self.get(e.after)
                    if dep.state in ("queued", "running"):
                        continue
                    if dep.state != "succeeded" or not dep.run_id:
                        self._set_final(db, e.id, "failed", _dependency_message(dep))
                        continue
                    cfg = replace(cfg, pa_run=dep.run_id)
                db.execute("UPDATE entries SET state='running', config=?, owner=?, message='', updated=? WHERE id=?",
                           (json.dumps(cfg.to_dict()), json.dumps(process_identity()), _now(), e.id))
                return self.get(e.id)
        return None

    def claim_group(self, entry: QueueEntry, only: Iterable[int] | None = None) -> list[QueueEntry]:
        """``entry`` (just claimed) and every other queued entry of its group on its lane (``only``: among these
        ids), marked running under this process, in queue order."""
        if entry.group is None:
            return [entry]
        only = None if only is None else {int(x) for x in only}
        with self._tx() as db:
            rows = db.execute(f"SELECT {', '.join(_COLUMNS)} FROM entries WHERE state='queued' AND group_id=? "
                              f"AND device=? AND id<>? ORDER BY position, id",
                              (entry.group, entry.device, entry.id)).fetchall()
            ids = [r[0] for r in rows if only is None or r[0] in only]
            owner, now = json.dumps(process_identity()), _now()
            db.executemany("UPDATE entries SET state='running', owner=?, message='', updated=? WHERE id=?",
                           [(owner, now, i) for i in ids])
        return [entry, *(self.get(i) for i in ids)]

    def set_run(self, entry_id: int, run_id: str | None, run_dir: str | None) -> None:
        """Record the run folder of a running entry."""
        with self._tx() as db:
            db.execute("UPDATE entries SET run_id=?, run_dir=?, updated=? WHERE id=?",
                       (run_id, run_dir, _now(), int(entry_id)))

    def finish(self, entry_id: int, state: str, message: str = "") -> QueueEntry:
        """End an entry in a final ``state`` with ``message``; DPD entries waiting for it fail unless it
        succeeded."""
        if state not in FINAL_STATES:
            raise ValueError(f"finish: expected one of {FINAL_STATES}, got {state!r}")
        with self._tx() as db:
            self._set_final(db, int(entry_id), state, message)
        return self.get(entry_id)

    def cancel_requested(self, entry_id: int) -> bool:
        row = self._db.execute("SELECT cancel_requested FROM entries WHERE id=?", (int(entry_id),)).fetchone()
        return bool(row and row[0])

    def pending(self, lanes: Iterable[str] | None = None) -> int:
        """How many entries are queued (in ``lanes`` when given)."""
        allowed = None if lanes is None else {device_lane(x) for x in lanes}
        rows = self._db.execute("SELECT device FROM entries WHERE state='queued'").fetchall()
        return sum(1 for (d,) in rows if allowed is None or d in allowed)

    def _set_final(self, db, entry_id: int, state: str, message: str) -> None:
        db.execute("UPDATE entries SET state=?, message=?, cancel_requested=0, updated=? WHERE id=?",
                   (state, message, _now(), entry_id))
        if state != "succeeded":
            dep = self.get(entry_id)
            for (w,) in db.execute("SELECT id FROM entries WHERE after=? AND state='queued'", (entry_id,)).fetchall():
                self._set_final(db, w, "failed", _dependency_message(dep))


def _chunks(entry_ids: Iterable[int], size: int = 900):
    """``(ids, "?, ?, …")`` in chunks below SQLite's limit on the variables of one statement."""
    ids = [int(i) for i in entry_ids]
    for k in range(0, len(ids), size):
        part = ids[k:k + size]
        yield part, ", ".join("?" * len(part))


def _validated(cfg: ExperimentConfig, after: int | None) -> ExperimentConfig:
    """``cfg.validate()``; a DPD entry that waits for a PA entry is checked with a stand-in PA run."""
    if after is not None and cfg.step == "dpd" and not cfg.pa_run:
        replace(cfg, pa_run=f"queue-entry-{after}").validate()
        return cfg
    return cfg.validate()


def _supervisor_gone(owner_json: str | None) -> bool:
    try:
        owner = json.loads(owner_json) if owner_json else {}
    except ValueError:
        return False
    return isinstance(owner, dict) and owner_gone(owner)


def _orphan_outcome(d: dict) -> tuple[str, str]:
    """(state, message) of a running entry whose supervisor is gone: the final state its run folder records (the
    child stops after its batch when the supervisor's pipe closes: ``cancelled``, resumable), else ``interrupted``."""
    rec = RunRecord.read(d["run_dir"]) if d.get("run_dir") else None
    if rec is not None and rec.state == "succeeded":  # resumed since (dpd-desktop resume, the window)
        return rec.state, f"{_interrupted_message(d['owner'])}; its run was resumed and succeeded"
    if rec is not None and rec.state in FINAL_STATES:
        return rec.state, rec.message or _interrupted_message(d["owner"])
    return "interrupted", _interrupted_message(d["owner"])


def _interrupted_message(owner_json: str | None) -> str:
    try:
        pid = json.loads(owner_json or "{}").get("pid")
    except (ValueError, AttributeError):
        pid = None
    return f"its supervising process{f' (pid {pid})' if pid else ''} ended while it ran"


def _dependency_message(dep: QueueEntry) -> str:
    why = f": {dep.message}" if dep.message else ""
    return f"PA entry {dep.id} ended {dep.state}{why}; this DPD entry needs its run"


def describe(entries: list[QueueEntry]) -> list[dict[str, Any]]:
    """Rows for a table: id, position, step, model, device, state, run, after, message, group."""
    return [{"id": e.id, "position": e.position, "step": e.step, "model": e.label(), "device": e.device,
             "state": e.state, "run": e.run_id or "", "after": e.after, "message": e.message,
             "group": e.group or ""} for e in entries]
