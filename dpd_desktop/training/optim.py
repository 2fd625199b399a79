"""AdamW and ReduceLROnPlateau with PyTorch's exact arithmetic, without ``torch.optim``'s start-up cost.

Constructing any ``torch.optim.Optimizer`` imports ``torch._dynamo``. These classes call the functions
``torch.optim.AdamW`` uses by default (``torch.optim.adam._multi_tensor_adam`` on CUDA, ``_single_tensor_adam`` on
CPU; reference §4.3–§4.4) with the same arguments, so parameters, state and learning rates are bitwise
``torch.optim``'s. Where those private functions are missing or changed, :func:`make_optimizer` falls back to
``torch.optim.AdamW`` and says so.
"""
from __future__ import annotations

import functools
import inspect
import math
from typing import Any, Iterable

import numpy as np

import torch  # constructing a torch.optim optimizer (not importing torch) is what imports torch._dynamo


#: the torch releases this module is tested on (pyproject's pin): the private functions may change in any release
TESTED_TORCH = (">=2.11", "<2.14")
#: config.json's ``training.optimizer`` for our AdamW (see :func:`make_optimizer`)
PRIVATE_IMPL = "torch-private-functions (torch.optim.adam._multi_tensor_adam / _single_tensor_adam)"


class PrivateApiChanged(RuntimeError):
    """torch.optim.adam's private update functions are missing or have another signature in this torch release."""


def _adam_functions():
    """Return (multi_tensor, single_tensor, default_to_foreach) from torch.optim.

    Raises:
        PrivateApiChanged: naming the missing function or parameter.
    """
    try:  # imported here on purpose: this import is the check (a torch release may not have them)
        from torch.optim import adam as _adam
        from torch.optim.optimizer import _default_to_fused_or_foreach

        multi, single = _adam._multi_tensor_adam, _adam._single_tensor_adam
    except (ImportError, AttributeError) as exc:
        raise PrivateApiChanged(f"torch.optim's private AdamW functions are unavailable ({exc})") from exc
    for fn in (multi, single):
        try:
            params = inspect.signature(fn).parameters
        except (ValueError, TypeError) as exc:
            raise PrivateApiChanged(f"torch.optim.adam.{fn.__name__}: no signature ({exc})") from exc
        if "decoupled_weight_decay" not in params:
            raise PrivateApiChanged(f"torch.optim.adam.{fn.__name__} has no parameter 'decoupled_weight_decay'")
    return multi, single, _default_to_fused_or_foreach


