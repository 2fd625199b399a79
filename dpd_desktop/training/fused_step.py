"""The fused training step on the ``fast`` kernel: M 1-layer GRU PA models in six kernel launches
(:class:`FusedGRUStep`), or M 1-layer GRU DPDs through their frozen 1-layer GRU PAs in ten (:class:`FusedDPDStep`).

For all models at once (kernels/gru_step.cu, rnn.cu's model-indexed recurrences): the forward (batches gathered
from each model's permutation), the head with the loss and its gradient, the reverse-time recurrence summing each
row's weight gradients, then the partials into ``.grad``; norm, clipping and AdamW (the scalars from the model's
:class:`~dpd_desktop.training.optim.GraphAdamW` table); the loss slot and the batch counter. A DPD step runs the PA's
forward on the DPD's output and the PA's backward to the DPD's output between the DPD's forward and backward.
Each model keeps its own tensors, reached through device pointer tables (one row per model). Every sum's order
depends only on the batch, frame and hidden sizes, so a model's numbers are bitwise the same alone or in a group,
eager or replayed (tests/gpu/test_fused_step.py, test_fused_dpd_step.py); against the autograd path they agree to
float32 rounding, not bitwise (AdamW's ``1 - beta`` is formed in float32 here). Used by training/fast_path.py and
training/group.py alike; the trainer's ``fused_step=False`` keeps the autograd step.
"""
from __future__ import annotations

import torch

from ..kernels import cuda_rnn, nvrtc
from ..kernels.nvrtc import FLOAT, INT, POINTER
from ..models import Cascade, CoreModel
from ..models.gru import GRUBackbone

SOURCE = "gru_step.cu"
NPTR = 32  # pointers per model in the table (gru_step.cu P_*)
HEAD_ROWS = 64  # rows per head block (gru_step.cu HEAD_ROWS)
RED_THREADS = 256  # gru_step.cu RED_THREADS
_FUNCS = ("head", "head_bwd", "out", "reduce", "update", "advance")


def _is_gru_model(net) -> bool:
    return type(net) is CoreModel and type(net.backbone) is GRUBackbone


def _trained_backbone(net):
    """The backbone a fused step trains: a PA model's, or a cascade's DPD's."""
    return (net.dpd if type(net) is Cascade else net).backbone


def model_eligibility(net, crit) -> str | None:
    """The model and loss part of :func:`eligibility` (known at set-up, before the optimizer's placement)."""
    if type(net) is Cascade:
        if not (_is_gru_model(net.dpd) and _is_gru_model(net.pa)):
            return "not a GRU DPD through a GRU PA"
        if net.peak_limit is not None:
            return "a peak limit on the DPD output"
        kernels = (net.dpd.backbone.kernel, net.pa.backbone.kernel)
    elif _is_gru_model(net):
        kernels = (net.backbone.kernel,)
    else:
        return "not a GRU PA model"
    if any(k != "fast" for k in kernels):
        return "the reference kernel"
    if type(crit) not in (torch.nn.MSELoss, torch.nn.L1Loss) or crit.reduction != "mean":
        return f"loss {type(crit).__name__} (the fused step has MSE and L1, mean)"
    return None


def _gru_reason(bb, what: str) -> str | None:
    """Why the GRU backbone ``bb`` cannot be one of the fused step's models (None: it can)."""
    rnn = bb.rnn
    if rnn.num_layers != 1 or rnn.input_size != 2 or not rnn.bias or bb.fc_out.bias is None \
            or bb.fc_out.out_features != 2:
        return f"only a 1-layer GRU {what} with biases and the I/Q head is fused"
    if not 1 <= rnn.hidden_size <= cuda_rnn.MAX_HIDDEN:
        return f"{what} hidden size {rnn.hidden_size} above {cuda_rnn.MAX_HIDDEN}"
    if not all(p.is_contiguous() and p.dtype == torch.float32 for p in _params(bb)):
        return f"a {what} parameter is not contiguous float32"
    return None


def _params(bb) -> list:
    """The six tensors of a 1-layer GRU backbone in the kernels' order (gru_step.cu P_W_IH … P_B_FC)."""
    rnn = bb.rnn
    return [rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, rnn.bias_hh_l0, bb.fc_out.weight, bb.fc_out.bias]


def eligibility(step) -> str | None:
    """None when ``step`` (a CudaGraphStep after ``prepare_capture``) can train through the fused step, else why not."""
    if not step.fused_allowed:
        return "disabled for this run"
    reason = model_eligibility(step.net, step.criterion)
    if reason is not None:
        return reason
    net = step.net
    dpd = type(net) is Cascade
    bb = _trained_backbone(net)
    reason = _gru_reason(bb, "DPD" if dpd else "model") or (_gru_reason(net.pa.backbone, "PA") if dpd else None)
    if reason is not None:
        return reason
    want = _params(bb)
    if len(step.trainable) != 6 or any(a is not b for a, b in zip(step.trainable, want)):
        return "the trainable parameters are not the GRU's and the head's"
    if dpd and any(p.requires_grad for p in _params(net.pa.backbone)):
        return "the PA is not frozen"
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
    """What the members of one fused step must share (a DPD's: its PA's hidden size too)."""
    net = step.net
    rnn = _trained_backbone(net).rnn
    pa_hidden = net.pa.backbone.rnn.hidden_size if type(net) is Cascade else 0
    return (rnn.hidden_size, pa_hidden, step.batch_size, step.loader.frame_length, step.loader.stride,
            type(step.criterion).__name__, step.device, step.graph_opt.beta1, step.graph_opt.beta2,
            step.graph_opt.eps)


