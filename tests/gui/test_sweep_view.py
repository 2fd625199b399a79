"""The Sweep view offscreen (gui/sweep_view.py) on a real tiny sweep: its table and Pareto points equal the
workspace index's values, the front is the non-dominated set, the best trial is one click from compare and report,
and Resume / Stop drive the sweep on a worker thread (its trials in child processes)."""
from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from dpd_desktop.runs.index import RunIndex
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.sweep.runner import SweepRun, create_sweep
from dpd_desktop.sweep.spec import parse_spec
from dpd_desktop.sweep.store import SweepStore
from dpd_desktop.sweep.table import pareto_front

TINY = {"dataset": "demo", "frame_length": 50, "epochs": 1, "max_train_samples": 300, "device": "cpu", "threads": 1}


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep-ws")
    ws = Workspace(root)
    info = create_sweep(ws, parse_spec({"sweep": {"name": "view"}, "base": TINY,
                                        "space": {"hidden_size": [4, 6, 8], "lr": [2e-3, 5e-3]}}, "test"))
    SweepRun(ws, info.id).run()
    return root, info.id


@pytest.fixture
def view(make_window, swept, qtbot):
    root, _ = swept
    w = make_window(ws=Workspace(root))
    v = w.sweep_view
    with qtbot.waitSignal(v.tableLoaded, timeout=30000):
        w.sweeps_dock.show()
    return w, v


def _brute_front(pts):
    return sorted(i for i, (x, y) in enumerate(pts)
                  if not any(x2 <= x and y2 <= y and (x2, y2) != (x, y) for x2, y2 in pts))


def test_table_and_pareto_points_equal_the_index(view, swept):
    root, sid = swept
    _, v = view
    info = SweepStore(root).open(sid)
    with RunIndex.open(root) as idx:
        rows = {r.run_id: r for r in idx.runs()}
    cols = v.columns()
    assert cols[:7] == ["#", "state", "family", "H", "lr", "frame", "seed"]
    cells = v.cell_texts()
    assert len(cells) == 6
    for t, line in zip(info.trials, cells):
        r = rows[t["run_id"]]
        got = dict(zip(cols, line))
        assert (got["#"], got["state"], got["family"], got["H"]) == (str(t["number"]), "succeeded", "GRU",
                                                                     str(t["params"]["hidden_size"]))
        assert got["lr"] == f"{t['params']['lr']:.4g}" and got["run"] == t["run_id"]
        assert got["val NMSE [dB]"] == f"{r.val_nmse:.2f}" and got["val ACLR [dBc]"] == f"{r.val_aclr_avg:.2f}"
        assert got["test NMSE [dB]"] == f"{r.test_nmse:.2f}" and got["test ACLR [dBc]"] == f"{r.test_aclr_avg:.2f}"
        assert got["params"] == f"{r.n_params:,}" and got["MACs/sample"] == f"{r.macs_per_sample:,}"
    by_number = {t["number"]: rows[t["run_id"]] for t in info.trials}
    for cost_index, cost in enumerate(("macs_per_sample", "n_params")):
        v.cost_combo.setCurrentIndex(cost_index)
        for split in ("val", "test"):
            v.split_combo.setCurrentIndex(v.split_combo.findData(split))
            for plot, metric in enumerate((f"{split}_nmse", f"{split}_aclr_avg")):
                pts, front = v.pareto_points(plot)
                want = [(n, float(getattr(by_number[n], cost)), float(getattr(by_number[n], metric)))
                        for n in sorted(by_number)]
                assert pts == want
                xy = [(x, y) for _, x, y in want]
                assert sorted(want.index(p) for p in front) == _brute_front(xy)
                # the plot draws exactly these points: all trials, then the front
                items = v.plots[plot].getPlotItem().listDataItems()
                assert list(zip(*items[0].getOriginalDataset())) == [(x, y) for _, x, y in want]
                assert list(zip(*items[1].getOriginalDataset())) == [(x, y) for _, x, y in front]
    best = min(info.trials, key=lambda t: t["value"])
    assert v.table_data.best().number == best["number"]
    assert f"Best: trial {best['number']}" in v.best_label.text()


def test_a_pruned_trial_is_a_point_but_never_on_the_front(view, swept):
    from dataclasses import replace as dc_replace

    _, v = view
    data = v.table_data
    _, front = v.pareto_points(0)
    on_front = front[0][0]
    v.table_data = dc_replace(data, rows=tuple(dc_replace(r, state="pruned") if r.number == on_front else r
                                               for r in data.rows))
    try:
        pts, front2 = v.pareto_points(0)
        assert on_front in [n for n, _, _ in pts] and on_front not in [n for n, _, _ in front2]
        done = [(n, x, y) for n, x, y in pts if n != on_front]
        assert sorted(done.index(p) for p in front2) == _brute_front([(x, y) for _, x, y in done])
    finally:
        v.table_data = data


def test_pareto_front_against_brute_force():
    grid = [(float(x), float(y)) for x, y in itertools.product((1, 2, 3, 5), (4, 1, 3, 2))]
    for k in range(1, len(grid) + 1, 3):
        pts = grid[:k] + [(2.0, 1.0)]  # a duplicate point: both kept when on the front
        assert sorted(pareto_front(pts)) == _brute_front(pts)


