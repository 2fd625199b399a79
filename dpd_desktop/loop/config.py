"""The loop's configuration: one validated, serializable object (recorded in loop.json and each iteration's
config.json), built by the command line and the window alike.

Fields (units in brackets):
    strategy: ``"ilc"`` (iterative learning control, per sample: loop/update.py) or ``"ila"`` (indirect learning of
        an MP/GMP predistorter at each iteration).
    iterations: at most this many captures (the first plays the undistorted waveform: the baseline).
    mu: the ILC learning gain (0 < μ ≤ 2; 1 with a well-chosen target gain converges in a few iterations).
    ila_kind, ila_order, ila_memory: the indirect-learning model (``"mp"``/``"gmp"``, K, M).
    target_aclr_dbc, target_evm_db: stop as soon as every given target is met (ACLR_AVG ≤, EVM ≤).
    target_output_dbm: the PA output power to linearise at [dBm RMS]; None: the output without DPD (the first
        capture's), i.e. linearise at the same output power.
    input_level_dbm: RMS level of the undistorted waveform at the generator [dBm].
    power_limit_dbm: the peak envelope power the generator may never exceed [dBm]: a waveform whose peak would is
        refused before it is played (required).
    center_hz [Hz], averages (whole periods captured and averaged, coherent averaging), ref_level_dbm (the
        analyzer's reference level; None: the target's peak + 3 dB).
    signal: ``"demo"`` (the synthetic 4-carrier OFDM of data/synthetic.py) or a dataset (its train input);
        signal_samples (the waveform's length N), signal_seed (demo only).
    metric_profile: metrics/profiles.py (``"corrected"``: the full adjacent channels; ``"legacy-2.2.1"``).
    nperseg: the Welch window of the metrics and spectra [samples].
    fit: after the loop, fit this DPD family to the last iteration's waveform (direct learning through the training
        core: mp, gmp, gru, …; None: no fit), then play it once; fit_epochs for gradient-trained families,
        fit_order / fit_memory for MP/GMP.
    timeout_s: every instrument call's timeout [s].
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, fields
from typing import Any

from ..config import METRIC_PROFILES, ConfigError
from ..families import BACKBONES

__all__ = ["LoopConfig", "STRATEGIES", "ILA_KINDS"]

STRATEGIES = ("ilc", "ila")
ILA_KINDS = ("mp", "gmp")


def _num(name: str, v, low: float | None = None, high: float | None = None, optional: bool = False,
         low_open: bool = False) -> None:
    if v is None and optional:
        return
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(name, f"expected a finite number{' or none' if optional else ''}, got {v!r}")
    if low is not None and (v <= low if low_open else v < low):
        raise ConfigError(name, f"expected {'>' if low_open else '>='} {low:g}, got {v!r}")
    if high is not None and v > high:
        raise ConfigError(name, f"expected <= {high:g}, got {v!r}")


def _int(name: str, v, low: int, high: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
        raise ConfigError(name, f"expected an integer from {low} to {high}, got {v!r}")


@dataclass
class LoopConfig:
    """See the module docstring."""

    strategy: str = "ilc"
    iterations: int = 8
    mu: float = 1.0
    ila_kind: str = "mp"
    ila_order: int = 5
    ila_memory: int = 3
    target_aclr_dbc: float | None = None
    target_evm_db: float | None = None
    target_output_dbm: float | None = None
    input_level_dbm: float = -10.0
    power_limit_dbm: float | None = None
    center_hz: float = 2.14e9
    averages: int = 16
    ref_level_dbm: float | None = None
    signal: str = "demo"
    signal_samples: int = 16384
    signal_seed: int = 0
    metric_profile: str = "corrected"
    nperseg: int = 2048
    fit: str | None = None
    fit_epochs: int = 30
    fit_order: int = 5
    fit_memory: int = 4
    timeout_s: float = 10.0
    name: str | None = None

    def validate(self) -> "LoopConfig":
        """Check every field; return self. Raises :class:`~dpd_desktop.config.ConfigError` naming the field."""
        if self.strategy not in STRATEGIES:
            raise ConfigError("strategy", f"expected one of {STRATEGIES}, got {self.strategy!r}")
        if self.ila_kind not in ILA_KINDS:
            raise ConfigError("ila_kind", f"expected one of {ILA_KINDS}, got {self.ila_kind!r}")
        _int("iterations", self.iterations, 1, 1000)
        _num("mu", self.mu, 0, 2, low_open=True)
        _int("ila_order", self.ila_order, 1, 15)
        _int("ila_memory", self.ila_memory, 1, 64)
        _num("target_aclr_dbc", self.target_aclr_dbc, optional=True)
        _num("target_evm_db", self.target_evm_db, optional=True)
        _num("target_output_dbm", self.target_output_dbm, -150, 90, optional=True)
        _num("input_level_dbm", self.input_level_dbm, -150, 60)
        if self.power_limit_dbm is None:
            raise ConfigError("power_limit_dbm", "a power limit is required: the peak envelope power [dBm] the "
                              "generator may never exceed")
        _num("power_limit_dbm", self.power_limit_dbm, -150, 60)
        _num("center_hz", self.center_hz, 0, low_open=True)
        _int("averages", self.averages, 1, 4096)
        _num("ref_level_dbm", self.ref_level_dbm, -150, 90, optional=True)
        if not isinstance(self.signal, str) or not self.signal.strip():
            raise ConfigError("signal", f"expected 'demo' or a dataset path, got {self.signal!r}")
        _int("signal_samples", self.signal_samples, 256, 1 << 24)
        _int("signal_seed", self.signal_seed, 0, 2**32 - 1)
        if self.metric_profile not in METRIC_PROFILES:
            raise ConfigError("metric_profile", f"expected one of {METRIC_PROFILES}, got {self.metric_profile!r}")
        _int("nperseg", self.nperseg, 16, self.signal_samples)
        if self.fit is not None:
            if self.fit not in BACKBONES:
                raise ConfigError("fit", f"expected a DPD family ({', '.join(BACKBONES)}) or none, got {self.fit!r}")
        _int("fit_epochs", self.fit_epochs, 1, 100000)
        _int("fit_order", self.fit_order, 1, 15)
        _int("fit_memory", self.fit_memory, 1, 64)
        _num("timeout_s", self.timeout_s, 0, 3600, low_open=True)
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LoopConfig":
        """From a dict (loop.json's ``config``); unknown keys → ConfigError naming the first; not validated."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ConfigError(unknown[0], f"unknown loop setting (known: {', '.join(sorted(names))})")
        return cls(**data)
