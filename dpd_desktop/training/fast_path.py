"""CUDA fast path: one training step captured as a CUDA graph and replayed for every full-size batch.

What is captured (following PyTorch's CUDA Graphs notes and the reference's §7.1 design): in-place zeroing of the
gradients, the batch gather from the device-resident training series (a static index buffer → the (B, L, 2) input
and target frames), the forward of the whole network (a DPD → frozen-PA cascade included), the loss, the backward
and the gradient-norm clipping. The optimizer step runs eagerly after each replay, so learning-rate changes and
optimizer state behave exactly as in eager training. The results are bitwise identical to the eager path:
the same kernels run on the same values (tests/gpu/test_fast_path_equivalence.py).

Per replay the host only copies B int64 frame indices into the static index buffer (device to device) and
launches the graph: no host→device batch copy, no per-sample Python, no synchronization.

Fallbacks (each returns a status "off: <reason>" that the run records in config.json and the GUI shows):
CPU/MPS devices; ``DPD_DESKTOP_DISABLE_CUDA_GRAPH=1`` (read once at import); deterministic algorithms; unsupported
model types or losses; dropout; module hooks; non-float32 parameters; autocast; capture failure or out of memory
during capture (the run continues eagerly). A short final batch runs eagerly with gradients zeroed in place, so the
captured buffers stay valid.
"""
from __future__ import annotations

import logging
import os

log = logging.getLogger("dpd_desktop.fast_path")

DISABLE_CUDA_GRAPH = os.environ.get("DPD_DESKTOP_DISABLE_CUDA_GRAPH") == "1"
WARMUP_ITERS = 2


