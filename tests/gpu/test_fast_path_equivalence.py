"""CUDA fast path ≡ eager training, bitwise (run on the GPU machine; skipped without CUDA).

After several epochs from the same seed, with the CUDA graph on and off: parameters, last gradients and optimizer
state are torch.equal, the history (every metric column) is identical and so is the selected checkpoint. Covers
the five families as PA, DPD → frozen-PA cascades, active clipping, learning-rate drops mid-run and a short final
batch (2951 frames at batch 64).
"""
import math

import pytest
import torch

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.runs.artifacts import load_checkpoint
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training.trainer import Trainer

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the GPU machine)")]

FAMILIES = ["gru", "dgru", "lstm", "tres_gru", "rvtdcnn"]
SKIP_COLS = {"TIME:", "EPOCH_SECONDS"}


@pytest.fixture(scope="module")
def ds():
    return make_demo_dataset(seed=1, n_train=3000, n_val=4096, n_test=4096)


def _run(tmp_path, ds, cfg, fast, tag, **switches):
    ws = Workspace(tmp_path / tag)
    t = Trainer(cfg, dataset=ds, workspace=ws, fast_path=fast, **switches)
    res = t.run()
    assert res.state == "succeeded", res.message
    return t, res


def _assert_same(t_fast, r_fast, t_eager, r_eager, optimizer_in_graph=True):
    assert t_fast.fast_path_status == "on"
    assert t_fast.fast_step is not None and t_fast.fast_step.captures >= 1
    if optimizer_in_graph:
        assert t_fast.fast_step.optimizer_in_graph, t_fast.fast_step.optimizer_note
    assert t_eager.fast_path_status.startswith("off")
    assert len(r_fast.history) == len(r_eager.history)
    for a, b in zip(r_fast.history, r_eager.history):
        for k in a:
            if k in SKIP_COLS:
                continue
            va, vb = a[k], b[k]
            if isinstance(va, float) and math.isnan(va):
                assert math.isnan(vb), k
            else:
                assert va == vb, f"epoch {a['EPOCH']} column {k}: {va!r} != {vb!r}"
    assert r_fast.best_epoch == r_eager.best_epoch
    pa, _ = load_checkpoint(r_fast.run_dir / "best.pt")
    pb, _ = load_checkpoint(r_eager.run_dir / "best.pt")
    assert list(pa) == list(pb) and all(torch.equal(pa[k], pb[k]) for k in pa)
    for (na, a), (nb, b) in zip(t_fast.net.named_parameters(), t_eager.net.named_parameters()):
        assert torch.equal(a, b), f"parameter {na}"
        assert (a.grad is None) == (b.grad is None), f"gradient presence {na}"
        if a.grad is not None:
            assert torch.equal(a.grad, b.grad), f"gradient {na}"
    sa, sb = t_fast.optimizer.state_dict(), t_eager.optimizer.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    for i in sa["state"]:
        for k in sa["state"][i]:
            assert torch.equal(torch.as_tensor(sa["state"][i][k]), torch.as_tensor(sb["state"][i][k])), (i, k)


@pytest.mark.parametrize("backbone", FAMILIES)
def test_pa_fast_equals_eager(tmp_path, ds, backbone):
    cfg = ExperimentConfig(step="pa", dataset="demo", backbone=backbone, hidden_size=12, epochs=3, frame_length=50,
                           stride=1, batch_size=64, device="cuda", seed=0)
    tf, rf = _run(tmp_path, ds, cfg, True, "fast")
    te, re_ = _run(tmp_path, ds, cfg, False, "eager")
    assert tf.loader.n_frames % 64 != 0  # a short final batch every epoch
    _assert_same(tf, rf, te, re_)


