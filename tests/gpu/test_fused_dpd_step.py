"""The fused DPD training step (training/fused_step.py FusedDPDStep; kernels/gru_step.cu out, head_bwd; rnn.cu
gru_bwd_du_m): a GRU DPD through its frozen GRU PA. A member's numbers are bitwise the same stepped alone or with
others and eagerly or from a CUDA graph; they match the autograd step through the same cascade to float32 rounding;
a lone fast DPD run and a DPD group use it, and only the DPD's parameters move (skipped without CUDA; run on the
GPU machine)."""
import pytest
import torch

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.data.framing import FrameLoader
from dpd_desktop.kernels.dispatch import apply_kernel
from dpd_desktop.models import Cascade, build_model
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training import fused_step
from dpd_desktop.training.fast_path import CudaGraphStep
from dpd_desktop.training.optim import AdamW
from dpd_desktop.training.trainer import Trainer
from fused_checks import three_ways  # tests/fused_checks.py

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the GPU machine)")]

DEV = torch.device("cuda", 0)
STEPS = 6


def _series(n=4000, seed=7):
    """x: the DPD's input; y: its target (x itself, a unit-gain linear PA's wish)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2, generator=g) * 0.4
    return x.to(DEV).contiguous(), x.clone().to(DEV).contiguous()


def _member(series, seed, Hd=10, Hp=8, B=16, T=30, stride=3, lr=5e-3, wd=0.01, clip=0.0, loss="mse", pa_seed=100):
    torch.manual_seed(pa_seed)
    pa = build_model("gru", Hp)
    torch.manual_seed(seed)
    dpd = build_model("gru", Hd)
    net = Cascade(dpd, pa).freeze_pa().to(DEV)
    assert apply_kernel(net, "fast", DEV).notes == ()
    net.train()
    trainable = [p for p in net.parameters() if p.requires_grad]
    assert len(trainable) == 6
    opt = AdamW(trainable, lr=lr, weight_decay=wd)
    loader = FrameLoader(series[0], series[1], T, stride, B)
    crit = torch.nn.MSELoss() if loss == "mse" else torch.nn.L1Loss()
    step = CudaGraphStep(net, crit, trainable, clip, DEV, loader, B, optimizer=opt)
    loader.epoch()
    step.begin_epoch(None)
    step.prepare_capture()
    assert step.fused_reason is None, step.fused_reason
    return step


KINDS = [dict(seed=0), dict(seed=1, lr=2e-3, clip=0.05, pa_seed=101), dict(seed=2, wd=0.0, clip=10.0, pa_seed=102)]


@pytest.mark.parametrize("loss", ["mse", "l1"])
def test_a_dpd_steps_the_same_alone_or_with_others_eager_or_replayed(loss):
    series = _series()
    pa_before = []

    def built(members):  # the group's step as the trainer builds it, the PA's parameters kept before it steps
        pa_before.extend(p.detach().clone() for p in members[0].net.pa.parameters())
        f = fused_step.build(members)[0]
        assert isinstance(f, fused_step.FusedDPDStep)
        return f

    together, _, _ = three_ways(lambda: [_member(series, loss=loss, **k) for k in KINDS], fused_step.FusedDPDStep,
                                STEPS, group=built)
    assert not torch.equal(together[0].trainable[1], together[1].trainable[1])
    # the PA stays frozen: its parameters are bitwise untouched
    for p, q in zip(together[0].net.pa.parameters(), pa_before, strict=True):
        assert torch.equal(p, q)


def _check_against_autograd(kind, **shape):
    series = _series()
    fused = _member(series, **kind, **shape)
    ref = _member(series, **kind, **shape)
    fused_step.FusedDPDStep([fused]).launch()
    loss = ref._forward_backward()  # zero, gather, cascade forward, loss, backward through the PA, clipping (torch's)
    torch.cuda.synchronize()
    assert torch.allclose(fused.epoch_losses[0], loss.detach(), rtol=1e-5, atol=0), \
        (float(fused.epoch_losses[0]), float(loss))
    for p, q in zip(fused.trainable, ref.trainable):
        scale = q.grad.abs().max()
        assert float(scale) > 0
        assert torch.allclose(p.grad, q.grad, rtol=1e-4, atol=1e-5 * float(scale)), \
            (p.shape, float(scale), float((p.grad - q.grad).abs().max()))
    ref.graph_opt.update(ref.counter)
    for p, q in zip(fused.trainable, ref.trainable):
        assert torch.allclose(p, q, rtol=0, atol=1e-5), float((p - q).abs().max())


@pytest.mark.parametrize("kind", KINDS + [dict(seed=3, loss="l1", clip=0.02)])
def test_one_fused_dpd_step_matches_the_autograd_step(kind):
    _check_against_autograd(kind)


@pytest.mark.parametrize("Hd,Hp", [(1, 5), (5, 17), (16, 16), (17, 23), (23, 23), (33, 10), (64, 64)])
def test_every_dpd_and_pa_hidden_size_matches_the_autograd_step(Hd, Hp):
    """One slice and two, padded slices, DPD and PA of different sizes, the largest."""
    _check_against_autograd(dict(seed=4, clip=0.05), Hd=Hd, Hp=Hp)


def test_the_short_last_frame_rows_and_a_ragged_head_block():
    """B*T not a multiple of the head's 64 rows (16 * 29 = 464): the last block's rows past the batch are ignored."""
    _check_against_autograd(dict(seed=5), T=29)


def test_a_lone_fast_dpd_run_and_a_dpd_group_use_it(tmp_path):
    from dpd_desktop.training.group import TrainerGroup

    ds = make_demo_dataset(seed=2, n_train=3000, n_val=4096, n_test=4096)
    base = dict(dataset="demo", backbone="gru", epochs=1, frame_length=50, stride=4, batch_size=16, device="cuda",
                kernel="fast")
    ws = Workspace(tmp_path)
    pa = Trainer(ExperimentConfig(step="pa", hidden_size=8, seed=0, **base), dataset=ds, workspace=ws).run()
    assert pa.state == "succeeded", pa.message
    dpd = dict(step="dpd", hidden_size=6, pa_run=pa.run_id, **base)
    t = Trainer(ExperimentConfig(**dpd, seed=0), dataset=ds, workspace=ws)
    r = t.run()
    assert r.state == "succeeded", r.message
    assert isinstance(t.fast_step.fused, fused_step.FusedDPDStep) and t.fast_step.fused.members == [t.fast_step]
    trainers = [Trainer(ExperimentConfig(**dpd, seed=s), dataset=ds, workspace=ws) for s in (0, 1)]
    group = TrainerGroup(trainers)
    assert [x.state for x in group.run()] == ["succeeded"] * 2
    assert isinstance(group._graph.fused, fused_step.FusedDPDStep) and len(group._graph.fused.members) == 2
    # an LSTM DPD keeps the autograd step
    t2 = Trainer(ExperimentConfig(**{**dpd, "backbone": "lstm"}, seed=0), dataset=ds, workspace=ws)
    assert t2.run().state == "succeeded"
    assert t2.fast_step.fused is None and t2.fast_step.fused_reason == "not a GRU DPD through a GRU PA"
