"""Crest-factor reduction of a DPD's target (``ExperimentConfig.target_cfr_db``): the target g·x with its peaks brought
down to what the PA can deliver, the reduction kept inside the main channel.

Why: a gain rule that keeps the PA's output power (``rms``, ``small-signal``) asks for peaks g·max|x| above the
largest output the PA was measured to give (DPA_160MHz, rule ``rms``: 2.05 dB above max|y_train|); no DPD meets
them, and a PA model driven there answers from outside its training data. A hard clip at that level costs the
target's own ACLR (DPA_160MHz: −43 dBc). Repeated clipping and frequency-domain filtering (Armstrong,
"Peak-to-average power reduction for OFDM by repeated clipping and frequency domain filtering", Electronics Letters
38(5), 2002) lowers the peaks with an error that lies inside the channel, so the out-of-channel content of the
target is g·x's. A band a little narrower than the main channel keeps the error off its outer guard, where a
Hann-windowed spectrum would spread it into the adjacent channels (DPA_160MHz, limit 0 dB, 16 rounds: the target's
aligned ACLR −68.7 dBc with B = 160 MHz, −150.0 dBc with 158 MHz, its carriers occupying ±79.2 MHz).

Each iteration, on the whole split (a circular FFT of its N samples):

    d = clip(t, A) − t,   clip(v, A) = v·min(1, A/|v|),   t ← t + IFFT(FFT(d)·M),   t₀ = g·x

with M = 1 on the bins whose centre f lies in the band [−B/2, B/2) (B = ``target_cfr_band_hz``, by default the main
channel ``bw_main_ch``; f from ``input_signal_fs``; the half-open band of metrics/profiles.py) and 0 elsewhere, and
A = max|y_train|·10^(c/20), c = ``target_cfr_db``. The peaks regrow somewhat after each filtering; more iterations
lower them further. Float64 throughout.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..config import ConfigError
from ..metrics.spectra import DB_FLOOR

__all__ = ["CFRResult", "clip_and_filter", "cfr_targets"]


def clip_and_filter(s: np.ndarray, peak: float, fs: float, band_hz: float, iterations: int) -> np.ndarray:
    """``s`` (complex, (N,)) with its magnitude peaks reduced towards ``peak`` by ``iterations`` rounds of clipping
    and filtering to the band [−band_hz/2, band_hz/2) at sample rate ``fs`` [Hz] (module docstring); complex128.

    Raises:
        ValueError: a non-positive ``peak``, ``fs`` or ``band_hz``, or fewer than one iteration.
    """
    if not (peak > 0 and fs > 0 and band_hz > 0) or iterations < 1:
        raise ValueError(f"clip_and_filter: expected peak, fs and band > 0 and iterations >= 1, got peak {peak}, "
                         f"fs {fs}, band {band_hz}, iterations {iterations}")
    t = np.asarray(s, dtype=np.complex128).copy()
    f = np.fft.fftfreq(t.shape[0], 1.0 / fs)
    keep = (f >= -band_hz / 2) & (f < band_hz / 2)
    for _ in range(int(iterations)):
        mag = np.abs(t)
        over = mag > peak
        if not over.any():
            break
        d = np.zeros_like(t)
        d[over] = t[over] * (peak / mag[over] - 1.0)
        spec = np.fft.fft(d)
        spec[~keep] = 0.0
        t += np.fft.ifft(spec)
    return t


@dataclass
class CFRResult:
    """The shaped targets (``(N, 2)`` float32 per split) and what the shaping did (:meth:`block`)."""

    targets: dict[str, np.ndarray]
    limit_db: float
    iterations: int
    peak: float
    reference_peak: float
    band_hz: float
    splits: dict[str, dict[str, float]] = field(default_factory=dict)

    def block(self) -> dict[str, Any]:
        """The run record's ``target_cfr`` block: the limit [dB re max|y_train|], the peak A (linear), the band [Hz],
        and per split the target's power change and error against g·x [dB] and its peak before and after [dB re A]."""
        return {"limit_db": self.limit_db, "iterations": self.iterations, "peak": self.peak,
                "reference_peak": self.reference_peak, "reference": "max|y_train|", "band_hz": self.band_hz,
                "splits": {k: dict(v) for k, v in self.splits.items()}}


def _db(num: float, den: float) -> float:
    return max(10.0 * math.log10(num / den), DB_FLOOR) if num > 0 and den > 0 else DB_FLOOR


def cfr_targets(ds, gain: float, limit_db: float, iterations: int, band_hz: float | None = None) -> CFRResult:
    """g·x of each split of ``ds`` (IQDataset) shaped by :func:`clip_and_filter` to A = max|y_train|·10^(limit_db/20)
    with the filter's band ``band_hz`` [Hz] (None: the main channel, ``bw_main_ch``).

    Raises:
        ConfigError("target_cfr_db"): the dataset's spec lacks ``input_signal_fs`` or ``bw_main_ch``, or its
            training output is all zeros. ConfigError("target_cfr_band_hz"): a band wider than the sample rate.
    """
    spec = ds.spec
    fs, bw = getattr(spec, "sample_rate_hz", None), getattr(spec, "bw_main_hz", None)
    if not fs or not bw:
        raise ConfigError("target_cfr_db", "the target's crest-factor reduction filters to the main channel: it "
                          "needs the dataset's input_signal_fs and bw_main_ch (spec.json)")
    if band_hz is not None and band_hz > fs:
        raise ConfigError("target_cfr_band_hz", f"{band_hz:g} Hz is wider than the dataset's sample rate "
                          f"({fs:g} Hz)")
    bw = float(band_hz) if band_hz is not None else float(bw)
    shortest = min(getattr(ds, s).x.shape[0] for s in ("train", "val", "test"))
    if bw < 2 * fs / shortest:
        raise ConfigError("target_cfr_band_hz", f"{bw:g} Hz keeps fewer than 2 DFT bins of the shortest split "
                          f"({shortest} samples at {fs:g} Hz, {fs / shortest:g} Hz a bin): the filter would remove "
                          f"the reduction altogether")
    y_train = ds.train.y64 if getattr(ds.train, "y64", None) is not None else ds.train.y.astype(np.float64)
    ref_peak = float(np.sqrt(np.max(y_train[:, 0] ** 2 + y_train[:, 1] ** 2)))
    if not ref_peak > 0:
        raise ConfigError("target_cfr_db", f"the training output of {ds.name!r} is all zeros: no peak to limit to")
    peak = ref_peak * 10.0 ** (limit_db / 20.0)
    out = CFRResult({}, float(limit_db), int(iterations), peak, ref_peak, float(bw))
    for name in ("train", "val", "test"):
        split = getattr(ds, name)
        x64 = split.x64 if getattr(split, "x64", None) is not None else split.x.astype(np.float64)
        ideal = gain * (x64[:, 0] + 1j * x64[:, 1])
        shaped = clip_and_filter(ideal, peak, float(fs), float(bw), iterations)
        err = shaped - ideal
        out.targets[name] = np.ascontiguousarray(np.stack([shaped.real, shaped.imag], axis=1).astype(np.float32))
        p_ideal = float(np.sum(np.abs(ideal) ** 2))
        out.splits[name] = {"power_change_db": _db(float(np.sum(np.abs(shaped) ** 2)), p_ideal),
                            "error_db": _db(float(np.sum(np.abs(err) ** 2)), p_ideal),
                            "peak_before_db": 20.0 * math.log10(max(float(np.max(np.abs(ideal))), 1e-300) / peak),
                            "peak_after_db": 20.0 * math.log10(max(float(np.max(np.abs(shaped))), 1e-300) / peak)}
    return out
