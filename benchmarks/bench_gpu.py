"""GPU benchmark: ours (CUDA graph), ours (eager) and the reference OpenDPD 2.2.1, in one run, same machine.

Workloads (issue 4): PA GRU-23 for 4 epochs, and DPD GRU-23 through the frozen GRU-23 PA for 4 epochs, on
DPA_160MHz (batch 64, frame 200, stride 1, seed 0, AdamW, default schedule; 4,605 batches per epoch).
Each run is a separate process. Printed per run: whole-process wall time, process start → first training batch,
steady-state epoch interval (median over epochs ≥ 1 of one epoch's first batch to the next epoch's first batch), peak host memory
(ru_maxrss of the child), the selected checkpoint's metrics and the ratios; plus the floor: the captured step's
kernels alone (graph replays, timed with CUDA events) × 4,605. Also checks, for each workload, that our selected
checkpoint and our history metrics are bitwise equal to the reference's.

Like for like (issue 9): both sides run with compiled bytecode, as a pip install leaves it. Before the timed runs,
``python -m compileall`` compiles the standard library, every site-packages folder of each interpreter used (torch
included: it ships no .pyc), our package and the reference's tree into one ``PYTHONPYCACHEPREFIX`` folder; every timed
child reads it with ``PYTHONDONTWRITEBYTECODE=1`` (Python reads existing bytecode even then, and writes none). The
cold first start is its own row per side (PA): a fresh, empty ``PYTHONPYCACHEPREFIX``, so everything imported is
compiled in memory at start. Ratios are reference wall / ours wall of this one run.

    python3 benchmarks/bench_gpu.py --ref .ref --dataset .ref/datasets/DPA_160MHz --out benchmarks/results/x.md
    python3 benchmarks/bench_gpu.py --families ...    # every family as PA, ours vs reference (issue 3)
    python3 benchmarks/bench_gpu.py --dry-run --dataset ../shared/datasets/DPA_200MHz   # CPU plumbing check
    python3 benchmarks/bench_gpu.py --kernel fast ...   # also ours with --kernel fast (issue 14), beside the rest

Needs the reference prepared with ../shared/bench/prepare-reference.sh (folder .ref with run-reference.sh and the
dataset; git-ignored). ``--dry-run`` needs no GPU and no reference: ours only, on CPU, one epoch on 2,000 samples,
bytecode of our package only, no floor and no bitwise checks.
"""
from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the script runs from benchmarks/; the floor measurement uses our package

from dpd_desktop.data import load_dataset  # noqa: E402
from dpd_desktop.data.framing import FrameLoader  # noqa: E402
from dpd_desktop.config import KERNELS  # noqa: E402
from dpd_desktop.kernels.dispatch import apply_kernel  # noqa: E402
from dpd_desktop.models import Cascade, build_model  # noqa: E402
from dpd_desktop.training.fast_path import CudaGraphStep  # noqa: E402
from dpd_desktop.training.optim import make_adamw  # noqa: E402
from cuda_timing import replay_us  # noqa: E402 - benchmarks/cuda_timing.py (this script's folder)
METRIC_COLS = ["TRAIN_LOSS", "VAL_LOSS", "VAL_NMSE", "VAL_EVM", "VAL_ACLR_L", "VAL_ACLR_R", "VAL_ACLR_AVG",
               "TEST_LOSS", "TEST_NMSE", "TEST_EVM", "TEST_ACLR_L", "TEST_ACLR_R", "TEST_ACLR_AVG", "LR"]


def run_child(cmd, env, cwd=None, log_path=None):
    """Run a child process; return (wall seconds, peak RSS in MiB, exit code, t_start)."""
    t0 = time.time()
    with open(log_path or os.devnull, "w") as log:
        p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
        _, status, ru = os.wait4(p.pid, 0)
    wall = time.time() - t0
    return wall, ru.ru_maxrss / 1024.0, os.waitstatus_to_exitcode(status), t0


STARTUP_MARKS = ("cli_start", "dataset_load_start", "torch_imported", "setup_start", "data_loaded",
                 "tensors_on_device", "model_built", "setup_done", "first_batch")


