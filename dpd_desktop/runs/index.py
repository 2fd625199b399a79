"""The workspace index: ``<workspace>/index.sqlite``, one row per run folder, a cache of the folders.

The run folders are the truth; rows are built from :class:`~dpd_desktop.runs.record.RunRecord` alone, so any process
can rebuild them. :meth:`RunIndex.open` checks the file (``PRAGMA application_id``, ``user_version`` =
:data:`INDEX_SCHEMA`, ``quick_check``) and rebuilds a missing, damaged or other-version one, under
``index.sqlite.lock`` (filelock) so that two processes never delete each other's fresh index. :meth:`RunIndex.sync`
re-reads only folders whose :data:`SIGNATURE_FILES` (mtime in ns, size) changed, and live runs at every sync (their
owner may have died without touching a file). WAL and a busy timeout let the window and the command line share it;
each sync writes in one transaction. A workspace that cannot hold the file gets an in-memory index (``in_memory``).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence


from .record import PIN_FILE, QUANTIZED_FILE, RunRecord
from .states import LIVE_STATES

INDEX_FILE = "index.sqlite"
#: the table layout's version (``PRAGMA user_version``); another number means: rebuild
INDEX_SCHEMA = 6
#: families without a hidden size (their config.json holds the unused default)
POLY_FAMILIES = ("mp", "gmp")
APPLICATION_ID = 0x44504449  # "DPDI": PRAGMA application_id, tells our file from any other SQLite database
BUSY_TIMEOUT_MS = 10_000
LOCK_TIMEOUT_S = 30.0
#: the files whose (mtime_ns, size) make a folder's signature
SIGNATURE_FILES = ("config.json", "status.json", "history.csv", "best.pt", "results.h5", PIN_FILE, QUANTIZED_FILE)


@dataclass(frozen=True)
class IndexedRun:
    """One row of the index: what :class:`RunRecord` says of a run folder.

    Metrics in dB (NMSE, EVM) and dBc (ACLR); ``wall_s`` in seconds; ``macs_per_sample``: real multiply-accumulates
    (models/cost.py); ``kernel``: kernels/record.py ``KernelRun.label``, ``kernel_notes`` why any fell back;
    ``run_group``: :func:`run_group`; ``qat``: a quantisation-aware fine-tune's label (e.g. "W8A8"); ``quant``: every
    label evaluated, ``quant_label`` / ``quant_test_*`` the one shown (:func:`shown_quantized`).
    """

    run_id: str
    folder: str
    state: str
    step: str
    family: str
    hidden_size: int | None = None
    num_layers: int | None = None
    n_params: int | None = None
    macs_per_sample: int | None = None
    metric_profile: str | None = None
    gain_rule: str | None = None
    dataset_name: str | None = None
    dataset_kind: str | None = None
    dataset_fingerprint: str | None = None
    dataset_shown: str | None = None
    selection_metric: str | None = None
    best_epoch: int | None = None
    best_value: float | None = None
    epochs_completed: int | None = None
    test_nmse: float | None = None
    test_aclr_avg: float | None = None
    test_evm: float | None = None
    val_nmse: float | None = None
    val_aclr_avg: float | None = None
    val_evm: float | None = None
    wall_s: float | None = None
    device: str | None = None
    fast_path: str | None = None
    kernel: str | None = None
    kernel_notes: str | None = None
    pinned: bool = False
    created: str | None = None
    updated: str | None = None
    message: str | None = None
    pa_run_id: str | None = None
    run_group: str | None = None
    qat: str | None = None
    parent_run_id: str | None = None
    quant: str | None = None
    quant_label: str | None = None
    quant_test_nmse: float | None = None
    quant_test_aclr_avg: float | None = None
    quant_test_evm: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


FIELDS = tuple(f.name for f in dataclasses.fields(IndexedRun))
#: columns the query API sorts by
SORT_KEYS = FIELDS
_SQL_TYPES = {"int": "INTEGER", "float": "REAL", "bool": "INTEGER", "str": "TEXT"}


def _sql_type(f: dataclasses.Field) -> str:
    t = str(f.type).split("|")[0].strip()
    return _SQL_TYPES.get(t, "TEXT")


_COLUMNS_SQL = ", ".join(f"{f.name} {_sql_type(f)}" + (" PRIMARY KEY" if f.name == "run_id" else "")
                         for f in dataclasses.fields(IndexedRun))
_CREATE = f"CREATE TABLE runs ({_COLUMNS_SQL}, sig TEXT NOT NULL)"
_INSERT = (f"INSERT OR REPLACE INTO runs ({', '.join(FIELDS)}, sig) "
           f"VALUES ({', '.join('?' for _ in FIELDS)}, ?)")


# ------------------------------------------------------------------------------------------------ record → row
def _int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def finite(v) -> float | None:
    """``v`` as a finite float when it is an int or float (not a bool), else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def _text(v) -> str | None:
    return v if isinstance(v, str) else None


