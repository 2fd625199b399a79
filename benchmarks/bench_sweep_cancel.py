"""Time a large grid sweep from the command line: process start → first trial running, and Ctrl+C → process end.

    python benchmarks/bench_sweep_cancel.py --trials 10000 [--tree DIR ...] [--repeats 1]

Each ``--tree`` is a checkout whose ``dpd_desktop`` runs the sweep (default: this one); several trees are measured
in one run, alternating, so that their figures share the machine's load. The sweep: ``--grid seed=0..N-1`` over the
embedded demo dataset (1 epoch, GRU hidden size 4, CPU), in a fresh workspace. Once the first trial reads
``running`` one SIGINT is sent (the first Ctrl+C of a user), and the time until the process ends is measured; then
sweep.json and queue.sqlite are read back: how many trials and queue entries ended cancelled.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one(tree: Path, n: int, timeout_s: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        ws = Path(tmp) / "ws"
        seeds = ",".join(str(i) for i in range(n))
        cmd = [sys.executable, "-m", "dpd_desktop", "--workspace", str(ws), "sweep", "--grid", f"seed={seeds}",
               "--name", "bench", "--base", "--dataset", "demo", "--epochs", "1", "--hidden-size", "4",
               "--frame-length", "50", "--stride", "50", "--device", "cpu", "--quiet", "--no-plots"]
        env = dict(os.environ, PYTHONPATH=str(tree))
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                cwd=str(tree))
        first = None
        for line in proc.stdout:
            if line.startswith("trial ") and ": running" in line:
                first = time.perf_counter() - t0
                break
            if time.perf_counter() - t0 > timeout_s:
                break
        t1 = time.perf_counter()
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=timeout_s)
            cancel = time.perf_counter() - t1
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            cancel = None
        out = {"tree": str(tree), "trials": n, "first_trial_s": first, "cancel_s": cancel, "rc": proc.returncode}
        sweeps = list((ws / "sweeps").glob("*/sweep.json"))
        if sweeps:
            doc = json.loads(sweeps[0].read_text())
            states: dict[str, int] = {}
            for t in doc["trials"]:
                states[t["state"]] = states.get(t["state"], 0) + 1
            out["sweep_state"], out["trial_states"] = doc["state"], states
        if (ws / "queue.sqlite").exists():
            with sqlite3.connect(ws / "queue.sqlite") as db:
                out["queue_states"] = dict(db.execute("SELECT state, COUNT(*) FROM entries GROUP BY state"))
        return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    p.add_argument("--trials", type=int, default=10000, help="grid size (default %(default)s)")
    p.add_argument("--tree", action="append", default=[], help="checkout to measure (repeatable; default this one)")
    p.add_argument("--repeats", type=int, default=1, help="rounds over the trees (default %(default)s)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per phase before giving up")
    a = p.parse_args(argv)
    trees = [Path(t).resolve() for t in a.tree] or [ROOT]
    for r in range(a.repeats):
        for tree in trees:
            print(json.dumps({"round": r, **one(tree, a.trials, a.timeout)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
