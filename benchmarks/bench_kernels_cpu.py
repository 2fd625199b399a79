"""CPU twin of the kernel benchmark (issue 14 point 5): one GRU-23 training batch, ours (``kernel = fast``) against
the reference's, idle and with one competing busy process, in one run (< 3 minutes on the 2-core machine).

The batch: 64 frames of 200 I/Q samples, forward + MSE loss + backward + ``clip_grad_norm_(200)`` + AdamW step
(lr 5e-3, weight decay 0.01), as OpenDPD 2.2.1 trains a PA (modules/train_funcs.py ``net_train``; its GRU backbone is
imported from the reference tree, ``.ref/opendpd-2.2.1/backbones/gru.py``: ``nn.GRU`` + ``nn.Linear``). Ours:
``build_model("gru", 23)`` with :func:`dpd_desktop.kernels.apply_kernel` ``fast``, the same loss, clipping and
optimizer, so the rows differ by the recurrence only. Each row is its own process (the OpenMP wait policy is read
once, when PyTorch loads), timed over ``--batches`` batches after 3 warm-up ones; the median and the minimum are
printed with the load average at the row's start. "busy" rows run beside one pure-Python busy loop started here.

Rows: the reference as OpenDPD runs it (PyTorch's threads = the cores, OpenMP's default wait policy), with 1 thread,
with PASSIVE; ours with 1 and 2 threads, and as the application runs it (``dpd_desktop.cli.entry.run`` sets PASSIVE;
the threads that :func:`dpd_desktop.training.limits.apply_device_limits` sets for a run that sets none).

    python benchmarks/bench_kernels_cpu.py [--batches 25] [--out benchmarks/results/2026-12-01-kernels-cpu.md]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REF_GRU = ROOT / ".ref" / "opendpd-2.2.1" / "backbones" / "gru.py"
B, T, H = 64, 200, 23

# (label, kernel, threads: int | "app", wait policy: "default" | "PASSIVE" | "app")
ROWS = [
    ("reference, as OpenDPD runs it", "reference", "cores", "default"),
    ("reference, 1 thread", "reference", 1, "default"),
    ("reference, PASSIVE", "reference", "cores", "PASSIVE"),
    ("fast, 1 thread", "fast", 1, "PASSIVE"),
    ("fast, 2 threads, default wait", "fast", 2, "default"),
    ("fast, 2 threads, PASSIVE", "fast", 2, "PASSIVE"),
    ("fast, as the application runs it", "fast", "app", "app"),
]


def child(kernel: str, threads: str, batches: int) -> None:
    """One row: print {"median_ms", "min_ms", "threads", "threads_note"} as JSON."""
    import torch
    from torch import nn

    note = ""
    if threads == "app":  # the trainer's own call, for a CPU run that sets no threads
        from dpd_desktop.config import ExperimentConfig
        from dpd_desktop.training.limits import apply_device_limits
        note = apply_device_limits(ExperimentConfig(kernel=kernel, device="cpu"), torch.device("cpu"))
    elif threads != "cores":
        torch.set_num_threads(int(threads))
    torch.manual_seed(0)
    if kernel == "reference":
        spec = importlib.util.spec_from_file_location("opendpd_gru", REF_GRU)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        net = mod.GRU(input_size=2, hidden_size=H, output_size=2, num_layers=1)
        net.reset_parameters()
        h0 = torch.zeros(1, B, H)
        forward = lambda x: net(x, h0)  # noqa: E731
    else:
        from dpd_desktop.kernels.dispatch import apply_kernel
        from dpd_desktop.models import build_model
        net = build_model("gru", H, 1)
        assert apply_kernel(net, "fast", "cpu").notes == ()
        forward = net
    params = [p for p in net.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=5e-3, weight_decay=0.01, betas=(0.9, 0.999), eps=1e-8)
    crit = nn.MSELoss()
    x, y = torch.randn(B, T, 2) * 0.3, torch.randn(B, T, 2) * 0.3

    def step():
        opt.zero_grad(set_to_none=True)
        loss = crit(forward(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(params, 200)
        opt.step()

    for _ in range(3):
        step()
    times = []
    for _ in range(batches):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    times.sort()
    print(json.dumps({"median_ms": 1e3 * times[len(times) // 2], "min_ms": 1e3 * times[0],
                      "threads": torch.get_num_threads(), "threads_note": note}))


def run_row(kernel, threads, policy, batches) -> dict:
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    if policy == "PASSIVE" or policy == "app":  # the application: dpd_desktop.cli.entry.run sets it (setdefault)
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    load = os.getloadavg()[0]
    out = subprocess.run([sys.executable, __file__, "--child", kernel, str(threads), "--batches", str(batches)],
                         env=env, capture_output=True, text=True, timeout=170)
    if out.returncode != 0:
        raise RuntimeError(f"row {kernel}/{threads}/{policy} failed:\n{out.stderr[-2000:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["load"] = load
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=25, help="timed batches per row (after 3 warm-up ones)")
    ap.add_argument("--out", default=None, help="also write the table to this markdown file")
    ap.add_argument("--child", nargs=2, metavar=("KERNEL", "THREADS"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child[0], a.child[1], a.batches)
        return
    if not REF_GRU.is_file():
        sys.exit(f"error: the OpenDPD 2.2.1 reference tree is not at {REF_GRU.parent.parent} (make reference)")
    t_start = time.time()
    results = {}
    for load_kind in ("idle", "busy"):
        busy = None
        if load_kind == "busy":
            busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            time.sleep(1.0)
        try:
            for label, kernel, threads, policy in ROWS:
                results[(label, load_kind)] = run_row(kernel, threads, policy, a.batches)
                print(f"{load_kind:4s} {label:36s} {results[(label, load_kind)]['median_ms']:7.2f} ms", flush=True)
        finally:
            if busy is not None:
                busy.terminate()
                busy.wait()
    lines = [f"GRU-{H} training batch (B {B}, frame {T}: forward + backward + clip + AdamW), ms per batch, median "
             f"(min) of {a.batches}; load = 1-min load average at the row's start; busy = beside one pure-Python "
             "busy loop", "",
             "| row | threads idle / busy | idle ms | load | busy ms | load | busy / idle |",
             "|---|---|---|---|---|---|---|"]
    for label, *_ in ROWS:
        i, b = results[(label, "idle")], results[(label, "busy")]
        lines.append(f"| {label} | {i['threads']} / {b['threads']} | {i['median_ms']:.2f} ({i['min_ms']:.2f}) | "
                     f"{i['load']:.2f} | {b['median_ms']:.2f} ({b['min_ms']:.2f}) | {b['load']:.2f} | "
                     f"{b['median_ms'] / i['median_ms']:.2f} |")
    ref_i = results[(ROWS[0][0], "idle")]["median_ms"]
    app_i, app_b = (results[(ROWS[-1][0], k)]["median_ms"] for k in ("idle", "busy"))
    ref_b = results[(ROWS[0][0], "busy")]["median_ms"]
    lines += ["",
              f"- idle: reference (as OpenDPD runs it) / fast (as the application runs it) = **{ref_i / app_i:.2f}x** "
              "(target >= 2)",
              f"- busy: fast busy / fast idle = **{app_b / app_i:.2f}** (target <= 1.5); reference busy / idle = "
              f"{ref_b / ref_i:.2f}; reference busy / fast busy = {ref_b / app_b:.2f}x",
              f"- the application's thread choice: idle \"{results[(ROWS[-1][0], 'idle')]['threads_note']}\"; busy "
              f"\"{results[(ROWS[-1][0], 'busy')]['threads_note']}\"",
              f"- {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
              f"{platform.python_version()}; {time.time() - t_start:.0f} s for the whole benchmark"]
    text = "\n".join(lines)
    print("\n" + text)
    if a.out:
        Path(a.out).write_text(f"# CPU kernels benchmark\n\n`python benchmarks/bench_kernels_cpu.py "
                               f"--batches {a.batches}`\n\n{text}\n")


if __name__ == "__main__":
    main()
