"""GPU benchmark of the fast recurrence kernels (issue 14): ours vs cuDNN, then the 4-epoch headline.

Part 1, per cell (GRU, LSTM), hidden 8/23/64, batch 64/256/1024, frame 200, input 2: the forward (training mode,
what a training step runs) and the training step (forward + backward + weight gradients, input without gradient
as in PA training), each captured as a CUDA graph and timed over replays with CUDA events, for cuDNN
(``torch.nn.GRU``/``LSTM`` with PyTorch's defaults: the reference kernel) and ours (``--kernel fast``), and the
ratio ours / cuDNN. Also the largest |Δ| of our forward against cuDNN's (TF32 as PyTorch's defaults leave it).
Part 2: the kernels' first-use cost: NVRTC compile into an empty cache, and the cached load in a fresh process.
Part 2b (``--startup N``): N rounds of a 2-epoch PA GRU-23 run (DPA_160MHz) with ``--kernel reference`` then
``--kernel fast`` (after one unmeasured run of each), every timing mark from process start: where the fast mode's
start-up and first epoch go. ``--ks H:KS,...`` pins the k-slices of a hidden size for the micro table (a variant).
Part 3 (``--headline``): benchmarks/bench_gpu.py with ``--kernel fast`` (PA and DPD GRU-23, DPA_160MHz, 4 epochs,
ours in both kernel modes beside the reference 2.2.1, both sides' bytecode compiled, plus ours on the reference kernel
with ``NVIDIA_TF32_OVERRIDE=0``); its table is appended.

    python3 benchmarks/bench_kernels.py --out benchmarks/results/2026-12-01-kernels-h200-b.md [--headline] [--startup 1]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dpd_desktop.kernels.dispatch import run_recurrent
from dpd_desktop.kernels import cuda_rnn  # noqa: E402
from cuda_timing import replay_us  # noqa: E402 - benchmarks/cuda_timing.py (this script's folder)

TARGETS = {("gru", 23, 64): 0.5, ("gru", 64, 64): 0.7, ("lstm", 23, 64): 0.7}  # issue 14's "Done when"


def graph_us(fn, n):
    """Capture ``fn`` as a CUDA graph (after warm-up on a side stream) and time ``n`` replays (µs per replay)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return replay_us(g, n)


def measure(cell, H, B, T=200, I=2, n=200):
    torch.manual_seed(0)
    dev = torch.device("cuda")
    rnn = (nn.GRU if cell == "gru" else nn.LSTM)(I, H, batch_first=True).to(dev)
    x = torch.randn(B, T, I, device=dev)
    h0 = torch.zeros(1, B, H, device=dev)
    dy = torch.randn(B, T, H, device=dev)
    params = list(rnn.parameters())
    for p in params:
        p.grad = torch.zeros_like(p)
    out = {}
    for kernel in ("reference", "fast"):
        def fwd():
            return run_recurrent(rnn, x, h0, kernel)

        def step():
            for p in params:
                p.grad.zero_()
            fwd().backward(dy)

        out[f"{kernel}_fwd"] = graph_us(fwd, n)
        out[f"{kernel}_step"] = graph_us(step, n)
    with torch.no_grad():
        out["max_diff"] = (run_recurrent(rnn, x, h0, "fast") - run_recurrent(rnn, x, h0, "reference")).abs().max().item()
    return out


_LOAD_CODE = ("import json, time, torch; torch.empty(1, device='cuda'); torch.cuda.synchronize(); "
              "t = time.perf_counter(); from dpd_desktop.kernels import cuda_rnn, nvrtc; "
              "cuda_rnn._module({h}, 3, 'cuda'); torch.cuda.synchronize(); "
              "print(json.dumps({{'log': nvrtc.LOAD_LOG, 'total_s': time.perf_counter() - t}}))")


