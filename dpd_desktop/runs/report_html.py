"""A self-contained HTML report of one run or a comparison of several (``dpd-desktop runs report``, the window's
Runs ▸ Report…): metrics, configuration and plots as inline SVG (runs/svg_plot.py), no external file, script or
style sheet, no Qt. One run: its test and validation metrics, cost, learning curves, test PSD and AM/AM, every config
field. Several: the metrics side by side, the curves overlaid, the PSD and AM/AM overlays when the runs share a
dataset (else a note), the config diff.
"""
from __future__ import annotations

import html
import math
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .. import __version__
from ..metrics.spectra import psd_db
from ..atomic import atomic_write_text
from .compare import (CURVES, Comparison, RunSummary, compare_runs, metric_rows, reference_name,
                      reference_psd, summarize)
from .outputs import check_output, recorded_dataset
from .record import RunRecord
from .svg_plot import Series, line_chart

REPORT_AMAM_POINTS = 800  # AM/AM points per signal in a report (keeps a report of four runs under ~1 MB)

_STYLE = """
body{font-family:sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}td.num{text-align:right;font-family:monospace}
.figs{display:flex;flex-wrap:wrap;gap:12px}.note{color:#8a5a00}
"""


def format_value(v: Any, unit: str = "") -> str:
    """A metric as the report prints it: dB/dBc with 2 decimals, counts as integers, seconds with 1 decimal."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    if isinstance(v, float) and unit in ("dB", "dBc"):
        return f"{v:.2f}"
    if unit == "s":
        return f"{float(v):.1f}"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]], numeric_from: int = 1) -> str:
    out = ["<table><tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in head) + "</tr>"]
    for r in rows:
        cells = [f'<td class="num">{html.escape(str(c))}</td>' if i >= numeric_from else
                 f"<td>{html.escape(str(c))}</td>" for i, c in enumerate(r)]
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _learning_figs(runs: Sequence[RunSummary]) -> list[str]:
    """val NMSE / ACLR / EVM per run (one chart each for several runs, one chart of all three for one run) and the
    losses (log y)."""
    figs = []
    if len(runs) == 1:
        r = runs[0]
        series = [Series(label, *r.curve(col)) for label, col in CURVES[:3]]
        figs.append(line_chart(series, "Validation metrics", "epoch", "dB · dBc", integer_x=True))
        loss = [Series(label, *r.curve(col)) for label, col in CURVES[3:]]
        figs.append(line_chart(loss, "Loss", "epoch", "MSE", log_y=True, integer_x=True))
        return figs
    for label, col in CURVES[:3] + CURVES[4:]:
        series = [Series(r.run_id, *r.curve(col)) for r in runs]
        figs.append(line_chart(series, label, "epoch", label.split(" [")[-1].rstrip("]") if "[" in label else "",
                               log_y="loss" in label, integer_x=True))
    return figs


def _psd_amam_figs(cmp: Comparison) -> list[str]:
    """PSD and AM/AM of the test split: the reference signal (the first run's) and each run's prediction; for one
    run also the error's PSD."""
    runs = cmp.runs
    first = runs[0]
    if first.test is None:
        return []
    psd_series, amam_series = [], []
    if cmp.reference_psd is not None:
        name, f, p = cmp.reference_psd
        psd_series.append(Series(name, f, p, color="#000000"))
    tx = first.target_amam(REPORT_AMAM_POINTS)
    amam_series.append(Series(reference_name(first.step), tx[0], tx[1], kind="points", color="#000000"))
    for r in runs:
        if r.test is None:
            continue
        name = r.run_id if len(runs) > 1 else ("predicted ŷ" if r.step == "pa" else "PA(DPD(x))")
        psd_series.append(Series(name, *r.psd()))
        amam_series.append(Series(name, *r.amam(REPORT_AMAM_POINTS), kind="points"))
    if len(runs) == 1 and first.fs_hz:
        err = first.test.prediction.astype(np.float64) - first.test.target.astype(np.float64)
        f, p = psd_db(err, first.fs_hz, int(first.test.psd_freq_hz.shape[0]))
        psd_series.append(Series("error", f / 1e6, p, color="#999999"))
    return [line_chart(psd_series, "PSD (test)", "frequency [MHz]", "PSD [dB/Hz rel.]"),
            line_chart(amam_series, "AM/AM (test)", "|x| [lin.]", "|out| [lin.]")]


def _head(title: str) -> list[str]:
    return ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{html.escape(title)}</title>",
            f"<style>{_STYLE}</style></head><body>", f"<h1>{html.escape(title)}</h1>",
            f"<p>DPD Desktop {html.escape(__version__)} · written {time.strftime('%Y-%m-%d %H:%M:%S %Z')}</p>"]


