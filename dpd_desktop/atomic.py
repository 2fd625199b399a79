"""Atomic file writes: a temporary file in the same folder, flushed, fsynced and moved into place with ``os.replace``
(then the folder fsynced), so a crash never leaves a half-written file: readers see the old file or the new one. The
one atomic writer of the package (run folders, datasets, kernel caches, exports, plots).

Errors: :class:`ArtifactWriteError` (an ``OSError``) naming the file and the system's reason.
"""
from __future__ import annotations

import errno
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np


def current_umask() -> int:
    """The process umask, read without changing it where possible (``/proc/self/status`` on Linux); elsewhere
    the value seen when this module was imported (reading it portably means setting it, which is not
    thread-safe)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return _IMPORT_UMASK


def _read_umask_once() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old


_IMPORT_UMASK = _read_umask_once()


class ArtifactWriteError(OSError):
    """An artifact could not be written (disk full, permission, I/O error): ``str()`` is
    ``"<file name>: cannot write: <reason>"`` (e.g. ``results.h5: cannot write: No space left on device``); ``path``
    is the artifact's full path, ``errno`` the system's error number. The temporary file is gone by then and the
    previous version of the artifact (if any) is untouched."""

    def __init__(self, path: str | Path, exc: BaseException):
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        super().__init__(getattr(exc, "errno", None), reason)
        self.path = Path(path)
        self.filename = str(self.path)
        self.message = f"{self.path.name}: cannot write: {reason}"

    def __str__(self) -> str:
        return self.message


def fsync_dir(folder: str | Path) -> None:
    """fsync a folder so that a rename inside it survives a power cut (POSIX; a no-op on Windows, where a folder
    cannot be opened). A file system that cannot sync folders (EINVAL) is accepted as it is."""
    if os.name == "nt":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def atomic_write_via(path: str | Path, writer) -> Path:
    """Let ``writer(tmp_path)`` create the file (writers that want a path: MATLAB files), then fsync it, move it into
    place with ``os.replace`` and fsync the folder. The temporary file sits next to ``path`` and is removed on any
    error; the file gets the mode of an ordinary new file (0o666 minus the umask; ``mkstemp`` makes it 0o600).

    Prefer :func:`atomic_write_bytes` with the file built in memory where the library allows it (HDF5, PNG): a
    library writing to disk itself may not survive a full disk (h5py segfaulted on ENOSPC mid-file).

    Raises:
        ArtifactWriteError: the system refused the write, the sync or the rename (names the file; the previous
            ``path``, if any, is untouched); an error of ``writer`` that is not an OSError propagates as it is.
    """
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        writer(tmp)
        fd = os.open(tmp, os.O_RDWR)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except BaseException as exc:
        if tmp is not None and os.path.exists(tmp):
            try:
                os.unlink(tmp)
            except OSError:
                pass
        if isinstance(exc, OSError) and not isinstance(exc, ArtifactWriteError):
            raise ArtifactWriteError(path, exc) from exc
        raise
    return path


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (:func:`atomic_write_via`); returns the path. Raises
    ArtifactWriteError (disk full, permission, I/O error, ... at any step)."""
    def write(tmp: str) -> None:
        fd = os.open(tmp, os.O_WRONLY)
        try:
            view = memoryview(data)
            while view:  # a short write is continued
                n = os.write(fd, view)
                if n <= 0:
                    raise OSError(errno.EIO, "short write")
                view = view[n:]
        finally:
            os.close(fd)

    return atomic_write_via(path, write)


def atomic_write_text(path: str | Path, text: str) -> Path:
    """UTF-8 text version of :func:`atomic_write_bytes`."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def _json_default(obj: Any):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def _clean_nan(obj: Any):
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean_nan(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean_nan(v) for v in obj]
    return obj


def atomic_write_json(path: str | Path, obj: Any) -> Path:
    """Write ``obj`` as indented JSON (NaN/Inf become null, NumPy scalars become numbers), atomically."""
    obj = json.loads(json.dumps(obj, default=_json_default))
    return atomic_write_text(path, json.dumps(_clean_nan(obj), indent=2, sort_keys=False) + "\n")
