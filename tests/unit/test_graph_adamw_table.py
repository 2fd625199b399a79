"""GraphAdamW.load's table (training/optim.py): every row equals GraphAdamW.scalars of its step, rounded to float32,
bitwise; the bias corrections are shared between loads (a group's members)."""
from __future__ import annotations

import torch

from dpd_desktop.training import optim
from dpd_desktop.training.optim import GraphAdamW


def _table(n, beta1=0.9, beta2=0.999, weight_decay=0.01):
    g = object.__new__(GraphAdamW)  # the table alone (the real constructor needs CUDA parameters)
    g.beta1, g.beta2, g.weight_decay, g.max_steps = beta1, beta2, weight_decay, n
    g.table = torch.zeros(n, 3, dtype=torch.float32)
    return g


def test_rows_equal_the_scalar_expressions_bitwise():
    for first, lr, wd, betas in [(1, 1e-3, 0.0, (0.9, 0.999)), (4606, 5e-3, 0.01, (0.9, 0.999)),
                                 (13816, 3.3e-4, 0.1, (0.85, 0.98))]:
        n = 4605
        g = _table(n, *betas, weight_decay=wd)
        g.load(first, n, lr)
        want = torch.tensor([GraphAdamW.scalars(float(first + i), lr, *betas, wd) for i in range(n)],
                            dtype=torch.float32)
        assert torch.equal(g.table, want), (first, lr, wd, betas)


def test_a_second_member_reuses_the_bias_corrections():
    optim._bias_corrections.cache_clear()
    a, b = _table(100), _table(100)
    a.load(201, 100, 1e-3)
    b.load(201, 100, 2e-3)
    info = optim._bias_corrections.cache_info()
    assert (info.hits, info.misses) == (1, 1)
    assert not torch.equal(a.table[:, 2], b.table[:, 2]) and torch.equal(a.table[:, 1], b.table[:, 1])


def test_load_refuses_more_rows_than_the_table_and_ignores_none():
    g = _table(10)
    g.load(1, 0, 1e-3)
    assert torch.count_nonzero(g.table) == 0
    try:
        g.load(1, 11, 1e-3)
    except ValueError as exc:
        assert "11 steps > table size 10" in str(exc)
    else:
        raise AssertionError("no error")


def test_the_self_check_keeps_answers_but_asks_again_after_an_error(monkeypatch):
    g = _table(4)
    g.device, g.params, g.eps = "cuda:0", [torch.zeros(3, 2)], 1e-8
    answers = iter(["captured AdamW update unavailable (OutOfMemoryError: the test)", None, "not asked"])
    calls = []
    monkeypatch.setattr(g, "_self_check", lambda lr, steps: calls.append(lr) or next(answers))
    monkeypatch.setattr(optim, "_SELF_CHECKS", {})
    assert g.self_check(1e-3).startswith("captured AdamW update unavailable")
    assert g.self_check(1e-3) is None and g.self_check(1e-3) is None  # the error asked again, the answer kept
    assert calls == [1e-3, 1e-3]


def test_scalars_are_torch_adams_float64_expressions():
    """torch.optim.adam (_multi_tensor_adam, capturable=False): bias_correction1 = 1 - beta1 ** step,
    bias_correction2 = 1 - beta2 ** step, step_size = (lr / bias_correction1) * -1, sqrt via ** 0.5."""
    for t in (1.0, 2.0, 4605.0, 18420.0):
        lr, b1, b2, wd = 3e-3, 0.9, 0.999, 0.01
        assert GraphAdamW.scalars(t, lr, b1, b2, wd) == (1 - lr * wd, (1 - b2 ** t) ** 0.5, (lr / (1 - b1 ** t)) * -1)
