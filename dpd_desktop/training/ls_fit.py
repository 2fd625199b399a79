"""Least-squares fit of an MP/GMP model as a run: the same events, hence the same run folder, as the epoch loop.

:class:`LeastSquaresFit` is a :class:`~dpd_desktop.training.trainer.Trainer` whose epoch loop is one solve after the
trainer's set-up steps:

* PA modeling: Φ(x)·w ≈ y on the training split (the first ``max_train_samples`` when set);
* DPD by indirect learning (single pass): the postdistorter Φ(y/g)·w ≈ x on the *measured* training split (g: the
  run's target gain), copied to the predistorter; the frozen PA only evaluates PA(DPD(x)).

The solve: float64, column scaling, ``numpy.linalg.lstsq`` at ``config.rcond`` (models/poly.py
``fit_least_squares``); delays are zero before the first sample. With ``grid_k``/``grid_m`` every (K, M) is fitted
and the lowest validation NMSE kept. The model runs float32 coefficients; best.pt's meta keeps the float64 ones
(``coefficients_float64``, (P, 2) re/im) for export/coef_export.py. One history row (epoch 0), then the trainer's
end of run. Diagnostics: config.json and status.json ``fit``. No random number is drawn by the fit.
"""
from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from ..config import ConfigError, ExperimentConfig
from ..models import Cascade, build_model, count_parameters
from ..metrics.transfer import as_complex
from ..models.poly import basis, fit_least_squares
from .errors import Cancelled, TrainingError
from ..runs.events import CheckpointReady, EpochEnded
from .record_payload import checkpoint_meta, history_row
from .trainer import Trainer

__all__ = ["LeastSquaresFit", "make_trainer", "BASIS_BUDGET_BYTES"]

#: Largest basis matrix (complex128) one solve may hold; beyond it the run fails with advice.
BASIS_BUDGET_BYTES = 4 << 30


def make_trainer(config: ExperimentConfig, **kw):
    """A :class:`LeastSquaresFit` when ``config.fit == "ls"``, else a :class:`Trainer` (same arguments)."""
    return LeastSquaresFit(config, **kw) if config.fit == "ls" else Trainer(config, **kw)


