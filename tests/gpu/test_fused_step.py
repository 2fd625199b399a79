"""The fused GRU training step (training/fused_step.py, kernels/gru_step.cu): a model's numbers are bitwise the same
stepped alone or with others and eagerly or from a CUDA graph; they match the autograd step of the same kernel
(cuBLAS sums, torch's reductions) to float32 rounding; a lone fast GRU run and a group use it (skipped without CUDA;
run on the GPU machine)."""
import pytest
import torch

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.data.framing import FrameLoader
from dpd_desktop.kernels.dispatch import apply_kernel
from dpd_desktop.models import build_model
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


def _series(n=4000, seed=5):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2, generator=g) * 0.4
    amp = (x ** 2).sum(1, keepdim=True)
    y = x * (1.0 - 0.3 * amp) + 0.05 * torch.roll(x, 1, 0)
    return x.to(DEV).contiguous(), y.to(DEV).contiguous()


def _member(series, seed, H=12, B=16, T=30, stride=3, lr=5e-3, wd=0.01, clip=0.0, loss="mse"):
    torch.manual_seed(seed)
    net = build_model("gru", H).to(DEV)
    assert apply_kernel(net, "fast", DEV).notes == ()
    net.train()
    trainable = [p for p in net.parameters() if p.requires_grad]
    opt = AdamW(trainable, lr=lr, weight_decay=wd)
    loader = FrameLoader(series[0], series[1], T, stride, B)
    crit = torch.nn.MSELoss() if loss == "mse" else torch.nn.L1Loss()
    step = CudaGraphStep(net, crit, trainable, clip, DEV, loader, B, optimizer=opt)
    loader.epoch()
    step.begin_epoch(None)  # as the trainer: the epoch first (its step numbers), then the capture's set-up
    step.prepare_capture()
    assert step.fused_reason is None, step.fused_reason
    return step


KINDS = [dict(seed=0), dict(seed=1, lr=2e-3, clip=0.05), dict(seed=2, wd=0.0, clip=10.0)]


@pytest.mark.parametrize("loss", ["mse", "l1"])
def test_a_model_steps_the_same_alone_or_with_others_eager_or_replayed(loss):
    series = _series()
    together, _, _ = three_ways(lambda: [_member(series, loss=loss, **k) for k in KINDS], fused_step.FusedGRUStep,
                                STEPS)
    # the members differ (their seeds and settings are not mixed up)
    assert not torch.equal(together[0].trainable[1], together[1].trainable[1])


@pytest.mark.parametrize("kind", KINDS + [dict(seed=3, loss="l1", clip=0.02)])
def test_one_fused_step_matches_the_autograd_step(kind):
    series = _series()
    fused = _member(series, **kind)
    ref = _member(series, **kind)
    fused_step.FusedGRUStep([fused]).launch()
    loss = ref._forward_backward()  # zero, gather, forward, loss, backward, clipping (torch's)
    torch.cuda.synchronize()
    assert torch.allclose(fused.epoch_losses[0], loss.detach(), rtol=1e-5, atol=0)
    for p, q in zip(fused.trainable, ref.trainable):
        scale = q.grad.abs().max()
        assert torch.allclose(p.grad, q.grad, rtol=1e-4, atol=1e-5 * float(scale)), (p.shape, scale)
    ref.graph_opt.update(ref.counter)
    for p, q in zip(fused.trainable, ref.trainable):
        assert torch.allclose(p, q, rtol=0, atol=2e-6), float((p - q).abs().max())


@pytest.mark.parametrize("H", [1, 5, 16, 17, 23, 33, 64])
def test_every_hidden_size_matches_the_autograd_step(H):
    """One slice (H <= 16) and two (above), padded k-slices (17, 33), the largest (64): gradients and update."""
    series = _series()
    fused = _member(series, seed=4, H=H, clip=0.05)
    ref = _member(series, seed=4, H=H, clip=0.05)
    fused_step.FusedGRUStep([fused]).launch()
    loss = ref._forward_backward()
    torch.cuda.synchronize()
    assert torch.allclose(fused.epoch_losses[0], loss.detach(), rtol=1e-5, atol=0)
    for p, q in zip(fused.trainable, ref.trainable):
        assert torch.allclose(p.grad, q.grad, rtol=1e-4, atol=1e-5 * float(q.grad.abs().max())), (H, p.shape)
    ref.graph_opt.update(ref.counter)
    # lr 5e-3: a first AdamW step moves an element by lr * g / (|g| + eps); where |g| is near eps the ratio follows
    # the gradient's rounding (H = 64 measured 2.1e-6 on the H200), a wrong update would be off by ~lr
    for p, q in zip(fused.trainable, ref.trainable):
        assert torch.allclose(p, q, rtol=0, atol=1e-5), (H, float((p - q).abs().max()))


def test_a_lone_fast_gru_run_and_a_group_use_it(tmp_path):
    from dpd_desktop.training.group import TrainerGroup

    ds = make_demo_dataset(seed=2, n_train=3000, n_val=4096, n_test=4096)
    base = dict(step="pa", dataset="demo", backbone="gru", hidden_size=8, epochs=1, frame_length=50, stride=4,
                batch_size=16, device="cuda", kernel="fast")
    ws = Workspace(tmp_path)
    t = Trainer(ExperimentConfig(**base, seed=0), dataset=ds, workspace=ws)
    r = t.run()
    assert r.state == "succeeded", r.message
    assert t.fast_step.fused is not None and t.fast_step.fused.members == [t.fast_step]
    trainers = [Trainer(ExperimentConfig(**base, seed=s), dataset=ds, workspace=ws) for s in (0, 1)]
    group = TrainerGroup(trainers)
    assert [r.state for r in group.run()] == ["succeeded"] * 2
    assert len(group._graph.fused.members) == 2
    # LSTM and the reference kernel keep the autograd step
    t2 = Trainer(ExperimentConfig(**{**base, "backbone": "lstm"}, seed=0), dataset=ds, workspace=ws)
    assert t2.run().state == "succeeded"
    assert t2.fast_step.fused is None and t2.fast_step.fused_reason == "not a GRU PA model"
