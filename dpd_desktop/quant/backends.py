"""The three arithmetics a lowered model (quant/graph.py) runs in, behind one interface.

* :class:`FloatBackend` (torch, float): no quantisation; every tensor a format will be chosen for records its
  largest magnitude (the calibration on the training split; quant/plan.py). Run in float64 it reproduces the
  PyTorch model (tests/unit/test_quant.py), which checks each lowering.
* :class:`IntBackend` (NumPy int64): the bit-exact integer reference — words, int64 accumulators, explicit shifts,
  the rounding and saturation rules of quant/fixed.py. It records every tensor (the golden vectors) and every
  quantised parameter (the C header).
* :class:`FakeBackend` (torch): the same operations on real values that are exactly the integer words times
  ``2^-frac`` ("fake quantisation"), differentiable by straight-through estimators: a rounding passes the gradient
  unchanged inside its word's range and stops it where the word saturates; a table lookup passes the derivative of
  the exact sigmoid/tanh. In float64 its forward equals the integer reference bit for bit (every product and sum is
  exact below 2^53; tested); in float32 (training) it is the same arithmetic up to float32 rounding of the wide
  words. Quantisation-aware training (quant/qat.py) runs the model in it.

A value is an :class:`Fx`: ``data`` (an int64 array, or a torch tensor of real values) and ``frac`` (its fraction;
None in the float backend). Sequences are ``(B, T, C)``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from . import fixed
from .fixed import QFormat, LutSpec

__all__ = ["Fx", "FloatBackend", "IntBackend", "FakeBackend", "HARDSWISH_SCALE"]

#: hardswish's 1/6, a 16-bit constant: 21845 · 2^-17 = 0.1666641 (relative error 1.5e-5)
HARDSWISH_SCALE = QFormat(16, 17)


@dataclass
class Fx:
    """A tensor and its fraction (see the module docstring); ``signed`` False for unsigned words (the gates)."""

    data: Any
    frac: int | None
    signed: bool = True

    def __getitem__(self, idx) -> "Fx":
        return Fx(self.data[idx], self.frac, self.signed)

    @property
    def shape(self):
        return tuple(self.data.shape)


# ====================================================================================================== float
class FloatBackend:
    """Plain float arithmetic (torch); :attr:`ranges` maps every format key to ``(kind, max |value|)`` and
    :attr:`hists` every ``act`` key to its magnitude histogram (quant/fixed.py ``magnitude_histogram``)."""

    records = False

    def __init__(self) -> None:
        self.ranges: dict[str, tuple[str, float]] = {}
        self.hists: dict[str, np.ndarray] = {}

    def _note(self, key: str, kind: str, v: torch.Tensor) -> None:
        m = float(v.detach().abs().max()) if v.numel() else 0.0
        if not math.isfinite(m):
            raise ValueError(f"tensor {key!r} holds non-finite values in the float model")
        old = self.ranges.get(key, (kind, 0.0))[1]
        self.ranges[key] = (kind, max(old, m))
        if kind == "act":
            h = fixed.magnitude_histogram(v.detach().cpu().numpy())
            self.hists[key] = self.hists[key] + h if key in self.hists else h

    def input(self, x, key: str) -> Fx:
        x = torch.as_tensor(x)
        self._note(key, "act", x)
        return Fx(x, None)

    def linear(self, x: Fx, wkey: str, w, bkey: str | None, b) -> Fx:
        y = torch.matmul(x.data, w.to(x.data.dtype).t())
        if b is not None:
            y = y + b.to(x.data.dtype)
        return Fx(y, None)

    def linear_many(self, x: Fx, items) -> list[Fx]:
        return [self.linear(x, *it) for it in items]

    def conv1d(self, x: Fx, wkey: str, w, bkey: str | None, b, dilation: int, padding: int, groups: int) -> Fx:
        dt = x.data.dtype
        y = torch.nn.functional.conv1d(x.data.transpose(1, 2), w.to(dt), None if b is None else b.to(dt),
                                       padding=padding, dilation=dilation, groups=groups)
        return Fx(y.transpose(1, 2), None)

    def add(self, a: Fx, b: Fx) -> Fx:
        return Fx(a.data + b.data, None)

    def sub(self, a: Fx, b: Fx) -> Fx:
        return Fx(a.data - b.data, None)

    def mul(self, a: Fx, b: Fx) -> Fx:
        return Fx(a.data * b.data, None)

    def relu(self, a: Fx) -> Fx:
        return Fx(torch.relu(a.data), None)

    def requant(self, a: Fx, key: str, kind: str) -> Fx:
        self._note(key, kind, a.data)
        return a

    def lut(self, a: Fx, func: str) -> Fx:
        return Fx(torch.sigmoid(a.data) if func == "sigmoid" else torch.tanh(a.data), None)

    def hardswish(self, a: Fx, key: str) -> Fx:
        return self.requant(Fx(torch.nn.functional.hardswish(a.data), None), key, "act")

    def polar(self, x: Fx, key: str) -> Fx:
        i, q = x.data[..., 0], x.data[..., 1]
        amp = torch.sqrt(i * i + q * q)
        self._note(f"{key}.amp", "act", amp)
        self._note(f"{key}.amp2", "pre", amp * amp)
        self._note(f"{key}.amp3", "act", amp ** 3)
        den = torch.where(amp == 0, torch.ones_like(amp), amp)
        nz = amp != 0
        sin = torch.where(nz, q / den, torch.zeros_like(amp))
        cos = torch.where(nz, i / den, torch.zeros_like(amp))
        return self.concat([Fx(torch.stack([i, q, amp, amp ** 3, sin, cos], dim=-1), None)], key)

    def concat(self, parts: list[Fx], key: str) -> Fx:
        return self.requant(Fx(torch.cat([p.data for p in parts], dim=-1), None), key, "act")

    def zeros_unit(self, like: Fx, shape) -> Fx:
        return Fx(torch.zeros(shape, dtype=like.data.dtype, device=like.data.device), None)

    def stack(self, parts: list[Fx], dim: int) -> Fx:
        return Fx(torch.stack([p.data for p in parts], dim=dim), None)

    def trace(self, key: str, v: Fx) -> None:
        pass

    def output(self, v: Fx):
        return v.data


# ====================================================================================================== quantised
class _Quantised:
    """What the integer and the fake backend share: the formats of the plan and the parameter-format rules."""

    records = False

    def __init__(self, plan) -> None:
        self.plan = plan
        self.spec = plan.spec

    def fmt(self, key: str, kind: str) -> QFormat:
        if kind == "unit":
            return fixed.unit_format(self.spec.activations)
        try:
            return self.plan.formats[key]
        except KeyError:
            raise KeyError(f"the quantisation plan has no format for tensor {key!r} (calibrate the model again)") \
                from None

    def lut_spec(self, func: str) -> LutSpec:
        """sigmoid → UQ0.A (unsigned gates), tanh → Q0.(A−1)."""
        a = self.spec.activations
        out = fixed.gate_format(a) if func == "sigmoid" else fixed.unit_format(a)
        return LutSpec(func, self.spec.lut_bits, out, self.spec.lut_interp)


class IntBackend(_Quantised):
    """The bit-exact integer reference (NumPy int64). :attr:`params`: key → (int words, QFormat) of every quantised
    parameter; :attr:`traces`: key → (int words, frac) of every recorded tensor, in execution order."""

    records = True

    def __init__(self, plan, params: dict[str, tuple[np.ndarray, QFormat]] | None = None) -> None:
        super().__init__(plan)
        self.params: dict[str, tuple[np.ndarray, QFormat]] = dict(params or {})  # given: an export's words
        self.traces: dict[str, tuple[np.ndarray, int]] = {}
        self.unsigned: set[str] = set()  # traced tensors of unsigned words
        self.saturated: dict[str, int] = {}  # words clipped per tensor key (a range beyond the calibration's)
        self._tables: dict[str, np.ndarray] = {}

    # ---------------------------------------------------------------- parameters
    def _weight(self, key: str, w) -> tuple[np.ndarray, QFormat]:
        if key not in self.params:
            wf = _np64(w)
            fmt = fixed.weight_format(float(np.max(np.abs(wf))) if wf.size else 0.0, self.spec.weights)
            self.params[key] = (fixed.quantize(wf, fmt), fmt)
        return self.params[key]

    def _bias(self, key: str, b, acc_frac: int) -> np.ndarray:
        """The bias at the accumulator's fraction (its word shifted left, exactly)."""
        if key not in self.params:
            bf = _np64(b)
            fmt = fixed.bias_format(float(np.max(np.abs(bf))) if bf.size else 0.0, acc_frac)
            self.params[key] = (fixed.quantize(bf, fmt), fmt)
        q, fmt = self.params[key]
        if fmt.frac > acc_frac:
            raise ValueError(f"bias {key!r} was quantised at fraction {fmt.frac} for another accumulator")
        return fixed.round_shift(q, fmt.frac - acc_frac)

    # ---------------------------------------------------------------- operations
    def _sat(self, v: np.ndarray, fmt: QFormat, key: str) -> np.ndarray:
        out = fixed.saturate(v, fmt)
        n = int(np.count_nonzero(out != v))
        if n:
            self.saturated[key] = self.saturated.get(key, 0) + n
        return out

    def input(self, x, key: str) -> Fx:
        fmt = self.fmt(key, "act")
        raw = np.floor(np.clip(np.ldexp(_np64(x), fmt.frac) + 0.5, -2.0**62, 2.0**62)).astype(np.int64)
        return Fx(self._sat(raw, fmt, key), fmt.frac)

    def linear(self, x: Fx, wkey: str, w, bkey: str | None, b) -> Fx:
        wq, wf = self._weight(wkey, w)
        acc = np.matmul(x.data, wq.T)
        frac = x.frac + wf.frac
        if b is not None:
            acc = acc + self._bias(bkey, b, frac)
        fixed.check_range(acc, 0, f"the accumulator of {wkey}")
        return Fx(acc, frac)

    def linear_many(self, x: Fx, items) -> list[Fx]:
        return [self.linear(x, *it) for it in items]

    def conv1d(self, x: Fx, wkey: str, w, bkey: str | None, b, dilation: int, padding: int, groups: int) -> Fx:
        wq, wf = self._weight(wkey, w)  # (Cout, Cin/groups, K)
        bsz, t, cin = x.data.shape
        cout, cin_g, k = wq.shape
        xp = np.zeros((bsz, t + 2 * padding, cin), dtype=np.int64)
        xp[:, padding:padding + t] = x.data
        t_out = t + 2 * padding - dilation * (k - 1)
        wg = wq.reshape(groups, cout // groups, cin_g, k)
        acc = np.zeros((bsz, t_out, groups, cout // groups), dtype=np.int64)
        for j in range(k):
            tap = xp[:, j * dilation:j * dilation + t_out].reshape(bsz, t_out, groups, cin_g)
            acc += np.einsum("btgi,goi->btgo", tap, wg[..., j])
        acc = acc.reshape(bsz, t_out, cout)
        frac = x.frac + wf.frac
        if b is not None:
            acc = acc + self._bias(bkey, b, frac)
        fixed.check_range(acc, 0, f"the accumulator of {wkey}")
        return Fx(acc, frac)

    def _align(self, a: Fx, b: Fx) -> tuple[np.ndarray, np.ndarray, int]:
        f = max(a.frac, b.frac)
        return fixed.round_shift(a.data, a.frac - f), fixed.round_shift(b.data, b.frac - f), f

    def add(self, a: Fx, b: Fx) -> Fx:
        x, y, f = self._align(a, b)
        return Fx(x + y, f)

    def sub(self, a: Fx, b: Fx) -> Fx:
        x, y, f = self._align(a, b)
        return Fx(x - y, f)

    def mul(self, a: Fx, b: Fx) -> Fx:
        p = a.data * b.data
        fixed.check_range(p, 0, "a product")
        return Fx(p, a.frac + b.frac)

    def relu(self, a: Fx) -> Fx:
        return Fx(np.maximum(a.data, 0), a.frac)

    def requant(self, a: Fx, key: str, kind: str) -> Fx:
        fmt = self.fmt(key, kind)
        return Fx(self._sat(fixed.round_shift(a.data, a.frac - fmt.frac), fmt, key), fmt.frac)

    def lut(self, a: Fx, func: str) -> Fx:
        spec = self.lut_spec(func)
        if func not in self._tables:
            given = self.params.get(f"lut.{func}")
            self._tables[func] = given[0] if given is not None else fixed.lut_table(spec)
            self.params[f"lut.{func}"] = (self._tables[func], spec.out)
        return Fx(fixed.lut_eval(a.data, a.frac, spec, self._tables[func]), spec.out.frac, spec.out.signed)

    def hardswish(self, a: Fx, key: str) -> Fx:
        """``v · clip(v + 3, 0, 6) · c6`` (c6 = 1/6 in :data:`HARDSWISH_SCALE`), requantised to ``key``."""
        three = np.int64(3) << np.int64(a.frac) if a.frac >= 0 else np.int64(3) >> np.int64(-a.frac)
        t = np.clip(a.data + three, 0, 2 * three)
        c6 = int(fixed.quantize(np.array(1.0 / 6.0), HARDSWISH_SCALE))
        p = a.data * t
        fixed.check_range(p, 16, "hardswish")
        return self.requant(Fx(p * c6, 2 * a.frac + HARDSWISH_SCALE.frac), key, "act")

    def polar(self, x: Fx, key: str) -> Fx:
        """[I, Q, |x|, |x|³, Q/|x|, I/|x|] of int I/Q words (|x| = 0: sin = cos = 0), requantised to ``key``:
        |x| = (isqrt(4(I² + Q²)) + 1) >> 1 (rounded half up, at the input's fraction); |x|³ through the pre word
        ``.amp2``; sin/cos = floor((2·(v << f) + |x|) / (2|x|)) at Q0.(A−1) (rounded half up)."""
        i, q = x.data[..., 0], x.data[..., 1]
        fx = x.frac
        p = i * i + q * q
        amp = (fixed.isqrt(p << 2) + 1) >> 1  # at fx
        a_fx = Fx(amp, fx)
        amp_w = self.requant(a_fx, f"{key}.amp", "act")
        amp2 = self.requant(self.mul(a_fx, a_fx), f"{key}.amp2", "pre")
        amp3 = self.requant(self.mul(amp2, a_fx), f"{key}.amp3", "act")
        unit = fixed.unit_format(self.spec.activations)
        den = np.where(amp == 0, 1, amp)
        trig = []
        for v in (q, i):
            num = v << np.int64(unit.frac)
            s = np.where(amp == 0, 0, np.floor_divide(2 * num + den, 2 * den))
            trig.append(Fx(fixed.saturate(s, unit), unit.frac))
        parts = [Fx(i[..., None], fx), Fx(q[..., None], fx), Fx(amp_w.data[..., None], amp_w.frac),
                 Fx(amp3.data[..., None], amp3.frac), Fx(trig[0].data[..., None], unit.frac),
                 Fx(trig[1].data[..., None], unit.frac)]
        for name, v in zip(("amp", "amp3", "sin", "cos"), parts[2:]):
            self.trace(f"{key}.{name}", Fx(v.data[..., 0], v.frac))
        return self.concat(parts, key)

    def concat(self, parts: list[Fx], key: str) -> Fx:
        fmt = self.fmt(key, "act")
        out = [self._sat(fixed.round_shift(p.data, p.frac - fmt.frac), fmt, key) for p in parts]
        return Fx(np.concatenate(out, axis=-1), fmt.frac)

    def zeros_unit(self, like: Fx, shape) -> Fx:
        return Fx(np.zeros(shape, dtype=np.int64), fixed.unit_format(self.spec.activations).frac)

    def stack(self, parts: list[Fx], dim: int) -> Fx:
        fr = {p.frac for p in parts}
        if len(fr) != 1:
            raise ValueError(f"cannot stack words of fractions {sorted(fr)}")
        return Fx(np.stack([p.data for p in parts], axis=dim), fr.pop(), all(p.signed for p in parts))

    def trace(self, key: str, v: Fx) -> None:
        self.traces[key] = (v.data, v.frac)
        if not v.signed:
            self.unsigned.add(key)

    def output(self, v: Fx):
        return fixed.dequantize(v.data, v.frac)


class FakeBackend(_Quantised):
    """Fake quantisation in torch (module docstring); the model's dtype decides float32 (training) or float64."""

    def __init__(self, plan) -> None:
        super().__init__(plan)
        self._w: dict[str, tuple[torch.Tensor, int]] = {}
        self._tables: dict[tuple[str, str], torch.Tensor] = {}

    @staticmethod
    def _fq(v: torch.Tensor, fmt: QFormat) -> torch.Tensor:
        """Round half up to ``fmt`` and saturate; straight-through gradient inside the range, none outside."""
        return _FakeQuant.apply(v, fmt.frac, float(fmt.min_int), float(fmt.max_int))

    def _weight(self, key: str, w: torch.Tensor) -> tuple[torch.Tensor, int]:
        if key not in self._w:
            fmt = fixed.weight_format(float(w.detach().abs().max()) if w.numel() else 0.0, self.spec.weights)
            self._w[key] = (self._fq(w, fmt), fmt.frac)
        return self._w[key]

    def _bias(self, key: str, b: torch.Tensor, acc_frac: int) -> torch.Tensor:
        k = f"{key}@{acc_frac}"
        if k not in self._w:
            fmt = fixed.bias_format(float(b.detach().abs().max()) if b.numel() else 0.0, acc_frac)
            self._w[k] = (self._fq(b, fmt), fmt.frac)
        return self._w[k][0]

    def linear_many(self, x: Fx, items) -> list[Fx]:
        """:meth:`linear` of several weight blocks on one input as one matrix product (the blocks' fake-quantised
        weights and biases concatenated; each output block keeps its own fraction)."""
        key = "|".join(it[0] for it in items)
        if key not in self._w:
            ws, fracs, bs = [], [], []
            for wkey, w, bkey, b in items:
                wq, wf = self._weight(wkey, w)
                ws.append(wq)
                fracs.append(x.frac + wf)
                bs.append(None if b is None else self._bias(bkey, b, x.frac + wf))
            bias = None if any(b is None for b in bs) else torch.cat(bs)
            self._w[key] = (torch.cat(ws, 0), fracs, bias)
        wcat, fracs, bias = self._w[key]
        dt = x.data.dtype
        y = torch.matmul(x.data, wcat.to(dt).t())
        if bias is not None:
            y = y + bias.to(dt)
        sizes = [it[1].shape[0] for it in items]
        return [Fx(part, f) for part, f in zip(torch.split(y, sizes, dim=-1), fracs)]

    def input(self, x, key: str) -> Fx:
        fmt = self.fmt(key, "act")
        x = torch.as_tensor(x)
        return Fx(self._fq(x, fmt).detach(), fmt.frac)

    def linear(self, x: Fx, wkey: str, w, bkey: str | None, b) -> Fx:
        wq, wf = self._weight(wkey, w)
        y = torch.matmul(x.data, wq.to(x.data.dtype).t())
        frac = x.frac + wf
        if b is not None:
            y = y + self._bias(bkey, b, frac).to(x.data.dtype)
        return Fx(y, frac)

    def conv1d(self, x: Fx, wkey: str, w, bkey: str | None, b, dilation: int, padding: int, groups: int) -> Fx:
        wq, wf = self._weight(wkey, w)
        frac = x.frac + wf
        dt = x.data.dtype
        bias = None if b is None else self._bias(bkey, b, frac).to(dt)
        y = torch.nn.functional.conv1d(x.data.transpose(1, 2), wq.to(dt), bias, padding=padding,
                                       dilation=dilation, groups=groups)
        return Fx(y.transpose(1, 2), frac)

    def add(self, a: Fx, b: Fx) -> Fx:
        return Fx(a.data + b.data, max(a.frac, b.frac))

    def sub(self, a: Fx, b: Fx) -> Fx:
        return Fx(a.data - b.data, max(a.frac, b.frac))

    def mul(self, a: Fx, b: Fx) -> Fx:
        return Fx(a.data * b.data, a.frac + b.frac)

    def relu(self, a: Fx) -> Fx:
        return Fx(torch.relu(a.data), a.frac)

    def requant(self, a: Fx, key: str, kind: str) -> Fx:
        fmt = self.fmt(key, kind)
        return Fx(self._fq(a.data, fmt), fmt.frac)

    def _table(self, func: str, device) -> torch.Tensor:
        k = (func, str(device))
        if k not in self._tables:
            self._tables[k] = torch.from_numpy(fixed.lut_table(self.lut_spec(func))).to(device)
        return self._tables[k]

    def lut(self, a: Fx, func: str) -> Fx:
        spec = self.lut_spec(func)
        return Fx(_FakeLut.apply(a.data, a.frac, spec, self._table(func, a.data.device)), spec.out.frac)

    def hardswish(self, a: Fx, key: str) -> Fx:
        c6 = float(fixed.quantize(np.array(1.0 / 6.0), HARDSWISH_SCALE)) * HARDSWISH_SCALE.lsb
        v = a.data
        t = torch.clamp(v + 3.0, 0.0, 6.0)
        return self.requant(Fx(v * t * c6, 2 * a.frac + HARDSWISH_SCALE.frac), key, "act")

    def polar(self, x: Fx, key: str) -> Fx:
        """The integer reference's features (IntBackend.polar) on the input words; the input needs no gradient."""
        ib = IntBackend(self.plan)
        xi = torch.round(x.data.detach().double() * (2.0 ** x.frac)).to(torch.int64).cpu().numpy()
        f = ib.polar(Fx(xi, x.frac), key)
        return Fx(torch.from_numpy(fixed.dequantize(f.data, f.frac)).to(x.data.dtype).to(x.data.device), f.frac)

    def concat(self, parts: list[Fx], key: str) -> Fx:
        fmt = self.fmt(key, "act")
        return Fx(torch.cat([self._fq(p.data, fmt) for p in parts], dim=-1), fmt.frac)

    def zeros_unit(self, like: Fx, shape) -> Fx:
        return Fx(torch.zeros(shape, dtype=like.data.dtype, device=like.data.device),
                  fixed.unit_format(self.spec.activations).frac)

    def stack(self, parts: list[Fx], dim: int) -> Fx:
        return Fx(torch.stack([p.data for p in parts], dim=dim), parts[0].frac)

    def trace(self, key: str, v: Fx) -> None:
        pass

    def output(self, v: Fx):
        return v.data


class _FakeQuant(torch.autograd.Function):
    """Forward: ``clip(floor(v · 2^frac + 1/2), lo, hi) · 2^-frac``; backward: the gradient where v lies in the
    word's range, 0 where it saturates (straight-through)."""

    @staticmethod
    def forward(ctx, v, frac: int, lo: float, hi: float):
        scale = 2.0 ** frac
        inside = (v >= lo / scale) & (v <= hi / scale)
        ctx.save_for_backward(inside)
        return torch.clamp(torch.floor(v * scale + 0.5), lo, hi) / scale

    @staticmethod
    def backward(ctx, grad):
        (inside,) = ctx.saved_tensors
        return grad * inside, None, None, None


class _FakeLut(torch.autograd.Function):
    """Forward: the integer table lookup of :func:`~dpd_desktop.quant.fixed.lut_lookup` on the word ``v``; backward: the exact function's
    derivative at v (straight-through)."""

    @staticmethod
    def forward(ctx, v, frac: int, spec: LutSpec, table):
        p = torch.round(v.double() * (2.0 ** frac)).to(torch.int64)
        y = fixed.lut_lookup(p, frac, spec, table).to(v.dtype) * spec.out.lsb
        f = torch.sigmoid(v) if spec.func == "sigmoid" else torch.tanh(v)
        ctx.save_for_backward(f * (1 - f) if spec.func == "sigmoid" else 1 - f * f)
        return y

    @staticmethod
    def backward(ctx, grad):
        (d,) = ctx.saved_tensors
        return grad * d, None, None, None


def _np64(t) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        return t.detach().cpu().double().numpy()
    return np.asarray(t, dtype=np.float64)


