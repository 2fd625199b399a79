"""The CUDA overlap of an epoch's end with the next epoch's training.

Whenever the learning rate cannot change at an epoch boundary (:func:`lr_may_change`), the trainer snapshots the
weights and the optimizer state on the training stream and a worker thread evaluates the snapshot on its own CUDA
stream while the next epoch trains: the same kernels on the same weights, the RNG draws on the training thread.
"""
from __future__ import annotations

import copy
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

import torch


class EpochEndOverlap:
    """One worker thread for epoch ends and the snapshot it evaluates (the shadow network is made once)."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future | None = None
        self._shadow = None
        self.eval_stream = None  # the worker's CUDA stream (made with the shadow)

    def submit(self, fn: Callable, *args) -> None:
        """Run ``fn(*args)`` on the worker (the previous one must have been drained)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dpd-epoch-end")
        self._pending = self._pool.submit(fn, *args)

    def drain(self) -> None:
        """Wait for the pending epoch end (re-raising its error, if any)."""
        fut, self._pending = self._pending, None
        if fut is not None:
            fut.result()

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def snapshot(self, net, optimizer, device) -> dict[str, Any]:
        """Copy weights and optimizer state on the training stream; returns what the epoch-end worker needs:
        ``net`` (the shadow), ``event`` (recorded after the copies), ``opt_state``, ``opt_groups``."""
        if self._shadow is None:
            self._shadow = frozen_copy(net)
            # high priority: its kernels are scheduled ahead of the training graph's waiting ones (a group's eight
            # epoch ends would otherwise wait behind the queued chunks)
            self.eval_stream = torch.cuda.Stream(device, priority=-1)
        with torch.no_grad():
            for ps, pl in zip(self._shadow.parameters(), net.parameters()):
                ps.copy_(pl)
            opt_state = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in _opt_state_tensors(optimizer)}
        ready = torch.cuda.Event()
        ready.record()
        return {"net": self._shadow, "event": ready, "opt_state": opt_state,
                "opt_groups": copy.deepcopy(optimizer.state_dict()["param_groups"])}


def frozen_copy(net):
    """A deep copy of ``net``, gradients off, its cuDNN RNN weights repacked once (``flatten_parameters``)."""
    shadow = copy.deepcopy(net)
    for p in shadow.parameters():
        p.requires_grad_(False)
    for m in shadow.modules():
        if isinstance(m, torch.nn.RNNBase):
            m.flatten_parameters()
    return shadow


def optimizer_state(optimizer, trainable, snap: dict[str, Any] | None) -> dict[str, Any]:
    """The optimizer's state dict (torch.optim format) as of an epoch's end: from the snapshot when the worker
    runs the epoch end (tensors copied to the CPU), else the live optimizer's."""
    if snap is None:
        return optimizer.state_dict()
    ids = {id(p): i for i, p in enumerate(trainable)}
    state: dict[int, dict[str, Any]] = {}
    for (pid, key), v in snap["opt_state"].items():
        state.setdefault(ids[pid], {})[key] = v.detach().cpu() if hasattr(v, "detach") else v
    return {"state": state, "param_groups": snap["opt_groups"]}


def lr_may_change(sched) -> bool:
    """Whether the next ``ReduceLROnPlateau.step`` could lower any learning rate, whatever the metric.

    It cannot while in cooldown, while one more bad epoch would not exceed the patience, or when every LR is
    already within ``eps`` of its minimum (PyTorch's ReduceLROnPlateau rules). A schedule with its own
    ``lr_may_change()`` (training/schedules.py) answers for itself.
    """
    own = getattr(sched, "lr_may_change", None)
    if callable(own):
        return bool(own())
    if getattr(sched, "cooldown_counter", 0) > 0:
        return False
    if sched.num_bad_epochs + 1 <= sched.patience:
        return False
    for group, min_lr in zip(sched.optimizer.param_groups, sched.min_lrs):
        old = float(group["lr"])
        if old - max(old * sched.factor, min_lr) > sched.eps:
            return True
    return False


def _opt_state_tensors(optimizer):
    """(param id, key) → value pairs of the optimizer state (for a device-side snapshot)."""
    for p, st in optimizer.state.items():
        for k, v in st.items():
            yield (id(p), k), v
