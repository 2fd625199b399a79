"""The leaderboard of an Arena run: one row per (condition, model) with mean ± sd over seeds, parameters and
MACs/sample, the power gate, the Pareto front; the reference leaderboard's rows beside ours where a model
reproduces one. Written as Markdown, HTML and CSV (per model; ``trials.csv`` per seed) plus ``leaderboard.json``.

Conventions:
* sd: the sample standard deviation over seeds (n − 1; 0 for one seed), as OpenDPD's Arena reports its seed spread.
* ACLR is the worse side, max(ACLR_L, ACLR_R), per seed, then averaged (the Arena's).
* q: the Arena's quality (arena/metrics.py); ranked by mean q, higher first. A model whose output power leaves the
  gate on any seed is listed but not ranked ("gate" column) and is not on the Pareto front.
* Pareto front, per condition, among gated models: not dominated in (fewer parameters, higher q); separately in
  (fewer MACs/sample, higher q).
* Agreement with a reference row: per metric |mean_ours − mean_ref| ≤ 2·sqrt(sd_ours²/n_ours + sd_ref²/n_ref)
  (two seed means within two standard errors; the reference's per-seed values from its published cases).
* Floor, per condition (``meta["floors"]``, judge.py ``floor_scores``): the ACLR left / right / worse [dBc] of the
  target g·x itself under the condition's metric settings, listed under the linear baseline; a model whose mean ACLR
  is within FLOOR_MARGIN_DB of it (or below) is marked †. In the JSON only, as the baselines (not in the CSV); a
  leaderboard.json written before floors existed renders without the line.
* ACLR 2.2.1 (protocol flag ``legacy_aclr``; arena/metrics.py ``legacy_aclr``): when any trial has
  ``aclr_legacy_db``, a column of it (worse side per seed, mean ± sd, as the ACLR; not in q), in the CSVs too, and
  on the baseline and floor lines. Without it every output is as before.
"""
from __future__ import annotations

import csv
import html
import io
import math
import statistics
from pathlib import Path
from typing import Any, Iterable

from ..atomic import atomic_write_json, atomic_write_text

__all__ = ["FLOOR_MARGIN_DB", "LEGACY", "LEGACY_NOTE", "METRICS", "build_rows", "floor_lines", "pareto",
           "reference_summary", "write_leaderboard"]

#: (key in a trial's scores, column label, unit)
METRICS = (("nmse_db", "NMSE", "dB"), ("aclr_db", "ACLR (worse)", "dBc"), ("evm_db", "EVM", "dB"),
           ("quality_db", "q", "dB"), ("power_error_db", "power error", "dB"))
#: The ACLR in OpenDPD 2.2.1's convention, a column only when a trial has it.
LEGACY = ("aclr_legacy_db", "ACLR 2.2.1 (worse)", "dBc")
LEGACY_NOTE = ("ACLR 2.2.1 (worse) [dBc]: OpenDPD 2.2.1's ACLR: a Hann-windowed periodogram per nperseg-sample "
               "segment from the split start (no overlap, the last segment zero-padded), averaged; adjacent bands "
               "one sub-channel wide; the convention of published DPA numbers. Not in q.")
#: A row whose mean worse-side ACLR is within this many dB of its condition's floor (or below it) is marked †.
FLOOR_MARGIN_DB = 1.0
FLOOR_HEAD = "Floor (a DPD whose output equals g·x; no model that matches its target measures below it):"


def _mean_sd(values: Iterable[float]) -> tuple[float, float]:
    v = [float(x) for x in values]
    if not v:
        return math.nan, math.nan
    return statistics.fmean(v), (statistics.stdev(v) if len(v) > 1 else 0.0)


