"""Defining a sweep in the Sweep view (gui/sweep_define.py): the table's rows become the sweep folder's space, the
trials run from the view and their runs carry the table's values; a bad row is named and nothing is created."""
from __future__ import annotations

import json
from pathlib import Path

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.sweep.runner import create_sweep
from dpd_desktop.sweep.spec import parse_spec
from dpd_desktop.sweep.store import SweepStore

TINY = dict(step="pa", dataset="demo", frame_length=50, epochs=1, max_train_samples=300, device="cpu", threads=1)


def test_a_bad_row_is_named_and_nothing_is_created(make_window, tmp_path, qtbot):
    ws = Workspace(tmp_path / "ws")
    w = make_window(ws=ws)
    w.set_form_from_config(ExperimentConfig(**TINY))
    d = w.sweep_view.define_sweep()
    assert d.rows() == [("hidden_size", "8, 16"), ("lr", "0.002, 0.005")]
    assert d.count_label.text() == "4 trials" and d.run_button.isEnabled()
    assert "GRU H 23, PA, dataset demo, 1 epoch, cpu" in d.base_label.text()
    d.set_row(1, "lr", "1e-4 .. 1e-2 log")
    assert not d.run_button.isEnabled() and "a grid needs a list of values" in d.error_label.text()
    assert d.table.item(1, 1).background().color().alpha() > 0  # the row in error is marked
    assert d.table.item(0, 1).background().color().alpha() == 0
    d.search_combo.setCurrentIndex(d.search_combo.findData("random"))
    d.trials_spin.setValue(3)
    assert d.run_button.isEnabled() and d.count_label.text() == "3 trials"
    d.set_row(0, "hiden_size", "8")
    assert "did you mean hidden_size" in d.error_label.text()
    assert not d.create_and_run()
    assert SweepStore(ws.root).list() == []
    d.reject()


def test_define_create_and_run_from_the_view(make_window, tmp_path, qtbot):
    ws = Workspace(tmp_path / "ws")
    w = make_window(ws=ws)
    w.set_form_from_config(ExperimentConfig(**TINY))
    v = w.sweep_view
    d = v.define_sweep()
    d.name_edit.setText("sizes")
    d.set_row(0, "hidden_size", "4, 6")
    d.table.selectRow(1)
    d.remove_row()
    assert d.rows() == [("hidden_size", "4, 6")] and d.count_label.text() == "2 trials"
    created = []
    d.created.connect(created.append)
    assert d.create_and_run()
    qtbot.waitUntil(lambda: bool(created), timeout=30000)
    info = created[0]
    assert [p.to_dict() for p in info.spec.space] == [{"key": "hidden_size", "values": [4, 6]}]
    assert info.spec.name == "sizes" and info.spec.base["max_train_samples"] == 300
    qtbot.waitUntil(lambda: v.worker is not None or SweepStore(ws.root).open(info.id).state == "succeeded",
                    timeout=30000)
    qtbot.waitUntil(lambda: v.worker is None, timeout=240000)
    done = SweepStore(ws.root).open(info.id)
    assert done.state == "succeeded" and [t["state"] for t in done.trials] == ["succeeded"] * 2
    sizes = [json.loads((ws.runs_dir / t["run_id"] / "config.json").read_text())["experiment"]["hidden_size"]
             for t in done.trials]
    assert sizes == [4, 6]
    qtbot.waitUntil(lambda: v.table_data is not None and v.table_data.info.id == info.id, timeout=30000)


def test_a_new_sweep_starts_from_the_shown_sweeps_space(make_window, tmp_path, qtbot):
    ws = Workspace(tmp_path / "ws")
    base = {k: v for k, v in TINY.items() if k != "step"}
    a = create_sweep(ws, parse_spec({"sweep": {"name": "shown", "search": "random", "trials": 2},
                                     "base": base, "space": {"lr": {"low": 1e-4, "high": 1e-2, "log": True},
                                                             "seed": [0, 1, 2]}}, "t"))
    w = make_window(ws=ws)
    v = w.sweep_view
    with qtbot.waitSignal(v.tableLoaded, timeout=30000):
        v.refresh(a.id)
    d = v.define_sweep()
    assert d.rows() == [("lr", "0.0001 .. 0.01 log"), ("seed", "0, 1, 2")]
    assert d.search_combo.currentData() == "random" and d.trials_spin.value() == 2
    d.reject()
    assert Path(ws.root).is_dir()
