"""A sweep's folder: ``<workspace>/sweeps/<sweep-id>/sweep.json`` (and, for Optuna, ``optuna.sqlite``).

sweep.json (``format`` :data:`FORMAT`), written whole and atomically (runs/artifacts.py) under
``sweep.json.lock`` (filelock: the sweep's process and a ``sweep cancel`` from another may write at once)::

    {"format", "id", "created", "updated", "spec": SweepSpec.to_dict(),
     "state": a runs/states.py word, "message", "owner": the running process (runs/owner.py) or null,
     "cancel_requested": bool, "ray": {"address": the --ray address of its last pass} or null (this machine),
     "trials": [{"number", "params", "state", "run_id", "run_dir", "message", "value", "pruned", "time_limited",
                 "attempts": [earlier run ids of this trial], "optuna_number", "group"}]}

A trial's ``value`` is its run's best per-epoch ``spec.metric``; ``pruned`` / ``time_limited``: ended
``cancelled`` by the Optuna pruner / its own time limit; ``group``: the group it trains in (null: alone or not
planned yet). A trial is *done* when it succeeded, failed, was pruned or time-limited; ``sweep resume`` runs the
others. A sweep recorded ``running`` whose process is gone reads ``interrupted``, and its trials recorded
``running`` read their run folder's state (:func:`reconcile_trials`).

Errors: :class:`SweepError` (a ValueError) names sweep.json and the field.
"""
from __future__ import annotations

import json
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from filelock import FileLock

from ..atomic import atomic_write_json
from ..runs.owner import owner_gone, process_identity
from ..runs.record import RecordError, RunRecord
from ..runs.states import FINAL_STATES, RUN_STATES
from .spec import SweepSpec, SweepSpecError

FORMAT = "dpd-desktop-sweep-1"
SWEEPS_DIR = "sweeps"
SWEEP_FILE = "sweep.json"
OPTUNA_FILE = "optuna.sqlite"
LOCK_TIMEOUT_S = 30.0


class SweepError(ValueError):
    """A sweep folder that cannot be used, or a refused request; names the file (and the field)."""

    def __init__(self, path: str | Path, message: str, field: str | None = None):
        super().__init__(f"{path}: " + (f"{field}: " if field else "") + message)
        self.path, self.field = Path(path), field


def trial_done(t: dict) -> bool:
    """Succeeded, failed, pruned or stopped by its time limit: ``sweep resume`` leaves it as it is."""
    return t.get("state") in ("succeeded", "failed") or bool(t.get("pruned")) or bool(t.get("time_limited"))


@dataclass(frozen=True)
class SweepInfo:
    """One sweep as read: its folder, sweep.json's document (``doc``) and the state read (owner gone →
    interrupted)."""

    folder: Path
    doc: dict
    state: str

    @property
    def id(self) -> str:
        return self.doc["id"]

    @property
    def spec(self) -> SweepSpec:
        return SweepSpec.from_dict(self.doc["spec"])

    @property
    def trials(self) -> list[dict]:
        return list(self.doc.get("trials", []))

    def counts(self) -> dict[str, int]:
        return dict(Counter("pruned" if t.get("pruned") else t.get("state", "queued") for t in self.trials))