def reference_summary(rows: list[dict], backbone: str, budget: int, condition: str | None = None
                      ) -> dict[str, Any] | None:
    """One configuration of a reference leaderboard (OpenDPD 2.4.2 ``reference-results-*.json``): its parameters,
    ops and per-metric mean and sd over its seeds (from its cases; only those of ``condition`` when given), or None
    when absent."""
    row = next((r for r in rows if r.get("backbone") == backbone), None)
    if row is None:
        return None
    point = next((b for b in row.get("budgets", []) if b.get("budget") == budget and b.get("available")), None)
    if point is None:
        return None
    cases = [c for c in row.get("cases", []) if c.get("budget") == budget
             and (condition is None or c.get("condition_id") == condition)]
    if not cases:
        return None
    per = {"nmse_db": [], "aclr_db": [], "evm_db": [], "quality_db": [], "power_error_db": []}
    for c in cases:
        j = c["judges"][0]
        per["nmse_db"].append(j["nmse_db"])
        per["aclr_db"].append(max(j["aclr_l_db"], j["aclr_r_db"]))
        per["evm_db"].append(j["evm_db"])
        per["power_error_db"].append(j["power_error_db"])
        per["quality_db"].append(0.5 * (j["baseline_evm_db"] - j["evm_db"])
                                 + 0.5 * (max(j["baseline_aclr_l_db"], j["baseline_aclr_r_db"])
                                          - max(j["aclr_l_db"], j["aclr_r_db"])))
    stats = {k: _mean_sd(v) for k, v in per.items()}
    return {"display_name": row.get("display_name"), "backbone": backbone, "budget": budget,
            "params": point.get("parameters"), "ops": point.get("ops"), "n": len(cases),
            "seeds": [c.get("seed") for c in cases], "stats": stats,
            "published": {"nmse_db": point["metrics"]["nmse_db"], "aclr_db": point["metrics"]["aclr_db"],
                          "evm_db": point["metrics"]["evm_db"], "quality_db": point["quality_db"],
                          "quality_std_db": point["quality_std_db"]}}


def build_rows(results: list[dict[str, Any]], gate_db: float, reference: list[dict] | None) -> list[dict[str, Any]]:
    """Leaderboard rows from ``results`` (one dict per (condition, model): ``condition``, ``model`` (name,
    backbone, hidden_size, arena_row), ``params``, ``macs``, ``trials`` (per-seed scores)). Sorted per condition
    by mean q (gated models first)."""
    out = []
    for r in results:
        trials = [t for t in r["trials"] if "quality_db" in t]
        row = {"condition": r["condition"], "model": r["model"]["name"], "backbone": r["model"]["backbone"],
               "hidden_size": r["model"]["hidden_size"], "params": r["params"], "macs": r["macs"],
               "n": len(trials), "n_planned": len(r["trials"]), "seeds": [t.get("seed") for t in trials],
               "stats": {k: _mean_sd(t[k] for t in trials) for k, _, _ in METRICS},
               "worst_power_db": max((abs(t["power_error_db"]) for t in trials), default=math.nan),
               "evm_kind": trials[0]["evm_kind"] if trials else "",
               "gate_ok": bool(trials) and len(trials) == len(r["trials"]) and all(t["gate_ok"] for t in trials)}
        if any(LEGACY[0] in t for t in trials):
            row["stats"][LEGACY[0]] = _mean_sd(t[LEGACY[0]] for t in trials if LEGACY[0] in t)
        ref = None
        if reference and r["model"].get("arena_row"):
            ref = reference_summary(reference, *r["model"]["arena_row"], condition=r["condition"])
        if ref is not None:
            agree = {}
            for k in ("nmse_db", "aclr_db", "evm_db", "quality_db"):
                (mo, so), (mr, sr) = row["stats"][k], ref["stats"][k]
                tol = 2 * math.sqrt(so ** 2 / max(row["n"], 1) + sr ** 2 / max(ref["n"], 1))
                agree[k] = {"delta": mo - mr, "tolerance": tol, "within": bool(abs(mo - mr) <= tol)}
            ref["agreement"] = agree
            ref["params_equal"] = ref["params"] == row["params"]
        row["reference"] = ref
        out.append(row)
    for cond in {r["condition"] for r in out}:
        group = [r for r in out if r["condition"] == cond]
        gated = [r for r in group if r["gate_ok"]]
        for key, flag in (("params", "pareto_params"), ("macs", "pareto_macs")):
            front = pareto([(r[key], r["stats"]["quality_db"][0]) for r in gated])
            for r, on in zip(gated, front):
                r[flag] = on
            for r in group:
                r.setdefault(flag, False)
    out.sort(key=lambda r: (r["condition"], not r["gate_ok"], -_finite(r["stats"]["quality_db"][0])))
    for cond in {r["condition"] for r in out}:
        rank = 0
        for r in (r for r in out if r["condition"] == cond):
            rank = rank + 1 if r["gate_ok"] else rank
            r["rank"] = rank if r["gate_ok"] else None
    return out


