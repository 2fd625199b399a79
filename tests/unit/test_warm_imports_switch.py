"""The warm-import thread lowers Python's GIL switch interval while it imports and restores it after
(dpd_desktop/training/warm_imports.py ``warm_imports_in_background``, ``WARM_IMPORT_SWITCH_S``)."""
from __future__ import annotations

import sys
import threading

import pytest

from dpd_desktop.training import warm_imports as warm_imports


def _run_warm_up(monkeypatch) -> list[float]:
    seen = []

    def record(name, *a, **kw):
        seen.append(sys.getswitchinterval())

    monkeypatch.setattr(warm_imports, "__import__", record, raising=False)
    monkeypatch.setattr(warm_imports, "_done", False)  # once per process: this test's own warm-up
    monkeypatch.setattr(warm_imports, "_running", False)
    before = {t.ident for t in threading.enumerate()}
    warm_imports.warm_imports_in_background()
    for t in threading.enumerate():
        if t.name == "dpd-warm-imports" and t.ident not in before:
            t.join(10)
    return seen


def test_switch_interval_is_lowered_during_the_imports_and_restored(monkeypatch):
    previous = sys.getswitchinterval()
    sys.setswitchinterval(0.004)
    try:
        seen = _run_warm_up(monkeypatch)
        # scipy.signal, scipy.fft, h5py; CPython keeps the interval in whole microseconds
        assert seen == [pytest.approx(warm_imports.WARM_IMPORT_SWITCH_S, abs=1e-9)] * 3
        assert sys.getswitchinterval() == pytest.approx(0.004, abs=1e-9)
    finally:
        sys.setswitchinterval(previous)


def test_an_interval_already_lower_is_left_alone(monkeypatch):
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        seen = _run_warm_up(monkeypatch)
        assert seen == [pytest.approx(1e-5, abs=1e-9)] * 3
        assert sys.getswitchinterval() == pytest.approx(1e-5, abs=1e-9)
    finally:
        sys.setswitchinterval(previous)


def test_once_per_process(monkeypatch):
    """A group's members each ask for the warm-up: the imports are the process's, one thread does them once."""
    gate, names = threading.Event(), []

    def slow(name, *a, **kw):
        gate.wait(10)
        names.append(name)

    monkeypatch.setattr(warm_imports, "__import__", slow, raising=False)
    monkeypatch.setattr(warm_imports, "_done", False)
    monkeypatch.setattr(warm_imports, "_running", False)
    before = {t.ident for t in threading.enumerate()}
    for _ in range(8):
        warm_imports.warm_imports_in_background()
    mine = [t for t in threading.enumerate() if t.name == "dpd-warm-imports" and t.ident not in before]
    gate.set()
    for t in mine:
        t.join(10)
    warm_imports.warm_imports_in_background()  # after it finished: nothing more
    assert len(mine) == 1 and names == ["scipy.signal", "scipy.fft", "h5py"]
    assert not [t for t in threading.enumerate() if t.name == "dpd-warm-imports" and t.ident not in before]
