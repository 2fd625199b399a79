"""The training loss of a run: the reference's MSE/L1 (``loss``), or that loss on a window of each frame and/or with
an output-power term and an out-of-band term (``loss_window``, ``power_weight``, ``oob_weight``, ``oob_side``).
:func:`make_criterion` returns ``nn.MSELoss()`` / ``nn.L1Loss()`` themselves for the default settings (bitwise the
reference), else a :class:`FrameLoss`:

    loss = base(ŷ_w, t_w) + w_p · mean(t_w²) · ΔP² + w_o · O,
    O = Σ_{k ∉ main} |E_k|² / numel(e)  (side "both"),
    O = 2·max(Σ_{f_k < −B/2} |E_k|², Σ_{f_k ≥ B/2} |E_k|²) / numel(e)  (side "worse", over the batch),
    ΔP = 10·log10(Σ ŷ_w² / Σ t_w²) [dB],   E = DFT(h·(e_I + j·e_Q)) / sqrt(L·mean(h²)),   e = ŷ_w − t_w

over the batch; ``ŷ_w = ŷ[:, a:b]``, ``[a, b)`` the window of L samples (OpenDPD 2.4.2's Arena scores the middle 100
samples of 200-sample frames), h the periodic Hann window of L samples. The power term holds the DPD at the target's
output power instead of backing off (the ±0.5 dB gate of OpenDPD's Arena); w_p = 1e-4 makes a 0.5 dB power error
cost as much as an error vector at −46 dB. The out-of-band term is the share of the squared error whose DFT bins lie
outside the main channel (f < −B/2 or f ≥ B/2, f = k·fs/L folded to [−fs/2, fs/2)), so the error that falls in the
adjacent channels (ACLR) counts (1 + w_o) times and the in-band error (EVM) about once. The Hann window (the ACLR's
Welch window, metrics/profiles.py) keeps in-band error from leaking past the bin next to the band edge; the scale
1/(L·mean(h²)) makes the terms of all bins sum to the MSE for white error (a tone on bin k: 2/3 of its power on k,
1/6 on each neighbour). The ACLR that counts is the worse side's: side ``worse`` puts the whole term on the side
whose out-of-band error is larger in the batch (twice it, so that balanced sides cost what ``both`` costs), leaving the
better side to the base loss.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from ..config import OOB_SIDES, ConfigError

__all__ = ["FrameLoss", "base_criterion", "make_criterion"]


class FrameLoss(nn.Module):
    """``base`` (an ``nn.MSELoss``/``nn.L1Loss``, mean) on frame samples ``window`` = (start, stop) (None: all), plus
    the power term with weight ``power_weight`` and the out-of-band term with weight ``oob_weight`` on a main channel
    ``band`` = bw_main / fs wide (module docstring). Inputs ``(B, T, 2)``; returns a 0-dim tensor.

    ``side``: ``"both"`` or ``"worse"`` (module docstring).

    Raises ValueError: ``oob_weight`` without ``band`` in (0, 1], or an unknown ``side``."""

    def __init__(self, base: nn.Module, window: tuple[int, int] | None = None, power_weight: float = 0.0,
                 oob_weight: float = 0.0, band: float | None = None, side: str = "both") -> None:
        super().__init__()
        self.base = base
        self.window = None if window is None else (int(window[0]), int(window[1]))
        self.power_weight = float(power_weight)
        self.oob_weight = float(oob_weight)
        if self.oob_weight and not (band is not None and 0 < band <= 1):
            raise ValueError(f"the out-of-band term needs the main channel's width as a fraction of fs in (0, 1], "
                             f"got {band!r}")
        if side not in OOB_SIDES:
            raise ValueError(f"the out-of-band side must be one of {OOB_SIDES}, got {side!r}")
        self.band, self.side = band, side
        self._masks: dict[tuple[int, str], tuple[Tensor, Tensor, Tensor, Tensor]] = {}

    def out_of_band_mask(self, n: int, device) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``(lower, upper, outside, h)``, each ``(n,)`` float32: 1 for the DFT bins of an n-sample window below /
        above / outside the main channel (else 0), and the periodic Hann window scaled by 1/sqrt(n·mean(h²)) (module
        docstring)."""
        key = (n, str(device))
        if key not in self._masks:  # built at the first (eager) step, before any CUDA graph capture
            f = torch.fft.fftfreq(n, dtype=torch.float64)  # cycles/sample, in [-1/2, 1/2)
            half = self.band / 2
            lower, upper = (f < -half), (f >= half)
            h = torch.hann_window(n, periodic=True, dtype=torch.float64)
            h = h / torch.sqrt(n * h.square().mean())
            self._masks[key] = tuple(t.to(device=device, dtype=torch.float32) for t in (lower, upper, lower | upper, h))
        return self._masks[key]

    def out_of_band(self, out: Tensor, target: Tensor) -> Tensor:
        """The out-of-band share of the MSE of ``out`` against ``target`` ``(B, L, 2)`` (module docstring)."""
        e = out - target
        lower, upper, outside, hann = self.out_of_band_mask(e.shape[1], e.device)
        spec = torch.fft.fft(torch.complex(e[..., 0] * hann, e[..., 1] * hann), dim=1)
        power = spec.real.square() + spec.imag.square()
        if self.side == "both":
            return (power * outside).sum() / e.numel()
        return 2.0 * torch.maximum((power * lower).sum(), (power * upper).sum()) / e.numel()

    def forward(self, out: Tensor, target: Tensor) -> Tensor:
        if self.window is not None:
            a, b = self.window
            out, target = out[:, a:b], target[:, a:b]
        loss = self.base(out, target)
        if self.power_weight:
            p_t = target.square().sum()
            ratio_db = 10.0 * torch.log10(out.square().sum() / p_t)
            loss = loss + self.power_weight * (p_t / target.numel()) * ratio_db.square()
        if self.oob_weight:
            loss = loss + self.oob_weight * self.out_of_band(out, target)
        return loss

    def describe(self) -> str:
        """The loss in plain words, for the run log."""
        parts = [f"{'MSE' if isinstance(self.base, nn.MSELoss) else 'L1'}"
                 + (f" on frame samples [{self.window[0]}, {self.window[1]})" if self.window else "")]
        if self.oob_weight:
            side = "both sides" if self.side == "both" else "worse side"
            parts.append(f"out-of-band term w = {self.oob_weight:g} ({side}, main channel {self.band:g}·fs)")
        if self.power_weight:
            parts.append(f"output-power term w = {self.power_weight:g}")
        return ", ".join(parts)

    def extra_repr(self) -> str:
        return (f"window={self.window}, power_weight={self.power_weight}, oob_weight={self.oob_weight}, "
                f"band={self.band}, side={self.side}")


