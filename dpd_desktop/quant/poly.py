"""MP/GMP in fixed point: quantised coefficients and a bit-exact integer model of the memory polynomial.

The float model is models/poly.py's (terms x(n−d)·|x(n−e)|^(k−1), zero outside a segment). In integers, with the
rules of quant/fixed.py (round half up, saturation, int64 accumulators):

* x: I/Q words of ``io_bits`` (format from the training-split range);
* |x| = (isqrt(4(I² + Q²)) + 1) >> 1 at the input's fraction; envelope powers e_1 = |x|, e_p = pre(e_(p−1)·|x|)
  as 32-bit words (format per power from the training-split range);
* basis words φ = x(n−d)·e_(k−1)(n−e) (I and Q), requantised to one format per order k (from the range of |x|^k)
  as 32-bit words (the high orders' small values keep their precision); order 1 is x(n−d) itself;
* coefficients: W-bit real and imaginary words, one format per order k (the largest fraction at which that order's
  largest |re| or |im| fits);
* y = Σ c·φ as a complex multiply-accumulate (re = Σ c_re φ_re − c_im φ_im, im = Σ c_re φ_im + c_im φ_re), each
  order's products aligned to the largest fraction by exact left shifts, then requantised to the ``io_bits``
  output. (With 32-bit envelope and basis words the activation width A is not used by this model.)
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..config import PolySpec, QuantSpec
from ..models.poly import delayed
from . import fixed
from .fixed import QFormat

__all__ = ["PolyFixed"]


class PolyFixed:
    """The fixed-point MP/GMP of ``coefficients`` ((P,) complex, models/poly.py order) at ``qspec``.

    :meth:`calibrate` chooses the activation formats from float runs on the training segments; then
    :meth:`run_int` gives the integer output and every tensor's words (:attr:`saturated`: the words clipped per
    tensor), :meth:`run_float` the float model's output. Envelope powers and basis words are calibrated with the
    headroom of |x| raised to their power.
    """

    def __init__(self, spec: PolySpec, coefficients: np.ndarray, qspec: QuantSpec) -> None:
        self.spec = spec
        self.qspec = qspec.check()
        self.w = np.asarray(coefficients, dtype=np.complex128).reshape(-1)
        if self.w.shape[0] != spec.n_coefficients:
            raise ValueError(f"expected {spec.n_coefficients} coefficients, got {self.w.shape[0]}")
        self.terms = spec.terms
        self.orders = sorted({t.order for t in self.terms})
        self.coef_formats: dict[int, QFormat] = {}
        for k in self.orders:
            sel = np.array([t.order == k for t in self.terms])
            m = float(max(np.max(np.abs(self.w[sel].real)), np.max(np.abs(self.w[sel].imag))))
            self.coef_formats[k] = fixed.weight_format(m, qspec.weights)
        self.coef_re = np.array([fixed.quantize(np.array(c.real), self.coef_formats[t.order])
                                 for c, t in zip(self.w, self.terms)], dtype=np.int64)
        self.coef_im = np.array([fixed.quantize(np.array(c.imag), self.coef_formats[t.order])
                                 for c, t in zip(self.w, self.terms)], dtype=np.int64)
        self.formats: dict[str, QFormat] = {}
        self.ranges: dict[str, float] = {}
        self.saturated: dict[str, int] = {}  # words clipped per tensor in the last run_int

    # ---------------------------------------------------------------- float
    def run_float(self, segs: np.ndarray, note: bool = False) -> np.ndarray:
        """The float64 model on (S, N, 2) segments → (S, N, 2); ``note`` records the ranges for calibration."""
        x = segs[..., 0].astype(np.float64) + 1j * segs[..., 1].astype(np.float64)
        amp = np.abs(x)
        y = np.zeros_like(x)
        for c, t in zip(self.w, self.terms):
            term = delayed(x, t.delay) * (delayed(amp, t.env_delay) ** t.power)
            y += c * term
        if note:  # a power p of the envelope gets the headroom of |x| to the power p
            self._note("x", np.max(np.abs(segs)))
            a_max = float(np.max(amp))
            grow = 1.0 + fixed.HEADROOM
            for p in range(2, max(self.orders)):
                self._note(f"env{p}", a_max ** p * grow ** (p - 1))
            for k in self.orders:
                self._note(f"phi{k}", a_max ** k * grow ** (k - 1))
            self._note("y", max(np.max(np.abs(y.real)), np.max(np.abs(y.imag))))
        return np.stack([y.real, y.imag], axis=-1)

    def _note(self, key: str, m: float) -> None:
        self.ranges[key] = max(self.ranges.get(key, 0.0), float(m))

    def calibrate(self, segs: np.ndarray) -> None:
        self.ranges = {}
        self.run_float(segs, note=True)
        a, io = self.qspec.activations, self.qspec.io_bits
        for key, m in self.ranges.items():
            bits = fixed.PRE_BITS if key.startswith(("env", "phi")) else io if key in ("x", "y") else a
            self.formats[key] = fixed.act_format(m, bits)

    # ---------------------------------------------------------------- integer
    def run_int(self, segs: np.ndarray) -> tuple[np.ndarray, dict[str, tuple[np.ndarray, int]]]:
        """(output (S, N, 2) float64 = its words · 2^-frac, {tensor: (int words, frac)}) on (S, N, 2) segments."""
        if not self.formats:
            raise ValueError("calibrate the fixed-point MP/GMP first")
        fmt = self.formats
        self.saturated = {}
        fx = fmt["x"].frac
        xq = self._sat(np.floor(np.ldexp(np.asarray(segs, dtype=np.float64), fx) + 0.5).astype(np.int64), fmt["x"],
                       "x")
        i, q = xq[..., 0], xq[..., 1]
        amp = (fixed.isqrt((i * i + q * q) << 2) + 1) >> 1  # at fx
        env: dict[int, tuple[np.ndarray, int]] = {1: (amp, fx)}
        traces = {"x": (xq, fx), "amp": (amp, fx)}
        for p in range(2, max(self.orders)):
            prev, fp = env[p - 1]
            f = fmt[f"env{p}"]
            prod = prev * amp
            fixed.check_range(prod, 0, f"envelope power {p}")
            env[p] = (self._sat(fixed.round_shift(prod, fp + fx - f.frac), f, f"env{p}"), f.frac)
            traces[f"env{p}"] = env[p]
        fo = max(self.coef_formats[t.order].frac + (fmt[f"phi{t.order}"].frac if t.order > 1 else fx)
                 for t in self.terms)
        acc_re = np.zeros(i.shape, dtype=np.int64)
        acc_im = np.zeros(i.shape, dtype=np.int64)
        for j, t in enumerate(self.terms):
            si, sq = delayed(i, t.delay), delayed(q, t.delay)
            if t.order == 1:
                pr, pi_, fphi = si, sq, fx
            else:
                e, fe = env[t.power]
                e = delayed(e, t.env_delay)
                f = fmt[f"phi{t.order}"]
                pr = self._sat(fixed.round_shift(si * e, fx + fe - f.frac), f, f"phi{t.order}")
                pi_ = self._sat(fixed.round_shift(sq * e, fx + fe - f.frac), f, f"phi{t.order}")
                fphi = f.frac
            s = fo - (self.coef_formats[t.order].frac + fphi)
            cr, ci = int(self.coef_re[j]), int(self.coef_im[j])
            acc_re += (cr * pr - ci * pi_) << s
            acc_im += (cr * pi_ + ci * pr) << s
        fixed.check_range(acc_re, 0, "the output accumulator")
        fixed.check_range(acc_im, 0, "the output accumulator")
        fy = fmt["y"]
        y = self._sat(np.stack([fixed.round_shift(acc_re, fo - fy.frac), fixed.round_shift(acc_im, fo - fy.frac)],
                               axis=-1), fy, "y")
        traces["y"] = (y, fy.frac)
        return fixed.dequantize(y, fy.frac), traces

    def _sat(self, v: np.ndarray, f: QFormat, key: str) -> np.ndarray:
        out = fixed.saturate(v, f)
        n = int(np.count_nonzero(out != v))
        if n:
            self.saturated[key] = self.saturated.get(key, 0) + n
        return out

    def describe(self) -> dict[str, Any]:
        return {"spec": self.spec.to_dict(), "quant": self.qspec.to_dict(),
                "coef_formats": {str(k): f.to_dict() for k, f in self.coef_formats.items()},
                "formats": {k: {**f.to_dict(), "range": self.ranges.get(k)} for k, f in self.formats.items()}}