def run_group(rec: RunRecord) -> str | None:
    """The group a run belongs to, from config.json's ``experiment.extra``: ``"loop <id>"`` for an iteration of an
    instrument loop (loop/store.py), ``"sweep <id>"`` for a sweep's trial (sweep/spec.py); None otherwise."""
    extra = rec.config.extra if rec.config is not None else ((rec.doc.get("experiment") or {}).get("extra") or {})
    if not isinstance(extra, dict):
        return None
    for kind in ("loop", "sweep"):
        tag = extra.get(kind)
        if isinstance(tag, dict) and isinstance(tag.get("id"), str):
            return f"{kind} {tag['id']}"
    return None


def shown_quantized(rec: RunRecord) -> tuple[str, dict[str, Any]] | None:
    """The quantised evaluation a listing shows: a quantisation-aware run's own bit widths when evaluated, else the
    narrowest evaluated (fewest weight, then activation bits); None without any."""
    evals = rec.quantized
    if not evals:
        return None
    own = (rec.qat or {}).get("label")
    if own in evals:
        return own, evals[own]

    def width(item):
        spec = item[1].get("spec") if isinstance(item[1].get("spec"), dict) else {}
        return (_int(spec.get("weights")) or 99, _int(spec.get("activations")) or 99, item[0])

    label, doc = min(evals.items(), key=width)
    return label, doc


def quant_text(row: IndexedRun) -> str:
    """A listing's quantisation cell: "W8A8" (the evaluation shown), "qat W8A8" when the run is that format's
    quantisation-aware fine-tune, "" for neither."""
    if row.quant_label is None:
        return f"qat {row.qat}" if row.qat else ""
    return f"qat {row.quant_label}" if row.qat == row.quant_label else row.quant_label


def row_from_record(rec: RunRecord) -> IndexedRun:
    """The index row of a run record (values of a wrong type in a hand-edited file become None)."""
    status = rec.status_doc if isinstance(rec.status_doc, dict) else {}
    test = status.get("test_metrics") if isinstance(status.get("test_metrics"), dict) else {}
    val = status.get("val_metrics") if isinstance(status.get("val_metrics"), dict) else {}
    ds = rec.dataset
    pa = rec.pa or {}
    kernel = rec.kernel
    qat = rec.qat or {}
    shown = shown_quantized(rec)
    q_test = {}
    if shown is not None:
        m = shown[1].get("metrics") if isinstance(shown[1].get("metrics"), dict) else {}
        q_test = m.get("test") if isinstance(m.get("test"), dict) else {}
    return IndexedRun(
        run_id=rec.run_id, folder=str(rec.run_dir), state=rec.state, step=str(rec.step), family=str(rec.backbone),
        hidden_size=None if str(rec.backbone) in POLY_FAMILIES else _int(rec.hidden_size),
        num_layers=_int(rec.num_layers), n_params=_int(rec.model.get("n_params")),
        macs_per_sample=_int(rec.model.get("macs_per_sample")), metric_profile=_text(rec.metric_profile),
        gain_rule=_text(rec.gain_rule) if rec.step == "dpd" else None,
        dataset_name=_text(ds.name) if ds else None, dataset_kind=_text(ds.kind) if ds else None,
        dataset_fingerprint=_text(ds.fingerprint) if ds else None, dataset_shown=ds.shown if ds else None,
        selection_metric=_text(rec.selection_metric), best_epoch=_int(status.get("best_epoch")),
        best_value=finite(status.get("best_value")), epochs_completed=_int(status.get("epochs_completed")),
        test_nmse=finite(test.get("NMSE")), test_aclr_avg=finite(test.get("ACLR_AVG")),
        test_evm=finite(test.get("EVM")), val_nmse=finite(val.get("NMSE")),
        val_aclr_avg=finite(val.get("ACLR_AVG")), val_evm=finite(val.get("EVM")),
        wall_s=finite(status.get("wall_s")), device=_text(rec.device.get("device")),
        fast_path=_text(rec.device.get("fast_path")), kernel=kernel.label if rec.doc else None,
        kernel_notes="; ".join(kernel.notes) or None, pinned=bool(rec.pinned),
        created=_text(rec.doc.get("created")),
        updated=_text(status.get("updated")), message=_text(status.get("message")),
        pa_run_id=_text(pa.get("run_id")), run_group=run_group(rec), qat=_text(qat.get("label")), parent_run_id=_text(rec.parent_run),
        quant=", ".join(sorted(rec.quantized)) or None, quant_label=shown[0] if shown else None,
        quant_test_nmse=finite(q_test.get("NMSE")), quant_test_aclr_avg=finite(q_test.get("ACLR_AVG")),
        quant_test_evm=finite(q_test.get("EVM")))


