"""Metric profiles: which definition of NMSE, EVM and ACLR a run's numbers follow. Chosen per run
(``ExperimentConfig.metric_profile``), recorded in config.json and shown beside every number.

``legacy-2.2.1`` (the default, config.py): exactly what OpenDPD 2.2.1 computes (metrics/__init__.py ``compute_metrics``, "OpenDPD
2.2.1 reference §6"), bit for bit - the comparability promise. Its known flaws: the PSD and NMSE include the
zero-padded tail of the last segment; NMSE is the mean of per-segment dB values; the adjacent channel is
``floor((iR - iL)/n_sub_ch)`` bins, starting at the main channel's last bin on the right (inclusive) but ending at its
first bin on the left (exclusive); "EVM" is a ratio of mean spectral magnitudes.

``corrected``: the same quantities with the flaws removed. Conventions, each with its source:

* Valid samples only: the evaluated split's first ``n_valid`` samples; the zero padding of the last segment is never
  in a sum or a spectrum (OpenDPD 2.4 ``opendpd-spectral-v2`` / ``general-spectral-v1`` "valid_range").
* PSD: :func:`~dpd_desktop.metrics.spectra.welch_psd` - Welch, periodic Hann window of the spec's ``nperseg``
  samples, 50 % overlap, no detrend, density scaling, two-sided, over the valid sequence (segments joined in order).
  The settings of OpenDPD 2.4 ``general_v1.psd``; OpenDPD 2.4 names MATLAB's ``comm.ACPR`` with "Specify window
  parameters (Hann, 50% overlap)" as the comparator of these settings (its ``ofdm_evm_v2`` profile notes).
* Band power: ``sum of PSD bins whose centre f lies in [lo, hi)`` times the bin width ``fs/nperseg`` - half-open
  bands, so a bin on an edge belongs to exactly one band (OpenDPD 2.4 ``band_power``).
* Carriers: the main channel ``[-B/2, B/2)`` (B = ``bw_main_hz``) cut into ``n_sub_ch`` carriers of width
  ``W = B/n_sub_ch`` Hz (not floored to bins).
* Adjacent channels: the **full** carrier width on each side, ``[-B/2 - W, -B/2)`` and ``[B/2, B/2 + W)``: the
  adjacent channel as the 3GPP ACLR definition places it (TS 36.104 / 38.104: a band of the carrier's bandwidth
  beside the outermost carrier) and of ``comm.ACPR`` (``AdjacentChannelOffset`` = ±(B+W)/2,
  ``AdjacentMeasurementBandwidth`` = W). Both sides are symmetric in Hz.
* ACLR reference: the strongest carrier's integrated power (OpenDPD's convention, kept by 2.4 spectral-v2).
  ``ACLR_L/R = 10*log10(P_adjacent / P_strongest_carrier)`` dBc, negative, lower is better; ``ACLR_AVG`` the mean
  of the two dB values (for OpenDPD's checkpoint selection).
* NMSE, pooled: ``10*log10(sum |p - r|^2 / sum |r|^2)`` over all valid samples of the split (total error energy /
  total reference energy; OpenDPD 2.4 ``general-spectral-v1`` NMSE; the usual definition in the DPD literature).
* "EVM": the in-band error ratio ``10*log10(P_main(p - r) / P_main(r))`` in dB over ``[-B/2, B/2)`` from the same
  PSD (OpenDPD 2.4's ``IBE``); an RMS error-power ratio, so as a percentage ``100*10**(EVM/20)``.
* Float64 throughout (from the float32 I/Q); a zero power ratio floors at ``DB_FLOOR`` (-300 dB) like OpenDPD 2.4;
  NaN in, NaN out.

What ``corrected`` is NOT: not a 3GPP conformance ACLR (no RRC measurement filter, and the reference is the
strongest carrier rather than the assigned carrier next to the adjacent channel); its "EVM" is not a demodulated
constellation EVM (no symbols, no equalisation). Differences from OpenDPD 2.4.2 ``opendpd-spectral-v2`` (named in
tests/unit/test_metrics_vs_opendpd24.py): it has no EVM (ours is its IBE) and it reports statuses where we raise or
return NaN (no spectral metadata → NaN; too few samples or a band outside ±fs/2 → ValueError).
"""
from __future__ import annotations

import math

import numpy as np

from ..config import METRIC_PROFILES
from . import compute_metrics
from .aclr import aclr_db
from .nmse import as_segments
from .spectra import DB_FLOOR, welch_psd  # noqa: F401 - DB_FLOOR re-exported
from .transfer import as_complex

__all__ = ["PROFILES", "PROFILE_NOTES", "check_profile", "compute_profile_metrics",
           "corrected_aclr", "corrected_metrics", "inband_error_db", "pooled_nmse_db", "profile_aclr"]

