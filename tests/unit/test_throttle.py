"""timing.Throttle: the one rate limit of progress updates (trainer, command line, window workers)."""
from __future__ import annotations

import pytest

from dpd_desktop.timing import Throttle


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_at_most_one_update_per_interval_and_always_the_final_one():
    clock = Clock()
    th = Throttle(0.1, clock=clock)
    passed = []
    for i in range(10):  # 10 updates 0.03 s apart: the first, then one per 0.1 s, and the final one
        passed.append(th.ready(final=i == 9))
        clock.t += 0.03
    assert passed == [True, False, False, False, True, False, False, False, True, True]
    assert th.last == pytest.approx(100.27)


def test_a_start_holds_the_first_update_back():
    clock = Clock()
    th = Throttle(10.0, start=clock(), clock=clock)
    clock.t += 9.0
    assert not th.ready()
    clock.t += 1.0
    assert th.ready() and th.last == 110.0
