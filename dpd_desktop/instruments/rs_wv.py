"""The Rohde & Schwarz waveform file (``.wv``, "SMU-WV") that an SMW's ARB plays, written and read back.

Format (R&S SMW200A User Manual 1175.6632.02, "Tag file format" / "Common tags" / "Tags for single and multi-segment
waveforms"): a sequence of ``{NAME: data}`` tags, the first ``{TYPE: SMU-WV,<checksum>}``; here also ``COMMENT``,
``DATE`` (``yyyy-mm-dd;hh:mm:ss``), ``CLOCK`` (Hz), ``LEVEL OFFS: <RMS offset dB>,<peak offset dB>`` (the RMS and
peak levels below 16-bit full scale |I + jQ| = 32767; the instrument's RF level is the RMS level), ``SAMPLES`` and
``{WAVEFORM-<length>:#<I0 Q0 I1 Q1 …>}`` with signed 16-bit little-endian I/Q pairs and ``length`` the bytes from
the colon to the closing brace (4·N + 1 for the ``#`` and N samples). Checksum: XOR of the waveform data's 32-bit
little-endian words, starting from 0xA50F74FF (the manual's ``checksum()``).
"""
from __future__ import annotations

import re
import time

import numpy as np

from ..metrics.transfer import as_complex

__all__ = ["FULL_SCALE", "encode_wv", "decode_wv", "wv_checksum"]

FULL_SCALE = 32767
_SEED = 0xA50F74FF


def wv_checksum(data: bytes) -> int:
    """The TYPE tag's checksum of the WAVEFORM data bytes (length a multiple of 4)."""
    if len(data) % 4:
        raise ValueError(f"waveform data of {len(data)} bytes is not a whole number of 32-bit words")
    words = np.frombuffer(data, dtype="<u4")
    return int(np.bitwise_xor.reduce(words, initial=np.uint32(_SEED)))


def encode_wv(iq: np.ndarray, clock_hz: float, comment: str = "DPD Desktop loop") -> bytes:
    """The .wv file of the complex waveform ``iq`` (any scale: scaled so that max|iq| is full scale, peak offset
    0 dB). Raises ValueError for an empty, all-zero or non-finite waveform."""
    z = np.asarray(iq, dtype=np.complex128).reshape(-1)
    if z.size == 0 or not np.all(np.isfinite(z)):
        raise ValueError("the waveform is empty or holds non-finite samples")
    peak = float(np.max(np.abs(z)))
    if peak <= 0:
        raise ValueError("the waveform is all zero")
    s = z / peak * FULL_SCALE
    pairs = np.empty((z.size, 2), dtype="<i2")
    pairs[:, 0] = np.clip(np.round(s.real), -FULL_SCALE, FULL_SCALE)
    pairs[:, 1] = np.clip(np.round(s.imag), -FULL_SCALE, FULL_SCALE)
    data = pairs.tobytes()
    q = pairs.astype(np.float64)
    rms = float(np.sqrt(np.mean(q[:, 0] ** 2 + q[:, 1] ** 2)))
    pk = float(np.sqrt(np.max(q[:, 0] ** 2 + q[:, 1] ** 2)))
    rms_off = 20 * np.log10(FULL_SCALE / rms)
    pk_off = 20 * np.log10(FULL_SCALE / pk)
    head = (f"{{TYPE: SMU-WV,{wv_checksum(data)}}}{{COMMENT: {comment}}}"
            f"{{DATE: {time.strftime('%Y-%m-%d;%H:%M:%S')}}}{{CLOCK: {clock_hz:.6f}}}"
            f"{{LEVEL OFFS: {rms_off:.6f},{pk_off:.6f}}}{{SAMPLES: {z.size}}}"
            f"{{WAVEFORM-{len(data) + 1}:#")
    return head.encode("ascii") + data + b"}"


def decode_wv(blob: bytes) -> tuple[np.ndarray, dict[str, str]]:
    """(complex128 samples scaled to full scale 1.0, the text tags) of a single-segment .wv file.

    Raises ValueError: no TYPE tag first, no WAVEFORM tag, a length that disagrees with the data, a bad checksum."""
    if not blob.startswith(b"{TYPE: SMU-WV"):
        raise ValueError("not an R&S waveform file: it must start with {TYPE: SMU-WV,...}")
    m = re.search(rb"\{WAVEFORM-(\d+):#", blob)
    if m is None:
        raise ValueError("no {WAVEFORM-<length>:#...} tag")
    n_bytes = int(m.group(1)) - 1
    start = m.end()
    data = blob[start:start + n_bytes]
    if len(data) != n_bytes or blob[start + n_bytes:start + n_bytes + 1] != b"}":
        raise ValueError(f"the WAVEFORM tag announces {n_bytes} data bytes, the file disagrees")
    tags = {k.decode(): v.decode().strip() for k, v in re.findall(rb"\{([A-Z ]+):\s*([^}]*)\}", blob[:m.start()])}
    checksum = tags.get("TYPE", "").split(",")[-1].strip()
    if checksum.isdigit() and int(checksum) != 0 and int(checksum) != wv_checksum(data):
        raise ValueError(f"checksum {checksum} does not match the data ({wv_checksum(data)})")
    pairs = np.frombuffer(data, dtype="<i2").reshape(-1, 2).astype(np.float64) / FULL_SCALE
    return as_complex(pairs), tags
