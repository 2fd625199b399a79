"""The metric profiles (dpd_desktop/metrics/profiles.py): analytic known answers for ``corrected``, ``legacy-2.2.1``
unchanged, and the profile plumbing (config, record, re-evaluation)."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from dpd_desktop.config import ConfigError, ExperimentConfig
from dpd_desktop.data.framing import segment
from dpd_desktop.metrics import aclr_db, compute_metrics, nmse_db
from dpd_desktop.metrics.profiles import (DB_FLOOR, PROFILES, compute_profile_metrics, corrected_aclr,
                                          inband_error_db, pooled_nmse_db)
from dpd_desktop.metrics.spectra import psd_db, welch_psd

# DPA_160MHz geometry (4 carriers of 40 MHz in 160 MHz at 640 MHz), a shorter Welch window
FS, BW, NSC, NPS = 640e6, 160e6, 4, 2048
DF = FS / NPS  # 312.5 kHz
SPEC = SimpleNamespace(sample_rate_hz=FS, bw_main_hz=BW, n_sub_ch=NSC, nperseg=NPS)


def _iq(z: np.ndarray) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1).astype(np.float32)


def _shaped_noise(n: int, floor_db: float, guard_hz: float, seed: int = 0) -> np.ndarray:
    """Complex Gaussian noise whose PSD is 1 for |f| < B/2 - guard and 10**(floor_db/10) elsewhere (brick-wall filter
    on the n-point grid)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    f = np.fft.fftfreq(n, 1 / FS)
    shape = np.where(np.abs(f) < BW / 2 - guard_hz, 1.0, 10 ** (floor_db / 20))
    return np.fft.ifft(np.fft.fft(w) * shape)


def test_profiles_vocabulary_is_the_configuration_s():
    assert PROFILES == ("legacy-2.2.1", "corrected")
    assert ExperimentConfig().metric_profile == "legacy-2.2.1"
    with pytest.raises(ConfigError, match="metric_profile"):
        ExperimentConfig(metric_profile="matlab").validate()
    with pytest.raises(ValueError, match="unknown metric profile 'x'"):
        compute_profile_metrics("x", np.zeros((1, 4, 2)), np.zeros((1, 4, 2)), SPEC)


def test_legacy_profile_is_compute_metrics_bitwise():
    rng = np.random.default_rng(3)
    p = rng.standard_normal((3, NPS, 2)).astype(np.float32)
    r = (p + 0.05 * rng.standard_normal(p.shape)).astype(np.float32)
    a = compute_profile_metrics("legacy-2.2.1", p, r, SPEC, n_valid=2 * NPS + 5)  # n_valid is ignored
    b = compute_metrics(p, r, SPEC)
    assert a.keys() == b.keys()
    for k in a:
        assert np.asarray(a[k]).tobytes() == np.asarray(b[k]).tobytes(), k


def test_band_limited_noise_gives_the_designed_aclr():
    """In-band PSD 1, out-of-band floor -35 dB (guard of 4 MHz inside the main channel's edge, so the Hann leakage of
    the step is far below the floor): adjacent / strongest carrier = floor·W / (1·W) = -35 dB on both sides."""
    z = _shaped_noise(NPS * 400, -35.0, 4e6)
    left, right, avg = corrected_aclr(_iq(z), FS, BW, NSC, NPS)
    assert left == pytest.approx(-35.0, abs=0.05)
    assert right == pytest.approx(-35.0, abs=0.05)
    assert avg == pytest.approx((left + right) / 2, abs=1e-12)


def test_tones_give_their_amplitude_ratio():
    """Two tones on PSD bin centres (a periodic-Hann-windowed on-bin tone spreads over its bin and the two beside it
    only): amplitude 1 at -50 MHz (carrier 0), amplitude 0.01 at +100 MHz (right adjacent channel). ACLR_R =
    20·log10(0.01) = -40 dB exactly; nothing falls in the left adjacent channel: the -300 dB floor."""
    n = NPS * 8
    t = np.arange(n)
    f1, f2 = -160 * DF, 320 * DF  # -50 MHz, +100 MHz
    z = np.exp(2j * np.pi * f1 / FS * t) + 0.01 * np.exp(2j * np.pi * f2 / FS * t + 0.3j)
    left, right, _ = corrected_aclr(_iq(z), FS, BW, NSC, NPS)
    assert right == pytest.approx(-40.0, abs=1e-4)  # float32 I/Q: the amplitude 0.01 is stored to 1e-9
    assert left < -150  # roundoff only (float32 input), floored at DB_FLOOR at worst
    assert left >= DB_FLOOR