PROFILES = METRIC_PROFILES  # ("legacy-2.2.1", "corrected"), the configuration's vocabulary
#: One line per profile, for labels and --help.
PROFILE_NOTES = {
    "legacy-2.2.1": "OpenDPD 2.2.1's numbers, bit for bit (padded tail included, NMSE mean of segment dB)",
    "corrected": "valid samples only, half-open bands, full adjacent channels, pooled NMSE, in-band error as EVM",
}


def check_profile(name) -> str:
    """``name`` when it is a known profile; else ValueError listing :data:`PROFILES`."""
    if name not in PROFILES:
        raise ValueError(f"unknown metric profile {name!r}; expected one of {', '.join(PROFILES)}")
    return name


def _flat_valid(a, name: str, n_valid: int | None) -> np.ndarray:
    """(S, N, 2) or (N, 2) real I/Q -> (n_valid,) complex128 (segments joined in order, padding cut)."""
    arr = np.asarray(a)
    if arr.ndim == 3:
        arr = as_segments(arr, name).reshape(-1, 2)
    elif arr.ndim != 2 or arr.shape[-1] != 2:
        raise ValueError(f"{name}: expected shape (S, N, 2) or (N, 2) I/Q, got {arr.shape}")
    n = arr.shape[0] if n_valid is None else int(n_valid)
    if not 1 <= n <= arr.shape[0]:
        raise ValueError(f"{name}: n_valid must be from 1 to the {arr.shape[0]} samples given, got {n_valid!r}")
    return as_complex(arr[:n])


def _db(ratio: float) -> float:
    """10*log10 of a power ratio; NaN stays NaN, a zero (or negative) ratio floors at DB_FLOOR."""
    if math.isnan(ratio):
        return math.nan
    if ratio <= 0:
        return DB_FLOOR
    return max(10.0 * math.log10(ratio), DB_FLOOR) if math.isfinite(ratio) else math.inf


def pooled_nmse_db(pred, ref, n_valid: int | None = None) -> float:
    """Pooled NMSE in dB: ``10*log10(sum_t |p - r|^2 / sum_t |r|^2)`` over the first ``n_valid`` samples, float64.

    Args: pred, ref: (S, N, 2) segments or (N, 2) I/Q of equal shape; n_valid: real samples (None: all).
    Returns: float dB; NaN when the reference has no energy. Raises: ValueError for bad/unequal shapes.
    """
    p, r = _flat_valid(pred, "pred", n_valid), _flat_valid(ref, "ref", n_valid)
    if p.shape != r.shape:
        raise ValueError(f"pred and ref lengths differ: {p.shape} vs {r.shape}")
    den = float(np.sum(np.abs(r) ** 2))
    if den == 0.0:
        return math.nan
    return _db(float(np.sum(np.abs(p - r) ** 2)) / den)


def _band_power(f: np.ndarray, pxx: np.ndarray, lo: float, hi: float, df: float, what: str) -> float:
    mask = (f >= lo) & (f < hi)
    if not mask.any():
        raise ValueError(f"no PSD bin lies inside the {what} [{lo:g}, {hi:g}) Hz (bin spacing {df:g} Hz)")
    return float(np.sum(pxx[mask]) * df)


def _check_bands(fs: float, bw: float, nsc: int, nperseg: int) -> tuple[float, float, int, int, float]:
    fs, bw = float(fs), float(bw)
    if not (math.isfinite(fs) and fs > 0 and math.isfinite(bw) and bw > 0):
        raise ValueError(f"fs and bw_main must be positive numbers of Hz, got fs={fs!r}, bw_main={bw!r}")
    if int(nsc) < 1 or int(nperseg) < 2:
        raise ValueError(f"n_sub_ch must be >= 1 and nperseg >= 2, got {nsc!r}, {nperseg!r}")
    w = bw / int(nsc)
    if bw / 2 + w > fs / 2:
        raise ValueError(f"adjacent channels [±{bw / 2:g}, ±{bw / 2 + w:g}) Hz exceed the captured range "
                         f"±{fs / 2:g} Hz (corrected profile)")
    return fs, bw, int(nsc), int(nperseg), w


def corrected_aclr(pred, fs: float, bw_main: float, n_sub_ch: int, nperseg: int,
                   n_valid: int | None = None, overlap: bool = True) -> tuple[float, float, float]:
    """ACLR of the ``corrected`` profile (module docstring): ``(left, right, avg)`` dBc, float64.

    Args:
        pred: (S, N, 2) segments or (N, 2) I/Q; n_valid: its real samples (None: all).
        fs [Hz], bw_main [Hz] (B), n_sub_ch (carriers), nperseg (Welch window, samples); overlap: the Welch
        windows' 50 % overlap (False: adjacent windows, welch_psd).

    Raises:
        ValueError: fewer valid samples than nperseg; an adjacent channel beyond ±fs/2; a band with no bin.
    """
    fs, bw, nsc, nps, w = _check_bands(fs, bw_main, n_sub_ch, nperseg)
    f, pxx = welch_psd(_flat_valid(pred, "pred", n_valid), fs, nps, strict=True, overlap=overlap)
    return _aclr_from(f, pxx, fs / nps, bw, nsc, w)