class LeastSquaresFit(Trainer):
    """One MP/GMP least-squares fit as a run (module docstring); arguments as :class:`Trainer`."""

    def __init__(self, config: ExperimentConfig, *args, **kw):
        super().__init__(config, *args, **kw)
        self.fit_info: dict[str, Any] | None = None
        self._w64: np.ndarray | None = None  # the selected solve's float64 coefficients (best.pt's meta keeps them)

    # ------------------------------------------------------------------ set-up
    def _setup(self) -> None:
        if self.config.fit != "ls":
            raise ConfigError("fit", f"LeastSquaresFit needs fit = 'ls', got {self.config.fit!r}")
        super()._setup()
        self._fit(self.config)

    def _setup_optimizer(self, cfg: ExperimentConfig) -> None:
        self.optimizer = self.scheduler = None
        self.optimizer_impl = f"none: least squares (numpy.linalg.lstsq, float64, rcond {cfg.rcond:g})"

    def _setup_fast_path(self, cfg: ExperimentConfig) -> None:
        self.fast_step, self.fast_path_status = None, "off: least-squares fit (no training steps)"
        self.fast_path_optimizer = "none (least squares)"

    # ------------------------------------------------------------------ the fit
    def _fit_data(self, cfg: ExperimentConfig) -> tuple[np.ndarray, np.ndarray, str]:
        tr = self.dataset.train
        n = min(tr.x.shape[0], cfg.max_train_samples or tr.x.shape[0])
        # the float64 values as parsed when the reader kept them (like the gain, reference §1.4), else the float32
        x64, y64 = getattr(tr, "x64", None), getattr(tr, "y64", None)
        x = as_complex(x64[:n] if x64 is not None else tr.x[:n])
        y = as_complex(y64[:n] if y64 is not None else tr.y[:n])
        if cfg.step == "pa":
            return x, y, "direct least squares Φ(x)·w ≈ y on the training split"
        return y / self.gain, x, ("indirect learning (single pass): postdistorter Φ(y/g)·w ≈ x on the measured "
                                  "training split, copied to the predistorter; the frozen PA evaluates only")

    def _fit(self, cfg: ExperimentConfig) -> None:
        inp, target, method = self._fit_data(cfg)
        grid = [(k, m) for k in (cfg.grid_k or [cfg.poly_order]) for m in (cfg.grid_m or [cfg.memory_depth])]
        pa = self.net.pa if cfg.step == "dpd" else None
        table, best = [], None
        for k, m in grid:
            if self._stop.is_set():
                raise Cancelled()
            cfg.poly_order, cfg.memory_depth = k, m
            spec = cfg.poly_spec()
            need = inp.shape[0] * spec.n_coefficients * 16
            if need > BASIS_BUDGET_BYTES:
                raise TrainingError(f"the {cfg.backbone.upper()} basis (K={k}, M={m}, {spec.n_coefficients} "
                                    f"coefficients) over {inp.shape[0]} training samples needs {need / 2**30:.1f} GiB "
                                    f"(limit {BASIS_BUDGET_BYTES / 2**30:.0f} GiB): lower the orders or set "
                                    "max_train_samples")
            t0 = time.perf_counter()
            fit = fit_least_squares(basis(inp, spec), target, cfg.rcond)
            model = build_model(cfg.backbone, cfg.hidden_size, cfg.num_layers, poly=spec)
            model.backbone.set_coefficients(fit.coefficients)
            model.to(self.device)
            net = model if pa is None else Cascade(model, pa)
            val = self.evaluator.evaluate("val", net)
            row = {"K": k, "M": m, "n_coefficients": fit.n_coefficients, "rank": fit.rank,
                   "train_nmse_db": fit.train_nmse_db, "val_nmse_db": float(val["metrics"]["NMSE"]),
                   "seconds": time.perf_counter() - t0}
            table.append(row)
            self._log(f"least squares K={k} M={m}: rank {fit.rank} of {fit.n_coefficients}, train residual "
                      f"{fit.train_nmse_db:.3f} dB, val NMSE {row['val_nmse_db']:.3f} dB")
            value = row["val_nmse_db"]
            if best is None or (math.isfinite(value) and not value >= best[0]):
                best = (value, k, m, fit, model, net)
        _, k, m, fit, model, net = best
        cfg.poly_order, cfg.memory_depth = k, m
        if pa is not None:
            net.freeze_pa()
        self.model, self.net = model, net
        self._w64 = fit.coefficients
        self.n_params = count_parameters(net)
        self.n_params_model = count_parameters(model)
        self.fit_info = {"method": method, **fit.diagnostics(), "orders": cfg.poly_spec().to_dict(),
                         "grid": table if len(grid) > 1 else None}
        if fit.rank < fit.n_coefficients:
            self._log(f"WARNING: the basis is rank deficient: effective rank {fit.rank} of {fit.n_coefficients} "
                      f"(rcond {cfg.rcond:g}); the minimum-norm solution is used")
        if len(grid) > 1:
            self._log(f"grid search: selected K={k} M={m} (validation NMSE {best[0]:.3f} dB)")

    # ------------------------------------------------------------------ the one "epoch"
    def _epoch_loop(self) -> None:
        self._start_time = time.time()
        te = time.perf_counter()
        val = self.evaluator.evaluate("val", self.net)
        test = self.evaluator.evaluate("test", self.net)
        train_loss = self._train_loss()
        row = history_row(self, 0, 1, 0.0, train_loss, val, test)
        self.history.append(row)
        value = row[self.selection_metric]
        state = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
        self.best_value, self.best_epoch, self._best_state = value, 0, state
        meta = {**checkpoint_meta(self, 0, row),
                "coefficients_float64": [[float(c.real), float(c.imag)] for c in self._w64]}
        self.output.emit(CheckpointReady(epoch=0, row=row, is_best=True, model_state=state, optimizer_state={},
                                          scheduler_state={}, meta=meta))
        seconds = time.perf_counter() - te
        plots = self._plots("validation", val, "val", self.net)
        self.output.emit(EpochEnded(epoch=0, epochs=1, row=dict(row, EPOCH_SECONDS=seconds), is_best=True,
                                    best_epoch=0, best_value=float(value), selection_metric=self.selection_metric,
                                    epoch_seconds=seconds, plots=plots, fast_path=self.fast_path_status,
                                    fast_path_optimizer=self.fast_path_optimizer))

    def _train_loss(self) -> float:
        """The training loss of the fitted model on the fitted samples, in the criterion's terms (MSE or L1 over the
        I and Q columns), from the float64 residual of the solve."""
        cfg = self.config
        inp, target, _ = self._fit_data(cfg)
        resid = target - basis(inp, cfg.poly_spec()) @ self.model.backbone.coefficients()
        both = np.concatenate([resid.real, resid.imag])
        return float(np.mean(both ** 2) if cfg.loss == "l2" else np.mean(np.abs(both)))

    def _status_extra(self, extra: dict[str, Any]) -> dict[str, Any]:
        """The trainer's, with the fit's diagnostics (status.json ``fit``)."""
        return extra if self.fit_info is None else {**extra, "fit": _plain(self.fit_info)}


def _plain(info: dict[str, Any]) -> dict[str, Any]:
    """The diagnostics without the grid table (status.json stays small; config.json keeps the table)."""
    return {k: v for k, v in info.items() if k != "grid"}

