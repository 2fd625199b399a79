"""Probe: the first eager training step of a process behind a queue of fused GRU steps (training/eager_warmup.py).

Two members of PA GRU-23 on DPA_160MHz (batch 64, frame 200) in the group's fused graph (training/group.py
``_capture``); 2,000 steps queued; then one eager step of a short batch (17 frames: gather, forward, loss, backward,
clipping, AdamW), as a run's last batch of epoch 0. ``cold``: the process's first eager step; ``warm-thread``: after
one eager step on another thread while the GPU was idle (what eager_warmup.py does at set-up).

    python3 benchmarks/probe_eager_first_step.py --dataset .ref/datasets/DPA_160MHz --mode cold
    python3 benchmarks/probe_eager_first_step.py --dataset .ref/datasets/DPA_160MHz --mode warm-thread
"""
from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dpd_desktop.data import load_dataset  # noqa: E402
from dpd_desktop.data.framing import FrameLoader  # noqa: E402
from dpd_desktop.kernels.dispatch import apply_kernel  # noqa: E402
from dpd_desktop.models import build_model  # noqa: E402
from dpd_desktop.training.fast_path import CudaGraphStep  # noqa: E402
from dpd_desktop.training.group import _capture  # noqa: E402
from dpd_desktop.training.optim import make_adamw  # noqa: E402


def member(x, y, seed, dev):
    loader = FrameLoader(x, y, 200, 1, 64)
    torch.manual_seed(seed)
    net = build_model("gru", 23).to(dev).train()
    apply_kernel(net, "fast", dev)
    trainable = [p for p in net.parameters() if p.requires_grad]
    opt = make_adamw(trainable, lr=1e-3, weight_decay=0.0)
    step = CudaGraphStep(net, torch.nn.MSELoss(), trainable, 200.0, dev, loader, 64, optimizer=opt)
    plan = loader.epoch()
    step.begin_epoch(plan)
    return step, plan, opt


def eager_step(step, opt, idx) -> None:
    xb, yb = step.loader.gather(idx)
    opt.zero_grad(set_to_none=False)
    loss = torch.nn.functional.mse_loss(step.net(xb), yb)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(step.trainable, 200.0)
    opt.step()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--mode", choices=("cold", "warm-thread"), default="cold")
    a = ap.parse_args()
    ds = load_dataset(a.dataset)
    dev = torch.device("cuda:0")
    x, y = torch.from_numpy(ds.train.x).to(dev), torch.from_numpy(ds.train.y).to(dev)
    members = [member(x, y, i, dev) for i in range(2)]
    graph = _capture([s for s, _, _ in members])
    torch.cuda.synchronize()
    step, plan, opt = members[0]
    short = plan[-1][:17]
    if a.mode == "warm-thread":
        t = time.perf_counter()
        th = threading.Thread(target=eager_step, args=(step, opt, short))
        th.start()
        th.join()
        torch.cuda.synchronize()
        print(f"warm-up eager step on another thread, GPU idle: {time.perf_counter() - t:.3f} s")
    for label in ("first", "second"):
        t = time.perf_counter()
        graph.replay_steps(2000)
        tq = time.perf_counter() - t
        t = time.perf_counter()
        eager_step(step, opt, short)
        te = time.perf_counter() - t
        t = time.perf_counter()
        torch.cuda.synchronize()
        ts = time.perf_counter() - t
        print(f"{a.mode}: {label} eager short step after 2000 queued steps (queued in {tq * 1e3:.1f} ms): "
              f"{te * 1e3:.1f} ms; then the queue's rest {ts * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
