"""CUDA fast path: one training step captured as a CUDA graph and replayed for every full-size batch.

Captured (after PyTorch's CUDA Graphs notes and the reference's §7.1): in-place gradient zeroing; the batch gather
from the device-resident series (batch ``counter`` of the epoch's permutation; the graph advances ``counter``); the
forward of the whole network; the loss (into the epoch's loss slot); the backward; clipping; and the AdamW update
(optim.GraphAdamW). Bitwise equal to the eager path (tests/gpu/test_fast_path_equivalence.py), except a 1-layer GRU
PA, or a 1-layer GRU DPD through a 1-layer GRU PA, on the ``fast`` kernel, which captures the fused step
(training/fused_step.py; equal to float32 rounding). Per full batch the host only launches the graph.

Fallbacks, each a status "off: <reason>" recorded in config.json: not CUDA, ``fast_path=False``, deterministic
algorithms, an unsupported model or loss, dropout, hooks, non-float32 parameters, autocast, a failed capture (the
run goes on eagerly). The optimizer alone stays eager when its captured update is not bitwise torch's here
(``fast_path_optimizer``). A short last batch runs eagerly, gradients zeroed in place (the buffers stay valid).
"""
from __future__ import annotations

import logging

import torch

from .. import timing
from ..models import Cascade, CoreModel
from . import eager_warmup, fused_step
from .losses import base_criterion
from .optim import GraphAdamW

log = logging.getLogger("dpd_desktop.fast_path")

WARMUP_ITERS = 2


def eligibility(net, criterion, optimizer, trainable, device) -> str | None:
    """Return None when the fast path may be used, else the reason it may not (plain words)."""
    if device.type != "cuda":
        return f"{device.type.upper()} device (CUDA graphs need a CUDA GPU)"
    if torch.are_deterministic_algorithms_enabled():
        return "deterministic mode is on"
    if type(net) is CoreModel:
        pass
    elif type(net) is Cascade and type(net.dpd) is CoreModel and type(net.pa) is CoreModel:
        if any(p.requires_grad for p in net.pa.parameters()):
            return "the PA of the cascade is not frozen"
    else:
        return f"unsupported model type {type(net).__name__}"
    base = base_criterion(criterion)  # a window/power term: plain tensor ops
    if type(base) not in (torch.nn.MSELoss, torch.nn.L1Loss) or base.reduction != "mean":
        return f"unsupported loss {type(criterion).__name__}"
    if not trainable:
        return "no trainable parameters"
    opt_params = [p for g in optimizer.param_groups for p in g["params"]]
    if len(opt_params) != len(trainable) or any(a is not b for a, b in zip(opt_params, trainable)):
        return "the optimizer's parameters differ from the model's trainable parameters"
    for p in net.parameters():
        if p.dtype != torch.float32:
            return f"non-float32 parameter ({p.dtype})"
        if p.device != device:
            return f"a parameter is on {p.device}, not {device}"
    for m in net.modules():
        if isinstance(m, torch.nn.Dropout) and m.p > 0:
            return "dropout is active"
        if isinstance(m, torch.nn.RNNBase) and m.dropout > 0:
            return "recurrent dropout is active"
        if (m._forward_hooks or m._forward_pre_hooks or m._backward_hooks
                or getattr(m, "_backward_pre_hooks", None)):
            return f"a hook is registered on {type(m).__name__}"
    if torch.is_autocast_enabled("cuda") if hasattr(torch, "is_autocast_enabled") else False:
        return "autocast is active"
    return None


