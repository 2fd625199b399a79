"""The workspace: a folder of runs, one sub-folder per run (see ARCHITECTURE.md "What a run leaves on disk").

Default root: ``platformdirs.user_data_dir("dpd-desktop")/runs``; override with ``Workspace(root)`` or the
environment variable ``DPD_DESKTOP_WORKSPACE``.
"""
from __future__ import annotations

import json
import os
import re
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .states import LIVE_STATES, RUN_STATES  # noqa: F401 - RUN_STATES re-exported for existing callers


class WorkspaceError(OSError):
    """The workspace folder cannot be used; the message names the path and what is wrong."""


def default_root() -> Path:
    """Workspace root: ``$DPD_DESKTOP_WORKSPACE`` or the platform's user data folder (platformdirs)."""
    env = os.environ.get("DPD_DESKTOP_WORKSPACE")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("dpd-desktop", appauthor=False))


@dataclass
class RunRecord:
    """What the workspace knows of one run folder (read from its ``config.json`` and ``status.json``)."""

    run_id: str
    run_dir: Path
    step: str = "?"
    backbone: str = "?"
    hidden_size: int | None = None
    status: str = "unknown"
    best_epoch: int | None = None
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        best = self.summary.get("best_value")
        best_s = f" · best {best:.2f}" if isinstance(best, (int, float)) else ""
        return f"{self.run_id} ({self.status}{best_s})"


class Workspace:
    """A folder holding ``runs/<run-id>/`` folders."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root).expanduser() if root is not None else default_root()
        self.runs_dir = self.root / "runs"

    def check(self, create: bool = False) -> None:
        """Make sure the workspace can be used; ``create`` also creates ``runs/`` and checks it is writable.

        Without ``create`` a workspace that does not exist yet is fine (nothing to list).

        Raises:
            WorkspaceError: the root or its ``runs`` is not a folder, cannot be created, read or written; the
                message names the path and what is wrong.
        """
        for p, what in ((self.root, "workspace"), (self.runs_dir, "workspace runs folder")):
            if p.exists() and not p.is_dir():
                raise WorkspaceError(f"{what} {p}: not a folder (it is a file)")
        if create:
            try:
                self.runs_dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                what = self.runs_dir if self.root.is_dir() else "the folder"
                raise WorkspaceError(f"workspace {self.root}: cannot create {what} "
                                     f"({exc.strerror or type(exc).__name__})") from exc
            if not os.access(self.runs_dir, os.W_OK | os.X_OK):
                raise WorkspaceError(f"workspace {self.root}: {self.runs_dir} is not writable")
        elif self.runs_dir.is_dir() and not os.access(self.runs_dir, os.R_OK | os.X_OK):
            raise WorkspaceError(f"workspace {self.root}: {self.runs_dir} cannot be read")

    def new_run_dir(self, label: str) -> tuple[str, Path]:
        """Create and return a fresh ``(run_id, run_dir)``: ``YYYY-MM-DD-HHMMSS-<label>`` (suffix on collision)."""
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", label).strip("-").lower() or "run"
        base = time.strftime("%Y-%m-%d-%H%M%S") + "-" + safe
        run_id, n = base, 1
        while True:
            d = self.runs_dir / run_id
            try:
                d.mkdir()
                return run_id, d
            except FileExistsError:
                n += 1
                run_id = f"{base}-{n}"

    def resolve(self, run: str | Path) -> Path:
        """Run id or run folder → run folder. Raises FileNotFoundError naming what was looked for."""
        p = Path(run).expanduser()
        if p.is_dir() and (p / "config.json").exists():
            return p
        cand = self.runs_dir / str(run)
        if cand.is_dir():
            return cand
        raise FileNotFoundError(
            f"run {run!r} not found: no folder with config.json at {p} nor {cand}")

    def list_runs(self, step: str | None = None) -> list[RunRecord]:
        """Runs in the workspace, newest first; ``step`` filters by "pa"/"dpd"."""
        out = []
        if not self.runs_dir.is_dir():
            return out
        for d in sorted(self.runs_dir.iterdir(), reverse=True):
            if not d.is_dir():
                continue
            rec = read_run_record(d)
            if rec is None or (step and rec.step != step):
                continue
            out.append(rec)
        return out


def process_start_ticks(pid: int) -> int | None:
    """Start time of process ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field 22); None where
    ``/proc`` does not exist or the process is gone. With the pid it identifies a process (pids are reused)."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
        # the command name (field 2) is in parentheses and may hold spaces: split after the last ')'
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def process_identity() -> dict[str, Any]:
    """What ``status.json`` records of the process that runs a training: ``pid``, ``host`` and
    ``process_start`` (see :func:`process_start_ticks`; None where ``/proc`` does not exist)."""
    pid = os.getpid()
    return {"pid": pid, "host": socket.gethostname(), "process_start": process_start_ticks(pid)}


def _pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (signal 0; a permission error means it exists)."""
    if pid <= 0:
        return False
    if os.name == "nt":  # os.kill(pid, 0) would terminate the process on Windows
        try:
            import ctypes

            h = ctypes.windll.kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
            if not h:
                return False
            code = ctypes.c_ulong()
            ctypes.windll.kernel32.GetExitCodeProcess(h, ctypes.byref(code))
            ctypes.windll.kernel32.CloseHandle(h)
            return code.value == 259  # STILL_ACTIVE
        except Exception:  # noqa: BLE001 - unknown: assume alive
            return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return True
    return True


def owner_gone(status: dict[str, Any]) -> bool:
    """True when ``status`` records a training process on this host that no longer exists (killed, crashed) or
    whose pid now belongs to another process (different start time). Unknown → False."""
    pid, host = status.get("pid"), status.get("host")
    if not isinstance(pid, int) or isinstance(pid, bool) or host != socket.gethostname():
        return False
    if not _pid_alive(pid):
        return True
    recorded = status.get("process_start")
    if isinstance(recorded, int) and os.path.isdir("/proc"):
        now = process_start_ticks(pid)
        return now is not None and now != recorded
    return False


def read_run_record(run_dir: Path) -> RunRecord | None:
    """Read a run folder's record; None when it is not a run folder. Never raises on a damaged run.

    A run whose ``status.json`` says queued/running but whose recorded process on this host is gone (or its pid
    now belongs to another process) is reported as "interrupted".
    """
    cfg_path = run_dir / "config.json"
    if not cfg_path.is_file():
        return None
    rec = RunRecord(run_id=run_dir.name, run_dir=run_dir)
    try:
        cfg = json.loads(cfg_path.read_text())
        exp = cfg.get("experiment", {})
        rec.step = exp.get("step", "?")
        rec.backbone = exp.get("backbone", "?")
        rec.hidden_size = exp.get("hidden_size")
    except (OSError, ValueError, AttributeError):  # AttributeError: valid JSON of another shape ([], {"experiment": 1})
        rec.step, rec.backbone, rec.hidden_size = "?", "?", None
        rec.status = "unreadable"
        return rec
    status_path = run_dir / "status.json"
    try:
        st = json.loads(status_path.read_text())
        rec.status = st.get("state", "unknown")
        rec.best_epoch = st.get("best_epoch")
        rec.summary = st
    except (OSError, ValueError, AttributeError):
        # no status.json at all: the process died before writing it; one that exists but cannot be read: damaged
        rec.status = "unreadable" if status_path.exists() else "interrupted"
        return rec
    if rec.status in LIVE_STATES and owner_gone(st):
        rec.status = "interrupted"
    return rec