def _finite(v: float) -> float:
    return v if math.isfinite(v) else -math.inf


def pareto(points: list[tuple[float, float]]) -> list[bool]:
    """For (cost, quality) points: True where no other point has cost ≤ and quality ≥, one of them strictly."""
    out = []
    for i, (c, q) in enumerate(points):
        dominated = any((c2 <= c and q2 >= q and (c2 < c or q2 > q)) for j, (c2, q2) in enumerate(points) if j != i)
        out.append(not dominated and math.isfinite(q))
    return out


def _pm(stat: tuple[float, float], digits: int = 2) -> str:
    m, s = stat
    return "—" if not math.isfinite(m) else f"{m:.{digits}f} ± {s:.{digits}f}"


_COLUMNS = ("rank", "condition", "model", "params", "MACs/sample", "NMSE [dB]", "ACLR worse [dBc]", "EVM [dB]",
            "q [dB]", "power error [dB]", "gate ±{gate} dB", "Pareto (params)", "Pareto (MACs)", "seeds")


def _has_legacy(rows: list[dict]) -> bool:
    return any(LEGACY[0] in r["stats"] for r in rows)


def _metrics(legacy: bool) -> tuple:
    """METRICS, with LEGACY after the ACLR when ``legacy``."""
    return METRICS[:2] + (LEGACY,) + METRICS[2:] if legacy else METRICS


def _legacy_text(d: dict) -> str:
    """'; ACLR 2.2.1 L / R dBc (worse W dBc)' of a floor or baseline dict with the legacy keys, else ''."""
    if LEGACY[0] not in d:
        return ""
    return (f"; ACLR 2.2.1 {d['aclr_legacy_l_db']:.2f} / {d['aclr_legacy_r_db']:.2f} dBc (worse "
            f"{d['aclr_legacy_db']:.2f} dBc)")


def _at_floor(r: dict, floors: dict[str, dict]) -> bool:
    f, m = floors.get(r["condition"]), r["stats"]["aclr_db"][0]
    return bool(f) and math.isfinite(m) and m <= f["aclr_db"] + FLOOR_MARGIN_DB


def floor_lines(floors: dict[str, dict]) -> list[str]:
    """One Markdown list line per condition of ``floors`` (condition → ``aclr_l_db, aclr_r_db, aclr_db`` [dBc])."""
    return [f"- {c}: ACLR {f['aclr_l_db']:.2f} / {f['aclr_r_db']:.2f} dBc (left / right; "
            f"worse {f['aclr_db']:.2f} dBc){_legacy_text(f)}" for c, f in floors.items()]


def _cells(r: dict, gate_db: float, floors: dict[str, dict] | None = None, legacy: bool = False) -> list[str]:
    s = r["stats"]
    aclr = _pm(s["aclr_db"]) + ("†" if _at_floor(r, floors or {}) else "")
    extra = [_pm(s.get(LEGACY[0], (math.nan, math.nan)))] if legacy else []
    return [str(r["rank"]) if r["rank"] else "—", r["condition"], r["model"], str(r["params"]), str(r["macs"]),
            _pm(s["nmse_db"]), aclr, *extra, _pm(s["evm_db"]) + ("" if r["evm_kind"] == "demodulated" else "*"),
            _pm(s["quality_db"]), _pm(s["power_error_db"]), "pass" if r["gate_ok"] else "FAIL",
            "●" if r["pareto_params"] else "", "●" if r["pareto_macs"] else "", f"{r['n']}/{r['n_planned']}"]


_REF_COLUMNS = ("model", "reference row", "params (ours / ref)", "NMSE ours / ref", "ACLR ours / ref",
                "EVM ours / ref", "q ours / ref", "Δq (tolerance)", "agrees")


