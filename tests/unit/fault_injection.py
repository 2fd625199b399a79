"""A fault-injecting file system for the crash-safety tests: the Nth write (``os.write``), sync (``os.fsync``) or
rename (``os.replace``) of one artifact raises the OSError a full disk (or a refused permission, an I/O error) would.

Which artifact a descriptor belongs to is read from ``/proc/self/fd`` (Linux): the writer's temporary files are
named ``.<artifact>.<random>.tmp`` (runs/artifacts.py), so only that artifact's writes fail; every other write of
the process (the test's own output included) goes through untouched.
"""
from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from pathlib import Path


def _fd_name(fd: int) -> str:
    try:
        return os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return ""


def _is_tmp_of(name: str, artifact: str | None) -> bool:
    """``name`` is a temporary file of ``artifact`` (None: of any artifact)."""
    return name.endswith(".tmp") and name.startswith(f".{artifact}." if artifact else ".")


@dataclass
class Fault:
    """Fail the ``nth`` (1-based) attempt to write ``artifact`` (None: any artifact) at ``op`` ("write", "fsync" or
    "replace") with ``err`` (an errno); ``sticky``: every attempt from the ``nth`` on fails (a disk that stays full).
    ``freed_by``: the name of a file whose deletion ends a sticky fault (a full disk that a deleted file makes room
    on: the run writer's space reserve). ``hits`` counts the attempts seen, ``fired`` how many failed."""

    artifact: str | None
    nth: int = 1
    op: str = "write"
    err: int = errno.ENOSPC
    hits: int = 0
    sticky: bool = False
    freed_by: str | None = None
    fired: int = 0
    freed: bool = False
    seen: set = field(default_factory=set)  # temporary files already counted (one attempt = one temporary file)

    def _attempt(self, tmp_name: str) -> bool:
        """True when this attempt (a new temporary file of the artifact) is the one to fail."""
        if tmp_name not in self.seen:
            self.seen.add(tmp_name)
            self.hits += 1
        if self.freed:
            return False
        if self.hits == self.nth or (self.sticky and self.hits > self.nth):
            self.fired += 1
            return True
        return False

    def error(self) -> OSError:
        return OSError(self.err, os.strerror(self.err))


def install(monkeypatch, fault: Fault) -> Fault:
    """Patch os.write / os.fsync / os.replace (and os.unlink, for ``freed_by``) for the test (monkeypatch undoes
    it)."""
    real_write, real_fsync, real_replace, real_unlink = os.write, os.fsync, os.replace, os.unlink

    def write(fd, data):
        if fault.op == "write":
            name = _fd_name(fd)
            if _is_tmp_of(name, fault.artifact) and fault._attempt(name):
                real_write(fd, bytes(data[: max(0, len(data) // 2)]))  # a part got through, as on a real disk
                raise fault.error()
        return real_write(fd, data)

    def fsync(fd):
        if fault.op == "fsync":
            name = _fd_name(fd if isinstance(fd, int) else fd.fileno())
            if _is_tmp_of(name, fault.artifact) and fault._attempt(name):
                raise fault.error()
        return real_fsync(fd)

    def replace(src, dst, *a, **kw):
        if fault.op == "replace":
            name = Path(src).name
            if _is_tmp_of(name, fault.artifact) and fault._attempt(name):
                raise fault.error()
        return real_replace(src, dst, *a, **kw)

    def unlink(path, *a, **kw):
        if fault.freed_by is not None and fault.hits >= fault.nth and os.path.basename(path) == fault.freed_by:
            fault.freed = True
        return real_unlink(path, *a, **kw)

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "unlink", unlink)
    return fault


def leftovers(folder: Path) -> list[str]:
    """Temporary files left anywhere under ``folder``."""
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*.tmp"))
