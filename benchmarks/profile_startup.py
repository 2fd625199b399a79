"""Where the time goes before the first batch and around each epoch (GPU machine diagnostics).

    python3 benchmarks/profile_startup.py --dataset .ref/datasets/DPA_160MHz
Prints: bare `import torch` and CUDA-context times in fresh processes, then one 1-epoch PA run's timing marks
relative to process start, and evaluation timings (val forward alone, val+test, batch-size invariance).
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the script runs from benchmarks/

from dpd_desktop.data import load_dataset  # noqa: E402
from dpd_desktop.data.framing import segment  # noqa: E402
from dpd_desktop.metrics import compute_metrics  # noqa: E402  (SciPy itself loads at the first call, timed below)
from dpd_desktop.models import build_model  # noqa: E402


def timed(code):
    t = time.time()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.time() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default=".ref/datasets/DPA_160MHz")
    ap.add_argument("--step", default="pa")
    a = ap.parse_args()
    print(f"python start: {timed('pass'):.2f} s")
    print(f"import numpy: {timed('import numpy'):.2f} s")
    print(f"import torch: {timed('import torch'):.2f} s")
    print(f"import torch + CUDA context: {timed('import torch; torch.zeros(1, device=chr(99)+chr(117)+chr(100)+chr(97))'):.2f} s")
    print(f"import dpd_desktop.cli.entry: {timed('import sys; sys.path.insert(0, %r); import dpd_desktop.cli.entry' % str(ROOT)):.2f} s")
    print(f"load dataset: {timed('import sys,time; sys.path.insert(0, %r); from dpd_desktop.data import load_dataset; t=time.time(); load_dataset(%r); print(chr(32)*2, round(time.time()-t,3), chr(115))' % (str(ROOT), a.dataset)):.2f} s (process)")
    timing = "/tmp/prof-timing.jsonl"
    if os.path.exists(timing):
        os.unlink(timing)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.time()
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "timed.py"), timing, "--", "--workspace",
                    "/tmp/prof-ws", "train-pa", "--dataset", a.dataset, "--epochs", "2", "--device", "cuda",
                    "--no-plots", "--quiet"], env=env, check=True)
    print(f"whole 2-epoch run: {time.time() - t0:.2f} s")
    for line in open(timing):
        m = json.loads(line)
        print(f"  {m['mark']:18s} {m['t'] - t0:7.3f} s  {m.get('epoch', '')}")

    ds = load_dataset(a.dataset)
    dev = torch.device("cuda")
    torch.manual_seed(0)
    net = build_model("gru", 23).to(dev).eval()
    xv = torch.from_numpy(segment(ds.val.x, 16384)).to(dev)
    xt = torch.from_numpy(segment(ds.test.x, 16384)).to(dev)
    with torch.inference_mode():
        for _ in range(3):
            a6 = net(xv); b6 = net(xt)
        torch.cuda.synchronize()
        t = time.perf_counter(); a6 = net(xv); torch.cuda.synchronize(); t1 = time.perf_counter() - t
        t = time.perf_counter(); a6 = net(xv); b6 = net(xt); _ = a6.cpu(); _ = b6.cpu(); t2 = time.perf_counter() - t
        both = net(torch.cat([xv, xt]))
        print(f"val forward {t1*1e3:.1f} ms; val+test forward + copies {t2*1e3:.1f} ms; batch-12 == two batch-6: "
              f"{torch.equal(both[:6], a6) and torch.equal(both[6:], b6)}")
        s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
        torch.cuda.synchronize()
        t = time.perf_counter()
        with torch.cuda.stream(s1):
            a2 = net(xv)
        with torch.cuda.stream(s2):
            b2 = net(xt)
        torch.cuda.synchronize()
        t3 = time.perf_counter() - t
        print(f"val and test on two streams {t3*1e3:.1f} ms; equal: {torch.equal(a2, a6) and torch.equal(b2, b6)}")
        p = a6.cpu().numpy(); r = segment(ds.val.y, 16384)
        t = time.perf_counter(); compute_metrics(p, r, ds.spec); print(f"metrics (first, incl. scipy import) {1e3*(time.perf_counter()-t):.1f} ms")
        t = time.perf_counter(); compute_metrics(p, r, ds.spec); print(f"metrics {1e3*(time.perf_counter()-t):.1f} ms")


if __name__ == "__main__":
    main()