def test_appended_zero_padding_changes_corrected_not_at_all_and_legacy_visibly():
    """8.5 segments of valid samples, zero-padded to 9 whole segments as the evaluation does (reference §2.2): the
    corrected ACLR of the padded segments equals that of the valid samples alone, bitwise. The legacy ACLR of the
    padded segments is several dB worse than legacy on the 8 whole segments: its last segment ends abruptly in the
    middle of the Hann window, and that step leaks into the adjacent channels."""
    z = _shaped_noise(NPS * 8 + NPS // 2, -45.0, 4e6, seed=1)
    valid = _iq(z)
    padded = segment(valid, NPS)
    assert padded.shape == (9, NPS, 2) and not padded[-1, NPS // 2:].any()
    assert corrected_aclr(padded, FS, BW, NSC, NPS, n_valid=len(valid)) == corrected_aclr(valid, FS, BW, NSC, NPS)
    leg_whole = aclr_db(segment(valid[:8 * NPS], NPS), FS, BW, NSC)[2]
    leg_padded = aclr_db(padded, FS, BW, NSC)[2]
    assert leg_whole == pytest.approx(-45.0, abs=0.3)  # whole segments: legacy sees the design too
    assert leg_padded > leg_whole + 3.0  # the padded tail raises the legacy adjacent power by several dB


def test_pooled_nmse_against_a_hand_computation():
    """Two segments with equal reference energy (I = 1), errors 2**-3 and 2**-7 (exact in float32), then a
    zero-padded third segment: pooled = 10·log10((2**-6 + 2**-14) / 2) = -21.0552 dB; the legacy mean of segment dB is
    (-18.062 - 42.144)/2 = -30.103 dB over the two real segments and NaN with the padded one (0/0)."""
    n = 256
    ref = np.zeros((3, n, 2), np.float32)
    ref[:2, :, 0] = 1.0
    pred = ref.copy()
    pred[0, :, 0] += 2.0 ** -3
    pred[1, :, 0] += 2.0 ** -7
    hand = 10 * math.log10((n * 2.0 ** -6 + n * 2.0 ** -14) / (2 * n * 1.0))
    assert pooled_nmse_db(pred, ref, n_valid=2 * n) == pytest.approx(hand, abs=1e-9)
    assert hand == pytest.approx(-21.0552, abs=1e-4)
    assert float(nmse_db(pred[:2], ref[:2])) == pytest.approx(10 * math.log10(2.0 ** -10), abs=1e-4)  # -30.103
    with np.errstate(all="ignore"):
        assert math.isnan(float(nmse_db(pred, ref)))


def test_inband_error_of_a_gain_error_is_its_power_ratio():
    """pred = (1 + e)·ref: the in-band error is e·ref, whose power ratio is |e|² whatever the spectrum."""
    z = _shaped_noise(NPS * 16, -40.0, 4e6, seed=2)
    ref = _iq(z)
    pred = _iq(z * (1 + 0.03j))
    assert inband_error_db(pred, ref, FS, BW, NPS) == pytest.approx(20 * math.log10(0.03), abs=1e-3)


def test_corrected_profile_refuses_too_few_samples_and_no_spectral_metadata_is_nan():
    x = np.ones((1, NPS, 2), np.float32)
    with pytest.raises(ValueError, match="fewer than one PSD window"):
        compute_profile_metrics("corrected", x, x, SPEC, n_valid=NPS - 1)
    m = compute_profile_metrics("corrected", x * 0.5, x, SimpleNamespace(sample_rate_hz=None, bw_main_hz=None,
                                                                         n_sub_ch=None, nperseg=NPS))
    assert m["NMSE"] == pytest.approx(10 * math.log10(0.25), abs=1e-9)
    assert all(math.isnan(m[k]) for k in ("EVM", "ACLR_L", "ACLR_R", "ACLR_AVG"))


def test_psd_db_is_welch_psd_in_db():
    """psd_db (the plots' PSD) is the one Welch PSD in dB: same bins, same values."""
    z = _shaped_noise(NPS * 4, -30.0, 4e6, seed=4)
    f1, p1 = psd_db(_iq(z), FS, 512)
    f2, p2 = welch_psd(_iq(z), FS, 512)
    assert np.array_equal(f1, f2)
    assert np.array_equal(p1, np.maximum(10 * np.log10(p2), DB_FLOOR))
