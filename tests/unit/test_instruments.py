"""The instrument layer without a loop: the R&S waveform file, the SCPI session's blocks, errors and timeouts, the
virtual bench's delay, and the loop's delay estimator against an independent construction."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from dpd_desktop.instruments.errors import InstrumentDead, InstrumentReported, InstrumentTimeout
from dpd_desktop.instruments.profiles import RS_SMW
from dpd_desktop.instruments.rs_wv import FULL_SCALE, decode_wv, encode_wv, wv_checksum
from dpd_desktop.instruments.scpi import VI_ERROR_TMO, ScpiSession, ieee_block, parse_ieee_block
from dpd_desktop.instruments.scpi_drivers import ScpiGenerator
from dpd_desktop.instruments.virtual import apply_delay
from dpd_desktop.loop.align import align, average_periods, estimate_delay


class FakeResource:
    """A pyvisa resource that records what is sent and answers from a table (a callable for the rest)."""

    def __init__(self, answers=None, fail_on=None):
        self.sent: list[bytes | str] = []
        self.answers = dict(answers or {})
        self.fail_on = fail_on or {}
        self.timeout = 0
        self.write_termination = "\n"
        self.errors = ['0,"No error"']

    def _maybe_fail(self, text):
        exc = self.fail_on.get(text)
        if exc is not None:
            raise exc

    def write(self, text):
        self._maybe_fail(text)
        self.sent.append(text)

    def write_raw(self, data):
        self.sent.append(bytes(data))

    def query(self, text):
        self._maybe_fail(text)
        self.sent.append(text)
        if text == "SYST:ERR?":
            return self.errors.pop(0) if len(self.errors) > 1 else self.errors[0]
        return self.answers.get(text, "1")

    def close(self):
        pass


class VisaIOError(Exception):  # the name the session classifies (pyvisa.errors.VisaIOError)
    def __init__(self, code):
        super().__init__(f"VI error {code}")
        self.error_code = code


def test_the_wv_checksum_is_the_manuals_xor_of_32_bit_words():
    data = bytes(range(16))
    expected = 0xA50F74FF
    for i in range(0, 16, 4):
        expected ^= struct.unpack("<I", data[i:i + 4])[0]
    assert wv_checksum(data) == expected
    with pytest.raises(ValueError, match="whole number of 32-bit words"):
        wv_checksum(b"123")


def test_a_wv_file_round_trips_and_states_its_levels():
    rng = np.random.default_rng(1)
    z = rng.standard_normal(1000) + 1j * rng.standard_normal(1000)
    blob = encode_wv(z * 0.3, 640e6)
    assert blob.startswith(b"{TYPE: SMU-WV,") and b"{CLOCK: 640000000.000000}" in blob and b"{SAMPLES: 1000}" in blob
    assert b"{WAVEFORM-4001:#" in blob and blob.endswith(b"}")  # 4 bytes per sample + the '#'
    back, tags = decode_wv(blob)
    ref = z / np.max(np.abs(z))
    assert np.max(np.abs(back - ref)) <= 0.5 / FULL_SCALE * np.sqrt(2) + 1e-12
    rms_off, peak_off = (float(v) for v in tags["LEVEL OFFS"].split(","))
    q = np.round(ref * FULL_SCALE)
    assert rms_off == pytest.approx(20 * np.log10(FULL_SCALE / np.sqrt(np.mean(np.abs(q) ** 2))), abs=1e-5)
    assert abs(peak_off) < 2e-3  # the peak sample is full scale (up to rounding of its I and Q)
    broken = bytearray(blob)
    broken[-3] ^= 0xFF
    with pytest.raises(ValueError, match="checksum"):
        decode_wv(bytes(broken))


def test_ieee_blocks_round_trip():
    payload = bytes(range(256)) * 5
    blk = ieee_block(payload)
    assert blk.startswith(b"#41280")
    assert parse_ieee_block(blk + b"\n") == (payload, b"\n")
    with pytest.raises(ValueError):
        parse_ieee_block(b"#5123")


def test_block_transfer_sends_the_wv_file_as_one_definite_length_block():
    res = FakeResource({"*IDN?": "Rohde&Schwarz,SMW200A,1,5.0"})
    gen = ScpiGenerator(ScpiSession(res, "generator"), RS_SMW, transfer="block")
    z = np.exp(2j * np.pi * np.arange(64) / 16)
    gen.load(z, 100e6, name="t")
    raw = [m for m in res.sent if isinstance(m, bytes)]
    assert len(raw) == 1
    head = b"SOUR1:BB:ARB:WAV:DATA '/var/user/t.wv',"
    assert raw[0].startswith(head) and raw[0].endswith(b"\n")
    payload, rest = parse_ieee_block(raw[0][len(head):])
    assert rest == b"\n" and payload.startswith(b"{TYPE: SMU-WV,")
    back, _ = decode_wv(payload)
    assert np.max(np.abs(back - z)) < 1e-4
    texts = [m for m in res.sent if isinstance(m, str)]
    assert texts == ["SOUR1:BB:ARB:WAV:SEL '/var/user/t.wv'", "SOUR1:BB:ARB:CLOC 100000000.000000", "*OPC?",
                     "SYST:ERR?"]


def test_the_session_turns_visa_faults_into_one_line_errors():
    res = FakeResource(fail_on={"SLOW?": VisaIOError(VI_ERROR_TMO), "GONE": ConnectionResetError("reset by peer")})
    s = ScpiSession(res, "analyzer", timeout_s=2.5)
    with pytest.raises(InstrumentTimeout, match=r"^analyzer: no answer within 2.5 s to 'SLOW\?'$"):
        s.query("SLOW?")
    with pytest.raises(InstrumentDead) as e:
        s.write("GONE")
    assert "\n" not in str(e.value) and "reset by peer" in str(e.value)
    with pytest.raises(InstrumentDead, match="connection lost earlier"):
        s.query("*IDN?")  # dead: nothing more is sent
    assert res.sent == []


def test_the_error_queue_is_drained_and_reported():
    res = FakeResource()
    res.errors = ['-222,"Data out of range"', '-113,"Undefined header"', '0,"No error"']
    s = ScpiSession(res, "generator")
    with pytest.raises(InstrumentReported) as e:
        s.check("SOUR1:POW:LEV:IMM:AMPL 99")
    assert e.value.errors == ['-222,"Data out of range"', '-113,"Undefined header"']
    assert s.log == ["? SYST:ERR?"] * 3


def _bandlimited(n: int, occupancy: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A periodic band-limited signal as a sum of exponentials: (bins, complex amplitudes)."""
    rng = np.random.default_rng(seed)
    half = int(occupancy * n / 2)
    k = np.arange(-half, half + 1)
    return k, rng.standard_normal(k.size) + 1j * rng.standard_normal(k.size)


