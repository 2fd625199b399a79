"""What the trainer tells the run record besides the events' own fields: config.json's blocks, the checkpoints'
metadata and results.h5's root attributes (runs/record.py writes them). ``tr`` is the set-up
:class:`~dpd_desktop.training.trainer.Trainer`."""
from __future__ import annotations

import json
import time
from typing import Any

import torch

from ..models.cost import model_cost
from ..runs.artifacts import delta_fields
from ..runs.record import HISTORY_METRICS, DatasetRef
from .device import cudnn_settings, versions


def setup_blocks(tr) -> dict[str, Any]:
    """config.json's blocks besides the experiment (RunStarted.setup), in the order of the file."""
    cfg = tr.config
    return {
        "dataset": DatasetRef.from_dataset(tr.dataset, tr.fingerprint).to_dict(),
        "gain": tr.gain_info.block(),  # value, rule, formula, every rule's candidate (training/gain.py)
        "model": {"n_params": tr.n_params_model, "n_params_total": tr.n_params,
                  "model_id": f"{cfg.model_id}_P_{tr.n_params_model}", **model_cost_block(cfg)},
        "pa": tr.pa_info,
        "selection_metric": tr.selection_metric,
        "device": {"device": str(tr.device), "name": tr.device_name,
                   "fast_path": tr.fast_path_status, "fast_path_optimizer": tr.fast_path_optimizer,
                   "batched_loader": tr.loader_status, "cudnn": cudnn_settings(tr.cudnn_note),
                   # the kernel setting, what ran each recurrent module, why any fell back (kernels/record.py)
                   "kernel": tr.kernels.block()},
        "versions": versions(),
        "training": {"n_frames": tr.loader.n_frames, "batches_per_epoch": tr.loader.n_batches,
                     "torch_threads": torch.get_num_threads(), "optimizer": tr.optimizer_impl},
        **({"fit": tr.fit_info} if getattr(tr, "fit_info", None) is not None else {}),
        # the target's crest-factor reduction: limit, peak, band, its cost per split (training/cfr.py)
        **({"target_cfr": tr.cfr.block()} if getattr(tr, "cfr", None) is not None else {}),
        **(dict([tr.finetune_block]) if getattr(tr, "finetune_block", None) is not None else {}),
    }


def model_cost_block(cfg) -> dict[str, Any]:
    """config.json ``model`` fields of the trained model's cost (models/cost.py convention): ``params``,
    ``macs_per_sample`` (real MACs per sample, forward) and their parts; for a DPD, the DPD alone."""
    cost = model_cost(cfg.backbone, cfg.hidden_size, cfg.num_layers, poly=cfg.poly_spec())
    return {"params": cost.params, "macs_per_sample": cost.macs_per_sample,
            "cost": {**cost.to_dict(), "convention": "real MACs per sample, forward; complex MAC = 4 real MACs; "
                                                     "activations counted separately (dpd_desktop/models/cost.py)"}}


def checkpoint_meta(tr, epoch: int, row: dict[str, Any]) -> dict[str, Any]:
    """best.pt's and last.pt's plain metadata (loads with weights_only=True); the architecture fields are kept here
    too, because a checkpoint is checked against its record's config.json when it is loaded."""
    cfg = tr.config
    return {"format": "dpd-desktop-checkpoint-1", "role": cfg.step, "backbone": cfg.backbone,
            "hidden_size": cfg.hidden_size, "num_layers": cfg.num_layers, "epoch": epoch,
            "selection_metric": tr.selection_metric, "value": float(row[tr.selection_metric]),
            "run_id": tr.run_id, "n_params": tr.n_params_model,
            "dataset_fingerprint": tr.fingerprint, "gain": tr.gain,
            **({"poly": cfg.poly_spec().to_dict()} if cfg.poly_spec() is not None else {}),
            **delta_fields(cfg)}


def results_attrs(tr, extra: dict[str, Any]) -> dict[str, Any]:
    """results.h5's root attributes: the run, its configuration and spec (self-describing), the DPD report."""
    attrs: dict[str, Any] = {"run_id": tr.run_id, "config_json": json.dumps(tr.config.to_dict()),
                             "selected_epoch": int(tr.best_epoch), "selection_metric": tr.selection_metric,
                             "gain": tr.gain}
    for k, v in DatasetRef.from_dataset(tr.dataset, tr.fingerprint).spec.items():
        if v is not None and not isinstance(v, dict):
            attrs[f"spec_{k}"] = v
    attrs.update(extra)
    return attrs


def history_row(tr, epoch: int, n_epochs: int, lr: float, train_loss: float, val: dict, test: dict) -> dict:
    """One history.csv row of trainer ``tr`` (reference §4.8 columns, runs/record.py HISTORY_COLUMNS); TIME: in
    minutes since the run's start."""
    cfg = tr.config
    row = {"EPOCH": epoch, "N_EPOCH": n_epochs, "TIME:": (time.time() - tr._start_time) / 60.0, "LR": lr,
           "BATCH_SIZE": cfg.batch_size, "N_PARAM": tr.n_params, "FRAME_LENGTH": cfg.frame_length,
           "BACKBONE": cfg.backbone, "HIDDEN_SIZE": cfg.hidden_size, "TRAIN_LOSS": train_loss,
           "VAL_LOSS": val["loss"]}
    row.update({f"VAL_{k}": val["metrics"][k] for k in HISTORY_METRICS})
    row["TEST_LOSS"] = test["loss"]
    row.update({f"TEST_{k}": test["metrics"][k] for k in HISTORY_METRICS})
    if cfg.selection == "power-gated" or cfg.evaluation == "overlap":
        # the power-gated selection's columns (training/evaluation.py): output power error [dB], the objective
        # 0.5·(EVM + worse-side ACLR) [dB], and the selection value: the objective, +1000 dB when the validation
        # output power is outside ±power_gate_db (every feasible epoch ranks before every infeasible one)
        for split, ev in (("VAL", val), ("TEST", test)):
            row[f"{split}_POWER_DB"] = ev["extra"]["POWER_DB"]
            row[f"{split}_OBJECTIVE"] = ev["extra"]["OBJECTIVE"]
        power = row["VAL_POWER_DB"]
        row["VAL_SELECTION"] = row["VAL_OBJECTIVE"] + (0.0 if abs(power) <= cfg.power_gate_db else INFEASIBLE_DB)
    return row


#: what an output power outside the gate adds to the power-gated selection value [dB]
INFEASIBLE_DB = 1000.0
