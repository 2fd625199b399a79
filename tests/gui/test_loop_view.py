"""The Loop view: a loop on the virtual bench driven through its worker (never the GUI thread), the iterations
shown live, Stop muting the generator, a dead instrument in one line, the report and the dataset from the view;
and a PNG of the view for a person to look at (LOOP_VIEW_PNG, when set, names where it goes)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from dpd_desktop.instruments.connect import open_bench, parse_instrument
from dpd_desktop.instruments.virtual import FaultPlan
from dpd_desktop.loop.config import LoopConfig
from dpd_desktop.loop.store import read_loop


def _cfg(**kw):
    return LoopConfig(**{**dict(iterations=4, power_limit_dbm=6.0, target_output_dbm=20.0, averages=4), **kw})


@pytest.fixture
def view(make_window, qtbot):
    w = make_window()
    w.loop_dock.show()
    return w, w.loop_view


def _bench_factory(log: list, faults=None):
    def make():
        bench = open_bench(parse_instrument("virtual"), parse_instrument("virtual"), faults=faults,
                           virtual_pa=dict(delay_samples=3.37, snr_db=40.0))
        log.append(bench)
        return bench
    return make


def test_the_view_runs_a_loop_off_the_gui_thread_and_shows_each_iteration(view, qtbot, tmp_path):
    w, v = view
    benches = []
    worker = v.start(_cfg(), bench_factory=_bench_factory(benches))
    assert worker is not None and not v.start_button.isEnabled() and v.stop_button.isEnabled()
    assert v.start() is None  # no second loop while one runs
    with qtbot.waitSignal(v.loopEnded, timeout=60000) as blocker:
        pass
    ev = blocker.args[0]
    assert ev.state == "succeeded" and ev.rf_off
    qtbot.waitUntil(lambda: v.worker is None, timeout=10000)
    info = read_loop(ev.folder)
    assert v.table.rowCount() == 4 == len(info.iterations)
    for r, row in enumerate(info.iterations):
        assert v.table.item(r, 2).text() == f"{row['ACLR_AVG']:.2f}"
        assert v.table.item(r, 8).text() == f"{row['delay_samples']:.4f}"
    x, y = v.curves["ACLR_AVG"].getData()
    assert list(x) == [0, 1, 2, 3] and np.allclose(y, [r["ACLR_AVG"] for r in info.iterations])
    assert np.allclose(v.pow_curve.getData()[1], [r["output_dbm"] for r in info.iterations])
    assert info.iterations[0]["ACLR_AVG"] > -36 and info.iterations[-1]["ACLR_AVG"] < -48
    assert v.status.text().startswith("succeeded: 4 iteration(s) done")
    assert not benches[0].virtual.rf_on and v.start_button.isEnabled() and v.report_button.isEnabled()
    # the report and a dataset, each written on a pool job
    with qtbot.waitSignal(v.reportWritten, timeout=30000) as rep:
        v.write_report(str(tmp_path / "loop.html"))
    text = (tmp_path / "loop.html").read_text(encoding="utf-8")
    assert rep.args[0] == tmp_path / "loop.html" and text.count("<svg") >= 3 and "<script" not in text
    with qtbot.waitSignal(v.datasetWritten, timeout=30000) as ds:
        v.make_dataset(str(tmp_path / "ds"))
    assert ds.args[0].folder == tmp_path / "ds" and (tmp_path / "ds" / "spec.json").is_file()
    out = os.environ.get("LOOP_VIEW_PNG")
    w.resize(1700, 1000)
    qtbot.wait(50)
    png = v.grab()
    assert png.width() > 600
    if out:
        png.save(out)


def test_stop_from_the_view_mutes_the_generator_first(view, qtbot):
    w, v = view
    benches = []
    v.start(_cfg(iterations=50), bench_factory=_bench_factory(benches))
    qtbot.waitUntil(lambda: v.table.rowCount() >= 1, timeout=60000)
    with qtbot.waitSignal(v.loopEnded, timeout=60000) as blocker:
        v.stop()
    ev = blocker.args[0]
    assert ev.state == "cancelled" and ev.rf_off and 1 <= ev.iterations < 50
    assert benches[0].generator.log[-1] == "OUTP 0" and not benches[0].virtual.rf_on
    qtbot.waitUntil(lambda: v.worker is None, timeout=10000)


def test_a_dead_analyzer_shows_one_line_and_rf_off(view, qtbot):
    w, v = view
    benches = []
    with qtbot.waitSignal(v.loopEnded, timeout=60000) as blocker:
        v.start(_cfg(), bench_factory=_bench_factory(benches, FaultPlan(dead={"analyzer.capture": 2})))
    ev = blocker.args[0]
    assert ev.state == "failed" and ev.rf_off and "\n" not in ev.message
    assert v.status.text() == f"failed: {ev.message}"
    assert "does not respond to capture" in ev.message and not benches[0].virtual.rf_on
    qtbot.waitUntil(lambda: v.worker is None, timeout=10000)


def test_settings_without_a_sane_power_limit_are_refused_in_the_view(view):
    w, v = view
    v.mu.setValue(0.01)
    cfg = v.config()
    assert cfg.mu == pytest.approx(0.01) and cfg.power_limit_dbm == pytest.approx(6.0)
    v.generator_combo.setCurrentIndex(v.generator_combo.findData("sim"))
    assert v.analyzer_combo.currentData() == "sim" and not v.delay.isEnabled()  # virtual goes with virtual


def test_trained_pa_runs_are_offered_as_the_virtual_pa(make_window, qtbot, workspace):
    """The list is read on a pool job when the dock is shown; a succeeded PA run appears, others do not."""
    import json

    for name, state in (("2026-01-01-000000-pa-ok", "succeeded"), ("2026-01-01-000001-pa-bad", "failed")):
        d = workspace.runs_dir / name
        d.mkdir(parents=True)
        (d / "config.json").write_text(json.dumps({"schema": 2, "experiment": {
            "step": "pa", "backbone": "gru", "hidden_size": 4, "num_layers": 1}}))
        (d / "status.json").write_text(json.dumps({"state": state}))
    w = make_window()
    v = w.loop_view
    w.loop_dock.show()
    qtbot.waitUntil(lambda: v.pa_combo.count() == 2, timeout=10000)
    assert v.pa_combo.itemData(1) == "2026-01-01-000000-pa-ok"


def test_report_from_the_save_dialog_suggests_a_file_outside_the_loop_and_replaces_a_confirmed_one(
        view, qtbot, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    w, v = view
    with qtbot.waitSignal(v.loopEnded, timeout=60000) as blocker:
        v.start(_cfg(iterations=1), bench_factory=_bench_factory([]))
    qtbot.waitUntil(lambda: v.worker is None, timeout=10000)
    folder = Path(blocker.args[0].folder)
    from dpd_desktop.loop.report import write_loop_report
    own = write_loop_report(folder).read_bytes()  # the loop's own report, as `dpd-desktop loop` leaves it
    asked = []
    answer = {}

    def save_dialog(parent, caption, start, filt):  # the user presses Enter, or picks ``answer["path"]``
        asked.append(start)
        return answer.get("path", start), filt
    monkeypatch.setattr(QFileDialog, "getSaveFileName", save_dialog)
    monkeypatch.setenv("HOME", str(tmp_path))
    with qtbot.waitSignal(v.reportWritten, timeout=30000) as rep:
        v.write_report()
    suggested = asked[0]
    assert folder not in Path(suggested).parents, suggested
    assert rep.args[0] == Path(suggested) and "<svg" in rep.args[0].read_text(encoding="utf-8")
    mine = tmp_path / "mine.html"
    mine.write_text("an older report")  # the dialog asked before replacing it
    answer["path"] = str(mine)
    with qtbot.waitSignal(v.reportWritten, timeout=30000) as rep:
        v.write_report()
    assert rep.args[0] == mine and "<svg" in mine.read_text(encoding="utf-8")
    answer["path"] = str(folder / "report.html")  # the loop's own record: refused, in the window's words
    with qtbot.waitSignal(v.reportWritten, timeout=30000) as rep:
        v.write_report()
    assert isinstance(rep.args[0], ValueError) and "--overwrite" not in str(rep.args[0])
    assert f"lies in the loop folder {folder}" in v.status.text() and (folder / "report.html").read_bytes() == own
