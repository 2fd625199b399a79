"""Fixed-point formats and the integer primitives every quantised model here is made of (NumPy, int64).

A format is a signed two's-complement word of ``bits`` bits with ``frac`` fractional bits: the integer ``q`` stands
for the real value ``q · 2^-frac`` and lies in ``[-2^(bits-1), 2^(bits-1) - 1]`` — or, for the sigmoid's outputs
(the GRU's gates, in (0, 1)), an unsigned word in ``[0, 2^bits - 1]`` (UQ0.A: one more bit of resolution than a
signed word). ``frac`` may exceed ``bits - 1`` (small values) or be negative (large ones).

One rounding rule everywhere, **round half up**: a right shift by ``s > 0`` is ``(v + 2^(s-1)) >> s`` (arithmetic
shift, i.e. ``floor(v / 2^s + 1/2)``); a float is quantised as ``floor(x · 2^frac + 1/2)``; left shifts are exact.
**Saturation**: every stored word is clipped to its format's range after rounding (never wraps); accumulators are
int64 and are checked never to come near 2^62 (:class:`FixedOverflow` otherwise).

Format rules (:func:`weight_format`, :func:`act_format`, :func:`bias_format`):

* weights: the largest ``frac`` whose rounding of ``max|w|`` still fits (no weight saturates);
* activations: ``frac = bits - 1 - ceil(log2(max|v| · (1 + HEADROOM)))`` from the range seen on the training
  split, :data:`HEADROOM` = 1/8 (values beyond saturate) — or, with a histogram of the values
  (:func:`mse_act_format`), the finer ``frac`` (up to ``bits - 2`` more) whose rounding plus saturation error over
  that histogram is least;
* biases: 32-bit words added at the accumulator's fraction ``frac_x + frac_w`` (their own ``frac`` is the
  accumulator's unless the value needs fewer fractional bits to fit 32 bits; then shifted left, exactly).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = ["QFormat", "FixedOverflow", "HEADROOM", "BIAS_BITS", "PRE_BITS", "round_shift", "saturate",
           "quantize", "dequantize", "weight_format", "act_format", "mse_act_format",
           "magnitude_histogram", "HIST_LO", "HIST_BINS_PER_OCTAVE", "HIST_BINS", "bias_format", "unit_format", "gate_format",
           "isqrt",
           "LUT_RANGES", "LutSpec", "lut_table", "lut_eval", "lut_lookup", "ROUNDING", "SATURATION", "c_int_type"]

#: activation headroom over the training-split range (a test sample may exceed the training peak)
HEADROOM = 0.125
#: bias words (added at the accumulator's fraction)
BIAS_BITS = 32
#: pre-activation words: an accumulator rescaled before a lookup table or an elementwise product
PRE_BITS = 32
#: accumulators are int64; a value beyond this bound raises FixedOverflow (never wraps)
_ACC_LIMIT = 1 << 62

ROUNDING = ("round half up: a right shift by s > 0 is (v + 2^(s-1)) >> s (arithmetic shift); a float x is "
            "quantised as floor(x * 2^frac + 1/2); left shifts are exact")
SATURATION = ("every stored word (input, weights, biases, activations, gates, hidden state, pre-activation words, "
              "table entries, output) is clipped to its format's two's-complement range after rounding; the int64 "
              "accumulators never wrap (checked)")


class FixedOverflow(ArithmeticError):
    """An int64 accumulator would leave the checked range (|v| >= 2^62); the message names the tensor."""


@dataclass(frozen=True)
class QFormat:
    """A fixed-point word: ``bits`` total, ``frac`` fractional, signed (two's complement) or not (module
    docstring)."""

    bits: int
    frac: int
    signed: bool = True

    @property
    def max_int(self) -> int:
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1

    @property
    def min_int(self) -> int:
        return -(1 << (self.bits - 1)) if self.signed else 0

    @property
    def lsb(self) -> float:
        return math.ldexp(1.0, -self.frac)

    @property
    def label(self) -> str:
        """``Qm.f`` with m = bits − 1 − frac integer bits (sign bit not counted), e.g. ``Q1.14`` for 16 bits;
        ``UQm.f`` (m = bits − frac) for an unsigned word, e.g. ``UQ0.8``."""
        if not self.signed:
            return f"UQ{self.bits - self.frac}.{self.frac}"
        return f"Q{self.bits - 1 - self.frac}.{self.frac}"

    def to_dict(self) -> dict:
        return {"bits": self.bits, "frac": self.frac, "q": self.label, "signed": self.signed}

    @classmethod
    def from_dict(cls, d) -> "QFormat":
        return cls(int(d["bits"]), int(d["frac"]), bool(d.get("signed", True)))


def round_shift(v: np.ndarray, s: int) -> np.ndarray:
    """``v · 2^-s`` rounded half up (s > 0), exact left shift (s < 0); int64 in and out."""
    v = np.asarray(v, dtype=np.int64)
    if s > 0:
        return (v + (np.int64(1) << np.int64(s - 1))) >> np.int64(s)
    if s < 0:
        check_range(v, -s, "a left shift")
        return v << np.int64(-s)
    return v


def check_range(v: np.ndarray, shift: int = 0, what: str = "an accumulator") -> None:
    """Raise :class:`FixedOverflow` when ``|v| · 2^shift`` would reach 2^62."""
    if v.size and int(np.max(np.abs(v))) >= (_ACC_LIMIT >> shift):
        raise FixedOverflow(f"{what} would exceed the int64 accumulator's checked range (2^62)")


def saturate(v: np.ndarray, fmt: QFormat) -> np.ndarray:
    """Clip int64 ``v`` to ``fmt``'s range."""
    return np.clip(np.asarray(v, dtype=np.int64), fmt.min_int, fmt.max_int)


