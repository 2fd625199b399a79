"""Run folders for tests, written by RunWriter (runs/writer.py) as a training would leave them, with chosen ages."""
from __future__ import annotations

import time
from pathlib import Path

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.runs.record import SCHEMA
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.runs.writer import RunWriter, set_pinned

HOUR = 3600.0
STAMP = "%Y-%m-%dT%H:%M:%S%z"


def make_run(ws: Workspace, name: str, step: str = "pa", state: str = "succeeded", ended_h: float = 48.0,
             created_h: float | None = None, pinned: bool = False, pa: Path | None = None, payload: int = 1000,
             **status) -> Path:
    """A run folder written by RunWriter: config.json, status.json (``updated`` = ``ended_h`` hours ago) and a
    log.txt of ``payload`` bytes; a DPD names its PA run like the trainer does (``pa`` block)."""
    d = ws.runs_dir / name
    d.mkdir(parents=True)
    w = RunWriter()
    w.run_id, w.run_dir, w.step = name, d, step
    created = time.strftime(STAMP, time.localtime(time.time() - (created_h or ended_h) * HOUR))
    w.config_doc = {"format": "dpd-desktop-run-1", "schema": SCHEMA, "run_id": name, "created": created,
                    "experiment": ExperimentConfig(step=step, dataset="demo", hidden_size=4,
                                                   pa_run=str(pa) if pa else None).to_dict()}
    if pa is not None:
        w.config_doc["pa"] = {"run_id": pa.name, "run_dir": str(pa), "checkpoint": str(pa / "best.pt")}
    w._write_config()
    w.write_status(state, updated=time.strftime(STAMP, time.localtime(time.time() - ended_h * HOUR)), **status)
    (d / "log.txt").write_bytes(b"x" * payload)
    if pinned:
        set_pinned(d, True)
    return d