def timing_summary(path, t0):
    marks = [json.loads(line) for line in open(path)] if os.path.exists(path) else []
    seen = {}
    for m in marks:
        seen.setdefault(m["mark"], m["t"] - t0)
    startup = " → ".join(f"{k} {seen[k]:.2f}" for k in STARTUP_MARKS if k in seen)
    first = next((m["t"] for m in marks if m["mark"] == "first_batch"), None)
    train_starts = [m["t"] for m in marks if m["mark"] == "first_batch"]
    train_ends = [m["t"] for m in marks if m["mark"] == "train_end"]
    # steady-state epoch interval: one epoch's start to the next epoch's start, epoch 0 (capture, first kernel
    # loads) left out; it holds the epoch's training and everything the training thread does at the boundary
    # (the evaluation itself overlaps the next epoch on CUDA, so epoch_end marks come from another thread)
    intervals = [b - a for a, b in zip(train_starts[1:], train_starts[2:])]
    train_times = [e - s for s, e in zip(train_starts, train_ends)]
    return {"startup": startup, "epoch_starts": [round(t - t0, 3) for t in train_starts],
            "first_batch_s": (first - t0) if first else None,
            "epoch_interval_s": statistics.median(intervals) if intervals else None,
            "train_loop_s": statistics.median(train_times[1:] or train_times) if train_times else None,
            "eval_etc_s": statistics.median([s2 - e for e, s2 in zip(train_ends, train_starts[1:])])
            if len(train_starts) > 1 else None}


_PATHS_CODE = ("import json, site, sysconfig; p = [sysconfig.get_path(k) for k in ('stdlib', 'platstdlib', 'purelib', "
               "'platlib')]; p += site.getsitepackages() + [site.getusersitepackages()]; print(json.dumps(p))")


def interpreters(ref_python: str | None) -> list[str]:
    """Our interpreter and the reference's (``python3`` on PATH, as run-reference.sh calls it), each once.

    Paths are kept as given (not resolved): a virtual environment's python is a link to its base interpreter but
    has its own site-packages."""
    out = [os.path.abspath(sys.executable)]
    if ref_python and os.path.abspath(ref_python) not in out:
        out.append(os.path.abspath(ref_python))
    return out


def compile_bytecode(prefix: Path, pythons: list[str], project_dirs: list[Path], *, installed: bool = True) -> dict:
    """Compile bytecode into ``prefix`` (PYTHONPYCACHEPREFIX) as an install would; return its cost and size.

    ``installed``: also the standard library and all site-packages of each interpreter (and PYTHONPATH entries);
    without it only ``project_dirs`` (the dry run)."""
    if prefix.exists():
        shutil.rmtree(prefix)
    prefix.mkdir(parents=True)
    env = dict(os.environ, PYTHONPYCACHEPREFIX=str(prefix))
    t0 = time.time()
    rcs = []
    for py in pythons:
        dirs = [str(d) for d in project_dirs]
        if installed:
            dirs += json.loads(subprocess.run([py, "-c", _PATHS_CODE], capture_output=True, text=True,
                                              check=True).stdout)
            dirs += os.environ.get("PYTHONPATH", "").split(os.pathsep)
        dirs = sorted({os.path.realpath(d) for d in dirs if d and os.path.isdir(d)})
        with open(prefix.parent / f"compileall-{Path(py).name}.log", "w") as log:
            # exit 1 when a few files do not compile (test data, other Python versions' sources): not an error here
            rcs.append(subprocess.run([py, "-m", "compileall", "-q", "-j", "0", *dirs], env=env, stdout=log,
                                      stderr=subprocess.STDOUT).returncode)
    pyc = list(prefix.rglob("*.pyc"))
    return {"seconds": time.time() - t0, "files": len(pyc), "mib": sum(p.stat().st_size for p in pyc) / 2**20,
            "rc": rcs}


def bytecode_env(prefix: Path) -> dict:
    """Child environment: read bytecode from ``prefix`` only, write none (an empty prefix = a cold start)."""
    prefix.mkdir(parents=True, exist_ok=True)
    return {"PYTHONPYCACHEPREFIX": str(prefix), "PYTHONDONTWRITEBYTECODE": "1",
            # while dpd_desktop/_entry.py still exists: its private bytecode cache stays off (no-op once removed)
            "DPD_DESKTOP_NO_BYTECODE_CACHE": "1"}


