"""benchmarks/bench_quant_floor.py (issue 26's resolution floor): its float models are the DPDs themselves, and its
rounding is what it says (errors against a direct computation)."""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from dpd_desktop.models import build_model

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_quant_floor.py"
_spec = importlib.util.spec_from_file_location("bench_quant_floor", _PATH)
floor = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(floor)


def _x(b=2, t=300, seed=0):
    g = torch.Generator().manual_seed(seed)
    return 0.3 * torch.randn(b, t, 2, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("family, cls", [("tcn", floor.TCNFloor), ("gru", floor.GRUFloor)])
def test_floor_models_are_the_dpds(family, cls):
    torch.manual_seed(0)
    m = build_model(family, 6).double().eval()
    x = _x()
    with torch.no_grad():
        assert torch.allclose(cls(m).run(x), m(x), rtol=0, atol=1e-12)


def test_rounding_and_formats_match_a_direct_computation():
    v = torch.tensor([0.30, -0.26, 0.01, 0.0049, -1.3], dtype=torch.float64)
    # frac 4, 8 bits: floor(v * 16 + 1/2) / 16, -1.3 -> -21/16 (inside [-128, 127])
    assert floor._fq(v, 4, 8).tolist() == [5 / 16, -4 / 16, 0.0, 0.0, -21 / 16]
    # 4 bits at frac 2: [-8, 7] / 4 -> 0.30 -> 1/4, -1.3 -> -5/4
    assert floor._fq(v, 2, 4).tolist() == [0.25, -0.25, 0.0, 0.0, -1.25]
    rng = np.random.default_rng(1)
    g = torch.from_numpy(rng.standard_normal(200_000))
    f = floor._least_error_frac(g, 8)
    errs = {k: float(((floor._fq(g, k, 8) - g) ** 2).mean()) for k in range(f - 2, f + 3)}
    assert min(errs, key=errs.get) == f  # the least squared error among its neighbours, computed directly
    sqnr = 10 * math.log10(float((g ** 2).mean()) / errs[f])
    assert 38.0 < sqnr < 41.0  # a power-of-two step on a Gaussian: just under the 40.6 dB of the best uniform step


def test_per_channel_formats_beat_one_per_tensor_on_unequal_channels():
    rng = np.random.default_rng(2)
    v = torch.from_numpy(rng.standard_normal((4, 3, 1000)) * np.array([1.0, 0.05, 0.002])[None, :, None])
    errs = {}
    for pc in (False, True):
        fr = floor._formats(v, 8, pc, 1)
        e = (floor._fq(v, fr, 8) - v) ** 2
        errs[pc] = [10 * math.log10(float(e[:, c].mean()) / float((v[:, c] ** 2).mean())) for c in range(3)]
    assert errs[True][2] < errs[False][2] - 30  # the smallest channel: 9 bits of scale apart (2^-9 ~ 0.002)
    assert abs(errs[True][0] - errs[False][0]) < 0.5  # the largest sets the per-tensor format anyway