def quantize(x: np.ndarray, fmt: QFormat) -> np.ndarray:
    """Float → int64 word: ``floor(x · 2^frac + 1/2)``, saturated (module docstring)."""
    scaled = np.ldexp(np.asarray(x, dtype=np.float64), fmt.frac)
    return saturate(np.floor(np.clip(scaled + 0.5, -2.0**62, 2.0**62)).astype(np.int64), fmt)


def dequantize(q: np.ndarray, frac: int) -> np.ndarray:
    """int words at ``frac`` → float64 values (exact)."""
    return np.ldexp(np.asarray(q, dtype=np.float64), -frac)


def _int_bits(max_abs: float) -> int:
    return math.ceil(math.log2(max_abs)) if max_abs > 0 else -64


def act_format(max_abs: float, bits: int) -> QFormat:
    """The activation format of a tensor whose training-split range is ``max_abs`` (module docstring)."""
    if not math.isfinite(max_abs):
        raise ValueError(f"a non-finite activation range ({max_abs}) cannot be given a fixed-point format")
    if max_abs <= 0:
        return QFormat(bits, bits - 1)
    return QFormat(bits, bits - 1 - _int_bits(max_abs * (1.0 + HEADROOM)))


#: the magnitude histogram of :func:`mse_act_format`: bins of 1/4 octave of |v| from 2^HIST_LO up (the first and the
#: last bin also hold everything below and above); exact zeros are not counted (rounding keeps them exact)
HIST_LO = -48
HIST_BINS_PER_OCTAVE = 4
HIST_BINS = 64 * HIST_BINS_PER_OCTAVE


def magnitude_histogram(v: np.ndarray) -> np.ndarray:
    """Counts (HIST_BINS,) int64 of the non-zero |v| in 1/4-octave bins from 2^HIST_LO (see HIST_LO)."""
    a = np.abs(np.asarray(v, dtype=np.float64)).ravel()
    a = a[a > 0]
    idx = np.floor((np.log2(a) - HIST_LO) * HIST_BINS_PER_OCTAVE).astype(np.int64)
    return np.bincount(np.clip(idx, 0, HIST_BINS - 1), minlength=HIST_BINS).astype(np.int64)


def mse_act_format(counts: np.ndarray, max_abs: float, bits: int) -> QFormat:
    """The activation format of least squared error over a magnitude histogram (:func:`magnitude_histogram`).

    Candidates: :func:`act_format`'s ``frac`` (nothing saturates) and up to ``bits - 2`` finer ones. A bin's values
    (at the bin's geometric centre m) cost ``(m − top)²`` where they exceed the format's largest value ``top``,
    else ``min(m², step²/12)`` (rounding; values below half a step round to zero). Ties keep the coarser format.
    Clipping the rare peaks of a tensor whose crest factor is high buys resolution for the bulk of its values
    (benchmarks/results/2026-12-04-notes-core.md).
    """
    base = act_format(max_abs, bits)
    counts = np.asarray(counts, dtype=np.float64)
    if counts.sum() == 0:
        return base
    m = np.exp2(HIST_LO + (np.arange(HIST_BINS) + 0.5) / HIST_BINS_PER_OCTAVE)
    best, best_err = base, None
    for frac in range(base.frac, base.frac + bits - 1):
        step = math.ldexp(1.0, -frac)
        top = ((1 << (bits - 1)) - 1) * step
        err = np.where(m > top, (m - top) ** 2, np.minimum(m * m, step * step / 12.0))
        total = float(np.dot(counts, err))
        if best_err is None or total < best_err:
            best, best_err = QFormat(bits, frac), total
    return best


def unit_format(bits: int) -> QFormat:
    """Q0.(bits−1): gate values, table outputs and the GRU hidden state (all in (−1, 1))."""
    return QFormat(bits, bits - 1)


def gate_format(bits: int) -> QFormat:
    """UQ0.bits: the sigmoid table's outputs (the GRU's r and z, in (0, 1)), unsigned."""
    return QFormat(bits, bits, signed=False)