def ours(step, dataset, work, *, fast, extra=(), pa_run=None, epochs=4, backbone="gru", hidden=23, env_extra=None,
         pyc_env=None, device="cuda", label=""):
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    tag = f"{'fast' if fast else 'eager'}-{backbone}" + ("-" + "-".join(env_extra) if env_extra else "") + label
    timing = work / f"timing-{step}-{tag}.jsonl"
    if timing.exists():
        timing.unlink()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               PYTHONUNBUFFERED="1", **(pyc_env or {}), **(env_extra or {}))
    # benchmarks/timed.py: the timing marks; --eager: the trainer's fast_path=False
    cmd = [sys.executable, str(ROOT / "benchmarks" / "timed.py"), str(timing), *([] if fast else ["--eager"]), "--",
           "--workspace", str(work / "ws"), f"train-{step}",
           "--dataset", str(dataset), "--backbone", backbone, "--hidden-size", str(hidden), "--epochs", str(epochs),
           "--device", device, "--no-plots", "--quiet", *extra]
    if pa_run:
        cmd += ["--pa-run", pa_run]
    log = work / f"ours-{step}-{tag}.log"
    wall, rss, rc, t0 = run_child(cmd, env, log_path=log)
    runs = sorted((work / "ws" / "runs").glob(f"*-{step}-{backbone}{hidden}*"), key=os.path.getmtime)
    run_dir = runs[-1] if runs else None
    who = f"ours {'CUDA graph' if fast and device != 'cpu' else 'eager'}" + (
        f" ({' '.join(f'{k}={v}' for k, v in env_extra.items())})" if env_extra else "") + (f", {label}" if label else "")
    out = {"who": who, "wall_s": wall, "rss_mib": rss, "rc": rc,
           "run_dir": str(run_dir), **timing_summary(timing, t0)}
    if rc != 0:
        out["log_tail"] = open(log).read()[-3000:]
    if run_dir:
        out["history"] = list(csv.DictReader(open(run_dir / "history.csv")))
        st = json.loads((run_dir / "status.json").read_text())
        out["status"] = st
        cfg = json.loads((run_dir / "config.json").read_text())
        out["fast_path"] = cfg["device"]["fast_path"]
        out["fast_path_optimizer"] = cfg["device"].get("fast_path_optimizer")
    return out


def reference(step, ref, work, extra=(), epochs=4, pyc_env=None, label=""):
    """Run the reference through run-reference.sh (``pyc_env``: see :func:`bytecode_env`)."""
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, EPOCHS=str(epochs), **(pyc_env or {}))
    cmd = ["bash", str(Path(ref) / "run-reference.sh"), step, str(work), *extra]
    log = Path(str(work) + f"-ref-{step}.log")
    wall, rss, rc, t0 = run_child(cmd, env, log_path=log)
    hist = sorted(glob.glob(str(work / "log" / "**" / "history" / "*.csv"), recursive=True), key=os.path.getmtime)
    if step == "dpd":
        hist = [h for h in hist if "train_dpd" in h]
    else:
        hist = [h for h in hist if "train_pa" in h]
    out = {"who": "reference 2.2.1" + (f", {label}" if label else ""), "wall_s": wall, "rss_mib": rss, "rc": rc,
           "first_batch_s": None, "epoch_interval_s": None}
    if rc != 0:
        out["log_tail"] = open(log).read()[-3000:]
    if hist:
        out["history"] = list(csv.DictReader(open(hist[-1])))
        ck = sorted(glob.glob(str(work / "save" / "**" / ("train_dpd" if step == "dpd" else "train_pa") / "**" / "*.pt"),
                              recursive=True), key=os.path.getmtime)
        out["checkpoint"] = ck[-1] if ck else None
    return out


