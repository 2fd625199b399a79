"""Training-data augmentation (``augment = "phase"``): each epoch turns the training series by a phase ramp.

A baseband PA is equivariant to a common phase turn, PA(x·e^{jθ}) ≈ PA(x)·e^{jθ} (the carrier's phase is
arbitrary), and an OFDM input turned by θ is another draw of the same signal: turned copies of the training input are
new, in-distribution inputs for a DPD trained through a frozen PA model (a learned PA model is equivariant only
approximately: Arena v6's frozen PA to about −46 dB, benchmarks/results/2026-12-05-arena-aug-h100).

In epoch e the input and the target series ``(N, 2)`` are both multiplied by e^{jφ(n)}, φ(n) = θ_e + 2π·d_e·n/N
(n = 0 … N−1, θ_e uniform in [0, 2π), d_e = ±1), drawn from a generator seeded by (seed, e) alone: the global RNG
stream is untouched (with ``"none"`` a run is bitwise what it was) and a resumed run turns its epochs as the
uninterrupted one does. One turn over the series gives the frames of one batch different phases; it shifts the
spectrum by fs/N (39 kHz for APA_200MHz_b's 25,307 training samples at 983.04 MS/s), far inside any channel's edge. For a PA step the target is the measured output:
turning it too assumes the equivariance of the measured PA.

The series are turned in place (their device addresses stay: a captured CUDA graph and the fused step gather from
them) from float64 copies of the originals, the phasors computed on the CPU: the CPU and the GPU of one machine give
the same float32 series. Validation and test data are never turned.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["PhaseRamp", "make_augment"]

_SEED_STRIDE = 1_000_003  # (seed, epoch) → seed·stride + epoch: distinct for epochs below the stride, no overflow


class PhaseRamp:
    """Turns ``x`` and ``y`` (``(N, 2)`` float32 tensors, the loader's training series, any device) in place by the
    phase ramp of an epoch (module docstring); ``seed`` is the run's seed."""

    def __init__(self, x: Tensor, y: Tensor, seed: int) -> None:
        if x.shape != y.shape or x.ndim != 2 or x.shape[1] != 2:
            raise ValueError(f"expected input and target series of one shape (N, 2), got {tuple(x.shape)} and "
                             f"{tuple(y.shape)}")
        self.x, self.y, self.seed = x, y, int(seed)
        self._x0 = x.detach().to(torch.float64)
        self._y0 = y.detach().to(torch.float64)
        n = int(x.shape[0])
        self._ramp = torch.arange(n, dtype=torch.float64) * (2.0 * math.pi / max(n, 1))  # 2π·n/N, on the CPU

    def phase(self, epoch: int) -> tuple[float, int]:
        """``(θ_e [rad], d_e)`` of epoch ``epoch``: the start phase in [0, 2π) and the ramp's direction, ±1."""
        g = torch.Generator().manual_seed((self.seed * _SEED_STRIDE + int(epoch)) % 2**63)
        u = torch.rand(2, dtype=torch.float64, generator=g)
        return float(u[0]) * 2.0 * math.pi, 1 if float(u[1]) < 0.5 else -1

    def phasor(self, epoch: int) -> tuple[Tensor, Tensor]:
        """``(cos φ, sin φ)``, each ``(N,)`` float64 on the CPU: the turn of every sample in epoch ``epoch``."""
        theta, d = self.phase(epoch)
        phi = self._ramp * d + theta
        return torch.cos(phi), torch.sin(phi)

    def apply(self, epoch: int) -> None:
        """Turn the series for epoch ``epoch`` (queued on the current stream, after the work already queued there)."""
        c, s = (t.to(self.x.device) for t in self.phasor(epoch))
        for dst, src in ((self.x, self._x0), (self.y, self._y0)):
            i, q = src[:, 0], src[:, 1]
            dst.copy_(torch.stack((i * c - q * s, i * s + q * c), dim=1))


def make_augment(kind: str, loader, seed: int) -> PhaseRamp | None:
    """The augmentation ``kind`` (config.AUGMENTS) of ``loader``'s training series (``loader.series()``); None for
    ``"none"``. Raises ValueError for an unknown kind."""
    if kind == "none":
        return None
    if kind == "phase":
        return PhaseRamp(*loader.series(), seed)
    raise ValueError(f"unknown augmentation {kind!r}")
