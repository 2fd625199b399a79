"""The frozen PA of a DPD run: a PA run of the workspace, read through its run record (runs/record.py)."""
from __future__ import annotations

import torch

from ..models import build_from_arch
from ..runs import artifacts
from ..runs.workspace import Workspace
from .errors import TrainingError
from .pa_check import check_pa_record


def check_pa_run(workspace: Workspace, pa_run: str, dataset=None, fingerprint: str | None = None,
                 allow_dataset_mismatch: bool = False) -> None:
    """Every check of :func:`load_pa_for_dpd` without touching the global RNG (the trial load runs under
    ``fork_rng``), so that a DPD run refuses a bad PA before its run folder exists. Raises as it does."""
    with torch.random.fork_rng(devices=[]):
        load_pa_for_dpd(workspace, pa_run, dataset=dataset, fingerprint=fingerprint,
                        allow_dataset_mismatch=allow_dataset_mismatch)


def load_pa_for_dpd(workspace: Workspace, pa_run: str, dataset=None, fingerprint: str | None = None,
                    allow_dataset_mismatch: bool = False):
    """``(pa_model, info)``: the frozen PA of a DPD run, built first (consuming the seeded RNG, reference §5.1 step
    1), then loaded from the PA run's ``best.pt``. ``info``: run id, checkpoint path and sha256, architecture,
    ``dataset_fingerprint``, ``dataset_mismatch_allowed``, ``run_state``.

    ``fingerprint`` (of the DPD's dataset), when given, must equal the PA run's recorded one (if any) unless
    ``allow_dataset_mismatch``. A cancelled or interrupted PA run is accepted (its best of the epochs it completed).

    Raises:
        TrainingError: the PA run, its ``config.json`` or ``best.pt`` is missing; it is not a PA run; it is queued,
            running, failed or unreadable; it was trained on another dataset; its checkpoint's architecture differs
            from the recorded one.
    """
    record, mismatch = check_pa_record(workspace, pa_run, fingerprint, getattr(dataset, "name", "?"),
                                       getattr(dataset, "source", "?"), allow_dataset_mismatch)
    run_dir, state, pa_fp = record.run_dir, record.state, record.dataset.fingerprint
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
