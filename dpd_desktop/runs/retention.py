"""Retention: scratch runs older than the workspace's ``retention_hours`` (runs/settings.py) are removed.

Every run is *scratch* or *kept* (pinned: runs/writer.py ``set_pinned``). A scratch run is due when the time since it
ended (status.json's ``updated``, else its mtime, else config.json's) exceeds the retention time. Never due: a kept
run; a live run (runs/owner.py through the reader's state); a PA run that a staying DPD run was trained on
(config.json ``pa.run_id`` / ``pa.run_dir`` or ``experiment.pa_run``); an unreadable or damaged folder (never
removed on a doubt); anything that is not a plain folder directly inside the runs folder.

:func:`remove_due` re-plans first and removes only runs shown *and* still due: each folder is renamed into
``runs/.trash/`` (one atomic step), its index row dropped, then the trash copy deleted (``shutil.rmtree`` never
follows a link inside); what a crash leaves there, :func:`purge_trash` removes.
"""
from __future__ import annotations

import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from .record import RunRecord
from .settings import WorkspaceSettings
from .states import DAMAGED, LIVE_STATES, UNREADABLE

TRASH_DIR = ".trash"
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S%z"  # status.json's "updated" (runs/writer.py)


@dataclass(frozen=True)
class RetentionItem:
    """One run folder judged by retention: ``state`` "" for a folder that is not a run; ``age_s`` None when
    unknown; ``size_bytes`` for due runs only (links counted as links); ``reason`` in words."""

    run_id: str
    folder: Path
    state: str
    age_s: float | None
    due: bool
    reason: str
    size_bytes: int | None = None


@dataclass(frozen=True)
class RetentionPlan:
    """What retention would do now: the due runs and, for every other run folder, why it stays."""

    retention_hours: float
    now: float
    due: tuple[RetentionItem, ...] = ()
    kept: tuple[RetentionItem, ...] = ()
    runs_dir: Path | None = None

    @property
    def due_bytes(self) -> int:
        return sum(i.size_bytes or 0 for i in self.due)


@dataclass
class RemovalReport:
    """What :func:`remove_due` did: run ids removed, and ``(run id, reason)`` of those left in place."""

    removed: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


# ------------------------------------------------------------------------------------------------ planning
def ended_at(rec: RunRecord) -> float | None:
    """When the run ended (or last wrote its status), seconds since the epoch; None when nothing tells."""
    updated = rec.status_doc.get("updated") if isinstance(rec.status_doc, dict) else None
    if isinstance(updated, str):
        try:
            return datetime.strptime(updated, _TIME_FORMAT).timestamp()
        except ValueError:
            pass
    for name in ("status.json", "config.json"):
        try:
            return os.stat(rec.run_dir / name).st_mtime
        except OSError:
            continue
    return None


