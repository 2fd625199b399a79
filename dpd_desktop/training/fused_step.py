"""The fused training step of 1-layer GRU PA models on the ``fast`` kernel: M models' steps in six kernel launches.

For all models at once (kernels/gru_step.cu, rnn.cu's model-indexed recurrences): the forward (batches gathered
from each model's permutation), the head with the loss and its gradient, the reverse-time recurrence summing each
row's weight gradients, then the partials into ``.grad``; norm, clipping and AdamW (the scalars from the model's
:class:`~dpd_desktop.training.optim.GraphAdamW` table); the loss slot and the batch counter. Each model keeps its own
tensors, reached through a device pointer table (one row per model). Every sum's order depends only on the batch,
frame and hidden sizes, so a model's numbers are bitwise the same alone or in a group, eager or replayed
(tests/gpu/test_fused_step.py); against the autograd path they agree to float32 rounding, not bitwise (AdamW's
``1 - beta`` is formed in float32 here). Used by training/fast_path.py and training/group.py alike; the trainer's
``fused_step=False`` keeps the autograd step.
"""
from __future__ import annotations

import torch

from ..kernels import cuda_rnn, nvrtc
from ..kernels.nvrtc import FLOAT, INT, POINTER
from ..models import CoreModel
from ..models.gru import GRUBackbone

SOURCE = "gru_step.cu"
NPTR = 32  # pointers per model in the table (gru_step.cu P_*)
HEAD_ROWS = 64  # rows per head block (gru_step.cu HEAD_ROWS)
RED_THREADS = 256  # gru_step.cu RED_THREADS
_FUNCS = ("head", "reduce", "update", "advance")


def model_eligibility(net, crit) -> str | None:
    """The model and loss part of :func:`eligibility` (known at set-up, before the optimizer's placement)."""
    if type(net) is not CoreModel or type(net.backbone) is not GRUBackbone:
        return "not a GRU PA model"
    if net.backbone.kernel != "fast":
        return "the reference kernel"
    if type(crit) not in (torch.nn.MSELoss, torch.nn.L1Loss) or crit.reduction != "mean":
        return f"loss {type(crit).__name__} (the fused step has MSE and L1, mean)"
    return None


def eligibility(step) -> str | None:
    """None when ``step`` (a CudaGraphStep after ``prepare_capture``) can train through the fused step, else why not."""
    if not step.fused_allowed:
        return "disabled for this run"
    reason = model_eligibility(step.net, step.criterion)
    if reason is not None:
        return reason
    net = step.net
    bb = net.backbone
    rnn = bb.rnn
    if rnn.num_layers != 1 or rnn.input_size != 2 or not rnn.bias or bb.fc_out.bias is None \
            or bb.fc_out.out_features != 2:
        return "only a 1-layer GRU with biases and the I/Q head is fused"
    if not 1 <= rnn.hidden_size <= cuda_rnn.MAX_HIDDEN:
        return f"hidden size {rnn.hidden_size} above {cuda_rnn.MAX_HIDDEN}"
    want = [rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, rnn.bias_hh_l0, bb.fc_out.weight, bb.fc_out.bias]
    if len(step.trainable) != 6 or any(a is not b for a, b in zip(step.trainable, want)):
        return "the trainable parameters are not the GRU's and the head's"
    if not all(p.is_contiguous() for p in want):
        return "a parameter is not contiguous"
    if not step.index_mode:
        return "the batches are not gathered on the device"
    if step.graph_opt is None:
        return "the AdamW update is not captured"
    x, y = step.loader.x, step.loader.y
    if x.dtype != torch.float32 or y.dtype != torch.float32 or x.dim() != 2 or x.shape[1] != 2 \
            or not x.is_contiguous() or not y.is_contiguous() or y.shape != x.shape or x.data_ptr() % 8:
        return "the device series are not contiguous float32 (N, 2)"
    return None


def shape_of(step) -> tuple:
    """What the members of one fused step must share."""
    rnn = step.net.backbone.rnn
    return (rnn.hidden_size, step.batch_size, step.loader.frame_length, step.loader.stride,
            type(step.criterion).__name__, step.device, step.graph_opt.beta1, step.graph_opt.beta2,
            step.graph_opt.eps)


def build(members) -> tuple["FusedGRUStep | None", str | None]:
    """``(FusedGRUStep(members), None)``, or ``(None, reason)`` when its kernels cannot be built or loaded here (the
    autograd step then stays, as for an ineligible model)."""
    try:
        return FusedGRUStep(members), None
    except (RuntimeError, torch.OutOfMemoryError) as exc:  # KernelBuildError, a driver error, no memory
        return None, f"the fused step is unavailable ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})"


