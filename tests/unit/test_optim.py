"""Our AdamW / ReduceLROnPlateau are bitwise torch.optim's, and avoid importing torch._dynamo."""
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
