"""The RF curves in PlotData (runs/plotdata.py rf_curves, power_refs): numbers against direct NumPy and closed
forms, the power reference per signal plane, the per-split cache, and the event codec's round trip."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from dpd_desktop.data import make_demo_dataset
from dpd_desktop.lab import event_codec
from dpd_desktop.runs import events as E
from dpd_desktop.runs.plotdata import CURVE_BINS, build_plot_data, rf_curves


def iq(z: np.ndarray) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=1).astype(np.float32)


def rapp(z: np.ndarray, g: float, a: float, p: float) -> np.ndarray:
    return g * z / (1 + (g * np.abs(z) / a) ** (2 * p)) ** (1 / (2 * p))


@pytest.fixture(scope="module")
def demo():
    return make_demo_dataset(n_train=4096, n_val=65536, n_test=4096, nperseg=4096)


def test_curves_against_a_memoryless_rapp_pa_and_direct_numpy(demo):
    x = demo.val.x
    xc = x[:, 0].astype(np.float64) + 1j * x[:, 1]
    g, a, p = 2.5, 2.0, 2.0
    y = iq(rapp(xc, g, a, p) * np.exp(0.3j))  # a constant 0.3 rad phase shift on top
    spec = dataclasses.replace(demo.spec, input_power_ref_dbm=-10.0, output_power_ref_dbm=20.0)
    pd = build_plot_data("validation", x, {"measured y": y, "predicted ŷ": y}, spec, target_name="measured y",
                         pred_name="predicted ŷ", error_of=("predicted ŷ", "measured y"))
    cp = pd.compression["measured y"]
    r1 = a / g * (10 ** (p / 10) - 1) ** (1 / (2 * p))
    assert cp["reached"] == 1.0
    assert cp["gain_ss_db"] == pytest.approx(20 * math.log10(g), abs=0.01)
    assert cp["pin_db"] == pytest.approx(20 * math.log10(r1), abs=0.1)
    assert np.allclose(pd.ampm_curve["measured y"], math.degrees(0.3), atol=1e-3)
    rr = pd.curve_in.astype(np.float64)
    assert len(rr) <= CURVE_BINS and np.all(np.diff(rr) > 0)
    assert np.allclose(pd.amam_curve["measured y"], np.abs(rapp(rr, g, a, p)), rtol=0.01)
    # the output power per bin: input power + gain, dB re a unit-power signal
    finite = np.isfinite(pd.pout_db["measured y"])
    assert finite.sum() > 40
    assert np.all(np.diff(pd.pin_db) > 0)
    # the CCDF against a direct count, at three levels
    pw = np.abs(xc) ** 2 / np.mean(np.abs(xc) ** 2)
    for level in (2.0, 5.0, 8.0):
        i = int(round(level / 0.05))
        assert pd.ccdf_db[i] == pytest.approx(level)
        assert pd.ccdf["input x"][i] == pytest.approx(np.mean(pw > 10 ** (level / 10)), abs=1e-6)
    prob, at, peak = pd.papr["input x"]
    assert prob == 1e-3 and peak == pytest.approx(10 * math.log10(pw.max()), abs=1e-4)
    assert at == pytest.approx(10 * math.log10(np.quantile(pw, 1 - 1e-3)), abs=1e-4)
    assert pd.power_ref_dbm == {"input x": -10.0, "measured y": 20.0, "predicted ŷ": 20.0, "error": 20.0}


def test_no_power_reference_no_mapping_and_the_dpd_output_is_on_the_input_plane(demo):
    x = demo.val.x
    sig = {"target g·x": 2 * x, "PA(DPD(x))": 2 * x, "DPD output u": x}
    pd = build_plot_data("validation", x, sig, demo.spec, target_name="target g·x", pred_name="PA(DPD(x))")
    assert pd.power_ref_dbm == {}
    spec = dataclasses.replace(demo.spec, input_power_ref_dbm=0.0, output_power_ref_dbm=30.0)
    pd = build_plot_data("validation", x, sig, spec, target_name="target g·x", pred_name="PA(DPD(x))",
                         input_side=("DPD output u",))
    assert pd.power_ref_dbm == {"input x": 0.0, "target g·x": 30.0, "PA(DPD(x))": 30.0, "DPD output u": 0.0}
    assert pd.compression["DPD output u"]["gain_ss_db"] == pytest.approx(0.0, abs=1e-9)
    assert pd.compression["target g·x"]["gain_ss_db"] == pytest.approx(20 * math.log10(2), abs=1e-6)
    assert pd.compression["target g·x"]["reached"] == 0.0 and math.isnan(pd.compression["target g·x"]["pin_db"])


def test_the_split_cache_keeps_x_and_the_constant_signals_only(demo):
    x, y = demo.val.x, demo.val.y
    cache: dict = {}
    first = rf_curves(x, {"measured y": y, "predicted ŷ": y * 1.1}, psd_cache=cache, constant=("measured y",))
    kept = cache["rf:of:measured y"]
    second = rf_curves(x, {"measured y": y, "predicted ŷ": y * 0.9}, psd_cache=cache, constant=("measured y",))
    assert cache["rf:of:measured y"] is kept and "rf:of:predicted ŷ" not in cache
    assert np.array_equal(first["amam_curve"]["measured y"], second["amam_curve"]["measured y"])
    ratio = second["amam_curve"]["predicted ŷ"] / first["amam_curve"]["predicted ŷ"]
    assert np.allclose(ratio, 0.9 / 1.1, rtol=1e-5)
    fresh = rf_curves(x, {"measured y": y, "predicted ŷ": y * 0.9})
    for key in ("amam_curve", "pout_db", "ccdf"):
        for name in fresh[key]:
            assert np.array_equal(fresh[key][name], second[key][name], equal_nan=True)


def test_a_diverged_model_leaves_its_curves_nan_but_the_others_drawn(demo):
    x, y = demo.val.x, demo.val.y
    bad = np.full_like(y, np.nan)
    r = rf_curves(x, {"measured y": y, "predicted ŷ": bad})
    assert np.all(np.isnan(r["amam_curve"]["predicted ŷ"])) and "predicted ŷ" not in r["ccdf"]
    assert np.all(np.isfinite(r["amam_curve"]["measured y"]))
    assert r["compression"]["predicted ŷ"]["reached"] == 0.0


def test_the_event_codec_carries_the_rf_fields(demo):
    x, y = demo.val.x[:8192], demo.val.y[:8192]
    spec = dataclasses.replace(demo.spec, input_power_ref_dbm=1.0, output_power_ref_dbm=2.0)
    pd = build_plot_data("preview", x, {"measured y": y, "predicted ŷ": y}, spec, target_name="measured y",
                         pred_name="predicted ŷ")
    back = event_codec.decode(event_codec.encode(E.PreviewReady(epoch=0, batch=1, batches=2, plots=pd,
                                                                metrics={"NMSE": -20.0}))).plots
    for f in ("curve_in", "pin_db", "ccdf_db"):
        assert np.array_equal(getattr(back, f), getattr(pd, f))
    for f in ("amam_curve", "ampm_curve", "pout_db", "ccdf"):
        assert set(getattr(back, f)) == set(getattr(pd, f))
        for k, v in getattr(pd, f).items():
            assert np.array_equal(getattr(back, f)[k], v, equal_nan=True)
    assert back.papr == pd.papr and back.power_ref_dbm == pd.power_ref_dbm
    assert back.compression["measured y"]["pin_db"] == pd.compression["measured y"]["pin_db"]
