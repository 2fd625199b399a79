"""Fast recurrence kernels on the CPU: GRU and LSTM as sequence-level ``torch.autograd.Function`` s.

Each call is ONE autograd node per layer and sequence (``nn.GRU`` on the CPU records several per time step). The
forward runs the whole sequence (5 ops a GRU step, 7 an LSTM step) keeping its gates; the backward computes the
gate factors of all steps at once, then a reverse-time loop over the gradient recurrence, which is linear in dh
(2 ops a GRU step: one broadcast product and one GEMM; 3 an LSTM step), then every weight gradient by one GEMM over
all steps and ``dx`` by one GEMM. Per-step ops update preallocated buffers in place through views made once
(:class:`_Workspace`), with fused ``addmm_`` / ``addcmul`` / ``lerp`` and ``out=`` forms, vectorized over the batch.
Gate equations are PyTorch's (``torch.nn.GRU`` / ``torch.nn.LSTM`` documentation)::

    GRU:  r = σ(W_ir x + b_ir + W_hr h + b_hr)    z = σ(W_iz x + b_iz + W_hz h + b_hz)
          n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))    h' = (1 − z) ⊙ n + z ⊙ h
    LSTM: i, f, o = σ(·), g = tanh(·) of W_i* x + b_i* + W_h* h + b_h*;  c' = f ⊙ c + i ⊙ g;  h' = o ⊙ tanh(c')

Weights and biases are the module's own (``weight_ih_l0`` …, gate rows in PyTorch's order r,z,n / i,f,g,o), so
checkpoints are interchangeable with the reference kernel; results agree with it to float32 rounding, not bitwise
(tests/unit/test_cpu_rnn.py: forward ≤ 1e-5, gradients ≤ 1e-5 of float64 like nn.GRU's own float32 ones). Internally
the gate blocks are permuted so that each per-step op reads or writes one contiguous block; the permutation is undone
on the weight gradients.

Shapes (batch first, as in :mod:`dpd_desktop.kernels`): x ``(B, T, I)``, h0/c0 ``(B, H)``, output ``(B, T, H)``.
Any floating dtype runs (float64 for ``torch.autograd.gradcheck``); the dispatcher sends float32 only.

Its speed against nn.GRU, and the compiling and layouts tried (TorchScript, ``torch.compile``, batch-major and
feature-major layouts lost to the time-major one below): benchmarks/results/2026-12-04-notes-training.md.
"""
from __future__ import annotations

import threading

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

__all__ = ["gru_sequence", "lstm_sequence", "unsupported"]


def unsupported(rnn: nn.RNNBase) -> str | None:
    """Why this backend should not run ``rnn`` (None: it runs it). Every GRU runs; an LSTM stays on PyTorch's own
    when oneDNN (mkldnn) runs it: its fused LSTM is faster than this one on the CPU."""
    if isinstance(rnn, nn.LSTM) and _mkldnn_lstm():
        return "PyTorch's oneDNN LSTM is faster than the fast kernel on the CPU"
    return None


def _mkldnn_lstm() -> bool:
    """Whether ``nn.LSTM`` runs on oneDNN here (PyTorch uses it for float32 CPU LSTMs when it is built in and
    enabled)."""
    return bool(torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled)


def _blocks(w: Tensor | None, order: tuple[int, ...], hidden: int) -> Tensor | None:
    """The gate blocks (``hidden`` rows each) of ``w`` in ``order`` (a copy); None stays None."""
    if w is None:
        return None
    return torch.cat([w[k * hidden:(k + 1) * hidden] for k in order])


def _unblocks(g: Tensor, order: tuple[int, ...], hidden: int) -> Tensor:
    """Inverse of :func:`_blocks`: ``g``'s blocks are in ``order``; returns them in PyTorch's order."""
    out = torch.empty_like(g)
    for pos, k in enumerate(order):
        out[k * hidden:(k + 1) * hidden] = g[pos * hidden:(pos + 1) * hidden]
    return out


