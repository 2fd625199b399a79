"""AdamW and ReduceLROnPlateau with PyTorch's exact arithmetic, without ``torch.optim``'s start-up cost.

Constructing any ``torch.optim.Optimizer`` imports ``torch._dynamo`` (``add_param_group`` and ``step`` are wrapped
by ``torch._disable_dynamo``), which costs 1.4 s on a 2-core CPU and about 4 s on the GPU machine before the first
batch can run (benchmarks/profile_cuda_init.py). The reference trains with ``torch.optim.AdamW`` (default
implementation choice: the multi-tensor "foreach" kernels on CUDA, the per-tensor loop on CPU) and
``ReduceLROnPlateau`` (reference §4.3–§4.4). These classes call the very same update functions of
``torch.optim.adam`` (``_multi_tensor_adam`` / ``_single_tensor_adam``, decoupled weight decay) with the same
arguments, so the parameters, optimizer state and learning rates are bitwise identical to ``torch.optim``'s
(tests/unit/test_optim.py checks this step by step). Where those functions are missing or their signature
differs (another torch release), :func:`make_adamw` falls back to ``torch.optim.AdamW`` itself.
"""
from __future__ import annotations

import inspect
import math
from typing import Any, Iterable


def _adam_functions():
    """Return (multi_tensor, single_tensor, default_to_foreach) from torch.optim, or None when unusable."""
    try:
        from torch.optim import adam as _adam
        from torch.optim.optimizer import _default_to_fused_or_foreach

        multi, single = _adam._multi_tensor_adam, _adam._single_tensor_adam
        for fn in (multi, single):
            if "decoupled_weight_decay" not in inspect.signature(fn).parameters:
                return None
        return multi, single, _default_to_fused_or_foreach
    except (ImportError, AttributeError, ValueError, TypeError):
        return None


