"""A virtual bench: a generator and an analyzer joined by a virtual PA, for the loop without hardware.

The RF path of :class:`VirtualBench`: the generator plays its waveform periodically at its RMS level → the PA
(:class:`MemoryPolynomialPA`, or :class:`RunPA`: a trained PA model of the workspace) → a gain and phase drift that
grows with every capture → a fractional delay ``Y_k·exp(−j2πkτ/N)`` on the periodic output → additive white
Gaussian noise at ``snr_db`` below the output power, over the sample rate → the analyzer, triggered by the
waveform's marker. A capture of n samples covers ⌈n / N⌉ periods of the N-sample waveform, each with its own noise.

Units: generator and analyzer in √mW (instruments/base.py). The PA works in normalised units: the input
``u / √(10^(input_fs_dbm/10))`` (|u| = 1 at a peak power of ``input_fs_dbm``) and the output scaled back by the
same factor and ``gain_db``. Test hooks: a :class:`FaultPlan` makes the n-th call of a method time out or kill the
instrument.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from ..metrics.transfer import as_complex
from .base import Analyzer, Generator, Identity, dbm_to_mw
from .errors import InstrumentDead, InstrumentError, InstrumentTimeout, PowerLimitError

__all__ = ["MemoryPolynomialPA", "RunPA", "VirtualBench", "VirtualGenerator", "VirtualAnalyzer", "FaultPlan",
           "apply_delay", "DEFAULT_MP_ORDERS", "DEFAULT_MP_MEMORY"]

#: the default PA's static polynomial b_k (odd orders): small-signal gain 1, at |u| = 1 a compression of 1.7 dB and
#: an AM/PM of −4.9°; r − 0.21r³ + 0.03r⁵ rises for every r (its derivative 1 − 0.63r² + 0.15r⁴ has no real root)
DEFAULT_MP_ORDERS: Mapping[int, complex] = {1: 1.0 + 0j, 3: -0.21 - 0.07j, 5: 0.03 + 0j}
#: the default memory taps w_m, symmetric about the main tap: a zero-phase linear memory, H(f) = 1 + 0.12·cos(2πf/fs)
#: − 0.04·cos(4πf/fs) (0.33 dB from f = 0 to ±fs/4), that adds no group delay of its own, so that the path's delay
#: is ``delay_samples`` alone (a causal memory would add its group delay to what any estimator measures)
DEFAULT_MP_MEMORY: Mapping[int, float] = {-2: -0.02, -1: 0.06, 0: 1.0, 1: 0.06, 2: -0.02}


def apply_delay(z: np.ndarray, delay: float) -> np.ndarray:
    """The periodic signal ``z`` delayed by ``delay`` samples (fractional allowed), by an FFT phase ramp; for an even
    length the Nyquist bin is treated as real (its phase would make a real delay complex-valued asymmetric)."""
    n = z.size
    k = np.fft.fftfreq(n) * n
    ramp = np.exp(-2j * np.pi * k * delay / n)
    if n % 2 == 0:
        ramp[n // 2] = np.cos(np.pi * delay)
    return np.fft.ifft(np.fft.fft(z) * ramp)


class MemoryPolynomialPA:
    """y(n) = Σ_m w_m Σ_k b_k u(n−m)·|u(n−m)|^(k−1) (a memory polynomial whose coefficients a_{k,m} = b_k·w_m;
    Kim & Konstantinou, Electronics Letters 37(23), 2001), on a periodic u (delays wrap around).

    ``orders``: {k: b_k}, ``memory``: {m: w_m} (m may be negative: taps after the main one). Defaults:
    :data:`DEFAULT_MP_ORDERS`, :data:`DEFAULT_MP_MEMORY`.
    """

    kind = "memory-polynomial"

    def __init__(self, orders: Mapping[int, complex] | None = None, memory: Mapping[int, float] | None = None):
        self.orders = {int(k): complex(v) for k, v in (orders or DEFAULT_MP_ORDERS).items()}
        self.memory = {int(m): float(v) for m, v in (memory or DEFAULT_MP_MEMORY).items()}
        if not self.orders or any(k < 1 for k in self.orders):
            raise ValueError(f"orders must map orders k >= 1 to coefficients, got {orders!r}")

    def __call__(self, u: np.ndarray) -> np.ndarray:
        a = np.abs(u)
        f = sum(b * u * a ** (k - 1) for k, b in self.orders.items())
        return sum(w * (np.roll(f, m) if m else f) for m, w in self.memory.items())

    def describe(self) -> dict:
        return {"kind": self.kind, "orders": {str(k): [v.real, v.imag] for k, v in self.orders.items()},
                "memory": {str(m): w for m, w in self.memory.items()}}


class RunPA:
    """The PA model of a trained PA run (its selected checkpoint, loaded through the run record:
    training/pa_source.py), evaluated on one period of u as one sequence after a warm-up period (the recurrent
    state then holds the end of the previous period, as on a repeating ARB). Input and output in the run's dataset
    units (|x| ≤ 1 in the bundled datasets)."""

    kind = "pa-run"

    def __init__(self, workspace, run: str):
        from ..training.pa_source import load_pa_for_dpd  # PyTorch: only a run-backed PA needs it

        self.model, self.info = load_pa_for_dpd(workspace, run, allow_dataset_mismatch=True)
        self.model.eval()
        self.run = str(run)

    def __call__(self, u: np.ndarray) -> np.ndarray:
        import torch

        two = np.concatenate([u, u])
        x = torch.from_numpy(np.stack([two.real, two.imag], axis=-1).astype(np.float32))[None]
        with torch.inference_mode():
            y = self.model(x)[0].numpy()
        return as_complex(y)[u.size:]

    def describe(self) -> dict:
        return {"kind": self.kind, "run": self.run, "run_id": self.info.get("run_id"),
                "checkpoint_sha256": self.info.get("sha256")}


@dataclass
class FaultPlan:
    """Faults to inject, per ``"<role>.<method>"`` (e.g. ``"analyzer.capture"``): ``timeout`` makes its n-th call
    (1-based) raise :class:`InstrumentTimeout`; ``dead`` makes its n-th call and every later call of that
    instrument raise :class:`InstrumentDead`."""

    timeout: Mapping[str, int] = field(default_factory=dict)
    dead: Mapping[str, int] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)

    def hit(self, role: str, method: str) -> str | None:
        key = f"{role}.{method}"
        self.calls[key] = self.calls.get(key, 0) + 1
        n = self.calls[key]
        if self.dead.get(key) == n:
            return "dead"
        if self.timeout.get(key) == n:
            return "timeout"
        return None


class VirtualBench:
    """The RF path between the virtual generator and analyzer (module docstring).

    Args:
        pa: a PA model (``pa(u) -> y`` in normalised units).
        delay_samples: the path's delay in samples (fractional), seen from the marker trigger.
        snr_db: signal-to-noise ratio of one capture sample over the capture bandwidth, dB (None: no noise).
        gain_drift_db, phase_drift_deg: change of the path's gain [dB] and phase [°] per capture.
        input_fs_dbm: the PA input's full scale (|u| = 1), dBm peak.
        gain_db: the output scale: |y| = 1 is ``input_fs_dbm + gain_db`` dBm peak.
        noise_floor_dbm: the noise of a capture with RF off (per sample, over the capture bandwidth), dBm.
        seed: the noise generator's seed.
    """

    def __init__(self, pa: Callable[[np.ndarray], np.ndarray], *, delay_samples: float = 0.0,
                 snr_db: float | None = 40.0, gain_drift_db: float = 0.0, phase_drift_deg: float = 0.0,
                 input_fs_dbm: float = 0.0, gain_db: float = 30.0, noise_floor_dbm: float = -90.0, seed: int = 0):
        self.pa = pa
        self.delay_samples = float(delay_samples)
        self.snr_db = snr_db
        self.gain_drift_db = float(gain_drift_db)
        self.phase_drift_deg = float(phase_drift_deg)
        self.input_fs_dbm = float(input_fs_dbm)
        self.gain_db = float(gain_db)
        self.noise_floor_dbm = float(noise_floor_dbm)
        self.rng = np.random.default_rng(seed)
        self.lock = threading.Lock()
        self.waveform: np.ndarray | None = None  # the loaded shape (any scale)
        self.sample_rate_hz: float | None = None
        self.frequency_hz: float | None = None
        self.level_dbm: float | None = None
        self.rf_on = False
        self.playing = False
        self.captures = 0
        self.played: list[np.ndarray] = []  # every waveform that reached the PA (√mW), for tests and reports

    def describe(self) -> dict:
        pa = self.pa.describe() if hasattr(self.pa, "describe") else {"kind": type(self.pa).__name__}
        return {"pa": pa, "delay_samples": self.delay_samples, "snr_db": self.snr_db,
                "gain_drift_db": self.gain_drift_db, "phase_drift_deg": self.phase_drift_deg,
                "input_fs_dbm": self.input_fs_dbm, "gain_db": self.gain_db}

    def drive(self) -> np.ndarray | None:
        """The waveform at the PA input in √mW (level applied), or None when RF is off or nothing plays."""
        if not (self.rf_on and self.playing) or self.waveform is None or self.level_dbm is None:
            return None
        w = self.waveform
        return w / np.sqrt(np.mean(np.abs(w) ** 2)) * math.sqrt(dbm_to_mw(self.level_dbm))

    def output(self, n: int, sample_rate_hz: float) -> np.ndarray:
        """A capture of ``n`` samples (module docstring)."""
        with self.lock:
            self.captures += 1
            u = self.drive()
            if u is not None and self.sample_rate_hz is not None and abs(sample_rate_hz - self.sample_rate_hz) > 1e-6:
                raise InstrumentError("analyzer", f"captures at {sample_rate_hz:g} Hz but the generator plays at "
                                      f"{self.sample_rate_hz:g} Hz (the virtual bench needs equal rates)")
            floor = math.sqrt(dbm_to_mw(self.noise_floor_dbm) / 2)
            if u is None:
                return floor * (self.rng.standard_normal(n) + 1j * self.rng.standard_normal(n))
            self.played.append(u.copy())
            scale_in = math.sqrt(dbm_to_mw(self.input_fs_dbm))
            y = self.pa(u / scale_in) * scale_in * 10 ** (self.gain_db / 20)
            drift = 10 ** (self.gain_drift_db * self.captures / 20) * np.exp(
                1j * np.deg2rad(self.phase_drift_deg * self.captures))
            y = apply_delay(y * drift, self.delay_samples)
            periods = -(-n // y.size)
            out = np.tile(y, periods)[:n]
            p = float(np.mean(np.abs(y) ** 2))
            sigma = math.sqrt(p * 10 ** (-self.snr_db / 10) / 2) if self.snr_db is not None else 0.0
            sigma = math.hypot(sigma, floor)
            return out + sigma * (self.rng.standard_normal(n) + 1j * self.rng.standard_normal(n))


class _VirtualInstrument:
    role = "instrument"
    model = "virtual"

    def __init__(self, bench: VirtualBench, faults: FaultPlan | None = None, timeout_s: float = 10.0):
        self.bench = bench
        self.faults = faults or FaultPlan()
        self.timeout_s = float(timeout_s)
        self.dead = False
        self.log: list[str] = []
        self.name = self.role

    @property
    def label(self) -> str:
        return f"{self.role} (DPD Desktop {self.model})"

    def _enter(self, method: str, text: str) -> None:
        self.log.append(text)
        if self.dead:
            raise InstrumentDead(self.label, f"connection lost earlier; not sending {method}")
        hit = self.faults.hit(self.role, method)
        if hit == "dead":
            self.dead = True
            raise InstrumentDead(self.label, f"does not respond to {method} (connection reset)")
        if hit == "timeout":
            raise InstrumentTimeout(self.label, f"no answer within {self.timeout_s:g} s to {method}")

    def identify(self) -> Identity:
        self._enter("identify", "*IDN?")
        return Identity("DPD Desktop", self.model, "0", "virtual")

    def errors(self) -> list[str]:
        self._enter("errors", "SYST:ERR?")
        return []


class VirtualGenerator(_VirtualInstrument, Generator):
    """The bench's generator; ``set_level_limit`` refuses levels whose peak would exceed it (like an instrument's
    own RF limit)."""

    role = "generator"
    model = "virtual generator"

    def __init__(self, bench: VirtualBench, faults: FaultPlan | None = None, timeout_s: float = 10.0):
        super().__init__(bench, faults, timeout_s)
        self.level_limit_dbm: float | None = None

    def reset(self) -> None:
        self._enter("reset", "*RST")
        with self.bench.lock:
            self.bench.rf_on = self.bench.playing = False

    def set_level_limit(self, dbm: float) -> None:
        self._enter("set_level_limit", f"POW:LIM {dbm:.3f}")
        self.level_limit_dbm = float(dbm)

    def load(self, iq: np.ndarray, sample_rate_hz: float, name: str = "dpd_loop") -> None:
        self._enter("load", f"LOAD {name} {np.asarray(iq).size} @ {sample_rate_hz:g}")
        z = np.asarray(iq, dtype=np.complex128).reshape(-1)
        if z.size < 2 or not np.all(np.isfinite(z)) or not np.any(z):
            raise InstrumentError(self.label, "refused the waveform (empty, all zero or non-finite)")
        with self.bench.lock:
            self.bench.waveform = z.copy()
            self.bench.sample_rate_hz = float(sample_rate_hz)

    def set_frequency(self, hz: float) -> None:
        self._enter("set_frequency", f"FREQ {hz:.6f}")
        self.bench.frequency_hz = float(hz)

    def set_level(self, rms_dbm: float) -> None:
        self._enter("set_level", f"POW {rms_dbm:.3f}")
        w = self.bench.waveform
        if self.level_limit_dbm is not None and w is not None:
            papr = 10 * np.log10(np.max(np.abs(w) ** 2) / np.mean(np.abs(w) ** 2))
            if rms_dbm + papr > self.level_limit_dbm + 1e-9:
                raise PowerLimitError(self.label, f"level {rms_dbm:.2f} dBm with the waveform's "
                                      f"{papr:.2f} dB crest factor exceeds the limit {self.level_limit_dbm:.2f} dBm")
        self.bench.level_dbm = float(rms_dbm)

    def rf(self, on: bool) -> None:
        if on:
            self.bench.rf_on = True  # counted on from the attempt (see ScpiGenerator.rf)
        self._enter("rf", f"OUTP {int(bool(on))}")
        self.bench.rf_on = bool(on)

    def play(self) -> None:
        self._enter("play", "ARB ON")
        self.bench.playing = True

    @property
    def rf_is_on(self) -> bool:
        return self.bench.rf_on


class VirtualAnalyzer(_VirtualInstrument, Analyzer):
    """The bench's analyzer."""

    role = "analyzer"
    model = "virtual analyzer"

    def reset(self) -> None:
        self._enter("reset", "*RST")

    def capture(self, n_samples: int, center_hz: float, sample_rate_hz: float,
                ref_level_dbm: float | None = None) -> np.ndarray:
        self._enter("capture", f"CAPTURE {int(n_samples)} @ {sample_rate_hz:g}")
        return self.bench.output(int(n_samples), float(sample_rate_hz))