def build(members) -> tuple["FusedGRUStep | None", str | None]:
    """``(FusedGRUStep(members) or FusedDPDStep(members), None)``, or ``(None, reason)`` when its kernels cannot be
    built or loaded here (the autograd step then stays, as for an ineligible model)."""
    cls = FusedDPDStep if type(members[0].net) is Cascade else FusedGRUStep
    try:
        return cls(members), None
    except (RuntimeError, torch.OutOfMemoryError) as exc:  # KernelBuildError, a driver error, no memory
        return None, f"the fused step is unavailable ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})"


class FusedGRUStep:
    """The fused step of ``members`` (CudaGraphSteps that passed :func:`eligibility`, equal :func:`shape_of`): GRU
    PA models. :meth:`launch` enqueues one training step of every member on the current stream (capturable)."""

    def __init__(self, members):
        if not members or len({shape_of(s) for s in members}) != 1:
            raise ValueError("the members of a fused step must share hidden size, batch, frame, stride and loss")
        self.members = list(members)
        s0 = self.members[0]
        self.H, self.B, self.T, self.stride = _trained_backbone(s0.net).rnn.hidden_size, s0.batch_size, \
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
        self.n_param = 6 * H + 3 * H * H + 3 * H + 3 * H + 2 * H + 2
        self.n_red = -(-self.n_param // RED_THREADS)
        self.xg, self.hseq, self.dh = self._buf(M, rows, 2), self._buf(M, rows, H), self._buf(M, rows, H)
        self.saved = self._buf(M, rows, 5 * H)
        self.part_loss, self.part_head = self._buf(M, self.n_head), self._buf(M, self.n_head, 2 * H + 2)
        self.part_w = self._buf(M, self.n_w, 3 * H, H + 4)
        self.part_norm = self._buf(M, self.n_red)
        self.clips = torch.tensor([float(s.clip) for s in self.members], dtype=torch.float32, device=self.device)
        self.ptrs = self._table([self._row(i, s) for i, s in enumerate(self.members)])

    def _buf(self, *shape) -> torch.Tensor:
        return torch.zeros(*shape, dtype=torch.float32, device=self.device)

    def _table(self, rows: list[list[int]]) -> torch.Tensor:
        return torch.tensor([r + [0] * (NPTR - len(r)) for r in rows], dtype=torch.int64, device=self.device)

    def _row(self, i: int, s) -> list[int]:
        """Member i's row of the trained models' table (gru_step.cu P_*)."""
        opt = s.optimizer
        params = list(s.trainable)
        row = [p.data_ptr() for p in params] + [p.grad.data_ptr() for p in params] \
            + [opt.state[p]["exp_avg"].data_ptr() for p in params] \
            + [opt.state[p]["exp_avg_sq"].data_ptr() for p in params]
        row += [s.loader.x.data_ptr(), s.loader.y.data_ptr(), s.perm.data_ptr(), s.counter.data_ptr(),
                s.epoch_losses.data_ptr(), s.graph_opt.table.data_ptr(), self.clips.data_ptr() + 4 * i]
        return row

    def launch(self) -> None:
        """One training step of every member (see the module docstring); the batch is each member's ``counter``."""
        self._forward()
        self._loss(self.mod, self.ptrs, self.hseq, self.dh, self.part_head)
        self._backward_update()

    def _forward(self) -> None:
        """The trained models' recurrences over their gathered batches (hseq, the saved gates, the inputs xg)."""
        self.rnn_mod.launch("gru_fwd_m", (self.B, len(self.members)), self.rnn_threads, 0,
                            (self.ptrs, self.xg, self.hseq, self.saved, self.B, self.T, self.stride),
                            (POINTER,) * 4 + (INT,) * 3)

    def _loss(self, mod, ptrs, hseq, dh, part_head) -> None:
        """The head (the outputs' table ``ptrs``, their hidden sequence ``hseq``): the loss partials, dL/dh into
        ``dh`` and the head's partials into ``part_head``."""
        n_out = self.rows * 2
        scale = (1.0 if self.l1 else 2.0) / n_out
        mod.launch("head", (self.n_head, len(self.members)), HEAD_ROWS, 0,
                   (ptrs, hseq, dh, self.part_loss, part_head, self.B, self.T, self.stride, int(self.l1), scale),
                   (POINTER,) * 5 + (INT,) * 4 + (FLOAT,))

    def _backward_update(self) -> None:
        """From dL/dh of the trained models (``dh``) and their head partials: the recurrence's partials, the
        gradients, clipping, AdamW, the loss slot and the counter."""
        M, B, T, P = len(self.members), self.B, self.T, POINTER
        n_out = self.rows * 2
        self.rnn_mod.launch("gru_bwd_m", (B, M), self.rnn_threads, 0,
                            (self.ptrs, self.dh, self.saved, self.xg, self.part_w, B, T), (P,) * 5 + (INT, INT))
        self.mod.launch("reduce", (self.n_red, M), RED_THREADS, 0,
                        (self.ptrs, self.part_head, self.part_w, self.part_norm, self.n_head, self.n_w),
                        (P,) * 4 + (INT, INT))
        self.mod.launch("update", (self.n_red, M), RED_THREADS, 0,
                        (self.ptrs, self.part_norm, self.beta1, self.beta2, self.eps), (P, P, FLOAT, FLOAT, FLOAT))
        self.mod.launch("advance", M, 32, 0, (self.ptrs, self.part_loss, self.n_head, float(n_out)),
                        (P, P, INT, FLOAT))


class FusedDPDStep(FusedGRUStep):
    """The fused step of GRU DPD members, each through its own frozen GRU PA (models/cascade.py, no peak limit):
    the DPD's forward and output u, the PA's forward on u, the loss, the PA's backward down to dL/du, then the DPD's
    backward and update as :class:`FusedGRUStep`'s (the ten launches: gru_step.cu's header). The PA's tables: one for
    its recurrences (input: the member's u, frame b = row b, an identity frame list and a zero counter) and one for
    its head and loss (the member's target, permutation and counter)."""

    def __init__(self, members):
        super().__init__(members)
        M, rows, dev = len(self.members), self.rows, self.device
        self.Hp = Hp = self.members[0].net.pa.backbone.rnn.hidden_size
        self.pa_rnn_mod, self.pa_rnn_threads = cuda_rnn._module(Hp, 3, dev)
        self.pa_mod = nvrtc.module(SOURCE, {"HID": Hp}, dev, {name: 0 for name in _FUNCS}, cuda_rnn.OPTIONS)
        self.u, self.pa_xg = self._buf(M, rows, 2), self._buf(M, rows, 2)  # pa_xg: gru_fwd_m's copy of u, unused
        self.pa_hseq, self.pa_dh = self._buf(M, rows, Hp), self._buf(M, rows, Hp)
        self.pa_saved = self._buf(M, rows, 5 * Hp)
        self.pa_part_head = self._buf(M, self.n_head, 2 * Hp + 2)  # the frozen PA's head gradients: not used
        self.pa_warps = self.pa_rnn_threads // 32  # rnn.cu NW: the partials of dL/du per row (gru_bwd_du_m)
        self.pa_du = self._buf(M, rows, self.pa_warps, 2)
        self.frames = torch.arange(self.B, dtype=torch.int64, device=dev)
        self.zero = torch.zeros(1, dtype=torch.int64, device=dev)
        self.pa_ptrs = self._table([self._pa_row(i, s, recurrence=True) for i, s in enumerate(self.members)])
        self.loss_ptrs = self._table([self._pa_row(i, s, recurrence=False) for i, s in enumerate(self.members)])

    def _pa_row(self, i: int, s, recurrence: bool) -> list[int]:
        """Member i's PA: its parameters (P_W_IH … P_B_FC), input u (P_X), target (P_Y), frames and counter."""
        row = [p.data_ptr() for p in _params(s.net.pa.backbone)]
        row += [0] * (24 - len(row))
        row += [self.u[i].data_ptr(), s.loader.y.data_ptr()]
        row += [self.frames.data_ptr(), self.zero.data_ptr()] if recurrence else [s.perm.data_ptr(),
                                                                                   s.counter.data_ptr()]
        return row

    def launch(self) -> None:
        """One training step of every member; the batch is each member's ``counter``."""
        M, B, T, P = len(self.members), self.B, self.T, POINTER
        self._forward()
        self.mod.launch("out", (self.n_head, M), HEAD_ROWS, 0, (self.ptrs, self.hseq, self.u, B, T),
                        (P,) * 3 + (INT,) * 2)
        # the PA's frame b is row b of u: sample b * T + t
        self.pa_rnn_mod.launch("gru_fwd_m", (B, M), self.pa_rnn_threads, 0,
                               (self.pa_ptrs, self.pa_xg, self.pa_hseq, self.pa_saved, B, T, T),
                               (P,) * 4 + (INT,) * 3)
        self._loss(self.pa_mod, self.loss_ptrs, self.pa_hseq, self.pa_dh, self.pa_part_head)
        self.pa_rnn_mod.launch("gru_bwd_du_m", (B, M), self.pa_rnn_threads, 0,
                               (self.pa_ptrs, self.pa_dh, self.pa_saved, self.pa_du, B, T), (P,) * 4 + (INT,) * 2)
        self.mod.launch("head_bwd", (self.n_head, M), HEAD_ROWS, 0,
                        (self.ptrs, self.hseq, self.dh, self.part_head, self.pa_du, self.pa_warps, B, T),
                        (P,) * 5 + (INT,) * 3)
        self._backward_update()
