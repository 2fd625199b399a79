"""Test faults in queued runs' children (dpd_desktop/lab/faults.py) for the tests that reach the supervisor through
the command line, a sweep or the window: every Supervisor made while the test runs hands them to its children."""
from __future__ import annotations

from dpd_desktop.lab.faults import parse_faults
from dpd_desktop.lab.supervisor import Supervisor


def inject_child_faults(monkeypatch, spec: str) -> None:
    """From now on until the test ends, Supervisor(...) defaults to ``faults=parse_faults(spec)``."""
    init, faults = Supervisor.__init__, parse_faults(spec)

    def with_faults(self, *args, **kw):
        init(self, *args, **{"faults": faults, **kw})

    monkeypatch.setattr(Supervisor, "__init__", with_faults)