# Layout. Every buffer is time-major with the batch last, ``(T, rows, B)``: step t's slice ``buf[t]`` is one
# contiguous ``(rows, B)`` matrix, which the recurrent GEMM updates in place; each gate is a contiguous row block of
# it (elementwise ops run over H·B contiguous values) and a step touches one contiguous stretch of memory. The weight
# gradients permute the gate gradients to ``(rows, T·B)`` once and take one GEMM over all steps.
#
# Workspaces. The buffers of a shape and the per-step views into them (``unbind``) are made once and reused: a
# :class:`_Workspace` is leased by a forward and returns to the pool when the autograd node that saved it is freed
# (after its backward, or when the graph is dropped), so two live sequences never share one.
_POOL: dict[tuple, list["_Workspace"]] = {}
_POOL_LOCK = threading.Lock()
_POOL_MAX = 4  # free workspaces kept
NO_GRAD_CHUNK = 256  # steps per workspace without autograd (evaluation: 2,560-sample segments run in 10 chunks)


class _Workspace:
    """Buffers and per-step views of one (cell, T, B, H, I, dtype, device); built by :func:`_gru_workspace` /
    :func:`_lstm_workspace`."""

    def __init__(self, key: tuple, buffers: dict[str, Tensor]):
        self.key, self.in_use = key, False
        self.__dict__.update(buffers)


class _Lease:
    """Held by an autograd node (``ctx.lease``) or a no-grad call: frees its workspace when it is freed."""

    __slots__ = ("ws",)

    def __init__(self, ws: _Workspace):
        self.ws = ws

    def __del__(self):
        # no lock here: a garbage collection inside _lease (which holds the lock) may run this; the store is atomic
        ws, self.ws = self.ws, None
        if ws is not None:
            ws.in_use = False


def _lease(key: tuple, build) -> _Lease:
    """A free workspace of ``key`` (``build(key)`` makes one when none is free); at most ``_POOL_MAX`` free ones are
    kept over all keys."""
    with _POOL_LOCK:
        for ws in _POOL.get(key, ()):
            if not ws.in_use:
                ws.in_use = True
                return _Lease(ws)
        free = [w for ws in _POOL.values() for w in ws if not w.in_use]
        for w in free[:max(0, len(free) - _POOL_MAX + 1)]:
            _POOL[w.key].remove(w)
    ws = build(key)
    ws.in_use = True
    with _POOL_LOCK:
        _POOL.setdefault(key, []).append(ws)
    return _Lease(ws)


def _key(cell: str, x: Tensor, hid: int) -> tuple:
    b, t, i = x.shape
    return cell, t, b, hid, i, x.dtype, x.device


def _batch_first(buf: Tensor) -> Tensor:
    """``(T, F, B)`` (any strides) → a new contiguous ``(B, T, F)``."""
    t, f, b = buf.shape
    out = torch.empty((b, t, f), dtype=buf.dtype, device=buf.device)
    out.copy_(buf.permute(2, 0, 1))
    return out


def _flat(buf: Tensor) -> Tensor:
    """``(T, R, B)`` → ``(R, T·B)`` (column ``t·B + b``; a copy)."""
    t, r, b = buf.shape
    return buf.permute(1, 0, 2).reshape(r, t * b)


def _time_major_input(xt: Tensor, x: Tensor) -> None:
    """Copy ``x`` ``(B, T, I)`` into the workspace's ``xt`` ``(T, I+1, B)``, whose last row is ones (the bias row)."""
    xt[:, :x.shape[2]].copy_(x.permute(1, 2, 0))


def _input_part(out: Tensor, xt: Tensor, w: Tensor, bias: Tensor) -> None:
    """Every step's input projection by one batched GEMM into ``out`` ``(T, R, B)``: ``[w | bias]`` ``(R, I+1)`` ·
    ``xt[t]`` ``(I+1, B)`` (its last row ones, so that the bias needs no pass of its own)."""
    t = xt.shape[0]
    wb = torch.cat([w, bias[:, None]], 1)
    torch.bmm(wb.expand(t, *wb.shape), xt, out=out)


def _workspace_input(t: int, i: int, b: int, e: dict) -> Tensor:
    xt = torch.empty((t, i + 1, b), **e)
    xt[:, i].fill_(1.0)
    return xt


