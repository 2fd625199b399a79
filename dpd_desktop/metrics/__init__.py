"""Training/evaluation metrics with the legacy OpenDPD 2.2.1 numerics ("OpenDPD 2.2.1 reference §6").

All metric inputs are segment arrays (S, N, 2) float32 (I, Q), N = nperseg, zero-padded tail included (§2.2).
No Qt, no torch; SciPy is imported at first use (see ``spectra``).
"""

from __future__ import annotations

import math

from .aclr import aclr_db, segment_psd
from .evm import evm_db
from .nmse import as_segments, nmse_db
from .spectra import ChannelBins, channel_bins, psd_db

__all__ = [
    "METRIC_KEYS",
    "ChannelBins",
    "aclr_db",
    "as_segments",
    "channel_bins",
    "compute_metrics",
    "evm_db",
    "nmse_db",
    "psd_db",
    "segment_psd",
]

#: Keys of ``compute_metrics``' result, in display order.
METRIC_KEYS: tuple[str, ...] = ("NMSE", "EVM", "ACLR_L", "ACLR_R", "ACLR_AVG")


def compute_metrics(pred, ref, spec_like) -> dict:
    """All legacy metrics of one evaluation pass.

    Args:
        pred, ref: (S, N, 2) float32 I/Q segment arrays (prediction, target).
        spec_like: any object with attributes ``sample_rate_hz``, ``bw_main_hz``, ``n_sub_ch`` (e.g. ``DatasetSpec``);
            a missing attribute counts as None. ``bw_sub_hz`` is not consulted (reference §6.2).

    Returns:
        ``{"NMSE": np.float32 (dB), "EVM": float (dB), "ACLR_L"/"ACLR_R"/"ACLR_AVG": float (dBc)}``. NMSE stays a
        NumPy float32 (the reference logs it unformatted). When any of fs / bw_main / n_sub_ch is None the spectral
        metrics are ``nan`` ("not applicable"), like the Studio legacy profile (reference §6.4).

    Raises:
        ValueError: bad shapes, or a spec whose channel geometry does not fit the grid (see ``channel_bins`` and
            ``aclr_db``).
    """
    out: dict = {"NMSE": nmse_db(pred, ref)}
    fs = getattr(spec_like, "sample_rate_hz", None)
    bw = getattr(spec_like, "bw_main_hz", None)
    nsc = getattr(spec_like, "n_sub_ch", None)
    if fs is None or bw is None or nsc is None:
        nan = math.nan
        out.update(EVM=nan, ACLR_L=nan, ACLR_R=nan, ACLR_AVG=nan)
        return out
    out["EVM"] = evm_db(pred, ref, fs, bw, nsc)
    left, right, avg = aclr_db(pred, fs, bw, nsc)
    out.update(ACLR_L=left, ACLR_R=right, ACLR_AVG=avg)
    return out

