"""Quantised DPD vs float through the frozen PA (issue 26): float, 16-bit and 8-bit, after training (PTQ) and with
quantisation-aware fine-tuning (QAT), as mean ± sd over seeds.

    python benchmarks/bench_quant.py --dataset ../shared/datasets/DPA_160MHz --device cuda --seeds 0,1,2
    python benchmarks/bench_quant.py --dataset ../shared/datasets/DPA_200MHz --device cpu --threads 1 \\
        --pa-epochs 6 --dpd-epochs 8 --qat-epochs 3 --stride 4 --out benchmarks/results/…md

Per seed: one float DPD (``--backbone``/``--hidden-size``, default GRU-23) through one frozen PA (trained once, seed
0, or ``--pa-run``); its integer model at W16A16 and W8A8 (export/quantized.py: the bit-exact reference over the test
split, through the PA, under ``--profile``; input and output words 16 bits, and W8A8 with 8-bit ones after training
only); a float fine-tune with the QAT's epochs and learning rate (the control:
what the extra epochs alone do); a QAT fine-tune of it at each width (``dpd-desktop finetune``'s
configuration, ``--qat-epochs``) and that run's integer model. The table gives test NMSE, ACLR (average of both
sides) and EVM, and each variant's loss against its seed's float DPD (mean ± sd of the per-seed differences; a
positive ΔACLR/ΔEVM is a loss), then the issue's targets: 16-bit ≤ 0.2 dB ACLR and ≤ 0.3 dB EVM, 8-bit with QAT
≤ 1 dB. Runs stay in ``--workspace`` (default a new temporary folder); ``--out`` writes the table as Markdown with
the command. Every run is a run folder: ``dpd-desktop runs`` lists them with their quantised metrics.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the script runs from benchmarks/: this checkout's package, not an installed one

from dpd_desktop.cli.deploy import finetune_config  # noqa: E402
from dpd_desktop.config import KERNELS, METRIC_PROFILES, ExperimentConfig  # noqa: E402
from dpd_desktop.data import load_dataset  # noqa: E402
from dpd_desktop.data.segments import segment  # noqa: E402
from dpd_desktop.quant.diagnose import node_errors  # noqa: E402
from dpd_desktop.quant.lower import lower  # noqa: E402
from dpd_desktop.quant.plan import QuantPlan  # noqa: E402
from dpd_desktop.config import QuantSpec
from dpd_desktop.export.quantized import load_dpd  # noqa: E402
from dpd_desktop.export.quantized import evaluate_quantized, save_quantized  # noqa: E402
from dpd_desktop.runs.record import RunRecord  # noqa: E402
from dpd_desktop.runs.workspace import Workspace  # noqa: E402
from dpd_desktop.training.trainer import Trainer  # noqa: E402

WIDTHS = ((16, 16), (8, 8))  # PTQ and QAT, 16-bit input/output words (quant/plan.py)
#: PTQ only: W8A8 with 8-bit input/output words (the rounding-noise floor of 8-bit interface words)
PTQ_ONLY = (QuantSpec(8, 8, io_bits=8),)
KEYS = (("NMSE", "dB"), ("ACLR_AVG", "dBc"), ("EVM", "dB"))


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", required=True)
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--workspace", default=None)
    p.add_argument("--pa-run", default=None, help="an existing PA run of this dataset (else one is trained)")
    p.add_argument("--pa-epochs", type=int, default=ExperimentConfig().epochs)
    p.add_argument("--pa-hidden", type=int, default=23)
    p.add_argument("--backbone", default="gru")
    p.add_argument("--hidden-size", type=int, default=23)
    p.add_argument("--dpd-epochs", type=int, default=ExperimentConfig().epochs)
    p.add_argument("--qat-epochs", type=int, default=10, help="0: after training only (PTQ), no fine-tunes")
    p.add_argument("--qat-lr", type=float, default=None, help="default: the DPD's lr / 10")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--stride", type=int, default=1, help="frame stride of every training (default 1)")
    p.add_argument("--qat-stride", type=int, default=None,
                   help="frame stride of the fine-tunes (default --stride): a fine-tune trains eagerly, without CUDA graph")
    p.add_argument("--qat-batch-size", type=int, default=None,
                   help="batch size of the fine-tunes (default: the DPD's): on a GPU a fine-tune's eager step costs "
                        "about the same at 64 or 256 frames, so a larger batch is fewer steps per epoch")
    p.add_argument("--kernel", default="reference", choices=KERNELS, help="recurrence kernels of the PA and float DPD")
    p.add_argument("--frame-length", type=int, default=200)
    p.add_argument("--profile", default="legacy-2.2.1", choices=METRIC_PROFILES)
    p.add_argument("--gain-rule", default="peak")
    p.add_argument("--out", default=None, help="write the table as Markdown here")
    p.add_argument("--json", default=None, help="write every number as JSON here")
    p.add_argument("--parallel-seeds", action="store_true",
                   help="after the PA, train each seed in its own process at once (one GPU shared): the fine-tunes "
                        "train eagerly, and one process keeps a GPU busy only a fraction of the time")
    p.add_argument("--nodes", action="store_true",
                   help="print each PTQ model's per-tensor error against the float model on the first test segment")
    return p.parse_args(argv)


def _seed_processes(argv: list[str], seeds: list[int], pa: str, ws: Workspace) -> tuple[dict, dict]:
    """Run this script once per seed (``--pa-run pa --seeds s``, same workspace) at the same time; merge their
    rows and runs in seed order. Exits when one fails."""
    drop = {"--seeds", "--out", "--json", "--pa-run", "--workspace"}
    base: list[str] = []
    it = iter(argv)
    for tok in it:
        if tok == "--parallel-seeds":
            continue
        if tok.split("=", 1)[0] in drop:
            if "=" not in tok:
                next(it, None)
            continue
        base.append(tok)
    procs = []
    for s in seeds:
        out = Path(ws.root) / f"seed-{s}.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), *base, "--seeds", str(s), "--pa-run", pa,
               "--workspace", str(ws.root), "--json", str(out)]
        procs.append((s, out, subprocess.Popen(cmd)))
    rows: dict[str, list[dict]] = {}
    runs: dict[str, list[str]] = {}
    for s, out, proc in procs:
        if proc.wait() != 0:
            sys.exit(f"seed {s}: its process exited {proc.returncode}")
    for s, out, proc in procs:
        doc = json.loads(out.read_text(encoding="utf-8"))
        for name, ms in doc["rows"].items():
            rows.setdefault(name, []).extend(ms)
            runs.setdefault(name, []).extend(doc["runs"][name])
    return rows, runs


def _train(cfg: ExperimentConfig, ds, ws: Workspace):
    t0 = time.perf_counter()
    res = Trainer(cfg, dataset=ds, workspace=ws).run()
    if res.state != "succeeded":
        sys.exit(f"{cfg.step} run failed: {getattr(res, 'message', res.state)}")
    print(f"  {cfg.step} run {res.run_id}: {time.perf_counter() - t0:.0f} s", flush=True)
    return Path(res.run_dir)


def _ms(values) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.2f} ± {sd:.2f}"


def _print_nodes(run_dir: Path, doc: dict, ds) -> None:
    """quant/diagnose.py ``node_errors`` of the run's integer model under ``doc``'s plan, one line per tensor."""
    model = load_dpd(RunRecord.open(run_dir)).double()
    x = segment(ds.test.x, int(ds.spec.nperseg))[:1]
    for key, e in node_errors(lower(model), QuantPlan.from_dict(doc["plan"]), x).items():
        print(f"      {doc['label']} {key:14s} frac {e['frac']:3d}  max|v| {e['max_abs']:9.4g}  error "
              f"{e['error_db']:7.1f} dB  saturated {e['saturated']}", flush=True)


def main(argv=None) -> int:
    a = _args(argv)
    ws = Workspace(a.workspace or tempfile.mkdtemp(prefix="bench-quant-"))
    ds = load_dataset(a.dataset)
    seeds = [int(s) for s in a.seeds.split(",")]
    common = dict(dataset=str(Path(a.dataset).resolve()), device=a.device, threads=a.threads, stride=a.stride,
                  frame_length=a.frame_length, metric_profile=a.profile, kernel=a.kernel)
    qat_stride = a.qat_stride or a.stride

    def tune(rec, spec):
        return dataclasses.replace(finetune_config(rec, spec, epochs=a.qat_epochs, lr=a.qat_lr, device=a.device,
                                                   threads=a.threads), stride=qat_stride,
                                   batch_size=a.qat_batch_size or rec.config.batch_size)
    t_all = time.perf_counter()
    print(f"workspace {ws.root}", flush=True)
    pa = a.pa_run or _train(ExperimentConfig(step="pa", backbone="gru", hidden_size=a.pa_hidden, epochs=a.pa_epochs,
                                             seed=0, **common), ds, ws).name
    rows: dict[str, list[dict]] = {"float": []}
    runs: dict[str, list[str]] = {"float": []}
    if a.parallel_seeds and len(seeds) > 1:
        rows, runs = _seed_processes(sys.argv[1:] if argv is None else list(argv), seeds, pa, ws)
        seeds_run: list[int] = []
    else:
        seeds_run = seeds
    for seed in seeds_run:
        print(f"seed {seed}", flush=True)
        d = _train(ExperimentConfig(step="dpd", pa_run=pa, backbone=a.backbone, hidden_size=a.hidden_size,
                                    epochs=a.dpd_epochs, seed=seed, gain_rule=a.gain_rule, **common), ds, ws)
        rec = RunRecord.open(d)
        rows["float"].append(rec.test_metrics)
        runs["float"].append(d.name)
        if a.qat_epochs > 0:
            ft = _train(tune(rec, None), ds, ws)
            rows.setdefault("float fine-tune (control)", []).append(RunRecord.open(ft).test_metrics)
            runs.setdefault("float fine-tune (control)", []).append(ft.name)
        for spec in PTQ_ONLY:
            doc = evaluate_quantized(d, spec, dataset=ds)
            save_quantized(d, doc)
            rows.setdefault(f"{spec.label} PTQ", []).append(doc["metrics"]["test"])
            runs.setdefault(f"{spec.label} PTQ", []).append(d.name)
        for w, act in WIDTHS:
            spec = QuantSpec(w, act)
            doc = evaluate_quantized(d, spec, dataset=ds)
            save_quantized(d, doc)
            if a.nodes:
                _print_nodes(d, doc, ds)
            rows.setdefault(f"{spec.label} PTQ", []).append(doc["metrics"]["test"])
            runs.setdefault(f"{spec.label} PTQ", []).append(d.name)
            if a.qat_epochs <= 0:
                print(f"    {spec.label}: PTQ ACLR {doc['metrics']['test']['ACLR_AVG']:.2f} (float "
                      f"{rec.test_metrics['ACLR_AVG']:.2f}) dBc", flush=True)
                continue
            q = _train(tune(rec, spec), ds, ws)
            qdoc = evaluate_quantized(q, spec, dataset=ds)
            save_quantized(q, qdoc)
            rows.setdefault(f"{spec.label} QAT", []).append(qdoc["metrics"]["test"])
            runs.setdefault(f"{spec.label} QAT", []).append(q.name)
            print(f"    {spec.label}: PTQ ACLR {doc['metrics']['test']['ACLR_AVG']:.2f}, QAT ACLR "
                  f"{qdoc['metrics']['test']['ACLR_AVG']:.2f} (float {rec.test_metrics['ACLR_AVG']:.2f}) dBc",
                  flush=True)
    wall = time.perf_counter() - t_all
    head = ("| variant | test NMSE [dB] | test ACLR [dBc] | test EVM [dB] | ΔNMSE [dB] | ΔACLR [dB] | ΔEVM [dB] |\n"
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    lines = [head]
    verdict = []
    for name, ms in rows.items():
        cells = [_ms([m[k] for m in ms]) for k, _ in KEYS]
        deltas = [[m[k] - f[k] for m, f in zip(ms, rows["float"])] for k, _ in KEYS]
        dcells = ["–" if name == "float" else _ms(dl) for dl in deltas]
        lines.append(f"| {name} | " + " | ".join(cells + dcells) + " |")
        if name != "float":
            d_aclr, d_evm = statistics.fmean(deltas[1]), statistics.fmean(deltas[2])
            if name.startswith("W16A16"):
                ok = d_aclr <= 0.2 and d_evm <= 0.3
                verdict.append(f"- {name}: ΔACLR {d_aclr:+.3f} dB (≤ 0.2), ΔEVM {d_evm:+.3f} dB (≤ 0.3): "
                               f"{'met' if ok else 'NOT met'}")
            elif name == "W8A8 QAT":
                ok = d_aclr <= 1.0 and d_evm <= 1.0
                verdict.append(f"- {name}: ΔACLR {d_aclr:+.3f} dB, ΔEVM {d_evm:+.3f} dB (≤ 1): "
                               f"{'met' if ok else 'NOT met'}")
                ctl = rows.get("float fine-tune (control)")
                if ctl:
                    c_aclr = statistics.fmean(m["ACLR_AVG"] - c["ACLR_AVG"] for m, c in zip(ms, ctl))
                    c_evm = statistics.fmean(m["EVM"] - c["EVM"] for m, c in zip(ms, ctl))
                    verdict.append(f"- {name} against the float fine-tune with the same epochs (the control): "
                                   f"ΔACLR {c_aclr:+.3f} dB, ΔEVM {c_evm:+.3f} dB")
    table = "\n".join(lines)
    cmd = "python benchmarks/bench_quant.py " + " ".join(sys.argv[1:] if argv is None else argv)
    text = (f"{table}\n\nTargets (mean over seeds of the per-seed loss against the float DPD; Δ > 0 is a loss):\n"
            + "\n".join(verdict)
            + f"\n\n{len(seeds)} seeds ({a.seeds}), {a.backbone.upper()}-{a.hidden_size} DPD through "
            f"the frozen PA {pa}, profile {a.profile}, gain rule {a.gain_rule}; PA {a.pa_epochs} and DPD "
            f"{a.dpd_epochs} epochs at stride {a.stride} ({a.kernel} kernels), fine-tunes {a.qat_epochs} epochs at "
            f"stride {qat_stride}{f', batch {a.qat_batch_size}' if a.qat_batch_size else ''}; "
            f"{wall / 60:.1f} min.\n\n"
            f"Command: `{cmd}`\n")
    print(text, flush=True)
    if a.out:
        Path(a.out).write_text(text, encoding="utf-8")
    if a.json:
        Path(a.json).write_text(json.dumps({"rows": rows, "runs": runs, "pa_run": pa, "workspace": str(ws.root)},
                                           indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
