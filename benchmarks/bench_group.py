"""Sweep groups on the GPU machine (issue 15, "Done when"): N trials that train together in one process against one
trial alone, in both kernel modes, and each member bitwise equal to its lone twin.

Workload: PA GRU-23 on DPA_160MHz, 4 epochs, batch 64, frame 200, stride 1, seeds 0…N-1 (4,605 batches per epoch).
Timed, one after another, each a fresh process with compiled bytecode (bench_gpu.py's ``compile_bytecode``, as an
install leaves it): one trial alone (``dpd-desktop train-pa --seed 0``), then the group (this script's ``--member``
mode: one process training the N trials through training/group.py ``TrainerGroup``). Ratio = group wall / lone wall
(with ``--repeat R``: R alternating rounds, the ratio of the median walls; the lone run alone varies ~15% on the H200).
Untimed, afterwards (several processes at once): the lone twins of seeds 1…N-1; every member is then compared with
its twin — history.csv values (all but the clock) and best.pt tensors bitwise.

    python3 benchmarks/bench_group.py --dataset .ref/datasets/DPA_160MHz --out benchmarks/results/x.md
    python3 benchmarks/bench_group.py --dataset ../shared/datasets/DPA_200MHz --device cpu --epochs 1 \
        --fast-size 2 --reference-size 2 --max-train-samples 4000     # CPU plumbing check (no speed-up there)
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import csv
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_gpu import bytecode_env, compile_bytecode, interpreters, run_child  # noqa: E402

SKIP_COLS = {"TIME:"}


def train_args(a, kernel: str, seed: int) -> list[str]:
    out = ["--backbone", "gru", "--hidden-size", "23", "--epochs", str(a.epochs), "--device", a.device,
           "--kernel", kernel, "--seed", str(seed)]
    if a.max_train_samples:
        out += ["--max-train-samples", str(a.max_train_samples)]
    return out


def marks_file(a, tag: str) -> Path | None:
    """``--timing DIR``: the child's timing marks (dpd_desktop/timing.py) go to DIR/tag.jsonl (None: no marks)."""
    if not a.timing:
        return None
    a.timing.mkdir(parents=True, exist_ok=True)
    (a.timing / f"{tag}.jsonl").unlink(missing_ok=True)
    return a.timing / f"{tag}.jsonl"


def note_start(a, tag: str, t0: float) -> None:
    if a.timing:
        with open(a.timing / f"{tag}.jsonl", "a") as f:
            f.write(json.dumps({"mark": "spawn", "t": t0}) + "\n")


def lone(a, kernel: str, seed: int, work: Path, env: dict, rnd: int = 0) -> dict:
    ws = work / f"lone-{kernel}-{seed}"
    tag = f"lone-{kernel}-{seed}" + (f"-r{rnd}" if rnd else "")
    marks = marks_file(a, tag)
    head = ([sys.executable, "-m", "dpd_desktop"] if marks is None
            else [sys.executable, str(ROOT / "benchmarks" / "timed.py"), str(marks), "--"])  # with its marks
    cmd = [*head, "--workspace", str(ws), "train-pa", "--dataset", str(a.dataset), *train_args(a, kernel, seed),
           "--no-plots", "--quiet"]
    wall, rss, rc, t0 = run_child(cmd, env, log_path=work / f"{tag}.log")
    note_start(a, tag, t0)
    runs = sorted((ws / "runs").glob("*-pa-*"))
    return {"wall_s": wall, "rss_mib": rss, "rc": rc, "run_dir": str(runs[-1]) if runs else None,
            "log": str(work / f"{tag}.log")}


def group(a, kernel: str, n: int, work: Path, env: dict, rnd: int = 0) -> dict:
    tag = f"group-{kernel}" + (f"-r{rnd}" if rnd else "")
    out = work / f"{tag}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--member", "--dataset", str(a.dataset), "--kernel", kernel,
           "--seeds", ",".join(map(str, range(n))), "--workspace", str(work / f"group-{kernel}"),
           "--epochs", str(a.epochs), "--device", a.device, "--result", str(out)]
    if a.max_train_samples:
        cmd += ["--max-train-samples", str(a.max_train_samples)]
    marks = marks_file(a, tag)
    if marks is not None:
        cmd += ["--marks", str(marks)]
    wall, rss, rc, t0 = run_child(cmd, env, log_path=work / f"{tag}.log")
    note_start(a, tag, t0)
    res = json.loads(out.read_text()) if out.exists() else {}
    return {"wall_s": wall, "rss_mib": rss, "rc": rc, **res, "log": str(work / f"{tag}.log")}


