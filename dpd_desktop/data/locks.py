"""Whether another process holds a file locked, so that a reader can say "in use by another process" with the path
instead of reading a file that is being written.

On POSIX two lock kinds exist and do not see each other on Linux: ``flock`` (BSD locks; HDF5's file locking, many
programs) and ``fcntl``/``lockf`` record locks. :func:`ensure_unlocked` tries a shared, non-blocking lock of each
kind on the whole file and releases it at once: a conflict means another process holds an exclusive (write) lock.
Without ``fcntl`` (Windows, where an exclusively opened file fails to open anyway) nothing is checked. HDF5 files are
left to h5py, which reports its own lock (data/readers.py): a POSIX record lock taken and released here would drop
the locks this process's HDF5 library holds on the same file.
"""
from __future__ import annotations

import errno
import os
from pathlib import Path

from .errors import DatasetError

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

IN_USE_EXPECTED = "a file no other program is writing: close that program, or wait until it has finished"
_BUSY = (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK)


def ensure_unlocked(path: str | Path, field: str | None = None) -> None:
    """Raise when another process holds an exclusive lock on ``path`` (see the module docstring).

    Raises:
        DatasetError: "in use by another process (it holds a lock on <path>)", naming the file (and ``field``).
            A file that cannot be opened is left to the reader's own error.
    """
    if fcntl is None:
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        for kind, lock, unlock in (("flock", fcntl.flock, fcntl.flock), ("fcntl", fcntl.lockf, fcntl.lockf)):
            try:
                lock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in _BUSY:
                    raise DatasetError(f"in use by another process (it holds a {kind} lock on {path})", path=path,
                                       field=field, expected=IN_USE_EXPECTED) from None
                continue  # a file system without this lock kind: nothing to learn from it
            unlock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
