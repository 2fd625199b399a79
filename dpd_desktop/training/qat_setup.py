"""The set-up of a fine-tune (config ``parent_run``): the parent's weights (its best.pt); with ``qat`` also the
activation formats, calibrated once here on the training split from the parent's float model and recorded in
config.json's ``qat`` block (the fixed export reuses them), and the fake-quantised model (dpd_desktop/quant). A
fine-tune without ``qat`` continues the float training (the control of quantisation-aware training). The parent must
be a DPD run of the same family and size, trained through the same PA run on the same dataset.
"""
from __future__ import annotations

from typing import Any

from ..data.segments import segment
from ..quant.lower import LoweringError, lower
from ..quant.plan import calibrate
from ..config import QuantSpec
from ..quant.qat import FakeQuantModel
from ..runs import artifacts
from ..runs.record import PACheckpointError, RecordError, RunRecord
from ..runs.workspace import Workspace
from .errors import TrainingError

__all__ = ["prepare_finetune", "parent_record"]


def parent_record(workspace: Workspace, parent_run: str) -> RunRecord:
    """The parent of a fine-tune, checked to be a DPD run with a selected checkpoint. Raises TrainingError."""
    try:
        rec = RunRecord.open(workspace.resolve(parent_run))
    except (FileNotFoundError, RecordError) as exc:
        raise TrainingError(f"parent_run: {exc}") from exc
    if rec.step != "dpd":
        raise TrainingError(f"{rec.config_path}: field 'experiment.step' is {rec.step!r}; a fine-tune "
                            "(quantisation-aware training) starts from a DPD run")
    if not rec.best_checkpoint.is_file():
        raise TrainingError(f"{rec.best_checkpoint}: the parent run has no selected checkpoint (best.pt); did it "
                            "finish an epoch?")
    if (rec.pa or {}).get("checkpoint"):  # a fine-tune trains through the parent's frozen PA, unchanged
        try:
            rec.pa_checkpoint("the parent run", "a fine-tune trains through the parent's PA")
        except PACheckpointError as exc:
            raise TrainingError(str(exc)) from exc
    return rec


def prepare_finetune(cfg, dpd, workspace: Workspace, dataset, pa_info: dict[str, Any] | None):
    """Load the parent's weights into ``dpd``; with ``cfg.qat`` calibrate and wrap. Returns (the model to train,
    (config.json block name, block)): ("qat", …) for a quantisation-aware fine-tune (a FakeQuantModel), else
    ("finetune", …) and ``dpd`` itself.

    Raises:
        TrainingError: the parent is missing, not a DPD run, of another architecture, PA or dataset; its
            checkpoint does not load; the family has no lowering.
    """
    rec = parent_record(workspace, cfg.parent_run)
    arch = {k: getattr(cfg, k) for k in artifacts.ARCH_FIELDS}
    for k, v in arch.items():
        if rec.arch.get(k) != v:
            raise TrainingError(f"{rec.config_path}: field 'experiment.{k}' is {rec.arch.get(k)!r} but the fine-tune "
                                f"is configured with {v!r}")
    parent_pa = (rec.pa or {}).get("sha256")
    if pa_info is not None and parent_pa and pa_info.get("sha256") != parent_pa:
        raise TrainingError(f"{rec.config_path}: the parent was trained through another PA checkpoint "
                            f"({(rec.pa or {}).get('run_id')}); fine-tune through the same PA run")
    fp = rec.dataset.fingerprint if rec.dataset else None
    if fp and dataset.fingerprint() != fp:
        raise TrainingError(f"{rec.config_path}: the parent was trained on another dataset (its fingerprint differs)")
    try:
        meta = artifacts.load_state_checked(dpd, rec.best_checkpoint, rec.arch)
    except artifacts.CheckpointError as exc:
        raise TrainingError(str(exc)) from exc
    parent = {"parent_run": rec.run_id, "parent_checkpoint": str(rec.best_checkpoint),
              "parent_sha256": artifacts.file_sha256(rec.best_checkpoint), "parent_selected_epoch": meta.get("epoch")}
    if cfg.qat is None:
        return dpd, ("finetune", parent)
    spec = QuantSpec.from_dict(cfg.qat)
    try:
        graph = lower(dpd)
    except LoweringError as exc:
        raise TrainingError(f"qat: {exc}") from exc
    nps = int(dataset.spec.nperseg)
    segs = segment(dataset.train.x, nps)
    plan = calibrate(graph, segs, spec, f"float model of the parent run {rec.run_id} on the training split of "
                                        f"{dataset.name} ({segs.shape[0]} segments of {nps} samples, zero state each)")
    info = {**parent, "spec": spec.to_dict(), "label": spec.label, "plan": plan.to_dict(),
            "method": "fake quantisation with straight-through gradients, the integer reference's rounding and "
                      "saturation (dpd_desktop/quant/backends.py FakeBackend); weight formats follow the weights"}
    return FakeQuantModel(dpd, plan), ("qat", info)