def test_clipping_and_lr_drop(tmp_path, ds):
    cfg = ExperimentConfig(step="pa", dataset="demo", backbone="gru", hidden_size=12, epochs=6, frame_length=50,
                           stride=1, device="cuda", grad_clip=0.01, lr=0.05, patience=0, lr_end=1e-4)
    tf, rf = _run(tmp_path, ds, cfg, True, "fast")
    te, re_ = _run(tmp_path, ds, cfg, False, "eager")
    lrs = {row["LR"] for row in rf.history}
    assert len(lrs) > 1, f"the learning rate never dropped: {lrs}"
    _assert_same(tf, rf, te, re_)


@pytest.mark.parametrize("dpd,pa", [("gru", "gru"), ("dgru", "gru"), ("lstm", "dgru"), ("tres_gru", "gru"),
                                    ("rvtdcnn", "lstm"), ("gru", "tres_gru"), ("gru", "rvtdcnn")])
def test_dpd_cascade_fast_equals_eager(tmp_path, ds, dpd, pa):
    ws = Workspace(tmp_path / "pa")
    pa_cfg = ExperimentConfig(step="pa", dataset="demo", backbone=pa, hidden_size=10, epochs=1, frame_length=50,
                              stride=4, device="cuda")
    pa_res = Trainer(pa_cfg, dataset=ds, workspace=ws).run()
    assert pa_res.state == "succeeded", pa_res.message
    cfg = ExperimentConfig(step="dpd", dataset="demo", backbone=dpd, hidden_size=8, epochs=3, frame_length=50,
                           stride=1, device="cuda", pa_run=str(pa_res.run_dir), grad_clip=0.5)
    tf, rf = _run(tmp_path, ds, cfg, True, "fast")
    te, re_ = _run(tmp_path, ds, cfg, False, "eager")
    _assert_same(tf, rf, te, re_)
    # the frozen PA did not change, bitwise
    pa_state, _ = load_checkpoint(pa_res.run_dir / "best.pt")
    for k, v in tf.net.pa.state_dict().items():
        assert torch.equal(v.cpu(), pa_state[k]), k


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_model_on_second_gpu(tmp_path, ds):
    cfg = ExperimentConfig(step="pa", dataset="demo", backbone="gru", hidden_size=8, epochs=2, frame_length=50,
                           stride=2, device="cuda:1")
    tf, rf = _run(tmp_path, ds, cfg, True, "fast")
    te, re_ = _run(tmp_path, ds, cfg, False, "eager")
    assert next(tf.net.parameters()).device == torch.device("cuda:1")
    _assert_same(tf, rf, te, re_)


def test_preview_keeps_graph_and_numbers(tmp_path, ds, recwarn):
    events = []
    cfg = ExperimentConfig(step="pa", dataset="demo", backbone="gru", hidden_size=12, epochs=2, frame_length=50,
                           stride=1, device="cuda", preview_every=5)
    t = Trainer(cfg, dataset=ds, workspace=Workspace(tmp_path / "p"), observers=[events.append])
    r = t.run()
    assert r.state == "succeeded"
    from dpd_desktop.runs.events import PreviewReady

    assert sum(isinstance(e, PreviewReady) for e in events) >= 10
    assert t.fast_path_status == "on" and t.fast_step.captures == 1
    assert not [w for w in recwarn if "contiguous chunk of memory" in str(w.message)]
    cfg2 = ExperimentConfig(**{**cfg.to_dict(), "preview_every": None})
    te, re_ = _run(tmp_path, ds, cfg2, False, "eager")
    _assert_same(t, r, te, re_)


def test_plain_loader_copy_mode(tmp_path, ds):
    """The plain loader (batched_loader=False): the graph copies each batch into static buffers; same numbers."""
    cfg = ExperimentConfig(step="pa", dataset="demo", backbone="gru", hidden_size=12, epochs=2, frame_length=50,
                           stride=1, device="cuda")
    tf, rf = _run(tmp_path, ds, cfg, True, "fast", batched_loader=False)
    assert not tf.fast_step.index_mode
    te, re_ = _run(tmp_path, ds, cfg, False, "eager", batched_loader=False)
    _assert_same(tf, rf, te, re_)


