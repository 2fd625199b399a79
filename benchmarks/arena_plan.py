"""The GPU time of an Arena protocol from its batch counts, before a run; and, after a short probe run, the same
projection from the probe's measured epoch times.

    python3 benchmarks/arena_plan.py arena-v6 [--models A,B] [--step-us 240] [--group-factor 1.3]
    python3 benchmarks/arena_plan.py arena-v6 --probe WORKSPACE [--models ...]

Estimate (no probe): per model, seeds × epochs × ceil(frames / batch) training steps, frames = (n_train − frame) /
stride + 1 (every window, the short last batch included; Arena v6: 25,108 frames, 393 batches, 94,320 steps per
seed). One cascade step (DPD + frozen PA, forward and backward) is taken as two recurrent steps: fast mode ~120 µs
per GRU batch step on the H200 (benchmarks/results/2026-12-01-group-h200.md) → 240 µs; eager reference ~500 µs →
1,000 µs. A group of the seeds runs ``--group-factor`` times one trial's time (1.31× for 8 fast members, measured;
1.3 assumed for 3), plus per epoch and trial the overlap-save validation (~40 ms: the PA over the 6,327-sample split
and the metrics) and ~20 s per sweep of start-up, capture and the final test judge.

Probe: the mean epoch time of the probe's runs (history.csv ``TIME:``, minutes since the epoch loop started) is
scaled to the protocol's epochs; start-up is measured as the wall time minus the epoch loop.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dpd_desktop.arena.assets import default_root  # noqa: E402
from dpd_desktop.arena.protocol import load_protocol  # noqa: E402

STEP_US = {"fast": 240.0, "reference": 1000.0}
EVAL_S = 0.04
STARTUP_S = 20.0


def n_train(cond, assets: Path) -> int:
    if cond.kind == "arena":
        cal = json.loads((assets / "opendpd" / "arena_assets" / cond.calibration).read_text())
        n = int(cal[cond.id]["counts"]["train"])
    else:
        path = Path(cond.dataset)
        path = path if path.exists() else assets / "datasets" / cond.dataset
        with open(path / "train_input.csv") as fh:
            n = sum(1 for _ in fh) - 1
    return min(n, cond.max_train_samples or n)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("protocol")
    ap.add_argument("--models", default=None)
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--seeds", default=None)
    ap.add_argument("--kernel", default="fast", choices=("fast", "reference"))
    ap.add_argument("--step-us", type=float, default=None, help="µs per cascade step (default by kernel)")
    ap.add_argument("--group-factor", type=float, default=1.3)
    ap.add_argument("--assets", default=None)
    ap.add_argument("--probe", default=None, help="workspace of a short probe run (its DPD runs are read)")
    a = ap.parse_args(argv)
    proto = load_protocol(a.protocol).with_overrides(
        epochs=a.epochs, seeds=[int(s) for s in a.seeds.split(",")] if a.seeds else None,
        models=a.models.split(",") if a.models else None)
    assets = Path(a.assets) if a.assets else default_root()
    step_us = a.step_us or STEP_US[a.kernel]
    seeds = len(proto.seeds)
    per_epoch_probe = startup_probe = None
    if a.probe:
        per_epoch_probe, startup_probe = _probe(Path(a.probe))
        print(f"probe: {per_epoch_probe:.3f} s per epoch of a group (the slowest member), start-up and end "
              f"{startup_probe:.1f} s per sweep")
    total = 0.0
    print(f"{'condition':<14} {'model':<24} {'frames':>7} {'batches':>7} {'steps/seed':>10} {'est. s':>8}")
    for cond in proto.conditions:
        n = n_train(cond, assets)
        frame, stride, batch = (proto.training.get(k, d) for k, d in (("frame_length", 200), ("stride", 1),
                                                                        ("batch_size", 64)))
        frames = (n - frame) // stride + 1
        batches = math.ceil(frames / batch)
        for m in proto.models:
            steps = proto.epochs * batches
            if per_epoch_probe is not None:
                t = startup_probe + proto.epochs * per_epoch_probe
            else:
                t = (STARTUP_S + steps * step_us * 1e-6 * a.group_factor * (1 if seeds > 1 else 1 / a.group_factor)
                     + proto.epochs * EVAL_S * seeds)
            total += t
            print(f"{cond.id:<14} {m.name:<24} {frames:>7} {batches:>7} {steps:>10} {t:>8.0f}")
    print(f"total: {total:.0f} s = {total / 60:.1f} min of GPU time ({a.kernel} kernels, {seeds} seeds per group, "
          f"{proto.epochs} epochs)")
    return 0


def _probe(ws: Path) -> tuple[float, float]:
    """(seconds per epoch of a group, start-up + end seconds per sweep) from the probe's DPD runs."""
    per_epoch, startup = [], []
    for sweep in sorted((ws / "sweeps").glob("*/sweep.json")):
        doc = json.loads(sweep.read_text())
        if doc["spec"]["base"].get("step") != "dpd":
            continue
        times, walls = [], []
        for t in doc["trials"]:
            run = Path(t["run_dir"])
            with open(run / "history.csv", newline="") as fh:
                rows = list(csv.DictReader(fh))
            status = json.loads((run / "status.json").read_text())
            loop = float(rows[-1]["TIME:"]) * 60
            times.append(loop / len(rows))
            walls.append(float(status.get("wall_s", loop)) - loop)
        per_epoch.append(max(times))
        startup.append(max(walls) + STARTUP_S / 2)
    if not per_epoch:
        raise SystemExit(f"{ws}: no DPD sweep found")
    return max(per_epoch), max(startup)


if __name__ == "__main__":
    raise SystemExit(main())
