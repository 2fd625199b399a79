"""Single-epoch learning curves (every MP/GMP run: one least-squares fit, one history row) are drawn in the HTML
reports of one run and of a comparison, and in the compare view inside its axes (issue 28)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tiny_runs import DEMO

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.gui.compare import CompareView
from dpd_desktop.runs.compare import compare_runs, summarize
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training.ls_fit import make_trainer


@pytest.fixture(scope="module")
def poly_runs(tmp_path_factory):
    ws = Workspace(tmp_path_factory.mktemp("ws"))
    ds = make_demo_dataset(**DEMO)
    out = []
    for family in ("mp", "gmp"):
        cfg = ExperimentConfig(step="pa", dataset="demo", backbone=family, fit="ls", device="cpu")
        res = make_trainer(cfg, dataset=ds, workspace=ws).run()
        assert res.state == "succeeded"
        out.append(Path(res.run_dir))
    return out


def _charts(html: str) -> dict[str, str]:
    """The report's SVG charts by their title."""
    out = {}
    for svg in re.findall(r"<svg.*?</svg>", html, flags=re.S):
        m = re.search(r'<text x="[^"]+" y="16" text-anchor="middle" font-size="13">([^<]*)</text>', svg)
        out[m.group(1) if m else ""] = svg
    return out


def _marks(svg: str) -> set[str]:
    """The colors of the dots drawn in a chart."""
    return set(re.findall(r'<circle [^>]*fill="([^"]+)"', svg))


def _report(make_window, qtbot, folders, path):
    from dpd_desktop.gui.runs_jobs import write_report_job

    w = make_window()
    ended = []
    write_report_job(w, [str(f) for f in folders], str(path), ended.append)
    qtbot.waitUntil(lambda: bool(ended), timeout=30_000)
    assert ended == [Path(path)], ended
    return Path(path).read_text()


def test_one_run_report_draws_its_single_epoch(make_window, qtbot, poly_runs, tmp_path):
    assert len(summarize(poly_runs[0]).history) == 1
    charts = _charts(_report(make_window, qtbot, poly_runs[:1], tmp_path / "one.html"))
    assert len(_marks(charts["Validation metrics"])) == 3  # val NMSE, ACLR, EVM: one dot each
    assert len(_marks(charts["Loss"])) == 2  # train and val loss


def test_comparison_report_draws_each_runs_single_epoch(make_window, qtbot, poly_runs, tmp_path):
    charts = _charts(_report(make_window, qtbot, poly_runs, tmp_path / "two.html"))
    for title in ("val NMSE [dB]", "val ACLR avg [dBc]", "val EVM [dB]", "val loss"):
        assert len(_marks(charts[title])) == 2, title  # one dot per run


def test_compare_view_shows_single_epochs_inside_the_axes(qtbot, poly_runs):
    view = CompareView(compare_runs([str(p) for p in poly_runs]))
    qtbot.addWidget(view)
    view.show()
    qtbot.waitExposed(view)
    panel = view.curves_panel
    for column in ("VAL_NMSE", "TRAIN_LOSS"):
        panel.show_column(column)
        panel.settle_ranges()
        (x0, x1), (y0, y1) = panel.plot.getViewBox().viewRange()
        for item in panel.curves:
            x, y = item.getData()
            assert len(x) == 1
            # the dot sits inside the axes, not on their edge where half of it is cut (on the log axis getData
            # gives log10 of the loss, the view's coordinate)
            mx, my = 0.05 * (x1 - x0), 0.05 * (y1 - y0)
            assert x0 + mx < x[0] < x1 - mx and y0 + my < y[0] < y1 - my, (column, x, y, (x0, x1), (y0, y1))
