"""The instrument layer's errors: one line each, naming the instrument and what failed.

Every error a driver raises is an :class:`InstrumentError`; its ``str()`` is one line of plain words fit for a
status bar or a terminal (``"analyzer (Rohde&Schwarz FSW): no answer within 5.0 s to 'TRAC:IQ:DATA:MEM? 0,16384'"``).
"""
from __future__ import annotations

__all__ = ["InstrumentError", "InstrumentTimeout", "InstrumentDead", "InstrumentReported", "PowerLimitError",
           "InstrumentUnsupported"]


class InstrumentError(RuntimeError):
    """An instrument failed; ``instrument`` is its display name, ``str()`` one line."""

    def __init__(self, instrument: str, message: str):
        self.instrument = instrument
        text = " ".join(f"{instrument}: {message}".split())  # one line, whatever the detail held
        super().__init__(text)


class InstrumentTimeout(InstrumentError):
    """No answer within the instrument's timeout."""


class InstrumentDead(InstrumentError):
    """The connection is gone or the instrument does not respond at all (refused, reset, closed)."""


class InstrumentReported(InstrumentError):
    """The instrument's error queue (``SYSTem:ERRor?``) held errors after a command; ``errors`` lists them."""

    def __init__(self, instrument: str, errors: list[str], after: str):
        self.errors = list(errors)
        super().__init__(instrument, f"reported {'; '.join(self.errors)} after {after!r}")


class PowerLimitError(InstrumentError):
    """A waveform whose peak envelope power would exceed the power limit was refused before it was played."""


class InstrumentUnsupported(InstrumentError):
    """The driver's command profile has no command for what was asked (e.g. the generic SCPI profile and ARB
    waveforms)."""
