"""Same numbers as the reference, on CPU: every family as PA, and DPD GRU through the frozen GRU PA.

Runs the reference OpenDPD 2.2.1 trainer (prepared with ../shared/bench/prepare-reference.sh into .ref, run with a
Python that has its dependencies: pandas, tqdm, rich, matplotlib) and ours on the same data and settings, then
compares every history metric column textually (8 logged decimals, as the reference writes them) and the selected
checkpoint tensor by tensor (torch.equal). Both sides use the same torch/NumPy/SciPy build and thread count.

    python benchmarks/compare_reference_cpu.py --ref-python /path/to/ref/venv/bin/python \\
        --dataset ../shared/datasets/DPA_200MHz --out benchmarks/results/cpu-reference.md
"""
from __future__ import annotations

import argparse
import csv
import glob
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
COLS = ["LR", "TRAIN_LOSS", "VAL_LOSS", "VAL_NMSE", "VAL_EVM", "VAL_ACLR_L", "VAL_ACLR_R", "VAL_ACLR_AVG",
        "TEST_LOSS", "TEST_NMSE", "TEST_EVM", "TEST_ACLR_L", "TEST_ACLR_R", "TEST_ACLR_AVG", "N_PARAM"]


def run(cmd, cwd=None, env=None):
    t = time.time()
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return time.time() - t


def compare(ours_dir: Path, ref_hist: str, ref_ckpt: str):
    ho = list(csv.DictReader(open(ours_dir / "history.csv")))
    hr = list(csv.DictReader(open(ref_hist)))
    diffs = [(a["EPOCH"], c, a[c], b[c]) for a, b in zip(ho, hr) for c in COLS if a[c] != b[c]]
    ob = torch.load(ours_dir / "best.pt", weights_only=True)["state_dict"]
    rb = torch.load(ref_ckpt, weights_only=True)
    ck = list(ob) == list(rb) and all(torch.equal(ob[k], rb[k]) for k in rb)
    return (not diffs and len(ho) == len(hr)), ck, diffs[:3], ho[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ref", default=str(ROOT / ".ref"))
    ap.add_argument("--ref-python", required=True)
    ap.add_argument("--dataset", default=str(ROOT.parent / "shared" / "datasets" / "DPA_200MHz"))
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=23)
    ap.add_argument("--frame", type=int, default=50)
    ap.add_argument("--stride", type=int, default=16)
    ap.add_argument("--work", default="/tmp/cmpref")
    ap.add_argument("--out", default=None)
    ap.add_argument("--backbones", default="gru,lstm,dgru,tres_gru,rvtdcnn", help="PA families to compare")
    ap.add_argument("--dpd", default="gru,dgru", help="DPD families to train through the GRU PA ('' for none)")
    a = ap.parse_args()
    ds = Path(a.dataset).resolve()
    name = ds.name
    tree = Path(a.ref) / "opendpd-2.2.1"
    link = tree / "datasets" / name
    if not link.exists():
        link.symlink_to(ds)
    work = Path(a.work)
    common = ["--dataset_name", name, "--PA_hidden_size", str(a.hidden), "--PA_num_layers", "1", "--n_epochs",
              str(a.epochs), "--accelerator", "cpu", "--frame_length", str(a.frame), "--frame_stride", str(a.stride),
              "--batch_size", "64", "--seed", "0"]
    ours_common = ["--hidden-size", str(a.hidden), "--epochs", str(a.epochs), "--frame-length", str(a.frame),
                   "--stride", str(a.stride), "--device", "cpu", "--no-plots", "--quiet"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    lines = [f"# Ours vs reference OpenDPD 2.2.1 on CPU ({time.strftime('%Y-%m-%d %H:%M')})", "",
             f"command: `python benchmarks/compare_reference_cpu.py {' '.join(sys.argv[1:])}`", "",
             f"{name}, {a.epochs} epochs, hidden {a.hidden}, frame {a.frame}, stride {a.stride}, batch 64, seed 0; "
             f"torch {torch.__version__}, {torch.get_num_threads()} threads; history columns compared: "
             f"{', '.join(COLS)}", "",
             "| run | history bitwise | checkpoint bitwise | ours s | ref s | last-epoch val NMSE | first differences |",
             "|---|---|---|---|---|---|---|"]
    pa_runs = {}
    backbones = [b for b in a.backbones.split(",") if b]
    if a.dpd and "gru" not in backbones:
        backbones.insert(0, "gru")
    for bb in backbones:
        w = work / bb
        w.mkdir(parents=True, exist_ok=True)
        tr = run([a.ref_python, str(tree / "main.py"), *common, "--PA_backbone", bb, "--step", "train_pa"], cwd=w)
        to = run([sys.executable, "-m", "dpd_desktop", "--workspace", str(w / "ws"), "train-pa", "--dataset", str(ds),
                  "--backbone", bb, *ours_common], env=env)
        od = sorted((w / "ws" / "runs").iterdir())[-1]
        pa_runs[bb] = (w, od)
        rh = glob.glob(str(w / "log" / name / "train_pa" / "history" / "*.csv"))[0]
        rc = glob.glob(str(w / "save" / name / "train_pa" / "*.pt"))[0]
        h, c, d, last = compare(od, rh, rc)
        lines.append(f"| PA {bb} | {h} | {c} | {to:.1f} | {tr:.1f} | {last['VAL_NMSE']} | {d or ''} |")
        print(lines[-1], flush=True)
    for dpd_bb in [b for b in a.dpd.split(",") if b]:
        w, od_pa = pa_runs["gru"]
        tr = run([a.ref_python, str(tree / "main.py"), *common, "--PA_backbone", "gru", "--step", "train_dpd",
                  "--DPD_backbone", dpd_bb, "--DPD_hidden_size", str(a.hidden), "--DPD_num_layers", "1"], cwd=w)
        to = run([sys.executable, "-m", "dpd_desktop", "--workspace", str(w / "ws"), "train-dpd", "--dataset", str(ds),
                  "--pa-run", str(od_pa), "--backbone", dpd_bb, *ours_common], env=env)
        od = sorted((w / "ws" / "runs").glob(f"*dpd-{dpd_bb}*"))[-1]
        rh = sorted(glob.glob(str(w / "log" / name / "train_dpd" / "**" / "history" / "*.csv"), recursive=True),
                    key=os.path.getmtime)[-1]
        rc = sorted(glob.glob(str(w / "save" / name / "train_dpd" / "**" / "*.pt"), recursive=True),
                    key=os.path.getmtime)[-1]
        h, c, d, last = compare(od, rh, rc)
        lines.append(f"| DPD {dpd_bb} via PA gru | {h} | {c} | {to:.1f} | {tr:.1f} | {last['VAL_NMSE']} | {d or ''} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
