"""Direct learning of a trained DPD family from the loop's result, through the training core.

The last iteration's waveform u (what the PA needed to give the target g·x, found by ILC or ILA) and the reference x
make a dataset, x → u (both in units of the waveform's peak, split contiguously 60/20/20 %), written into the loop
folder (``datasets/dpd-fit``) by loop/dataset.py; a ``pa``-step run of the training core fits the chosen family to
x → u (MP/GMP by least squares, neural families by the epoch loop). Its selected checkpoint applied to x gives the
DPD waveform played by the loop's last iteration.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from ..config import ExperimentConfig
from ..data import IQDataset, Split
from ..data.spec import DatasetSpec
from ..runs import artifacts
from ..runs.record import RunRecord
from .dataset import write_dataset
from .measure import iq

__all__ = ["FitError", "fit_dpd"]


class FitError(RuntimeError):
    """The DPD fit did not produce a model (one line: the run and why)."""


def _dataset(x: np.ndarray, u: np.ndarray, signal, nperseg: int, folder: Path, name: str) -> IQDataset:
    n = x.size
    b = [0, int(0.6 * n), int(0.8 * n), n]
    xs, us = iq(x), iq(u)
    splits = {s: Split(xs[b[i]:b[i + 1]], us[b[i]:b[i + 1]]) for i, s in enumerate(("train", "val", "test"))}
    spec = DatasetSpec(sample_rate_hz=signal.sample_rate_hz, bw_main_hz=signal.bw_main_hz,
                       bw_sub_hz=signal.bw_main_hz / signal.n_sub_ch, n_sub_ch=signal.n_sub_ch, nperseg=int(nperseg),
                       split_ratios={"train": 0.6, "val": 0.2, "test": 0.2}, dataset_format="split_csv",
                       extra={"description": f"{name}: input x, output the loop's predistorted waveform u"})
    return IQDataset(name=name, source=folder, spec=spec, **splits)


def fit_dpd(workspace, folder: Path, x: np.ndarray, u: np.ndarray, signal, cfg, loop_id: str,
            on_trainer: Callable | None = None) -> tuple[np.ndarray, str, dict]:
    """(u_fit = DPD(x) in the units of x, the fit run's id, what was fitted). ``cfg`` is the LoopConfig; ``on_trainer``
    is called with the trainer before it runs (the loop's stop cancels it). Raises FitError."""
    from ..data import load_dataset
    from ..models import POLY_BACKBONES, build_from_arch
    from ..export.dpd_export import compute_dpd_output
    from ..training.ls_fit import make_trainer

    s = float(np.max(np.abs(x)))
    name = f"{loop_id} DPD fit"
    out = write_dataset(_dataset(x / s, u / s, signal, cfg.nperseg, folder, name), folder)
    ds = load_dataset(out)
    poly = cfg.fit in POLY_BACKBONES
    exp = ExperimentConfig(step="pa", dataset=str(out), backbone=cfg.fit, fit="ls" if poly else "gradient",
                           poly_order=cfg.fit_order, memory_depth=cfg.fit_memory, epochs=cfg.fit_epochs,
                           frame_length=min(200, int(0.6 * x.size) // 4), name=name, device="cpu",
                           metric_profile=cfg.metric_profile, hidden_size=15 if not poly else 23,
                           extra={"loop": {"id": loop_id, "iteration": "fit", "kind": f"fit-{cfg.fit}"}}).validate()
    trainer = make_trainer(exp, dataset=ds, workspace=workspace, observers=[])
    if on_trainer is not None:
        on_trainer(trainer)
    result = trainer.run()
    if result.state != "succeeded" or result.run_dir is None:
        raise FitError(f"the DPD fit ({cfg.fit}) ended {result.state}: {result.message or 'no model'}")
    rec = RunRecord.open(result.run_dir)
    model = build_from_arch(rec.arch)
    artifacts.load_state_checked(model, rec.best_checkpoint, rec.arch)
    uf = compute_dpd_output(model, iq(x / s), nperseg=int(cfg.nperseg))
    u_fit = (uf[:, 0].astype(np.float64) + 1j * uf[:, 1].astype(np.float64)) * s
    return u_fit, result.run_id, {"family": cfg.fit, "run_id": result.run_id, "dataset": str(out),
                                  "test_metrics": dict(result.test_metrics)}