def _no_grad(cell: str, build, forward, x: Tensor, states: tuple, weights: tuple) -> Tensor:
    """``forward`` over ``x`` ``(B, T, I)`` without autograd, :data:`NO_GRAD_CHUNK` steps at a time, each chunk
    starting from the last one's final states (``states``: (h0,) or (h0, c0), each ``(B, H)``) → ``(B, T, H)``."""
    b, t, _ = x.shape
    hid = states[0].shape[-1]
    out = torch.empty((b, t, hid), dtype=x.dtype, device=x.device)
    for start in range(0, t, NO_GRAD_CHUNK):
        chunk = x[:, start:start + NO_GRAD_CHUNK]
        lease = _lease(_key(cell, chunk, hid), build)
        ws = lease.ws
        forward(ws, chunk, *states, *weights)
        out[:, start:start + chunk.shape[1]].copy_(ws.hall[1:].permute(2, 0, 1))
        last = (ws.hall[-1], ws.call[-1]) if cell == "lstm" else (ws.hall[-1],)
        states = tuple(v.t().clone() for v in last)
        del lease
    return out


# ------------------------------------------------------------------------------------------------------------ GRU
# Gate blocks of PyTorch's weight rows: r = 0, z = 1, n = 2. Forward rows of the recurrent GEMM: [n, r, z], so that
# r and z are one block for the sigmoid and z is followed by the three other factors of the backward (S below).
_GRU_FWD = (2, 0, 1)


def _gru_workspace(key: tuple) -> _Workspace:
    """The forward's buffers: S ``(T, 7H, B)`` = [W_in x + b_in, W_hn h + b_hn, r, z, 3 backward factors],
    N ``(T, H, B)`` = n, Hall ``(T+1, H, B)`` = [h0, h_1 … h_T], xt ``(T, I+1, B)``, and the forward's per-step views
    (the backward's are added by :func:`_gru_backward_buffers`)."""
    _, t, b, hid, i, dt, dev = key
    e = dict(dtype=dt, device=dev)
    s, n = torch.empty((t, 7 * hid, b), **e), torch.empty((t, hid, b), **e)
    hall, xt = torch.empty((t + 1, hid, b), **e), _workspace_input(t, i, b, e)
    hs = hall.unbind(0)
    fwd = list(zip(s[:, hid:4 * hid].unbind(0), s[:, 2 * hid:4 * hid].unbind(0), s[:, :hid].unbind(0),
                   s[:, hid:2 * hid].unbind(0), s[:, 2 * hid:3 * hid].unbind(0), s[:, 3 * hid:4 * hid].unbind(0),
                   n.unbind(0), hs[:-1], hs[1:]))
    return _Workspace(key, dict(s=s, n=n, hall=hall, xt=xt, fwd=fwd))


def _gru_backward_buffers(ws: _Workspace) -> None:
    """Add G ``(T, 5H, B)`` (the gate gradients), D ``(T+1, H, B)`` (dL/dh) and the backward's per-step views to
    ``ws`` (once: a workspace that only evaluates never has them)."""
    if hasattr(ws, "g"):
        return
    t, _, b = ws.n.shape
    hid = ws.n.shape[1]
    g = torch.empty((t, 5 * hid, b), dtype=ws.n.dtype, device=ws.n.device)
    d = torch.empty((t + 1, hid, b), dtype=ws.n.dtype, device=ws.n.device)
    ds = d.unbind(0)
    ws.g, ws.d = g, d
    ws.bwd = list(zip(ds[1:], ds[:-1], ws.s[:, 3 * hid:].view(t, 4, hid, b).unbind(0),
                      g[:, :4 * hid].view(t, 4, hid, b).unbind(0), g[:, :4 * hid].unbind(0)))[::-1]