def _aclr_from(f, pxx, df, bw, nsc, w) -> tuple[float, float, float]:
    carriers = [_band_power(f, pxx, -bw / 2 + i * w, -bw / 2 + (i + 1) * w, df, f"carrier {i}") for i in range(nsc)]
    ref = max(carriers)
    p_l = _band_power(f, pxx, -bw / 2 - w, -bw / 2, df, "left adjacent channel")
    p_r = _band_power(f, pxx, bw / 2, bw / 2 + w, df, "right adjacent channel")
    if math.isnan(ref) or ref <= 0:
        return math.nan, math.nan, math.nan
    left, right = _db(p_l / ref), _db(p_r / ref)
    return left, right, (left + right) / 2


def inband_error_db(pred, ref, fs: float, bw_main: float, nperseg: int, n_valid: int | None = None) -> float:
    """The ``corrected`` profile's "EVM": ``10*log10(P_main(p - r) / P_main(r))`` dB over ``[-B/2, B/2)``
    (module docstring). Raises ValueError like :func:`corrected_aclr`."""
    fs, bw, nps = float(fs), float(bw_main), int(nperseg)
    p, r = _flat_valid(pred, "pred", n_valid), _flat_valid(ref, "ref", n_valid)
    if p.shape != r.shape:
        raise ValueError(f"pred and ref lengths differ: {p.shape} vs {r.shape}")
    df = fs / nps
    f, pr = welch_psd(r, fs, nps, strict=True)
    _, pe = welch_psd(p - r, fs, nps, strict=True)
    den = _band_power(f, pr, -bw / 2, bw / 2, df, "main channel")
    return math.nan if den == 0 else _db(_band_power(f, pe, -bw / 2, bw / 2, df, "main channel") / den)


def corrected_metrics(pred, ref, fs, bw_main, n_sub_ch, nperseg, n_valid: int | None = None) -> dict:
    """All metrics of the ``corrected`` profile: ``{"NMSE", "EVM", "ACLR_L", "ACLR_R", "ACLR_AVG"}`` floats (dB,
    dB, dBc x3). When fs / bw_main / n_sub_ch is None the spectral ones are NaN (as in the legacy profile)."""
    out = {"NMSE": pooled_nmse_db(pred, ref, n_valid)}
    if fs is None or bw_main is None or n_sub_ch is None:
        out.update(EVM=math.nan, ACLR_L=math.nan, ACLR_R=math.nan, ACLR_AVG=math.nan)
        return out
    out["EVM"] = inband_error_db(pred, ref, fs, bw_main, nperseg, n_valid)
    left, right, avg = corrected_aclr(pred, fs, bw_main, n_sub_ch, nperseg, n_valid)
    out.update(ACLR_L=left, ACLR_R=right, ACLR_AVG=avg)
    return out


def compute_profile_metrics(profile: str, pred, ref, spec_like, n_valid: int | None = None) -> dict:
    """The metrics of one evaluation pass under ``profile``, keys :data:`~dpd_desktop.metrics.METRIC_KEYS`.

    Args:
        profile: one of :data:`PROFILES`.
        pred, ref: (S, N, 2) float32 segment arrays (the last segment zero-padded, reference §2.2).
        spec_like: attributes ``sample_rate_hz``, ``bw_main_hz``, ``n_sub_ch``, ``nperseg`` (a ``DatasetSpec``).
        n_valid: the split's real sample count (``corrected`` only; None: every sample is real).

    ``legacy-2.2.1`` is :func:`~dpd_desktop.metrics.compute_metrics` unchanged (``n_valid`` ignored, bitwise).
    Raises: ValueError for an unknown profile and what the profile's functions raise.
    """
    if check_profile(profile) == "legacy-2.2.1":
        return compute_metrics(pred, ref, spec_like)
    nps = getattr(spec_like, "nperseg", None) or np.asarray(pred).shape[-2]
    return corrected_metrics(pred, ref, getattr(spec_like, "sample_rate_hz", None),
                             getattr(spec_like, "bw_main_hz", None), getattr(spec_like, "n_sub_ch", None), nps,
                             n_valid)


def profile_aclr(profile: str, seg, spec, n_valid: int | None = None) -> tuple[float, float]:
    """(left, right) ACLR in dBc of (S, N, 2) segments under ``profile`` (plots, baselines)."""
    if check_profile(profile) == "legacy-2.2.1":
        left, right, _ = aclr_db(seg, spec.sample_rate_hz, spec.bw_main_hz, spec.n_sub_ch)
    else:
        nps = getattr(spec, "nperseg", None) or np.asarray(seg).shape[-2]
        left, right, _ = corrected_aclr(seg, spec.sample_rate_hz, spec.bw_main_hz, spec.n_sub_ch, nps, n_valid)
    return float(left), float(right)