def eligibility(net, criterion, optimizer, trainable, device) -> str | None:
    """Return None when the fast path may be used, else the reason it may not (plain words)."""
    import torch

    from ..models import Cascade, CoreModel

    if device.type != "cuda":
        return f"{device.type.upper()} device (CUDA graphs need a CUDA GPU)"
    if DISABLE_CUDA_GRAPH:
        return "disabled by DPD_DESKTOP_DISABLE_CUDA_GRAPH=1"
    if torch.are_deterministic_algorithms_enabled():
        return "deterministic mode is on"
    if type(net) is CoreModel:
        pass
    elif type(net) is Cascade and type(net.dpd) is CoreModel and type(net.pa) is CoreModel:
        if any(p.requires_grad for p in net.pa.parameters()):
            return "the PA of the cascade is not frozen"
    else:
        return f"unsupported model type {type(net).__name__}"
    if type(criterion) not in (torch.nn.MSELoss, torch.nn.L1Loss) or criterion.reduction != "mean":
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
    """Callable ``step(frame_idx) -> loss | None`` replaying the captured step for a full batch.

    ``frame_idx``: a batch handle of the loader — (B,) int64 CUDA frame indices for :class:`FrameLoader`, or the
    ``(x, y)`` CPU batch of :class:`PlainFrameLoader` (B = the captured batch size). Returns the (0-dim)
    float32 CUDA tensor holding the batch loss, or None when the caller must run the batch eagerly (capture failed
    earlier, model in eval mode, autograd off, autocast on, wrong shape). The returned tensor is the graph's static
    output: copy it before the next replay. The caller runs ``optimizer.step()``.
    """

    def __init__(self, net, criterion, trainable, clip, device, loader, batch_size):
        import torch

        self.net, self.criterion, self.trainable = net, criterion, list(trainable)
        self.clip, self.device, self.loader, self.batch_size = clip, device, loader, batch_size
        self.graph = None
        self.failed_reason: str | None = None
        # Index mode (the device-resident FrameLoader): the gather is part of the graph and each replay only copies
        # B frame indices. Copy mode (the plain DataLoader fallback): each replay copies the batch into static
        # input/target buffers first.
        self.index_mode = hasattr(loader, "x")
        self.static_idx = torch.zeros(batch_size, dtype=torch.int64, device=device) if self.index_mode else None
        L = getattr(loader, "frame_length")
        self.static_x = None if self.index_mode else torch.zeros(batch_size, L, 2, device=device)
        self.static_y = None if self.index_mode else torch.zeros(batch_size, L, 2, device=device)
        self.static_loss = None
        self._ptrs = None
        self.captures = 0

    @property
    def status(self) -> str:
        return "on" if self.failed_reason is None else f"off: {self.failed_reason}"

    def _body(self):
        import torch

        for p in self.trainable:
            p.grad.zero_()
        if self.index_mode:
            xb, yb = self.loader.gather(self.static_idx)
        else:
            xb, yb = self.static_x, self.static_y
        out = self.net(xb)
        loss = self.criterion(out, yb)
        loss.backward()
        if self.clip != 0:
            torch.nn.utils.clip_grad_norm_(self.trainable, self.clip)
        return loss

    def _load(self, batch, non_blocking: bool) -> None:
        """Copy one batch handle into the static buffers (indices, or the frames themselves in copy mode)."""
        if self.index_mode:
            self.static_idx.copy_(batch, non_blocking=non_blocking)
        else:
            self.static_x.copy_(batch[0], non_blocking=non_blocking)
            self.static_y.copy_(batch[1], non_blocking=non_blocking)

    def _pointers(self):
        return tuple((p.data_ptr(), p.grad.data_ptr() if p.grad is not None else 0) for p in self.trainable)

    def _capture(self, idx) -> None:
        import torch

        with torch.cuda.device(self.device), torch.random.fork_rng(devices=[self.device]):
            for m in self.net.modules():
                if isinstance(m, torch.nn.RNNBase):
                    m.flatten_parameters()
            for p in self.trainable:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
            self._load(idx, non_blocking=False)
            cur = torch.cuda.current_stream()
            side = torch.cuda.Stream()
            side.wait_stream(cur)
            with torch.cuda.stream(side):
                for _ in range(WARMUP_ITERS):
                    self._body()
            cur.wait_stream(side)
            torch.cuda.synchronize(self.device)
            graph = torch.cuda.CUDAGraph()
            # Capture on the warm-up stream: the AccumulateGrad nodes made during warm-up then match the capture
            # stream (no stream-mismatch synchronization inside the graph).
            with torch.cuda.graph(graph, stream=side):
                self.static_loss = self._body()
            torch.cuda.synchronize(self.device)
        self.graph = graph
        self._ptrs = self._pointers()
        self.captures += 1
        log.info("CUDA graph captured (forward, loss, backward, clipping; optimizer eager)")

    def __call__(self, idx):
        import torch

        if self.failed_reason is not None:
            return None
        if not self.net.training or not torch.is_grad_enabled() or self.loader.batch_len(idx) != self.batch_size:
            return None
        if self.index_mode and idx.device != self.device:
            return None
        if self.graph is not None and self._pointers() != self._ptrs:
            self.graph = None  # parameters or gradients were re-allocated: capture again
        if self.graph is None:
            try:
                self._capture(idx)
            except (RuntimeError, torch.OutOfMemoryError) as exc:  # fall back, never crash
                self.failed_reason = f"capture failed ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})"
                self.graph = None
                log.warning("CUDA graph unavailable; training eagerly: %s", self.failed_reason)
                try:
                    torch.cuda.synchronize(self.device)
                except Exception:  # noqa: BLE001
                    pass
                for p in self.trainable:
                    if p.grad is not None:
                        p.grad.zero_()
                return None
        with torch.cuda.device(self.device):
            self._load(idx, non_blocking=True)
            self.graph.replay()
            return self.static_loss  # valid until the next replay: the trainer copies it into its loss buffer


def make_fast_step(net, criterion, optimizer, trainable, clip, device, *, batch_shape, loader, enabled=True):
    """Build the fast step for a run, or explain why there is none.

    Returns ``(step, status)``: ``step`` is a :class:`CudaGraphStep` (capture happens at the first full batch)
    or None; ``status`` is "on" or "off: <reason>".
    """
    reason = eligibility(net, criterion, optimizer, trainable, device)
    if reason is None and not enabled:
        reason = 'disabled for this run'
    if reason is not None:
        return None, f"off: {reason}"
    return CudaGraphStep(net, criterion, trainable, clip, device, loader, batch_shape[0]), "on"
