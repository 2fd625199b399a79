"""The loop's reference waveform x and its channel layout.

``"demo"``: the synthetic 4-carrier OFDM of data/synthetic.py (4 × 40 MHz at fs 640 MHz, 160 MHz occupied,
256-QAM), its train input of ``signal_samples`` samples; a dataset path: its train input (the first
``signal_samples`` samples). The waveform is played periodically, so its spectrum should have no splatter at the
wrap-around: the demo's band mask is applied over the whole record, which makes the record periodic up to the cut
(a cut at a multiple of its OFDM frame keeps it exact).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..data import load_dataset, make_demo_dataset

__all__ = ["LoopSignal", "load_signal"]


@dataclass(frozen=True)
class LoopSignal:
    """``x`` complex128 (N,) with peak 1; ``sample_rate_hz``, ``bw_main_hz``, ``n_sub_ch`` the channel layout;
    ``dataset`` the loaded dataset (for the record's dataset reference); ``source`` the words it came from."""

    x: np.ndarray
    sample_rate_hz: float
    bw_main_hz: float
    n_sub_ch: int
    source: str
    dataset: Any = None

    def spec_like(self, nperseg: int):
        """An object with the attributes the metric profiles read (``sample_rate_hz``, ``bw_main_hz``,
        ``n_sub_ch``, ``nperseg``)."""
        return _Spec(self.sample_rate_hz, self.bw_main_hz, self.n_sub_ch, int(nperseg))

    def describe(self) -> dict[str, Any]:
        return {"source": self.source, "samples": int(self.x.size), "sample_rate_hz": self.sample_rate_hz,
                "bw_main_hz": self.bw_main_hz, "n_sub_ch": self.n_sub_ch,
                "papr_db": float(10 * np.log10(np.max(np.abs(self.x) ** 2) / np.mean(np.abs(self.x) ** 2)))}


@dataclass(frozen=True)
class _Spec:
    sample_rate_hz: float
    bw_main_hz: float
    n_sub_ch: int
    nperseg: int


def load_signal(signal: str, samples: int, seed: int = 0) -> LoopSignal:
    """The reference waveform (module docstring). Raises ValueError / DatasetError naming the dataset when it
    cannot be read, lacks the channel layout (sample rate, bandwidth, carriers) or is shorter than ``samples``."""
    if signal == "demo":
        ds = make_demo_dataset(seed=seed, n_train=int(samples), n_val=64, n_test=64)
        source = f"demo (seed {seed})"
    else:
        ds = load_dataset(signal)
        source = str(signal)
    spec = ds.spec
    if spec.sample_rate_hz is None or spec.bw_main_hz is None or spec.n_sub_ch is None:
        raise ValueError(f"{source}: spec.json needs sample_rate_hz, bw_main_hz and n_sub_ch for the loop's ACLR")
    xi = ds.train.x
    if xi.shape[0] < samples:
        raise ValueError(f"{source}: the train split holds {xi.shape[0]} samples, the loop asks for {samples}")
    x = xi[:samples, 0].astype(np.float64) + 1j * xi[:samples, 1].astype(np.float64)
    peak = float(np.max(np.abs(x)))
    if not peak > 0:
        raise ValueError(f"{source}: the train input is all zero")
    return LoopSignal(x / peak, float(spec.sample_rate_hz), float(spec.bw_main_hz), int(spec.n_sub_ch), source, ds)
