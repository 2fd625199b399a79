"""What a quantised model is: the bit widths (config.py :class:`~dpd_desktop.config.QuantSpec`) and every activation's format (:class:`QuantPlan`).

Activation formats come from a calibration: the float model (float64, quant/backends.py ``FloatBackend``) runs over
the training split cut into the dataset's ``nperseg`` evaluation segments, each from a zero state, and every tensor
that will be stored gets a format from what it showed there: an A-bit activation the format of least rounding plus
saturation error over its magnitude histogram (``mse_act_format``), the interface and 32-bit words
``act_format(max|v|)`` (quant/fixed.py; 1/8 headroom, nothing saturates on the calibration data).
Weight and bias formats are not in the plan: they follow from the weights by quant/fixed.py's rules whenever a
model is quantised (so a fine-tuned model's weights get their own).

Tensor kinds: ``act`` (an A-bit stored activation), ``pre`` (a 32-bit pre-activation word), ``unit`` (Q0.(A−1):
gates, table outputs, the GRU state; no calibration). The model's input ``x`` and its output are the interface
words: ``io_bits`` wide (default 16, the converters' side; ``io_bits = activations`` quantises them like the rest).

16-bit I/O by default: an 8-bit interface word alone sets an adjacent-channel floor worse than the float DPDs' ACLR
(benchmarks/results/2026-12-04-notes-core.md), and the samples come from and go to 12-16-bit converters.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import torch

from . import fixed
from .backends import FloatBackend
from ..config import BITS_RANGE, LUT_BITS_RANGE, LUT_INTERPS, QuantError, QuantSpec
from .fixed import QFormat

__all__ = ["QuantSpec", "QuantPlan", "calibrate", "BITS_RANGE", "LUT_BITS_RANGE", "LUT_INTERPS", "QuantError"]

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


def plan_from_ranges(spec: QuantSpec, ranges: Mapping[str, tuple[str, float]], calibration: str,
                     io_keys=(), hists: Mapping[str, np.ndarray] | None = None) -> QuantPlan:
    """Formats from calibrated ranges; ``io_keys`` (the input and the output) get ``spec.io_bits``. An ``act``
    tensor with a histogram in ``hists`` gets the format of least error over it (quant/fixed.py
    ``mse_act_format``); the interface words and the 32-bit ``pre`` words keep the range rule (nothing saturates
    on the calibration data)."""
    formats, kinds, maxima = {}, {}, {}
    for key, (kind, m) in ranges.items():
        if kind == "unit":
            continue
        if key in io_keys:
            kind = "io"
        bits = fixed.PRE_BITS if kind == "pre" else spec.io_bits if kind == "io" else spec.activations
        if kind == "act" and hists is not None and key in hists:
            formats[key] = fixed.mse_act_format(hists[key], float(m), bits)
        else:
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
    return plan_from_ranges(spec, be.ranges, what, io_keys=("x", graph.output), hists=be.hists)
