"""Tests of dpd_desktop.metrics against known answers, an independent float64 implementation, a straightforward
float32 re-derivation of the reference numerics ("OpenDPD 2.2.1 reference §6"), and the bundled DPA_200MHz data."""

from __future__ import annotations

import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from scipy.signal import welch

from dpd_desktop.metrics import (
    METRIC_KEYS,
    aclr_db,
    channel_bins,
    compute_metrics,
    evm_db,
    nmse_db,
    psd_db,
)
from dpd_desktop.runs.plotdata import PSD_NPERSEG_MAX, build_plot_data
from datasets_dir import DATASETS  # tests/datasets_dir.py


# DPA_200MHz geometry: fs 800 MHz, N 2560, B 200 MHz, 10 sub-channels -> iL 960, iR 1600, W 64.
FS, N, B, NSC = 800e6, 2560, 200e6, 10


# ----------------------------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------------------------


def iq(z: np.ndarray) -> np.ndarray:
    """complex (S, N) -> float32 (S, N, 2)."""
    return np.stack([z.real, z.imag], axis=-1).astype(np.float32)


def tones(n: int, bins_amps: dict[int, float], rng, shifted_center: int | None = None, s: int = 1) -> np.ndarray:
    """Sum of complex exponentials exactly on FFT bins. Keys are indices on the *shifted* (ascending) grid."""
    center = n // 2 if shifted_center is None else shifted_center
    t = np.arange(n)
    out = np.zeros((s, n), dtype=np.complex128)
    for seg in range(s):
        for k, a in bins_amps.items():
            phase = rng.uniform(0, 2 * np.pi)
            out[seg] += a * np.exp(1j * (2 * np.pi * (k - center) * t / n + phase))
    return out


def ofdm_like(s: int, n: int, fs: float, bw: float, nsc: int, rng, fill: float = 0.9) -> np.ndarray:
    """Multi-carrier OFDM-like complex baseband: random 16-QAM on bins inside each sub-channel, IFFT per segment."""
    df = fs / n
    f = np.fft.fftfreq(n, 1 / fs)
    sub = bw / nsc
    spec = np.zeros((s, n), dtype=np.complex128)
    for c in range(nsc):
        lo = -bw / 2 + c * sub
        centre = lo + sub / 2
        mask = np.abs(f - centre) < fill * sub / 2 - df
        m = int(mask.sum())
        sym = (rng.integers(-3, 4, (s, m)) | 1) + 1j * (rng.integers(-3, 4, (s, m)) | 1)
        spec[:, mask] = sym
    x = np.fft.ifft(spec, axis=-1)
    return x / np.max(np.abs(x)) * 0.9


def pa(x: np.ndarray) -> np.ndarray:
    """A memoryless AM/AM + AM/PM nonlinearity (spectral regrowth into the adjacent channels)."""
    a2 = np.abs(x) ** 2
    return x * (1 - 0.15 * a2) * np.exp(1j * 0.3 * a2)


# ----------------------------------------------------------------------------------------------------------------
# independent float64 implementation (own Hann, own detrend, own FFT-shift and own band edges)
# ----------------------------------------------------------------------------------------------------------------


def ind_geometry(fs: float, bw: float, nsc: int, n: int) -> tuple[int, int, int]:
    """Exact rational arithmetic. Bin k of the ascending grid has offset j = k - n//2 and f = j*fs/n (for odd n the
    offsets run -(n-1)/2 .. (n-1)/2). iL = first k with f >= -B/2, iR = last k with f <= B/2, W = (iR-iL)//nsc."""
    fs_q, b_q = Fraction(fs), Fraction(bw)
    half_bins = (b_q / 2) * n / fs_q  # B/2 in bins
    j_lo = -math.floor(half_bins)  # smallest j with j >= -half_bins
    j_hi = math.floor(half_bins)
    il, ir = j_lo + n // 2, j_hi + n // 2
    return il, ir, (ir - il) // nsc


def ind_shift(a: np.ndarray) -> np.ndarray:
    n = a.shape[-1]
    pos = (n + 1) // 2  # number of bins with f >= 0 in FFT order
    return np.concatenate([a[..., pos:], a[..., :pos]], axis=-1)