def folder_size(folder: Path) -> int:
    """Bytes of every file under ``folder`` (``lstat``: a link counts as itself, never what it points to)."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def inside_runs_dir(folder: Path, runs_dir: Path) -> str | None:
    """None when ``folder`` is a plain folder directly inside ``runs_dir`` (resolved); else why it is not."""
    if os.path.islink(folder):
        return "a symbolic link (never followed)"
    try:
        real, base = folder.resolve(strict=True), runs_dir.resolve(strict=True)
    except OSError as exc:
        return f"cannot be resolved ({exc.strerror or exc})"
    if real.parent != base or not real.is_dir():
        return f"not a folder inside the runs folder {base}"
    return None


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"


def _pa_links(rec: RunRecord, runs_dir: Path) -> set[str]:
    """Names of the PA run folders in ``runs_dir`` that the DPD run ``rec`` was trained on."""
    out: set[str] = set()
    pa = rec.pa or {}
    exp_pa = rec.config.pa_run if rec.config is not None else None
    for v in (pa.get("run_id"), pa.get("run_dir"), exp_pa):
        if not isinstance(v, str) or not v:
            continue
        p = Path(v)
        if len(p.parts) == 1:
            out.add(v)
        else:
            try:
                if p.resolve().parent == runs_dir.resolve():
                    out.add(p.name)
            except OSError:
                pass
    return out


def plan_retention(workspace, older_than_hours: float | None = None, now: float | None = None) -> RetentionPlan:
    """Judge every folder of the workspace's runs folder (module docstring) at ``now`` (seconds since the epoch)
    against ``older_than_hours`` (default: settings.json ``retention_hours``, then SettingsError when unreadable)."""
    hours = WorkspaceSettings.load(workspace.root).retention_hours if older_than_hours is None \
        else float(older_than_hours)
    now = time.time() if now is None else float(now)
    runs_dir = Path(workspace.runs_dir)
    if not runs_dir.is_dir():
        return RetentionPlan(hours, now, runs_dir=runs_dir)
    judged: list[tuple[RunRecord | None, RetentionItem]] = []
    for entry in sorted(os.scandir(runs_dir), key=lambda e: e.name):
        if entry.name.startswith("."):
            continue
        folder = Path(entry.path)
        outside = inside_runs_dir(folder, runs_dir)
        if outside is not None:
            if os.path.islink(folder) or entry.is_dir():
                judged.append((None, RetentionItem(entry.name, folder, "", None, False, outside)))
            continue
        rec = RunRecord.read(folder)
        if rec is None:
            continue  # not a run folder (no config.json): not listed, not ours to remove
        ended = ended_at(rec)
        age = None if ended is None else max(0.0, now - ended)
        if rec.state in (UNREADABLE, DAMAGED):
            item = RetentionItem(rec.run_id, folder, rec.state, age, False, f"{rec.state}: check it by hand")
        elif rec.pinned:
            item = RetentionItem(rec.run_id, folder, rec.state, age, False, "kept (pinned)")
        elif rec.state in LIVE_STATES:
            item = RetentionItem(rec.run_id, folder, rec.state, age, False, f"live ({rec.state})")
        elif age is None:
            item = RetentionItem(rec.run_id, folder, rec.state, age, False, "age unknown")
        elif age <= hours * 3600:
            item = RetentionItem(rec.run_id, folder, rec.state, age, False,
                                 f"scratch, ended {_hours(age)} ago (not older than {hours:g} h)")
        else:
            item = RetentionItem(rec.run_id, folder, rec.state, age, True,
                                 f"scratch, ended {_hours(age)} ago (older than {hours:g} h)")
        judged.append((rec, item))
    # a PA run stays while a DPD run that stays was trained on it
    staying = [(rec, item) for rec, item in judged if rec is not None and not item.due and rec.step == "dpd"]
    protect: dict[str, str] = {}
    for rec, item in staying:
        for name in _pa_links(rec, runs_dir):
            why = "kept" if rec.pinned else "staying"
            protect.setdefault(name, f"PA of {why} DPD run {rec.run_id}")
    due, kept = [], []
    for rec, item in judged:
        if item.due and item.run_id in protect:
            item = RetentionItem(item.run_id, item.folder, item.state, item.age_s, False, protect[item.run_id])
        if item.due:
            due.append(RetentionItem(item.run_id, item.folder, item.state, item.age_s, True, item.reason,
                                     folder_size(item.folder)))
        else:
            kept.append(item)
    return RetentionPlan(hours, now, tuple(due), tuple(kept), runs_dir)


# ------------------------------------------------------------------------------------------------ removing
def purge_trash(workspace) -> int:
    """Delete what an earlier removal left in ``runs/.trash`` (a crash mid-delete); returns the entries removed."""
    trash = Path(workspace.runs_dir) / TRASH_DIR
    if os.path.islink(trash) or not trash.is_dir():
        return 0
    n = 0
    for entry in os.scandir(trash):
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            n += 1
        except OSError:
            pass
    return n


def remove_due(workspace, plan: RetentionPlan, index=None) -> RemovalReport:
    """Remove the runs of ``plan.due`` still due now (re-planned with its age limit); ``index``: a
    :class:`~dpd_desktop.runs.index.RunIndex` whose rows are dropped. A run that cannot be moved is ``skipped``."""
    report = RemovalReport()
    runs_dir = Path(workspace.runs_dir)
    fresh = {i.run_id: i for i in plan_retention(workspace, plan.retention_hours, now=time.time()).due}
    trash = runs_dir / TRASH_DIR
    for item in plan.due:
        now_item = fresh.get(item.run_id)
        if now_item is None or Path(now_item.folder) != Path(item.folder):
            report.skipped.append((item.run_id, "no longer due"))
            continue
        outside = inside_runs_dir(Path(item.folder), runs_dir)
        if outside is not None:
            report.skipped.append((item.run_id, outside))
            continue
        try:
            if os.path.islink(trash):
                raise OSError(f"{trash} is a symbolic link")
            trash.mkdir(exist_ok=True)
            target = trash / f"{item.run_id}.{uuid.uuid4().hex[:8]}"
            os.rename(item.folder, target)
        except OSError as exc:
            report.skipped.append((item.run_id, f"cannot be moved to {trash} ({exc})"))
            continue
        report.removed.append(item.run_id)
        if index is not None:
            index.remove([item.run_id])
        try:
            shutil.rmtree(target)
        except OSError:
            pass  # only trash is left: purge_trash removes it next time
    return report


def format_size(n: int | None) -> str:
    """``1536`` → "1.5 KiB"."""
    if n is None:
        return "?"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def format_age(seconds: float | None) -> str:
    """``90000`` → "25.0 h"; days above 72 h."""
    if seconds is None:
        return "?"
    return f"{seconds / 86400:.1f} d" if seconds > 72 * 3600 else _hours(seconds)