def folder_signature(run_dir: Path) -> str | None:
    """``(mtime_ns, size)`` of the :data:`SIGNATURE_FILES` as JSON text; None when there is no config.json."""
    sig = []
    for name in SIGNATURE_FILES:
        try:
            st = os.stat(run_dir / name)
            sig.append([st.st_mtime_ns, st.st_size])
        except OSError:
            if name == "config.json":
                return None
            sig.append(None)
    return json.dumps(sig)


def _row_values(row: IndexedRun) -> list:
    return [int(v) if isinstance(v, bool) else v for v in dataclasses.astuple(row)]


def _row_from_sql(values: Sequence) -> IndexedRun:
    d = dict(zip(FIELDS, values))
    d["pinned"] = bool(d["pinned"])
    return IndexedRun(**d)


@dataclass(frozen=True)
class SyncReport:
    """What a :meth:`RunIndex.sync` did: run ids read anew (added / refreshed), dropped, and how many were left
    unread because their folder's signature had not changed."""

    added: tuple[str, ...] = ()
    refreshed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    unchanged: int = 0


# ------------------------------------------------------------------------------------------------ the index
class RunIndex:
    """The workspace's index. Open with :meth:`open`; thread-safe (one connection, one lock); :meth:`close` it.

    Attributes:
        path: the database file.
        in_memory: True when the workspace could not hold the file (the index then lives in this process only).
        rebuilt: why the file was rebuilt at :meth:`open` ("missing", "not a database", ...), or None.
    """

    def __init__(self, conn: sqlite3.Connection, runs_dir: Path, path: Path, in_memory: bool,
                 rebuilt: str | None):
        self._conn = conn
        self._lock = threading.RLock()
        self.runs_dir = runs_dir
        self.path = path
        self.in_memory = in_memory
        self.rebuilt = rebuilt

    # ---------------------------------------------------------------- opening
    @classmethod
    def open(cls, workspace, sync: bool = True) -> "RunIndex":
        """The index of ``workspace`` (a :class:`~dpd_desktop.runs.workspace.Workspace`, or its root folder),
        checked and, when missing or damaged, rebuilt; then synced (:meth:`sync`) unless ``sync`` is False.
        Never raises for a workspace that cannot hold the file: the index is then in memory (``in_memory``)."""
        if isinstance(workspace, (str, os.PathLike)):  # a root folder (a Path's own .root is "/": not that)
            root = Path(workspace)
            runs_dir = root / "runs"
        else:
            root, runs_dir = Path(workspace.root), Path(workspace.runs_dir)
        path = root / INDEX_FILE
        # filelock here: off `--help` and every command that never opens the index (8-15 ms)
        from filelock import FileLock, Timeout

        try:
            root.mkdir(parents=True, exist_ok=True)
            with FileLock(str(path) + ".lock", timeout=LOCK_TIMEOUT_S):
                conn, rebuilt = _open_checked(path)
            idx = cls(conn, runs_dir, path, False, rebuilt)
        except (OSError, sqlite3.Error, Timeout):
            # a read-only or full workspace, a lock never released: list from the folders, in memory
            conn = connect(":memory:")
            _create(conn)
            idx = cls(conn, runs_dir, path, True, "in memory (the workspace cannot hold the index file)")
        if sync:
            idx.sync()
        return idx

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> "RunIndex":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---------------------------------------------------------------- keeping it current
    def sync(self) -> SyncReport:
        """Bring the rows in line with the folders under the runs folder (module docstring); returns what changed.
        Folders whose name starts with "." (retention's trash) are not runs."""
        present: dict[str, tuple[Path, str]] = {}
        if self.runs_dir.is_dir():
            for entry in os.scandir(self.runs_dir):
                if entry.name.startswith(".") or not entry.is_dir():
                    continue
                sig = folder_signature(Path(entry.path))
                if sig is not None:
                    present[entry.name] = (Path(entry.path), sig)
        with self._lock:
            known = {rid: (sig, state) for rid, sig, state in
                     self._conn.execute("SELECT run_id, sig, state FROM runs")}
        fresh: list[tuple[IndexedRun, str]] = []
        added, refreshed, unchanged = [], [], 0
        for rid, (folder, sig) in present.items():
            old = known.get(rid)
            if old is not None and old[0] == sig and old[1] not in LIVE_STATES:
                unchanged += 1
                continue
            rec = RunRecord.read(folder)
            if rec is None:  # config.json went away between the stat and the read
                continue
            row = row_from_record(rec)
            if old is not None and old[0] == sig and old[1] == row.state:
                unchanged += 1  # a live run still live: nothing to write
                continue
            fresh.append((row, sig))
            (refreshed if old is not None else added).append(rid)
        gone = sorted(set(known) - set(present))
        if fresh or gone:
            with self._lock, transaction(self._conn):
                for row, sig in fresh:
                    # a folder removed by another process since it was read is not written back
                    if (Path(row.folder) / "config.json").is_file():
                        self._conn.execute(_INSERT, [*_row_values(row), sig])
                self._conn.executemany("DELETE FROM runs WHERE run_id = ?", [(r,) for r in gone])
        return SyncReport(tuple(sorted(added)), tuple(sorted(refreshed)), tuple(gone), unchanged)

    def refresh(self, run_ids: Iterable[str]) -> None:
        """Re-read the named runs now (after this process changed their folders), dropping those that are gone."""
        with self._lock, transaction(self._conn):
            for rid in run_ids:
                folder = self.runs_dir / rid
                sig = folder_signature(folder)
                rec = RunRecord.read(folder) if sig is not None else None
                if rec is None:
                    self._conn.execute("DELETE FROM runs WHERE run_id = ?", (rid,))
                else:
                    self._conn.execute(_INSERT, [*_row_values(row_from_record(rec)), sig])

    def remove(self, run_ids: Iterable[str]) -> None:
        """Drop the rows of runs whose folders were removed."""
        with self._lock, transaction(self._conn):
            self._conn.executemany("DELETE FROM runs WHERE run_id = ?", [(r,) for r in run_ids])

    def rebuild(self) -> SyncReport:
        """Forget every row and read every folder again."""
        with self._lock, transaction(self._conn):
            self._conn.execute("DELETE FROM runs")
        return self.sync()

    # ---------------------------------------------------------------- queries
    def runs(self, step: str | None = None, state: str | Sequence[str] | None = None, dataset: str | None = None,
             pinned: bool | None = None, sort: str = "run_id", descending: bool = True,
             limit: int | None = None) -> list[IndexedRun]:
        """Rows of the index (:meth:`sync` first for the folders' present state), filtered by ``step``, ``state``
        (one word or several), ``dataset`` (fingerprint, name or shown source), ``pinned``; sorted by ``sort`` (one
        of :data:`SORT_KEYS`, then run id; run ids start with the date). Raises ValueError for an unknown sort key."""
        if sort not in SORT_KEYS:
            raise ValueError(f"unknown sort key {sort!r}; known: {', '.join(SORT_KEYS)}")
        where, args = [], []
        if step is not None:
            where.append("step = ?")
            args.append(step)
        if state is not None:
            states = [state] if isinstance(state, str) else list(state)
            where.append(f"state IN ({', '.join('?' for _ in states)})")
            args.extend(states)
        if dataset is not None:
            where.append("(dataset_fingerprint = ? OR dataset_name = ? OR dataset_shown = ?)")
            args.extend([dataset] * 3)
        if pinned is not None:
            where.append("pinned = ?")
            args.append(int(bool(pinned)))
        order = "DESC" if descending else "ASC"
        sql = (f"SELECT {', '.join(FIELDS)} FROM runs" + (f" WHERE {' AND '.join(where)}" if where else "")
               + f" ORDER BY {sort} IS NULL, {sort} {order}, run_id {order}")
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self._lock:
            return [_row_from_sql(v) for v in self._conn.execute(sql, args)]

    def get(self, run_id: str) -> IndexedRun | None:
        """The row of ``run_id``, or None."""
        with self._lock:
            v = self._conn.execute(f"SELECT {', '.join(FIELDS)} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return _row_from_sql(v) if v else None

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])


