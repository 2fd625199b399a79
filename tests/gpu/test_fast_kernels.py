"""The fast CUDA recurrence kernels (dpd_desktop/kernels/cuda_rnn.py, rnn.cu), run on the GPU machine.

- gradients of every parameter and of the input (and h0, c0) within 1e-5 relative (max |Δ| / max |ref|) of a
  float64 computation of the same equations (torch.nn.GRU / nn.LSTM in float64 on the CPU, same weights);
- forward within 1e-5 of cuDNN with TF32 off;
- repeated runs and CUDA-graph replays bitwise equal to eager runs;
- every recurrent family and a DPD cascade train in fast mode through the trainer, CUDA graph ≡ eager bitwise;
- shapes beyond the kernels fall back with a reason.
Skipped without CUDA.
"""
import pytest
import torch
from torch import nn

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.kernels.dispatch import apply_kernel, run_recurrent, unsupported_reason
from dpd_desktop.kernels import cuda_rnn, nvrtc
from dpd_desktop.models import build_model
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training.trainer import Trainer
from test_fast_path_equivalence import _assert_same  # tests/gpu (rootdir import mode, like tests/'s helpers)

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the GPU machine)")]

DEV = torch.device("cuda")
REL = 1e-5


def _rel(a: torch.Tensor, ref: torch.Tensor) -> float:
    return ((a.double().cpu() - ref).abs().max() / ref.abs().max()).item()


def _run_fast(rnn, x, h0):
    """Our kernels over every layer of ``rnn`` (the dispatcher's code path)."""
    return run_recurrent(rnn, x, h0, "fast")


def _make(kind, I, H, layers=1, bias=True, seed=0):
    torch.manual_seed(seed)
    cls = nn.GRU if kind == "gru" else nn.LSTM
    rnn = cls(I, H, num_layers=layers, bias=bias, batch_first=True)
    with torch.no_grad():  # larger than the default init: gates away from their linear region
        for p in rnn.parameters():
            p.uniform_(-0.6, 0.6)
    return rnn


@pytest.mark.parametrize("kind,I,H,layers,bias", [
    ("gru", 2, 23, 1, True), ("gru", 6, 8, 1, False), ("gru", 2, 64, 1, True), ("gru", 6, 40, 2, True),
    ("gru", 2, 32, 1, True), ("gru", 2, 12, 1, True), ("lstm", 2, 23, 1, True), ("lstm", 2, 64, 1, True),
    ("lstm", 3, 5, 2, False), ("lstm", 2, 16, 1, True),
])
def test_gradients_match_float64(kind, I, H, layers, bias):
    _check_gradients(kind, I, H, layers, bias)


@pytest.mark.parametrize("kind,H,ks,T", [
    ("gru", 64, 4, 57), ("lstm", 64, 4, 57), ("gru", 23, 1, 57), ("lstm", 23, 1, 57), ("lstm", 23, 4, 57),
    ("gru", 33, 2, 57), ("gru", 8, 4, 3), ("lstm", 64, 2, 1), ("gru", 64, 2, 6),
])
def test_every_slice_layout_matches_float64(kind, H, ks, T, monkeypatch):
    """The other k-slice layouts of rnn.cu (the benchmark's variants) and frames shorter than the prefetch ring."""
    monkeypatch.setattr(cuda_rnn, "slices", lambda hidden, gates: ks)
    _check_gradients(kind, 2, H, 1, True, T=T)


def _check_gradients(kind, I, H, layers, bias, B=6, T=57):
    rnn64 = _make(kind, I, H, layers, bias).double()
    rnn32 = _make(kind, I, H, layers, bias).to(DEV)
    torch.manual_seed(1)
    x = torch.randn(B, T, I, dtype=torch.float64)
    h0 = 0.5 * torch.randn(layers, B, H, dtype=torch.float64)
    dy = torch.randn(B, T, H, dtype=torch.float64)
    x64, h64 = x.clone().requires_grad_(), h0.clone().requires_grad_()
    y64 = rnn64(x64, (h64, h64))[0] if kind == "lstm" else rnn64(x64, h64)[0]
    y64.backward(dy)
    x32 = x.float().to(DEV).requires_grad_()
    h32 = h0.float().to(DEV).requires_grad_()
    y32 = _run_fast(rnn32, x32, h32)
    y32.backward(dy.float().to(DEV))
    assert _rel(y32, y64.detach()) <= REL
    assert _rel(x32.grad, x64.grad) <= REL, "dL/dx"
    assert _rel(h32.grad, h64.grad) <= REL, "dL/dh0"
    for (n64, p64), (n32, p32) in zip(rnn64.named_parameters(), rnn32.named_parameters()):
        assert n64 == n32
        assert _rel(p32.grad, p64.grad) <= REL, n32