def test_optimizer_eager_fallback(tmp_path, ds, monkeypatch):
    """When the captured AdamW is not usable, the optimizer runs eagerly after each replay; same numbers."""
    from dpd_desktop.training.optim import GraphAdamW

    monkeypatch.setattr(GraphAdamW, "eligibility", staticmethod(lambda opt: "forced by the test"))
    cfg = ExperimentConfig(step="pa", dataset="demo", backbone="gru", hidden_size=12, epochs=2, frame_length=50,
                           stride=1, device="cuda")
    tf, rf = _run(tmp_path, ds, cfg, True, "fast")
    assert tf.fast_step.optimizer_note == "eager: forced by the test"
    te, re_ = _run(tmp_path, ds, cfg, False, "eager")
    _assert_same(tf, rf, te, re_, optimizer_in_graph=False)
    import json

    assert json.loads((rf.run_dir / "config.json").read_text())["device"]["fast_path_optimizer"] == \
        "eager: forced by the test"


def test_self_check_detects_a_wrong_update():
    """The self-check has power: an update without the fused multiply-add is rejected, the right one accepted."""
    from dpd_desktop.training import optim
    from dpd_desktop.training.optim import AdamW, GraphAdamW

    p = [torch.zeros(69, 23, device="cuda", requires_grad=True), torch.zeros(2, device="cuda", requires_grad=True)]
    g = GraphAdamW(AdamW(p, lr=5e-3, weight_decay=0.01), 8)
    assert g.self_check(5e-3) is None
    right = g._update

    def no_fma(params, grads, exp_avgs, exp_avg_sqs, ones, wd, bc2_sqrt, step_size):
        with torch.no_grad():
            torch._foreach_mul_(params, wd)
            torch._foreach_lerp_(exp_avgs, grads, 1 - g.beta1)
            torch._foreach_mul_(exp_avg_sqs, g.beta2)
            torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - g.beta2)
            d = torch._foreach_sqrt(exp_avg_sqs)
            torch._foreach_div_(d, bc2_sqrt)
            torch._foreach_add_(d, g.eps)
            q = torch._foreach_div(exp_avgs, d)
            torch._foreach_mul_(q, step_size)
            torch._foreach_add_(params, q)

    g._update = no_fma
    optim._SELF_CHECKS.clear()  # the answers are kept per process (for the real update)
    reason = g.self_check(5e-3)
    assert reason is not None and "differs" in reason
    g._update = right
    optim._SELF_CHECKS.clear()


def test_capture_failure_falls_back(tmp_path, ds, monkeypatch):
    """A failing capture: the run continues eagerly, says so (config.json, EpochEnded), same numbers."""
    import json

    from dpd_desktop.runs.events import EpochEnded

    def broken(*a, **k):
        raise RuntimeError("simulated capture failure")

    monkeypatch.setattr(torch.cuda, "graph", broken)
    events = []
    cfg = ExperimentConfig(step="pa", dataset="demo", backbone="gru", hidden_size=12, epochs=2, frame_length=50,
                           stride=1, device="cuda")
    t = Trainer(cfg, dataset=ds, workspace=Workspace(tmp_path / "f"), fast_path=True, observers=[events.append])
    r = t.run()
    assert r.state == "succeeded", r.message
    assert t.fast_path_status.startswith("off: capture failed (RuntimeError: simulated capture failure")
    ends = [e for e in events if isinstance(e, EpochEnded)]
    assert ends[0].fast_path == t.fast_path_status
    doc = json.loads((r.run_dir / "config.json").read_text())
    assert doc["device"]["fast_path"] == t.fast_path_status
    monkeypatch.undo()
    te, re_ = _run(tmp_path, ds, cfg, False, "eager")
    for a, b in zip(r.history, re_.history):
        assert {k: v for k, v in a.items() if k not in SKIP_COLS} == {k: v for k, v in b.items() if k not in SKIP_COLS}
