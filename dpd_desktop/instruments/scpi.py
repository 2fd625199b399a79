"""SCPI over VISA: one session per instrument, every message logged, VISA faults turned into one-line errors.

:class:`ScpiSession` wraps a pyvisa ``MessageBasedResource`` (or any object with ``write``, ``query``,
``write_raw``, ``read_raw``, ``query_binary_values``, ``timeout`` in ms and ``close``: tests pass recording fakes).
:attr:`ScpiSession.log` holds the messages in order (``"> TEXT"`` written, ``"? TEXT"`` queried,
``"> TEXT #<block of N bytes>"`` for binary blocks).

Faults: a VISA timeout (``VI_ERROR_TMO``, pyvisa's ``VisaIOError``) → :class:`InstrumentTimeout`; any other VISA
or connection error (a closed socket, a resource that vanished) → :class:`InstrumentDead`; once dead, every later
call raises at once without touching the transport. :meth:`check` reads the error queue (``SYSTem:ERRor?``, SCPI-99
vol. 2 §19.7: ``<code>,"<text>"``, 0 meaning none) and raises :class:`InstrumentReported` when it held errors.

Binary blocks: IEEE 488.2 §7.7.6 definite-length arbitrary block ``#<d><len><bytes>`` (``d`` = digits of ``len``).

:func:`open_visa` opens a resource with pyvisa and pyvisa-py (``@py``, no vendor VISA needed) or pyvisa-sim
(``<yaml>@sim``); pyvisa is the optional extra ``instruments`` (``pip install dpd-desktop[instruments]``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import InstrumentDead, InstrumentError, InstrumentReported, InstrumentTimeout

__all__ = ["ScpiSession", "open_visa", "ieee_block", "parse_ieee_block", "VI_ERROR_TMO", "VISA_MISSING"]

#: VISA's timeout status (VPP-4.3 ``VI_ERROR_TMO`` = 0xBFFF0015 as a signed 32-bit integer)
VI_ERROR_TMO = -1073807339
VISA_MISSING = ("pyvisa is not installed: install the optional extra 'instruments' (pip install "
                "'dpd-desktop[instruments]': pyvisa, pyvisa-py, pyvisa-sim)")
_NO_ERROR_CODES = ("0", "+0")


def ieee_block(payload: bytes) -> bytes:
    """``payload`` as an IEEE 488.2 definite-length block: ``b"#" + digits + length + payload``."""
    n = str(len(payload)).encode("ascii")
    if len(n) > 9:
        raise ValueError(f"a definite-length block holds at most 999,999,999 bytes, got {len(payload)}")
    return b"#" + str(len(n)).encode("ascii") + n + payload


def parse_ieee_block(data: bytes) -> tuple[bytes, bytes]:
    """Split ``data`` that starts with a definite-length block into (payload, rest). Raises ValueError."""
    if not data.startswith(b"#") or len(data) < 2 or not chr(data[1]).isdigit() or data[1:2] == b"0":
        raise ValueError("not an IEEE 488.2 definite-length block (expected '#<digits><length>')")
    d = int(chr(data[1]))
    head = 2 + d
    n = int(data[2:head].decode("ascii"))
    if len(data) < head + n:
        raise ValueError(f"block announces {n} bytes, {len(data) - head} present")
    return data[head:head + n], data[head + n:]


def _is_timeout(exc: BaseException) -> bool:
    return getattr(exc, "error_code", None) == VI_ERROR_TMO or type(exc).__name__ in ("TimeoutError",
                                                                                       "socket.timeout")


def _is_transport_error(exc: BaseException) -> bool:
    """A VISA I/O error or a broken connection (not a programming error of ours)."""
    return (type(exc).__name__ in ("VisaIOError", "InvalidSession", "VisaIOWarning")
            or isinstance(exc, (OSError, ConnectionError, EOFError)))


class ScpiSession:
    """One instrument's SCPI session (module docstring). ``name`` labels every error ("generator", "analyzer")."""

    def __init__(self, resource: Any, name: str, timeout_s: float = 10.0):
        self.resource = resource
        self.name = name
        self.label = name
        self.log: list[str] = []
        self.dead: str | None = None
        self.timeout_s = float(timeout_s)
        self._set_timeout(self.timeout_s)

    # ---------------------------------------------------------------- plumbing
    def _set_timeout(self, seconds: float) -> None:
        try:
            self.resource.timeout = int(round(seconds * 1000))
        except Exception:  # noqa: BLE001 - a fake without a timeout attribute
            pass

    def _call(self, what: str, fn, *args):
        if self.dead is not None:
            raise InstrumentDead(self.label, f"connection lost earlier ({self.dead}); not sending {what!r}")
        try:
            return fn(*args)
        except InstrumentError:
            raise
        except Exception as exc:  # noqa: BLE001 - classified below
            if _is_timeout(exc):
                raise InstrumentTimeout(self.label, f"no answer within {self.timeout_s:g} s to {what!r}") from exc
            if _is_transport_error(exc):
                self.dead = f"{type(exc).__name__}: {exc}"
                raise InstrumentDead(self.label, f"does not respond to {what!r} ({self.dead})") from exc
            raise

    # ---------------------------------------------------------------- messages
    def write(self, text: str) -> None:
        self.log.append(f"> {text}")
        self._call(text, self.resource.write, text)

    def query(self, text: str, timeout_s: float | None = None) -> str:
        self.log.append(f"? {text}")
        if timeout_s is not None and timeout_s != self.timeout_s:
            self._set_timeout(timeout_s)
            try:
                return str(self._call(text, self.resource.query, text)).strip()
            finally:
                self._set_timeout(self.timeout_s)
        return str(self._call(text, self.resource.query, text)).strip()

    def write_block(self, head: str, payload: bytes) -> None:
        """``head`` followed by ``payload`` as a definite-length block and the write termination."""
        self.log.append(f"> {head}#<block of {len(payload)} bytes>")
        term = getattr(self.resource, "write_termination", "\n") or ""
        msg = head.encode("ascii") + ieee_block(payload) + term.encode("ascii")
        self._call(head + "#<block>", self.resource.write_raw, msg)

    def query_floats(self, text: str, binary: bool, timeout_s: float | None = None) -> np.ndarray:
        """A query answered by float32 values: a REAL,32 definite-length block (little-endian, the instruments'
        default byte order) when ``binary``, else comma-separated ASCII. Returns float64 (K,)."""
        self.log.append(f"? {text}")
        if timeout_s is not None:
            self._set_timeout(timeout_s)
        try:
            if binary:
                vals = self._call(text, lambda: self.resource.query_binary_values(
                    text, datatype="f", is_big_endian=False, container=np.array))
                return np.asarray(vals, dtype=np.float64)
            raw = str(self._call(text, self.resource.query, text))
        finally:
            if timeout_s is not None:
                self._set_timeout(self.timeout_s)
        try:
            return np.array([float(t) for t in raw.replace("\n", ",").split(",") if t.strip()], dtype=np.float64)
        except ValueError as exc:
            raise InstrumentError(self.label, f"answer to {text!r} is not a list of numbers "
                                  f"({raw[:60]!r}...)") from exc

    # ---------------------------------------------------------------- the error queue
    def errors(self, limit: int = 32) -> list[str]:
        """Drain ``SYST:ERR?`` until it says none (at most ``limit`` entries)."""
        out: list[str] = []
        for _ in range(limit):
            ans = self.query("SYST:ERR?")
            code = ans.split(",", 1)[0].strip()
            if code in _NO_ERROR_CODES:
                break
            out.append(ans)
        return out

    def check(self, after: str) -> None:
        """Raise :class:`InstrumentReported` when the error queue holds errors (``after`` names the step)."""
        errs = self.errors()
        if errs:
            raise InstrumentReported(self.label, errs, after)

    def opc(self, timeout_s: float | None = None) -> None:
        """Wait for the pending operations (``*OPC?`` answered 1, IEEE 488.2 §10.19)."""
        ans = self.query("*OPC?", timeout_s=timeout_s)
        if ans.strip().lstrip("+") != "1":
            raise InstrumentError(self.label, f"*OPC? answered {ans!r}, expected 1")

    def close(self) -> None:
        try:
            self.resource.close()
        except Exception:  # noqa: BLE001 - closing a dead connection
            pass


def open_visa(resource_name: str, *, backend: str = "@py", name: str = "instrument",
              timeout_s: float = 10.0) -> ScpiSession:
    """Open ``resource_name`` (e.g. ``TCPIP0::192.168.1.20::hislip0::INSTR``) with pyvisa on ``backend``
    (``"@py"``: pyvisa-py; ``"<file.yaml>@sim"``: pyvisa-sim) and return its :class:`ScpiSession`; termination
    ``\\n`` both ways. Raises InstrumentDead (one line) when pyvisa is missing or the resource cannot be opened."""
    try:
        import pyvisa  # the optional extra 'instruments'
    except ImportError as exc:
        raise InstrumentDead(name, VISA_MISSING) from exc
    try:
        rm = pyvisa.ResourceManager(backend)
        res = rm.open_resource(resource_name, read_termination="\n", write_termination="\n")
    except Exception as exc:  # noqa: BLE001 - pyvisa raises many kinds; all mean "cannot open"
        raise InstrumentDead(name, f"cannot open {resource_name} ({type(exc).__name__}: {exc})") from exc
    return ScpiSession(res, name, timeout_s=timeout_s)