def _gru_forward(ws: _Workspace, x, h0, w_ih, w_hh, b_ih, b_hh) -> None:
    """The GRU forward over ``x`` ``(B, T, I)`` from ``h0`` ``(B, H)`` into ``ws``."""
    hid = h0.shape[-1]
    dt, dev = x.dtype, x.device
    xt = ws.xt
    _time_major_input(xt, x)
    # One batched GEMM for every step's input part, S[:, :4H] = [W_in x + b_in, b_hn, W_ir x + b_ir + b_hr,
    # W_iz x + b_iz + b_hz]; each step then adds its recurrent part to rows H:4H in place (addmm_).
    w4 = torch.cat([w_ih[2 * hid:], torch.zeros((hid, w_ih.shape[1]), dtype=dt, device=dev), w_ih[:2 * hid]])
    bias4 = torch.zeros(4 * hid, dtype=dt, device=dev)
    if b_ih is not None:
        bias4[:hid] += b_ih[2 * hid:]
        bias4[2 * hid:] += b_ih[:2 * hid]
    if b_hh is not None:
        bias4[hid:] += _blocks(b_hh, _GRU_FWD, hid)
    _input_part(ws.s[:, :4 * hid], xt, w4, bias4)
    ws.hall[0].copy_(h0.t())
    whh = _blocks(w_hh, _GRU_FWD, hid)
    addcmul, lerp = torch.addcmul, torch.lerp
    for st, rz, gin, ghn, r, z, nt, hp, hn in ws.fwd:
        st.addmm_(whh, hp)                   # [W_hn h + b_hn, a_r, a_z]
        rz.sigmoid_()
        addcmul(gin, r, ghn, out=nt)         # W_in x + b_in + r ⊙ (W_hn h + b_hn)
        nt.tanh_()
        lerp(nt, hp, z, out=hn)              # n + z ⊙ (h − n)


def _gru_backward(ws: _Workspace, dy, w_ih, w_hh, needs):
    """Gradients (dx, dh0, dW_ih, dW_hh, db_ih, db_hh) of the GRU from ``dy`` ``(B, T, H)``; None where ``needs``
    (the Function's ``needs_input_grad``) is False.

    The gate gradients are linear in dh_t: da_r = dh ⊙ (1 − z)(1 − n²) ghn r (1 − r), da_z = dh ⊙ (h − n) z (1 − z),
    dghn = dh ⊙ (1 − z)(1 − n²) r, da_n = dh ⊙ (1 − z)(1 − n²); and dh_{t−1} = dy_{t−1} + z ⊙ dh_t + W_hh^T dgh_t.
    With the factors F = [z, (1 − z)(1 − n²) r, … ghn r (1 − r), (h − n) z (1 − z)] of all steps computed at once,
    a step is one broadcast product G_t = F_t ⊙ dh_t and one GEMM dh_{t−1} += [I | W_hn | W_hr | W_hz]^T G_t."""
    _gru_backward_buffers(ws)
    s, n, hall, g, d = ws.s, ws.n, ws.hall, ws.g, ws.d
    t, hid, b = n.shape
    dt, dev = n.dtype, n.device
    ghn, r, z = s[:, hid:2 * hid], s[:, 2 * hid:3 * hid], s[:, 3 * hid:4 * hid]
    hprev = hall[:-1]
    omz = torch.sub(1.0, z)
    an = torch.addcmul(omz, torch.mul(omz, n), n, value=-1.0)           # (1 − z)(1 − n²) = ∂a_n/∂h'
    x1 = torch.mul(an, r, out=s[:, 4 * hid:5 * hid])                    # ∂ghn/∂h'
    torch.addcmul(ghn, r, ghn, value=-1.0, out=s[:, 5 * hid:6 * hid]).mul_(x1)      # ∂a_r/∂h'
    torch.sub(hprev, n, out=s[:, 6 * hid:]).mul_(z).mul_(omz)           # ∂a_z/∂h'
    # G (T, 5H, B) = [z ⊙ dh, dghn, da_r, da_z, da_n]: dgh = rows H:4H (n, r, z), dgi = rows 2H: (r, z, n).
    d[0].zero_()                             # becomes dL/dh0
    d[1:].copy_(dy.permute(1, 2, 0))         # d[t+1] becomes dL/dh_t when the loop reaches step t
    waug_t = torch.cat([torch.eye(hid, dtype=dt, device=dev), _blocks(w_hh, _GRU_FWD, hid)]).t()   # (H, 4H)
    mul = torch.mul
    for dcur, dprev, ft, gt, gflat in ws.bwd:
        mul(dcur, ft, out=gt)
        dprev.addmm_(waug_t, gflat)
    torch.mul(an, d[1:], out=g[:, 4 * hid:])
    dx = dw_ih = dw_hh = db_ih = db_hh = None
    if not any(needs[k] for k in (0, 2, 3, 4, 5)):
        return None, d[0].t().clone() if needs[1] else None, None, None, None, None
    gf = _flat(g[:, hid:])                   # (4H, T·B) rows [dghn, da_r, da_z, da_n]
    if needs[0]:
        dx = torch.mm(w_ih.t(), gf[hid:]).view(-1, t, b).permute(2, 1, 0).contiguous()
    if needs[2]:
        dw_ih = torch.mm(gf[hid:], _flat(ws.xt[:, :w_ih.shape[1]]).t())
    if needs[3]:
        dw_hh = _unblocks(torch.mm(gf[:3 * hid], _flat(hprev).t()), _GRU_FWD, hid)
    if needs[4] or needs[5]:
        sums = gf.sum(1)
        db_ih = sums[hid:] if needs[4] else None
        db_hh = _unblocks(sums[:3 * hid], _GRU_FWD, hid) if needs[5] else None
    return dx, d[0].t().clone() if needs[1] else None, dw_ih, dw_hh, db_ih, db_hh


