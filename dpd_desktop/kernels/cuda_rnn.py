"""Fast recurrence kernels on CUDA: fused GRU and LSTM sequences (rnn.cu) as ``torch.autograd.Function`` s.

Per layer and direction of time: the input projection ``gi = x W_ih^T + b_ih`` for all steps as one GEMM; one
recurrence kernel (rnn.cu: a block per batch row, each unit's products split over :func:`slices` threads, the
recurrent weights in registers) that also saves the gates and ``h_{t-1}``; in the backward one reverse-time kernel
giving the gate gradients of every step (``dgi = dL/dgi``, ``dgh = dL/dgh``) and ``dL/dh0`` (and ``dL/dc0``); then
``dW_hh = dgh^T [h0; h_1..h_{T-1}]`` (the saved ``h_{t-1}`` columns, read in place), ``dW_ih = dgi^T x``, ``dx = dgi W_ih`` as
GEMMs and the bias gradients as sums over all steps. Float32 throughout (cuBLAS with PyTorch's defaults: no TF32 for
matrix products). No atomics: repeated runs, eager or CUDA-graph replays, are bitwise equal.

Gate equations: PyTorch's (see rnn.cu), so checkpoints are interchangeable with the reference kernel.
Supported: float32, hidden size 1..64, any input size, any batch and frame length, biases optional (TRes-GRU).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from . import nvrtc
from .nvrtc import INT, POINTER

MAX_HIDDEN = 64
SOURCE = "rnn.cu"
# flush denormals: __expf becomes one MUFU.EX2 and a multiply (no range fix-up) on the recurrence's critical path;
# values under 1.2e-38 do not move a float32 result at the 1e-5 relative level the tests hold the kernels to
OPTIONS = ("--ftz=true",)
_FUNCS = ("gru_fwd", "gru_bwd", "lstm_fwd", "lstm_bwd", "gru_fwd_m", "gru_bwd_m",
          "gru_bwd_du_m")  # *_m: training/fused_step.py


def slices(hidden: int, gates: int) -> int:
    """k-slices per hidden unit (rnn.cu's KS): the threads that share one unit's matrix-vector products, each with
    its slice of the recurrent weights in registers (chosen from the H200's timings:
    benchmarks/results/2026-12-04-notes-training.md)."""
    return 1 if hidden <= 16 else 2


def _threads(hidden: int, ks: int) -> int:
    """Threads per block (one block per batch row): 32 × ceil(H / (32 / KS)) (rnn.cu's NT)."""
    upw = 32 // ks
    return 32 * ((hidden + upw - 1) // upw)


def _module(hidden: int, gates: int, device) -> tuple[nvrtc.Module, int]:
    """The module for this hidden size and gate count (its slice count) and the threads per block of its kernels."""
    ks = slices(hidden, gates)
    mod = nvrtc.module(SOURCE, {"HID": hidden, "KS": ks}, device, {name: 0 for name in _FUNCS}, OPTIONS)
    return mod, _threads(hidden, ks)


def unsupported(rnn: nn.RNNBase) -> str | None:
    """Why the fast CUDA kernels cannot run ``rnn`` (None: they can). Builds (or loads from the cache) the module
    for this hidden size on the module's device, so a build failure is a reason here and no build happens later
    inside a CUDA-graph capture."""
    missing = nvrtc.bindings_error()
    if missing:
        return f"the fast CUDA kernels need NVIDIA's CUDA bindings: {nvrtc.INSTALL_HINT} ({missing})"
    if not 1 <= rnn.hidden_size <= MAX_HIDDEN:
        return f"hidden size {rnn.hidden_size} is above the fast CUDA kernels' {MAX_HIDDEN} (weights in registers)"
    device = next(rnn.parameters()).device
    if device.type != "cuda":
        return f"the module's parameters are on {device}, not on a CUDA device"
    try:
        _module(rnn.hidden_size, 4 if isinstance(rnn, nn.LSTM) else 3, device)
    except Exception as exc:  # noqa: BLE001 - KernelBuildError, or the bindings' own (a library not found, ...)
        return f"the fast CUDA kernels could not be built: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    return None


def _needs_grad(*tensors) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


class GRUSequence(torch.autograd.Function):
    """One GRU layer over a whole sequence. forward(x (B,T,I), h0 (B,H), w_ih (3H,I), w_hh (3H,H), b_ih | None,
    b_hh | None, save: bool) → y (B,T,H)."""

    @staticmethod
    def forward(ctx, x, h0, w_ih, w_hh, b_ih, b_hh, save):
        B, T, I = x.shape
        H = w_hh.shape[1]
        mod, threads = _module(H, 3, x.device)
        x2 = x.contiguous().view(B * T, I)
        gi = torch.addmm(b_ih, x2, w_ih.t()) if b_ih is not None else torch.mm(x2, w_ih.t())
        h0c, whh = h0.contiguous(), w_hh.contiguous()
        bhh = b_hh.contiguous() if b_hh is not None else None
        y = torch.empty(B, T, H, device=x.device, dtype=torch.float32)
        # [r, z, n, W_hn h + b_hn, h_{t-1}] per step: the backward's inputs and dW_hh's right operand
        saved = torch.empty(B, T, 5 * H, device=x.device, dtype=torch.float32) if save else None
        mod.launch("gru_fwd", B, threads, 0, (gi, whh, bhh, h0c, y, saved, B, T), (POINTER,) * 6 + (INT, INT))
        if save:
            ctx.save_for_backward(x2, w_ih, whh, saved)
            ctx.shape = (B, T, I, H)
            ctx.biases = (b_ih is not None, b_hh is not None)
        return y

    @staticmethod
    def backward(ctx, dy):
        x2, w_ih, whh, saved = ctx.saved_tensors
        B, T, I, H = ctx.shape
        mod, threads = _module(H, 3, dy.device)
        dy = dy.contiguous()
        dgi = torch.empty(B * T, 3 * H, device=dy.device, dtype=torch.float32)
        dgh = torch.empty(B * T, 3 * H, device=dy.device, dtype=torch.float32)
        dh0 = torch.empty(B, H, device=dy.device, dtype=torch.float32)
        mod.launch("gru_bwd", B, threads, 0, (dy, whh, saved, dgi, dgh, dh0, B, T), (POINTER,) * 6 + (INT, INT))
        need = ctx.needs_input_grad
        dx = dgi.mm(w_ih).view(B, T, I) if need[0] else None
        dw_ih = dgi.t().mm(x2) if need[2] else None
        dw_hh = dgh.t().mm(saved.view(B * T, 5 * H)[:, 4 * H:]) if need[3] else None  # strided rows: no copy
        db_ih = dgi.sum(0) if ctx.biases[0] and need[4] else None
        db_hh = dgh.sum(0) if ctx.biases[1] and need[5] else None
        return dx, (dh0 if need[1] else None), dw_ih, dw_hh, db_ih, db_hh, None


class LSTMSequence(torch.autograd.Function):
    """One LSTM layer over a whole sequence. forward(x (B,T,I), h0, c0 (B,H), w_ih (4H,I), w_hh (4H,H), b_ih | None,
    b_hh | None, save: bool) → y (B,T,H)."""

    @staticmethod
    def forward(ctx, x, h0, c0, w_ih, w_hh, b_ih, b_hh, save):
        B, T, I = x.shape
        H = w_hh.shape[1]
        mod, threads = _module(H, 4, x.device)
        x2 = x.contiguous().view(B * T, I)
        gi = torch.addmm(b_ih, x2, w_ih.t()) if b_ih is not None else torch.mm(x2, w_ih.t())
        h0c, c0c, whh = h0.contiguous(), c0.contiguous(), w_hh.contiguous()
        bhh = b_hh.contiguous() if b_hh is not None else None
        y = torch.empty(B, T, H, device=x.device, dtype=torch.float32)
        # [i, f, g, o, c_t, h_{t-1}] per step
        saved = torch.empty(B, T, 6 * H, device=x.device, dtype=torch.float32) if save else None
        mod.launch("lstm_fwd", B, threads, 0, (gi, whh, bhh, h0c, c0c, y, saved, B, T),
                   (POINTER,) * 7 + (INT, INT))
        if save:
            ctx.save_for_backward(x2, c0c, w_ih, whh, saved)
            ctx.shape = (B, T, I, H)
            ctx.biases = (b_ih is not None, b_hh is not None)
        return y

    @staticmethod
    def backward(ctx, dy):
        x2, c0c, w_ih, whh, saved = ctx.saved_tensors
        B, T, I, H = ctx.shape
        mod, threads = _module(H, 4, dy.device)
        dy = dy.contiguous()
        da = torch.empty(B * T, 4 * H, device=dy.device, dtype=torch.float32)
        dh0 = torch.empty(B, H, device=dy.device, dtype=torch.float32)
        dc0 = torch.empty(B, H, device=dy.device, dtype=torch.float32)
        mod.launch("lstm_bwd", B, threads, 0, (dy, whh, c0c, saved, da, dh0, dc0, B, T),
                   (POINTER,) * 7 + (INT, INT))
        need = ctx.needs_input_grad
        dx = da.mm(w_ih).view(B, T, I) if need[0] else None
        dw_ih = da.t().mm(x2) if need[3] else None
        dw_hh = da.t().mm(saved.view(B * T, 6 * H)[:, 5 * H:]) if need[4] else None  # strided rows: no copy
        db = da.sum(0) if any(ctx.biases) and (need[5] or need[6]) else None
        db_ih = db if ctx.biases[0] and need[5] else None
        db_hh = (db.clone() if db_ih is not None else db) if ctx.biases[1] and need[6] else None  # no aliased grads
        return dx, (dh0 if need[1] else None), (dc0 if need[2] else None), dw_ih, dw_hh, db_ih, db_hh, None


def _check_args(x: Tensor, h0: Tensor, w_hh: Tensor, gates: int) -> None:
    H = w_hh.shape[1]
    if x.dim() != 3 or h0.shape != (x.shape[0], H) or w_hh.shape != (gates * H, H):
        raise ValueError(f"fast kernel: x {tuple(x.shape)}, h0 {tuple(h0.shape)}, w_hh {tuple(w_hh.shape)} do not "
                         f"fit (B, T, I), (B, H), ({gates}H, H)")


def gru_sequence(x: Tensor, h0: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None,
                 b_hh: Tensor | None) -> Tensor:
    """GRU layer: x (B, T, I), h0 (B, H) → y (B, T, H), float32 CUDA tensors; differentiable in every input."""
    _check_args(x, h0, w_hh, 3)
    if x.shape[1] == 0 or x.shape[0] == 0:
        return x.new_zeros(x.shape[0], x.shape[1], w_hh.shape[1])
    return GRUSequence.apply(x, h0, w_ih, w_hh, b_ih, b_hh, _needs_grad(x, h0, w_ih, w_hh, b_ih, b_hh))


def lstm_sequence(x: Tensor, h0: Tensor, c0: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None,
                  b_hh: Tensor | None) -> Tensor:
    """LSTM layer: x (B, T, I), h0, c0 (B, H) → y (B, T, H), float32 CUDA tensors; differentiable in every input."""
    _check_args(x, h0, w_hh, 4)
    if x.shape[1] == 0 or x.shape[0] == 0:
        return x.new_zeros(x.shape[0], x.shape[1], w_hh.shape[1])
    return LSTMSequence.apply(x, h0, c0, w_ih, w_hh, b_ih, b_hh, _needs_grad(x, h0, c0, w_ih, w_hh, b_ih, b_hh))