class AdamW:
    """AdamW (Loshchilov & Hutter 2019) as computed by ``torch.optim.AdamW`` with its default implementation.

    Args:
        params: trainable parameters (float32 tensors), in the order the reference gives them (registration order).
        lr, betas, eps, weight_decay: as in ``torch.optim.AdamW`` (reference §4.3 defaults: 5e-3, (0.9, 0.999),
            1e-8, 0.01; weight decay on all parameters, one group).

    ``param_groups`` (one), ``state`` (per parameter: ``step`` a 0-dim float32 CPU tensor, ``exp_avg``,
    ``exp_avg_sq``) and ``state_dict()`` are in ``torch.optim``'s format.
    """

    def __init__(self, params: Iterable, lr: float, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01):
        self._multi, self._single, self._default = _adam_functions()
        self.params = list(params)
        if not self.params:
            raise ValueError("optimizer got an empty parameter list")
        self.param_groups = [{"params": self.params, "lr": lr, "betas": tuple(betas), "eps": eps,
                              "weight_decay": weight_decay, "amsgrad": False, "maximize": False, "foreach": None,
                              "capturable": False, "differentiable": False, "fused": None,
                              "decoupled_weight_decay": True}]
        self.state: dict[Any, dict[str, Any]] = {}
        # Updates applied by a CUDA graph (GraphAdamW) and not yet counted in the per-parameter ``step`` tensors
        self.graph_steps_pending = 0

    def ensure_state(self) -> None:
        """Create the per-parameter state (``step`` 0, zero moments) where it does not exist yet, as the first
        :meth:`step` would (needed before a CUDA graph that updates the state in place is captured)."""
        for p in self.params:
            if p not in self.state:
                self.state[p] = self._new_state(p)

    @staticmethod
    def _new_state(p) -> dict[str, Any]:
        """torch.optim.AdamW's initial state of one parameter: step 0 (CPU scalar), zero moments."""
        return {"step": torch.tensor(0.0, dtype=torch.float64 if torch.get_default_dtype() == torch.float64
                                     else torch.float32),
                "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format)}

    def sync_steps(self) -> None:
        """Add the updates done inside a CUDA graph to every ``step`` counter (exact: integers in float32)."""
        n, self.graph_steps_pending = self.graph_steps_pending, 0
        if n:
            for st in self.state.values():
                st["step"].add_(float(n))

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear gradients: set them to None, or zero them in place (keeping their storage)."""
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
        self.sync_steps()
        g = self.param_groups[0]
        params, grads, exp_avgs, exp_avg_sqs, steps = [], [], [], [], []
        for p in g["params"]:
            if p.grad is None:
                continue
            params.append(p)
            grads.append(p.grad)
            st = self.state.get(p)
            if st is None:
                st = self.state[p] = self._new_state(p)
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
        self.sync_steps()
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
        self.graph_steps_pending = 0
        for i, st in sd["state"].items():
            p = self.params[int(i)]
            self.state[p] = {k: (v.clone() if k == "step" else v.to(p.device, copy=True)) for k, v in st.items()}


#: GraphAdamW.self_check's answers in this process (its key → None or the reason)
_SELF_CHECKS: dict[tuple, str | None] = {}


@functools.lru_cache(maxsize=16)
def _bias_corrections(beta1: float, beta2: float, first_step: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(1 − β1^t, sqrt(1 − β2^t)) for t = first_step … first_step + n − 1 as :meth:`GraphAdamW.scalars` computes
    them (Python floats, then float64 arrays; read-only). Cached: the members of a group share their steps."""
    pairs = [_bias_correction(float(t), beta1, beta2) for t in range(first_step, first_step + n)]
    bc1 = np.array([p[0] for p in pairs], dtype=np.float64)
    bc2 = np.array([p[1] for p in pairs], dtype=np.float64)
    bc1.flags.writeable = bc2.flags.writeable = False
    return bc1, bc2


def _bias_correction(t: float, beta1: float, beta2: float) -> tuple[float, float]:
    """(1 − β1^t, sqrt(1 − β2^t)) in float64, torch.optim.adam's expressions."""
    return 1 - beta1 ** t, (1 - beta2 ** t) ** 0.5


class GraphAdamW:
    """The update of :class:`AdamW` (CUDA, foreach implementation) as device-side ops that a CUDA graph can capture.

    The eager path passes the step-dependent numbers (``1 − lr·wd``, ``sqrt(1 − β2^t)``, ``−lr / (1 − β1^t)``, float64
    on the host) as kernel arguments, which a graph would freeze. Here they are computed with the same expressions,
    rounded to float32 as the kernels round them, and read by the captured ops from a per-step device table. Tensor-
    scalar ``_foreach_mul_``/``_foreach_div_`` round as the scalar kernels do; ``addcdiv(p, m, d, s)`` = ``fma(s, m/d,
    p)`` is computed as ``addcmul(p, m/d, s·1)`` = ``fma(m/d, s, p)``. :meth:`self_check` verifies bitwise equality
    once per torch build (else the optimizer stays eager); ``step`` counters advance lazily (:meth:`AdamW.sync_steps`).

    Args:
        opt: our :class:`AdamW` (one group, amsgrad/maximize off, CUDA float32 parameters).
        max_steps: rows of the table (full batches per epoch).
    """

    def __init__(self, opt: "AdamW", max_steps: int):
        opt.ensure_state()
        self.opt = opt
        g = opt.param_groups[0]
        self.beta1, self.beta2 = g["betas"]
        self.eps, self.weight_decay = g["eps"], g["weight_decay"]
        self.params = list(opt.params)
        self.device = self.params[0].device
        self.exp_avgs = [opt.state[p]["exp_avg"] for p in self.params]
        self.exp_avg_sqs = [opt.state[p]["exp_avg_sq"] for p in self.params]
        self.ones = [torch.ones_like(p) for p in self.params]
        self.max_steps = max_steps
        self.table = torch.zeros(max_steps, 3, dtype=torch.float32, device=self.device)

    @staticmethod
    def eligibility(opt) -> str | None:
        """None when :class:`GraphAdamW` can stand in for ``opt.step()``, else the reason (plain words)."""
        if not isinstance(opt, AdamW):
            return f"optimizer {type(opt).__name__} (only our AdamW is captured)"
        g = opt.param_groups[0]
        if len(opt.param_groups) != 1 or g["amsgrad"] or g["maximize"]:
            return "AdamW options outside the captured update (amsgrad, maximize, several groups)"
        devs = {(p.device, p.dtype) for p in opt.params}
        if len(devs) != 1 or next(iter(devs))[1] != torch.float32 or next(iter(devs))[0].type != "cuda":
            return "parameters are not float32 tensors on one CUDA device"
        _, foreach = opt._default(opt.params, False, use_fused=False)
        if not foreach:
            return "torch would not use the foreach AdamW here"
        return None

    @staticmethod
    def scalars(t: float, lr: float, beta1: float, beta2: float, weight_decay: float) -> tuple[float, float, float]:
        """(1 − lr·wd, sqrt(1 − β2^t), −lr/(1 − β1^t)) with torch.optim.adam's float64 expressions (t = step)."""
        bias_correction1, bias_correction2_sqrt = _bias_correction(t, beta1, beta2)
        return (1 - lr * weight_decay, bias_correction2_sqrt, (lr / bias_correction1) * -1)

    def load(self, first_step: int, n: int, lr: float) -> None:
        """Fill rows 0..n-1 with :meth:`scalars` of steps ``first_step`` … ``first_step + n − 1`` at rate lr
        (elementwise float64, IEEE-equal to the scalar expressions), rounded to float32."""
        if n > self.max_steps:
            raise ValueError(f"{n} steps > table size {self.max_steps}")
        if n <= 0:
            return
        bc1, bc2_sqrt = _bias_corrections(self.beta1, self.beta2, first_step, n)
        rows = np.empty((n, 3), dtype=np.float64)
        rows[:, 0] = 1 - lr * self.weight_decay
        rows[:, 1] = bc2_sqrt
        rows[:, 2] = (lr / bc1) * -1
        self.table[:n].copy_(torch.from_numpy(rows.astype(np.float32)), non_blocking=False)

    def update(self, row) -> None:
        """The AdamW update of every parameter from its ``.grad`` with the scalars of ``table[row]`` (``row``: (1,)
        int64 CUDA tensor). Capturable: no host values depend on the step."""
        sc = self.table.index_select(0, row)[0]
        self._update(self.params, [p.grad for p in self.params], self.exp_avgs, self.exp_avg_sqs, self.ones,
                     sc[0], sc[1], sc[2])

    def _update(self, params, grads, exp_avgs, exp_avg_sqs, ones, wd, bc2_sqrt, step_size) -> None:
        with torch.no_grad():
            if self.weight_decay != 0:
                torch._foreach_mul_(params, wd)
            torch._foreach_lerp_(exp_avgs, grads, 1 - self.beta1)
            torch._foreach_mul_(exp_avg_sqs, self.beta2)
            torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - self.beta2)
            denom = torch._foreach_sqrt(exp_avg_sqs)
            torch._foreach_div_(denom, bc2_sqrt)
            torch._foreach_add_(denom, self.eps)
            ratio = torch._foreach_div(exp_avgs, denom)
            torch._foreach_addcmul_(params, ratio, torch._foreach_mul(ones, step_size))

    def self_check(self, lr: float, steps: int = 3) -> str | None:
        """Run torch's foreach AdamW and :meth:`_update` side by side on scratch tensors (values where a missing
        fused multiply-add would show); None when bitwise equal for ``steps`` steps, else the reason. Loads the
        capture's kernels too; the answer is kept per process for equal shapes, device and hyperparameters."""
        key = (str(self.device), tuple(tuple(p.shape) for p in self.params), lr, self.beta1, self.beta2, self.eps,
               self.weight_decay, steps)
        if key in _SELF_CHECKS:
            return _SELF_CHECKS[key]
        answer = self._self_check(lr, steps)
        if answer is None or "differs" in answer:  # not an error of the moment (out of memory): that one is asked again
            _SELF_CHECKS[key] = answer
        return answer

    def _self_check(self, lr: float, steps: int) -> str | None:
        try:
            gen = torch.Generator(device=self.device).manual_seed(1234)
            shapes = [tuple(p.shape) for p in self.params] + [(65536,)]

            def rand(shape, scale):
                return (torch.rand(shape, device=self.device, generator=gen) - 0.5) * scale

            pa = [rand(s, 0.02) for s in shapes]
            pb = [p.clone() for p in pa]
            ma, va = [torch.zeros_like(p) for p in pa], [torch.zeros_like(p) for p in pa]
            mb, vb = [torch.zeros_like(p) for p in pa], [torch.zeros_like(p) for p in pa]
            ones = [torch.ones_like(p) for p in pa]
            st = [torch.tensor(0.0) for _ in pa]
            for t in range(1, steps + 1):
                grads = [rand(s, 10.0 ** -t) for s in shapes]
                self.opt._multi(pa, grads, ma, va, [], st, None, None, amsgrad=False, has_complex=False,
                                beta1=self.beta1, beta2=self.beta2, lr=lr, weight_decay=self.weight_decay,
                                eps=self.eps, maximize=False, capturable=False, differentiable=False,
                                decoupled_weight_decay=True)
                sc = torch.tensor(self.scalars(float(t), lr, self.beta1, self.beta2, self.weight_decay),
                                  dtype=torch.float32, device=self.device)
                self._update(pb, grads, mb, vb, ones, sc[0], sc[1], sc[2])
                if not all(torch.equal(a, b) for a, b in zip(pa + ma + va, pb + mb + vb)):
                    n = sum(int((a != b).sum()) for a, b in zip(pa, pb))
                    return f"the captured AdamW update differs from torch's in {n} elements at step {t}"
            torch.cuda.synchronize(self.device)
        except (RuntimeError, TypeError, AttributeError) as exc:
            return f"captured AdamW update unavailable ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
        return None