def make_criterion(cfg, spec=None) -> nn.Module:
    """The training loss of ``cfg`` (an ExperimentConfig) on a dataset of ``spec`` (a DatasetSpec; needed by the
    out-of-band term only): module docstring.

    Raises ConfigError (field ``oob_weight``): the out-of-band term without the spec's sample rate and main-channel
    bandwidth, or a main channel wider than the sample rate."""
    base = nn.MSELoss() if cfg.loss == "l2" else nn.L1Loss()
    if cfg.loss_window is None and not cfg.power_weight and not cfg.oob_weight:
        return base
    band = None
    if cfg.oob_weight:
        fs, bw = getattr(spec, "sample_rate_hz", None), getattr(spec, "bw_main_hz", None)
        if not fs or not bw:
            raise ConfigError("oob_weight", "the out-of-band term needs the dataset's input_signal_fs and bw_main_ch "
                              "(spec.json)")
        if not 0 < bw <= fs:
            raise ConfigError("oob_weight", f"the main channel ({bw:g} Hz) must lie within the sample rate "
                              f"({fs:g} Hz)")
        band = bw / fs
    return FrameLoss(base, tuple(cfg.loss_window) if cfg.loss_window is not None else None, cfg.power_weight,
                     cfg.oob_weight, band, cfg.oob_side)


def base_criterion(criterion: nn.Module) -> nn.Module:
    """The plain MSE/L1 of a training loss (what val/test losses are computed with: whole segments, no window)."""
    return criterion.base if isinstance(criterion, FrameLoss) else criterion
