"""Who runs a training: the process identity recorded in ``status.json`` and the test that tells a live run from one
whose process was killed (a pid alone is not enough: pids are reused)."""
from __future__ import annotations

import os
import socket
from typing import Any


def process_start_ticks(pid: int) -> int | None:
    """Start time of process ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field 22); None where
    ``/proc`` does not exist or the process is gone. With the pid it identifies a process (pids are reused)."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
        # the command name (field 2) is in parentheses and may hold spaces: split after the last ')'
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def process_identity() -> dict[str, Any]:
    """What ``status.json`` records of the process that runs a training: ``pid``, ``host`` and
    ``process_start`` (see :func:`process_start_ticks`; None where ``/proc`` does not exist)."""
    pid = os.getpid()
    return {"pid": pid, "host": socket.gethostname(), "process_start": process_start_ticks(pid)}


def _pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (signal 0; a permission error means it exists)."""
    if pid <= 0:
        return False
    if os.name == "nt":  # os.kill(pid, 0) would terminate the process on Windows
        try:
            import ctypes

            h = ctypes.windll.kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
            if not h:
                return False
            code = ctypes.c_ulong()
            ctypes.windll.kernel32.GetExitCodeProcess(h, ctypes.byref(code))
            ctypes.windll.kernel32.CloseHandle(h)
            return code.value == 259  # STILL_ACTIVE
        except Exception:  # noqa: BLE001 - unknown: assume alive
            return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # OverflowError: a pid beyond the system's range (a damaged file)
        return False
    except OSError:  # PermissionError: it exists
        return True
    return True


def owner_gone(status: dict[str, Any]) -> bool:
    """True when ``status`` records a training process on this host that no longer exists (killed, crashed) or
    whose pid now belongs to another process (different start time). Unknown → False."""
    pid, host = status.get("pid"), status.get("host")
    if not isinstance(pid, int) or isinstance(pid, bool) or host != socket.gethostname():
        return False
    if not _pid_alive(pid):
        return True
    recorded = status.get("process_start")
    if isinstance(recorded, int) and os.path.isdir("/proc"):
        now = process_start_ticks(pid)
        return now is not None and now != recorded
    return False
