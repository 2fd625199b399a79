"""The checks of a DPD's PA run that need no PyTorch: the run exists, is a PA run, has finished (succeeded,
cancelled or interrupted), has its ``best.pt``, and was trained on the DPD's dataset (by fingerprint). Used by
training/pa_source.py before it loads the checkpoint, and by a sweep's parent (sweep/runner.py), which imports no
PyTorch, so that a sweep refuses a bad PA run before it exists, as ``train-dpd`` does.
"""
from __future__ import annotations

from pathlib import Path

from ..runs.record import RecordError, RunRecord
from ..runs.states import UNREADABLE
from ..runs.workspace import Workspace
from .errors import TrainingError


def check_pa_record(workspace: Workspace, pa_run: str, fingerprint: str | None = None, dataset_name: str = "?",
                    dataset_source: str = "?", allow_dataset_mismatch: bool = False) -> tuple[RunRecord, bool]:
    """``(record, mismatch)`` of the PA run ``pa_run``; ``mismatch``: its recorded dataset fingerprint differs from
    ``fingerprint`` (allowed by ``allow_dataset_mismatch``). ``dataset_name``, ``dataset_source``: the DPD's dataset,
    for the message.

    Raises:
        TrainingError: the run or its ``config.json`` is missing or unreadable; it is not a PA run; it is queued,
            running, failed or unreadable; its ``best.pt`` is missing; it was trained on another dataset.
    """
    try:
        run_dir = workspace.resolve(pa_run)
    except FileNotFoundError as exc:
        raise TrainingError(f"pa_run: {exc}") from exc
    try:
        record = RunRecord.open(run_dir)
    except RecordError as exc:
        raise TrainingError(str(exc)) from exc
    if record.step != "pa":
        raise TrainingError(f"{record.config_path}: field 'experiment.step' is {record.step!r}; a DPD needs a PA run")
    state = record.state
    status_path = run_dir / "status.json"
    if state in ("queued", "running"):
        raise TrainingError(f"pa_run: the PA run {run_dir.name} is still {state} ({status_path}); its "
                            "selected checkpoint may still change: wait until it has finished")
    if state in ("failed", UNREADABLE):  # a "damaged" run is refused by the load of its best.pt, named
        raise TrainingError(f"pa_run: the PA run {run_dir.name} is {state} ({status_path}"
                            + (f": {record.message}" if record.message else "")
                            + "); train the DPD through a PA run that succeeded")
    ckpt = Path(record.best_checkpoint)
    if not ckpt.is_file():
        raise TrainingError(f"{ckpt}: checkpoint file not found")
    ref = record.dataset
    pa_fp = ref.fingerprint
    mismatch = bool(fingerprint and pa_fp and pa_fp != fingerprint)
    if mismatch and not allow_dataset_mismatch:
        raise TrainingError(
            f"pa_run: the PA run {run_dir.name} was trained on dataset {ref.name or '?'} "
            f"({ref.shown}, fingerprint {pa_fp[:12]}…) but this DPD uses {dataset_name} ({dataset_source}, "
            f"fingerprint {fingerprint[:12]}…); train the DPD on the PA's dataset, or allow the mismatch "
            "(command line: --allow-dataset-mismatch; experiment setting: allow_dataset_mismatch)")
    return record, mismatch