class ReduceLROnPlateau:
    """``torch.optim.lr_scheduler.ReduceLROnPlateau`` in mode "min" (reference §4.4).

    An improvement: ``value < best · (1 − threshold)`` ("rel", the reference's; quirk §9.2: for negative dB metrics
    it accepts values slightly worse than the best) or ``value < best − threshold`` ("abs"; OpenDPD 2.4.2's Arena:
    0.01 dB). After more than ``patience`` bad epochs each LR becomes ``max(lr · factor, min_lr)`` if that lowers it
    by more than ``eps``; then ``cooldown`` epochs ignore bad ones. PyTorch's attribute names.
    """

    def __init__(self, optimizer, factor: float = 0.1, patience: int = 10, threshold: float = 1e-4,
                 min_lr: float = 0.0, eps: float = 1e-8, cooldown: int = 0, threshold_mode: str = "rel"):
        if factor >= 1.0:
            raise ValueError("factor should be < 1.0")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"threshold_mode: expected 'rel' or 'abs', got {threshold_mode!r}")
        self.optimizer = optimizer
        self.factor, self.patience, self.threshold, self.eps, self.cooldown = factor, patience, threshold, eps, cooldown
        self.threshold_mode = threshold_mode
        self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.best = math.inf
        self.num_bad_epochs = 0
        self.cooldown_counter = 0
        self.last_epoch = 0

    def step(self, metric) -> None:
        current = float(metric)
        self.last_epoch += 1
        if (current < self.best * (1.0 - self.threshold) if self.threshold_mode == "rel"
                else current < self.best - self.threshold):
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


