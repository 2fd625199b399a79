"""Load a dataset in a forked child process while the parent imports PyTorch (command-line start-up).

``dpd-desktop train-pa/train-dpd`` spend ~3 s importing PyTorch before anything else can happen, and parsing a
measured dataset (DPA_160MHz: ~0.3–0.6 s) would otherwise follow it. :class:`DatasetPrefetch` forks before PyTorch
is imported (a small, single-threaded process: fork is safe), the child parses the files with the normal readers
and sends the :class:`~dpd_desktop.data.IQDataset` back through a pipe — a JSON header (name, source, spec) and
the arrays' raw bytes (no pickle: nothing in the stream can run code), ~24 MB for DPA_160MHz, some 20–40 ms — and
the parent collects it once it needs it. Whatever goes wrong in the child (an invalid file, a spec that JSON cannot
carry, a killed child, a truncated stream), :meth:`DatasetPrefetch.result` returns None and the caller loads the
dataset itself, so errors are reported exactly as without prefetching.
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys

_SPLITS = ("train", "val", "test")
_OK, _FAILED = b"DPDPF1OK", b"DPDPF1NO"


def _encode(ds) -> bytes:
    """IQDataset → magic, header length (8 bytes, little-endian), JSON header (name, source, spec, and for each
    array its key, dtype and shape), then the arrays' raw C-order bytes one after the other."""
    arrays = []
    for name in _SPLITS:
        sp = getattr(ds, name)
        for key in ("x", "y", "x64", "y64"):
            a = getattr(sp, key)
            if a is not None:
                arrays.append((f"{name}_{key}", a))
    layout = [[k, a.dtype.str, list(a.shape)] for k, a in arrays]
    header = json.dumps({"name": ds.name, "source": str(ds.source), "spec": dataclasses.asdict(ds.spec),
                         "arrays": layout}, allow_nan=False).encode("utf-8")
    return b"".join([_OK, len(header).to_bytes(8, "little"), header] + [a.tobytes(order="C") for _, a in arrays])


def _decode(data: bytearray):
    """Inverse of :func:`_encode`; the arrays are writable views of ``data`` (no pickle, no copy). None for a
    failure marker."""
    from pathlib import Path

    import numpy as np

    from .readers import IQDataset, Split
    from .spec import DatasetSpec

    if bytes(data[:8]) != _OK:
        return None
    n = int.from_bytes(data[8:16], "little")
    head = json.loads(bytes(data[16:16 + n]).decode("utf-8"))
    arrays, off, view = {}, 16 + n, memoryview(data)
    for key, dtype, shape in head["arrays"]:
        dt = np.dtype(dtype)
        count = int(np.prod(shape))
        if off + count * dt.itemsize > len(data):
            raise ValueError("prefetch payload has trailing or missing bytes")
        arrays[key] = np.frombuffer(view[off:off + count * dt.itemsize], dtype=dt).reshape(shape)
        off += count * dt.itemsize
    if off != len(data):
        raise ValueError("prefetch payload has trailing or missing bytes")
    splits = {name: Split(arrays[f"{name}_x"], arrays[f"{name}_y"], x64=arrays.get(f"{name}_x64"),
                          y64=arrays.get(f"{name}_y64")) for name in _SPLITS}
    return IQDataset(name=head["name"], source=Path(head["source"]), spec=DatasetSpec(**head["spec"]), **splits)


class DatasetPrefetch:
    """Start parsing ``spec`` (a dataset path) in a child process now; :meth:`result` collects it.

    No child is started (``result()`` → None) for the embedded ``"demo"`` data, on platforms without ``fork``, or
    when PyTorch is already imported in this process (forking a process with PyTorch's threads is not safe).
    """

    def __init__(self, spec: str):
        self.pid: int | None = None
        self._fd: int | None = None
        if spec == "demo" or not hasattr(os, "fork") or "torch" in sys.modules:
            return
        try:
            r, w = os.pipe()
            pid = os.fork()
        except OSError:
            return
        if pid == 0:  # child: parse, send, exit without running the parent's clean-up
            code = 0
            try:
                os.close(r)
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl+C
                try:  # and counts it: the inherited wakeup socket (cli's Ctrl+C watchdog) is the parent's alone
                    signal.set_wakeup_fd(-1)
                except (ValueError, OSError):
                    pass
                try:
                    from . import load_dataset

                    payload = _encode(load_dataset(spec))
                except BaseException:  # noqa: BLE001 - the parent re-loads and reports the error itself
                    payload = _FAILED
                with os.fdopen(w, "wb") as fh:
                    fh.write(payload)
            except BaseException:  # noqa: BLE001 - e.g. the parent went away (broken pipe)
                code = 1
            finally:
                os._exit(code)
        os.close(w)
        self.pid, self._fd = pid, r

    def result(self):
        """The loaded dataset, or None when the caller must load it itself. Waits for the child; call once."""
        if self._fd is None:
            return None
        fd, self._fd = self._fd, None
        try:
            with os.fdopen(fd, "rb") as fh:
                data = bytearray(fh.read())
            return _decode(data)
        except Exception:  # noqa: BLE001 - truncated or unreadable payload: load in-process instead
            return None
        finally:
            self._reap()

    def cancel(self) -> None:
        """Stop the child (if any) and release the pipe."""
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
            self._reap()

    def _reap(self) -> None:
        if self.pid is not None:
            try:
                os.waitpid(self.pid, 0)
            except OSError:
                pass
            self.pid = None
