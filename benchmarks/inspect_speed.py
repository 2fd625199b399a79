"""Time ``inspect_dataset`` on a measured dataset: the first call in a fresh process and later calls.

    python benchmarks/inspect_speed.py --dataset ../shared/datasets/DPA_160MHz [--repeats 5]

Each "first call" runs in its own interpreter (``-c``), so it includes the one-time imports (scipy.signal) and FFT
set-up the window's worker pays once; CSV loading is timed separately and not included.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
from dpd_desktop.data import load_dataset
from dpd_desktop.analysis.inspect import inspect_dataset
t0 = time.perf_counter(); ds = load_dataset(sys.argv[1]); t1 = time.perf_counter()
inspect_dataset(ds); t2 = time.perf_counter()
later = []
for _ in range(int(sys.argv[2])):
    t = time.perf_counter(); inspect_dataset(ds); later.append(time.perf_counter() - t)
print(json.dumps({"load_s": t1 - t0, "first_s": t2 - t1, "later_s": later}))
"""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", required=True, help="dataset folder / file")
    p.add_argument("--repeats", type=int, default=5, help="fresh processes (and later calls in each)")
    a = p.parse_args(argv)
    runs = []
    for _ in range(a.repeats):
        out = subprocess.run([sys.executable, "-c", CHILD, a.dataset, "3"], capture_output=True, text=True,
                             check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    first = [r["first_s"] for r in runs]
    later = [t for r in runs for t in r["later_s"]]
    load = [r["load_s"] for r in runs]
    print(f"dataset {a.dataset}: {a.repeats} processes")
    print(f"load (CSV)         median {statistics.median(load):.3f} s  (min {min(load):.3f}, max {max(load):.3f})")
    print(f"inspect, 1st call  median {statistics.median(first):.3f} s  (min {min(first):.3f}, max {max(first):.3f})")
    print(f"inspect, later     median {statistics.median(later):.3f} s  (min {min(later):.3f}, max {max(later):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