def member_main(a) -> None:
    """``--member``: train the seeds as one group in this process; write the result JSON."""
    from dpd_desktop import timing
    from dpd_desktop.config import ExperimentConfig
    from dpd_desktop.runs.workspace import Workspace
    from dpd_desktop.training.cpu_threads import prefer_passive_wait
    from dpd_desktop.training.group import TrainerGroup
    from dpd_desktop.training.trainer import Trainer, load_dataset_for

    prefer_passive_wait()
    if a.marks:
        timing.install(timing.Recorder(a.marks))
    ds = load_dataset_for(str(a.dataset))
    ws = Workspace(a.workspace)
    seeds = [int(s) for s in a.seeds.split(",")]
    cfgs = [ExperimentConfig(step="pa", dataset=str(a.dataset), backbone="gru", hidden_size=23, epochs=a.epochs,
                             device=a.device, kernel=a.kernel, seed=s, max_train_samples=a.max_train_samples)
            for s in seeds]
    g = TrainerGroup([Trainer(c, dataset=ds, workspace=ws) for c in cfgs])
    t0 = time.perf_counter()
    results = g.run()
    timing.mark("group_run_returned")
    Path(a.result).write_text(json.dumps({
        "train_s": time.perf_counter() - t0, "captures": g.captures, "meetings": g.meetings,
        "states": [r.state for r in results], "messages": [r.message for r in results],
        "run_dirs": [str(r.run_dir) if r.run_dir else None for r in results]}))
    # End as the two sides of the comparison end: the lone `dpd-desktop train-pa` skips the interpreter's
    # teardown once its artifacts are written (cli/entry.py Outcome.skip_teardown), and a sweep's group child
    # (lab/group_child.py) is a forkserver child on Linux, which multiprocessing ends with os._exit after its
    # target returns. (With the teardown this process took 0.85 s more after its last mark on the H200: run C of
    # benchmarks/results/2026-12-01-group-h200.md.)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def history(run_dir) -> list[dict]:
    with open(Path(run_dir) / "history.csv", newline="") as f:
        return [{k: v for k, v in row.items() if k not in SKIP_COLS} for row in csv.DictReader(f)]


def epoch_interval(run_dir) -> float | None:
    """Median of the epoch-end clock differences (history TIME:, minutes) in seconds: training + the epoch end."""
    with open(Path(run_dir) / "history.csv", newline="") as f:
        t = [float(r["TIME:"]) * 60 for r in csv.DictReader(f)]
    d = [b - a for a, b in zip(t, t[1:])]
    return statistics.median(d) if d else None