class FusedGRUStep:
    """The fused step of ``members`` (CudaGraphSteps that passed :func:`eligibility`, equal :func:`shape_of`).
    :meth:`launch` enqueues one training step of every member on the current stream (capturable)."""

    def __init__(self, members):
        if not members or len({shape_of(s) for s in members}) != 1:
            raise ValueError("the members of a fused step must share hidden size, batch, frame, stride and loss")
        self.members = list(members)
        s0 = self.members[0]
        self.H, self.B, self.T, self.stride = s0.net.backbone.rnn.hidden_size, s0.batch_size, \
            s0.loader.frame_length, s0.loader.stride
        self.l1 = isinstance(s0.criterion, torch.nn.L1Loss)
        self.beta1, self.beta2, self.eps = s0.graph_opt.beta1, s0.graph_opt.beta2, s0.graph_opt.eps
        self.device = s0.device
        M, H, rows = len(self.members), self.H, self.B * self.T
        self.rows = rows
        self.n_head = -(-rows // HEAD_ROWS)
        self.n_w = self.B  # the recurrence's weight-gradient partials: one per batch row (rnn.cu gru_bwd_m)
        self.rnn_mod, self.rnn_threads = cuda_rnn._module(H, 3, self.device)
        self.mod = nvrtc.module(SOURCE, {"HID": H}, self.device, {name: 0 for name in _FUNCS}, cuda_rnn.OPTIONS)

        def buf(*shape):
            return torch.zeros(*shape, dtype=torch.float32, device=self.device)

        self.n_param = 6 * H + 3 * H * H + 3 * H + 3 * H + 2 * H + 2
        self.n_red = -(-self.n_param // RED_THREADS)
        self.xg, self.hseq, self.dh = buf(M, rows, 2), buf(M, rows, H), buf(M, rows, H)
        self.saved = buf(M, rows, 5 * H)
        self.part_loss, self.part_head = buf(M, self.n_head), buf(M, self.n_head, 2 * H + 2)
        self.part_w = buf(M, self.n_w, 3 * H, H + 4)
        self.part_norm = buf(M, self.n_red)
        self.clips = torch.tensor([float(s.clip) for s in self.members], dtype=torch.float32, device=self.device)
        self.ptrs = torch.tensor([self._row(i, s) for i, s in enumerate(self.members)], dtype=torch.int64,
                                 device=self.device)

    def _row(self, i: int, s) -> list[int]:
        opt = s.optimizer
        params = list(s.trainable)
        row = [p.data_ptr() for p in params] + [p.grad.data_ptr() for p in params] \
            + [opt.state[p]["exp_avg"].data_ptr() for p in params] \
            + [opt.state[p]["exp_avg_sq"].data_ptr() for p in params]
        row += [s.loader.x.data_ptr(), s.loader.y.data_ptr(), s.perm.data_ptr(), s.counter.data_ptr(),
                s.epoch_losses.data_ptr(), s.graph_opt.table.data_ptr(), self.clips.data_ptr() + 4 * i]
        return row + [0] * (NPTR - len(row))

    def launch(self) -> None:
        """One training step of every member (see the module docstring); the batch is each member's ``counter``."""
        M, B, T, rows = len(self.members), self.B, self.T, self.rows
        P = POINTER
        n_out = rows * 2
        scale = (1.0 if self.l1 else 2.0) / n_out
        self.rnn_mod.launch("gru_fwd_m", (B, M), self.rnn_threads, 0,
                            (self.ptrs, self.xg, self.hseq, self.saved, B, T, self.stride), (P,) * 4 + (INT,) * 3)
        self.mod.launch("head", (self.n_head, M), HEAD_ROWS, 0,
                        (self.ptrs, self.hseq, self.dh, self.part_loss, self.part_head, B, T, self.stride,
                         int(self.l1), scale), (P,) * 5 + (INT,) * 4 + (FLOAT,))
        self.rnn_mod.launch("gru_bwd_m", (B, M), self.rnn_threads, 0,
                            (self.ptrs, self.dh, self.saved, self.xg, self.part_w, B, T), (P,) * 5 + (INT, INT))
        self.mod.launch("reduce", (self.n_red, M), RED_THREADS, 0,
                        (self.ptrs, self.part_head, self.part_w, self.part_norm, self.n_head, self.n_w),
                        (P,) * 4 + (INT, INT))
        self.mod.launch("update", (self.n_red, M), RED_THREADS, 0,
                        (self.ptrs, self.part_norm, self.beta1, self.beta2, self.eps), (P, P, FLOAT, FLOAT, FLOAT))
        self.mod.launch("advance", M, 32, 0, (self.ptrs, self.part_loss, self.n_head, float(n_out)),
                        (P, P, INT, FLOAT))
