"""Build the small, downsampled :class:`PlotData` of the default panels from one pass of predictions.

Runs on the training thread (never the GUI thread). Cost on DPA_160MHz validation (98,304 samples): a few ms.
The spectra are :func:`dpd_desktop.metrics.spectra.psd_db` (reference §8.2 plot settings) with the Welch window
capped at ``PSD_NPERSEG_MAX`` bins.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ..metrics.spectra import psd_db
from .events import PlotData

AMAM_POINTS = 2000
#: Welch window cap of the plotted PSDs (bins): the spectra are drawn with at most this many points.
PSD_NPERSEG_MAX = 2048
TIME_WINDOW = 256


def _complex(a: np.ndarray) -> np.ndarray:
    return a[..., 0].astype(np.float64) + 1j * a[..., 1].astype(np.float64)


def build_plot_data(source: str, x: np.ndarray, signals: Mapping[str, np.ndarray], spec, *,
                    target_name: str, pred_name: str, aclr: Mapping[str, tuple[float, float]] | None = None,
                    error_of: tuple[str, str] | None = None, psd_cache: dict | None = None,
                    constant: tuple[str, ...] = ()) -> PlotData:
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
    """
    n = x.shape[0]
    xc = _complex(x)
    idx = np.linspace(0, n - 1, num=min(AMAM_POINTS, n)).astype(np.int64)
    ax = np.abs(xc[idx])
    safe_x = np.where(ax > 0, xc[idx], 1.0)
    amam, ampm = {}, {}
    for name, s in signals.items():
        sc = _complex(s[idx])
        amam[name] = np.abs(sc).astype(np.float32)
        ampm[name] = np.degrees(np.angle(sc / safe_x)).astype(np.float32)

    fs = spec.sample_rate_hz or 1.0
    nps = min(spec.nperseg, PSD_NPERSEG_MAX)
    psd = {}

    def psd_of(name: str, sig) -> tuple[np.ndarray, np.ndarray]:
        if psd_cache is None or (name != "input x" and name not in constant):
            return psd_db(sig, fs, nps)
        if name not in psd_cache:
            psd_cache[name] = psd_db(sig, fs, nps)
        return psd_cache[name]

    freq, p = psd_of("input x", xc)
    psd["input x"] = p.astype(np.float32)
    for name, s in signals.items():
        _, p = psd_of(name, _complex(s))
        psd[name] = p.astype(np.float32)
    if error_of is not None:
        _, p = psd_db(_complex(signals[error_of[0]]) - _complex(signals[error_of[1]]), fs, nps)
        psd["error"] = p.astype(np.float32)

    bands = {}
    if spec.bw_main_hz and spec.n_sub_ch:
        b = spec.bw_main_hz / 1e6
        w = b / spec.n_sub_ch
        bands = {"main": (-b / 2, b / 2), "adj_left": (-b / 2 - w, -b / 2), "adj_right": (b / 2, b / 2 + w)}

    start = int(max(0, min(1000, n - TIME_WINDOW)))
    stop = min(n, start + TIME_WINDOW)
    time = {name: np.ascontiguousarray(s[start:stop], dtype=np.float32) for name, s in signals.items()}
    time["input x"] = np.ascontiguousarray(x[start:stop], dtype=np.float32)
    return PlotData(
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
