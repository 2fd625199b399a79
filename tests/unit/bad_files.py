"""Builders of bad input files for tests/unit/test_bad_inputs.py and test_reader_fuzz.py, and a child process that
holds a file locked (flock, lockf, or h5py open for writing) while a test reads it."""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import torch

SINGLE_HEADER = "I_in,Q_in,I_out,Q_out\n"
ROWS = "".join(f"{i * 1e-3:.6f},{i * 2e-3:.6f},{i * 3e-3:.6f},{i * 4e-3:.6f}\n" for i in range(60))
ARCH = {"backbone": "gru", "hidden_size": 4, "num_layers": 1}
EXPERIMENT = {"step": "pa", "backbone": "gru", "hidden_size": 4, "num_layers": 1}


def write(path: Path, data: str | bytes, encoding: str = "utf-8") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode(encoding) if isinstance(data, str) else data)
    return path


def h5_dataset(path: Path, bad: dict | None = None, skip: tuple[str, str] | None = None, n: int = 64) -> Path:
    """An HDF5 dataset in the documented layout; ``bad`` replaces datasets ({"/val/y": array}), ``skip`` drops one."""
    good = np.zeros((n, 2), np.float32)
    with h5py.File(path, "w") as f:
        for s in ("train", "val", "test"):
            g = f.create_group(s)
            for k in ("x", "y"):
                if (s, k) == skip:
                    continue
                g.create_dataset(k, data=(bad or {}).get(f"/{s}/{k}", good))
    return path


def mat_v73(path: Path) -> Path:
    """A MATLAB v7.3 file: a 512-byte MATLAB header (text, version 0x0200, 'IM') then HDF5 (what MATLAB writes)."""
    with h5py.File(path, "w", userblock_size=512) as f:
        f.create_dataset("x", data=np.zeros((8, 2)))
    head = b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Tue Dec  1 10:00:00 2026 HDF5 schema 1.00 ."
    head = head.ljust(116, b" ") + b"\0" * 8 + b"\x00\x02" + b"IM"
    with open(path, "r+b") as fh:
        fh.write(head.ljust(512, b"\0"))
    return path


def checkpoint_bytes(state: dict, meta: dict | None = None, raw: object = None) -> bytes:
    buf = io.BytesIO()
    torch.save(raw if raw is not None else {"state_dict": state, "meta": dict(meta or {})}, buf)
    return buf.getvalue()


class RunsCode:
    """A pickled object whose unpickling would run a shell command (touching ``marker``): weights_only refuses it."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def config_doc(**change) -> str:
    doc = {"format": "dpd-desktop-run-1", "schema": 2, "experiment": dict(EXPERIMENT)}
    for k, v in change.items():
        if k == "experiment" and isinstance(v, dict):
            doc["experiment"].update(v)
        elif v is None:
            doc.pop(k, None)
        else:
            doc[k] = v
    return json.dumps(doc)


_HOLDER = r"""
import fcntl, sys, time
kind, path = sys.argv[1], sys.argv[2]
if kind == "h5py":
    import h5py
    f = h5py.File(path, "a")
else:
    f = open(path, "r+b")
    (fcntl.flock if kind == "flock" else fcntl.lockf)(f, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def held_lock(path: Path, kind: str):
    """Another process holds ``path`` locked while the block runs: ``kind`` "flock", "lockf" or "h5py" (open for
    writing, which takes HDF5's file lock)."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, kind, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        yield proc
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
