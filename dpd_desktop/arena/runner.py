"""An Arena protocol end to end: prepare each condition, one sweep per (condition, model) over the protocol's seeds,
judge every trial on the test split, write the leaderboard.

State: ``<out>/arena-state.json`` maps each (condition, model) to its sweep; the same protocol run into the same
``out`` again reuses the sweeps that succeeded and resumes the others.
"""
from __future__ import annotations

import json
import time
from dataclasses import fields
from pathlib import Path
from typing import Any, Callable

from ..config import ExperimentConfig
from ..models.cost import model_cost
from ..atomic import atomic_write_json
from ..runs.workspace import Workspace
from .assets import ArenaAssetError, reference_rows
from .judge import baseline_scores, floor_scores, judge_trial
from .leaderboard import build_rows, write_leaderboard
from .prepare import prepare_condition
from .protocol import Protocol

__all__ = ["merge_leaderboards", "run_arena", "sweep_raw"]

_DEFAULTS = ExperimentConfig()


def sweep_raw(cfg: ExperimentConfig, seeds, name: str, device: str, group_size) -> dict[str, Any]:
    """The sweep spec tables (sweep/spec.py ``parse_spec``) of ``cfg`` over ``seeds``: [base] holds every field
    that differs from the defaults (and always step, dataset, backbone, hidden_size)."""
    base = {}
    for f in fields(ExperimentConfig):
        if f.name in ("seed", "name", "extra"):
            continue
        v = getattr(cfg, f.name)
        if f.name in ("step", "dataset", "backbone", "hidden_size") or v != getattr(_DEFAULTS, f.name):
            if v is not None:
                base[f.name] = v
    metric = "VAL_ACLR_AVG" if cfg.step == "dpd" else "VAL_NMSE"
    return {"sweep": {"name": name, "search": "grid", "metric": metric, "devices": [device],
                      "group_size": group_size},
            "base": base, "space": {"seed": [int(s) for s in seeds]}}


def _resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _run_sweep(workspace: Workspace, raw: dict, reuse: str | None, log: Callable[[str], None], stop=None):
    """Create (or reuse / resume) one sweep and run it; returns the final SweepInfo."""
    from ..sweep.runner import SweepRun, create_sweep
    from ..sweep.spec import parse_spec
    from ..sweep.store import SweepError, SweepStore, trial_done

    store = SweepStore(workspace.root)
    info = None
    if reuse:
        try:
            info = store.open(reuse)
        except (SweepError, OSError, ValueError):
            info = None
    if info is not None and info.state == "succeeded" and all(trial_done(t) for t in info.trials):
        log(f"arena: sweep {info.id} already done (reused)")
        return info
    if info is None:
        info = create_sweep(workspace, parse_spec(raw, "arena protocol"))
        log(f"arena: sweep {info.id}: {len(info.trials)} trial(s) of {raw['sweep']['name']}")
    t0 = time.perf_counter()
    info = SweepRun(workspace, info.id, stop=stop).run()
    log(f"arena: sweep {info.id} {info.state} in {time.perf_counter() - t0:.1f} s ({info.doc.get('message', '')})")
    return info


def _trained(protocol: dict | None) -> dict | None:
    """What of a protocol's dict its sweeps depend on: all but ``legacy_aclr`` (scoring only), so turning that flag
    on or off reuses the sweeps."""
    return None if protocol is None else {k: v for k, v in protocol.items() if k != "legacy_aclr"}


