"""Simulated SCPI instruments for pyvisa-sim: an R&S SMW200A-like generator and an R&S FSW-like analyzer that
answer the commands of profiles.py ``RS_SMW`` / ``RS_FSW`` (``--generator sim --analyzer sim``).

pyvisa-sim answers text from a YAML definition (dialogues, properties, an error queue: ``SYST:ERR?`` answers
``-113,"Undefined header"`` after an unknown command) and cannot compute: the answer to ``TRAC:IQ:DATA:MEM? 0,<n>``
is a fixed capture written by :func:`write_sim_yaml` (the loop's signal through a
:class:`~dpd_desktop.instruments.virtual.VirtualBench`, in V); the generator takes its waveform as a file
(``transfer="file"``).

Resources (192.0.2.0/24 is TEST-NET-1, RFC 5737: no real host there): ``GENERATOR`` (the SMW), ``ANALYZER`` (the
FSW) and ``SILENT_ANALYZER`` (an FSW that never answers the I/Q fetch: a timeout).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..atomic import atomic_write_text
from .profiles import RS_FSW
from .virtual import MemoryPolynomialPA, VirtualBench

__all__ = ["GENERATOR", "ANALYZER", "SILENT_ANALYZER", "write_sim_yaml", "sim_capture", "prepare_sim",
           "IDN_GENERATOR", "IDN_ANALYZER"]

GENERATOR = "TCPIP0::192.0.2.10::inst0::INSTR"
ANALYZER = "TCPIP0::192.0.2.20::inst0::INSTR"
SILENT_ANALYZER = "TCPIP0::192.0.2.21::inst0::INSTR"
IDN_GENERATOR = "Rohde&Schwarz,SMW200A,1412.0000K02/000000,5.00.044 (pyvisa-sim)"
IDN_ANALYZER = "Rohde&Schwarz,FSW-26,1331.5003K26/000000,4.70 (pyvisa-sim)"

_EOM = """    eom:
      TCPIP INSTR:
        q: "\\n"
        r: "\\n"
    error:
      error_queue:
        - q: "SYST:ERR?"
          default: '0,"No error"'
          command_error: '-113,"Undefined header"'