def render_run(run: RunSummary) -> str:
    """The HTML text of a one-run report."""
    out = _head(f"Run {run.run_id}")
    out.append(_table(["run", "state", "step", "dataset"], [[run.run_id, run.state, run.step,
                                                             run.dataset_name or "?"]], numeric_from=9))
    out.append("<h2>Metrics (test split, selected checkpoint)</h2>")
    out.append(_table(["metric", "unit", "value"],
                      [[label, unit, format_value(run.metrics.get(key), unit)]
                       for label, unit, key in metric_rows([run])],
                      numeric_from=2))
    if run.error:
        out.append(f'<p class="note">{html.escape(run.error)}</p>')
    out.append("<h2>Plots</h2><div class=\"figs\">")
    out.extend(_learning_figs([run]))
    out.extend(_psd_amam_figs(Comparison([run], True, [], reference_psd=reference_psd(run))))
    out.append("</div><h2>Configuration</h2>")
    out.append(_table(["field", "value"], [[k, format_value(v)] for k, v in run.config.items()], numeric_from=1))
    out.append("</body></html>")
    return "\n".join(out)


def render_comparison(cmp: Comparison) -> str:
    """The HTML text of a comparison report."""
    ids = [r.run_id for r in cmp.runs]
    out = _head(f"Comparison of {len(ids)} runs")
    out.append(_table(["run", "state", "step", "dataset"],
                      [[r.run_id, r.state, r.step, r.dataset_name or "?"] for r in cmp.runs], numeric_from=9))
    for note in cmp.notes:
        out.append(f'<p class="note">{html.escape(note)}</p>')
    out.append("<h2>Metrics (test split, selected checkpoints)</h2>")
    out.append(_table(["metric", "unit", *ids], [[label, unit, *(format_value(v, unit) for v in values)]
                                                 for label, unit, values in cmp.metric_table()], numeric_from=2))
    out.append("<h2>Plots</h2><div class=\"figs\">")
    out.extend(_learning_figs(cmp.runs))
    if cmp.same_dataset:
        out.extend(_psd_amam_figs(cmp))
    out.append("</div><h2>Configuration: the fields that differ</h2>")
    if cmp.config_diff:
        out.append(_table(["field", *ids], [[k, *(format_value(v) for v in values)] for k, values in cmp.config_diff]))
    else:
        out.append("<p>The configurations are identical.</p>")
    out.append("</body></html>")
    return "\n".join(out)


REPORT_SUFFIXES = (".html", ".htm")


def write_report(run_dirs: Sequence[str | Path], out: str | Path, overwrite: bool = False, workspace=None) -> Path:
    """Write the report of one run (one folder) or a comparison (several) to ``out`` (``.html``/``.htm``, checked
    by the output rule before anything is read) atomically; returns the path.

    Raises:
        OutputRefused: the output rule refuses ``out``. CompareError: a folder is not a readable run. OSError: ``out``
            cannot be written.
    """
    records = [RunRecord.read(d) for d in run_dirs]
    datasets = [recorded_dataset(rec.dataset) for rec in records if rec is not None]
    out = check_output(out, overwrite=overwrite, suffixes=REPORT_SUFFIXES, datasets=datasets, workspace=workspace)
    if len(run_dirs) == 1:
        text = render_run(summarize(run_dirs[0]))
    else:
        text = render_comparison(compare_runs(run_dirs))
    return atomic_write_text(out, text)