class SweepStore:
    """The sweep folders of a workspace (``root``: the workspace folder)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.dir = self.root / SWEEPS_DIR

    def folder(self, sweep_id: str) -> Path:
        return self.dir / sweep_id

    def create(self, spec: SweepSpec, trials: list[dict] | None = None) -> SweepInfo:
        """A new sweep folder ``YYYY-MM-DD-HHMMSS-<name>`` with its sweep.json (state queued)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", spec.name).strip("-").lower() or "sweep"
        base = time.strftime("%Y-%m-%d-%H%M%S") + "-" + safe
        sid, n = base, 1
        while True:
            try:
                (self.dir / sid).mkdir()
                break
            except FileExistsError:
                n += 1
                sid = f"{base}-{n}"
        now = _now()
        doc = {"format": FORMAT, "id": sid, "created": now, "updated": now, "spec": spec.to_dict(),
               "state": "queued", "message": "", "owner": None, "cancel_requested": False,
               "trials": [new_trial(i, p) for i, p in enumerate(trials or [])]}
        atomic_write_json(self.dir / sid / SWEEP_FILE, doc)
        return self.open(sid)

    def open(self, sweep_id: str) -> SweepInfo:
        """Read one sweep (by id or folder). Raises SweepError."""
        folder = Path(sweep_id) if Path(sweep_id).is_dir() else self.folder(str(sweep_id))
        path = folder / SWEEP_FILE
        if not path.is_file():
            raise SweepError(path, f"no such sweep {sweep_id!r} (sweep list shows the sweeps)")
        return _read(path)

    def list(self) -> list[SweepInfo]:
        """Every readable sweep, oldest first (an unreadable sweep.json is left out)."""
        out = []
        if not self.dir.is_dir():
            return out
        for d in sorted(self.dir.iterdir()):
            if d.name.startswith(".") or not (d / SWEEP_FILE).is_file():
                continue
            try:
                out.append(_read(d / SWEEP_FILE))
            except SweepError:
                continue
        return out

    def update(self, sweep_id: str, change: Callable[[dict], Any]) -> SweepInfo:
        """Read sweep.json, apply ``change(doc)`` in place, write it back atomically, under the sweep's lock."""
        folder = self.folder(sweep_id)
        path = folder / SWEEP_FILE
        with FileLock(str(folder / (SWEEP_FILE + ".lock")), timeout=LOCK_TIMEOUT_S):
            doc = _read(path).doc
            change(doc)
            doc["updated"] = _now()
            atomic_write_json(path, doc)
        return _read(path)

    # ------------------------------------------------------------------------------------------------ helpers
    def set_running(self, sweep_id: str) -> SweepInfo:
        def ch(doc):
            doc.update(state="running", owner=process_identity(), cancel_requested=False, message="")
        return self.update(sweep_id, ch)

    def set_ray(self, sweep_id: str, address: str | None) -> SweepInfo:
        """Record where the sweep runs: a Ray cluster's address (``local`` included), None for this machine's queue.
        Never the override of the token rule: a resume must be given it again, knowingly."""
        def ch(doc):
            doc["ray"] = {"address": address} if address else None
        return self.update(sweep_id, ch)

    def finish(self, sweep_id: str, state: str, message: str = "") -> SweepInfo:
        def ch(doc):
            doc.update(state=state, owner=None, message=message)
        return self.update(sweep_id, ch)

    def request_cancel(self, sweep_id: str) -> SweepInfo:
        """Ask the sweep's process to stop (it reads ``cancel_requested``); a sweep not running ends cancelled."""
        info = self.open(sweep_id)
        if info.state not in ("queued", "running"):
            raise SweepError(info.folder / SWEEP_FILE, f"has already ended ({info.state})", "state")

        def ch(doc):
            doc["cancel_requested"] = True
            if info.state == "queued":
                doc.update(state="cancelled", message="cancelled before it started")
        return self.update(info.id, ch)

    def cancel_requested(self, sweep_id: str) -> bool:
        try:
            return bool(self.open(sweep_id).doc.get("cancel_requested"))
        except SweepError:
            return False

    def set_groups(self, sweep_id: str, groups: dict[int, int | None]) -> SweepInfo:
        """Record each trial's group (trial number → group number or None), in one write."""
        def ch(doc):
            for t in doc.get("trials", []):
                if t["number"] in groups:
                    t["group"] = groups[t["number"]]
        return self.update(sweep_id, ch)

    def set_trial(self, sweep_id: str, number: int, **values) -> SweepInfo:
        """Update trial ``number`` (appended when new: give ``params``)."""
        return self.set_trials(sweep_id, {number: values})

    def set_trials(self, sweep_id: str, changes: dict[int, dict[str, Any]]) -> SweepInfo:
        """Update several trials (trial number → values, as :meth:`set_trial`) in one write of sweep.json."""
        def ch(doc):
            trials = doc.setdefault("trials", [])
            by_number = {t["number"]: t for t in trials}
            added = False
            for number, values in changes.items():
                t = by_number.get(number)
                if t is None:
                    t = by_number[number] = new_trial(number, values.get("params", {}))
                    trials.append(t)
                    added = True
                if values.get("run_id") and t.get("run_id") and values["run_id"] != t["run_id"]:
                    t.setdefault("attempts", []).append(t["run_id"])
                t.update(values)
            if added:
                trials.sort(key=lambda x: x["number"])
        return self.update(sweep_id, ch)


def new_trial(number: int, params: dict) -> dict:
    return {"number": number, "params": dict(params), "state": "queued", "run_id": None, "run_dir": None,
            "message": "", "value": None, "pruned": False, "time_limited": False, "attempts": [], "optuna_number": None,
            "group": None}


def _read(path: Path) -> SweepInfo:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise SweepError(path, f"cannot be read ({exc})") from exc
    if not isinstance(doc, dict):
        raise SweepError(path, "not a JSON object")
    if doc.get("format") != FORMAT:
        raise SweepError(path, f"expected {FORMAT!r}, got {doc.get('format')!r}", "format")
    for k, kind in (("id", str), ("spec", dict), ("trials", list), ("state", str)):
        if not isinstance(doc.get(k), kind):
            raise SweepError(path, f"missing or not a {kind.__name__}", k)
    if doc["state"] not in RUN_STATES:
        raise SweepError(path, f"{doc['state']!r} is not one of {RUN_STATES}", "state")
    try:
        SweepSpec.from_dict(doc["spec"])
    except SweepSpecError as exc:  # a field of a known name with a bad value (e.g. spec.group_size)
        raise SweepError(path, str(exc).split(": ", 2)[-1], exc.key) from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise SweepError(path, f"cannot be read ({exc!r})", "spec") from exc
    state = doc["state"]
    owner = doc.get("owner")
    if state == "running" and isinstance(owner, dict) and owner_gone(owner):
        state = "interrupted"
    if state != "running":
        reconcile_trials(doc)
    return SweepInfo(path.parent, doc, state)


def run_folder_state(run_dir: str | None) -> str:
    """The state a trial's run folder reads: its RunRecord's final state, else ``interrupted`` (a folder still
    running with its process gone reads interrupted in RunRecord; no folder or an unreadable one: interrupted)."""
    if not run_dir:
        return "interrupted"
    try:
        state = RunRecord.open(run_dir).state
    except (RecordError, OSError, ValueError):
        return "interrupted"
    return state if state in FINAL_STATES else "interrupted"


def reconcile_trials(doc: dict) -> list[int]:
    """In a sweep that is not running: every trial recorded ``running`` takes its run folder's state
    (:func:`run_folder_state`), in place; returns those trials' numbers."""
    changed = []
    for t in doc.get("trials", []):
        if isinstance(t, dict) and t.get("state") == "running":
            t["state"] = run_folder_state(t.get("run_dir"))
            if not t.get("message") and t["state"] == "interrupted":
                t["message"] = "the sweep's process was stopped before this trial ended"
            changed.append(t.get("number"))
    return changed


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
