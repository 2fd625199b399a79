"""The driver interface: a signal generator plays an I/Q waveform, a signal analyzer captures I/Q.

Units used throughout the instrument layer and the loop: complex baseband samples in √mW, so that ``|z|²`` is the
instantaneous power in mW at the instrument's RF port (an RMS level of P dBm is ``mean|z|² = 10**(P/10)``). The
sample rate is in Hz, frequencies in Hz, levels in dBm, timeouts in seconds.

A :class:`Generator` plays its waveform's shape (any scale) at the RMS level set; :meth:`~Generator.mute` never
raises. An :class:`Analyzer` capture is triggered by the generator's waveform marker (sample 0 is the waveform's
first sample plus the path's delay). Errors: :class:`~dpd_desktop.instruments.errors.InstrumentError` (one line).
"""
from __future__ import annotations

import abc
from dataclasses import dataclass

import numpy as np

__all__ = ["Identity", "Instrument", "Generator", "Analyzer", "dbm_to_mw", "mw_to_dbm", "rms_dbm", "peak_dbm"]


def dbm_to_mw(p_dbm: float) -> float:
    return float(10.0 ** (p_dbm / 10.0))


def mw_to_dbm(p_mw: float) -> float:
    return float(10.0 * np.log10(p_mw)) if p_mw > 0 else float("-inf")


def rms_dbm(z: np.ndarray) -> float:
    """RMS power of √mW samples, dBm: ``10·log10(mean|z|²)``."""
    return mw_to_dbm(float(np.mean(np.abs(z) ** 2)))


def peak_dbm(z: np.ndarray) -> float:
    """Peak envelope power (PEP) of √mW samples, dBm: ``10·log10(max|z|²)``."""
    return mw_to_dbm(float(np.max(np.abs(z) ** 2)))


@dataclass(frozen=True)
class Identity:
    """What ``*IDN?`` answered (IEEE 488.2 §10.14: manufacturer, model, serial number, firmware, comma-separated)."""

    manufacturer: str
    model: str
    serial: str = ""
    firmware: str = ""

    @classmethod
    def from_idn(cls, text: str) -> "Identity":
        parts = [p.strip() for p in str(text).strip().split(",")]
        parts += [""] * (4 - len(parts))
        return cls(parts[0], parts[1], parts[2], ",".join(parts[3:]).strip(","))

    @property
    def label(self) -> str:
        return " ".join(p for p in (self.manufacturer, self.model) if p) or "unknown instrument"

    def to_dict(self) -> dict[str, str]:
        return {"manufacturer": self.manufacturer, "model": self.model, "serial": self.serial,
                "firmware": self.firmware}


class Instrument(abc.ABC):
    """What every driver does. ``name`` is the role shown in messages ("generator", "analyzer")."""

    name: str = "instrument"
    timeout_s: float = 10.0

    @abc.abstractmethod
    def identify(self) -> Identity:
        """``*IDN?``. Raises InstrumentError (timeout, dead)."""

    @abc.abstractmethod
    def reset(self) -> None:
        """``*RST`` then ``*CLS`` and wait for completion (``*OPC?``); the error queue is cleared."""

    @abc.abstractmethod
    def errors(self) -> list[str]:
        """Drain the error queue; [] when it holds none ("0,No error")."""

    def close(self) -> None:
        """Release the connection (idempotent)."""


class Generator(Instrument):
    """A vector signal generator with an ARB (see the module docstring for units)."""

    name = "generator"

    @abc.abstractmethod
    def load(self, iq: np.ndarray, sample_rate_hz: float, name: str = "dpd_loop") -> None:
        """Transfer the waveform (complex (N,), any scale) and select it with ``sample_rate_hz`` as ARB clock."""

    @abc.abstractmethod
    def set_frequency(self, hz: float) -> None:
        """RF carrier frequency, Hz."""

    @abc.abstractmethod
    def set_level(self, rms_dbm: float) -> None:
        """RMS output level of the waveform, dBm."""

    @abc.abstractmethod
    def rf(self, on: bool) -> None:
        """RF output on or off."""

    @abc.abstractmethod
    def play(self) -> None:
        """Start the ARB (the loaded waveform repeats; its marker restarts with it)."""

    @property
    @abc.abstractmethod
    def rf_is_on(self) -> bool:
        """The last RF state this driver set (True after rf(True), False after rf(False) / mute)."""

    def mute(self) -> str | None:
        """RF off, best effort: never raises; returns None when done, else why it could not be confirmed."""
        try:
            self.rf(False)
            return None
        except Exception as exc:  # noqa: BLE001 - muting must not hide the error that led here
            return str(exc)


class Analyzer(Instrument):
    """A signal analyzer with an I/Q capture (see the module docstring for units)."""

    name = "analyzer"

    @abc.abstractmethod
    def capture(self, n_samples: int, center_hz: float, sample_rate_hz: float,
                ref_level_dbm: float | None = None) -> np.ndarray:
        """``n_samples`` complex128 samples in √mW, triggered by the generator's marker."""
