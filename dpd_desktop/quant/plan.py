"""What a quantised model is: the bit widths (:class:`QuantSpec`) and every activation's format (:class:`QuantPlan`).

Activation formats come from a calibration: the float model (float64, quant/backends.py ``FloatBackend``) runs over
the training split cut into the dataset's ``nperseg`` evaluation segments, each from a zero state, and every tensor
that will be stored gets ``act_format(max|v|)`` (quant/fixed.py; 1/8 headroom) of the range it showed there.
Weight and bias formats are not in the plan: they follow from the weights by quant/fixed.py's rules whenever a
model is quantised (so a fine-tuned model's weights get their own).

Tensor kinds: ``act`` (an A-bit stored activation), ``pre`` (a 32-bit pre-activation word), ``unit`` (Q0.(A−1):
gates, table outputs, the GRU state; no calibration).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import torch

from . import fixed
from .backends import FloatBackend
from .fixed import QFormat

__all__ = ["QuantSpec", "QuantPlan", "calibrate", "BITS_RANGE", "LUT_BITS_RANGE", "LUT_INTERPS", "QuantError"]

BITS_RANGE = (4, 16)
LUT_BITS_RANGE = (4, 14)
LUT_INTERPS = ("linear", "nearest")


class QuantError(ValueError):
    """A quantisation setting is out of range or a plan cannot be read; the message names the field."""


@dataclass(frozen=True)
class QuantSpec:
    """Bit widths: ``weights`` W and ``activations`` A (4–16), the tables' ``lut_bits`` L (4–14: 2^L + 1
    entries) and ``lut_interp`` ("linear" or "nearest")."""

    weights: int = 16
    activations: int = 16
    lut_bits: int = 10
    lut_interp: str = "linear"

    def check(self) -> "QuantSpec":
        for name, (lo, hi) in (("weights", BITS_RANGE), ("activations", BITS_RANGE), ("lut_bits", LUT_BITS_RANGE)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise QuantError(f"{name}: expected an integer from {lo} to {hi} bits, got {v!r}")
        if self.lut_interp not in LUT_INTERPS:
            raise QuantError(f"lut_interp: expected one of {', '.join(LUT_INTERPS)}, got {self.lut_interp!r}")
        return self

    @property
    def label(self) -> str:
        """``W16A16`` (``W8A8-L8n`` when the tables are not the default 10-bit linear ones)."""
        tail = "" if (self.lut_bits, self.lut_interp) == (10, "linear") else \
            f"-L{self.lut_bits}{'n' if self.lut_interp == 'nearest' else ''}"
        return f"W{self.weights}A{self.activations}{tail}"

    def to_dict(self) -> dict[str, Any]:
        return {"weights": self.weights, "activations": self.activations, "lut_bits": self.lut_bits,
                "lut_interp": self.lut_interp}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "QuantSpec":
        known = {"weights", "activations", "lut_bits", "lut_interp"}
        odd = sorted(set(d) - known)
        if odd:
            raise QuantError(f"unknown quantisation field {odd[0]!r} (known: {', '.join(sorted(known))})")
        return cls(**dict(d)).check()


@dataclass
class QuantPlan:
    """The spec and the activation formats by tensor key; ``ranges``: the calibration's max |v| per key."""

    spec: QuantSpec
    formats: dict[str, QFormat]
    ranges: dict[str, float] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    calibration: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec.to_dict(), "calibration": self.calibration,
                "formats": {k: {**f.to_dict(), "kind": self.kinds.get(k), "range": self.ranges.get(k)}
                            for k, f in self.formats.items()}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "QuantPlan":
        try:
            spec = QuantSpec.from_dict(d["spec"])
            fm = d["formats"]
            return cls(spec, {k: QFormat.from_dict(v) for k, v in fm.items()},
                       {k: float(v["range"]) for k, v in fm.items() if v.get("range") is not None},
                       {k: v.get("kind") for k, v in fm.items()}, str(d.get("calibration", "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise QuantError(f"not a quantisation plan ({type(exc).__name__}: {exc})") from exc


def plan_from_ranges(spec: QuantSpec, ranges: Mapping[str, tuple[str, float]], calibration: str) -> QuantPlan:
    formats, kinds, maxima = {}, {}, {}
    for key, (kind, m) in ranges.items():
        if kind == "unit":
            continue
        bits = fixed.PRE_BITS if kind == "pre" else spec.activations
        formats[key] = fixed.act_format(float(m), bits)
        kinds[key] = kind
        maxima[key] = float(m)
    return QuantPlan(spec, formats, maxima, kinds, calibration)


def calibrate(graph, segments: np.ndarray, spec: QuantSpec, what: str, batch: int = 64) -> QuantPlan:
    """Run ``graph`` in float64 over ``segments`` (S, N, 2) and choose every activation's format.

    Args:
        graph: a lowered model (quant/lower.py).
        segments: the calibration input, float (S, N, 2).
        spec: the bit widths.
        what: the calibration data in words (recorded in the plan: "training split of DPA_200MHz, 9 segments …").
    """
    spec.check()
    be = FloatBackend()
    xs = torch.from_numpy(np.ascontiguousarray(segments, dtype=np.float64))
    with torch.no_grad():
        for i in range(0, xs.shape[0], batch):
            graph.run(be, xs[i:i + batch])
    return plan_from_ranges(spec, be.ranges, what)
