"""The fused steps' launch plan (training/fused_step.py), checked without a GPU: the kernels are replaced by a
recorder, so the order of the launches, their grids and argument counts and the pointer tables are checked here; the
kernels' numbers are tests/gpu/test_fused_step.py's and test_fused_dpd_step.py's."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from dpd_desktop.kernels import cuda_rnn, nvrtc
from dpd_desktop.models import Cascade, build_model
from dpd_desktop.training import fused_step

B, T, STRIDE, N = 4, 10, 3, 200


class _Recorder:
    def __init__(self, log, hidden):
        self.log, self.hidden = log, hidden

    def launch(self, name, grid, block, smem, args, types):
        assert len(args) == len(types), name
        self.log.append((name, self.hidden, grid, block, args))


@pytest.fixture()
def launches(monkeypatch):
    log = []
    monkeypatch.setattr(cuda_rnn, "_module", lambda h, g, dev: (_Recorder(log, h), cuda_rnn._threads(h, 2)))
    monkeypatch.setattr(nvrtc, "module", lambda src, defines, dev, funcs, opts: _Recorder(log, defines["HID"]))
    return log


def _step(net, trainable, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, 2, generator=g)
    for p in trainable:
        p.grad = torch.zeros_like(p)
    state = {p: {"exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)} for p in trainable}
    return SimpleNamespace(net=net, trainable=trainable, criterion=torch.nn.MSELoss(), clip=0.0, batch_size=B,
                           device=torch.device("cpu"), optimizer=SimpleNamespace(state=state),
                           loader=SimpleNamespace(x=x, y=x.clone(), frame_length=T, stride=STRIDE),
                           perm=torch.zeros(N, dtype=torch.int64), counter=torch.zeros(1, dtype=torch.int64),
                           epoch_losses=torch.zeros(8),
                           graph_opt=SimpleNamespace(table=torch.zeros(8, 3), beta1=0.9, beta2=0.999, eps=1e-8))


def test_a_pa_step_is_six_launches(launches):
    steps = [_step(net, list(net.parameters()), i) for i, net in enumerate([build_model("gru", 6) for _ in range(2)])]
    f = fused_step.build(steps)[0]
    assert type(f) is fused_step.FusedGRUStep
    f.launch()
    assert [(n, h) for n, h, *_ in launches] == [("gru_fwd_m", 6), ("head", 6), ("gru_bwd_m", 6), ("reduce", 6),
                                                ("update", 6), ("advance", 6)]
    assert launches[0][2] == (B, 2) and launches[1][2] == (1, 2)  # 40 rows: one head block per member


def test_a_dpd_step_runs_the_pa_between_the_dpds_forward_and_backward(launches):
    nets = [Cascade(build_model("gru", 6), build_model("gru", 5)).freeze_pa() for _ in range(2)]
    steps = [_step(n, [p for p in n.parameters() if p.requires_grad], i) for i, n in enumerate(nets)]
    f = fused_step.build(steps)[0]
    assert type(f) is fused_step.FusedDPDStep
    f.launch()
    assert [(n, h) for n, h, *_ in launches] == [
        ("gru_fwd_m", 6), ("out", 6), ("gru_fwd_m", 5), ("head", 5), ("gru_bwd_du_m", 5), ("head_bwd", 6),
        ("gru_bwd_m", 6), ("reduce", 6), ("update", 6), ("advance", 6)]
    by = {(n, h): args for n, h, _, _, args in launches}
    # the PA's recurrence reads u through its own table (frame b = row b: stride T), its loss the member's target
    assert by[("gru_fwd_m", 5)][0] is f.pa_ptrs and by[("gru_fwd_m", 5)][-1] == T
    assert by[("head", 5)][0] is f.loss_ptrs and by[("gru_fwd_m", 6)][-1] == STRIDE
    assert by[("head_bwd", 6)][4] is f.pa_du and by[("head_bwd", 6)][5] == f.pa_warps
    for i, (s, net) in enumerate(zip(steps, nets)):
        pa = [net.pa.backbone.rnn.weight_ih_l0, net.pa.backbone.rnn.weight_hh_l0]
        rec, loss = f.pa_ptrs[i].tolist(), f.loss_ptrs[i].tolist()
        assert rec[:2] == loss[:2] == [p.data_ptr() for p in pa]
        assert rec[24] == loss[24] == f.u[i].data_ptr() and rec[25] == s.loader.y.data_ptr()
        assert rec[26:28] == [f.frames.data_ptr(), f.zero.data_ptr()]
        assert loss[26:28] == [s.perm.data_ptr(), s.counter.data_ptr()]
        assert f.ptrs[i, 0].item() == net.dpd.backbone.rnn.weight_ih_l0.data_ptr()
    assert f.frames.tolist() == list(range(B))