def compare(ours_r, ref_r, step):
    """Bitwise checks: history metric columns textually equal; selected checkpoint tensors torch.equal."""
    res = {}
    ho, hr = ours_r.get("history"), ref_r.get("history")
    if ho and hr:
        diffs = []
        for a, b in zip(ho, hr):
            for c in METRIC_COLS:
                if a.get(c) != b.get(c):
                    try:
                        diffs.append((a["EPOCH"], c, a.get(c), b.get(c), abs(float(a[c]) - float(b[c]))))
                    except (TypeError, ValueError):
                        diffs.append((a["EPOCH"], c, a.get(c), b.get(c), None))
        res["history_equal"] = not diffs and len(ho) == len(hr)
        res["history_diffs"] = diffs[:12]
        res["max_abs_db_diff"] = max((d[4] for d in diffs if d[4] is not None and "LOSS" not in d[1]
                                      and d[1] != "LR"), default=0.0)
    if ours_r.get("run_dir") and ref_r.get("checkpoint"):
        ob = torch.load(Path(ours_r["run_dir"]) / "best.pt", map_location="cpu", weights_only=True)["state_dict"]
        rb = torch.load(ref_r["checkpoint"], map_location="cpu", weights_only=True)
        res["checkpoint_equal"] = list(ob) == list(rb) and all(torch.equal(ob[k], rb[k]) for k in rb)
    sel_metric = "VAL_NMSE" if step == "pa" else "VAL_ACLR_AVG"
    for who, r in (("ours", ours_r), ("ref", ref_r)):
        h = r.get("history") or []
        best = None
        for row in h:  # reference selection rule: epoch 0, then strictly lower
            v = float(row[sel_metric])
            if best is None or v < best[0]:
                best = (v, row)
        res[f"{who}_selected"] = best[1] if best else None
    return res


def floor_time(dataset, step, n=2000, kernel="reference"):
    """Time of the captured step's kernels alone (CUDA-graph replays, CUDA events) × 4,605 batches.

    The captured step is what the trainer replays: gather, forward, loss, backward, clipping and — when the
    AdamW update is captured too (fast_path.CudaGraphStep.optimizer_in_graph) — the optimizer. Also returned: the
    same step without the optimizer (the reference's floor figure captures no optimizer)."""
    ds = load_dataset(dataset)
    dev = torch.device("cuda:0")
    torch.backends.cudnn.benchmark = True
    x = torch.from_numpy(ds.train.x).to(dev)
    y = torch.from_numpy(ds.train.y if step == "pa" else (ds.gain * ds.train.x)).to(dev)
    loader = FrameLoader(x, y, 200, 1, 64)
    torch.manual_seed(0)
    if step == "pa":
        net = build_model("gru", 23)
    else:
        pa = build_model("gru", 23)
        net = Cascade(build_model("gru", 23), pa).freeze_pa()
    net.to(dev).train()
    notes = apply_kernel(net, kernel, dev)
    assert not notes, notes
    trainable = [p for p in net.parameters() if p.requires_grad]
    crit = torch.nn.MSELoss()
    out = {}
    for label, opt in (("", make_adamw(trainable, lr=5e-3, weight_decay=0.01)), ("_no_opt", None)):
        stepper = CudaGraphStep(net, crit, trainable, 200.0, dev, loader, 64, optimizer=opt)
        plan = loader.epoch()
        stepper.begin_epoch(plan)
        assert stepper(0, plan[0])
        g = stepper.graph
        per = replay_us(g, n, warmup=50, reset=stepper.counter.zero_) / 1e6
        out[f"step{label}_us"] = per * 1e6
        out[f"floor{label}_s"] = per * 4605
        if opt is not None:
            out["optimizer"] = stepper.optimizer_note
    return out


def fmt(v, f="{:.2f}"):
    return "—" if v is None else f.format(v)


