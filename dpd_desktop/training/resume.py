"""Resuming a run: reopen an interrupted, cancelled or failed run folder and continue after its last finished epoch.

:func:`prepare_resume` checks, before anything is written, that the run is not succeeded, running or damaged, that
its last.pt matches its config.json and that its dataset is the recorded one. :func:`resume_trainer` builds a
:class:`~dpd_desktop.training.trainer.Trainer` continuing in the same folder; :func:`resume_run` runs it. The resumed
run ends bitwise equal to the uninterrupted one (last.pt holds every RNG state; tests/unit/test_resume.py).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from ..config import ConfigError, ExperimentConfig
from ..runs.record import RecordError, RunRecord
from ..runs.workspace import Workspace
from ..runs.writer import RunWriter
from .resume_state import ResumeError, ResumeState, load
from .trainer import RunResult, Trainer

#: the limits a resume may set anew (they change no number a run computes, except threads on some CPUs)
LIMIT_FIELDS = ("time_limit_s", "cuda_memory_fraction", "threads")
RESUMABLE_STATES = ("interrupted", "cancelled", "failed")


class ResumeRefused(ValueError):
    """The run cannot be resumed; the message says why in plain words (the command line exits 2)."""


@dataclass
class ResumePlan:
    """A checked resume: the run's record, its configuration (with the new limits), dataset and last.pt."""

    record: RunRecord
    config: ExperimentConfig
    dataset: Any
    state: ResumeState


def prepare_resume(workspace: Workspace, run: str | Path, dataset=None, **limits: Any) -> ResumePlan:
    """Check that ``run`` (a run id or folder) can be resumed; ``limits`` (:data:`LIMIT_FIELDS`, None = keep the
    recorded value) replace the recorded limits. ``dataset``: the already loaded dataset (checked) or None.

    Raises:
        ResumeRefused: the run is not found, succeeded, still running, unreadable or damaged; it has no last.pt;
            last.pt does not match config.json; the dataset changed or cannot be reloaded; a limit is invalid.
    """
    try:
        run_dir = workspace.resolve(run)
        rec = RunRecord.open(run_dir)
    except (FileNotFoundError, RecordError) as exc:
        raise ResumeRefused(f"cannot resume: {exc}") from exc
    name = rec.run_id
    if rec.state == "succeeded":
        raise ResumeRefused(f"run {name} already succeeded: there is nothing to resume")
    if rec.state in ("running", "queued"):
        st = rec.status_doc
        raise ResumeRefused(f"run {name} is still {rec.state} (process {st.get('pid')} on {st.get('host')}); "
                            "stop it first, or wait for it to end")
    if rec.state == "unreadable":
        raise ResumeRefused(f"run {name} is unreadable: {rec.run_dir / 'status.json'} is not a JSON object with a "
                            "state; fix or remove that file")
    if rec.state not in RESUMABLE_STATES:
        raise ResumeRefused(f"run {name} is {rec.state}; only an interrupted, cancelled or failed run can be resumed")
    last = rec.last_checkpoint
    if not last.is_file():
        raise ResumeRefused(f"run {name} has no last.pt (it ended before its first epoch finished): start it again")
    try:
        state = load(last, rec.config, run_id=name)
    except ResumeError as exc:
        raise ResumeRefused(f"cannot resume run {name}: {exc}") from exc
    cfg = rec.config
    changes = {k: v for k, v in limits.items() if v is not None}
    unknown = sorted(set(changes) - set(LIMIT_FIELDS))
    if unknown:
        raise ResumeRefused(f"cannot resume run {name}: {unknown[0]} cannot be changed by a resume")
    try:
        cfg = dataclasses.replace(cfg, **changes).validate()
    except ConfigError as exc:
        raise ResumeRefused(f"cannot resume run {name}: {exc}") from exc
    try:
        ds = rec.dataset.load(dataset)
    except RecordError as exc:
        raise ResumeRefused(f"cannot resume run {name}: {exc}") from exc
    return ResumePlan(rec, cfg, ds, state)


def resume_trainer(plan: ResumePlan, workspace: Workspace, observers: Iterable[Callable] = (),
                   fast_path: bool = True) -> Trainer:
    """The trainer that continues ``plan``'s run in its own folder (call ``run()``)."""
    writer = RunWriter(resume=plan.state.writer_info(dict(plan.record.doc)))
    return Trainer(plan.config, dataset=plan.dataset, workspace=workspace, observers=observers,
                   fast_path=fast_path, writer=writer, resume=plan.state)


def resume_run(run_dir: str | Path, workspace: Workspace | None = None, observers: Iterable[Callable] = (),
               dataset=None, fast_path: bool = True, **limits: Any) -> RunResult:
    """Resume the run ``run_dir`` (id or folder) and run it to its end (blocking); see :func:`prepare_resume`.

    Raises:
        ResumeRefused: see :func:`prepare_resume` (nothing is written then).
    """
    ws = workspace or Workspace()
    plan = prepare_resume(ws, run_dir, dataset=dataset, **limits)
    return resume_trainer(plan, ws, observers, fast_path=fast_path).run()
