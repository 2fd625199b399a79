"""The loop's report: one self-contained HTML file (inline SVG, no external file, script or style), built from the
loop folder and its iteration runs alone with the run report's parts (runs/report_html.py, runs/svg_plot.py): the
loop's settings and outcome, one row and chart point per iteration, the PSDs of the first and last iterations.
"""
from __future__ import annotations

import html
import math
from pathlib import Path

import numpy as np

from ..metrics.spectra import psd_db
from ..atomic import atomic_write_text
from ..runs.outputs import check_output
from ..runs.record import RecordError, RunRecord
from ..runs.report_html import _head, _table, format_value
from ..runs.svg_plot import Series, line_chart
from .store import read_loop

__all__ = ["render_loop", "write_loop_report"]

_COLUMNS = (("#", "index", ""), ("kind", "kind", ""), ("ACLR L [dBc]", "ACLR_L", "dBc"),
            ("ACLR R [dBc]", "ACLR_R", "dBc"), ("ACLR [dBc]", "ACLR_AVG", "dBc"), ("EVM [dB]", "EVM", "dB"),
            ("NMSE [dB]", "NMSE", "dB"), ("output [dBm]", "output_dbm", "dB"),
            ("target [dBm]", "target_output_dbm", "dB"), ("RMS in [dBm]", "input_rms_dbm", "dB"),
            ("peak in [dBm]", "input_peak_dbm", "dB"), ("delay [samples]", "delay_samples", "d"),
            ("gain [dB]", "gain_db", "dB"), ("phase [°]", "phase_deg", "dB"), ("run", "run_id", ""))


def _cell(v, unit: str) -> str:
    if unit == "d" and isinstance(v, (int, float)):
        return f"{v:.4f}"
    return format_value(float(v) if isinstance(v, int) and unit else v, unit)


def _psd_chart(info, rows) -> str | None:
    picks = [r for r in (rows[0], rows[-1]) if r.get("run_id")] if rows else []
    series, fs = [], None
    for i, r in enumerate(dict.fromkeys(p["run_id"] for p in picks)):
        try:
            rec = RunRecord.open(Path(info.folder).parents[1] / "runs" / r)
            attrs, splits = rec.read_results()
        except (RecordError, OSError):
            continue
        t = splits["test"]
        fs = float(attrs.get("sample_rate_hz") or info.doc.get("signal", {}).get("sample_rate_hz") or 1.0)
        nps = int(info.doc.get("config", {}).get("nperseg", 2048))
        if i == 0:
            f, p = psd_db(t["x"].astype(np.float64), fs, nps)
            series.append(Series("reference x", f / 1e6, p, color="#000000"))
        f, p = psd_db(t["prediction"].astype(np.float64), fs, nps)
        row = next(x for x in rows if x.get("run_id") == r)
        series.append(Series(f"#{row['index']} {row['kind']}", f / 1e6, p))
    if not series:
        return None
    outs = np.concatenate([np.asarray(sr.y, float) for sr in series[1:]]) if len(series) > 1 else None
    y_range = None
    if outs is not None and outs.size:  # the outputs' range: the reference's empty stopband would squash them
        y_range = (float(np.percentile(outs, 1)) - 15.0, float(np.max(outs)) + 5.0)
    return line_chart(series, "PSD of the normalised output", "frequency [MHz]", "PSD [dB/Hz]", width=720,
                      y_range=y_range)


