"""The frozen PA of a DPD run: a PA run of the workspace, read through its run record (runs/record.py)."""
from __future__ import annotations

import torch

from ..models import build_from_arch
from ..runs import artifacts
from ..runs.record import RecordError, RunRecord
from ..runs.states import UNREADABLE
from ..runs.workspace import Workspace
from .errors import TrainingError


def check_pa_run(workspace: Workspace, pa_run: str, dataset=None, fingerprint: str | None = None,
                 allow_dataset_mismatch: bool = False) -> None:
    """Every check of :func:`load_pa_for_dpd` — the run exists and is a PA run of this dataset, its ``best.pt`` is
    there and has the recorded architecture — without touching the global RNG (the trial load runs under
    ``torch.random.fork_rng``), so that a DPD run can refuse a bad PA before its run folder exists.

    Raises:
        TrainingError: as :func:`load_pa_for_dpd`.
    """
    with torch.random.fork_rng(devices=[]):
        load_pa_for_dpd(workspace, pa_run, dataset=dataset, fingerprint=fingerprint,
                        allow_dataset_mismatch=allow_dataset_mismatch)


def load_pa_for_dpd(workspace: Workspace, pa_run: str, dataset=None, fingerprint: str | None = None,
                    allow_dataset_mismatch: bool = False):
    """Build the frozen PA of a DPD run from a PA run of the workspace.

    Builds the PA model first (consuming the seeded RNG like the reference, §5.1 step 1), then loads the PA run's
    selected checkpoint. Returns ``(pa_model, info)`` where info records the PA run id, checkpoint path and sha256,
    the architecture and the PA's dataset fingerprint (``dataset_fingerprint``).

    When ``fingerprint`` (of the DPD's ``dataset``) is given, it must equal the fingerprint recorded in the PA run's
    ``config.json`` (a DPD learned through a PA model of another PA/dataset is meaningless), unless
    ``allow_dataset_mismatch`` (then ``info["dataset_mismatch_allowed"]`` is True). A PA run without a recorded
    fingerprint is not checked.

    A PA run that is still queued or running, that failed, or whose ``status.json`` is unreadable is refused (one
    whose ``best.pt`` is damaged fails the checkpoint load, which names the file); a cancelled or interrupted one
    (its ``best.pt`` is the best of the epochs it completed) is accepted; its state is recorded (``info["run_state"]``) and the trainer writes a warning to the run's log.

    Raises:
        TrainingError: the PA run, its ``config.json`` or ``best.pt`` is missing, it is not a PA run, it is running
            or failed, it was trained on another dataset, or the checkpoint's architecture (field names and tensor
            shapes) differs from the one recorded.
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
    if state in ("failed", UNREADABLE):  # a "damaged" run is refused below by the load of its best.pt, named
        raise TrainingError(f"pa_run: the PA run {run_dir.name} is {state} ({status_path}"
                            + (f": {record.message}" if record.message else "")
                            + "); train the DPD through a PA run that succeeded")
    ref = record.dataset
    pa_fp = ref.fingerprint
    mismatch = bool(fingerprint and pa_fp and pa_fp != fingerprint)
    if mismatch and not allow_dataset_mismatch:
        name = getattr(dataset, "name", "?")
        source = getattr(dataset, "source", "?")
        raise TrainingError(
            f"pa_run: the PA run {run_dir.name} was trained on dataset {ref.name or '?'} "
            f"({ref.shown}, fingerprint {pa_fp[:12]}…) but this DPD uses {name} ({source}, "
            f"fingerprint {fingerprint[:12]}…); train the DPD on the PA's dataset, or allow the mismatch "
            "(command line: --allow-dataset-mismatch; experiment setting: allow_dataset_mismatch)")
    arch = record.arch
    ckpt = record.best_checkpoint
    pa = build_from_arch(arch)
    try:
        meta = artifacts.load_state_checked(pa, ckpt, arch)
    except artifacts.CheckpointError as exc:
        raise TrainingError(str(exc)) from exc
    info = {"run_id": run_dir.name, "run_dir": str(run_dir), "checkpoint": str(ckpt),
            "sha256": artifacts.file_sha256(ckpt), **arch, "selected_epoch": meta.get("epoch"),
            "dataset_fingerprint": pa_fp, "dataset_mismatch_allowed": mismatch, "run_state": state}
    return pa, info
