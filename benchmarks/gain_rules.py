"""The DPD target gain rules side by side on one dataset (issue 13, point 2): for each rule a DPD is trained through
the same frozen PA, then scored under both metric profiles (the second by ``runs evaluate``, no retraining).

    python benchmarks/gain_rules.py --dataset ../shared/datasets/DPA_160MHz --device cuda
    python benchmarks/gain_rules.py --dataset ../shared/datasets/DPA_200MHz --device cpu --pa-epochs 2 --dpd-epochs 2

Prints per rule: g, the output-power change of the cascade vs the PA without DPD (dB), the equal-output-power
comparison (drive of the DPD-off PA, ACLR with/without DPD), and NMSE / ACLR_AVG / EVM under ``legacy-2.2.1`` and
``corrected``; then the acceptance check "small-signal keeps output power within 0.5 dB". ``--json FILE`` writes
the table. The runs stay in the workspace (``--workspace``, default a new temporary folder).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the script runs from benchmarks/: this checkout's package, not an installed one

from dpd_desktop.config import GAIN_RULES, METRIC_PROFILES, ExperimentConfig  # noqa: E402
from dpd_desktop.data import load_dataset  # noqa: E402
from dpd_desktop.runs.evaluate import evaluate_run  # noqa: E402
from dpd_desktop.runs.record import RunRecord  # noqa: E402
from dpd_desktop.runs.workspace import Workspace  # noqa: E402
from dpd_desktop.training.trainer import Trainer  # noqa: E402


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", required=True, help="dataset folder or file (e.g. DPA_160MHz)")
    p.add_argument("--device", default="auto")
    p.add_argument("--workspace", default=None, help="workspace folder (default: a new temporary folder)")
    p.add_argument("--pa-run", default=None, help="an existing PA run (id or folder) of this dataset; else one is "
                                                  "trained")
    p.add_argument("--pa-epochs", type=int, default=ExperimentConfig().epochs)
    p.add_argument("--dpd-epochs", type=int, default=ExperimentConfig().epochs)
    p.add_argument("--pa-hidden", type=int, default=23)
    p.add_argument("--dpd-hidden", type=int, default=15)
    p.add_argument("--rules", nargs="+", default=list(GAIN_RULES), choices=GAIN_RULES)
    p.add_argument("--train-profile", default="legacy-2.2.1", choices=METRIC_PROFILES,
                   help="the profile the DPD runs train under (checkpoint selection and the equal-power report)")
    p.add_argument("--max-train-samples", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="write the table as JSON here")
    return p.parse_args(argv)


def _train(cfg: ExperimentConfig, ds, ws: Workspace):
    t0 = time.perf_counter()
    res = Trainer(cfg, dataset=ds, workspace=ws).run()
    if res.state != "succeeded":
        sys.exit(f"{cfg.step} run failed: {res.message}")
    print(f"  {cfg.step} run {res.run_id}: {time.perf_counter() - t0:.0f} s", flush=True)
    return res


def main(argv=None) -> int:
    a = _args(argv)
    ws = Workspace(a.workspace or tempfile.mkdtemp(prefix="gain-rules-"))
    ws.check(create=True)
    ds = load_dataset(a.dataset)
    common = dict(dataset=str(a.dataset), device=a.device, seed=a.seed, max_train_samples=a.max_train_samples)
    print(f"{ds.name}: workspace {ws.root}", flush=True)
    pa_run = a.pa_run
    if pa_run is None:
        pa_run = str(_train(ExperimentConfig(step="pa", epochs=a.pa_epochs, hidden_size=a.pa_hidden, **common),
                            ds, ws).run_dir)
    rows = []
    for rule in a.rules:
        cfg = ExperimentConfig(step="dpd", pa_run=pa_run, epochs=a.dpd_epochs, hidden_size=a.dpd_hidden,
                               gain_rule=rule, metric_profile=a.train_profile, **common)
        res = _train(cfg, ds, ws)
        rec = RunRecord.open(res.run_dir)
        st = rec.status_doc
        row = {"rule": rule, "g": rec.gain, "run": res.run_id, "out_power_change_db": st.get("rms_out_diff_db"),
               "eqp_drive_db": st.get("eqp_drive_db"), "eqp_ACLR_with_dpd": st.get("eqp_ACLR_with_dpd"),
               "eqp_ACLR_without_dpd": st.get("eqp_ACLR_without_dpd"), "eqp_EVM_with_dpd": st.get("eqp_EVM_with_dpd"),
               "eqp_EVM_without_dpd": st.get("eqp_EVM_without_dpd"), "train_profile": a.train_profile}
        for prof in METRIC_PROFILES:
            row[prof] = evaluate_run(res.run_dir, prof)["metrics"]["test"]
        rows.append(row)
    print(f"\n{ds.name}, test split; DPD runs trained under {a.train_profile}; equal-power columns under it too")
    head = (f"{'rule':13s} {'g':>8s} {'dP dB':>7s} {'drive':>7s} {'ACLReq+':>8s} {'ACLReq-':>8s} | "
            + " | ".join(f"{p:^26s}" for p in METRIC_PROFILES))
    print(head)
    print(f"{'':13s} {'':8s} {'':7s} {'dB':>7s} {'dBc':>8s} {'dBc':>8s} | "
          + " | ".join(f"{'NMSE':>8s} {'ACLR':>8s} {'EVM':>8s}" for _ in METRIC_PROFILES))
    for r in rows:
        f = lambda v: f"{v:8.3f}" if isinstance(v, (int, float)) else f"{'-':>8s}"  # noqa: E731
        print(f"{r['rule']:13s} {r['g']:8.5f} {r['out_power_change_db']:+7.2f} {r['eqp_drive_db']:+7.2f} "
              f"{f(r['eqp_ACLR_with_dpd'])} {f(r['eqp_ACLR_without_dpd'])} | "
              + " | ".join(" ".join(f(r[p][k]) for k in ("NMSE", "ACLR_AVG", "EVM")) for p in METRIC_PROFILES))
    ss = [r for r in rows if r["rule"] == "small-signal"]
    if ss:
        d = ss[0]["out_power_change_db"]
        verdict = "PASS" if abs(d) <= 0.5 else "FAIL"
        print(f"\nsmall-signal output-power change {d:+.2f} dB: {verdict} (|change| <= 0.5 dB)")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