@pytest.mark.parametrize("kind", ["gru", "lstm"])
@pytest.mark.parametrize("H", [8, 23, 64])
def test_forward_matches_cudnn_without_tf32(kind, H, monkeypatch):
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    torch.manual_seed(0)
    rnn = (nn.GRU if kind == "gru" else nn.LSTM)(2, H, batch_first=True).to(DEV)  # PyTorch's default init
    torch.manual_seed(2)
    B, T = 64, 200
    x = torch.randn(B, T, 2, device=DEV)
    h0 = 0.3 * torch.randn(1, B, H, device=DEV)
    with torch.no_grad():
        ref = rnn(x, (h0, h0))[0] if kind == "lstm" else rnn(x, h0)[0]
        ours = _run_fast(rnn, x, h0)
    assert (ours - ref).abs().max().item() <= 1e-5


@pytest.mark.parametrize("kind", ["gru", "lstm"])
@pytest.mark.parametrize("H", [23, 64])
def test_graph_replay_and_repeats_bitwise(kind, H):
    """Eager twice and a captured graph's replay: forward output and every gradient bitwise equal (one warp per
    batch row at 23 units, four warps with a block barrier per step at 64)."""
    rnn = _make(kind, 2, H).to(DEV)
    torch.manual_seed(3)
    x = torch.randn(64, 200, 2, device=DEV)
    h0 = 0.3 * torch.randn(1, 64, H, device=DEV)
    dy = torch.randn(64, 200, H, device=DEV)
    params = list(rnn.parameters())

    def step():
        for p in params:
            p.grad = None if p.grad is None else p.grad.zero_()
        y = _run_fast(rnn, x, h0)
        y.backward(dy)
        return y.detach()

    y1 = step().clone()
    g1 = [p.grad.clone() for p in params]
    y2 = step().clone()
    assert torch.equal(y1, y2) and all(torch.equal(a, p.grad) for a, p in zip(g1, params))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y_static = step()
    for p in params:
        p.grad.fill_(123.0)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(y_static, y1)
    assert all(torch.equal(a, p.grad) for a, p in zip(g1, params))


def test_no_grad_forward_equals_training_forward():
    rnn = _make("gru", 2, 23).to(DEV)
    x = torch.randn(3, 500, 2, device=DEV)
    h0 = torch.zeros(1, 3, 23, device=DEV)
    with torch.no_grad():
        a = _run_fast(rnn, x, h0)
    b = _run_fast(rnn, x, h0)
    assert b.requires_grad and torch.equal(a, b.detach())


def test_unsupported_shapes_give_reasons():
    assert unsupported_reason(nn.GRU(2, 65, batch_first=True).to(DEV), DEV).startswith("hidden size 65")
    assert "float32" in unsupported_reason(nn.GRU(2, 8, batch_first=True).to(DEV).double(), DEV)
    assert unsupported_reason(nn.LSTM(2, 64, batch_first=True).to(DEV), DEV) is None
    assert unsupported_reason(nn.GRU(2, 23, batch_first=True).to(DEV), DEV) is None


