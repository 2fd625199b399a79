"""The capture inspector's figures against a synthetic capture from a known PA, its flags, and the real datasets."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import capture_fixtures as cf
from datasets_dir import DATASETS
from dpd_desktop.analysis import estimators as est
from dpd_desktop.analysis.inspect import inspect_dataset
from dpd_desktop.data import Split, load_dataset
from dpd_desktop.data.readers import IQDataset

DPA200 = DATASETS / "DPA_200MHz"


def _need(path):
    if not path.is_dir():
        pytest.skip(f"dataset {path.name} not found")


@pytest.fixture(scope="module")
def known():
    x, y = cf.capture(2 ** 17)
    return inspect_dataset(cf.dataset_from(x, y))


def codes(rep):
    return [f.code for f in rep.flags]


def test_delay_gain_phase_and_p1db_match_the_known_pa(known):
    assert abs(known.delay_samples - cf.DELAY) < 0.05
    assert known.delay_integer == 7 and abs(known.delay_fraction - 0.3) < 0.05
    assert abs(known.gain_db - cf.GAIN_DB) < 0.05
    assert abs(known.phase_deg - cf.PHASE_DEG) < 0.5
    assert known.p1db_input_amplitude is not None
    assert abs(20 * np.log10(known.p1db_input_amplitude / cf.analytic_p1db())) < 0.5
    # a1 of the AM/AM fit is the small-signal |g| (cubic PA: |y| ≈ |g|(A + Re(c3) A³))
    assert abs(known.am_am["coefficients"][0] - 10 ** (cf.GAIN_DB / 20)) < 0.02
    assert known.am_am["coefficients"][1] < 0  # compressive
    assert codes(known) == ["DELAY"]  # 7.3 samples of misalignment, nothing else


@pytest.mark.parametrize("delay", [-3.6, 0.45, 12.0])
def test_delay_sign_and_fraction(delay):
    x, y = cf.capture(2 ** 15, seed=3, delay=delay)
    d = est.estimate_delay(x, y)
    assert abs(d.samples - delay) < 0.05


def test_papr_and_obw_against_direct_computation(known):
    x, y = cf.capture(2 ** 17)
    for z, got in ((x, known.papr_x_db), (y, known.papr_y_db)):
        p = np.abs(cf.iq(z).astype(np.float64).view(np.complex128)[:, 0]) ** 2
        assert got == pytest.approx(10 * np.log10(p.max() / p.mean()), abs=1e-6)
    # x occupies |f| < 0.9·BW/2 flat: 99 % of its power in 0.99 × 180 MHz, to a PSD bin (fs/2560)
    assert known.obw_x_hz == pytest.approx(0.99 * 0.9 * cf.BW, abs=2 * cf.FS / 2560)


def test_swapped_input_and_output_is_flagged():
    x, y = cf.capture(2 ** 16)
    rep = inspect_dataset(cf.dataset_from(y, x))
    assert "SWAPPED" in codes(rep)
    assert [f.severity for f in rep.flags if f.code == "SWAPPED"] == ["error"]


def test_all_zero_input_is_flagged():
    _, y = cf.capture(2 ** 15)
    rep = inspect_dataset(cf.dataset_from(np.zeros_like(y), y))
    assert codes(rep)[0] == "ZERO_CAPTURE" and rep.flags[0].severity == "error"
    assert "input x" in rep.flags[0].message


def test_nan_is_flagged_with_index_and_file():
    x, y = cf.capture(2 ** 15)
    ds = cf.dataset_from(x, y)
    vy = ds.val.y.copy()
    vy[123, 1] = np.nan
    vy[500, 0] = np.inf
    ds = IQDataset(name=ds.name, source=ds.source, spec=ds.spec, train=ds.train, val=Split(ds.val.x, vy),
                   test=ds.test)
    rep = inspect_dataset(ds)
    nf = [f for f in rep.flags if f.code == "NON_FINITE"]
    assert len(nf) == 1 and nf[0].severity == "error"
    assert "2 non-finite" in nf[0].message and "index 123" in nf[0].message and "val output" in nf[0].message
    assert np.isfinite(rep.papr_y_db)


def test_clipping_plateau_is_flagged():
    x, y = cf.capture(2 ** 15)
    a = np.abs(y)
    lim = np.percentile(a, 99)
    yc = np.where(a > lim, y / a * lim, y)
    assert "CLIPPING" in codes(inspect_dataset(cf.dataset_from(x, yc)))


def test_near_linear_capture_is_flagged():
    x = cf.band_limited(2 ** 15, seed=5)
    y = 2.0 * x * (1 - 0.001 * np.abs(x) ** 2)
    rep = inspect_dataset(cf.dataset_from(x, y))
    assert "NEAR_LINEAR" in codes(rep) and rep.linear_nmse_db < -30


def test_frame_length_longer_than_a_split():
    x, y = cf.capture(2 ** 15)
    rep = inspect_dataset(cf.dataset_from(x, y), frame_length=10000)
    msgs = [f.message for f in rep.flags if f.code == "FRAME_TOO_LONG"]
    assert msgs == ["Frame length 10000 is longer than the val split (6554 samples).",
                    "Frame length 10000 is longer than the test split (6554 samples)."]


def test_report_to_dict_is_json():
    x, y = cf.capture(2 ** 14)
    d = inspect_dataset(cf.dataset_from(x, y)).to_dict()
    text = json.dumps(d, allow_nan=False)
    assert json.loads(text)["delay_integer"] == 7
    assert "plots" not in d


def test_real_dpa_200mhz_has_no_error_flags():
    _need(DPA200)
    rep = inspect_dataset(load_dataset(DPA200))
    assert rep.errors == ()
    assert abs(rep.delay_samples) < 0.1
    assert 0.95 < rep.obw_ratio <= 1.0
    assert rep.aclr_y_db[2] < -30


def test_spec_with_the_wrong_bandwidth_is_flagged(tmp_path):
    _need(DPA200)
    d = tmp_path / "DPA_200MHz_100"
    shutil.copytree(DPA200, d)
    spec = json.loads((d / "spec.json").read_text())
    spec["bw_main_ch"] = 100e6
    (d / "spec.json").write_text(json.dumps(spec))
    rep = inspect_dataset(load_dataset(d))
    c = codes(rep)
    assert "SPEC_BANDWIDTH" in c and "SPEC_LAYOUT" in c
    assert rep.obw_ratio == pytest.approx(rep.obw_x_hz / 100e6)
    assert rep.obw_ratio > 1.9
    assert rep.aclr_y_db[2] > -10


def test_an_empty_carrier_is_flagged():
    rng = np.random.default_rng(9)
    n = 2 ** 15
    w = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    f = np.fft.fftfreq(n) * cf.FS
    x = np.fft.ifft(np.fft.fft(w) * ((f > -90e6) & (f < -10e6)))  # carrier 1 of 2 only
    x *= 0.25 / np.sqrt(np.mean(np.abs(x) ** 2))
    rep = inspect_dataset(cf.dataset_from(x, cf.pa(x), n_sub_ch=2))
    msg = [f.message for f in rep.flags if f.code == "SPEC_CARRIERS"]
    assert len(msg) == 1 and msg[0].startswith("Sub-channel 2 of 2 holds")
