"""Issue 24, item 4: a sweep of N trials through the user's own command against one lone trial, end to end.

Both sides are whole `dpd-desktop` processes, timed from spawn to exit, in fresh workspaces, with bytecode compiled
as an install leaves it (bench_gpu.py ``compile_bytecode``), on the same machine in the same run:

* lone:  ``dpd-desktop --workspace W train-pa|train-dpd --dataset D --seed 0 [options] --no-plots --quiet``
* sweep: ``dpd-desktop --workspace W sweep --step pa|dpd --grid seed=0,…,N-1 --base [the same options]``

The sweep's wall holds everything a user waits for: its start-up, the spec and store, queueing the trials, the
group child (lab/group_child.py) and its set-up, training, every run folder, the end. R rounds alternate lone and
sweep; the ratio is sweep median / lone median (the lone run alone varies ~15 % on the H200). A DPD step trains
its PA first (untimed) and every DPD side uses that PA run folder. Target: ratio ≤ 1.5 for N = 8 in fast mode.

    python3 benchmarks/bench_sweep_e2e.py --dataset ../shared/datasets/DPA_160MHz --steps pa,dpd --repeat 3 \\
        --out benchmarks/results/x.md
    python3 benchmarks/bench_sweep_e2e.py --dataset ../shared/datasets/DPA_200MHz --device cpu --trials 2 \\
        --epochs 1 --kernel reference --max-train-samples 4000          # plumbing check (no speed-up on a CPU)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_gpu import bytecode_env, compile_bytecode, interpreters, run_child  # noqa: E402


def _options(a, step: str, pa_run: str | None) -> list[str]:
    out = ["--dataset", str(a.dataset), "--backbone", a.backbone, "--hidden-size", str(a.hidden_size),
           "--epochs", str(a.epochs), "--device", a.device, "--kernel", a.kernel, "--no-plots", "--quiet"]
    if a.max_train_samples:
        out += ["--max-train-samples", str(a.max_train_samples)]
    if step == "dpd":
        out += ["--pa-run", pa_run]
    return out


def _run(cmd: list[str], env: dict, log: Path, timing_dir: Path | None) -> dict:
    if timing_dir is not None:  # `python -m dpd_desktop ARGS` through benchmarks/timed.py, children's marks too
        marks = timing_dir / (log.stem + ".jsonl")
        cmd = [cmd[0], str(ROOT / "benchmarks" / "timed.py"), str(marks), "--children", "--", *cmd[3:]]
    wall, rss, rc, _ = run_child(cmd, env, log_path=log)
    return {"wall_s": wall, "rss_mib": rss, "rc": rc, "log": str(log)}


def lone(a, step: str, pa_run, work: Path, env: dict, rnd: int) -> dict:
    ws = work / f"lone-{step}-r{rnd}"
    cmd = [sys.executable, "-m", "dpd_desktop", "--workspace", str(ws), f"train-{step}", "--seed", "0",
           *_options(a, step, pa_run)]
    r = _run(cmd, env, work / f"lone-{step}-r{rnd}.log", a.timing)
    r["runs"] = sorted(p.name for p in (ws / "runs").glob(f"*-{step}-*"))
    return r


def sweep(a, step: str, pa_run, work: Path, env: dict, rnd: int) -> dict:
    ws = work / f"sweep-{step}-r{rnd}"
    seeds = ",".join(str(s) for s in range(a.trials))
    cmd = [sys.executable, "-m", "dpd_desktop", "--workspace", str(ws), "sweep", "--step", step,
           "--grid", f"seed={seeds}", "--name", f"e2e-{step}", "--base", *_options(a, step, pa_run)]
    r = _run(cmd, env, work / f"sweep-{step}-r{rnd}.log", a.timing)
    r["runs"] = sorted(p.name for p in (ws / "runs").glob(f"*-{step}-*"))
    states = []
    for d in (ws / "runs").glob(f"*-{step}-*"):
        try:
            states.append(json.loads((d / "status.json").read_text())["state"])
        except (OSError, ValueError, KeyError):
            states.append("unreadable")
    r["states"] = sorted(states)
    return r


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", type=Path, required=True)
    p.add_argument("--steps", default="pa,dpd")
    p.add_argument("--trials", type=int, default=8)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--backbone", default="gru")
    p.add_argument("--hidden-size", type=int, default=23)
    p.add_argument("--device", default="cuda")
    p.add_argument("--kernel", default="fast")
    p.add_argument("--max-train-samples", type=int, default=None)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--work", type=Path, default=None)
    p.add_argument("--timing", type=Path, default=None, help="write each child's timing marks here (jsonl)")
    p.add_argument("--out", type=Path, default=None, help="write the table as Markdown here")
    a = p.parse_args(argv)
    a.dataset = a.dataset.resolve()
    work = a.work or Path(tempfile.mkdtemp(prefix="bench-sweep-e2e-"))
    work.mkdir(parents=True, exist_ok=True)
    if a.timing:
        a.timing.mkdir(parents=True, exist_ok=True)
    pyc = compile_bytecode(work / "pyc", interpreters(None), [ROOT / "dpd_desktop"])
    env = dict(os.environ, **bytecode_env(work / "pyc"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    print(f"work {work}; bytecode {pyc['files']} files in {pyc['seconds']:.0f} s", flush=True)
    rows = []
    for step in a.steps.split(","):
        pa_run = None
        if step == "dpd":
            pa_ws = work / "pa-for-dpd"
            r = _run([sys.executable, "-m", "dpd_desktop", "--workspace", str(pa_ws), "train-pa", "--seed", "0",
                      *_options(a, "pa", None)], env, work / "pa-for-dpd.log", None)
            if r["rc"] != 0:
                sys.exit(f"the PA run for the DPD rows failed (exit {r['rc']}): {r['log']}")
            pa_run = str(sorted((pa_ws / "runs").glob("*-pa-*"))[-1])
        lones, sweeps = [], []
        for rnd in range(a.repeat):
            lo = lone(a, step, pa_run, work, env, rnd)
            sw = sweep(a, step, pa_run, work, env, rnd)
            ok = lo["rc"] == 0 and sw["rc"] == 0 and sw["states"] == ["succeeded"] * a.trials
            print(f"{step} round {rnd}: lone {lo['wall_s']:.2f} s (exit {lo['rc']}), sweep of {a.trials} "
                  f"{sw['wall_s']:.2f} s (exit {sw['rc']}, {sw['states'].count('succeeded')} succeeded) → "
                  f"{sw['wall_s'] / lo['wall_s']:.2f}×" + ("" if ok else f"  NOT OK: {lo['log']} {sw['log']}"),
                  flush=True)
            lones.append(lo)
            sweeps.append(sw)
        ml = statistics.median(r["wall_s"] for r in lones)
        msw = statistics.median(r["wall_s"] for r in sweeps)
        rounds = ", ".join(f"{s['wall_s'] / lo['wall_s']:.2f}" for lo, s in zip(lones, sweeps))
        all_ok = all(r["rc"] == 0 for r in lones + sweeps) and all(
            s["states"] == ["succeeded"] * a.trials for s in sweeps)
        rows.append((step, ml, msw, msw / ml, rounds, all_ok))
    head = (f"| step | lone trial s (median of {a.repeat}) | sweep of {a.trials} s (median) | ratio | rounds | "
            "target | all runs succeeded |\n| --- | ---: | ---: | ---: | --- | --- | --- |")
    lines = [head] + [f"| {s} | {ml:.2f} | {msw:.2f} | **{q:.2f}×** | {rd} | ≤ 1.5: {'met' if q <= 1.5 else 'NOT met'} "
                      f"| {'yes' if ok else 'NO'} |" for s, ml, msw, q, rd, ok in rows]
    cmd = "python3 benchmarks/bench_sweep_e2e.py " + " ".join(sys.argv[1:] if argv is None else argv)
    text = ("\n".join(lines) + f"\n\n{a.backbone.upper()}-{a.hidden_size}, {a.epochs} epochs, {a.kernel} kernels on "
            f"{a.device}, dataset {a.dataset.name}; whole processes, bytecode compiled as installed.\n\n"
            f"Command: `{cmd}`\n")
    print(text, flush=True)
    if a.out:
        a.out.write_text(text, encoding="utf-8")
    return 0 if all(r[5] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
