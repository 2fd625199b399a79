"""Generator and analyzer drivers over an SCPI session (scpi.py) and a command profile (profiles.py).

:class:`ScpiGenerator` transfers a waveform as an R&S ``.wv`` file (rs_wv.py) in one of two ways:

* ``transfer="block"`` (the default): ``SOUR1:BB:ARB:WAV:DATA '<file>',#<block>`` writes the file on the
  instrument, then ``…:WAV:SEL '<file>'`` loads it;
* ``transfer="file"``: the file is written (atomically) into ``share_dir``, a folder the instrument also sees (a
  network share it mounts), and ``…:WAV:SEL '<instrument_path>/<name>.wv'`` loads it. This is also how the
  simulated instruments (sim.py) take a waveform: pyvisa-sim matches text messages only.

One timeout (the session's) bounds every call, a reset's and a capture's included: set it to what the slowest step
of the instrument needs. Every configuring step ends with ``*OPC?`` and a read of the error queue, so an instrument that refused a setting
stops the loop with its own words (:class:`~dpd_desktop.instruments.errors.InstrumentReported`).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..atomic import atomic_write_bytes
from .base import Analyzer, Generator, Identity
from .errors import InstrumentError, InstrumentUnsupported
from .profiles import AnalyzerProfile, GeneratorProfile
from .rs_wv import encode_wv
from .scpi import ScpiSession

__all__ = ["ScpiGenerator", "ScpiAnalyzer", "TRANSFERS"]

TRANSFERS = ("block", "file")


class _ScpiInstrument:
    session: ScpiSession
    role: str

    def _identify(self, query: str) -> Identity:
        ident = Identity.from_idn(self.session.query(query))
        self.session.label = f"{self.role} ({ident.label})"
        return ident

    def _reset(self, reset: str, clear: str) -> None:
        self.session.write(reset)
        self.session.write(clear)
        self.session.opc()
        self.session.check(reset)

    @property
    def timeout_s(self) -> float:
        return self.session.timeout_s

    def errors(self) -> list[str]:
        return self.session.errors()

    def close(self) -> None:
        self.session.close()


class ScpiGenerator(_ScpiInstrument, Generator):
    """A generator driven by ``profile`` over ``session`` (module docstring for ``transfer``)."""

    role = "generator"

    def __init__(self, session: ScpiSession, profile: GeneratorProfile, transfer: str = "block",
                 share_dir: str | Path | None = None, instrument_path: str | None = None):
        if transfer not in TRANSFERS:
            raise ValueError(f"transfer must be one of {TRANSFERS}, got {transfer!r}")
        if transfer == "file" and share_dir is None:
            raise ValueError("transfer='file' needs share_dir, the folder the generator reads waveforms from")
        self.session, self.profile, self.transfer = session, profile, transfer
        self.share_dir = Path(share_dir) if share_dir is not None else None
        self.instrument_path = instrument_path if instrument_path is not None else (
            str(self.share_dir) if self.share_dir is not None else profile.file_folder)
        self._rf = False
        self.name = "generator"

    def identify(self) -> Identity:
        return self._identify(self.profile.identify)

    def reset(self) -> None:
        self._reset(self.profile.reset, self.profile.clear)
        self._rf = False  # *RST switches RF off (IEEE 488.2 §10.32: the device's reset state)

    def set_level_limit(self, dbm: float) -> None:
        """The instrument's own RF level limit, a second guard under the loop's (when the profile has one)."""
        if self.profile.level_limit:
            self._send(self.profile.level_limit.format(dbm=dbm))

    def _send(self, text: str) -> None:
        self.session.write(text)
        self.session.opc()
        self.session.check(text)

    def load(self, iq: np.ndarray, sample_rate_hz: float, name: str = "dpd_loop") -> None:
        p = self.profile
        if not (p.waveform_select and p.arb_clock):
            raise InstrumentUnsupported(self.session.label, f"the {p.name!r} profile has no ARB waveform commands "
                                        "(choose a vendor profile, e.g. rs-smw)")
        blob = encode_wv(iq, sample_rate_hz)
        fname = f"{name}.wv"
        if self.transfer == "block":
            if not p.waveform_data:
                raise InstrumentUnsupported(self.session.label, f"the {p.name!r} profile cannot transfer blocks")
            target = p.file_folder + fname
            self.session.write_block(p.waveform_data.format(file=target), blob)
        else:
            atomic_write_bytes(self.share_dir / fname, blob)
            target = self.instrument_path.rstrip("/\\") + "/" + fname
        self.session.write(p.waveform_select.format(file=target))
        self.session.write(p.arb_clock.format(hz=float(sample_rate_hz)))
        self.session.opc()
        self.session.check(f"loading {fname}")

    def set_frequency(self, hz: float) -> None:
        self._send(self.profile.frequency.format(hz=float(hz)))

    def set_level(self, rms_dbm: float) -> None:
        self._send(self.profile.level.format(dbm=float(rms_dbm)))

    def rf(self, on: bool) -> None:
        if on:
            self._rf = True  # counted as on from the attempt: a failure half-way must still be muted
        self._send(self.profile.rf.format(state=int(bool(on))))
        self._rf = bool(on)

    def play(self) -> None:
        p = self.profile
        if not p.arb_state:
            raise InstrumentUnsupported(self.session.label, f"the {p.name!r} profile has no ARB")
        self.session.write(p.arb_state.format(state=1))
        if p.marker_restart:
            self.session.write(p.marker_restart)
        self.session.opc()
        self.session.check("starting the ARB")

    @property
    def rf_is_on(self) -> bool:
        return self._rf


class ScpiAnalyzer(_ScpiInstrument, Analyzer):
    """An analyzer's I/Q capture driven by ``profile``; ``binary``: REAL,32 blocks (fast), else ASCII values."""

    role = "analyzer"

    def __init__(self, session: ScpiSession, profile: AnalyzerProfile, binary: bool = True,
                 trigger_external: bool = True):
        self.session, self.profile, self.binary = session, profile, bool(binary)
        self.trigger_external = bool(trigger_external)
        self._configured: tuple | None = None
        self.name = "analyzer"

    def identify(self) -> Identity:
        return self._identify(self.profile.identify)

    def reset(self) -> None:
        self._reset(self.profile.reset, self.profile.clear)
        self._configured = None

    def _configure(self, n: int, center_hz: float, sample_rate_hz: float, ref_level_dbm: float | None) -> None:
        key = (n, float(center_hz), float(sample_rate_hz), ref_level_dbm)
        if key == self._configured:
            return
        p, s = self.profile, self.session
        steps = [p.application, p.single, p.center.format(hz=float(center_hz)),
                 p.ref_level.format(dbm=float(ref_level_dbm)) if (ref_level_dbm is not None and p.ref_level) else None,
                 p.sample_rate.format(hz=float(sample_rate_hz)), p.record_length.format(n=int(n)),
                 p.trigger_external if self.trigger_external else None, p.iq_order,
                 p.format_binary if self.binary else p.format_ascii]
        for text in steps:
            if text:
                s.write(text)
        s.opc()
        s.check("configuring the I/Q capture")
        self._configured = key

    def capture(self, n_samples: int, center_hz: float, sample_rate_hz: float,
                ref_level_dbm: float | None = None) -> np.ndarray:
        p, s = self.profile, self.session
        if not (p.fetch and p.center and p.sample_rate and p.record_length and p.initiate):
            raise InstrumentUnsupported(s.label, f"the {p.name!r} profile has no I/Q capture commands "
                                        "(choose a vendor profile, e.g. rs-fsw)")
        n = int(n_samples)
        self._configure(n, center_hz, sample_rate_hz, ref_level_dbm)
        s.write(p.initiate)
        s.opc()
        vals = s.query_floats(p.fetch.format(n=n), self.binary)
        if vals.size != 2 * n:
            raise InstrumentError(s.label, f"returned {vals.size} values for {n} I/Q samples (expected {2 * n})")
        if not np.all(np.isfinite(vals)):
            raise InstrumentError(s.label, "returned non-finite I/Q values (overload?)")
        iq = vals[0::2] + 1j * vals[1::2]
        return iq * np.sqrt(p.mw_per_v2)
