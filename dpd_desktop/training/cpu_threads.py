"""CPU threads of a run and the OpenMP wait policy (no PyTorch import here: :func:`prefer_passive_wait` must run
before PyTorch is imported).

Measured (issue 14; 2-core machine shared with other jobs; torch 2.13 with libgomp; one GRU-23 training batch of
64 frames of 200, forward + backward + AdamW; medians, benchmarks/results/2026-12-01-kernels-cpu.md):

* OpenMP's default wait policy spins: a thread that reaches a barrier first burns its core until the other one
  arrives, so when other processes want the cores every parallel region waits for a descheduled thread. Reference
  kernel, 2 threads: 28.4-29.1 ms idle; 128 ms beside one busy process (1 thread: 28.6 ms); 1,153 ms on the
  machine at load 5-9. With ``OMP_WAIT_POLICY=PASSIVE`` (waiting threads sleep): 32.8 ms idle, 32.7 ms beside one
  busy process, 48 ms at load 5-9. GOMP_SPINCOUNT=1000/10000/100000 at load 5-9: 71/204/292 ms.
* The fast kernel's recurrence is serial (its per-step ops are below PyTorch's parallel grain size); only its
  whole-sequence ops and GEMMs use a second thread. Idle / beside one busy process (load ~1.4): 1 thread
  10.5 / 11.4 ms; 2 threads PASSIVE 13.1 / 14.0 ms; 2 threads spinning 11.3 / 24.8 ms.

So :func:`prefer_passive_wait` sets ``OMP_WAIT_POLICY=PASSIVE`` (unless the user set it) at the process entries
(``dpd_desktop.cli.entry.run``, which the window and the command line start from, and the queue's child module, which the
forkserver imports before PyTorch): libgomp reads it once, when PyTorch loads it. And :func:`choose_threads` gives a
run whose threads are not set (``threads`` None, no workspace default) 1 thread on the fast kernel and PyTorch's
default (what it had before any run set one) on the reference one, so that reference runs keep OpenDPD's thread
count and its numbers. The rule depends on the run's settings only, never on the load: the thread count changes the
last bits of a run (PyTorch's reductions split by thread; measured on a 2-epoch demo run: test NMSE -3.4018147 with
1 thread, -3.401815 with 2), and a run is reproducible from its config.json (``training.torch_threads``).
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
