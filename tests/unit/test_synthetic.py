"""Tests for the synthetic demo dataset (dpd_desktop.data.synthetic)."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from dpd_desktop.data import DatasetError, IQDataset, load_dataset, make_demo_dataset, write_demo_dataset

FS = 640e6


@pytest.fixture(scope="module")
def demo() -> IQDataset:
    return make_demo_dataset()


def _all(ds: IQDataset, k: str) -> np.ndarray:
    return np.concatenate([getattr(s, k + "_complex") for s in ds.splits.values()]).astype(np.complex128)


def _psd(z: np.ndarray, nperseg: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """Averaged Hann-windowed periodogram over consecutive segments; frequencies ascending (Hz)."""
    n_seg = len(z) // nperseg
    seg = z[: n_seg * nperseg].reshape(n_seg, nperseg)
    w = np.hanning(nperseg)
    p = np.mean(np.abs(np.fft.fft(seg * w, axis=1)) ** 2, axis=0)
    f = np.fft.fftfreq(nperseg, d=1 / FS)
    return np.fft.fftshift(f), np.fft.fftshift(p)


def test_defaults_shapes_spec(demo):
    assert demo.name == "Demo PA (synthetic)"
    assert demo.n_samples == {"train": 61440, "val": 16384, "test": 16384}
    for s in demo.splits.values():
        for a in (s.x, s.y):
            assert a.dtype == np.float32 and a.flags["C_CONTIGUOUS"] and a.shape[1] == 2
    sp = demo.spec
    assert (sp.sample_rate_hz, sp.bw_main_hz, sp.bw_sub_hz, sp.n_sub_ch, sp.nperseg) == (640e6, 160e6, 40e6, 4, 4096)
    assert len(demo.val) // sp.nperseg == 4 and len(demo.val) % sp.nperseg == 0
    sp.require_metrics()
    assert abs(sum(sp.split_ratios.values()) - 1) < 1e-12
    assert np.abs(_all(demo, "x")).max() == pytest.approx(1.0, abs=1e-6)  # peak-normalized over all splits
    assert 1.8 < demo.gain < 2.8


def test_deterministic_by_seed(demo):
    again = make_demo_dataset(seed=0)
    for s in ("train", "val", "test"):
        assert demo.splits[s].x.tobytes() == again.splits[s].x.tobytes()
        assert demo.splits[s].y.tobytes() == again.splits[s].y.tobytes()
    assert demo.fingerprint() == again.fingerprint()
    other = make_demo_dataset(seed=1)
    assert not np.array_equal(other.train.x, demo.train.x)
    assert other.fingerprint() != demo.fingerprint()


def test_fast():
    t0 = time.perf_counter()
    make_demo_dataset(seed=5)
    assert time.perf_counter() - t0 < 3.0  # ~0.05 s on a 2-core machine


def test_psd_shows_four_carriers(demo):
    f, p = _psd(_all(demo, "x"))
    main = p[(f >= -80e6) & (f <= 80e6)].sum()
    left = p[(f >= -120e6) & (f < -80e6)].sum()
    right = p[(f > 80e6) & (f < 120e6)].sum()
    assert 10 * np.log10(main / left) > 30 and 10 * np.log10(main / right) > 30
    # the four 40 MHz carriers carry equal power (within 1 dB) ...
    car = [p[np.abs(f - fc) < 17e6].mean() for fc in (-60e6, -20e6, 20e6, 60e6)]
    assert 10 * np.log10(max(car) / min(car)) < 1.0
    # ... and are separated by guard gaps at -40, 0, +40 MHz (between carriers), >20 dB below in-band density
    for gap in (-40e6, 0.0, 40e6):
        g = p[np.abs(f - gap) < 0.8e6].mean()
        assert 10 * np.log10(min(car) / g) > 20, gap


def test_pa_output_compressed_with_am_pm(demo):
    x, y = _all(demo, "x"), _all(demo, "y")
    r = np.abs(x)
    gain = np.abs(y) / np.maximum(r, 1e-12)
    phase = np.angle(y * np.conj(x), deg=True)
    low = (r > 0.1) & (r < 0.3)
    high = r > 0.7
    assert high.sum() > 50
    g_lo, g_hi = np.median(gain[low]), np.median(gain[high])
    assert g_hi < g_lo and 20 * np.log10(g_lo / g_hi) > 0.5  # AM/AM compression
    assert np.median(phase[high]) - np.median(phase[low]) > 10.0  # AM/PM, degrees
    # spectral regrowth: the PA output has more adjacent-channel power than the input
    fx, px = _psd(x)
    _, py = _psd(y)
    adj = (np.abs(fx) > 80e6) & (np.abs(fx) < 120e6)
    inb = np.abs(fx) <= 80e6
    assert py[adj].sum() / py[inb].sum() > 100 * px[adj].sum() / px[inb].sum()


def test_write_load_round_trip(tmp_path):
    kw = dict(seed=3, n_train=8192, n_val=4096, n_test=4096)
    folder = write_demo_dataset(tmp_path / "demo", **kw)
    assert folder == tmp_path / "demo"
    names = sorted(p.name for p in folder.iterdir())
    assert names == sorted(["spec.json"] + [f"{s}_{r}.csv" for s in ("train", "val", "test") for r in ("input", "output")])
    spec = json.loads((folder / "spec.json").read_text())
    assert spec["input_signal_fs"] == 640e6 and spec["n_sub_ch"] == 4 and spec["nperseg"] == 4096
    assert (folder / "train_input.csv").read_text().startswith("I,Q\n")
    ds = make_demo_dataset(**kw)
    back = load_dataset(folder)
    for s in ("train", "val", "test"):
        # %.9g is enough for float32: equal within float32 CSV precision (in fact bit-exact)
        np.testing.assert_allclose(back.splits[s].x, ds.splits[s].x, rtol=1e-7, atol=0)
        np.testing.assert_allclose(back.splits[s].y, ds.splits[s].y, rtol=1e-7, atol=0)
    assert back.fingerprint() == ds.fingerprint()
    assert back.spec.sample_rate_hz == 640e6 and back.spec.extra == ds.spec.extra


@pytest.mark.parametrize("kw", [dict(n_val=0), dict(n_train=-1), dict(nperseg=10), dict(qam_order=8)])
def test_bad_arguments(kw):
    with pytest.raises(ValueError):
        make_demo_dataset(**kw)


def test_loaded_demo_errors_are_dataset_errors(tmp_path):
    folder = write_demo_dataset(tmp_path / "d", n_train=512, n_val=256, n_test=256, nperseg=256)
    (folder / "test_input.csv").write_text("I,Q\n")
    with pytest.raises(DatasetError, match="test_input.csv line 1"):
        load_dataset(folder)