def render_loop(folder: str | Path) -> str:
    """The HTML text of the loop at ``folder``. Raises LoopRecordError for an unreadable loop.json."""
    info = read_loop(folder)
    d, rows = info.doc, info.iterations
    cfg = d.get("config") or {}
    out = _head(f"Loop {info.id}")
    idents = d.get("identities") or {}
    inst = "; ".join(f"{k}: {v.get('manufacturer', '')} {v.get('model', '')}".strip() for k, v in idents.items())
    out.append(_table(["loop", "state", "strategy", "iterations", "instruments"],
                      [[info.id, info.state, cfg.get("strategy", "?"), len(rows), inst or "?"]], numeric_from=9))
    if d.get("message"):
        out.append(f"<p><b>{html.escape(str(d['message']))}</b>" + ("" if d.get("rf_off", True) else
                   ' <span class="note">RF was not confirmed off.</span>') + "</p>")
    sig = d.get("signal") or {}
    out.append(_table(["signal", "samples", "fs [MHz]", "bandwidth [MHz]", "carriers", "PAPR [dB]"],
                      [[sig.get("source", "?"), sig.get("samples", "?"), _mhz(sig.get("sample_rate_hz")),
                        _mhz(sig.get("bw_main_hz")), sig.get("n_sub_ch", "?"), format_value(sig.get("papr_db"),
                                                                                           "dB")]]))
    out.append(_table(["target output [dBm]", "target gain [dB]", "power limit (peak) [dBm]", "metric profile"],
                      [[_cell(d.get("target_output_dbm"), "dB"), _cell(d.get("target_gain_db"), "dB"),
                        _cell(cfg.get("power_limit_dbm"), "dB"), cfg.get("metric_profile", "?")]],
                      numeric_from=0))
    if rows:
        best = d.get("best") or rows[-1]
        out.append("<h2>Summary</h2>")
        out.append(_table(["", "iteration", "ACLR [dBc]", "EVM [dB]", "NMSE [dB]", "output [dBm]", "delay [samples]"],
                          [[label, r["index"], _cell(r.get("ACLR_AVG"), "dBc"), _cell(r.get("EVM"), "dB"),
                            _cell(r.get("NMSE"), "dB"), _cell(r.get("output_dbm"), "dB"),
                            _cell(r.get("delay_samples"), "d")]
                           for label, r in (("no DPD", rows[0]), ("best ACLR", best), ("last", rows[-1]))]))
        out.append("<h2>Iterations</h2>")
        out.append(_table([c[0] for c in _COLUMNS], [[_cell(r.get(k), u) for _, k, u in _COLUMNS] for r in rows],
                          numeric_from=2))
        it = np.array([r["index"] for r in rows], dtype=float)

        def col(k):
            return np.array([r.get(k) if isinstance(r.get(k), (int, float)) else math.nan for r in rows], float)

        out.append('<h2>Plots</h2><div class="figs">')
        out.append(line_chart([Series("ACLR [dBc]", it, col("ACLR_AVG")), Series("EVM [dB]", it, col("EVM")),
                               Series("NMSE [dB]", it, col("NMSE"))], "Linearity per iteration", "iteration",
                              "dB · dBc", integer_x=True))
        out.append(line_chart([Series("output", it, col("output_dbm")),
                               Series("target", it, col("target_output_dbm"), color="#000000")],
                              "Output power per iteration", "iteration", "dBm", integer_x=True))
        delay = [Series("estimate", it, col("delay_samples"))]
        true = ((d.get("bench") or {}).get("virtual") or {}).get("delay_samples")
        if isinstance(true, (int, float)):  # a virtual bench knows its delay
            delay.append(Series("virtual bench's delay", it, np.full(it.size, float(true)), color="#000000"))
        out.append(line_chart(delay, "Delay", "iteration", "samples", integer_x=True))
        psd = _psd_chart(info, rows)
        if psd:
            out.append(psd)
        out.append("</div>")
    fit = d.get("fit")
    if fit:
        out.append("<h2>DPD fit</h2>")
        out.append(_table(["family", "run", "dataset"], [[fit.get("family"), fit.get("run_id"), fit.get("dataset")]],
                          numeric_from=9))
    out.append("<h2>Settings</h2>")
    out.append(_table(["setting", "value"], [[k, format_value(v)] for k, v in cfg.items()], numeric_from=1))
    bench = d.get("bench") or {}
    if bench:
        out.append(_table(["bench", "value"], [[k, format_value(str(v))] for k, v in _flat(bench)], numeric_from=1))
    out.append("</body></html>")
    return "\n".join(out)


def _mhz(v) -> str:
    return f"{v / 1e6:g}" if isinstance(v, (int, float)) else "?"


def _flat(d: dict, prefix: str = ""):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from _flat(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def write_loop_report(folder: str | Path, out: str | Path | None = None, overwrite: bool = False, workspace=None,
                      option: str = "--report") -> Path:
    """Write the loop's report (default ``<folder>/report.html``) atomically; returns its path. A named ``out`` obeys
    the output rule (runs/outputs.py ``check_output`` with ``overwrite``, ``workspace``, ``option``; raises
    OutputRefused, a ValueError)."""
    target = Path(folder) / "report.html" if out is None else check_output(
        out, overwrite=overwrite, suffixes=(".html", ".htm"), workspace=workspace, option=option)
    return atomic_write_text(target, render_loop(folder))