def _ref_cells(r: dict) -> list[str]:
    ref = r["reference"]
    s, t = r["stats"], ref["stats"]
    ag = ref["agreement"]
    both = lambda k: f"{_pm(s[k])} / {_pm(t[k])}"  # noqa: E731
    ok = all(a["within"] for a in ag.values())
    return [r["model"], f"{ref['display_name']} @ {ref['budget']}", f"{r['params']} / {ref['params']}",
            both("nmse_db"), both("aclr_db"), both("evm_db"), both("quality_db"),
            f"{ag['quality_db']['delta']:+.2f} ({ag['quality_db']['tolerance']:.2f})",
            "yes" if ok else "no (" + ", ".join(k for k, a in ag.items() if not a["within"]) + ")"]


def _md_table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def write_leaderboard(out_dir: Path, meta: dict[str, Any], rows: list[dict[str, Any]],
                      trials: list[dict[str, Any]]) -> dict[str, Path]:
    """Write leaderboard.{md,html,csv,json} and trials.csv into ``out_dir``; returns the paths. ``meta``: protocol
    (dict), command, overrides, baselines and floors per condition (``floors`` may be absent), notes."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    gate = meta["protocol"]["power_gate_db"]
    legacy = _has_legacy(rows)
    head = [c.format(gate=gate) for c in _COLUMNS]
    if legacy:
        head.insert(head.index("ACLR worse [dBc]") + 1, f"{LEGACY[1]} [{LEGACY[2]}]")
    floors = meta.get("floors") or {}
    body = [_cells(r, gate, floors, legacy) for r in rows]
    refs = [r for r in rows if r.get("reference")]
    title = meta["protocol"]["title"]
    notes = [f"Protocol `{meta['protocol']['name']}` ({meta['protocol']['source']}); command: `{meta['command']}`.",
             f"Seeds {meta['protocol']['seeds']}, {meta['protocol']['epochs']} "
             f"epoch{'' if meta['protocol']['epochs'] == 1 else 's'}, metric profile "
             f"{meta['protocol']['metric_profile']}, selection {meta['protocol']['selection']}, output-power gate "
             f"±{gate} dB on the test split.",
             "mean ± sd over seeds; ACLR = worse side; q = 0.5·ΔEVM + 0.5·ΔACLR against the common linear baseline; "
             "* EVM = in-band error (no OFDM symbol grid for this dataset).",
             "Parameters and MACs/sample of the DPD alone (dpd_desktop/models/cost.py convention)."]
    if legacy:
        notes.append(LEGACY_NOTE)
    shown = {r.get("model") for r in rows}
    options = [f"{m['name']}: " + ", ".join(f"{k} = {v}" for k, v in m["options"].items())
               for m in meta["protocol"].get("models", []) if m.get("options") and m["name"] in shown]
    if options:
        notes.append("Training options of a model beyond the protocol's [training]: " + "; ".join(options) + ".")
    aligned = [c["id"] for c in meta["protocol"].get("conditions", []) if c.get("aclr_segments") == "aligned"]
    if aligned:
        notes.append(f"ACLR worse of {', '.join(aligned)}: the corrected ACLR on adjacent Welch windows of the test "
                     f"split's nperseg-sample block grid inside the metric window (arena/metrics.py aligned_window), "
                     f"not 50 %-overlapping ones: windows straddling the generator's block joins measure the joins.")
    if meta.get("overrides"):
        notes.append(f"**Overridden** ({meta['overrides']}): not the protocol as written (a shorter run, or a "
                     f"longer one, than its rows).")
    md = [f"# {title}", "", *[f"- {n}" for n in notes], "", _md_table(head, body)]
    base_lines = [f"- {c}: NMSE {b['nmse_db']:.2f} dB, ACLR {b['aclr_db']:.2f} dBc, "
                  + (f"ACLR 2.2.1 {b[LEGACY[0]]:.2f} dBc, " if LEGACY[0] in b else "")
                  + f"EVM {b['evm_db']:.2f} dB, power {b['power_error_db']:+.3f} dB"
                  for c, b in meta.get("baselines", {}).items()]
    if base_lines:
        md += ["", "Linear baseline (no DPD, α·x calibrated to the target power):", *base_lines]
    fl_lines = floor_lines(floors)
    if any(_at_floor(r, floors) for r in rows):
        fl_lines.append(f"- † mean ACLR within {FLOOR_MARGIN_DB:g} dB of its condition's floor, or below it")
    if fl_lines:
        md += ["", FLOOR_HEAD, *fl_lines]
    if refs:
        md += ["", f"## Reference rows beside ours ({meta.get('reference_source', 'reference leaderboard')})", "",
               _md_table(list(_REF_COLUMNS), [_ref_cells(r) for r in refs]), "",
               "Agreement: |Δ| ≤ 2·sqrt(sd_ours²/n + sd_ref²/n_ref) for NMSE, ACLR, EVM and q."]
    paths = {"md": out_dir / "leaderboard.md", "html": out_dir / "leaderboard.html",
             "csv": out_dir / "leaderboard.csv", "trials": out_dir / "trials.csv", "json": out_dir / "leaderboard.json"}
    atomic_write_text(paths["md"], "\n".join(md) + "\n")
    atomic_write_text(paths["html"], _html(title, notes, head, body, refs, base_lines, fl_lines))
    metrics = _metrics(legacy)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["condition", "model", "backbone", "hidden_size", "params", "macs_per_sample", "n_seeds",
                *[f"{k}_{x}" for k, _, _ in metrics for x in ("mean", "sd")], "worst_abs_power_error_db", "gate_ok",
                "rank", "pareto_params", "pareto_macs", "evm_kind", "ref_row", "ref_quality_mean", "ref_quality_sd",
                "ref_agrees"])
    for r in rows:
        ref = r.get("reference")
        w.writerow([r["condition"], r["model"], r["backbone"], r["hidden_size"], r["params"], r["macs"], r["n"],
                    *[f"{v:.6g}" for k, _, _ in metrics for v in r["stats"].get(k, (math.nan, math.nan))],
                    f"{r['worst_power_db']:.6g}",
                    r["gate_ok"], r["rank"] or "", r["pareto_params"], r["pareto_macs"], r["evm_kind"],
                    f"{ref['backbone']}@{ref['budget']}" if ref else "",
                    f"{ref['stats']['quality_db'][0]:.6g}" if ref else "",
                    f"{ref['stats']['quality_db'][1]:.6g}" if ref else "",
                    all(a["within"] for a in ref["agreement"].values()) if ref else ""])
    atomic_write_text(paths["csv"], buf.getvalue())
    buf = io.StringIO()
    keys = ["condition", "model", "seed", "run_id", "selected_epoch", "params", "macs_per_sample", "nmse_db",
            "ib_error_db", "evm_db", "evm_kind", "aclr_l_db", "aclr_r_db", "aclr_db", "power_error_db", "quality_db",
            "gate_ok", "limited_fraction", "error"]
    if legacy:
        keys[keys.index("aclr_db") + 1:keys.index("aclr_db") + 1] = ["aclr_legacy_l_db", "aclr_legacy_r_db",
                                                                       "aclr_legacy_db"]
    w = csv.DictWriter(buf, fieldnames=keys, extrasaction="ignore")
    w.writeheader()
    for t in trials:
        w.writerow(t)
    atomic_write_text(paths["trials"], buf.getvalue())
    atomic_write_json(paths["json"], {**meta, "rows": rows, "trials": trials})
    return paths


def _html(title, notes, head, body, refs, base_lines, fl_lines=()) -> str:
    e = html.escape

    def table(h, rows):
        return ("<table><thead><tr>" + "".join(f"<th>{e(c)}</th>" for c in h) + "</tr></thead><tbody>"
                + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in rows)
                + "</tbody></table>")

    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(title)}</title><style>"
             "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
             "td,th{border:1px solid #bbb;padding:3px 8px;text-align:right}th{background:#eee}"
             "td:nth-child(2),td:nth-child(3){text-align:left}</style></head><body>",
             f"<h1>{e(title)}</h1><ul>" + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>", table(head, body)]
    if base_lines:
        parts.append("<p>Linear baseline:</p><ul>" + "".join(f"<li>{e(b[2:])}</li>" for b in base_lines) + "</ul>")
    if fl_lines:
        parts.append(f"<p>{e(FLOOR_HEAD)}</p><ul>" + "".join(f"<li>{e(b[2:])}</li>" for b in fl_lines) + "</ul>")
    if refs:
        parts.append("<h2>Reference rows beside ours</h2>" + table(list(_REF_COLUMNS), [_ref_cells(r) for r in refs]))
    parts.append("</body></html>\n")
    return "".join(parts)