class _GRUSequence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, h0, w_ih, w_hh, b_ih, b_hh):
        lease = _lease(_key("gru", x, h0.shape[-1]), _gru_workspace)
        _gru_forward(lease.ws, x, h0, w_ih, w_hh, b_ih, b_hh)
        ctx.lease = lease
        ctx.save_for_backward(w_ih, w_hh)
        return _batch_first(lease.ws.hall[1:])

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        w_ih, w_hh = ctx.saved_tensors
        return _gru_backward(ctx.lease.ws, dy, w_ih, w_hh, ctx.needs_input_grad)


def gru_sequence(x: Tensor, h0: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None,
                 b_hh: Tensor | None) -> Tensor:
    """One GRU layer over ``x`` ``(B, T, I)`` from ``h0`` ``(B, H)`` → ``(B, T, H)`` (see the module doc);
    differentiable with respect to every tensor argument. Without autograd (no-grad mode, or nothing requiring a
    gradient) the sequence runs in chunks of :data:`NO_GRAD_CHUNK` steps and nothing is kept."""
    args = (x, h0, w_ih, w_hh, b_ih, b_hh)
    if torch.is_grad_enabled() and any(a is not None and a.requires_grad for a in args):
        return _GRUSequence.apply(*args)
    return _no_grad("gru", _gru_workspace, _gru_forward, x, (h0,), args[2:])


# ----------------------------------------------------------------------------------------------------------- LSTM
# Gate blocks of PyTorch's weight rows: i = 0, f = 1, g = 2, o = 3.
_LSTM_FWD = (1, 3, 0, 2)   # forward rows [f, o, i, g]: the sigmoid gates are one block, f right after 3 factors
_LSTM_BWD = (3, 0, 1, 2)   # backward rows [o, i, f, g]: the gradients of i, f, g next to dc_prev


def _lstm_workspace(key: tuple) -> _Workspace:
    """The forward's buffers: S ``(T, 7H, B)`` = [3 backward factors, f, o, i, g], Call/Hall ``(T+1, H, B)`` =
    [c0 (h0), c_1 … c_T], TC ``(T, H, B)`` = tanh(c), xt ``(T, I+1, B)``; and the forward's per-step views (the
    backward's are added by :func:`_lstm_backward_buffers`)."""
    _, t, b, hid, i, dt, dev = key
    e = dict(dtype=dt, device=dev)
    s, tc = torch.empty((t, 7 * hid, b), **e), torch.empty((t, hid, b), **e)
    call, hall = torch.empty((t + 1, hid, b), **e), torch.empty((t + 1, hid, b), **e)
    cs, hs = call.unbind(0), hall.unbind(0)
    fwd = list(zip(s[:, 3 * hid:].unbind(0), s[:, 3 * hid:6 * hid].unbind(0), s[:, 3 * hid:4 * hid].unbind(0),
                   s[:, 4 * hid:5 * hid].unbind(0), s[:, 5 * hid:6 * hid].unbind(0), s[:, 6 * hid:].unbind(0),
                   cs[:-1], cs[1:], tc.unbind(0), hs[:-1], hs[1:]))
    return _Workspace(key, dict(s=s, tc=tc, call=call, hall=hall, xt=_workspace_input(t, i, b, e), fwd=fwd))


