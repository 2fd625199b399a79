"""Our AdamW / ReduceLROnPlateau are bitwise torch.optim's, and avoid importing torch._dynamo."""
import inspect
import math
import subprocess
import sys

import pytest
import torch

from dpd_desktop.training.optim import AdamW, ReduceLROnPlateau


def _params(seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(*s, generator=g)) for s in [(69, 2), (69, 23), (69,), (2, 23), (2,)]]


@pytest.mark.parametrize("wd,lr", [(0.01, 5e-3), (0.0, 0.05), (0.3, 1e-4)])
def test_adamw_bitwise_equal_to_torch(wd, lr):
    pa, pb = _params(0), _params(0)
    ours = AdamW(pa, lr=lr, weight_decay=wd)
    ref = torch.optim.AdamW(pb, lr=lr, weight_decay=wd)
    g = torch.Generator().manual_seed(1)
    for step in range(25):
        grads = [torch.randn(p.shape, generator=g) * (10 ** (step % 3 - 1)) for p in pa]
        for p, q, gr in zip(pa, pb, grads):
            p.grad, q.grad = gr.clone(), gr.clone()
        if step == 5:
            pa[2].grad = pb[2].grad = None  # a parameter without gradient is skipped by both
        if step == 12:
            ours.param_groups[0]["lr"] = ref.param_groups[0]["lr"] = lr / 2
        ours.step()
        ref.step()
        for p, q in zip(pa, pb):
            assert torch.equal(p, q), f"step {step}"
    so, sr = ours.state_dict(), ref.state_dict()
    for i in sr["state"]:
        for k in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(so["state"][i][k], sr["state"][i][k]), (i, k)
            assert so["state"][i][k].dtype == sr["state"][i][k].dtype


def test_adamw_zero_grad_in_place_keeps_storage():
    p = _params(2)
    opt = AdamW(p, lr=1e-3)
    for q in p:
        q.grad = torch.ones_like(q)
    ptrs = [q.grad.data_ptr() for q in p]
    opt.zero_grad(set_to_none=False)
    assert all(q.grad.data_ptr() == ptr and not q.grad.any() for q, ptr in zip(p, ptrs))
    opt.zero_grad()
    assert all(q.grad is None for q in p)


def test_adamw_state_dict_round_trip():
    pa = _params(3)
    opt = AdamW(pa, lr=1e-3)
    for q in pa:
        q.grad = torch.ones_like(q)
    opt.step()
    pb = [torch.nn.Parameter(q.detach().clone()) for q in pa]
    opt2 = AdamW(pb, lr=9.0)
    opt2.load_state_dict(opt.state_dict())
    assert opt2.param_groups[0]["lr"] == 1e-3
    for q, r in zip(pa, pb):
        q.grad, r.grad = torch.full_like(q, 0.5), torch.full_like(r, 0.5)
    opt.step()
    opt2.step()
    assert all(torch.equal(q, r) for q, r in zip(pa, pb))


def test_plateau_matches_torch_on_db_sequences():
    g = torch.Generator().manual_seed(5)
    for patience, factor, min_lr in [(0, 0.5, 1e-4), (1, 0.5, 5e-5), (5, 0.5, 5e-5), (2, 0.1, 1e-3)]:
        p1, p2 = _params(0), _params(0)
        o1, o2 = AdamW(p1, lr=5e-3), torch.optim.AdamW(p2, lr=5e-3)
        s1 = ReduceLROnPlateau(o1, factor=factor, patience=patience, threshold=1e-4, min_lr=min_lr)
        s2 = torch.optim.lr_scheduler.ReduceLROnPlateau(o2, mode="min", factor=factor, patience=patience,
                                                        threshold=1e-4, threshold_mode="rel", min_lr=min_lr)
        value = -20.0
        lrs = []
        for epoch in range(60):
            # slowly improving then drifting dB values, with exact plateaus and a NaN epoch
            value += float(torch.randn((), generator=g)) * 0.3 - 0.05
            v = float("nan") if epoch == 17 else (value if epoch % 7 else s2.best if math.isfinite(s2.best) else value)
            s1.step(v)
            s2.step(v)
            assert o1.param_groups[0]["lr"] == o2.param_groups[0]["lr"], (patience, epoch)
            assert s1.num_bad_epochs == s2.num_bad_epochs and (s1.best == s2.best or
                                                                (math.isinf(s1.best) and math.isinf(s2.best)))
            lrs.append(o1.param_groups[0]["lr"])
        assert len(set(lrs)) > 1  # the sequence did exercise LR drops


