"""The workspace: a folder of runs, one sub-folder per run (see ARCHITECTURE.md "What a run leaves on disk").

Default root: ``platformdirs.user_data_dir("dpd-desktop")/runs``; override with ``Workspace(root)`` or the
environment variable ``DPD_DESKTOP_WORKSPACE``.
"""
from __future__ import annotations

import os
import re
import time
from pathlib import Path

from .record import RunRecord, list_records


class WorkspaceError(OSError):
    """The workspace folder cannot be used; the message names the path and what is wrong."""


def default_root() -> Path:
    """Workspace root: ``$DPD_DESKTOP_WORKSPACE`` or the platform's user data folder (platformdirs)."""
    env = os.environ.get("DPD_DESKTOP_WORKSPACE")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_dir  # only the default workspace needs it (some images lack it)

    return Path(user_data_dir("dpd-desktop", appauthor=False))


class Workspace:
    """A folder holding ``runs/<run-id>/`` folders."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root).expanduser() if root is not None else default_root()
        self.runs_dir = self.root / "runs"
        self.cache_dir = self.root / "cache"  # derived data only (analysis/gate.py's flags): safe to delete

    def check(self, create: bool = False) -> None:
        """Make sure the workspace can be used (one that does not exist yet is fine); ``create`` also creates
        ``runs/`` and checks it is writable. Raises WorkspaceError naming the path and what is wrong."""
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
        return list_records(self.runs_dir, step)
