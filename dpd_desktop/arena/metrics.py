"""The Arena's test metrics, on our metric functions (OpenDPD 2.4.2 ``evm-aclr-v3`` [opendpd/core/arena_metrics.py];
facts and formulas carried over, cited):

* NMSE (pooled), the in-band error IBE and ACLR_L/R: the ``corrected`` profile (metrics/profiles.py; equal to
  2.4.2's ``opendpd-spectral-v2`` to 1e-6 dB, tests/unit/test_metrics_vs_opendpd24.py) with the condition's Welch
  segment, on the metric window of the split (the first and last 200 samples are context, not scored).
* EVM, demodulated, data-aided (the known input is the reference): for each independently timed carrier the whole
  split is frequency-shifted by −f_c (time from the split's capture index), low-pass filtered by an FFT mask
  |f| ≤ the carrier's half bandwidth, and each complete useful OFDM symbol on the frozen timing (``fft_starts``,
  inside the metric window) is transformed; the occupied subcarriers of all carriers together are compared after
  one common least-squares complex gain c: EVM = 10·log10(Σ|Y − c·R|² / (|c|²·Σ|R|²)) dB. A grid without carriers
  (DPA data) has no symbol timing here: EVM is then the IBE (``evm_kind`` says which).
* Output power error: 10·log10(Σ|y|²/Σ|g·x|²) over the metric window [dB]; the gate is |error| ≤ 0.5 dB.
* Quality (the Arena's score): q = 0.5·(EVM_baseline − EVM) + 0.5·(ACLR_worse,baseline − ACLR_worse), ACLR_worse =
  max(ACLR_L, ACLR_R), against the common linear baseline (judge.py).
* Floor (ours, issue 24): the ACLR_L/R [dBc] of the reference g·x itself, scored like a trial (``floor_aclr``): what
  a DPD whose cascade output equals g·x measures. NMSE, IBE and EVM of such an output are DB_FLOOR and say nothing;
  its ACLR is the target's own out-of-channel content as these metric settings see it (e.g. the block joins of a
  generator's test signal in a 50 %-overlap Welch), so a model measures below it only by departing from its target.
* Aligned ACLR (a condition's ``aclr_segments = "aligned"``, ours): the corrected ACLR with adjacent (not 50 %
  overlapping) Welch windows on the split's nperseg-sample block grid, the windows wholly inside the metric window.
  For a test signal generated in nperseg-sample blocks (DPA_160MHz: 16,384 samples) whose joins jump: a window
  straddling a join measures the join (DPA_160MHz's test input: −38.7 dBc with overlap, −178 dBc aligned).
* ACLR in OpenDPD 2.2.1's convention (``legacy_aclr``; scored beside the above when the protocol sets
  ``legacy_aclr = true``): the ``legacy-2.2.1`` profile's metrics/aclr.py ``aclr_db`` on the whole split from its
  first sample, cut into nperseg-sample segments with the last one zero-padded (data/segments.py ``segment``, as
  2.2.1 segments a split): one periodic-Hann periodogram per segment, no overlap, one-sub-channel-wide adjacent
  bands. The convention of published DPA numbers. A generator whose nperseg-sample blocks start at the split start
  (DPA_160MHz) is never cut across a join there: its input measures about −158 dBc (float32 rounding only) where the
  corrected profile sees the joins (about −38 dBc).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..data.segments import segment
from ..metrics.aclr import aclr_db
from ..metrics.profiles import corrected_aclr, inband_error_db, pooled_nmse_db
from ..metrics.transfer import as_complex

__all__ = ["DB_FLOOR", "aligned_window", "arena_metrics", "evm_carriers_db", "floor_aclr", "legacy_aclr",
           "legacy_scores", "quality_db",
           "window_aclr"]

DB_FLOOR = -300.0


def _db(ratio: float) -> float:
    return max(10.0 * math.log10(ratio), DB_FLOOR) if ratio > 0 else DB_FLOOR


def evm_carriers_db(pred: np.ndarray, ref: np.ndarray, fs: float, grid: dict[str, Any], start: int,
                    window: tuple[int, int]) -> float:
    """Demodulated EVM [dB] of ``pred`` against ``ref`` ((N, 2) float arrays of a whole split) on ``grid``'s
    carriers (module docstring); ``start``: the split's first capture index; ``window``: the scored samples.

    Raises:
        ValueError: no carrier symbol lies completely inside the window, or the reference has no energy there.
    """
    y, r = as_complex(pred), as_complex(ref)
    n = r.shape[0]
    size = int(grid["useful_samples"])
    first, last = window
    t = (np.arange(n) + int(start)) / fs
    freq = np.fft.fftfreq(n, 1 / fs)
    measured, wanted = [], []
    for carrier in grid["carriers"]:
        osc = np.exp(2j * np.pi * carrier["frequency_shift_hz"] * t)
        mask = np.abs(freq) <= carrier["filter_half_bandwidth_hz"]
        yy = np.fft.ifft(np.fft.fft(y * osc) * mask)
        rr = np.fft.ifft(np.fft.fft(r * osc) * mask)
        offsets = [p - int(start) for p in carrier["fft_starts"] if start + first <= p and p + size <= start + last]
        if not offsets:
            raise ValueError("EVM: a carrier has no complete OFDM symbol inside the metric window")
        bins = np.asarray(carrier["occupied_bins"], dtype=int)
        for o in offsets:
            measured.append(np.fft.fft(yy[o:o + size])[bins])
            wanted.append(np.fft.fft(rr[o:o + size])[bins])
    m, w = np.concatenate(measured), np.concatenate(wanted)
    ref_power = float(np.vdot(w, w).real)
    if not ref_power > 0:
        raise ValueError("EVM: the reference has no energy on the occupied subcarriers")
    c = np.vdot(w, m) / ref_power
    sig = float(abs(c) ** 2 * ref_power)
    if sig <= 1e-24 * ref_power:
        return 0.0
    e = m - c * w
    return _db(float(np.vdot(e, e).real) / sig)


def aligned_window(window: tuple[int, int], nperseg: int) -> tuple[int, int]:
    """The part of ``window`` (first, stop) made of whole nperseg-sample blocks on the grid k·nperseg of the split.

    Raises:
        ValueError: no whole block lies inside the window.
    """
    a, b = int(window[0]), int(window[1])
    first = -(-a // nperseg) * nperseg
    stop = first + (b - first) // nperseg * nperseg
    if stop <= first:
        raise ValueError(f"aligned ACLR: no whole {nperseg}-sample block lies inside the metric window [{a}, {b})")
    return first, stop


def window_aclr(iq: np.ndarray, signal: dict[str, Any], window: tuple[int, int]) -> tuple[float, float]:
    """(ACLR_L, ACLR_R) [dBc] of ``iq`` ((N, 2), a whole split) on its metric ``window`` (first, stop): the
    ``corrected`` profile with ``signal``'s fs, bw, n_sub_ch and nperseg. The ACLR of every trial and of the floor.
    With ``signal["segments"] == "aligned"`` (a condition's ``aclr_segments``): adjacent Welch windows on the
    split's nperseg-sample block grid, those wholly inside the window (:func:`aligned_window`)."""
    aligned = signal.get("segments", "welch") == "aligned"
    a, b = aligned_window(window, int(signal["nperseg"])) if aligned else window
    left, right, _ = corrected_aclr(np.asarray(iq)[a:b], signal["fs"], signal["bw"], signal["n_sub_ch"],
                                    signal["nperseg"], overlap=not aligned)
    return left, right


def legacy_aclr(iq: np.ndarray, signal: dict[str, Any]) -> tuple[float, float]:
    """(ACLR_L, ACLR_R) [dBc] of ``iq`` ((N, 2), a whole split) in OpenDPD 2.2.1's convention (module docstring):
    ``aclr_db`` of the split from its first sample (not the metric window) as (S, nperseg, 2) float32 segments, the
    tail zero-padded, with ``signal``'s fs, bw, n_sub_ch and nperseg."""
    seg = segment(np.asarray(iq, dtype=np.float32), int(signal["nperseg"]))
    left, right, _ = aclr_db(seg, signal["fs"], signal["bw"], signal["n_sub_ch"])
    return left, right


def legacy_scores(iq: np.ndarray, signal: dict[str, Any]) -> dict[str, float]:
    """``aclr_legacy_l_db, aclr_legacy_r_db, aclr_legacy_db`` (worse side) [dBc]: :func:`legacy_aclr` of ``iq``."""
    left, right = legacy_aclr(iq, signal)
    return {"aclr_legacy_l_db": float(left), "aclr_legacy_r_db": float(right),
            "aclr_legacy_db": float(max(left, right))}


def floor_aclr(ref: np.ndarray, signal: dict[str, Any], window: tuple[int, int],
               legacy: bool = False) -> dict[str, float]:
    """The floor of a condition (module docstring): ``aclr_l_db, aclr_r_db, aclr_db`` (worse side) [dBc] of the
    reference ``ref`` = g·x itself ((N, 2), a whole split) on the metric ``window``, as a trial's ACLR is scored;
    with ``legacy``, also :func:`legacy_scores` of ``ref``."""
    left, right = window_aclr(ref, signal, window)
    out = {"aclr_l_db": float(left), "aclr_r_db": float(right), "aclr_db": float(max(left, right))}
    if legacy:
        out.update(legacy_scores(ref, signal))
    return out


def arena_metrics(pred: np.ndarray, ref: np.ndarray, signal: dict[str, Any], window: tuple[int, int],
                  grid: dict[str, Any] | None = None, start: int = 0, legacy: bool = False) -> dict[str, Any]:
    """Every Arena test metric of one cascade output ``pred`` against ``ref`` = g·x ((N, 2) arrays of a split).

    Returns ``nmse_db, ib_error_db, evm_db, evm_kind ("demodulated" | "in-band error"), aclr_l_db, aclr_r_db,
    aclr_db (worse side), power_error_db``; with ``legacy`` also ``aclr_legacy_l_db, aclr_legacy_r_db,
    aclr_legacy_db`` [dBc] (:func:`legacy_scores` of ``pred``; not in q).
    """
    a, b = window
    p, r = np.asarray(pred)[a:b], np.asarray(ref)[a:b]
    fs, bw, nps = signal["fs"], signal["bw"], signal["nperseg"]
    ibe = inband_error_db(p, r, fs, bw, nps)
    left, right = window_aclr(pred, signal, window)
    demod = bool(grid and grid.get("carriers"))
    evm = evm_carriers_db(pred, ref, fs, grid, start, window) if demod else ibe
    power = _db(float(np.sum(np.square(p, dtype=np.float64))) / float(np.sum(np.square(r, dtype=np.float64))))
    out = {"nmse_db": pooled_nmse_db(p, r), "ib_error_db": ibe, "evm_db": evm,
           "evm_kind": "demodulated" if demod else "in-band error", "aclr_l_db": left, "aclr_r_db": right,
           "aclr_db": max(left, right), "power_error_db": power}
    if legacy:
        out.update(legacy_scores(pred, signal))
    return out


def quality_db(scores: dict[str, Any], baseline: dict[str, Any]) -> float:
    """The Arena's quality q [dB] of ``scores`` against the ``baseline`` (module docstring)."""
    return 0.5 * (baseline["evm_db"] - scores["evm_db"]) + 0.5 * (baseline["aclr_db"] - scores["aclr_db"])