"""


def _prop(name: str, setter: str, getter: str | None, default: str, typ: str) -> str:
    out = [f"      {name}:", f"        default: {default}", "        setter:", f'          q: "{setter}"']
    if getter:
        out += ["        getter:", f'          q: "{getter}"', f'          r: "{{:{"d" if typ == "int" else "s" if typ == "str" else "f"}}}"']
    out += ["        specs:", f"          type: {typ}"]
    return "\n".join(out)


def _no_answer(*commands: str) -> str:
    return "\n".join(f'      - q: "{c}"' for c in commands)


def _generator_yaml() -> str:
    props = [_prop("frequency", "SOUR1:FREQ:CW {:f}", "SOUR1:FREQ:CW?", "1000000000.0", "float"),
             _prop("level", "SOUR1:POW:LEV:IMM:AMPL {:f}", "SOUR1:POW:LEV:IMM:AMPL?", "-30.0", "float"),
             _prop("level_limit", "SOUR1:POW:LIM:AMPL {:f}", "SOUR1:POW:LIM:AMPL?", "30.0", "float"),
             _prop("rf", "OUTP1:STAT {:d}", "OUTP1:STAT?", "0", "int"),
             _prop("waveform", "SOUR1:BB:ARB:WAV:SEL {:s}", "SOUR1:BB:ARB:WAV:SEL?", "none", "str"),
             _prop("clock", "SOUR1:BB:ARB:CLOC {:f}", "SOUR1:BB:ARB:CLOC?", "1000000.0", "float"),
             _prop("arb", "SOUR1:BB:ARB:STAT {:d}", "SOUR1:BB:ARB:STAT?", "0", "int")]
    return "\n".join([
        "  smw:", _EOM.rstrip("\n"), "    dialogues:",
        f'      - q: "*IDN?"\n        r: "{IDN_GENERATOR}"', '      - q: "*OPC?"\n        r: "1"',
        _no_answer("*RST", "*CLS", "SOUR1:BB:ARB:TRIG:OUTP1:MODE REST"),
        "    properties:", *props])


def _analyzer_yaml(name: str, capture_text: str | None, n: int) -> str:
    dialogues = [f'      - q: "*IDN?"\n        r: "{IDN_ANALYZER}"', '      - q: "*OPC?"\n        r: "1"',
                 _no_answer("*RST", "*CLS", "INST:SEL IQ", "INIT:CONT OFF", "TRIG:SOUR EXT",
                            "TRAC:IQ:DATA:FORM IQP", "FORM ASC", "INIT:IMM")]
    if capture_text is not None:
        dialogues.append(f'      - q: "{RS_FSW.fetch.format(n=n)}"\n        r: "{capture_text}"')
    props = [_prop("center", "FREQ:CENT {:f}", "FREQ:CENT?", "1000000000.0", "float"),
             _prop("ref_level", "DISP:TRAC:Y:SCAL:RLEV {:f}", "DISP:TRAC:Y:SCAL:RLEV?", "0.0", "float"),
             _prop("sample_rate", "TRAC:IQ:SRAT {:f}", "TRAC:IQ:SRAT?", "32000000.0", "float"),
             _prop("record_length", "TRAC:IQ:RLEN {:d}", "TRAC:IQ:RLEN?", "1001", "int")]
    return "\n".join([f"  {name}:", _EOM.rstrip("\n"), "    dialogues:", *dialogues, "    properties:", *props])


def sim_capture(x: np.ndarray, level_dbm: float, *, delay_samples: float = 3.37, snr_db: float = 40.0,
                seed: int = 0) -> np.ndarray:
    """The fixed capture of the simulated analyzer: ``x`` (any scale) played at ``level_dbm`` RMS through the
    default memory-polynomial PA (virtual.py), complex √mW, ``x.size`` samples."""
    bench = VirtualBench(MemoryPolynomialPA(), delay_samples=delay_samples, snr_db=snr_db, seed=seed)
    bench.waveform, bench.level_dbm, bench.rf_on, bench.playing = np.asarray(x, complex), level_dbm, True, True
    return bench.output(x.size, 1.0)


def write_sim_yaml(path: str | Path, capture: np.ndarray) -> Path:
    """Write the pyvisa-sim definition of the three resources (module docstring) to ``path`` (atomically); the
    analyzer answers the fetch of ``capture.size`` samples with ``capture`` (√mW, converted to the FSW's V)."""
    z = np.asarray(capture, dtype=np.complex128).reshape(-1) / np.sqrt(RS_FSW.mw_per_v2)
    pairs = np.empty(2 * z.size)
    pairs[0::2], pairs[1::2] = z.real, z.imag
    text = ",".join(f"{v:.7e}" for v in pairs)
    doc = "\n".join(['spec: "1.1"', "devices:", _generator_yaml(), _analyzer_yaml("fsw", text, z.size),
                     _analyzer_yaml("fsw_silent", None, z.size), "resources:",
                     f"  {GENERATOR}:\n    device: smw", f"  {ANALYZER}:\n    device: fsw",
                     f"  {SILENT_ANALYZER}:\n    device: fsw_silent", ""])
    return atomic_write_text(Path(path), doc)


def prepare_sim(folder: str | Path, x: np.ndarray, level_dbm: float) -> tuple[Path, Path]:
    """(the YAML definition, the generator's share folder) of a simulated bench in ``folder``, whose analyzer
    answers one period of ``x`` (any scale) played at ``level_dbm`` RMS through the default PA. The simulated
    analyzer answers a fetch of exactly ``x.size`` samples: a loop against it captures one period (averages 1)."""
    folder = Path(folder)
    share = folder / "share"
    share.mkdir(parents=True, exist_ok=True)
    z = np.asarray(x, dtype=np.complex128)
    z = z * 10 ** (level_dbm / 20) / np.sqrt(np.mean(np.abs(z) ** 2))
    return write_sim_yaml(folder / "instruments.yaml", sim_capture(z, level_dbm)), share
