"""CPU threads of a run and the OpenMP wait policy (no PyTorch import here: :func:`prefer_passive_wait` must run
before PyTorch is imported).

OpenMP's default wait policy spins: a thread that reaches a barrier first burns its core until the other one
arrives, so when other processes want the cores every parallel region waits for a descheduled thread. The fast
kernel's recurrence is serial (its per-step ops are below PyTorch's parallel grain size). The measurements:
benchmarks/results/2026-12-04-notes-training.md.

So :func:`prefer_passive_wait` sets ``OMP_WAIT_POLICY=PASSIVE`` (unless the user set it) at the process entries
(``dpd_desktop.cli.entry.run``, which the window and the command line start from, and the queue's child module, which the
forkserver imports before PyTorch): libgomp reads it once, when PyTorch loads it. And :func:`choose_threads` gives a
run whose threads are not set (``threads`` None, no workspace default) 1 thread on the fast kernel and PyTorch's
default (what it had before any run set one) on the reference one, so that reference runs keep OpenDPD's thread
count and its numbers. The rule depends on the run's settings only, never on the load: the thread count changes the
last bits of a run (PyTorch's reductions split by thread), and a run is reproducible from its config.json
(``training.torch_threads``).
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
