"""The workspace: a folder of runs, one sub-folder per run (see ARCHITECTURE.md "What a run leaves on disk").

Default root: ``platformdirs.user_data_dir("dpd-desktop")/runs``; override with ``Workspace(root)`` or the
environment variable ``DPD_DESKTOP_WORKSPACE``.
"""
from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RUN_STATES = ("queued", "running", "succeeded", "failed", "cancelled", "interrupted")


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
            rec = read_run_record(d)
            if rec is None or (step and rec.step != step):
                continue
            out.append(rec)
        return out


def read_run_record(run_dir: Path) -> RunRecord | None:
    """Read a run folder's record; None when it is not a run folder. Never raises on a damaged run."""
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
    except (OSError, ValueError):
        rec.status = "unreadable"
        return rec
    try:
        st = json.loads((run_dir / "status.json").read_text())
        rec.status = st.get("state", "unknown")
        rec.best_epoch = st.get("best_epoch")
        rec.summary = st
    except (OSError, ValueError):
        rec.status = "interrupted"
    return rec