def ind_nmse(p: np.ndarray, r: np.ndarray) -> float:
    pc = p[..., 0].astype(np.float64) + 1j * p[..., 1]
    rc = r[..., 0].astype(np.float64) + 1j * r[..., 1]
    per = [10 * np.log10(np.sum(np.abs(pc[s] - rc[s]) ** 2) / np.sum(np.abs(rc[s]) ** 2)) for s in range(len(pc))]
    return float(sum(per) / len(per))


def ind_aclr(p: np.ndarray, fs: float, bw: float, nsc: int) -> tuple[float, float, float]:
    pc = p[..., 0].astype(np.float64) + 1j * p[..., 1]
    n = pc.shape[-1]
    w = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n)  # periodic Hann
    spec = np.zeros(n)
    for s in range(pc.shape[0]):
        z = pc[s] - pc[s].sum() / n
        spec += ind_shift(np.abs(np.fft.fft(w * z)) ** 2 / w.sum() ** 2)
    spec /= pc.shape[0]
    il, ir, wb = ind_geometry(fs, bw, nsc, n)
    pmax = max(spec[il + c * wb : il + (c + 1) * wb].sum() for c in range(nsc))
    left = 10 * math.log10(spec[il - wb : il].sum() / pmax)
    right = 10 * math.log10(spec[ir : ir + wb].sum() / pmax)
    return left, right, (left + right) / 2


def ind_evm(p: np.ndarray, r: np.ndarray, fs: float, bw: float, nsc: int) -> float:
    pc = p[..., 0].astype(np.float64) + 1j * p[..., 1]
    rc = r[..., 0].astype(np.float64) + 1j * r[..., 1]
    n = pc.shape[-1]
    il, ir, wb = ind_geometry(fs, bw, nsc, n)
    per_seg = []
    for s in range(pc.shape[0]):
        P, R = ind_shift(np.fft.fft(pc[s])), ind_shift(np.fft.fft(rc[s]))
        e = [
            np.abs(P[a : a + wb] - R[a : a + wb]).sum() / np.abs(R[a : a + wb]).sum()
            for a in (il + c * wb for c in range(nsc))
        ]
        per_seg.append(sum(e) / nsc)
    return 20 * math.log10(sum(per_seg) / len(per_seg))


# ----------------------------------------------------------------------------------------------------------------
# straightforward float32 re-derivation of the stated reference numerics (loops; for bitwise == comparison)
# ----------------------------------------------------------------------------------------------------------------


def f32_nmse(p, r):
    vals = []
    for s in range(p.shape[0]):
        num = np.mean((r[s, :, 0] - p[s, :, 0]) ** 2 + (r[s, :, 1] - p[s, :, 1]) ** 2)
        den = np.mean(r[s, :, 0] ** 2 + r[s, :, 1] ** 2)
        vals.append(10 * np.log10(num / den))
    return np.mean(np.array(vals, dtype=np.float32))


