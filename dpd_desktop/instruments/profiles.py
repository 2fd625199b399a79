"""Command profiles: the SCPI strings a driver sends, per instrument family.

A profile is data (format strings), the drivers (scpi_drivers.py) are code: supporting another family means adding
a profile. Commands are sent in their short forms (SCPI-99 vol. 1 §6.2.1: the upper-case part of each keyword),
with the numeric suffix written out.

* :data:`GENERIC` — IEEE 488.2 common commands (``*IDN?`` §10.14, ``*RST`` §10.32, ``*CLS`` §10.3, ``*OPC?``
  §10.19) and SCPI-99's standard subsystems: ``SYSTem:ERRor[:NEXT]?`` (vol. 2 §19.7), ``[SOURce:]FREQuency[:CW]``
  (§18.6), ``[SOURce:]POWer[:LEVel][:IMMediate][:AMPLitude]`` (§18.13), ``OUTPut[:STATe]`` (§15.7). SCPI-99 has no
  ARB waveform or I/Q capture commands, so the generic profile identifies, resets, reads the error queue and switches
  RF, and refuses waveforms and captures (:class:`~dpd_desktop.instruments.errors.InstrumentUnsupported`).
* :data:`RS_SMW` — Rohde & Schwarz SMW200A vector signal generator, R&S SMW200A User Manual 1175.6632.02
  ("Remote control commands": ``[:SOURce<hw>]:FREQuency[:CW|FIXed]``, ``[:SOURce<hw>]:POWer[:LEVel][:IMMediate]
  [:AMPLitude]``, ``[:SOURce<hw>]:POWer:LIMit[:AMPLitude]``, ``:OUTPut<hw>[:STATe]``,
  ``[:SOURce<hw>]:BB:ARBitrary:WAVeform:DATA <file>,<block>``, ``…:WAVeform:SELect <file>``,
  ``[:SOURce<hw>]:BB:ARBitrary:CLOCk``, ``…:ARBitrary:STATe``, ``…:ARBitrary:TRIGger:OUTPut<ch>:MODE RESTart``
  (marker 1 at each waveform restart, for the analyzer's trigger)); the waveform file format is rs_wv.py.
  The RF level of an ARB signal is its RMS level (the file's LEVEL OFFS tag, rs_wv.py).
* :data:`RS_FSW` — Rohde & Schwarz FSW signal and spectrum analyzer, I/Q Analyzer application, R&S FSW User Manual
  1173.9411.02 and the I/Q Analyzer manual (the same commands in the FSWP manual 1177.5856.02 §8.5):
  ``INSTrument[:SELect] IQ``, ``INITiate:CONTinuous OFF``, ``[SENSe:]FREQuency:CENTer``,
  ``DISPlay[:WINDow]:TRACe:Y[:SCALe]:RLEVel``, ``TRACe:IQ:SRATe``, ``TRACe:IQ:RLENgth``, ``TRIGger[:SEQuence]:SOURce
  EXTernal``, ``TRACe:IQ:DATA:FORMat IQPair`` (I,Q,I,Q…), ``FORMat[:DATA] REAL,32 | ASCii`` (REAL,32: an IEEE 488.2
  definite-length block of float32, 8 bytes per sample), ``INITiate[:IMMediate]`` then ``*OPC?``,
  ``TRACe:IQ:DATA:MEMory? <offset>,<samples>``. The values are in V (peak voltages of the I and Q components); the
  profile's ``mw_per_v2`` turns them into √mW samples: P[mW] = (I² + Q²)·1000/(2·50 Ω) = 10·(I² + Q²), the
  peak-voltage convention of Tektronix ("Calculating RF power from IQ samples") and Keysight's X-series manual
  (mean power 10·log10(10·rms²) dBm); check it once against a CW of known power (a different convention is a
  fixed offset, which the loop's gain normalisation absorbs but the reported dBm would carry).
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GeneratorProfile", "AnalyzerProfile", "GENERIC", "GENERIC_ANALYZER", "RS_SMW", "RS_FSW",
           "GENERATOR_PROFILES", "ANALYZER_PROFILES"]


@dataclass(frozen=True)
class GeneratorProfile:
    """The SCPI strings of a signal generator; ``None``: the family has no such command."""

    name: str
    identify: str = "*IDN?"
    reset: str = "*RST"
    clear: str = "*CLS"
    frequency: str = "FREQ:CW {hz:.6f}"
    level: str = "POW:LEV:IMM:AMPL {dbm:.3f}"
    level_limit: str | None = None
    rf: str = "OUTP:STAT {state:d}"
    #: waveform transfer as a binary block: the text before the block ({file} quoted name)
    waveform_data: str | None = None
    #: load a waveform file by name/path ({file})
    waveform_select: str | None = None
    arb_clock: str | None = None
    arb_state: str | None = None
    marker_restart: str | None = None
    #: the waveform file's folder on the instrument (waveform_data / waveform_select names files there)
    file_folder: str = ""


@dataclass(frozen=True)
class AnalyzerProfile:
    """The SCPI strings of a signal analyzer's I/Q capture; ``None``: not available."""

    name: str
    identify: str = "*IDN?"
    reset: str = "*RST"
    clear: str = "*CLS"
    application: str | None = None
    single: str | None = None
    center: str | None = None
    ref_level: str | None = None
    sample_rate: str | None = None
    record_length: str | None = None
    trigger_external: str | None = None
    iq_order: str | None = None
    format_binary: str | None = None
    format_ascii: str | None = None
    initiate: str | None = None
    fetch: str | None = None
    #: mW per V² of (I² + Q²) (module docstring)
    mw_per_v2: float = 10.0


GENERIC = GeneratorProfile(name="generic")
GENERIC_ANALYZER = AnalyzerProfile(name="generic")

RS_SMW = GeneratorProfile(
    name="rs-smw",
    frequency="SOUR1:FREQ:CW {hz:.6f}",
    level="SOUR1:POW:LEV:IMM:AMPL {dbm:.3f}",
    level_limit="SOUR1:POW:LIM:AMPL {dbm:.3f}",
    rf="OUTP1:STAT {state:d}",
    waveform_data="SOUR1:BB:ARB:WAV:DATA '{file}',",
    waveform_select="SOUR1:BB:ARB:WAV:SEL '{file}'",
    arb_clock="SOUR1:BB:ARB:CLOC {hz:.6f}",
    arb_state="SOUR1:BB:ARB:STAT {state:d}",
    marker_restart="SOUR1:BB:ARB:TRIG:OUTP1:MODE REST",
    file_folder="/var/user/",
)

RS_FSW = AnalyzerProfile(
    name="rs-fsw",
    application="INST:SEL IQ",
    single="INIT:CONT OFF",
    center="FREQ:CENT {hz:.6f}",
    ref_level="DISP:TRAC:Y:SCAL:RLEV {dbm:.2f}",
    sample_rate="TRAC:IQ:SRAT {hz:.6f}",
    record_length="TRAC:IQ:RLEN {n:d}",
    trigger_external="TRIG:SOUR EXT",
    iq_order="TRAC:IQ:DATA:FORM IQP",
    format_binary="FORM REAL,32",
    format_ascii="FORM ASC",
    initiate="INIT:IMM",
    fetch="TRAC:IQ:DATA:MEM? 0,{n:d}",
)

GENERATOR_PROFILES = {p.name: p for p in (GENERIC, RS_SMW)}
ANALYZER_PROFILES = {p.name: p for p in (GENERIC_ANALYZER, RS_FSW)}