def table_rows(name, rows, ref_wall, floor):
    lines = []
    for r in rows:
        sel = r.get("selected") or {}
        rw = r.get("ref_wall_s", ref_wall)  # a cold row is compared with the reference's cold row
        ratio = rw / r["wall_s"] if r["wall_s"] and rw else None
        fl = (r["epoch_interval_s"] / floor) if r.get("epoch_interval_s") and floor else None
        lines.append(f"| {name} | {r['who']} | {fmt(r['wall_s'])} | {fmt(r.get('first_batch_s'))} | "
                     f"{fmt(r.get('epoch_interval_s'), '{:.3f}')} | {fmt(r.get('train_loop_s'), '{:.3f}')} | "
                     f"{fmt(fl, '{:.3f}')} | {fmt(r['rss_mib'], '{:.0f}')} | {sel.get('EPOCH', '—')} | "
                     f"{sel.get('VAL_NMSE', '—')} | {sel.get('TEST_NMSE', '—')} | {sel.get('TEST_EVM', '—')} | "
                     f"{sel.get('TEST_ACLR_AVG', '—')} | {fmt(ratio)}× |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ref", default=".ref")
    ap.add_argument("--dataset", default=".ref/datasets/DPA_160MHz")
    ap.add_argument("--work", default="/tmp/dpdbench")
    ap.add_argument("--out", default=None)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--families", action="store_true", help="every family as PA, ours vs reference (metrics only)")
    ap.add_argument("--skip-eager", action="store_true")
    ap.add_argument("--no-cold", action="store_true", help="leave out the cold-first-start rows (empty bytecode cache)")
    ap.add_argument("--ref-python", default=shutil.which("python3"),
                    help="the interpreter run-reference.sh uses (python3 on PATH); its bytecode is compiled too")
    ap.add_argument("--extra-env", default=None, metavar="NAME=VALUE",
                    help="also run ours (CUDA graph) with this environment variable set, as an extra row")
    ap.add_argument("--kernel", choices=KERNELS, default="reference",
                    help="fast: also run ours (CUDA graph) with --kernel fast, compared with ours in reference mode")
    ap.add_argument("--device", default="cuda", help="our runs' device (cpu: no floor; the reference's is ACCEL)")
    ap.add_argument("--dry-run", action="store_true",
                    help="CPU plumbing check: ours only, 1 epoch on 2,000 samples, our bytecode only; no reference, "
                         "no floor, no bitwise checks")
    a = ap.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    lines = [f"# GPU benchmark ({time.strftime('%Y-%m-%d %H:%M')})" + (" — dry run on CPU" if a.dry_run else ""), "",
             f"command: `python3 benchmarks/bench_gpu.py {' '.join(sys.argv[1:])}`", ""]
    device = "cpu" if a.dry_run else a.device
    lines.append((f"device: {torch.cuda.get_device_name(0)}, " if device == "cuda" else "device: CPU, ")
                 + f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, python {sys.version.split()[0]}, "
                 f"PYTHONDONTWRITEBYTECODE in the environment: {os.environ.get('PYTHONDONTWRITEBYTECODE')!r}")
    lines.append("")
    ref_tree = Path(a.ref) / "opendpd-2.2.1"
    pythons = interpreters(None if a.dry_run else a.ref_python)
    # Cold first start first (nothing compiled yet), then the compiled bytecode every timed run reads.
    cold_env = None if a.no_cold else bytecode_env(work / "pyc-cold-empty")
    warm = work / "pyc-compiled"
    comp = None  # filled by compiled_env(), after the cold rows
    small = ["--max-train-samples", "2000"] if a.dry_run else []
    epochs = 1 if a.dry_run else a.epochs

    def compiled_env():
        nonlocal comp
        if comp is None:
            comp = compile_bytecode(warm, pythons, [ROOT / "dpd_desktop"] + ([] if a.dry_run else [ref_tree]),
                                    installed=not a.dry_run)
        return bytecode_env(warm)

    def bytecode_note():
        return (f"- bytecode: `compileall` of {'our package only (dry run)' if a.dry_run else 'the standard library, site-packages, our package and the reference tree'} "
                f"for {', '.join(pythons)} into {warm}: {comp['files']} files, {comp['mib']:.0f} MiB, "
                f"{comp['seconds']:.1f} s (compileall exit {comp['rc']}); every timed run reads it with "
                f"PYTHONDONTWRITEBYTECODE=1")

    if a.families:
        pyc = compiled_env()
        lines += ["| family (PA, H=23) | ours wall s | ref wall s | history bitwise | checkpoint bitwise | "
                  "max |Δ| dB | ours sel. epoch | ours test NMSE | ref test NMSE |", "|---|---|---|---|---|---|---|---|---|"]
        for bb in ["gru", "lstm", "dgru", "tres_gru", "rvtdcnn"]:
            o = ours("pa", a.dataset, work / f"fam-{bb}", fast=True, backbone=bb, epochs=a.epochs, pyc_env=pyc)
            r = reference("pa", a.ref, work / f"fam-{bb}-ref", extra=["--PA_backbone", bb], epochs=a.epochs,
                          pyc_env=pyc)
            c = compare(o, r, "pa")
            so, sr = c.get("ours_selected") or {}, c.get("ref_selected") or {}
            lines.append(f"| {bb} | {fmt(o['wall_s'])} | {fmt(r['wall_s'])} | {c.get('history_equal')} | "
                         f"{c.get('checkpoint_equal')} | {fmt(c.get('max_abs_db_diff'), '{:.2e}')} | {so.get('EPOCH')} | "
                         f"{so.get('TEST_NMSE')} | {sr.get('TEST_NMSE')} |")
            for who, rr in (("ours", o), ("ref", r)):
                if rr.get("rc"):
                    lines.append(f"\n{who} {bb} failed:\n```\n{rr.get('log_tail', '')}\n```\n")
            if c.get("history_diffs"):
                lines.append(f"\n{bb} first differences: {c['history_diffs'][:4]}\n")
            print("\n".join(lines[-1:]), flush=True)
            write_out(a.out, "\n".join(lines) + "\n")  # after every family: a cut run keeps its rows
        lines += ["", bytecode_note()]
    else:
        lines += ["| workload | who | whole process s | to first batch s | epoch interval s | train loop s | "
                  "interval / floor | peak host MiB | sel. epoch | val NMSE | test NMSE | test EVM | test ACLR avg | "
                  "ref wall / wall (same bytecode state) |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        floors = {}
        checks = []
        ratios = []
        cold_rows = {}
        if cold_env is not None:
            cold_rows["ours"] = ours("pa", a.dataset, work / "cold", fast=True, epochs=epochs, extra=small,
                                     pyc_env=cold_env, device=device, label="cold first start")
            if not a.dry_run:
                cold_rows["ref"] = reference("pa", a.ref, work / "refwork-cold", epochs=epochs, pyc_env=cold_env,
                                             label="cold first start")
            if any((work / "pyc-cold-empty").iterdir()):
                checks.append("- WARNING: the cold runs wrote bytecode into their empty cache (not a cold start)")
        pyc = compiled_env()
        pa_run = None
        for step in ("pa", "dpd"):
            ref_r = None if a.dry_run else reference(step, a.ref, work / "refwork", epochs=epochs, pyc_env=pyc)
            rows = []
            dpd_kw = {"pa_run": pa_run} if step == "dpd" else {}
            fast = ours(step, a.dataset, work / "fast", fast=True, epochs=epochs, extra=small, pyc_env=pyc,
                        device=device, **dpd_kw)
            if step == "pa":
                pa_run = fast.get("run_dir")
            rows.append(fast)
            fastk = None
            if a.kernel != "reference":
                fastk = ours(step, a.dataset, work / f"kernel-{a.kernel}", fast=True, epochs=epochs,
                             extra=[*small, "--kernel", a.kernel], pyc_env=pyc, device=device,
                             label=f"kernel {a.kernel}", **dpd_kw)
                rows.append(fastk)
            extra_row = None
            if a.extra_env:
                k, v = a.extra_env.split("=", 1)
                extra_row = ours(step, a.dataset, work / "extra", fast=True, epochs=epochs, env_extra={k: v},
                                 extra=small, pyc_env=pyc, device=device, **dpd_kw)
                rows.append(extra_row)
            eager = None
            if not a.skip_eager and not a.dry_run:
                eager = ours(step, a.dataset, work / "eager", fast=False, epochs=epochs, pyc_env=pyc, device=device,
                             **dpd_kw)
                rows.append(eager)
            if ref_r is not None:
                rows.append(ref_r)
            if step == "pa":
                rows += [cold_rows[k] for k in ("ours", "ref") if k in cold_rows]
                if "ref" in cold_rows:
                    for k in ("ours", "ref"):
                        cold_rows[k]["ref_wall_s"] = cold_rows["ref"]["wall_s"]
            if ref_r is not None:
                c = compare(fast, ref_r, step)
                ref_r["selected"] = c.get("ref_selected")
                for r in rows:
                    if r is not ref_r and "reference" not in r["who"]:
                        r["selected"] = compare(r, ref_r, step).get("ours_selected")
                    elif r is not ref_r:
                        r["selected"] = compare(fast, r, step).get("ref_selected")
                checks.append(f"- {step.upper()}: {fast['who']} vs reference — history metrics bitwise equal: "
                              f"{c.get('history_equal')}; selected checkpoint bitwise equal: "
                              f"{c.get('checkpoint_equal')}; max |Δ| of dB metrics "
                              f"{fmt(c.get('max_abs_db_diff'), '{:.2e}')}")
                if c.get("history_diffs"):
                    checks.append(f"  first differences: {c['history_diffs'][:4]}")
                ratios.append(f"- {step.upper()}, both sides with compiled bytecode: reference {fmt(ref_r['wall_s'])} s"
                              f" / {fast['who']} {fmt(fast['wall_s'])} s = "
                              f"{fmt(ref_r['wall_s'] / fast['wall_s'] if fast['wall_s'] else None)}×")
                if step == "pa" and "ours" in cold_rows and "ref" in cold_rows:
                    co, cr = cold_rows["ours"], cold_rows["ref"]
                    ratios.append(f"- PA, cold first start (empty bytecode cache) of both: reference "
                                  f"{fmt(cr['wall_s'])} s / ours {fmt(co['wall_s'])} s = "
                                  f"{fmt(cr['wall_s'] / co['wall_s'] if co['wall_s'] else None)}×; "
                                  f"ours' first batch at {fmt(co.get('first_batch_s'))} s cold vs "
                                  f"{fmt(fast.get('first_batch_s'))} s compiled")
            else:
                for r in rows:
                    r["selected"] = compare(r, {}, step).get("ours_selected")
            if fastk is not None:
                ck = compare(fastk, fast, step)
                checks.append(f"- {step.upper()}: {fastk['who']} vs {fast['who']} (reference kernel) — max |Δ| of dB "
                              f"metrics over every epoch {fmt(ck.get('max_abs_db_diff'), '{:.2e}')} dB; history "
                              f"bitwise equal: {ck.get('history_equal')}")
                if extra_row is not None:
                    cx = compare(fastk, extra_row, step)
                    checks.append(f"- {step.upper()}: {fastk['who']} vs {extra_row['who']} — max |Δ| of dB metrics "
                                  f"over every epoch {fmt(cx.get('max_abs_db_diff'), '{:.2e}')} dB")
                if ref_r is not None and fastk["wall_s"]:
                    ratios.append(f"- {step.upper()}, kernel {a.kernel}: reference {fmt(ref_r['wall_s'])} s / "
                                  f"{fastk['who']} {fmt(fastk['wall_s'])} s = {fmt(ref_r['wall_s'] / fastk['wall_s'])}×")
            if eager is not None:
                ce = compare(fast, eager, step)
                checks.append(f"- {step.upper()}: ours CUDA graph vs ours eager — history bitwise equal: "
                              f"{ce.get('history_equal')}")
            if device == "cuda":
                floors[step] = floor_time(a.dataset, step)
                if a.kernel != "reference":
                    floors[f"{step}, kernel {a.kernel}"] = floor_time(a.dataset, step, kernel=a.kernel)
            ref_wall = ref_r["wall_s"] if ref_r is not None else None
            lines += table_rows(step.upper() + " GRU-23", rows, ref_wall, floors.get(step, {}).get("floor_s"))
            for r in rows:
                if r.get("rc"):
                    checks.append(f"\n{r['who']} {step} failed (exit {r['rc']}):\n```\n{r.get('log_tail', '')}\n```")
                if r.get("fast_path"):
                    checks.append(f"  {r['who']} {step}: CUDA graph {r['fast_path']}; optimizer "
                                  f"{r.get('fast_path_optimizer')}")
                if r.get("startup"):
                    checks.append(f"  {r['who']} {step}: start-up marks (s from process start): {r['startup']}; "
                                  f"epoch starts {r.get('epoch_starts')}")
            print("\n".join(lines[-len(rows):]), flush=True)
        lines.append("")
        lines += ratios
        for step, f in floors.items():
            lines.append(f"- floor {step.upper()}: captured step (optimizer {f['optimizer']}) {f['step_us']:.1f} µs "
                         f"× 4,605 = {f['floor_s']:.3f} s (the same step without the optimizer: "
                         f"{f['step_no_opt_us']:.1f} µs → {f['floor_no_opt_s']:.3f} s)")
        lines += ["", bytecode_note()] + checks
    text = "\n".join(lines) + "\n"
    print(text)
    write_out(a.out, text)


def write_out(out, text):
    for dest in filter(None, [out, os.path.join(os.environ["OUT"], Path(out or "bench.md").name)
                              if os.environ.get("OUT") else None]):
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
        Path(dest).write_text(text)


if __name__ == "__main__":
    main()