def f32_aclr(p, fs, bw, nsc):
    n = p.shape[1]
    rows = []
    for s in range(p.shape[0]):
        z = p[s, :, 0] + 1j * p[s, :, 1]  # complex64 (NEP 50: python complex is a weak scalar)
        assert z.dtype == np.complex64
        f, pxx = welch(z, fs, nperseg=n, return_onesided=False, scaling="spectrum")
        assert pxx.dtype == np.float32
        rows.append(np.concatenate([pxx[n // 2 :], pxx[: n // 2]]))  # swap halves (even n)
    spec = np.mean(np.stack(rows), axis=0)
    freqs = np.concatenate([f[n // 2 :], f[: n // 2]])
    il = int(np.argmax(freqs >= -bw / 2))
    ir = int(np.nonzero(freqs <= bw / 2)[0][-1])
    wb = (ir - il) // nsc
    pmax = max(np.sum(spec[il + c * wb : il + (c + 1) * wb]) for c in range(nsc))
    left = 10 * np.log10(np.float64(np.sum(spec[il - wb : il])) / np.float64(pmax))
    right = 10 * np.log10(np.float64(np.sum(spec[ir : ir + wb])) / np.float64(pmax))
    return left, right, np.mean([left, right])


def f32_evm(p, r, fs, bw, nsc):
    n = p.shape[1]
    freqs = np.fft.fftshift(np.fft.fftfreq(n, 1 / fs))
    il = int(np.argmax(freqs >= -bw / 2))
    ir = int(np.nonzero(freqs <= bw / 2)[0][-1])
    wb = (ir - il) // nsc
    per_seg = []
    for s in range(p.shape[0]):
        P = np.fft.fftshift(np.fft.fft(p[s, :, 0] + 1j * p[s, :, 1]))
        R = np.fft.fftshift(np.fft.fft(r[s, :, 0] + 1j * r[s, :, 1]))
        assert P.dtype == np.complex64
        e = []
        for c in range(nsc):
            sl = slice(il + c * wb, il + (c + 1) * wb)
            num = np.mean(np.abs(P[sl] - R[sl]))
            den = np.mean(np.abs(R[sl]))
            assert num.dtype == np.float32
            e.append(np.float64(num) / np.float64(den))
        per_seg.append(np.mean(e))
    return 20 * np.log10(np.mean(per_seg))


@pytest.fixture(scope="module")
def ofdm_pair():
    rng = np.random.default_rng(1234)
    fs, bw, nsc, s, n = 800e6, 200e6, 10, 3, 2048
    x = ofdm_like(s, n, fs, bw, nsc, rng)
    y = pa(x) + 1e-4 * (rng.standard_normal(x.shape) + 1j * rng.standard_normal(x.shape))
    return iq(y), iq(x), (fs, bw, nsc)


# ----------------------------------------------------------------------------------------------------------------
# channel geometry
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fs,bw,nsc,n,expected",
    [
        (640e6, 160e6, 4, 16384, (6144, 10240, 1024)),  # DPA_160MHz
        (800e6, 200e6, 10, 2560, (960, 1600, 64)),  # DPA_200MHz
        (983.04e6, 200e6, 5, 19662, (7831, 11831, 800)),  # APA_200MHz (19662 is even)
        (80e6, 2e6, 1, 2560, (1248, 1312, 64)),  # MyCustomPA
    ],
)
def test_channel_bins_worked_geometry(fs, bw, nsc, n, expected):
    cb = channel_bins(fs, bw, nsc, n)
    assert (cb.iL, cb.iR, cb.W) == expected
    assert ind_geometry(fs, bw, nsc, n) == expected
    assert cb.freqs_hz.shape == (n,)
    assert np.all(np.diff(cb.freqs_hz) > 0)
    assert cb.freqs_hz[0] == -fs / 2  # even n: grid starts at exactly -fs/2
    assert cb.df == fs / n
    assert cb.freqs_hz[cb.iL] >= -bw / 2 > cb.freqs_hz[cb.iL - 1]
    assert cb.freqs_hz[cb.iR] <= bw / 2 < cb.freqs_hz[cb.iR + 1]


def test_channel_bins_apa_edges_not_on_channel_edges():
    cb = channel_bins(983.04e6, 200e6, 5, 19662)
    assert cb.df == pytest.approx(49996.9484, rel=1e-9)
    assert cb.freqs_hz[cb.iR] == pytest.approx(99.99390e6, abs=10)
    assert cb.freqs_hz[cb.iL] == pytest.approx(-99.99390e6, abs=10)
    assert cb.W * cb.df == pytest.approx(39.9976e6, rel=1e-5)


def test_channel_bins_grid_matches_welch_frequencies_even_and_odd():
    for n in (2560, 2561, 999):
        z = np.ones(n, dtype=np.complex64)
        f, _ = welch(z, 800e6, nperseg=n, return_onesided=False, scaling="spectrum")
        cb = channel_bins(800e6, 200e6, 4, n)
        assert np.array_equal(cb.freqs_hz, np.fft.fftshift(f))


def test_channel_bins_odd_n_grid():
    cb = channel_bins(5.0, 2.0, 1, 5)
    assert np.allclose(cb.freqs_hz, [-2, -1, 0, 1, 2])  # odd n: no bin at -fs/2
    assert (cb.iL, cb.iR, cb.W) == (1, 3, 2)
    cb = channel_bins(1000.0, 500.0, 4, 999)
    assert (cb.iL, cb.iR, cb.W) == (250, 748, 124) == ind_geometry(1000.0, 500.0, 4, 999)


def test_channel_bins_leftover_bins_and_slices():
    cb = channel_bins(800e6, 200e6, 10, 2048)  # iR - iL = 512, W = 51, 2 leftover bins below iR
    assert (cb.iL, cb.iR, cb.W) == (768, 1280, 51)
    assert cb.sub_slices[-1] == slice(768 + 459, 768 + 510)
    assert cb.left_slice == slice(717, 768) and cb.right_slice == slice(1280, 1331)


@pytest.mark.parametrize(
    "args",
    [(0, 200e6, 10, 2560), (800e6, -1, 10, 2560), (800e6, 200e6, 0, 2560), (800e6, 200e6, 2.5, 2560),
     (800e6, 200e6, 10, 1), (800e6, 1e3, 1, 2560), (800e6, 200e6, 1000, 2560)],
)
def test_channel_bins_rejects_bad_geometry(args):
    with pytest.raises(ValueError):
        channel_bins(*args)


# ----------------------------------------------------------------------------------------------------------------
# NMSE
# ----------------------------------------------------------------------------------------------------------------


def test_nmse_closed_form():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((2, 1000, 2)).astype(np.float32)
    out = nmse_db(ref * np.float32(0.9), ref)
    assert isinstance(out, np.float32)
    assert out == pytest.approx(-20.0, abs=1e-5)
    assert nmse_db(ref * np.float32(1.01), ref) == pytest.approx(-40.0, abs=1e-4)


def test_nmse_is_mean_of_segment_db_not_pooled():
    rng = np.random.default_rng(1)
    r = rng.standard_normal((2, 512, 2)).astype(np.float32)
    r[1] *= 10  # segment 1 has 100x the power
    p = r.copy()
    p[0] *= np.float32(0.9)  # -20 dB
    p[1] *= np.float32(0.99)  # -40 dB
    out = nmse_db(p, r)
    assert out == pytest.approx(-30.0, abs=1e-4)
    pooled = 10 * np.log10(np.sum((p - r).astype(np.float64) ** 2) / np.sum(r.astype(np.float64) ** 2))
    p0, p1 = (np.sum(r[i].astype(np.float64) ** 2) for i in (0, 1))
    assert p1 / p0 == pytest.approx(100, rel=0.1)
    assert pooled == pytest.approx(10 * math.log10((1e-2 * p0 + 1e-4 * p1) / (p0 + p1)), abs=1e-3)  # ~ -37 dB
    assert abs(out - pooled) > 5


def test_nmse_matches_independent_and_bitwise(ofdm_pair):
    y, x, _ = ofdm_pair
    out = nmse_db(y, x)
    assert out == pytest.approx(ind_nmse(y, x), abs=1e-4)
    ref = f32_nmse(y, x)
    assert ref.dtype == np.float32 and out == ref  # bitwise
    assert np.float32(out).tobytes() == ref.tobytes()


def test_nmse_edge_values():
    r = np.ones((1, 8, 2), dtype=np.float32)
    assert nmse_db(r, r) == -np.inf
    z = np.zeros((1, 8, 2), dtype=np.float32)
    assert np.isnan(nmse_db(z, z))


@pytest.mark.parametrize(
    "p,r",
    [
        (np.zeros((8, 2), np.float32), np.zeros((8, 2), np.float32)),  # 2-D
        (np.zeros((1, 8, 3), np.float32), np.zeros((1, 8, 3), np.float32)),  # not I/Q
        (np.zeros((1, 8, 2), np.float32), np.zeros((1, 9, 2), np.float32)),  # mismatch
        (np.zeros((0, 8, 2), np.float32), np.zeros((0, 8, 2), np.float32)),  # empty
        (np.zeros((1, 8, 2), np.complex64), np.zeros((1, 8, 2), np.complex64)),  # complex
    ],
)
def test_shape_errors(p, r):
    with pytest.raises(ValueError):
        nmse_db(p, r)
    with pytest.raises(ValueError):
        evm_db(p, r, FS, B, NSC)


# ----------------------------------------------------------------------------------------------------------------
# ACLR
# ----------------------------------------------------------------------------------------------------------------


def _carrier_tones(cb, strongest: int = 3) -> dict[int, float]:
    amps = {}
    for c in range(cb.n_sub_ch):
        amps[cb.iL + c * cb.W + cb.W // 2] = 1.0 if c == strongest else 0.5
    return amps


def test_aclr_known_answer_tones():
    # Periodic Hann + 'spectrum' scaling: a bin-centred tone of amplitude A puts A^2 on its bin and A^2/4 on each
    # neighbour (total 1.5 A^2); tones well inside bands are fully counted. Reference = strongest carrier 1.5*1^2.
    rng = np.random.default_rng(7)
    cb = channel_bins(FS, B, NSC, N)
    amps = _carrier_tones(cb)
    amps[cb.iL - 32] = 0.01  # left adjacent
    amps[cb.iR + 32] = 0.003  # right adjacent
    p = iq(tones(N, amps, rng, s=2))
    left, right, avg = aclr_db(p, FS, B, NSC)
    assert all(isinstance(v, float) for v in (left, right, avg))
    assert left == pytest.approx(20 * math.log10(0.01), abs=1e-3)  # -40 dBc
    assert right == pytest.approx(20 * math.log10(0.003), abs=1e-3)  # -50.457 dBc
    assert avg == pytest.approx((left + right) / 2, abs=1e-12)


def test_aclr_edge_inclusivity_right_inclusive_left_exclusive():
    # Tone on bin iL: only its lower neighbour (A^2/4) leaks into the left adjacent channel.
    # Tone on bin iR: bins iR and iR+1 (1.25 A^2) are in the right adjacent channel.
    rng = np.random.default_rng(8)
    cb = channel_bins(FS, B, NSC, N)
    amps = _carrier_tones(cb)
    amps[cb.iL] = 0.01
    amps[cb.iR] = 0.01
    left, right, _ = aclr_db(iq(tones(N, amps, rng)), FS, B, NSC)
    assert left == pytest.approx(10 * math.log10(0.25e-4 / 1.5), abs=1e-3)
    assert right == pytest.approx(10 * math.log10(1.25e-4 / 1.5), abs=1e-3)


def test_aclr_odd_n_known_answer():
    # Odd segment length: grid is fftshift(fftfreq) (ascending, no bin at -fs/2); Hann leakage is still 3 bins.
    rng = np.random.default_rng(9)
    fs, bw, nsc, n = 1000.0, 500.0, 4, 999
    cb = channel_bins(fs, bw, nsc, n)
    amps = _carrier_tones(cb, strongest=1)
    amps[cb.iL - 40] = 0.02
    amps[cb.iR + 40] = 0.005
    p = iq(tones(n, amps, rng, s=2))
    left, right, _ = aclr_db(p, fs, bw, nsc)
    assert left == pytest.approx(20 * math.log10(0.02), abs=1e-3)
    assert right == pytest.approx(20 * math.log10(0.005), abs=1e-3)
    il, ir, _ = ind_aclr(p, fs, bw, nsc)
    assert left == pytest.approx(il, abs=1e-4) and right == pytest.approx(ir, abs=1e-4)


def test_aclr_constant_detrend_removes_dc():
    rng = np.random.default_rng(10)
    cb = channel_bins(FS, B, NSC, N)
    amps = _carrier_tones(cb)
    amps[cb.iL - 20] = 0.01
    amps[cb.iR + 20] = 0.01
    z = tones(N, amps, rng)
    a = aclr_db(iq(z), FS, B, NSC)
    b = aclr_db(iq(z + (3.0 - 2.0j)), FS, B, NSC)  # a DC offset is removed per segment before the FFT
    assert a == pytest.approx(b, abs=1e-3)


def test_aclr_matches_independent_and_bitwise(ofdm_pair):
    y, x, (fs, bw, nsc) = ofdm_pair
    got = aclr_db(y, fs, bw, nsc)
    ind = ind_aclr(y, fs, bw, nsc)
    assert got == pytest.approx(ind, abs=1e-4)
    assert -60 < got[2] < -20  # the nonlinearity created real regrowth
    ref = f32_aclr(y, fs, bw, nsc)
    assert got[0] == ref[0] and got[1] == ref[1] and got[2] == ref[2]  # bitwise (float64)
    # and the clean input is far cleaner
    assert aclr_db(x, fs, bw, nsc)[2] < got[2] - 20


def test_aclr_rejects_adjacent_outside_grid():
    p = np.zeros((1, 256, 2), np.float32)
    with pytest.raises(ValueError, match="outside"):
        aclr_db(p, 100.0, 90.0, 2)


# ----------------------------------------------------------------------------------------------------------------
# EVM
# ----------------------------------------------------------------------------------------------------------------


def test_evm_gain_error_closed_form():
    rng = np.random.default_rng(2)
    x = iq(ofdm_like(2, N, FS, B, NSC, rng))
    out = evm_db(x * np.float32(1.1), x, FS, B, NSC)
    assert isinstance(out, float)
    assert out == pytest.approx(-20.0, abs=1e-4)


def test_evm_is_mean_over_subchannels():
    # Error of 10 % magnitude in sub-channel 0 only -> E_s = 0.1/10 -> EVM = -40 dB (a pooled magnitude ratio over
    # the whole main channel would weight the sub-channel by its share of |R| instead).
    rng = np.random.default_rng(3)
    cb = channel_bins(FS, B, NSC, N)
    x = ofdm_like(2, N, FS, B, NSC, rng)
    X = np.fft.fftshift(np.fft.fft(x, axis=-1), axes=-1)
    X[:, cb.sub_slice(0)] *= 1.1
    X[:, cb.sub_slice(5)] *= 3.0  # make sub-channel 5 dominate |R|: pooling would change the answer
    y = np.fft.ifft(np.fft.ifftshift(X, axes=-1), axis=-1)
    Xr = X.copy()
    Xr[:, cb.sub_slice(0)] /= 1.1
    xr = np.fft.ifft(np.fft.ifftshift(Xr, axes=-1), axis=-1)
    out = evm_db(iq(y), iq(xr), FS, B, NSC)
    assert out == pytest.approx(-40.0, abs=1e-3)


def test_evm_matches_independent_and_bitwise(ofdm_pair):
    y, x, (fs, bw, nsc) = ofdm_pair
    got = evm_db(y, x, fs, bw, nsc)
    assert got == pytest.approx(ind_evm(y, x, fs, bw, nsc), abs=1e-4)
    ref = f32_evm(y, x, fs, bw, nsc)
    assert got == ref  # bitwise (float64)


def test_evm_identical_is_minus_inf():
    x = iq(ofdm_like(1, N, FS, B, NSC, np.random.default_rng(4)))
    assert evm_db(x, x, FS, B, NSC) == -math.inf


# ----------------------------------------------------------------------------------------------------------------
# compute_metrics
# ----------------------------------------------------------------------------------------------------------------


def test_compute_metrics_full_and_missing_spec(ofdm_pair):
    y, x, (fs, bw, nsc) = ofdm_pair
    spec = SimpleNamespace(sample_rate_hz=fs, bw_main_hz=bw, n_sub_ch=nsc, bw_sub_hz=123.0)
    m = compute_metrics(y, x, spec)
    assert tuple(m) == METRIC_KEYS == ("NMSE", "EVM", "ACLR_L", "ACLR_R", "ACLR_AVG")
    assert type(m["NMSE"]) is np.float32 and m["NMSE"] == nmse_db(y, x)
    assert all(type(m[k]) is float for k in METRIC_KEYS[1:])
    assert m["EVM"] == evm_db(y, x, fs, bw, nsc)
    assert (m["ACLR_L"], m["ACLR_R"], m["ACLR_AVG"]) == aclr_db(y, fs, bw, nsc)
    for missing in ("sample_rate_hz", "bw_main_hz", "n_sub_ch"):
        d = dict(sample_rate_hz=fs, bw_main_hz=bw, n_sub_ch=nsc)
        d[missing] = None
        m2 = compute_metrics(y, x, SimpleNamespace(**d))
        assert m2["NMSE"] == m["NMSE"]
        assert all(math.isnan(m2[k]) for k in METRIC_KEYS[1:])
    m3 = compute_metrics(y, x, object())  # no attributes at all
    assert all(math.isnan(m3[k]) for k in METRIC_KEYS[1:])


# ----------------------------------------------------------------------------------------------------------------
# plot spectra
# ----------------------------------------------------------------------------------------------------------------


def _total_power(f, p_db):
    """Integral of a density PSD in dB over its whole (uniform) grid, linear."""
    return float(np.sum(10.0 ** (p_db / 10.0)) * (f[1] - f[0]))


def test_psd_db_tone_and_noise_power():
    fs, n = 1000.0, 256
    rng = np.random.default_rng(5)
    t = np.arange(n * 16)
    sig = np.exp(2j * np.pi * 125.0 / fs * t)  # tone at +125 Hz, on a bin (fs/n = 3.90625 Hz)
    f, p = psd_db(sig, fs, n)
    assert f.shape == p.shape == (n,) and np.all(np.diff(f) > 0) and f[0] == -fs / 2
    assert f[np.argmax(p)] == 125.0
    # density: integrating over all bins gives the total power (1.0 -> 0 dB)
    assert _total_power(f, p) == pytest.approx(1.0, rel=0.002)
    noise = (rng.standard_normal((4, n * 8)) + 1j * rng.standard_normal((4, n * 8))) * math.sqrt(0.5)
    f2, p2 = psd_db(iq(noise), fs, n)  # (S, N, 2) -> flattened sequence
    assert 10 * math.log10(_total_power(f2, p2)) == pytest.approx(0.0, abs=0.1)
    assert np.median(p2) == pytest.approx(10 * math.log10(1 / fs), abs=0.5)


def test_psd_db_shapes_floor_no_detrend_and_errors():
    fs, n = 800e6, 512
    rng = np.random.default_rng(6)
    seg = iq(ofdm_like(3, n * 2, fs, 200e6, 4, rng))  # (3, 1024, 2)
    f1, p1 = psd_db(seg, fs, n)
    f2, p2 = psd_db(seg.reshape(-1, 2), fs, n)
    assert np.array_equal(f1, f2) and np.array_equal(p1, p2)
    z = seg.reshape(-1, 2).astype(np.float64) @ np.array([1.0, 1j])
    _, p3 = psd_db(z, fs, n)  # complex (N,) input is the same signal
    assert np.allclose(p3, p1, atol=1e-9)
    _, pz = psd_db(np.zeros((n, 2), np.float32), fs, n)
    assert np.all(pz == -300.0)
    # no detrend (reference §8.2): a constant I/Q offset of 1 is a DC line of density 1/df, not removed per segment
    fd, pdc = psd_db(np.ones((4 * n, 2), np.float32), fs, n)
    k0 = int(np.flatnonzero(fd == 0.0)[0])
    assert pdc[k0] == pytest.approx(10 * math.log10(2.0 / (fs / n) * 2 / 3), abs=1e-6)  # |1+1j|^2 = 2, Hann ENBW 1.5
    fv, _ = psd_db(seg, fs, 4096)  # nperseg reduced to the 3072 samples
    assert fv.shape == (3072,)
    with pytest.raises(ValueError):
        psd_db(np.zeros((3, 5, 4)), fs, n)
    for bad_fs in (None, 0.0, float("nan"), "x"):
        with pytest.raises(ValueError):
            psd_db(seg, bad_fs, n)
    with pytest.raises(ValueError):
        psd_db(seg, fs, 1)


def test_plot_data_psd_is_the_metrics_psd_capped_at_2048():
    rng = np.random.default_rng(7)
    x = iq(ofdm_like(1, 3 * 2560, FS, B, NSC, rng)).reshape(-1, 2)
    y = (x * 1.5 + 0.01 * rng.standard_normal(x.shape)).astype(np.float32)
    spec = SimpleNamespace(sample_rate_hz=FS, bw_main_hz=B, n_sub_ch=NSC, nperseg=N)
    pd = build_plot_data("validation", x, {"y": y, "pred": x}, spec, target_name="y", pred_name="pred",
                         error_of=("pred", "y"))
    assert PSD_NPERSEG_MAX == 2048 and pd.psd_freq_mhz.shape == (2048,)
    f, p = psd_db(y, FS, 2048)
    assert np.array_equal(pd.psd_freq_mhz, (f / 1e6).astype(np.float32))
    assert np.array_equal(pd.psd["y"], p.astype(np.float32))
    assert np.array_equal(pd.psd["input x"], psd_db(x, FS, 2048)[1].astype(np.float32))
    assert np.array_equal(pd.psd["error"], psd_db(x - y.astype(np.float64), FS, 2048)[1].astype(np.float32))


def test_import_is_light():
    code = "import sys, dpd_desktop.metrics; print('scipy' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.split() == ["False", "False"]


# ----------------------------------------------------------------------------------------------------------------
# bundled data
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.dataset
@pytest.mark.skipif(not (DATASETS / "DPA_200MHz").is_dir(), reason=f"{DATASETS / 'DPA_200MHz'} not found")
def test_dpa_200mhz_val_metrics(capsys):
    d = DATASETS / "DPA_200MHz"
    x = np.loadtxt(d / "val_input.csv", delimiter=",", skiprows=1, dtype=np.float32)
    y = np.loadtxt(d / "val_output.csv", delimiter=",", skiprows=1, dtype=np.float32)
    assert x.shape == y.shape == (7680, 2)
    xs, ys = x.reshape(3, 2560, 2), y.reshape(3, 2560, 2)
    # best linear (complex-gain) model of the PA as a "prediction" of y
    xc = x[:, 0].astype(np.float64) + 1j * x[:, 1]
    yc = y[:, 0].astype(np.float64) + 1j * y[:, 1]
    g = np.vdot(xc, yc) / np.vdot(xc, xc)
    lin = iq((g * xc).reshape(3, 2560))
    spec = SimpleNamespace(sample_rate_hz=800e6, bw_main_hz=200e6, n_sub_ch=10)
    m = compute_metrics(lin, ys, spec)
    aclr_y = aclr_db(ys, 800e6, 200e6, 10)
    aclr_x = aclr_db(xs, 800e6, 200e6, 10)
    with capsys.disabled():
        print(f"\nDPA_200MHz val: |g|={abs(g):.5f} linear-model NMSE={m['NMSE']} dB, EVM={m['EVM']:.8f} dB")
        print(f"  ACLR(measured PA output y) L/R/AVG = {aclr_y[0]:.8f} / {aclr_y[1]:.8f} / {aclr_y[2]:.8f} dBc")
        print(f"  ACLR(PA input x)           L/R/AVG = {aclr_x[0]:.8f} / {aclr_x[1]:.8f} / {aclr_x[2]:.8f} dBc")
    assert all(np.isfinite(m[k]) for k in METRIC_KEYS)
    assert all(-60 < v < -20 for v in aclr_y)
    assert aclr_x[2] < aclr_y[2]  # the PA output has regrowth the input lacks
    assert -40 < m["NMSE"] < -5  # a linear model explains most but not all of y
    assert m["EVM"] < -5
    assert aclr_y == pytest.approx(ind_aclr(ys, 800e6, 200e6, 10), abs=1e-4)
    assert aclr_y == f32_aclr(ys, 800e6, 200e6, 10)
    assert m["EVM"] == f32_evm(lin, ys, 800e6, 200e6, 10)
    assert m["NMSE"] == f32_nmse(lin, ys)