def make_optimizer(params, lr: float, weight_decay: float):
    """``(optimizer, implementation)``: our :class:`AdamW` (:data:`PRIVATE_IMPL`) where torch's private functions
    are usable, else ``torch.optim.AdamW`` (``"torch.optim fallback: <why>"``; config.json ``training.optimizer``)."""
    params = list(params)
    try:
        return AdamW(params, lr=lr, weight_decay=weight_decay), PRIVATE_IMPL
    except PrivateApiChanged as exc:
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay), f"torch.optim fallback: {exc}"


def make_adamw(params, lr: float, weight_decay: float):
    """The optimizer of :func:`make_optimizer`, without its implementation note."""
    return make_optimizer(params, lr, weight_decay)[0]


def make_plateau(optimizer, *, factor: float, patience: int, min_lr: float, threshold: float = 1e-4,
                 threshold_mode: str = "rel"):
    """Plateau scheduler matching the optimizer kind (ours for :class:`AdamW`, PyTorch's otherwise)."""
    if isinstance(optimizer, AdamW):
        return ReduceLROnPlateau(optimizer, factor=factor, patience=patience, threshold=threshold, min_lr=min_lr,
                                 eps=1e-8, cooldown=0, threshold_mode=threshold_mode)
    return torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=factor, patience=patience,
                                                      threshold=threshold, threshold_mode=threshold_mode, cooldown=0,
                                                      min_lr=min_lr, eps=1e-8)