def same(twin_dir, member_dir) -> tuple[bool, str]:
    if not twin_dir or not member_dir:
        return False, "a run folder is missing"
    if history(twin_dir) != history(member_dir):
        return False, "history differs"
    ta = torch.load(Path(twin_dir) / "best.pt", map_location="cpu", weights_only=True)["state_dict"]
    tb = torch.load(Path(member_dir) / "best.pt", map_location="cpu", weights_only=True)["state_dict"]
    if list(ta) != list(tb) or not all(torch.equal(ta[k], tb[k]) for k in ta):
        return False, "best.pt differs"
    return True, "bitwise equal"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", type=Path, required=True)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--fast-size", type=int, default=8)
    ap.add_argument("--reference-size", type=int, default=4)
    ap.add_argument("--max-train-samples", type=int, default=None)
    ap.add_argument("--twins-parallel", type=int, default=4, help="lone twins trained at once (untimed)")
    ap.add_argument("--modes", default="fast,reference", help="kernel modes to run (comma-separated)")
    ap.add_argument("--skip-twins", action="store_true", help="no lone twins (no bitwise check): timing only")
    ap.add_argument("--repeat", type=int, default=1,
                    help="timed rounds per mode (one trial, then the group); the ratio is of the medians")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--timing", type=Path, default=None, help="write each timed child's timing marks to DIR/*.jsonl")
    ap.add_argument("--member", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--kernel", help=argparse.SUPPRESS)
    ap.add_argument("--seeds", help=argparse.SUPPRESS)
    ap.add_argument("--workspace", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--marks", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.member:
        member_main(a)
        return 0
    work = Path(tempfile.mkdtemp(prefix="dpd-bench-group-"))
    comp = compile_bytecode(work / "pyc", interpreters(None), [ROOT / "dpd_desktop", ROOT / "benchmarks"])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               PYTHONUNBUFFERED="1", **bytecode_env(work / "pyc"))
    dev = torch.cuda.get_device_name(0) if torch.cuda.is_available() and a.device.startswith("cuda") else "CPU"
    lines = [f"# Sweep groups: N trials in one process vs one trial alone ({time.strftime('%Y-%m-%d %H:%M')})", "",
             f"command: `python3 benchmarks/bench_group.py {' '.join(sys.argv[1:])}`", "",
             f"device: {dev}, torch {torch.__version__}; PA GRU-23, {a.epochs} epochs, seeds 0…N-1, "
             f"dataset {a.dataset.name}; bytecode compiled for every run ({comp['files']} files, {comp['seconds']:.1f} s)",
             "", "| mode | trials | whole process s | epoch interval s | ratio to one trial | target | graph captures "
             "| members bitwise equal to their lone twins |", "|---|---|---|---|---|---|---|---|"]
    ok = True
    summary = []
    # untimed warm-up: the first process on a fresh machine also reads the CUDA libraries from disk (~2 s more)
    (work / "warm-up").mkdir()
    warm = lone(a, a.modes.split(",")[0], 0, work / "warm-up", env)
    summary.append(f"- untimed warm-up run first (the disk cache): {warm['wall_s']:.2f} s, exit {warm['rc']}")
    modes = [m for m in (("fast", a.fast_size, 1.5), ("reference", a.reference_size, 3.0)) if m[0] in a.modes]
    for kernel, n, target in modes:
        # --repeat R: R rounds of (one trial, the group), alternating; the ratio is of the medians
        rounds = [(lone(a, kernel, 0, work, env, r), group(a, kernel, n, work, env, r)) for r in range(a.repeat)]
        one, grp = rounds[0]
        if a.skip_twins:
            twins = [one] + [{"run_dir": None, "rc": 0}] * (n - 1)
            checks = [(False, "not checked (--skip-twins)")] * n
        else:
            with cf.ThreadPoolExecutor(a.twins_parallel) as pool:
                twins = [one] + list(pool.map(lambda s: lone(a, kernel, s, work, env), range(1, n)))
            checks = [same(t["run_dir"], d) for t, d in zip(twins, grp.get("run_dirs") or [None] * n)]
        n_same = sum(c[0] for c in checks)
        one_s = statistics.median(o["wall_s"] for o, _ in rounds)
        grp_s = statistics.median(g["wall_s"] for _, g in rounds)
        ratio = grp_s / one_s
        met = ratio <= target and (n_same == n or a.skip_twins) and all(o["rc"] == 0 and g["rc"] == 0
                                                                         for o, g in rounds)
        ok &= met
        ei1 = epoch_interval(one["run_dir"]) if one["run_dir"] else None
        eig = epoch_interval(grp["run_dirs"][0]) if grp.get("run_dirs") and grp["run_dirs"][0] else None
        f = lambda v: "—" if v is None else f"{v:.2f}"  # noqa: E731
        lines.append(f"| {kernel} | 1 | {one_s:.2f} | {f(ei1)} | 1.00 | | | |")
        lines.append(f"| {kernel} | {n} | {grp_s:.2f} | {f(eig)} | **{ratio:.2f}×** | ≤ {target}: "
                     f"{'met' if ratio <= target else 'MISSED'} | {grp.get('captures')} | {n_same} of {n} |")
        summary.append(f"- {kernel}: {n} trials in {grp_s:.2f} s against one in {one_s:.2f} s = "
                       f"{ratio:.2f}× (target ≤ {target}); states {grp.get('states')}; "
                       f"{'; '.join(f'seed {i}: {c[1]}' for i, c in enumerate(checks))}")
        if len(rounds) > 1:
            summary.append(f"  - {len(rounds)} rounds (one trial, group; s): "
                           + ", ".join(f"{o['wall_s']:.2f} / {g['wall_s']:.2f} = {g['wall_s'] / o['wall_s']:.2f}×"
                                       for o, g in rounds) + "; the table holds the medians")
        for r in [x for pair in rounds for x in pair] + twins[1:]:
            if r["rc"] != 0 and "log" in r:
                summary.append(f"  - exit {r['rc']}: {open(r['log']).read()[-1500:]}")
    lines += ["", *summary, "", f"all targets met: {ok}"]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
