"""The instrument layer: signal generator and analyzer drivers with SCPI (VISA), simulated (pyvisa-sim) and virtual
backends. No Qt; pyvisa is imported only when a VISA resource is opened (the optional extra ``instruments``).
Interface and units: base.py; instruments from command-line specs: connect.py.
"""
from .base import Analyzer, Generator, Identity, peak_dbm, rms_dbm
from .errors import (InstrumentDead, InstrumentError, InstrumentReported, InstrumentTimeout, InstrumentUnsupported,
                     PowerLimitError)

__all__ = ["Analyzer", "Generator", "Identity", "InstrumentDead", "InstrumentError", "InstrumentReported",
           "InstrumentTimeout", "InstrumentUnsupported", "PowerLimitError", "peak_dbm", "rms_dbm"]