class CudaGraphStep:
    """Replays one captured training step for every full-size batch of an epoch.

    :meth:`begin_epoch` with the loader's plan, then ``step(b, batch)`` for the full batches in order: True when a
    replay trained it (loss in :attr:`epoch_losses` [b]; the optimizer too when :attr:`optimizer_in_graph`), False
    when the caller must train it eagerly. :meth:`end_epoch` brings the optimizer's step counters up to date.

    ``batch``: (B,) int64 CUDA frame indices (index mode, the device-resident FrameLoader: the graph gathers the
    batch itself) or the plain loader's ``(x, y)`` CPU batch (copied into static buffers before each replay).
    ``fused``: False keeps the autograd step where the fused GRU step could run.
    """

    def __init__(self, net, criterion, trainable, clip, device, loader, batch_size, optimizer=None, fused=True):
        self.net, self.criterion, self.trainable = net, criterion, list(trainable)
        self.clip, self.device, self.loader, self.batch_size = clip, device, loader, batch_size
        self.optimizer = optimizer
        self.graph = None
        self.failed_reason: str | None = None
        self.index_mode = hasattr(loader, "x")
        n_batches = len(loader)
        self.n_full_max = n_batches
        # static buffers: permutation (index mode), batch (copy mode), batch counter, one loss slot per batch
        self.perm = torch.zeros(max(loader.n_frames, 1), dtype=torch.int64, device=device) if self.index_mode else None
        self.batch_offsets = torch.arange(batch_size, dtype=torch.int64, device=device)
        L = getattr(loader, "frame_length")
        self.static_x = None if self.index_mode else torch.zeros(batch_size, L, 2, device=device)
        self.static_y = None if self.index_mode else torch.zeros(batch_size, L, 2, device=device)
        self.counter = torch.zeros(1, dtype=torch.int64, device=device)
        self.epoch_losses = torch.zeros(max(n_batches, 1), dtype=torch.float32, device=device)
        self.graph_opt = None
        self.optimizer_note = "eager (no optimizer given)" if optimizer is None else "not set up yet"
        self._next = 0
        self._epoch_first_step = 0
        self._ptrs = None
        self.captures = 0
        # the fused GRU step (training/fused_step.py) when this step can use it, decided at the first capture
        self.fused: fused_step.FusedGRUStep | None = None
        self.fused_allowed = fused
        self.fused_reason: str | None = None

    @property
    def status(self) -> str:
        return "on" if self.failed_reason is None else f"off: {self.failed_reason}"

    @property
    def optimizer_in_graph(self) -> bool:
        return self.graph_opt is not None

    # ------------------------------------------------------------------ epoch bookkeeping
    def begin_epoch(self, plan) -> None:
        """Start an epoch: copy its permutation into the static buffer (index mode), reset the batch counter and
        load the optimizer's per-step numbers for this epoch's learning rate."""
        if self.failed_reason is not None:
            return
        if self.index_mode:
            perm = self.loader.last_perm
            self.perm[:perm.shape[0]].copy_(perm)
        self.counter.zero_()
        self._next = 0
        if self.optimizer is not None:
            self._sync_steps()
            self._epoch_first_step = self._optimizer_step_count() + 1
            if self.graph_opt is not None:
                self._load_table()

    def end_epoch(self) -> None:
        """Count the epoch's replayed updates in the optimizer's ``step`` tensors."""
        self._sync_steps()

    def _sync_steps(self) -> None:
        if self.optimizer is not None and hasattr(self.optimizer, "sync_steps"):
            self.optimizer.sync_steps()

    def _optimizer_step_count(self) -> int:
        st = getattr(self.optimizer, "state", {})
        for v in st.values():
            return int(v["step"].item())
        return 0

    def _load_table(self) -> None:
        lr = self.optimizer.param_groups[0]["lr"]
        self.graph_opt.load(self._epoch_first_step, self.n_full_max, lr)

    def _setup_optimizer(self) -> None:
        """Decide once whether the optimizer update goes into the graph (see optim.GraphAdamW)."""
        if self.optimizer is None or self.graph_opt is not None or self.optimizer_note != "not set up yet":
            return
        reason = GraphAdamW.eligibility(self.optimizer)
        if reason is None:
            gopt = GraphAdamW(self.optimizer, self.n_full_max)
            reason = gopt.self_check(self.optimizer.param_groups[0]["lr"])
            if reason is None:
                self.graph_opt = gopt
                self._load_table()
        self.optimizer_note = "in the graph" if reason is None else f"eager: {reason}"
        if reason is not None:
            log.info("optimizer stays eager: %s", reason)

    # ------------------------------------------------------------------ capture
    def _forward_backward(self):
        for p in self.trainable:
            p.grad.zero_()
        if self.index_mode:
            pos = torch.add(self.batch_offsets, self.counter, alpha=self.batch_size)
            xb, yb = self.loader.gather(self.perm.index_select(0, pos))
        else:
            xb, yb = self.static_x, self.static_y
        out = self.net(xb)
        loss = self.criterion(out, yb)
        loss.backward()
        if self.clip != 0:
            torch.nn.utils.clip_grad_norm_(self.trainable, self.clip)
        return loss

    def _body(self):
        if self.fused is not None:  # gather, forward, loss, backward, clipping, AdamW, counter: its own kernels
            self.fused.launch()
            return
        loss = self._forward_backward()
        self.epoch_losses.index_copy_(0, self.counter, loss.detach().view(1))
        if self.graph_opt is not None:
            self.graph_opt.update(self.counter)
        self.counter.add_(1)

    def _pointers(self):
        """The device addresses a captured graph holds: each parameter's, its gradient's and, once the update is in
        the graph (GraphAdamW, the fused step), its AdamW moments' (a changed one means: capture again)."""
        state = getattr(self.optimizer, "state", {}) if self.graph_opt is not None else {}
        return tuple((p.data_ptr(), p.grad.data_ptr() if p.grad is not None else 0,
                      *(state[p][k].data_ptr() for k in ("exp_avg", "exp_avg_sq") if p in state))
                     for p in self.trainable)

    def prepare_capture(self) -> None:
        """Before a capture (this step's or a group's): cuDNN's flat weights, a gradient buffer per trainable
        parameter, the optimizer's placement decided (the CUDA device current)."""
        for m in self.net.modules():
            if isinstance(m, torch.nn.RNNBase):
                m.flatten_parameters()
        for p in self.trainable:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        self._setup_optimizer()
        self.fused_reason = fused_step.eligibility(self)

    def use_fused(self, fused) -> None:
        """Train through ``fused`` (a FusedGRUStep holding this step, or None: the autograd step)."""
        self.fused = fused
        if fused is not None:
            log.info("training step: fused %s step (training/fused_step.py)",
                     "GRU DPD" if isinstance(fused, fused_step.FusedDPDStep) else "GRU")

    def _capture(self) -> None:
        with torch.cuda.device(self.device), torch.random.fork_rng(devices=[self.device]):
            self.prepare_capture()
            fused = None  # a capture again (new pointers) builds the fused step again, or drops it
            if self.fused_reason is None:
                fused, self.fused_reason = fused_step.build([self])
            self.use_fused(fused)
            timing.mark("capture_optimizer_checked")
            cur = torch.cuda.current_stream()
            side = torch.cuda.Stream()
            side.wait_stream(cur)
            # warm-up: forward and backward only (they change nothing but the gradients, zeroed by every step); the
            # fused step needs none (no autograd, its kernels loaded by its constructor)
            with torch.cuda.stream(side):
                for _ in range(0 if self.fused is not None else WARMUP_ITERS):
                    self._forward_backward()
            cur.wait_stream(side)
            torch.cuda.synchronize(self.device)
            eager_warmup.wait(self.device)
            timing.mark("capture_warmup_done")
            graph = torch.cuda.CUDAGraph()
            # Capture on the warm-up stream: the AccumulateGrad nodes made during warm-up then match the capture
            # stream (no stream-mismatch synchronization inside the graph).
            with torch.cuda.graph(graph, stream=side):
                self._body()
            torch.cuda.synchronize(self.device)
        self.graph = graph
        self._ptrs = self._pointers()
        self.captures += 1
        timing.mark("graph_captured", captures=self.captures)
        log.info("CUDA graph captured (forward, loss, backward, clipping; optimizer %s)", self.optimizer_note)

    # ------------------------------------------------------------------ per batch
    def __call__(self, b: int, batch) -> bool:
        if self.failed_reason is not None:
            return False
        if not self.net.training or not torch.is_grad_enabled() or self.loader.batch_len(batch) != self.batch_size:
            return False
        if self.index_mode and batch.device != self.device:
            return False
        if b != self._next:
            # earlier batches of this epoch ran eagerly (one optimizer step each, like a replay): batch b still
            # uses loss slot b and table row b
            self.counter.fill_(b)
            self._next = b
        if self.graph is not None and self._pointers() != self._ptrs:
            self.graph = None  # parameters or gradients were re-allocated: capture again
        if self.graph is None:
            self._sync_steps()
            try:
                self._capture()
            except (RuntimeError, torch.OutOfMemoryError) as exc:  # fall back, never crash
                self.failed_reason = f"capture failed ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})"
                self.graph = None
                self.graph_opt = None
                self.fused = None
                self.optimizer_note = "eager (no CUDA graph)"
                log.warning("CUDA graph unavailable; training eagerly: %s", self.failed_reason)
                try:
                    torch.cuda.synchronize(self.device)
                except Exception:  # noqa: BLE001
                    pass
                for p in self.trainable:
                    if p.grad is not None:
                        p.grad.zero_()
                return False
        with torch.cuda.device(self.device):
            if not self.index_mode:
                self.static_x.copy_(batch[0], non_blocking=True)
                self.static_y.copy_(batch[1], non_blocking=True)
            self.graph.replay()
        self._next += 1
        if self.graph_opt is not None:
            self.optimizer.graph_steps_pending += 1
        return True


def make_fast_step(net, criterion, optimizer, trainable, clip, device, *, batch_shape, loader, enabled=True,
                   fused=True):
    """``(step, status)``: a :class:`CudaGraphStep` (captured at the first full batch) and "on", or None and
    "off: <reason>" (``enabled`` False: "disabled for this run")."""
    reason = eligibility(net, criterion, optimizer, trainable, device)
    if reason is None and not enabled:
        reason = 'disabled for this run'
    if reason is not None:
        return None, f"off: {reason}"
    step = CudaGraphStep(net, criterion, trainable, clip, device, loader, batch_shape[0], optimizer=optimizer,
                         fused=fused)
    if fused and fused_step.model_eligibility(net, criterion) is None:  # its eager path: only the short last batch
        eager_warmup.start(step)
    return step, "on"
