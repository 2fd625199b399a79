"""Process start → first training batch (and epoch 0), with and without a change, alternating fresh processes.

    python3 benchmarks/startup_ab.py --dataset .ref/datasets/DPA_160MHz --switch plain-loader --pairs 3
    python3 benchmarks/startup_ab.py --dataset .ref/datasets/DPA_160MHz --switch eager \
        --epochs 2 --max-train-samples 0 --pairs 2        # epoch 0 vs epoch 1 on the whole split

Each run is ``dpd-desktop train-pa`` (default: 1 epoch on the first 20,000 training samples, CUDA) in a fresh
process through benchmarks/timed.py (its timing marks); printed: the per-run marks (seconds from process start),
each epoch's training time (its first batch → its loss copied back, which waits for the GPU), the host's batch
count at fixed times after each epoch's first batch, and the medians of A (as given) and B (with ``--env`` or
``--switch``, a diagnostic switch of timed.py). Both may be repeated (rows B, C, ...).
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
KEYS = ("torch_imported", "setup_start", "tensors_on_device", "model_built", "first_batch",
        "capture_optimizer_checked", "capture_warmup_done", "graph_captured", "warm_imports_done")


def one(dataset, variant, ws, epochs, max_train, device):
    fd, timing = tempfile.mkstemp(suffix=".jsonl")
    os.close(fd)
    env = dict(os.environ, PYTHONPATH=str(ROOT), **variant.get("env", {}))
    cmd = [sys.executable, str(ROOT / "benchmarks" / "timed.py"), timing, *variant.get("switches", []), "--",
           "--workspace", ws, "train-pa", "--dataset", dataset, "--epochs", str(epochs), "--device", device,
           "--no-plots", "--quiet"]
    if max_train:
        cmd += ["--max-train-samples", str(max_train)]
    t0 = time.time()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.time() - t0
    marks, epoch = {}, []
    for line in open(timing):
        m = json.loads(line)
        m["t"] -= t0
        marks.setdefault(m["mark"], round(m["t"], 3))
        epoch.append(m)
    os.unlink(timing)
    return marks, epoch, wall


def describe(variant) -> str:
    return " ".join([*(f"{k}={v}" for k, v in variant.get("env", {}).items()), *variant.get("switches", [])]) \
        or "as given"


def epoch_lines(rows, epochs):
    out = []
    for e in range(epochs):
        start = next((m["t"] for m in rows if m["mark"] == "first_batch" and m.get("epoch") == e), None)
        end = next((m["t"] for m in rows if m["mark"] == "train_end" and m.get("epoch") == e), None)
        if start is None or end is None:
            continue
        prog = [(m["t"] - start, m["batch"]) for m in rows if m["mark"] == "progress" and m.get("epoch") == e]
        at = []
        for s in (0.25, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0):
            done = max((b for t, b in prog if t <= s), default=0)
            at.append(f"{s:g}s:{done}")
        out.append((end - start, f"    epoch {e}: train {end - start:.3f} s; host batches at " + " ".join(at)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE set for the B runs (repeat: C, D…)")
    ap.add_argument("--switch", action="append", default=[], choices=("eager", "plain-loader", "autograd-step"),
                    help="a diagnostic switch of benchmarks/timed.py for the next row (repeat: C, D…)")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--max-train-samples", type=int, default=20000, help="0: the whole training split")
    a = ap.parse_args()
    extras = [{"env": dict([e.split("=", 1)])} for e in a.env] + [{"switches": [f"--{s}"]} for s in a.switch]
    if not extras:
        ap.error("give at least one --env or --switch")
    variants = [("A", {})] + [(chr(ord("B") + i), v) for i, v in enumerate(extras)]
    ws = tempfile.mkdtemp(prefix="startup-ab-")
    first = {k: [] for k, _ in variants}
    ep0 = {k: [] for k, _ in variants}
    for i in range(a.pairs):
        for label, extra in variants:
            m, rows, wall = one(a.dataset, extra, ws, a.epochs, a.max_train_samples, a.device)
            first[label].append(m["first_batch"])
            print(f"{label} {i} ({describe(extra)}), wall {wall:.2f} s: "
                  + " ".join(f"{x} {m[x]:.3f}" for x in KEYS if x in m), flush=True)
            lines = epoch_lines(rows, a.epochs)
            if lines:
                ep0[label].append(lines[0][0])
            for _, text in lines:
                print(text, flush=True)
    for label, extra in variants:
        print(f"{label} ({describe(extra)}): first batch median {statistics.median(first[label]):.3f} s"
              + (f", epoch 0 training median {statistics.median(ep0[label]):.3f} s" if ep0[label] else ""))


if __name__ == "__main__":
    main()