def weight_format(max_abs: float, bits: int) -> QFormat:
    """The largest fraction at which ``round(max|w| · 2^frac)`` still fits ``bits`` (no weight saturates)."""
    if not math.isfinite(max_abs):
        raise ValueError(f"a non-finite weight ({max_abs}) cannot be quantised")
    if max_abs <= 0:
        return QFormat(bits, bits - 1)
    frac = bits - 1 - _int_bits(max_abs)
    top = (1 << (bits - 1)) - 1
    while math.floor(math.ldexp(max_abs, frac) + 0.5) > top:
        frac -= 1
    return QFormat(bits, frac)


def bias_format(max_abs: float, acc_frac: int, bits: int = BIAS_BITS) -> QFormat:
    """A bias word: at the accumulator's fraction unless 32 bits cannot hold ``max|b|`` there (module docstring)."""
    fit = weight_format(max_abs, bits).frac
    return QFormat(bits, min(acc_frac, fit))


def isqrt(n: np.ndarray) -> np.ndarray:
    """Exact ``floor(sqrt(n))`` of non-negative int64 ``n`` (< 2^62), elementwise."""
    n = np.asarray(n, dtype=np.int64)
    if n.size and int(n.min()) < 0:
        raise ValueError("isqrt of a negative number")
    r = np.floor(np.sqrt(n.astype(np.float64))).astype(np.int64)
    # float rounding can be one off near perfect squares: correct both ways
    r = np.where(r * r > n, r - 1, r)
    r = np.where((r + 1) * (r + 1) <= n, r + 1, r)
    return r


# ------------------------------------------------------------------------------------------------ lookup tables
#: table input range [-R, R) per function; beyond it the table's end values hold (sigmoid(16) = 1 − 1.1e-7,
#: tanh(8) = 1 − 2.3e-7: below half an LSB of a 16-bit Q0.15 word)
LUT_RANGES = {"sigmoid": 16, "tanh": 8}
_FUNCS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sigmoid": lambda v: 1.0 / (1.0 + np.exp(-v)),
    "tanh": np.tanh,
}


@dataclass(frozen=True)
class LutSpec:
    """A sigmoid/tanh table: ``2^bits + 1`` entries at ``-R + k·2R/2^bits`` (k = 0 … 2^bits) in ``out`` format;
    ``interp``: "linear" (between the two neighbouring entries) or "nearest"."""

    func: str
    bits: int
    out: QFormat
    interp: str = "linear"

    @property
    def range(self) -> int:
        return LUT_RANGES[self.func]

    @property
    def entries(self) -> int:
        return (1 << self.bits) + 1

    def shift(self, in_frac: int) -> int:
        """s: input LSBs per table step = 2^s (negative: the input grid is coarser than the table)."""
        return int(math.log2(2 * self.range)) + in_frac - self.bits


def lut_table(spec: LutSpec) -> np.ndarray:
    """The table's int64 entries (``spec.entries`` of them), quantised to ``spec.out``."""
    k = np.arange(spec.entries, dtype=np.float64)
    v = -spec.range + k * (2.0 * spec.range / (1 << spec.bits))
    return quantize(_FUNCS[spec.func](v), spec.out)


def lut_eval(p: np.ndarray, in_frac: int, spec: LutSpec, table: np.ndarray) -> np.ndarray:
    """Look up int64 words ``p`` (at ``in_frac``) in ``table``.

    With s = :meth:`LutSpec.shift`: the offset ``o = clip(p + R·2^in_frac, 0, 2R·2^in_frac − 1)`` (the input
    saturated to [−R, R)); s > 0: index ``i = o >> s`` and remainder ``r = o & (2^s − 1)``, then linear:
    ``T[i] + (((T[i+1] − T[i]) · r + 2^(s−1)) >> s)``, nearest: ``T[(o + 2^(s−1)) >> s]``; s ≤ 0: ``T[o << −s]``.
    """
    if in_frac < -int(math.log2(spec.range)):
        raise ValueError(f"{spec.func} table: input fraction {in_frac} is too coarse for the range ±{spec.range}")
    return lut_lookup(np.asarray(p, dtype=np.int64), in_frac, spec, table)


def lut_lookup(p, in_frac: int, spec: LutSpec, table):
    """:func:`lut_eval`'s integer operations without its check, on int64 NumPy arrays or torch tensors alike (the
    QAT forward's lookup, quant/backends.py)."""
    rng = spec.range
    half = rng << in_frac if in_frac >= 0 else rng >> -in_frac
    o = (p + half).clip(0, 2 * half - 1)
    s = spec.shift(in_frac)
    if s <= 0:
        return table[o << -s]
    if spec.interp == "nearest":
        return table[(o + (1 << (s - 1))) >> s]
    i = o >> s
    r = o & ((1 << s) - 1)
    t0 = table[i]
    return t0 + (((table[i + 1] - t0) * r + (1 << (s - 1))) >> s)


def c_int_type(bits: int, signed: bool = True) -> str:
    """The narrowest C99 exact-width type that holds a word of ``bits`` (``uintN_t`` for an unsigned one)."""
    for w in (8, 16, 32, 64):
        if bits <= w:
            return f"{'' if signed else 'u'}int{w}_t"
    raise ValueError(f"{bits}-bit words have no C type")
