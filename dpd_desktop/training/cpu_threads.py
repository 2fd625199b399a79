"""CPU threads of a run and the OpenMP wait policy (no PyTorch import here: :func:`prefer_passive_wait` must run
before PyTorch is imported).

OpenMP's default wait policy spins, so when other processes want the cores every parallel region waits for a
descheduled thread (measurements: benchmarks/results/2026-12-04-notes-training.md). :func:`prefer_passive_wait`
sets ``OMP_WAIT_POLICY=PASSIVE`` at the process entries (cli/entry.py ``run`` and the queue's child module).
:func:`choose_threads` gives a run without a thread setting 1 thread on the fast kernel (its recurrence is serial)
and PyTorch's default on the reference one (OpenDPD's count, hence its numbers). The rule reads the run's settings
only, never the load: the thread count changes a run's last bits, and config.json records it.
"""
from __future__ import annotations

import os

WAIT_POLICY_ENV = "OMP_WAIT_POLICY"


def prefer_passive_wait(environ=None) -> str:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` in ``environ`` (default ``os.environ``) unless it is set; returns the value
    in effect. Takes effect only where PyTorch (its OpenMP runtime) is not loaded yet: in this process before
    ``import torch``, and in the processes started afterwards."""
    env = os.environ if environ is None else environ
    return env.setdefault(WAIT_POLICY_ENV, "PASSIVE")


def choose_threads(requested: int | None, kernel: str, default: int) -> tuple[int, str]:
    """(threads to set, the log line saying why) for a CPU run whose ``threads`` setting is ``requested`` (None: not
    set) on recurrence ``kernel`` ("reference" | "fast"); ``default``: PyTorch's default thread count in this
    process (what it had before any run set one)."""
    policy = f"{WAIT_POLICY_ENV}={os.environ.get(WAIT_POLICY_ENV, 'unset')}"
    if requested:
        return requested, f"CPU threads: {requested} (the run's setting; {policy})"
    if kernel == "fast":
        return 1, f"CPU threads: 1 (fast kernel: its recurrence is serial; a second thread loses more under load " \
                  f"than it gains idle; {policy})"
    return default, f"CPU threads: {default} (PyTorch's default, as OpenDPD runs; {policy})"
