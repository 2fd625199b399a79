"""The RF engineer's curves (metrics/transfer.py, metrics/ccdf.py, spectra.psd_dbm_per_hz) against closed forms:
the P1dB of a Rapp PA, the AM/PM of a Saleh PA, the CCDF of a complex Gaussian signal, the power of white noise."""
from __future__ import annotations

import math

import numpy as np
import pytest

from dpd_desktop.data.synthetic import saleh_pa
from dpd_desktop.metrics.ccdf import CCDF_LEVELS_DB, ccdf, papr_db, papr_probability
from dpd_desktop.metrics.spectra import psd_db, psd_dbm_per_hz, welch_psd
from dpd_desktop.metrics.transfer import binned_transfer, compression_point


def gaussian(n: int, seed: int = 0, rms: float = 1.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rms * (rng.standard_normal(n) + 1j * rng.standard_normal(n)) / math.sqrt(2)


def rapp(x: np.ndarray, gain: float, a_sat: float, p: float) -> np.ndarray:
    """Rapp's solid-state PA model (AM/AM only): |y| = G·r / (1 + (G·r/A_sat)^(2p))^(1/(2p))."""
    r = np.abs(x)
    return gain * x / (1.0 + (gain * r / a_sat) ** (2 * p)) ** (1.0 / (2 * p))


def rapp_compression_in_db(gain: float, a_sat: float, p: float, drop_db: float = 1.0) -> float:
    """Input power [dB re unit power] at which Rapp's gain is ``drop_db`` below G: (G·r/A)^(2p) = 10^(p·drop/10) - 1
    (P1dB: 10^(p/10) - 1)."""
    r1 = a_sat / gain * (10 ** (p * drop_db / 10) - 1) ** (1 / (2 * p))
    return 20 * math.log10(r1)


@pytest.mark.parametrize("p", [1.0, 2.0, 3.0])
def test_p1db_of_a_rapp_pa_matches_its_closed_form(p):
    g, a_sat = 3.0, 1.2
    x = gaussian(400_000, seed=1, rms=0.35)
    y = rapp(x, g, a_sat, p)
    t = binned_transfer(x, y, scale="db", bin_db=0.25, span_db=40)
    cp = compression_point(t)
    g_db = 20 * math.log10(g)
    # the small-signal gain is measured 30-40 dB below the peak, where a soft Rapp (p = 1) is already 0.02 dB
    # compressed: the point is 1 dB below that gain, i.e. 1 + (G - gain_ss) dB below G
    assert cp.gain_ss_db == pytest.approx(g_db, abs=0.03 if p == 1 else 0.002)
    want = rapp_compression_in_db(g, a_sat, p, 1.0 + (g_db - cp.gain_ss_db))
    assert cp.reached
    assert cp.pin_db == pytest.approx(want, abs=0.03)
    assert cp.pout_db == pytest.approx(want + cp.gain_ss_db - 1.0, abs=0.03)
    if p >= 2:  # the textbook P1dB, against G itself
        assert cp.pin_db == pytest.approx(rapp_compression_in_db(g, a_sat, p), abs=0.03)
    # the curve itself: the gain of each bin against the model's gain at the bin's rms amplitude
    r = 10 ** (t.pin_db / 20)
    model = 20 * np.log10(np.abs(rapp(r.astype(complex), g, a_sat, p)) / r)
    assert np.max(np.abs(t.gain_db - model)) < 0.05


def test_compression_not_reached_is_nan_with_the_largest_drop():
    x = gaussian(100_000, seed=2, rms=0.1)
    y = rapp(x, 2.0, 5.0, 2.0)  # far below saturation: ~0.0 dB compression
    cp = compression_point(binned_transfer(x, y, scale="db"))
    assert not cp.reached and math.isnan(cp.pin_db) and math.isnan(cp.pout_db)
    assert 0 <= cp.max_compression_db < 0.05


def test_binned_gain_ignores_additive_noise_where_the_mean_power_does_not():
    x = gaussian(400_000, seed=3)
    clean = 2.0 * x
    noise = gaussian(x.size, seed=4, rms=2.0 * 10 ** (-30 / 20))  # -30 dB below the mean output power
    t = binned_transfer(x, clean + noise, scale="db", bin_db=1.0, span_db=30)
    low = t.pin_db < -15
    assert np.all(np.abs(t.gain_db[low] - 20 * math.log10(2.0)) < 0.1)
    # the naive estimate 10·log10(mean|y|² / mean|x|²) per bin sees the noise as gain expansion there
    p = np.abs(x) ** 2
    sel = (10 * np.log10(p) > -21) & (10 * np.log10(p) < -20)
    naive = 10 * np.log10(np.mean(np.abs(clean[sel] + noise[sel]) ** 2) / np.mean(p[sel]))
    assert naive - 20 * math.log10(2.0) > 0.3


def test_am_pm_of_a_saleh_pa_matches_its_phase_law():
    x = gaussian(300_000, seed=5, rms=0.4)
    y = saleh_pa(x)  # Φ(r) = 0.55 r² / (1 + 0.3 r²)
    t = binned_transfer(x, y, scale="linear", n_bins=64)
    r = t.amp_in
    want = np.degrees(0.55 * r**2 / (1 + 0.3 * r**2))
    amp = 2.7 * r / (1 + 0.18 * r**2)
    assert np.max(np.abs(t.phase_deg - want)) < 0.2
    assert np.max(np.abs(t.amp_out - amp) / amp) < 0.01
    assert np.all(np.diff(t.amp_in) > 0) and t.count.min() >= 5


def test_binned_transfer_leaves_out_nonfinite_and_zero_samples():
    x = gaussian(1000, seed=6)
    y = 1.5 * x
    y[:10] = np.nan
    x[10:20] = 0
    t = binned_transfer(np.stack([x.real, x.imag], 1).astype(np.float32), y, n_bins=4, min_count=1)
    assert int(t.count.sum()) == 980 and t.dropped == 20
    assert np.allclose(np.abs(t.gain), 1.5, atol=1e-6)
    with pytest.raises(ValueError):
        binned_transfer(x, y[:-1])


def test_ccdf_of_a_complex_gaussian_signal_is_exp_minus_the_level():
    z = gaussian(1_000_000, seed=7)
    levels = np.arange(0.0, 9.01, 0.5)
    got = ccdf(z, levels)
    # the exact law for the sample's own mean power (the normalisation uses the sample mean)
    p = np.abs(z) ** 2
    want = np.exp(-(10 ** (levels / 10)) * p.mean())
    sd = np.sqrt(want * (1 - want) / z.size)
    assert np.all(np.abs(got - want) <= 5 * sd + 1e-12)
    assert np.all(np.diff(ccdf(z)) <= 0) and ccdf(z)[0] == pytest.approx(math.exp(-1), abs=0.002)
    at, peak = papr_db(z, 1e-4)
    assert at == pytest.approx(10 * math.log10(math.log(1e4)), abs=0.1)  # 9.64 dB
    assert peak == pytest.approx(10 * math.log10(np.max(p) / p.mean()))


def test_ccdf_counts_exactly_on_a_two_level_signal():
    # 90 % of the samples at power 1, 10 % at power 10: mean 1.9; levels above the mean: -2.79 dB and +7.21 dB
    z = np.concatenate([np.ones(900), np.full(100, math.sqrt(10))]).astype(complex)
    hi = 10 * math.log10(10 / 1.9)
    got = ccdf(z, [0.0, hi - 0.01, hi + 0.01])
    assert got.tolist() == [0.1, 0.1, 0.0]
    assert papr_db(z, 0.05)[0] == pytest.approx(hi)
    assert math.isnan(papr_db(z[:50], 1e-3)[0])  # fewer samples than 1/prob
    assert papr_db(np.exp(1j * np.linspace(0, 6, 500)), 1e-2) == pytest.approx((0.0, 0.0), abs=1e-9)


def test_ccdf_levels_and_probability_rule():
    assert CCDF_LEVELS_DB[0] == 0.0 and CCDF_LEVELS_DB[-1] == pytest.approx(16.0) and len(CCDF_LEVELS_DB) == 321
    assert [papr_probability(n) for n in (98_304, 100_000, 9_999, 16_384)] == [1e-3, 1e-4, 1e-2, 1e-3]
    with pytest.raises(ValueError):
        ccdf(np.zeros(10, complex))
    with pytest.raises(ValueError):
        ccdf(np.ones(10, complex), [1.0, 0.0])


def test_psd_in_dbm_per_hz_integrates_to_the_signal_power_in_dbm():
    fs, ref = 100e6, 13.0  # a unit-power signal is +13 dBm
    z = gaussian(2**17, seed=8, rms=0.5)  # -6.02 dB re unit power → +6.98 dBm
    f, d = psd_db(z, fs, 1024)
    dbm = psd_dbm_per_hz(d, ref)
    total_dbm = 10 * math.log10(np.sum(10 ** (dbm / 10)) * (f[1] - f[0]))
    assert total_dbm == pytest.approx(10 * math.log10(np.mean(np.abs(z) ** 2)) + ref, abs=0.01)
    # white noise: the density is flat at the power over fs
    assert np.median(dbm) == pytest.approx(10 * math.log10(0.25 / fs) + ref, abs=0.2)
    _, lin = welch_psd(z, fs, 1024)
    assert np.allclose(dbm, 10 * np.log10(lin) + ref)
    assert psd_dbm_per_hz([-300.0], 20.0).tolist() == [-300.0]
    with pytest.raises(ValueError):
        psd_dbm_per_hz(d, float("nan"))


def test_peak_papr_from_peak_and_rms_and_the_run_dpd_banner_text():
    from dpd_desktop.metrics.ccdf import peak_papr_db

    assert peak_papr_db(2.0, 1.0) == pytest.approx(6.0206, abs=1e-4)
    assert math.isnan(peak_papr_db(0.0, 1.0)) and math.isnan(peak_papr_db(None, 1.0))
    z = gaussian(10_000, seed=9)
    rms = math.sqrt(np.mean(np.abs(z) ** 2))
    assert peak_papr_db(np.max(np.abs(z)), rms) == pytest.approx(papr_db(z)[1], abs=1e-9)


@pytest.mark.parametrize("n, prob", [(1000, 1e-2), (98_304, 1e-3), (100_000, 1e-4), (20, 0.05), (50, 0.02)])
def test_papr_quantile_is_numpys_linear_quantile(n, prob):
    from dpd_desktop.metrics.ccdf import _upper_quantile

    for seed in range(3):
        z = gaussian(n, seed=seed) if seed < 2 else np.exp(1j * np.arange(n)) * (1 + (np.arange(n) % 7 == 0))
        p = np.abs(z) ** 2
        r = p / p.mean()
        assert _upper_quantile(r, 1 - prob) == pytest.approx(float(np.quantile(r, 1 - prob)), rel=1e-12)


def test_ccdf_even_grid_path_counts_as_the_search_does():
    z = gaussian(200_000, seed=11)
    even = ccdf(z)  # the plots' even 0.05 dB grid
    levels = CCDF_LEVELS_DB.copy()
    levels[-1] += 1e-6  # uneven: the searchsorted path
    search = ccdf(z, levels)
    assert np.array_equal(even[:-1], search[:-1])
