"""The instrument layer: drivers for a signal generator and a signal analyzer, with SCPI (VISA), simulated
(pyvisa-sim) and virtual (a virtual PA between them) backends. No Qt; pyvisa is imported only when a VISA resource
is opened (the optional extra ``instruments``).

Why a package of its own (not under ``training`` or a ``lab`` layer): instruments are a core concern beside data
and models, used by the loop (dpd_desktop/loop), the command line and the window alike; the planned ``lab`` layer
(queue and supervisor above training) runs training jobs and has no business knowing SCPI.

    base.py        the interface (Generator, Analyzer, Identity), units (√mW, dBm)
    errors.py      one-line errors (timeout, dead, reported, power limit)
    scpi.py        an SCPI session over pyvisa: logging, timeouts, error queue, IEEE 488.2 blocks
    profiles.py    command strings: generic SCPI-99, R&S SMW200A, R&S FSW (cited)
    rs_wv.py       the R&S waveform file (.wv)
    scpi_drivers.py  ScpiGenerator, ScpiAnalyzer
    sim.py         pyvisa-sim definitions answering the same SCPI
    virtual.py     the virtual bench: a memory-polynomial PA or a trained PA run, noise, drift, fractional delay
    connect.py     instruments from command-line specs ("virtual", "sim", "visa:RESOURCE")
"""
from .base import Analyzer, Generator, Identity, peak_dbm, rms_dbm
from .errors import (InstrumentDead, InstrumentError, InstrumentReported, InstrumentTimeout, InstrumentUnsupported,
                     PowerLimitError)

__all__ = ["Analyzer", "Generator", "Identity", "InstrumentDead", "InstrumentError", "InstrumentReported",
           "InstrumentTimeout", "InstrumentUnsupported", "PowerLimitError", "peak_dbm", "rms_dbm"]