def first_use(hidden_sizes=(8, 23, 64)):
    """Per hidden size: NVRTC compile into an empty cache (process 1), then the cached load (process 2); each in a
    fresh process whose CUDA context already exists (as in a run: the tensors are on the device before the model),
    ``total_s`` from the package import to the loaded module."""
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, DPD_DESKTOP_KERNEL_CACHE=cache, PYTHONPATH=str(ROOT))
        for h in hidden_sizes:
            for _ in range(2):
                res = subprocess.run([sys.executable, "-c", _LOAD_CODE.format(h=h)], env=env, capture_output=True,
                                     text=True)
                if res.returncode:
                    rows.append({"hidden": h, "error": res.stderr[-800:]})
                    break
                doc = json.loads(res.stdout.strip().splitlines()[-1])
                rows.append({"hidden": h, **doc["log"][-1], "total_s": doc["total_s"]})
    return rows


def startup(dataset, rounds, kernels=("reference", "fast"), epochs=2):
    """``rounds`` × (reference, fast) PA GRU-23 runs after one unmeasured run of each: per run the wall time and every
    timing mark (s from process start; ``progress`` marks summarized as the epoch's batch times)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_gpu

    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds + 1):
            for kernel in kernels:
                work = Path(tmp) / f"r{r}-{kernel}"
                res = bench_gpu.ours("pa", dataset, work, fast=True, extra=["--kernel", kernel], epochs=epochs)
                marks = [json.loads(x) for x in open(work / "timing-pa-fast-gru.jsonl")]
                t0 = next(m["t"] for m in marks if m["mark"] == "first_batch") - res["first_batch_s"]
                shown = [f"{m['mark']}{'[' + str(m['epoch']) + ']' if 'epoch' in m else ''} {m['t'] - t0:.3f}"
                         for m in marks if m["mark"] != "progress"]
                prog = [(m["epoch"], m["batch"], m["t"] - t0) for m in marks if m["mark"] == "progress"]
                rates = "; ".join(f"epoch {e}: " + " ".join(f"{t:.2f}:{n}" for ee, n, t in prog[::5] if ee == e)
                                  for e in range(epochs))
                line = (f"- {'warm-up' if r == 0 else f'round {r}'} {kernel}: wall {res['wall_s']:.2f} s, rc {res['rc']}; "
                        + " → ".join(shown) + f"; batches done (s:batch, every 5th progress mark) {rates}")
                lines.append(line)
                print(line, flush=True)
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--hidden", default="8,23,64")
    ap.add_argument("--batch", default="64,256,1024")
    ap.add_argument("--replays", type=int, default=200)
    ap.add_argument("--headline", action="store_true", help="also run bench_gpu.py --kernel fast (minutes)")
    ap.add_argument("--startup", type=int, default=0, metavar="ROUNDS", help="start-up rounds (reference, fast)")
    ap.add_argument("--ks", default="", metavar="H:KS,...", help="pin the k-slices of these hidden sizes (variants)")
    ap.add_argument("--startup-kernels", default="reference,fast", help="the kernels of each start-up round")
    ap.add_argument("--no-first-use", action="store_true", help="leave out the first-use (compile/load) table")
    ap.add_argument("--no-tf32-row", action="store_true",
                    help="headline without ours on the reference kernel with NVIDIA_TF32_OVERRIDE=0")
    ap.add_argument("--ref", default=".ref")
    ap.add_argument("--dataset", default=".ref/datasets/DPA_160MHz")
    a = ap.parse_args()
    if a.ks:
        pinned = {int(h): int(k) for h, k in (item.split(":") for item in a.ks.split(","))}
        default_slices = cuda_rnn.slices
        cuda_rnn.slices = lambda hidden, gates: pinned.get(hidden) or default_slices(hidden, gates)
    lines = [f"# Fast recurrence kernels vs cuDNN ({time.strftime('%Y-%m-%d %H:%M')})", "",
             f"command: `python3 benchmarks/bench_kernels.py {' '.join(sys.argv[1:])}`", "",
             f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, cuDNN "
             f"{torch.backends.cudnn.version()}; frame 200, input 2; CUDA-graph replays timed with CUDA events "
             f"({a.replays} per figure); step = forward + backward + weight gradients (input without gradient)", "",
             "| cell | hidden | batch | cuDNN fwd µs | ours fwd µs | fwd ratio | cuDNN step µs | ours step µs | "
             "step ratio | max |Δ| fwd vs cuDNN | target |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    emit(a.out, lines)
    verdicts = []
    for cell in ("gru", "lstm"):
        for h in map(int, a.hidden.split(",")):
            for b in map(int, a.batch.split(",")):
                m = measure(cell, h, b, n=a.replays)
                fr, sr = m["fast_fwd"] / m["reference_fwd"], m["fast_step"] / m["reference_step"]
                tgt = TARGETS.get((cell, h, b))
                verdict = "" if tgt is None else f"≤ {tgt}: {'met' if sr <= tgt else 'MISSED'}"
                if tgt is not None:
                    verdicts.append(f"- {cell.upper()} H{h} B{b} step ratio {sr:.3f} (target {verdict})")
                lines.append(f"| {cell.upper()} | {h} | {b} | {m['reference_fwd']:.1f} | {m['fast_fwd']:.1f} | "
                             f"{fr:.3f} | {m['reference_step']:.1f} | {m['fast_step']:.1f} | {sr:.3f} | "
                             f"{m['max_diff']:.2e} | {verdict} |")
                print(lines[-1], flush=True)
                emit(a.out, lines)
    lines += ["", *verdicts]
    if a.startup:
        lines += ["", f"Start-up ({a.startup} rounds, 2-epoch PA GRU-23 runs, marks in s from process start):", "",
                  *startup(a.dataset, a.startup, a.startup_kernels.split(","))]
        emit(a.out, lines)
    if not a.no_first_use:
        lines += ["", "First use of the kernels (one module per hidden size; a fresh process each row):", "",
                  "| hidden | cached | NVRTC compile s | module load s | import + build/load s | NVRTC |",
                  "|---|---|---|---|---|---|"]
    for r in ([] if a.no_first_use else first_use()):
        if "error" in r:
            lines.append(f"| {r['hidden']} | error | {r['error']!r} | | |")
            continue
        comp = "—" if r.get("compile_s") is None else f"{r['compile_s']:.3f}"
        lines.append(f"| {r['hidden']} | {r['cached']} | {comp} | {r['load_s']:.4f} | {r['total_s']:.4f} | "
                     f"{r['nvrtc']} ({r['arch']}) |")
    emit(a.out, lines)
    if a.headline:
        with tempfile.TemporaryDirectory() as tmp:
            dest = Path(tmp) / "headline.md"
            # the extra row: ours on the reference kernel with TF32 off in cuDNN/cuBLAS (NVIDIA's documented
            # override), to tell the kernels' difference from the reference mode's TF32 rounding
            cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_gpu.py"), "--kernel", "fast", "--skip-eager",
                   "--no-cold", *([] if a.no_tf32_row else ["--extra-env", "NVIDIA_TF32_OVERRIDE=0"]), "--ref", a.ref,
                   "--dataset", a.dataset, "--out", str(dest)]
            env = {k: v for k, v in os.environ.items() if k != "OUT"}  # bench_gpu would copy its file into $OUT
            res = subprocess.run(cmd, env=env, capture_output=True, text=True)
            lines += ["", "## 4-epoch headline (benchmarks/bench_gpu.py)", "",
                      f"command: `python3 benchmarks/bench_gpu.py {' '.join(cmd[2:])}` (exit {res.returncode})", ""]
            lines.append(dest.read_text() if dest.exists() else f"```\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}\n```")
    emit(a.out, lines)
    print("\n".join(lines))


def emit(out, lines):
    text = "\n".join(lines) + "\n"
    for dest in filter(None, [out, os.path.join(os.environ["OUT"], Path(out or "kernels.md").name)
                              if os.environ.get("OUT") else None]):
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
        Path(dest).write_text(text)


if __name__ == "__main__":
    main()
