"""MP/GMP baselines: the basis, the least-squares solve, the module, and the agreement with OpenDPD 2.4.2's MP-LS.

OpenDPD 2.4.2's ``opendpd.core.polynomial`` (``mp_basis``, ``fit_least_squares``) is imported from the unpacked
package at ``<repo>/.ref/opendpd-2.4.2`` and only run here; nothing of it is copied into dpd_desktop.
"""
from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from dpd_desktop.data import load_dataset
from dpd_desktop.models import build_model
from dpd_desktop.models.poly import basis, fit_least_squares, matlab_coefficients
from dpd_desktop.config import PolySpec
from tests.datasets_dir import DATASETS

REF_242 = Path(__file__).resolve().parents[2] / ".ref" / "opendpd-2.4.2"
DPA_200 = DATASETS / "DPA_200MHz"


def _signal(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n) + 1j * rng.standard_normal(n)) * 0.3


@pytest.fixture(scope="module")
def opendpd_poly():
    """OpenDPD 2.4.2's polynomial module, imported from the unpacked package (sys.path restored afterwards)."""
    if not (REF_242 / "opendpd" / "core" / "polynomial.py").is_file():
        pytest.skip(f"OpenDPD 2.4.2 reference sources not found at {REF_242} (git-ignored; unpacked from the "
                    "registry's opendpd==2.4.2 wheel)")
    sys.path.insert(0, str(REF_242))
    try:
        mod = importlib.import_module("opendpd.core.polynomial")
    finally:
        sys.path.remove(str(REF_242))
    yield mod
    for name in [m for m in sys.modules if m == "opendpd" or m.startswith("opendpd.")]:
        del sys.modules[name]


def test_rank_deficient_basis_gives_finite_coefficients_and_a_lower_rank():
    x = _signal(2000, 0)
    phi = basis(x, PolySpec.from_mapping("mp", {"order": 3, "memory_depth": 2}))
    dup = np.concatenate([phi, phi[:, :2], 2.0 * phi[:, 3:4]], axis=1)  # 6 + 3 columns, 3 of them repeats
    target = phi @ np.array([1.0, 0.1j, -0.2, 0.05, 0.3j, 0.01])
    fit = fit_least_squares(dup, target)
    assert fit.n_coefficients == 9
    assert fit.rank == 6
    assert np.isfinite(fit.coefficients).all()
    # the prediction is still exact (the minimum-norm solution spans the same column space)
    np.testing.assert_allclose(dup @ fit.coefficients, target, rtol=0, atol=1e-12)
    assert fit.train_nmse_db < -200


@pytest.mark.parametrize("kind, orders", [
    ("mp", {"order": 5, "memory_depth": 3}),
    ("mp", {"order": 7, "memory_depth": 2, "odd_only": True}),
    ("gmp", {"order": 5, "memory_depth": 3, "cross_order": 3, "cross_lag": 2, "cross_lead": 1}),
])
def test_known_answer_the_solve_recovers_the_generating_coefficients(kind, orders):
    spec = PolySpec.from_mapping(kind, orders)
    rng = np.random.default_rng(7)
    w = rng.standard_normal(spec.n_coefficients) + 1j * rng.standard_normal(spec.n_coefficients)
    x = _signal(5000, 1)
    y = basis(x, spec) @ w
    fit = fit_least_squares(basis(x, spec), y)
    assert fit.rank == spec.n_coefficients
    assert np.max(np.abs(fit.coefficients - w)) / np.max(np.abs(w)) < 1e-9


def test_basis_columns_by_hand():
    """MP columns x(n−m)|x(n−m)|^(k−1), order-major; GMP lagging x(n−m)|x(n−m−l)|, leading x(n−m)|x(n−m+l)|."""
    x = np.array([1 + 1j, 2, -1j, 0.5, 3j])
    spec = PolySpec.from_mapping("gmp", {"order": 2, "memory_depth": 2, "cross_order": 2, "cross_lag": 1,
                                         "cross_lead": 1})
    phi = basis(x, spec)
    d1 = np.array([0, 1 + 1j, 2, -1j, 0.5])
    a = np.abs(x)
    expected = np.stack([x, d1, x * a, d1 * np.abs(d1),                    # aligned k=1 (m=0,1), k=2 (m=0,1)
                         x * np.abs(d1), d1 * np.r_[0, 0, a[:3]],            # lagging: m=0 l=1, m=1 l=1
                         x * np.r_[a[1:], 0], d1 * a], axis=1)               # leading: m=0 l=1, m=1 l=1
    np.testing.assert_allclose(phi, expected, rtol=0, atol=1e-15)
    assert [(t.order, t.delay, t.env_delay) for t in spec.terms][4:] == [(2, 0, 1), (2, 1, 2), (2, 0, -1), (2, 1, 0)]


