"""The SCPI drivers through real pyvisa + pyvisa-py over a TCP socket, against a small SCPI server on the loopback
interface (127.0.0.1, started and stopped by the test, nothing else contacted): identify, RF on/off, the generic
profile refusing waveforms, a server that stops answering or closes (one line each), a port nobody listens on."""
from __future__ import annotations

import socket
import threading

import numpy as np
import pytest

from dpd_desktop.instruments.errors import InstrumentDead, InstrumentTimeout, InstrumentUnsupported
from dpd_desktop.instruments.profiles import GENERIC, RS_SMW
from dpd_desktop.instruments.scpi import open_visa
from dpd_desktop.instruments.scpi_drivers import ScpiGenerator


class LoopbackScpi:
    """A line-based SCPI responder on 127.0.0.1 for one connection; ``mode``: "ok", "silent" (reads, never
    answers), "close" (closes the connection at the first query after ``*IDN?``)."""

    def __init__(self, mode: str = "ok"):
        self.mode = mode
        self.received: list[str] = []
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(1)
        self.srv.settimeout(10)
        self.port = self.srv.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self.srv.accept()
        except OSError:
            return
        conn.settimeout(10)
        buf = b""
        with conn:
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    text = line.decode("ascii", "replace")
                    self.received.append(text)
                    if not text.endswith("?"):
                        continue
                    if text == "*IDN?":
                        conn.sendall(b"Rohde&Schwarz,SMW200A,1412.0000K02/101,5.00 (loopback)\n")
                    elif self.mode == "close":
                        return
                    elif self.mode == "silent":
                        continue
                    elif text == "SYST:ERR?":
                        conn.sendall(b'0,"No error"\n')
                    else:
                        conn.sendall(b"1\n")

    def close(self) -> None:
        self.srv.close()
        self.thread.join(5)


@pytest.fixture
def server(request):
    s = LoopbackScpi(getattr(request, "param", "ok"))
    yield s
    s.close()


def _generator(server, profile=RS_SMW, timeout_s=2.0):
    session = open_visa(f"TCPIP0::127.0.0.1::{server.port}::SOCKET", backend="@py", name="generator",
                        timeout_s=timeout_s)
    return ScpiGenerator(session, profile)


def test_pyvisa_py_drives_the_generator_over_a_socket(server):
    gen = _generator(server)
    try:
        ident = gen.identify()
        assert (ident.manufacturer, ident.model) == ("Rohde&Schwarz", "SMW200A")
        gen.rf(True)
        assert gen.rf_is_on
        assert gen.mute() is None and not gen.rf_is_on
    finally:
        gen.close()
    server.thread.join(5)
    assert server.received == ["*IDN?", "OUTP1:STAT 1", "*OPC?", "SYST:ERR?", "OUTP1:STAT 0", "*OPC?", "SYST:ERR?"]


def test_the_generic_profile_refuses_waveforms(server):
    gen = _generator(server, profile=GENERIC)
    try:
        assert gen.identify().model == "SMW200A"
        gen.set_frequency(1e9)  # SCPI-99 FREQ:CW works
        with pytest.raises(InstrumentUnsupported, match="has no ARB waveform commands"):
            gen.load(np.ones(16, complex), 1e6)
    finally:
        gen.close()
    server.thread.join(5)
    assert server.received[:2] == ["*IDN?", "FREQ:CW 1000000000.000000"]


@pytest.mark.parametrize("server", ["silent"], indirect=True)
def test_a_generator_that_stops_answering_times_out_in_one_line(server):
    gen = _generator(server, timeout_s=0.4)
    try:
        gen.identify()
        with pytest.raises(InstrumentTimeout) as e:
            gen.rf(True)
        assert str(e.value) == "generator (Rohde&Schwarz SMW200A): no answer within 0.4 s to '*OPC?'"
        assert gen.rf_is_on  # counted on: whoever handles the error mutes it
    finally:
        gen.close()


@pytest.mark.parametrize("server", ["close"], indirect=True)
def test_a_closed_connection_ends_in_one_line(server):
    """pyvisa-py reads a socket closed by the instrument as no answer: a timeout (a refused or reset connection is
    InstrumentDead, test_instruments.py)."""
    gen = _generator(server, timeout_s=1.0)
    try:
        gen.identify()
        with pytest.raises(InstrumentTimeout) as e:
            gen.rf(False)
        assert str(e.value) == "generator (Rohde&Schwarz SMW200A): no answer within 1 s to '*OPC?'"
    finally:
        gen.close()


def test_a_port_nobody_listens_on_is_a_dead_instrument():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # free again: a connection is refused (pyvisa-py connects at the first message)
    session = open_visa(f"TCPIP0::127.0.0.1::{port}::SOCKET", backend="@py", name="analyzer", timeout_s=1.0)
    with pytest.raises(InstrumentDead) as e:
        session.query("*IDN?")
    assert str(e.value).startswith("analyzer: does not respond to '*IDN?' (ConnectionRefusedError: ")
    assert "\n" not in str(e.value)
    with pytest.raises(InstrumentDead, match="connection lost earlier"):
        session.write("OUTP1:STAT 0")
    session.close()