def test_no_dynamo_import():
    code = ("import sys, torch\n"
            "from dpd_desktop.training.optim import AdamW, ReduceLROnPlateau\n"
            "p = [torch.nn.Parameter(torch.randn(3))]\n"
            "o = AdamW(p, lr=1e-3); s = ReduceLROnPlateau(o, factor=0.5, patience=1, min_lr=1e-5)\n"
            "p[0].grad = torch.ones(3); o.step(); o.zero_grad(False); s.step(1.0)\n"
            "print('torch._dynamo' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"


def test_private_torch_functions_are_there_and_torch_is_in_the_tested_range():
    """Fails (never skips) when torch's private AdamW functions change or disappear, or when torch is outside the
    range pyproject pins and optim.TESTED_TORCH states: then re-run this file's bitwise tests on the new release,
    widen the pin, or let the fallback (torch.optim.AdamW, logged and recorded) take over."""
    import re
    from pathlib import Path

    from dpd_desktop.training import optim

    multi, single, default = optim._adam_functions()  # raises PrivateApiChanged naming what changed
    for fn in (multi, single):
        params = inspect.signature(fn).parameters
        for name in ("params", "grads", "exp_avgs", "exp_avg_sqs", "state_steps", "lr", "beta1", "beta2",
                     "weight_decay", "eps", "decoupled_weight_decay"):
            assert name in params, f"torch.optim.adam.{fn.__name__} lost its parameter {name!r}"
    opt, impl = optim.make_optimizer(_params(0), lr=1e-3, weight_decay=0.01)
    assert isinstance(opt, AdamW) and impl == optim.PRIVATE_IMPL

    def version(text):
        return tuple(int(v) for v in re.match(r"(\d+)\.(\d+)", text).groups())

    lo, hi = (version(b.lstrip("<>=")) for b in optim.TESTED_TORCH)
    here = version(torch.__version__)
    assert lo <= here < hi, f"torch {torch.__version__} is outside the tested range {optim.TESTED_TORCH}"
    pin = re.search(r'"torch([^"]*)"', (Path(__file__).parents[2] / "pyproject.toml").read_text()).group(1)
    assert pin == "".join(optim.TESTED_TORCH).replace("<", ",<"), pin


def test_fallback_to_torch_optim_is_logged_and_recorded(tmp_path, monkeypatch):
    import json

    from dpd_desktop.config import ExperimentConfig
    from dpd_desktop.data import make_demo_dataset
    from dpd_desktop.runs.workspace import Workspace
    from dpd_desktop.training import optim
    from dpd_desktop.training.trainer import Trainer

    def gone():
        raise optim.PrivateApiChanged("torch.optim.adam._multi_tensor_adam is gone (test)")

    monkeypatch.setattr(optim, "_adam_functions", gone)
    opt, impl = optim.make_optimizer(_params(0), lr=1e-3, weight_decay=0.01)
    assert type(opt) is torch.optim.AdamW and impl == "torch.optim fallback: torch.optim.adam._multi_tensor_adam " \
                                                      "is gone (test)"
    ds = make_demo_dataset(seed=2, n_train=3000, n_val=1024, n_test=1024, nperseg=256)
    threads = torch.get_num_threads()
    config = ExperimentConfig(hidden_size=4, epochs=2, frame_length=40, stride=16, batch_size=32, device="cpu",
                              threads=1)
    try:
        res = Trainer(config, dataset=ds, workspace=Workspace(tmp_path)).run()
        monkeypatch.undo()
        ours = Trainer(config, dataset=ds, workspace=Workspace(tmp_path)).run()
    finally:
        torch.set_num_threads(threads)
    assert res.state == ours.state == "succeeded", res.message
    # the fallback computes the same numbers (CPU: torch.optim's per-tensor loop, which our AdamW calls too)
    assert [r["TRAIN_LOSS"] for r in res.history] == [r["TRAIN_LOSS"] for r in ours.history]
    assert json.loads((ours.run_dir / "config.json").read_text())["training"]["optimizer"] == optim.PRIVATE_IMPL
    cfg = json.loads((res.run_dir / "config.json").read_text())
    assert cfg["training"]["optimizer"] == impl
    assert f"WARNING: optimizer: {impl}" in (res.run_dir / "log.txt").read_text()
