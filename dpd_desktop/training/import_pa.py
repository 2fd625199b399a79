"""A PA model trained elsewhere (its weights given) as a finished PA run of the workspace, so that DPD runs train
through it like any PA run (a benchmark PA such as OpenDPD 2.4.2 Arena's TRes-GRU, arena/prepare.py; a colleague's
checkpoint). The run record's writer writes the folder from trainer events; one "epoch" 0 records the weights'
validation and test metrics, evaluated as a PA run's epochs are. ``experiment.extra["imported"]`` says where the
weights came from (file, SHA-256, note).
"""
from __future__ import annotations

import time
from typing import Any, Mapping

import numpy as np
import torch

from ..config import ExperimentConfig
from ..models import build_model, count_parameters
from ..runs.record import DatasetRef
from ..runs.workspace import Workspace
from ..runs.writer import RunWriter
from .device import versions
from .evaluation import Evaluator
from ..runs.events import CheckpointReady, LogLine, RunFinished, RunPrepared, RunStarted
from .gain import target_gain
from .record_payload import model_cost_block

__all__ = ["import_pa_run"]


def import_pa_run(workspace: Workspace, dataset, dataset_path: str, state: Mapping[str, Any], *, backbone: str,
                  hidden_size: int, num_layers: int = 1, source: Mapping[str, Any] | None = None,
                  metric_profile: str) -> tuple[str, str]:
    """Write the PA run; returns ``(run_id, run_dir)``.

    Args:
        workspace: where the run goes. dataset: the loaded IQDataset the PA models; dataset_path: its path (the
            experiment's ``dataset``). state: the model's state_dict (our key names; arrays or tensors).
        backbone, hidden_size, num_layers: the architecture. source: what is recorded as ``extra["imported"]``.
    Raises:
        RuntimeError (from load_state_dict): the weights do not fit the architecture.
    """
    cfg = ExperimentConfig(step="pa", dataset=str(dataset_path), backbone=backbone, hidden_size=hidden_size,
                           num_layers=num_layers, epochs=1, device="cpu", metric_profile=metric_profile,
                           name="imported PA", extra={"imported": dict(source or {})}).validate()
    model = build_model(backbone, hidden_size, num_layers)
    model.load_state_dict({k: torch.as_tensor(np.asarray(v)) for k, v in state.items()}, strict=True)
    model.eval()
    fingerprint = dataset.fingerprint()
    targets = {"train": dataset.train.y, "val": dataset.val.y, "test": dataset.test.y}
    ev = Evaluator(dataset, targets, "pa", torch.nn.MSELoss(), 64, torch.device("cpu"), metric_profile=metric_profile)
    val, test = ev.evaluate("val", model), ev.evaluate("test", model)
    run_id, run_dir = workspace.new_run_dir(f"pa-imported-{cfg.size_label}")
    writer = RunWriter()
    t0 = time.time()
    n_params = count_parameters(model)
    clock = time.strftime("%H:%M:%S")
    writer(RunPrepared(run_id=run_id, run_dir=str(run_dir), step="pa", selection_metric="VAL_NMSE",
                       config=cfg.to_dict()))
    writer(LogLine(text=f"imported PA model (not trained here): {dict(source or {})}", level=20, clock=clock))
    setup = {"dataset": DatasetRef.from_dataset(dataset, fingerprint).to_dict(),
             "gain": target_gain(dataset, cfg.gain_rule).block(),
             "model": {"n_params": n_params, "n_params_total": n_params, "model_id": f"{cfg.model_id}_P_{n_params}",
                       **model_cost_block(cfg)},
             "pa": None, "selection_metric": "VAL_NMSE",
             "device": {"device": "cpu", "name": "cpu", "fast_path": "off: imported", "fast_path_optimizer": None,
                        "batched_loader": None, "cudnn": None, "kernel": None},
             "versions": versions(), "training": {"imported": True}}
    writer(RunStarted(run_id=run_id, run_dir=str(run_dir), step="pa", config=cfg.to_dict(), device="cpu",
                      device_name="cpu", fast_path="off: imported", batched_loader="", n_params=n_params,
                      n_train_frames=0, batches_per_epoch=0, epochs=1, dataset_summary=dataset.summary(),
                      n_params_model=n_params, setup=setup))
    row = {"EPOCH": 0, "N_EPOCH": 1, "TIME:": 0.0, "LR": 0.0, "BATCH_SIZE": cfg.batch_size, "N_PARAM": n_params,
           "FRAME_LENGTH": cfg.frame_length, "BACKBONE": backbone, "HIDDEN_SIZE": hidden_size,
           "TRAIN_LOSS": float("nan"), "VAL_LOSS": val["loss"],
           **{f"VAL_{k}": v for k, v in val["metrics"].items()}, "TEST_LOSS": test["loss"],
           **{f"TEST_{k}": v for k, v in test["metrics"].items()}}
    meta = {"format": "dpd-desktop-checkpoint-1", "role": "pa", "backbone": backbone, "hidden_size": hidden_size,
            "num_layers": num_layers, "epoch": 0, "selection_metric": "VAL_NMSE", "value": float(row["VAL_NMSE"]),
            "run_id": run_id, "n_params": n_params, "dataset_fingerprint": fingerprint,
            "gain": float(dataset.gain)}
    model_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    writer(CheckpointReady(epoch=0, row=row, is_best=True, model_state=model_state, optimizer_state={},
                           scheduler_state={}, meta=meta))
    writer(RunFinished(run_id=run_id, run_dir=str(run_dir), best_epoch=0,
                       val_metrics={k: float(v) for k, v in val["metrics"].items()},
                       test_metrics={k: float(v) for k, v in test["metrics"].items()}, wall_s=time.time() - t0,
                       best_value=float(row["VAL_NMSE"])))
    return run_id, str(run_dir)
