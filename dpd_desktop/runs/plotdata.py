"""Build the small, downsampled :class:`PlotData` of the default panels from one pass of predictions.

Runs on the training thread (never the GUI thread). Cost on DPA_160MHz validation (98,304 samples): a few ms.
The spectra are :func:`dpd_desktop.metrics.spectra.psd_db` (reference §8.2 plot settings) with the Welch window
capped at ``PSD_NPERSEG_MAX`` bins. The RF curves (:func:`rf_curves`: binned AM/AM and AM/PM, gain compression and
P1dB, CCDF and PAPR) use every sample of the split, O(N) NumPy.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ..metrics.ccdf import CCDF_LEVELS_DB, ccdf, papr_db, papr_probability
from ..metrics.spectra import psd_db
from ..metrics.transfer import as_complex, compression_point, transfer_bins
from .events import PlotData

AMAM_POINTS = 2000
#: Welch window cap of the plotted PSDs (bins): the spectra are drawn with at most this many points.
PSD_NPERSEG_MAX = 2048
TIME_WINDOW = 256
#: AM/AM and AM/PM curves: bins uniform in |x| over [0, max|x|].
CURVE_BINS = 48
#: Gain compression and Pin/Pout: bins of COMPRESSION_BIN_DB dB of |x|² over the COMPRESSION_SPAN_DB below the peak.
COMPRESSION_BIN_DB = 0.5
COMPRESSION_SPAN_DB = 40.0
#: Compression bins whose gain is less certain than this (standard error, dB) are not drawn (few samples, noise).
DRAWN_MAX_SE_DB = 0.2
#: The name of the input signal in every mapping.
INPUT_NAME = "input x"


def build_plot_data(source: str, x: np.ndarray, signals: Mapping[str, np.ndarray], spec, *,
                    target_name: str, pred_name: str, aclr: Mapping[str, tuple[float, float]] | None = None,
                    error_of: tuple[str, str] | None = None, psd_cache: dict | None = None,
                    constant: tuple[str, ...] = (), input_side: tuple[str, ...] = ()) -> PlotData:
    """Downsample one evaluation pass for plotting.

    Args:
        source: "validation", "test" or "preview".
        x: (N, 2) float32 PA input samples (padding already removed).
        signals: name → (N, 2) float32 output-side signals (target, prediction, optional baselines).
        spec: the dataset spec (``sample_rate_hz``, ``bw_main_hz``, ``n_sub_ch``, ``nperseg``).
        target_name, pred_name: keys of ``signals``.
        aclr: name → (left, right) ACLR in dBc, already computed (reference §6.2); missing names are omitted.
        error_of: (pred, target) names whose difference is added to the PSD as "error".
        psd_cache, constant: the PSDs of the input and of the ``constant`` signals (the same at every call with this
            cache: the target, a DPD's baseline) are read from ``psd_cache`` when there, else computed and stored in
            it. The caller owns the cache (training/evaluation.py: one per split).
        input_side: names of ``signals`` at the PA input plane (a DPD's output u); the others are at the PA output.
            Only the power reference depends on it (``PlotData.power_ref_dbm``, spec ``power_ref_dbm``).
    """
    n = x.shape[0]
    xc = as_complex(x)
    idx = np.linspace(0, n - 1, num=min(AMAM_POINTS, n)).astype(np.int64)
    ax = np.abs(xc[idx])
    safe_x = np.where(ax > 0, xc[idx], 1.0)
    amam, ampm = {}, {}
    for name, s in signals.items():
        sc = as_complex(s[idx])
        amam[name] = np.abs(sc).astype(np.float32)
        ampm[name] = np.degrees(np.angle(sc / safe_x)).astype(np.float32)

    fs = spec.sample_rate_hz or 1.0
    nps = min(spec.nperseg, PSD_NPERSEG_MAX)
    psd = {}

    def psd_of(name: str, sig) -> tuple[np.ndarray, np.ndarray]:
        if psd_cache is None or (name != INPUT_NAME and name not in constant):
            return psd_db(sig, fs, nps)
        if name not in psd_cache:
            psd_cache[name] = psd_db(sig, fs, nps)
        return psd_cache[name]

    freq, p = psd_of(INPUT_NAME, xc)
    psd[INPUT_NAME] = p.astype(np.float32)
    for name, s in signals.items():
        _, p = psd_of(name, as_complex(s))
        psd[name] = p.astype(np.float32)
    if error_of is not None:
        _, p = psd_db(as_complex(signals[error_of[0]]) - as_complex(signals[error_of[1]]), fs, nps)
        psd["error"] = p.astype(np.float32)

    bands = {}
    if spec.bw_main_hz and spec.n_sub_ch:
        b = spec.bw_main_hz / 1e6
        w = b / spec.n_sub_ch
        bands = {"main": (-b / 2, b / 2), "adj_left": (-b / 2 - w, -b / 2), "adj_right": (b / 2, b / 2 + w)}

    start = int(max(0, min(1000, n - TIME_WINDOW)))
    stop = min(n, start + TIME_WINDOW)
    time = {name: np.ascontiguousarray(s[start:stop], dtype=np.float32) for name, s in signals.items()}
    time[INPUT_NAME] = np.ascontiguousarray(x[start:stop], dtype=np.float32)
    names = [INPUT_NAME, *signals, *(["error"] if error_of is not None else [])]
    return PlotData(
        **rf_curves(x, signals, psd_cache=psd_cache, constant=constant),
        power_ref_dbm=power_refs(spec, names, input_side=(INPUT_NAME, *input_side)),
        source=source,
        amam_in=ax.astype(np.float32),
        amam=amam,
        ampm=ampm,
        psd_freq_mhz=(freq / 1e6).astype(np.float32),
        psd=psd,
        bands_mhz=bands,
        aclr=dict(aclr or {}),
        time_idx=np.arange(start, stop, dtype=np.int64),
        time=time,
        target_name=target_name,
        pred_name=pred_name,
    )


def power_refs(spec, names, input_side=(INPUT_NAME,)) -> dict[str, float]:
    """Signal name → dBm of a unit-power signal at its plane (``input_side`` names: the PA input, the others: the PA
    output), from the spec's ``input_power_ref_dbm`` / ``output_power_ref_dbm``; {} when the spec has none."""
    pin, pout = getattr(spec, "input_power_ref_dbm", None), getattr(spec, "output_power_ref_dbm", None)
    if pin is None or pout is None:
        return {}
    return {n: float(pin if n in input_side else pout) for n in names}


def rf_curves(x: np.ndarray, signals: Mapping[str, np.ndarray], *, psd_cache: dict | None = None,
              constant: tuple[str, ...] = ()) -> dict:
    """The RF curves of PlotData (see its docstring) of ``signals`` against the input ``x`` over all samples:
    binned AM/AM and AM/PM (:data:`CURVE_BINS` bins), output power and P1dB per 0.5 dB input bin
    (:func:`~dpd_desktop.metrics.transfer.compression_point`; bins whose gain is less certain than
    :data:`DRAWN_MAX_SE_DB` are NaN in ``pout_db``), CCDF at :data:`CCDF_LEVELS_DB` and PAPR (of the input x too).

    With ``psd_cache`` (one per split: its x never changes) the bins of x and the results of x and of the
    ``constant`` signals are kept there (keys ``"rf:..."``) and computed once (cost: benchmarks/results/2026-12-04-notes-core.md).

    Args:
        x: (N, 2) PA input; signals: name → (N, 2) outputs (the same N).
    """
    cache = psd_cache if psd_cache is not None else {}

    def cached(key, make, keep=True):
        if key in cache:
            return cache[key]
        value = make()
        if keep and psd_cache is not None:
            cache[key] = value
        return value

    xc = cached("rf:x", lambda: as_complex(x))
    lin = cached("rf:bins:linear", lambda: transfer_bins(xc, scale="linear", n_bins=CURVE_BINS))
    dbb = cached("rf:bins:db", lambda: transfer_bins(xc, scale="db", bin_db=COMPRESSION_BIN_DB,
                                                     span_db=COMPRESSION_SPAN_DB))
    prob = papr_probability(int(xc.size))
    f32 = lambda a: np.asarray(a, dtype=np.float32)  # noqa: E731

    def of_signal(name: str, sig) -> dict:
        out: dict = {}
        z = xc if sig is None else as_complex(sig)
        power = z.real * z.real + z.imag * z.imag
        if sig is not None:
            a = lin.transfer(z, name, power)
            c = dbb.transfer(z, name, power)
            pout = np.where(c.gain_se_db <= DRAWN_MAX_SE_DB, c.pout_db, np.nan) if len(c) else c.pout_db
            out.update(amam=f32(a.amp_out), ampm=f32(a.phase_deg), pout=f32(pout),
                       comp=compression_point(c).to_dict())
        try:
            out.update(ccdf=f32(ccdf(z, CCDF_LEVELS_DB, power)),
                       papr=tuple(float(v) for v in (prob, *papr_db(z, prob, power))))
        except ValueError:  # no finite sample, or no power: no curve
            pass
        return out

    results = {INPUT_NAME: cached(f"rf:of:{INPUT_NAME}", lambda: of_signal(INPUT_NAME, None))}
    for name, sig in signals.items():
        results[name] = cached(f"rf:of:{name}", lambda name=name, sig=sig: of_signal(name, sig),
                               keep=name in constant)
    pick = lambda key: {n: r[key] for n, r in results.items() if key in r}  # noqa: E731
    return dict(curve_in=f32(lin.amp_in), amam_curve=pick("amam"), ampm_curve=pick("ampm"),
                pin_db=f32(dbb.pin_db), pout_db=pick("pout"), compression=pick("comp"),
                ccdf_db=f32(CCDF_LEVELS_DB), ccdf=pick("ccdf"), papr=pick("papr"))