class AdamW:
    """AdamW (Loshchilov & Hutter 2019) as computed by ``torch.optim.AdamW`` with its default implementation.

    Args:
        params: trainable parameters (float32 tensors), in the order the reference gives them (registration order).
        lr, betas, eps, weight_decay: as in ``torch.optim.AdamW`` (reference §4.3 defaults: 5e-3, (0.9, 0.999),
            1e-8, 0.01; weight decay on all parameters, one group).

    Exposes ``param_groups`` (one group; its ``"lr"`` is what the scheduler changes), ``state`` (per parameter:
    ``step`` (0-dim float32 CPU tensor), ``exp_avg``, ``exp_avg_sq``), ``step()``, ``zero_grad()``,
    ``state_dict()`` / ``load_state_dict()`` in ``torch.optim``'s format.
    """

    def __init__(self, params: Iterable, lr: float, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01):
        fns = _adam_functions()
        if fns is None:
            raise RuntimeError("torch.optim.adam's update functions are unavailable in this torch release")
        self._multi, self._single, self._default = fns
        self.params = list(params)
        if not self.params:
            raise ValueError("optimizer got an empty parameter list")
        self.param_groups = [{"params": self.params, "lr": lr, "betas": tuple(betas), "eps": eps,
                              "weight_decay": weight_decay, "amsgrad": False, "maximize": False, "foreach": None,
                              "capturable": False, "differentiable": False, "fused": None,
                              "decoupled_weight_decay": True}]
        self.state: dict[Any, dict[str, Any]] = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear gradients: set them to None, or zero them in place (keeping their storage)."""
        import torch

        grads = []
        for p in self.params:
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                if p.grad.grad_fn is not None:
                    p.grad.detach_()
                else:
                    p.grad.requires_grad_(False)
                grads.append(p.grad)
        if grads:
            torch._foreach_zero_(grads)

    def step(self) -> None:
        """One AdamW update of every parameter that has a gradient (exactly ``torch.optim.AdamW.step``)."""
        import torch

        g = self.param_groups[0]
        params, grads, exp_avgs, exp_avg_sqs, steps = [], [], [], [], []
        for p in g["params"]:
            if p.grad is None:
                continue
            params.append(p)
            grads.append(p.grad)
            st = self.state.get(p)
            if st is None:
                st = self.state[p] = {
                    "step": torch.tensor(0.0, dtype=torch.float64 if torch.get_default_dtype() == torch.float64
                                         else torch.float32),
                    "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                    "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format)}
            exp_avgs.append(st["exp_avg"])
            exp_avg_sqs.append(st["exp_avg_sq"])
            steps.append(st["step"])
        if not params:
            return
        _, foreach = self._default(params, False, use_fused=False)
        fn = self._multi if foreach else self._single
        beta1, beta2 = g["betas"]
        with torch.no_grad():
            fn(params, grads, exp_avgs, exp_avg_sqs, [], steps, None, None, amsgrad=False, has_complex=False,
               beta1=beta1, beta2=beta2, lr=g["lr"], weight_decay=g["weight_decay"], eps=g["eps"], maximize=False,
               capturable=False, differentiable=False, decoupled_weight_decay=True)

    def state_dict(self) -> dict[str, Any]:
        """``torch.optim``-format state: ``{"state": {index: {...}}, "param_groups": [{..., "params": [0..n-1]}]}``."""
        idx = {id(p): i for i, p in enumerate(self.params)}
        group = {k: v for k, v in self.param_groups[0].items() if k != "params"}
        group["params"] = list(range(len(self.params)))
        return {"state": {idx[id(p)]: dict(st) for p, st in self.state.items()}, "param_groups": [group]}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        """Restore from :meth:`state_dict` output (tensors moved to each parameter's device; ``step`` stays on CPU)."""
        g = sd["param_groups"][0]
        for k, v in g.items():
            if k != "params":
                self.param_groups[0][k] = tuple(v) if k == "betas" else v
        self.state = {}
        for i, st in sd["state"].items():
            p = self.params[int(i)]
            self.state[p] = {k: (v.clone() if k == "step" else v.to(p.device, copy=True)) for k, v in st.items()}


class ReduceLROnPlateau:
    """``torch.optim.lr_scheduler.ReduceLROnPlateau`` in mode "min" with a relative threshold (reference §4.4).

    A value is an improvement when ``value < best · (1 − threshold)`` (note the reference quirk §9.2: for negative
    dB metrics this accepts values slightly worse than the best). After more than ``patience`` epochs without
    improvement, every LR becomes ``max(lr · factor, min_lr)`` when that lowers it by more than ``eps``; then
    ``cooldown`` epochs ignore bad epochs. Same attributes as PyTorch's (``best``, ``num_bad_epochs``,
    ``cooldown_counter``, ``patience``, ``factor``, ``min_lrs``, ``eps``, ``optimizer``).
    """

    def __init__(self, optimizer, factor: float = 0.1, patience: int = 10, threshold: float = 1e-4,
                 min_lr: float = 0.0, eps: float = 1e-8, cooldown: int = 0):
        if factor >= 1.0:
            raise ValueError("factor should be < 1.0")
        self.optimizer = optimizer
        self.factor, self.patience, self.threshold, self.eps, self.cooldown = factor, patience, threshold, eps, cooldown
        self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.best = math.inf
        self.num_bad_epochs = 0
        self.cooldown_counter = 0
        self.last_epoch = 0

    def step(self, metric) -> None:
        current = float(metric)
        self.last_epoch += 1
        if current < self.best * (1.0 - self.threshold):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for i, group in enumerate(self.optimizer.param_groups):
                old = float(group["lr"])
                new = max(old * self.factor, self.min_lrs[i])
                if old - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0

    def state_dict(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if k != "optimizer"}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        vars(self).update(sd)


def make_adamw(params, lr: float, weight_decay: float):
    """Our :class:`AdamW` when torch's update functions are usable here, else ``torch.optim.AdamW``."""
    params = list(params)
    try:
        return AdamW(params, lr=lr, weight_decay=weight_decay)
    except RuntimeError:
        import torch

        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)


def make_plateau(optimizer, *, factor: float, patience: int, min_lr: float):
    """Plateau scheduler matching the optimizer kind (ours for :class:`AdamW`, PyTorch's otherwise)."""
    if isinstance(optimizer, AdamW):
        return ReduceLROnPlateau(optimizer, factor=factor, patience=patience, threshold=1e-4, min_lr=min_lr,
                                 eps=1e-8, cooldown=0)
    import torch

    return torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=factor, patience=patience,
                                                      threshold=1e-4, threshold_mode="rel", cooldown=0,
                                                      min_lr=min_lr, eps=1e-8)