def test_best_trial_one_click_from_compare_and_report(view, swept, qtbot, tmp_path):
    root, sid = swept
    _, v = view
    data = v.table_data
    best = data.best()
    front = [n for n, _, _ in v.pareto_points(0)[1]]
    want = [best.run.folder] + [r.run.folder for n in front for r in data.rows if r.number == n
                                and r.run.folder != best.run.folder]
    if len(want) < 2:
        ranked = sorted((r for r in data.rows if r.run.folder not in want), key=lambda r: r.value)
        want.append(ranked[0].run.folder)
    assert v.compare_folders() == want
    with qtbot.waitSignal(v.compareOpened, timeout=30000) as sig:
        v.compare_button.click()
    cmp_view = sig.args[0]
    assert [r.run_id for r in cmp_view.cmp.runs] == [Path(f).name for f in want]
    out = tmp_path / "best.html"
    with qtbot.waitSignal(v.reportWritten, timeout=30000) as sig:
        v.report_best(str(out))
    assert str(sig.args[0]) == str(out) and best.run_id in out.read_text(encoding="utf-8")


def test_resume_and_stop_from_the_view(make_window, tmp_path, qtbot):
    ws = Workspace(tmp_path / "ws")
    a = create_sweep(ws, parse_spec({"sweep": {"name": "two"}, "base": TINY, "space": {"seed": [0, 1]}}, "t"))
    w = make_window(ws=ws)
    v = w.sweep_view
    with qtbot.waitSignal(v.tableLoaded, timeout=30000):
        v.refresh(a.id)
    assert v.resume_button.isEnabled() and not v.stop_button.isEnabled()  # a new sweep: queued
    worker = v.resume_sweep()
    assert worker is not None and v.stop_button.isEnabled() and not v.resume_button.isEnabled()
    qtbot.waitUntil(lambda: v.worker is None, timeout=120000)
    info = SweepStore(ws.root).open(a.id)
    assert info.state == "succeeded" and [t["state"] for t in info.trials] == ["succeeded"] * 2
    qtbot.waitUntil(lambda: v.table_data is not None and v.table_data.info.state == "succeeded", timeout=30000)
    assert [line[1] for line in v.cell_texts()] == ["succeeded", "succeeded"]

    b = create_sweep(ws, parse_spec({"sweep": {"name": "stopped"}, "base": {**TINY, "epochs": 50},
                                     "space": {"seed": [0, 1, 2]}}, "t"))
    v.refresh(b.id)  # a read of the first sweep may still be in flight: wait for b's own table
    qtbot.waitUntil(lambda: v.table_data is not None and v.table_data.info.id == b.id and v.current_id() == b.id,
                    timeout=30000)
    assert v.resume_sweep() is not None
    qtbot.waitUntil(lambda: SweepStore(ws.root).open(b.id).trials[0]["state"] == "running", timeout=60000)
    v.stop_button.click()
    qtbot.waitUntil(lambda: v.worker is None, timeout=120000)
    info = SweepStore(ws.root).open(b.id)
    assert info.state == "cancelled" and [t["state"] for t in info.trials] == ["cancelled"] * 3
    assert info.trials[0]["run_id"] and info.trials[1]["run_id"] is None  # the queued ones never started


def test_a_sweep_chosen_while_a_read_is_in_flight_is_shown_despite_a_live_tick(make_window, tmp_path, qtbot):
    """A plain refresh (the live timer's tick) arriving while the chosen sweep's read is in flight must not fall back
    to the combo's stale choice: CI once saw the view stay on the first sweep for good."""
    ws = Workspace(tmp_path / "ws")
    a = create_sweep(ws, parse_spec({"sweep": {"name": "first"}, "base": TINY, "space": {"seed": [0]}}, "t"))
    b = create_sweep(ws, parse_spec({"sweep": {"name": "second"}, "base": TINY, "space": {"seed": [0, 1]}}, "t"))
    w = make_window(ws=ws)
    v = w.sweep_view
    with qtbot.waitSignal(v.tableLoaded, timeout=30000):
        v.refresh(a.id)
    assert v.current_id() == a.id
    v.refresh(b.id)  # in flight: its result can only arrive at the next event-loop pass
    v.refresh()  # the timer's tick, before b's read is in
    qtbot.waitUntil(lambda: not v._loading and v.table_data is not None and v.table_data.info.id == b.id,
                    timeout=30000)
    assert v.current_id() == b.id and len(v.cell_texts()) == 2


def test_each_trials_group_shows_in_its_column_with_the_members_in_the_tooltip(make_window, tmp_path, qtbot):
    ws = Workspace(tmp_path / "ws")
    info = create_sweep(ws, parse_spec({"sweep": {"name": "groups", "group_size": 2}, "base": TINY,
                                        "space": {"seed": [0, 1, 2]}}, "t"))
    SweepStore(ws.root).set_groups(info.id, {0: 4, 1: 4, 2: None})  # as a pass records them (sweep/runner.py)
    w = make_window(ws=ws)
    v = w.sweep_view
    with qtbot.waitSignal(v.tableLoaded, timeout=30000):
        v.refresh(info.id)
    col = v.columns().index("group")
    assert col == 7 and [line[col] for line in v.cell_texts()] == ["4", "4", ""]
    assert [v.table.item(r, col).toolTip() for r in range(3)] == [
        "trials 0, 1 train together in one process", "trials 0, 1 train together in one process",
        "not in a group: trains alone"]