# ------------------------------------------------------------------------------------------------ sqlite
class transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on an error): one writer at a time, waiting at most the busy
    timeout for another process's write."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def __enter__(self):
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type, *_):
        self.conn.execute("ROLLBACK" if exc_type else "COMMIT")


def connect(path: str | Path) -> sqlite3.Connection:
    """A connection in autocommit mode, usable from any thread, waiting up to :data:`BUSY_TIMEOUT_MS` for a lock
    (the index's and the queue's)."""
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                           check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return conn


def _create(conn: sqlite3.Connection) -> None:
    with transaction(conn):
        conn.execute("DROP TABLE IF EXISTS runs")
        conn.execute(_CREATE)
        conn.execute("CREATE INDEX runs_step_state ON runs (step, state)")
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {INDEX_SCHEMA}")


def _problem(conn: sqlite3.Connection) -> str | None:
    """Why the open database is not a usable index, or None (raises sqlite3.DatabaseError for a non-database)."""
    app = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if app == 0 and version == 0 and not conn.execute("SELECT name FROM sqlite_master").fetchall():
        return "empty"
    if app != APPLICATION_ID:
        return "not an index of this program"
    if version != INDEX_SCHEMA:
        return f"index schema {version}, this version writes {INDEX_SCHEMA}"
    check = [r[0] for r in conn.execute("PRAGMA quick_check")]
    if check != ["ok"]:
        return "integrity check failed: " + "; ".join(check[:3])
    cols = [r[1] for r in conn.execute("PRAGMA table_info(runs)")]
    if cols != [*FIELDS, "sig"]:
        return "unexpected columns"
    return None


def _delete_db_files(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.unlink(f"{path}{suffix}")
        except FileNotFoundError:
            pass


def _open_checked(path: Path) -> tuple[sqlite3.Connection, str | None]:
    """Open ``path`` (under the index lock), rebuilding a missing or damaged file: (connection, why rebuilt)."""
    existed = path.exists()
    reason: str | None = None if existed else "missing"
    conn = None
    if existed:
        try:
            conn = connect(path)
            reason = _problem(conn)
        except sqlite3.OperationalError as exc:
            if any(w in str(exc) for w in ("locked", "busy")):
                if conn is not None:
                    conn.close()
                raise  # another process holds it past the busy timeout: never delete a file in use
            reason = f"not a usable database ({exc})"
        except sqlite3.DatabaseError as exc:
            reason = f"not a usable database ({exc})"
        if reason is not None:
            if conn is not None:
                conn.close()
            conn = None
            _delete_db_files(path)
    if conn is None:
        conn = connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")  # WAL: durable at checkpoints; the folders are the truth anyway
    if reason is not None:
        _create(conn)
    return conn, reason
