"""The inspector's flags: each a code, a severity (``error`` / ``warning`` / ``info``) and a sentence for the user.

Thresholds (stated here, used nowhere else):

* ``NON_FINITE`` (error): any NaN/Inf sample; names the count, the first index and the file.
* ``ZERO_CAPTURE`` / ``CONSTANT_CAPTURE`` (error): max|s| = 0, or every sample equal.
* ``CLIPPING`` (warning): ≥ :data:`CLIP_MIN_COUNT` samples and ≥ 0.01 % of them within 0.1 % of the signal's peak
  magnitude, or of the peak |I| or |Q| (a converter's rail). An unclipped Gaussian-like capture has 1-3 there.
* ``SWAPPED`` (error): at least two of three hold — PAPR(x) < PAPR(y) − 0.3 dB; x's out-of-band power ratio
  exceeds y's by 1 dB (band: the spec's main channel, else the narrower 99 % OBW); the AM/AM fit at max|x| is
  0.3 dB above the small-signal line (expansion: y looks like the PA input).
* ``NEAR_LINEAR`` (warning): linear NMSE (y vs g·x) below −30 dB and, when the layout is known, ACLR(y) within 3 dB
  of ACLR(x) or below −50 dBc (a generated x sits near −150 dBc, so "close to x's" alone never fires on measured
  data): "expect small DPD gains".
* ``SPEC_BANDWIDTH`` (error): the 99 % OBW of x outside [0.75, 1.05] × the spec's ``bw_main_ch``.
* ``SPEC_LAYOUT`` (error): ACLR of y ≥ :data:`ACLR_LAYOUT_DB` (−10 dBc) with the spec's channel layout (the
  adjacent channels hold signal). No PA output keeps its adjacent power within 10 dB of its carrier; −3 dBc would
  miss a 200 MHz capture under a 100 MHz spec (−3.7 dBc, flat spectrum).
* ``SPEC_CARRIERS`` (warning): a sub-channel of x more than 10 dB below the strongest (the carrier count is off).
* ``SPEC_INCOMPLETE`` (info): fs / bandwidth / carriers missing, the spectral checks are skipped.
* ``SPLIT_SHORT`` (error): val or test shorter than one ``nperseg`` segment (the trainer refuses it).
* ``FRAME_TOO_LONG`` (error): the given frame length exceeds a split.
* ``WEAK_CORRELATION`` (warning): cross-correlation peak < 10 × its mean (x and y hardly related).
* ``DELAY`` (warning): |delay| ≥ 0.5 sample (the model must learn the misalignment: import the capture to remove it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Flag", "capture_flags", "SEVERITIES", "CLIP_MIN_COUNT", "RULES_VERSION"]

SEVERITIES = ("error", "warning", "info")
#: The version of the rules above: raise it with any change of what is flagged (analysis/gate.py caches flags by it)
RULES_VERSION = 1
CLIP_MIN_COUNT = 16
BW_RATIO_OK = (0.75, 1.05)
ACLR_LAYOUT_DB = -10.0
NEAR_LINEAR_ACLR_DB = -50.0


@dataclass(frozen=True)
class Flag:
    code: str
    severity: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "severity": self.severity, "message": self.message}


def _plateau(z: np.ndarray) -> int:
    """Largest count of samples within 0.1 % of the peak: of |z|, of |I|, of |Q|."""
    best = 0
    for a in (np.abs(z), np.abs(z.real), np.abs(z.imag)):
        m = float(a.max()) if a.size else 0.0
        if m > 0:
            best = max(best, int(np.count_nonzero(a >= 0.999 * m)))
    return best


def _oob_db(f: np.ndarray, p_db: np.ndarray, lo: float, hi: float) -> float:
    p = 10 ** (p_db / 10)
    inside = (f >= lo) & (f <= hi)
    pin, pout = float(p[inside].sum()), float(p[~inside].sum())
    return 10 * np.log10(pout / pin) if pin > 0 and pout > 0 else float("-inf")


def capture_flags(ds, r: dict[str, Any], st: dict[str, Any], frame_length: int | None) -> list[Flag]:
    """The flags of one report (``r``: the report's fields; ``st``: the intermediate arrays of inspect.py)."""
    out: list[Flag] = []
    spec = ds.spec
    for nf in st["nonfinite"]:
        out.append(Flag("NON_FINITE", "error", f"{nf['count']} non-finite sample(s) in the {nf['split']} "
                        f"{nf['role']}, first at index {nf['first_index']} ({nf['file']}); they were read as 0 here "
                        "and training would diverge."))
    dead = False
    for name, z in (("input x", st["x_all"]), ("output y", st["y_all"])):
        if not np.any(z):
            out.append(Flag("ZERO_CAPTURE", "error", f"The {name} is all zero: nothing was captured."))
            dead = True
        elif np.all(z == z[0]):
            out.append(Flag("CONSTANT_CAPTURE", "error", f"The {name} is constant ({z[0]:.4g}): not a signal."))
            dead = True
        else:
            n = _plateau(z)
            if n >= max(CLIP_MIN_COUNT, 1e-4 * z.size):
                out.append(Flag("CLIPPING", "warning", f"The {name} has {n} samples at its peak magnitude or "
                                "rail (a clipping plateau): the converter or the PA was driven into its limit."))
    if dead:
        return out + _length_flags(ds, frame_length)

    # swapped input/output: two of three votes
    f, px, py = st["psd"]
    if spec.sample_rate_hz and spec.bw_main_hz:
        lo, hi = -spec.bw_main_hz / 2, spec.bw_main_hz / 2
    else:
        ox, oy = st["obw_x"], st["obw_y"]
        lo, hi = (ox[1], ox[2]) if ox[0] <= oy[0] else (oy[1], oy[2])
    votes = []
    if np.isfinite(r["papr_x_db"]) and r["papr_x_db"] < r["papr_y_db"] - 0.3:
        votes.append(f"PAPR of x {r['papr_x_db']:.2f} dB < PAPR of y {r['papr_y_db']:.2f} dB")
    if f.size and np.isfinite(lo):
        rx, ry = _oob_db(f, px, lo, hi), _oob_db(f, py, lo, hi)
        if rx > ry + 1.0:
            votes.append(f"x has more out-of-band power ({rx:.1f} dB) than y ({ry:.1f} dB)")
    fit, gabs, amax = st["am_am"], st["gain_abs"], st["a_max"]
    if fit is not None and gabs > 0 and amax > 0:
        dev = 20 * np.log10(max(float(fit(amax)), 1e-300) / (gabs * amax))
        if dev > 0.3:
            votes.append(f"the AM/AM expands by {dev:.2f} dB at max|x|")
    if len(votes) >= 2:
        out.append(Flag("SWAPPED", "error", "Input and output look swapped (y looks like the PA input): "
                        + "; ".join(votes) + ". Exchange the input and output files."))

    if r["delay_peak_ratio"] < 10:
        out.append(Flag("WEAK_CORRELATION", "warning", "x and y hardly correlate (peak/mean "
                        f"{r['delay_peak_ratio']:.1f}): are they the same capture?"))
    elif abs(r["delay_samples"]) >= 0.5:
        out.append(Flag("DELAY", "warning", f"y lags x by {r['delay_samples']:.2f} samples; the model has to learn "
                        "this misalignment (Import capture… removes it)."))

    layout_ok = not (r["aclr_y_db"] and r["aclr_y_db"][2] >= ACLR_LAYOUT_DB)
    near = np.isfinite(r["linear_nmse_db"]) and r["linear_nmse_db"] < -30 and layout_ok
    if near and r["aclr_x_db"] and r["aclr_y_db"]:
        near = r["aclr_y_db"][2] < max(r["aclr_x_db"][2] + 3, NEAR_LINEAR_ACLR_DB)
    if near:
        out.append(Flag("NEAR_LINEAR", "warning", f"The capture is nearly linear (y vs g·x NMSE "
                        f"{r['linear_nmse_db']:.1f} dB): expect small DPD gains."))

    if not spec.has_metrics:
        miss = ", ".join(spec.missing_metric_fields())
        out.append(Flag("SPEC_INCOMPLETE", "info", f"spec.json lacks {miss}: occupied bandwidth, ACLR and carrier "
                        "checks skipped (training needs them too)."))
    else:
        ratio = r["obw_ratio"]
        if ratio is not None and not BW_RATIO_OK[0] <= ratio <= BW_RATIO_OK[1]:
            out.append(Flag("SPEC_BANDWIDTH", "error", f"The input occupies {r['obw_x_hz'] / 1e6:.1f} MHz (99 % power) "
                            f"but spec.json says bw_main_ch = {spec.bw_main_hz / 1e6:g} MHz (ratio {ratio:.2f}, "
                            f"accepted {BW_RATIO_OK[0]}–{BW_RATIO_OK[1]}): fix the bandwidth in spec.json."))
        if not layout_ok:
            out.append(Flag("SPEC_LAYOUT", "error", f"ACLR of the measured output is {r['aclr_y_db'][2]:.1f} dBc with "
                            "this channel layout: the adjacent channels hold signal, so bw_main_ch / n_sub_ch are "
                            "wrong."))
        cdb = st["carriers_db"]
        if cdb is not None and np.min(cdb) < -10:
            k = int(np.argmin(cdb))
            out.append(Flag("SPEC_CARRIERS", "warning", f"Sub-channel {k + 1} of {len(cdb)} holds {cdb[k]:.1f} dB less "
                            "power than the strongest: n_sub_ch does not match the carriers in the data."))
        n = int(spec.nperseg)
        for s in ("val", "test"):
            if ds.n_samples[s] < n:
                out.append(Flag("SPLIT_SHORT", "error", f"The {s} split has {ds.n_samples[s]} samples, fewer than one "
                                f"nperseg segment ({n}): training refuses it."))
    return out + _length_flags(ds, frame_length)


def _length_flags(ds, frame_length: int | None) -> list[Flag]:
    if not frame_length:
        return []
    return [Flag("FRAME_TOO_LONG", "error", f"Frame length {frame_length} is longer than the {s} split ({n} samples).")
            for s, n in ds.n_samples.items() if n < frame_length]
