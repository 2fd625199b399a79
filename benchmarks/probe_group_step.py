"""Probe: the group graph's step time on the GPU (training/group.py ``_capture``: the fused GRU step, or a branch per
member), M members of PA GRU-23 (``--step dpd``: DPD GRU-23 through a frozen PA GRU-23, its weights random) on
DPA_160MHz (batch 64, frame 200), against one member; CUDA-event timed replays; and, with ``--profile``, the kernels
of one replay of M = 1 and of the largest group (count, summed duration, span: concurrency = summed / span).

    python3 benchmarks/probe_group_step.py --dataset .ref/datasets/DPA_160MHz --sizes 1,2,4,8 --profile
    python3 benchmarks/probe_group_step.py --dataset .ref/datasets/DPA_160MHz --step dpd --sizes 1,8 --profile
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dpd_desktop.data import load_dataset  # noqa: E402
from dpd_desktop.data.framing import FrameLoader  # noqa: E402
from dpd_desktop.kernels.dispatch import apply_kernel  # noqa: E402
from dpd_desktop.models import Cascade, build_model  # noqa: E402
from dpd_desktop.training.fast_path import CudaGraphStep  # noqa: E402
from dpd_desktop.training.group import _capture  # noqa: E402
from dpd_desktop.training.optim import make_adamw  # noqa: E402
from cuda_timing import replay_us  # noqa: E402 - benchmarks/cuda_timing.py (this script's folder)


def members(ds, m, kernel, dev, fused=True, step="pa"):
    out = []
    x = torch.from_numpy(ds.train.x).to(dev)
    y = torch.from_numpy(ds.train.y).to(dev)
    for i in range(m):
        loader = FrameLoader(x.clone(), y.clone(), 200, 1, 64)
        torch.manual_seed(i)
        net = build_model("gru", 23)
        if step == "dpd":
            torch.manual_seed(100 + i)
            net = Cascade(net, build_model("gru", 23)).freeze_pa()
        net = net.to(dev).train()
        assert not apply_kernel(net, kernel, dev).notes
        trainable = [p for p in net.parameters() if p.requires_grad]
        s = CudaGraphStep(net, torch.nn.MSELoss(), trainable, 200.0, dev, loader, 64,
                          optimizer=make_adamw(trainable, lr=5e-3, weight_decay=0.01), fused=fused)
        plan = loader.epoch()
        s.begin_epoch(plan)
        out.append(s)
    return out


def timed(graph, steps, n):
    return replay_us(graph, n, reset=lambda: [s.counter.zero_() for s in steps])


def profile(graph, steps, n=5):
    from torch.profiler import ProfilerActivity, profile as prof
    for s in steps:
        s.counter.zero_()
    torch.cuda.synchronize()
    with prof(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(n):
            graph.replay()
        torch.cuda.synchronize()
    ev = [e for e in p.events() if e.device_type.name == "CUDA" and e.time_range.elapsed_us() >= 0]
    kern = [e for e in ev if "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]
    if not kern:
        return {"kernels": 0}
    t0 = min(e.time_range.start for e in kern)
    t1 = max(e.time_range.end for e in kern)
    busy = sum(e.time_range.elapsed_us() for e in kern)
    by = {}
    for e in kern:
        c, t = by.get(e.name, (0, 0.0))
        by[e.name] = (c + 1, t + e.time_range.elapsed_us())
    top = sorted(by.items(), key=lambda kv: -kv[1][1])[:25]
    return {"kernels_per_replay": len(kern) / n, "span_us_per_replay": (t1 - t0) / n,
            "summed_us_per_replay": busy / n, "concurrency": busy / max(t1 - t0, 1e-9),
            "top": [(name[:90], c / n, round(t / n, 1)) for name, (c, t) in top]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--sizes", default="1,2,4,8")
    ap.add_argument("--kernels", default="fast,fast-autograd,reference",
                    help="fast: the fused GRU step (training/fused_step.py); fast-autograd: the fast kernel's "
                         "autograd step (one branch per member); reference: cuDNN")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--step", choices=("pa", "dpd"), default="pa")
    ap.add_argument("--n", type=int, default=500)
    a = ap.parse_args()
    ds = load_dataset(a.dataset)
    dev = torch.device("cuda:0")
    res = {}
    for kernel in a.kernels.split(","):
        for m in [int(v) for v in a.sizes.split(",")]:
            steps = members(ds, m, "fast" if kernel.startswith("fast") else kernel, dev,
                            fused=kernel != "fast-autograd", step=a.step)
            gg = _capture(steps)
            g = gg.graphs[1]
            us = timed(g, steps, a.n)
            res[f"{kernel}-{m}"] = {"step_us": us}
            print(f"{kernel} M={m}: {us:.1f} µs per group step ({us / m:.1f} per member)", flush=True)
            k = max(gg.graphs)
            if k > 1:  # the group's k-step graph (training/group.py STEPS_PER_GRAPH), per step
                us_k = timed(gg.graphs[k], steps, max(1, a.n // k)) / k
                res[f"{kernel}-{m}"]["step_us_%d_per_launch" % k] = us_k
                print(f"{kernel} M={m}: {us_k:.1f} µs per group step in {k}-step graphs", flush=True)
            if a.profile and m in (1, max(int(v) for v in a.sizes.split(","))):
                res[f"{kernel}-{m}"]["profile"] = pr = profile(g, steps)
                print(f"  M={m}: {pr['kernels_per_replay']} kernels, span {pr['span_us_per_replay']:.1f} µs, "
                      f"summed {pr['summed_us_per_replay']:.1f}; top: "
                      + "; ".join(f"{n[:40]} {c:g}× {t} µs" for n, c, t in pr["top"][:10]), flush=True)
            del g, gg, steps
            torch.cuda.empty_cache()
    print(json.dumps({k: v["step_us"] for k, v in res.items()}))


if __name__ == "__main__":
    main()
