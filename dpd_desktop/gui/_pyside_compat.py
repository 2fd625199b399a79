"""Work-around for a PySide6 defect that matters to a long-running app.

``None`` refcount leak (PySide6 6.12.0 on CPython < 3.12): every call of a C++ method that returns ``void`` hands
Python a ``None`` without a new reference, so ``None``'s refcount drops by one per call (about ten per pyqtgraph
``setData``). On 3.12+ ``None`` is immortal and nothing shows; on 3.11 the interpreter aborts after some tens of
thousands of calls with "Fatal Python error: none_dealloc" — within a minute of live plotting.
:func:`guard_none_refcount` measures the leak once and, when present, lifts ``None``'s refcount by 2**48 so it can
never reach zero (what CPython 3.12 achieves by making ``None`` immortal). A PySide6 without the bug, or
Python >= 3.12, makes it a no-op.
"""
from __future__ import annotations

import ctypes
import sys

_none_guarded = False
NONE_REFCOUNT_LIFT = 1 << 48


def pyside_leaks_none(calls: int = 200) -> bool:
    """True when calling a void C++ method through PySide6 lowers ``None``'s refcount (the 6.12.0 bug)."""
    if sys.version_info >= (3, 12):  # None is immortal
        return False
    from PySide6.QtCore import QObject

    obj = QObject()
    obj.setObjectName("probe")
    before = sys.getrefcount(None)
    for _ in range(calls):
        obj.setObjectName("probe")
    after = sys.getrefcount(None)
    return before - after >= calls // 2


def guard_none_refcount() -> bool:
    """Make ``None`` effectively immortal when PySide6 leaks its references. True when the guard was applied."""
    global _none_guarded
    if _none_guarded:
        return True
    if not pyside_leaks_none():
        return False
    if hasattr(sys, "gettotalrefcount"):  # debug build: different object header, leave it alone
        return False
    ctypes.c_ssize_t.from_address(id(None)).value += NONE_REFCOUNT_LIFT
    _none_guarded = True
    return True