def test_module_forward_equals_the_basis_per_frame():
    spec = PolySpec.from_mapping("gmp", {"order": 5, "memory_depth": 3, "cross_order": 3, "cross_lag": 2,
                                         "cross_lead": 1})
    model = build_model("gmp", 1, 1, poly=spec).double()
    assert sum(p.numel() for p in model.parameters()) == 2 * spec.n_coefficients
    rng = np.random.default_rng(3)
    w = rng.standard_normal(spec.n_coefficients) + 1j * rng.standard_normal(spec.n_coefficients)
    model.backbone.set_coefficients(w)
    x = torch.from_numpy(rng.standard_normal((3, 40, 2)) * 0.4)
    out = model(x).detach().numpy()
    for b in range(3):
        ref = basis(x[b].numpy(), spec) @ w
        np.testing.assert_allclose(out[b, :, 0] + 1j * out[b, :, 1], ref, rtol=0, atol=1e-12)


def test_identity_initialization_and_matlab_layout():
    spec = PolySpec.from_mapping("mp", {"order": 5, "memory_depth": 3, "odd_only": True})
    model = build_model("mp", 1, 1, poly=spec)
    x = torch.randn(2, 30, 2)
    assert torch.equal(model(x), x)  # the identity: 1·x(n), every other coefficient 0
    w = np.arange(1, spec.n_coefficients + 1) * (1 + 0.5j)  # orders 1, 3, 5 × delays 0, 1, 2
    a = matlab_coefficients(w, spec)
    assert a.shape == (3, 5)  # comm.DPD: M-by-K
    np.testing.assert_array_equal(a[:, 0], w[0:3])
    np.testing.assert_array_equal(a[:, 2], w[3:6])
    np.testing.assert_array_equal(a[:, 4], w[6:9])
    np.testing.assert_array_equal(a[:, [1, 3]], 0)


def test_orders_are_validated():
    with pytest.raises(ValueError, match="memory_depth"):
        PolySpec.from_mapping("mp", {"memory_depth": 0})
    with pytest.raises(ValueError, match="unknown MP/GMP field 'Q'"):
        PolySpec.from_mapping("mp", {"Q": 3})
    with pytest.raises(ValueError, match="at least as many samples"):
        fit_least_squares(np.ones((3, 4)), np.ones(3))


# ------------------------------------------------------------------------------------- against OpenDPD 2.4.2
def _dpa200(n: int):
    if not DPA_200.is_dir():
        pytest.skip(f"dataset DPA_200MHz not found at {DPA_200}")
    ds = load_dataset(DPA_200)
    # the float64 values as parsed from the CSV (what the run fits, and what OpenDPD's pandas reader gives)
    x = ds.train.x64[:n] @ np.array([1, 1j])
    y = ds.train.y64[:n] @ np.array([1, 1j])
    return ds, x, y


def test_mp_ls_agrees_with_opendpd_2_4_2_on_dpa_200mhz(opendpd_poly):
    _, x, y = _dpa200(20000)
    k, m = 5, 4
    ours = fit_least_squares(basis(x, PolySpec.from_mapping("mp", {"order": k, "memory_depth": m})), y)
    phi_ref = opendpd_poly.mp_basis(x, k, m)
    w_ref, diag = opendpd_poly.fit_least_squares(phi_ref, y, 0.0)
    np.testing.assert_allclose(basis(x, PolySpec.from_mapping("mp", {"order": k, "memory_depth": m})), phi_ref,
                               rtol=1e-15, atol=0)
    assert ours.rank == diag.rank == k * m
    assert np.linalg.norm(ours.coefficients - w_ref) / np.linalg.norm(w_ref) < 1e-6
    assert ours.train_nmse_db == pytest.approx(diag.train_nmse_db, abs=1e-9)


def test_mp_ls_run_agrees_with_opendpd_2_4_2(opendpd_poly, tmp_path):
    """The whole run (train-pa --backbone mp on DPA_200MHz, first 20,000 training samples) stores in best.pt the
    coefficients OpenDPD 2.4.2's MP-LS finds on the same samples: the exported float64 solve to 1e-6 relative (it is
    1e-9 and better here), the float32 tensor the model evaluates with to float32 rounding."""
    from dpd_desktop.config import ExperimentConfig
    from dpd_desktop.export.coef_export import read_coefficients
    from dpd_desktop.runs.workspace import Workspace
    from dpd_desktop.training.ls_fit import make_trainer

    ds, x, y = _dpa200(20000)
    cfg = ExperimentConfig(step="pa", dataset=str(DPA_200), backbone="mp", fit="ls", poly_order=5, memory_depth=4,
                           max_train_samples=20000, device="cpu")
    ws = Workspace(tmp_path)
    res = make_trainer(cfg, dataset=ds, workspace=ws).run()
    assert res.state == "succeeded", res.message
    w, spec, rec = read_coefficients(ws, res.run_id)
    w_ref, _ = opendpd_poly.fit_least_squares(opendpd_poly.mp_basis(x, 5, 4), y, 0.0)
    assert np.linalg.norm(w - w_ref) / np.linalg.norm(w_ref) < 1e-9
    c = torch.load(rec.best_checkpoint, weights_only=True)["state_dict"]["backbone.coef"].double().numpy()
    assert np.linalg.norm(c[:, 0] + 1j * c[:, 1] - w_ref) / np.linalg.norm(w_ref) < 1e-6
    status = json.loads((rec.run_dir / "status.json").read_text(encoding="utf-8"))
    assert rec.doc["fit"]["rank"] == 20 and status["fit"]["rank"] == 20 and status["fit"]["n_coefficients"] == 20
