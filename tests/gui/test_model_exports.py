"""MP/GMP in the window (the form, a least-squares run, Run ▸ Export MP/GMP coefficients…) and Run ▸ Run DPD on a
waveform file…, checked against the memory-polynomial formula applied by hand to the exported coefficients."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.runs.replay import read_split
from dpd_desktop.training.ls_fit import make_trainer


@pytest.fixture(scope="module")
def ds():
    return make_demo_dataset(seed=2, n_train=3000, n_val=4096, n_test=4096)


def read_matrix(path) -> np.ndarray:
    """The M-by-K complex matrix of a coefficients CSV (header k=1..K, cells a+bi)."""
    lines = path.read_text().splitlines()
    return np.array([[complex(c.replace("i", "j")) for c in ln.split(",")] for ln in lines[1:]])


def memory_polynomial(a: np.ndarray, x: np.ndarray, nperseg: int) -> np.ndarray:
    """y[n] = Σ_m Σ_k a[m, k-1] x[n-m] |x[n-m]|^(k-1), the delays zero at the start of each nperseg segment (the
    runs' segmented evaluation)."""
    m_depth, k_order = a.shape
    out = np.zeros_like(x)
    for s in range(0, len(x), nperseg):
        seg = x[s:s + nperseg]
        y = np.zeros_like(seg)
        for m in range(m_depth):
            d = np.concatenate([np.zeros(m, complex), seg[:len(seg) - m]])
            for k in range(1, k_order + 1):
                y += a[m, k - 1] * d * np.abs(d) ** (k - 1)
        out[s:s + nperseg] = y
    return out


def cplx(a: np.ndarray) -> np.ndarray:
    return a[:, 0].astype(np.float64) + 1j * a[:, 1]


def test_the_form_offers_mp_and_gmp_with_their_orders(make_window, qtbot):
    w = make_window()
    f = w.form
    f.backbone.setCurrentIndex(f.backbone.findData("gmp"))
    assert f.is_poly and f.poly.isVisibleTo(w) and not f.hidden_size.isVisibleTo(w)
    assert f.poly.cross_lag.isVisibleTo(w)
    f.poly.order.setValue(7)
    f.poly.memory.setValue(3)
    f.poly.cross_lag.setValue(1)
    cfg = w.config_from_form()
    assert (cfg.backbone, cfg.fit, cfg.poly_order, cfg.memory_depth, cfg.cross_lag) == ("gmp", "ls", 7, 3, 1)
    assert "GMP K7 M3" in w.windowTitle()
    f.backbone.setCurrentIndex(f.backbone.findData("mp"))
    assert not f.poly.cross_lag.isVisibleTo(w)
    f.poly.grid_k.setText("3,x")
    assert not w.start_run()
    assert f.error_label.text().startswith("Grid K:") and "got '3,x'" in f.error_label.text()
    f.poly.grid_k.setText("3, 5")
    assert w.config_from_form().grid_k == [3, 5]
    # back to a neural family: the gradient fit and no grid, whatever the MP fields say
    f.backbone.setCurrentIndex(f.backbone.findData("gru"))
    cfg = w.config_from_form()
    assert cfg.fit == "gradient" and cfg.grid_k is None and f.hidden_size.isVisibleTo(w)
    # a config with MP orders fills the form
    w.set_form_from_config(ExperimentConfig(backbone="mp", fit="ls", poly_order=3, memory_depth=2, grid_m=[1, 2]))
    assert (f.poly.order.value(), f.poly.memory.value(), f.poly.grid_m.text()) == (3, 2, "1,2")


def test_an_mp_run_in_the_window_and_its_coefficients_export(make_window, qtbot, ds, tmp_path):
    w = make_window()
    w.set_dataset(ds, "demo")
    w.set_form_from_config(ExperimentConfig(step="pa", dataset="demo", backbone="mp", fit="ls", poly_order=5,
                                            memory_depth=3, device="cpu", frame_length=40, stride=8))
    with qtbot.waitSignal(w.runEnded, timeout=120_000) as ended:
        assert w.start_run()
    assert ended.args == ["succeeded"], w.banner.message
    exports = w.model_exports
    assert exports.poly_run() == str(w.session.run_dir)
    out = tmp_path / "coef.csv"
    assert exports.export_coefficients(out=out)
    qtbot.waitUntil(lambda: exports.last_result is not None, timeout=60_000)
    assert isinstance(exports.last_result, dict), exports.last_result
    assert w.banner.kind == "success" and "15 coefficients" in w.banner.message
    a = read_matrix(out)
    assert a.shape == (3, 5)
    # the exported matrix reproduces the run's own test prediction (results.h5) by the MP formula
    test = read_split(Path(w.session.run_dir) / "results.h5", "test")
    got = memory_polynomial(a, cplx(test.x), ds.spec.nperseg)
    want = cplx(test.prediction)
    assert np.max(np.abs(got - want)) <= 1e-4 * np.max(np.abs(want))


def test_export_refuses_a_neural_run_in_plain_words(make_window, qtbot, tmp_path):
    from tiny_runs import make_tiny_workspace  # noqa: PLC0415 - the tests' helper module

    runs = make_tiny_workspace(tmp_path / "ws")
    w = make_window()
    exports = w.model_exports
    assert exports.export_coefficients(run_dir=runs["a"], out=tmp_path / "c.csv")
    qtbot.waitUntil(lambda: exports.last_result is not None, timeout=60_000)
    assert isinstance(exports.last_result, ValueError)
    assert w.banner.kind == "error" and "coefficients exist for mp, gmp runs only" in w.banner.message
    assert not (tmp_path / "c.csv").exists()


def test_run_dpd_on_a_waveform_file_the_user_picks(make_window, qtbot, ds, workspace, tmp_path):
    base = dict(dataset="demo", backbone="mp", fit="ls", poly_order=3, memory_depth=2, device="cpu",
                frame_length=40, stride=8)
    pa = make_trainer(ExperimentConfig(step="pa", **base), dataset=ds, workspace=workspace).run()
    dpd = make_trainer(ExperimentConfig(step="dpd", pa_run=pa.run_id, **base), dataset=ds, workspace=workspace).run()
    assert pa.state == dpd.state == "succeeded"
    # a waveform of another capture: not a split of the run's dataset
    other = make_demo_dataset(seed=9, n_train=1000, n_val=1000, n_test=6000, nperseg=4096).test.x
    wave = tmp_path / "new_waveform.csv"
    np.savetxt(wave, other, delimiter=",", header="I,Q", comments="", fmt="%.9g")
    w = make_window()
    out = tmp_path / "u.csv"
    with qtbot.waitSignal(w.dpdExportEnded, timeout=60_000) as ended:
        assert w.model_exports.run_dpd_on_file(input_file=wave, out=out, run_dir=dpd.run_dir)
    assert ended.args == ["succeeded"], w.banner.message
    assert "new_waveform.csv" in w.banner.message and "peak PAPR x" in w.banner.message
    data = np.loadtxt(out, delimiter=",", skiprows=1)
    assert data.shape == (6000, 4)
    assert np.array_equal(data[:, :2].astype(np.float32), other)
    # u against the DPD run's coefficients applied by hand, segment by segment as the run evaluates
    from dpd_desktop.export.coef_export import export_coefficients  # noqa: PLC0415 - PyTorch, loaded by now

    export_coefficients(workspace, dpd.run_id, tmp_path / "dpd.csv")
    u = memory_polynomial(read_matrix(tmp_path / "dpd.csv"), cplx(other), ds.spec.nperseg)
    assert np.max(np.abs(cplx(data[:, 2:]) - u)) <= 1e-4 * np.max(np.abs(u))
