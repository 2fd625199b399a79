"""The window's RF plots (issue 28, "what an RF engineer expects"): the binned curves over the AM/AM and AM/PM
points, the PSD in dBm/Hz when the dataset gives its power reference, and the RF dock (gain compression with P1dB,
Pin/Pout, CCDF with PAPR), drawn from PlotData built by the core (runs/plotdata.py)."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import gui_fakes
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.gui.panels.psd import LABEL_DBM, LABEL_REL
from dpd_desktop.gui.rf_view import show_rf_plots
from dpd_desktop.runs.plotdata import build_plot_data


@pytest.fixture(scope="module")
def demo():
    return make_demo_dataset(n_train=4096, n_val=32768, n_test=4096, nperseg=4096)


def rf_plots(demo, refs=(-2.0, 20.0), scale=1.02):
    spec = demo.spec
    if refs is not None:
        spec = dataclasses.replace(spec, input_power_ref_dbm=refs[0], output_power_ref_dbm=refs[1])
    y = demo.val.y
    return build_plot_data("validation", demo.val.x, {"measured y": y, "predicted ŷ": (y * scale).astype(np.float32)},
                           spec, target_name="measured y", pred_name="predicted ŷ",
                           error_of=("predicted ŷ", "measured y"))


def item_data(item):
    x, y = item.getOriginalDataset()  # the data given (getData is log10 of it on a log axis)
    return np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)


def test_am_am_and_am_pm_draw_each_signals_binned_curve_over_its_points(make_window, demo):
    w = make_window()
    plots = rf_plots(demo)
    w.show_plots(plots, "validation · epoch 0")
    for panel, field in ((w.amam_panel, "amam_curve"), (w.ampm_panel, "ampm_curve")):
        assert panel.curve_names() == ["measured y", "predicted ŷ"]
        for name in ("measured y", "predicted ŷ"):
            x, y = item_data(panel.curves.items[name])
            assert np.array_equal(x, plots.curve_in.astype(np.float64))
            assert np.array_equal(y, getattr(plots, field)[name].astype(np.float64))
            assert panel.curves.items[name].zValue() > panel.points.items[name].zValue()  # the line over the dots
        assert panel.point_count() == 2 * len(plots.amam_in)  # the points as before
    x, y = item_data(w.amam_panel.curves.items["predicted ŷ"])
    assert np.allclose(y / item_data(w.amam_panel.curves.items["measured y"])[1], 1.02, rtol=1e-4)


def test_psd_is_in_dbm_per_hz_with_a_power_reference_and_says_so_without(make_window, demo):
    w = make_window()
    plots = rf_plots(demo, refs=(-2.0, 20.0))
    w.show_plots(plots)
    assert w.psd_panel.unit_label == LABEL_DBM
    assert w.psd_panel.plot.getAxis("left").labelText == LABEL_DBM
    _, y = item_data(w.psd_panel.curves.items["measured y"])
    assert np.allclose(y, plots.psd["measured y"] + 20.0, atol=1e-4)
    _, x_psd = item_data(w.psd_panel.curves.items["input x"])
    assert np.allclose(x_psd, plots.psd["input x"] - 2.0, atol=1e-4)  # the input plane's reference
    # the in-band density in dBm/Hz integrates to the output power in dBm (a unit-power signal is +20 dBm)
    f = plots.psd_freq_mhz.astype(np.float64) * 1e6
    total = 10 * math.log10(np.sum(10 ** (y / 10)) * (f[1] - f[0]))
    yc = demo.val.y.astype(np.float64)
    assert total == pytest.approx(10 * math.log10(np.mean(yc[:, 0] ** 2 + yc[:, 1] ** 2)) + 20.0, abs=0.1)
    w.show_plots(rf_plots(demo, refs=None))
    assert w.psd_panel.unit_label == LABEL_REL and w.psd_panel.plot.getAxis("left").labelText == LABEL_REL
    assert "power_ref_dbm" in w.psd_panel.toolTip()


def test_the_rf_dock_draws_only_when_shown_then_compression_pin_pout_and_ccdf(make_window, qtbot, demo):
    w = make_window()
    view = w.rf_view
    assert not w.rf_dock.isVisible()
    plots = rf_plots(demo)
    w.show_plots(plots, "validation · epoch 2")
    qtbot.wait(50)
    assert view.draws == 0  # hidden: nothing drawn (the GUI thread's epoch end stays as cheap as before)
    show_rf_plots(w)
    qtbot.waitUntil(lambda: view.draws == 3, timeout=5000)
    assert w.rf_toggle.isChecked() and w.rf_button.isChecked()

    comp = view.compression_panel
    c = plots.compression["measured y"]
    assert c["reached"] == 1.0
    text = comp.readout_plain
    gain = c["gain_ss_db"] + 20.0 - (-2.0)  # dBm out - dBm in: the capture's real gain
    assert f"measured y: G {gain:.2f} dB" in text
    assert f"P1dB {c['pin_db'] - 2.0:.1f} dBm in, {c['pout_db'] + 20.0:.1f} dBm out" in text
    x, y = item_data(comp.curves.items["measured y"])
    assert np.allclose(x, plots.pin_db - 2.0, atol=1e-4)
    assert np.nanmax(np.abs(y[x < x[0] + 10])) < 0.3  # relative to the small-signal gain: ~0 at low power
    mx, my = item_data(comp.markers.items["measured y"])
    assert mx[0] == pytest.approx(c["pin_db"] - 2.0, abs=1e-4) and my[0] == -1.0
    assert comp.plot.getAxis("bottom").labelText == "Pin [dBm]"

    pp = view.pin_pout_panel
    x, y = item_data(pp.curves.items["measured y"])
    assert np.allclose(y, plots.pout_db["measured y"] + 20.0, atol=1e-4, equal_nan=True)
    assert pp.plot.getAxis("left").labelText == "Pout [dBm]"
    assert pp.linear.isVisible()

    cc = view.ccdf_panel
    assert set(cc.curves.items) == {"input x", "measured y", "predicted ŷ"}
    prob, at, peak = plots.papr["input x"]
    assert f"PAPR at {100 * prob:g} %" in cc.readout_plain and f"input x {at:.1f} dB" in cc.readout_plain
    _, p = item_data(cc.curves.items["input x"])
    n = len(p)
    assert np.array_equal(p, np.where(plots.ccdf["input x"][:n] > 0, plots.ccdf["input x"][:n], np.nan),
                          equal_nan=True)

    # a new run clears the RF plots with the others
    w.reset_run_views()
    assert all(not p.has_data() for p in view.panels)


def test_without_a_power_reference_the_rf_axes_say_db_rel(make_window, qtbot, demo):
    w = make_window()
    show_rf_plots(w)
    w.show_plots(rf_plots(demo, refs=None))
    qtbot.waitUntil(lambda: w.rf_view.draws == 3, timeout=5000)
    assert w.rf_view.compression_panel.plot.getAxis("bottom").labelText == "Pin [dB rel.]"
    assert w.rf_view.pin_pout_panel.plot.getAxis("left").labelText == "Pout [dB rel.]"
    assert "dB rel. in" in w.rf_view.compression_panel.readout_plain


def test_rf_panels_follow_a_live_run_and_export(make_window, qtbot, demo, monkeypatch, tmp_path):
    plots = rf_plots(demo)
    monkeypatch.setattr(gui_fakes, "make_plotdata", lambda *a, **k: plots)
    w = make_window(trainer_factory=gui_fakes.fake_factory(batches=2, batch_delay=0.0))
    show_rf_plots(w)
    w.set_dataset(gui_fakes.FakeDataset(), "fake")
    with qtbot.waitSignal(w.runEnded, timeout=20000):
        assert w.start_run(w.config_from_form(validate=False).__class__(epochs=2, step="pa", dataset="fake"))
    qtbot.waitUntil(lambda: w.rf_view.ccdf_panel.has_data(), timeout=5000)
    # the RF panels are plots of the window: clicking one makes it the current plot of Ctrl+E
    w.rf_view.ccdf_panel.activated.emit(w.rf_view.ccdf_panel)
    out = w.export_current_plot(tmp_path / "ccdf.png")
    assert out is not None and out.stat().st_size > 1000


@pytest.mark.parametrize("size, floating", [((1280, 800), True), ((1920, 1080), False)])
def test_the_rf_dock_floats_when_the_window_has_no_room_beside_its_plots(make_window, qtbot, size, floating):
    w = make_window()
    w.resize(*size)
    qtbot.wait(20)
    before = w.width()
    show_rf_plots(w)
    qtbot.waitUntil(lambda: w.rf_dock.isVisible(), timeout=3000)
    assert w.rf_dock.isFloating() == floating
    assert w.width() == before  # the dock never widens the window
    w.rf_toggle.trigger()  # View ▸ RF plots again: hidden
    assert not w.rf_dock.isVisible() and not w.rf_button.isChecked()
