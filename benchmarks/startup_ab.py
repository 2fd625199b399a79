"""Process start → first training batch, with and without one start-up measure, alternating fresh processes.

    python3 benchmarks/startup_ab.py --dataset .ref/datasets/DPA_160MHz --env DPD_DESKTOP_NO_EARLY_CUDA=1 --pairs 3

Each run is ``dpd-desktop train-pa`` (1 epoch on the first 20,000 training samples, CUDA) in a fresh process with
``DPD_DESKTOP_TIMING``; printed: the per-run marks (seconds from process start) and the medians of A (as shipped) and
B (with ``--env``).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one(dataset, env_extra, ws):
    fd, timing = tempfile.mkstemp(suffix=".jsonl")
    os.close(fd)
    env = dict(os.environ, PYTHONPATH=str(ROOT), DPD_DESKTOP_TIMING=timing, **env_extra)
    t0 = time.time()
    subprocess.run([sys.executable, "-m", "dpd_desktop", "--workspace", ws, "train-pa", "--dataset", dataset,
                    "--epochs", "1", "--max-train-samples", "20000", "--device", "cuda", "--no-plots", "--quiet"],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    marks = {}
    for line in open(timing):
        m = json.loads(line)
        marks.setdefault(m["mark"], round(m["t"] - t0, 3))
    os.unlink(timing)
    return marks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--env", required=True, help="NAME=VALUE set for the B runs")
    ap.add_argument("--pairs", type=int, default=3)
    a = ap.parse_args()
    k, v = a.env.split("=", 1)
    ws = tempfile.mkdtemp(prefix="startup-ab-")
    res = {"A": [], "B": []}
    for i in range(a.pairs):
        for label, extra in (("A", {}), ("B", {k: v})):
            m = one(a.dataset, extra, ws)
            res[label].append(m["first_batch"])
            keys = ("dataset_prefetch_wait", "torch_imported", "setup_start", "tensors_on_device", "model_built",
                    "first_batch")
            print(f"{label} {i}: " + " ".join(f"{x} {m[x]:.3f}" for x in keys if x in m), flush=True)
    ma, mb = statistics.median(res["A"]), statistics.median(res["B"])
    print(f"first batch median: A (as shipped) {ma:.3f} s, B ({a.env}) {mb:.3f} s, B − A = {mb - ma:+.3f} s")


if __name__ == "__main__":
    main()