def test_module_cache_is_reused(tmp_path, monkeypatch):
    """A second process-level build of the same module reads the cubin from the cache (no compile)."""
    monkeypatch.setenv("DPD_DESKTOP_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setattr(nvrtc, "_MODULES", {})
    n = len(nvrtc.LOAD_LOG)
    cuda_rnn._module(7, 3, DEV)
    monkeypatch.setattr(nvrtc, "_MODULES", {})
    cuda_rnn._module(7, 3, DEV)
    first, second = nvrtc.LOAD_LOG[n:n + 2]
    assert not first["cached"] and first["compile_s"] > 0
    assert second["cached"] and second["compile_s"] is None
    assert len(list(tmp_path.glob("rnn-*-sm_*-nvrtc*.cubin"))) == 1


# ------------------------------------------------------------------------------------ through the trainer
@pytest.fixture(scope="module")
def ds():
    return make_demo_dataset(seed=1, n_train=3000, n_val=4096, n_test=4096)


SKIP_COLS = {"TIME:", "EPOCH_SECONDS"}


def _train(tmp_path, ds, cfg, fast_path, tag, **switches):
    t = Trainer(cfg, dataset=ds, workspace=Workspace(tmp_path / tag), fast_path=fast_path, **switches)
    r = t.run()
    assert r.state == "succeeded", r.message
    assert t.kernels.notes == (), t.kernels.notes
    for m in t.net.modules():
        if isinstance(getattr(m, "rnn", None), nn.RNNBase):
            assert m.kernel == "fast"
    return t, r


def _same(tf, rf, te, re_):
    _assert_same(tf, rf, te, re_)


@pytest.mark.parametrize("backbone", ["gru", "dgru", "lstm", "tres_gru"])
def test_family_fast_kernel_graph_equals_eager(tmp_path, ds, backbone):
    # the autograd step in the graph (a GRU PA normally takes the fused step: the next test)
    cfg = ExperimentConfig(step="pa", dataset="demo", backbone=backbone, hidden_size=12, epochs=2, frame_length=50,
                           stride=1, batch_size=64, device="cuda", seed=0, kernel="fast")
    tf, rf = _train(tmp_path, ds, cfg, True, "graph", fused_step=False)
    assert tf.fast_step.fused is None
    te, re_ = _train(tmp_path, ds, cfg, False, "eager")
    _same(tf, rf, te, re_)
    # and it learned something comparable to the reference kernel (same equations)
    cfg_ref = ExperimentConfig(**{**cfg.to_dict(), "kernel": "reference"})
    tr = Trainer(cfg_ref, dataset=ds, workspace=Workspace(tmp_path / "ref"), fast_path=True)
    rr = tr.run()
    assert abs(rf.history[-1]["VAL_NMSE"] - rr.history[-1]["VAL_NMSE"]) < 0.5


def test_the_fused_gru_step_trains_as_the_eager_path_to_rounding(tmp_path, ds):
    """training/fused_step.py: its own sums, so not bitwise the autograd path's; two epochs agree closely."""
    cfg = ExperimentConfig(step="pa", dataset="demo", backbone="gru", hidden_size=12, epochs=2, frame_length=50,
                           stride=1, batch_size=64, device="cuda", seed=0, kernel="fast")
    tf, rf = _train(tmp_path, ds, cfg, True, "graph")
    te, re_ = _train(tmp_path, ds, cfg, False, "eager")
    assert tf.fast_step.fused is not None
    for a, b in zip(rf.history, re_.history, strict=True):
        assert abs(a["VAL_NMSE"] - b["VAL_NMSE"]) < 0.05, (a["VAL_NMSE"], b["VAL_NMSE"])
        assert a["TRAIN_LOSS"] == pytest.approx(b["TRAIN_LOSS"], rel=1e-3)
    for (n, a), (_, b) in zip(tf.net.named_parameters(), te.net.named_parameters()):
        assert torch.allclose(a, b, rtol=0, atol=2e-3), n


def test_dpd_cascade_fast_kernel(tmp_path, ds):
    ws = Workspace(tmp_path / "pa")
    pa_cfg = ExperimentConfig(step="pa", dataset="demo", backbone="gru", hidden_size=10, epochs=1, frame_length=50,
                              stride=4, device="cuda")
    pa_res = Trainer(pa_cfg, dataset=ds, workspace=ws).run()
    assert pa_res.state == "succeeded", pa_res.message
    cfg = ExperimentConfig(step="dpd", dataset="demo", backbone="lstm", hidden_size=8, epochs=2, frame_length=50,
                           stride=1, device="cuda", pa_run=str(pa_res.run_dir), grad_clip=0.5, kernel="fast")
    tf, rf = _train(tmp_path, ds, cfg, True, "graph")
    te, re_ = _train(tmp_path, ds, cfg, False, "eager")
    assert [m.kernel for m in tf.net.modules() if hasattr(m, "kernel")] == ["fast", "fast"]  # DPD and PA
    _same(tf, rf, te, re_)


def test_apply_kernel_falls_back_for_large_hidden():
    net = build_model("gru", 80).to(DEV)
    notes = apply_kernel(net, "fast", DEV).notes
    assert [m.kernel for m in net.modules() if hasattr(m, "kernel")] == ["reference"]
    assert len(notes) == 1 and "hidden size 80" in notes[0], notes