def _evaluate(k, c, n, t):
    """x(t) = Σ c_k exp(j2πkt/n) evaluated directly at the times t (no FFT)."""
    return np.exp(2j * np.pi * np.outer(t, k) / n) @ c


@pytest.mark.parametrize("tau", [3.37, -7.81, 0.49, 12.02])
def test_the_delay_estimate_is_exact_for_periodic_band_limited_signals(tau):
    n = 2048
    k, c = _bandlimited(n, 0.8, seed=int(abs(tau) * 100))
    t = np.arange(n, dtype=float)
    x, y = _evaluate(k, c, n, t), (0.7 - 0.2j) * _evaluate(k, c, n, t - tau)
    est, ratio = estimate_delay(x, y)
    assert est == pytest.approx(tau, abs=1e-6) and ratio > 10
    ya, al = align(x, y)
    assert al.gain == pytest.approx(0.7 - 0.2j, abs=1e-9) and np.max(np.abs(ya - (0.7 - 0.2j) * x)) < 1e-8
    assert al.integer == round(tau) and al.fraction == pytest.approx(tau - round(tau), abs=1e-6)


def test_the_virtual_delay_is_the_continuous_delay():
    n = 1024
    k, c = _bandlimited(n, 0.5, seed=3)
    t = np.arange(n, dtype=float)
    assert np.max(np.abs(apply_delay(_evaluate(k, c, n, t), 3.37) - _evaluate(k, c, n, t - 3.37))) < 1e-9


def test_period_averaging_divides_the_noise_power_by_the_periods():
    rng = np.random.default_rng(0)
    noise = rng.standard_normal(64 * 1000) + 1j * rng.standard_normal(64 * 1000)
    avg = average_periods(noise, 1000)
    assert np.mean(np.abs(avg) ** 2) == pytest.approx(2 / 64, rel=0.1)
    with pytest.raises(ValueError, match="no whole period"):
        average_periods(noise[:10], 1000)