def run_arena(workspace: Workspace, proto: Protocol, assets: Path, out: Path, *, device: str = "auto",
              kernel: str | None = None, group_size="auto", command: str = "", log: Callable[[str], None] = print,
              stop=None) -> dict[str, Path]:
    """Run ``proto`` (module docstring); returns the leaderboard's paths. ``stop`` (a threading.Event): set, the
    running sweep stops after its trials' current batch and the leaderboard is written with what finished.
    Raises ArenaAssetError, ProtocolError, SweepError, ConfigError before any trial when the inputs are unusable."""
    out = Path(out)  # made at the first state written: inputs that fail leave no empty folder
    device = _resolve_device(device)
    state_path = out / "arena-state.json"
    try:
        state = json.loads(state_path.read_text())
    except (OSError, ValueError):
        state = {}
    if _trained(state.get("protocol")) != _trained(proto.to_dict()):
        state = {"protocol": proto.to_dict(), "sweeps": {}}
    state["protocol"] = proto.to_dict()

    def save_state() -> None:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(state_path, state)

    def train_pa(cfg: ExperimentConfig, label: str) -> str:
        key = f"pa::{label}"
        info = _run_sweep(workspace, sweep_raw(cfg, [cfg.seed], label, device, 1), state["sweeps"].get(key), log,
                          stop)
        state["sweeps"][key] = info.id
        save_state()
        t = info.trials[0]
        if t["state"] != "succeeded":
            raise RuntimeError(f"the PA run of {label} did not succeed ({t['state']}: {t.get('message')})")
        return t["run_id"]

    results, trials_out, baselines, floors = [], [], {}, {}
    for cond in proto.conditions:
        prep = prepare_condition(workspace, proto, cond, assets, device=device, train_pa=train_pa, log=log)
        base = baseline_scores(workspace, prep)
        baselines[cond.id] = base
        floors[cond.id] = fl = floor_scores(prep)
        log(f"arena: {cond.id}: floor (output = g·x) ACLR {fl['aclr_l_db']:.2f} / {fl['aclr_r_db']:.2f} dBc"
            + (f"; 2.2.1 convention {fl['aclr_legacy_l_db']:.2f} / {fl['aclr_legacy_r_db']:.2f} dBc"
               if "aclr_legacy_db" in fl else ""))
        for model in proto.models:
            if stop is not None and stop.is_set():
                break
            cfgs = [proto.trial_config(cond, model, dataset=prep.dataset_path, pa_run=prep.pa_run,
                                       gain_value=prep.gain_value, peak_limit=prep.peak_limit, device=device,
                                       kernel=kernel, seed=s) for s in proto.seeds]
            key = f"{cond.id}::{model.name}"
            label = f"arena-{proto.name}-{cond.id}-{model.name}"
            info = _run_sweep(workspace, sweep_raw(cfgs[0], proto.seeds, label, device, group_size),
                              state["sweeps"].get(key), log, stop)
            state["sweeps"][key] = info.id
            save_state()
            cost = model_cost(model.backbone, model.hidden_size, model.num_layers)
            scored = []
            for t in sorted(info.trials, key=lambda t: t["params"]["seed"]):
                entry = {"condition": cond.id, "model": model.name, "seed": t["params"]["seed"],
                         "run_id": t.get("run_id"), "state": t["state"]}
                if t["state"] == "succeeded" and t.get("run_dir"):
                    try:
                        entry.update(judge_trial(t["run_dir"], prep, base, proto.power_gate_db))
                    except Exception as exc:  # noqa: BLE001 - recorded in the leaderboard, the others still count
                        entry["error"] = f"{type(exc).__name__}: {exc}"
                else:
                    entry["error"] = t.get("message") or t["state"]
                scored.append(entry)
                trials_out.append(entry)
                if "quality_db" in entry:
                    log(f"arena: {cond.id} {model.name} seed {entry['seed']}: NMSE {entry['nmse_db']:.2f} dB, "
                        f"ACLR {entry['aclr_db']:.2f} dBc, EVM {entry['evm_db']:.2f} dB, q {entry['quality_db']:.2f} "
                        f"dB, power {entry['power_error_db']:+.2f} dB")
            results.append({"condition": cond.id, "model": {**vars(model), "arena_row": model.arena_row},
                            "params": cost.params, "macs": cost.macs_per_sample, "trials": scored})
    ref, ref_source = None, None
    if proto.reference_rows:
        try:
            ref = reference_rows(assets, proto.reference_rows)
            ref_source = f"OpenDPD 2.4.2 {proto.reference_rows}"
        except ArenaAssetError as exc:
            log(f"arena: reference rows not shown: {exc}")
    rows = build_rows(results, proto.power_gate_db, ref)
    meta = {"protocol": proto.to_dict(), "command": command, "overrides": proto.overrides, "device": device,
            "kernel": kernel, "baselines": baselines, "floors": floors, "reference_source": ref_source,
            "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "sweeps": state["sweeps"], "results": results}
    return write_leaderboard(out, meta, rows, trials_out)


def merge_leaderboards(folders: list[Path], out: Path, assets: Path | None, command: str = "") -> dict[str, Path]:
    """One leaderboard of several arena runs' ``leaderboard.json`` (e.g. one per GPU call): their (condition,
    model) results side by side, the first one's protocol and gate; later duplicates of a (condition, model)
    replace earlier ones; a leaderboard written before floors existed adds no floor line. Raises ValueError for a
    folder without leaderboard.json, with another power gate, or scoring a condition's ACLR on other windows."""
    docs = []
    for f in folders:
        p = Path(f) / "leaderboard.json"
        if not p.is_file():
            raise ValueError(f"{p}: not found (not an arena leaderboard folder)")
        docs.append(json.loads(p.read_text()))
    gate = docs[0]["protocol"]["power_gate_db"]
    if any(d["protocol"]["power_gate_db"] != gate for d in docs):
        raise ValueError("the leaderboards use different power gates; they cannot be ranked together")
    conditions: dict[str, dict] = {}  # id → the condition as its first leaderboard states it
    models: dict[str, dict] = {}  # name → the model as its last leaderboard states it (its results win too)
    for d, f in zip(docs, folders):
        models.update({m["name"]: m for m in d["protocol"].get("models", [])})
        for c in d["protocol"].get("conditions", []):
            seen = conditions.setdefault(c["id"], c)
            if seen.get("aclr_segments", "welch") != c.get("aclr_segments", "welch"):
                raise ValueError(f"{f}: condition {c['id']} scores ACLR on {c.get('aclr_segments', 'welch')} "
                                 f"windows, an earlier leaderboard on {seen.get('aclr_segments', 'welch')} ones; "
                                 f"they cannot be ranked together")
    results, trials, baselines, floors, sources = {}, {}, {}, {}, []
    for d, f in zip(docs, folders):
        for r in d["results"]:
            key = (r["condition"], r["model"]["name"])
            results[key] = r
            trials[key] = [t for t in d["trials"] if (t["condition"], t["model"]) == key]
        baselines.update(d.get("baselines", {}))
        floors.update(d.get("floors") or {})
        sources.append({"folder": str(f), "command": d.get("command"), "protocol": d["protocol"]["name"],
                        "overrides": d.get("overrides")})
    ref, ref_source = None, docs[0].get("reference_source")
    name = docs[0]["protocol"].get("reference_rows")
    if name and assets is not None:
        try:
            ref = reference_rows(assets, name)
        except ArenaAssetError:
            ref = None
    rows = build_rows(list(results.values()), gate, ref)
    meta = {**docs[0], "command": command, "merged_from": sources, "baselines": baselines, "floors": floors,
            "results": list(results.values()), "reference_source": ref_source if ref else None,
            "written": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    meta["protocol"] = {**docs[0]["protocol"], "title": docs[0]["protocol"]["title"] + " (merged)",
                        "conditions": list(conditions.values()), "models": list(models.values())}
    for k in ("rows", "trials"):
        meta.pop(k, None)
    return write_leaderboard(out, meta, rows, [t for ts in trials.values() for t in ts])