def _lstm_backward_buffers(ws: _Workspace) -> None:
    """Add A ``(T, 5H, B)`` (backward factors), G ``(T+1, 5H, B)`` = [da_o, da_i, da_f, da_g, dc_prev] (row T: the
    zero carry of the last step), D ``(T+1, H, B)`` (dL/dh) and the backward's per-step views to ``ws`` (once)."""
    if hasattr(ws, "g"):
        return
    t, hid, b = ws.tc.shape
    e = dict(dtype=ws.tc.dtype, device=ws.tc.device)
    a, g, d = torch.empty((t, 5 * hid, b), **e), torch.empty((t + 1, 5 * hid, b), **e), torch.empty((t + 1, hid, b), **e)
    ds = d.unbind(0)
    ws.a, ws.g, ws.d = a, g, d
    ws.bwd = list(zip(ds[1:], ds[:-1], a.view(t, 5, hid, b).unbind(0), g[:t].view(t, 5, hid, b).unbind(0),
                      g[:t, hid:].view(t, 4, hid, b).unbind(0), ws.s[:, :4 * hid].view(t, 4, hid, b).unbind(0),
                      g[1:, 4 * hid:].unbind(0), g[:t, :4 * hid].unbind(0)))[::-1]


def _lstm_forward(ws: _Workspace, x, h0, c0, w_ih, w_hh, b_ih, b_hh) -> None:
    """The LSTM forward over ``x`` ``(B, T, I)`` from ``(h0, c0)`` into ``ws``."""
    hid = h0.shape[-1]
    bias = torch.zeros(4 * hid, dtype=x.dtype, device=x.device)
    for bb in (b_ih, b_hh):
        if bb is not None:
            bias += _blocks(bb, _LSTM_FWD, hid)
    _time_major_input(ws.xt, x)
    _input_part(ws.s[:, 3 * hid:], ws.xt, _blocks(w_ih, _LSTM_FWD, hid), bias)
    ws.call[0].copy_(c0.t())
    ws.hall[0].copy_(h0.t())
    whh = _blocks(w_hh, _LSTM_FWD, hid)
    mul, tanh = torch.mul, torch.tanh
    for st, sig, f, o, i, gg, cp, cn, tct, hp, hn in ws.fwd:
        st.addmm_(whh, hp)                   # input part + recurrent part, in place
        sig.sigmoid_()
        gg.tanh_()
        mul(f, cp, out=cn)
        cn.addcmul_(i, gg)                   # c' = f ⊙ c + i ⊙ g
        tanh(cn, out=tct)
        mul(o, tct, out=hn)                  # h' = o ⊙ tanh(c')


def _lstm_backward(ws: _Workspace, dy, w_ih, w_hh, needs):
    """Gradients (dx, dh0, dc0, dW_ih, dW_hh, db_ih, db_hh) of the LSTM from ``dy`` ``(B, T, H)``.

    With dc_t = carry_t + dh_t ⊙ Fc (carry_t = f_{t+1} ⊙ dc_{t+1}) every gate gradient is A ⊙ dh_t + Bf ⊙ carry_t:
    A = [Fo, Fi Fc, Ff Fc, Fg Fc, f Fc], Bf = [0, Fi, Ff, Fg, f] where Fo = tanh(c) o (1 − o), Fc = o (1 − tanh²c),
    Fi = g i (1 − i), Ff = c_prev f (1 − f), Fg = i (1 − g²); the last row is the next carry. A step: one product,
    one multiply-add, one GEMM dh_{t−1} += W_hh^T [da_o, da_i, da_f, da_g]."""
    _lstm_backward_buffers(ws)
    s, tc, call, hall, a, g, d = ws.s, ws.tc, ws.call, ws.hall, ws.a, ws.g, ws.d
    t, hid, b = tc.shape
    f, o, i, gg = (s[:, k * hid:(k + 1) * hid] for k in range(3, 7))
    fc = torch.addcmul(o, torch.mul(o, tc), tc, value=-1.0)
    torch.sub(1.0, o, out=a[:, :hid]).mul_(o).mul_(tc)
    torch.sub(1.0, i, out=s[:, :hid]).mul_(i).mul_(gg)
    torch.sub(1.0, f, out=s[:, hid:2 * hid]).mul_(f).mul_(call[:-1])
    torch.addcmul(i, torch.mul(i, gg), gg, value=-1.0, out=s[:, 2 * hid:3 * hid])
    torch.mul(s[:, :4 * hid].view(t, 4, hid, b), fc[:, None], out=a[:, hid:].view(t, 4, hid, b))
    g[t, 4 * hid:].zero_()
    d[0].zero_()
    d[1:].copy_(dy.permute(1, 2, 0))
    wpt = _blocks(w_hh, _LSTM_BWD, hid).t()  # (H, 4H), columns o, i, f, g
    mul = torch.mul
    for dcur, dprev, at, gt, g4, bt, carry, gates in ws.bwd:
        mul(dcur, at, out=gt)
        g4.addcmul_(bt, carry)
        dprev.addmm_(wpt, gates)
    gf = _flat(g[:t, :4 * hid]) if any(needs[k] for k in (0, 3, 4, 5, 6)) else None
    dx = dw_ih = dw_hh = None
    if needs[0]:
        dx = torch.mm(_blocks(w_ih, _LSTM_BWD, hid).t(), gf).view(-1, t, b).permute(2, 1, 0).contiguous()
    if needs[3]:
        dw_ih = _unblocks(torch.mm(gf, _flat(ws.xt[:, :w_ih.shape[1]]).t()), _LSTM_BWD, hid)
    if needs[4]:
        dw_hh = _unblocks(torch.mm(gf, _flat(hall[:-1]).t()), _LSTM_BWD, hid)
    db = _unblocks(gf.sum(1), _LSTM_BWD, hid) if needs[5] or needs[6] else None
    return (dx, d[0].t().clone() if needs[1] else None, g[0, 4 * hid:].t().clone() if needs[2] else None,
            dw_ih, dw_hh, db if needs[5] else None, db.clone() if needs[6] else None)


class _LSTMSequence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, h0, c0, w_ih, w_hh, b_ih, b_hh):
        lease = _lease(_key("lstm", x, h0.shape[-1]), _lstm_workspace)
        _lstm_forward(lease.ws, x, h0, c0, w_ih, w_hh, b_ih, b_hh)
        ctx.lease = lease
        ctx.save_for_backward(w_ih, w_hh)
        return _batch_first(lease.ws.hall[1:])

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        w_ih, w_hh = ctx.saved_tensors
        return _lstm_backward(ctx.lease.ws, dy, w_ih, w_hh, ctx.needs_input_grad)


def lstm_sequence(x: Tensor, h0: Tensor, c0: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None,
                  b_hh: Tensor | None) -> Tensor:
    """One LSTM layer over ``x`` ``(B, T, I)`` from ``(h0, c0)`` ``(B, H)`` each → ``(B, T, H)``; differentiable with
    respect to every tensor argument (``h0`` and ``c0`` may be the same tensor: autograd sums both gradients)."""
    args = (x, h0, c0, w_ih, w_hh, b_ih, b_hh)
    if torch.is_grad_enabled() and any(a is not None and a.requires_grad for a in args):
        return _LSTMSequence.apply(*args)
    return _no_grad("lstm", _lstm_workspace, _lstm_forward, x, (h0, c0), args[3:])
