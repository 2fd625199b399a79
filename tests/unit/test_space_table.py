"""The Sweep view's search-space table read into a sweep spec (sweep/space_table.py): the same spec as the TOML file
that says the same, each Param written back as a cell and read again, and errors that name the row's field."""
from __future__ import annotations

import pytest

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.sweep.space_table import SEARCHABLE_FIELDS, param_text, parse_cell, spec_from_table, trial_count
from dpd_desktop.sweep.spec import Param, SweepSpecError, load_spec

BASE = ExperimentConfig(step="pa", dataset="demo", epochs=2, hidden_size=8, frame_length=50, device="cpu")


def test_a_table_is_the_spec_of_the_toml_that_says_the_same(tmp_path):
    toml = tmp_path / "s.toml"
    toml.write_text('[sweep]\nname = "t"\nsearch = "random"\ntrials = 5\nseed = 3\n'
                    '[base]\nepochs = 2\nframe_length = 50\ndevice = "cpu"\n'
                    '[space]\nhidden_size = {low = 4, high = 32}\nlr = {low = 1e-4, high = 1e-2, log = true}\n'
                    'backbone = ["gru", "lstm"]\nkernel = ["reference"]\n', encoding="utf-8")
    want = load_spec(toml)
    got = spec_from_table([("hidden_size", "4 .. 32"), ("lr", "1e-4 .. 1e-2 log"), ("family", "gru, lstm"),
                           ("kernel", "reference"), ("", "")], BASE, search="random", trials=5, seed=3, name="t")
    for f in ("name", "search", "base", "space", "trials", "seed", "metric"):
        assert getattr(got, f) == getattr(want, f), f
    assert got.source == "Sweep view" and trial_count(got) == 5


def test_grid_count_and_the_searched_field_leaves_the_base():
    spec = spec_from_table([("hidden_size", "4, 8, 16"), ("seed", "0, 1")], BASE)
    assert trial_count(spec) == 6 and spec.search == "grid"
    assert "hidden_size" not in spec.base and spec.base["epochs"] == 2


@pytest.mark.parametrize("p", [
    Param("hidden_size", values=(4, 8, 16)),
    Param("lr", values=(0.001, 0.005)),
    Param("poly_odd_only", values=(True, False)),
    Param("cross_order", values=(None, 3)),
    Param("backbone", values=("gru", "mp")),
    Param("lr", low=1e-4, high=1e-2, log=True),
    Param("frame_length", low=20, high=200, integer=True),
    Param("weight_decay", low=0.0, high=0.5),
])
def test_param_text_reads_back(p):
    cell = parse_cell(p.key, param_text(p))
    if p.values is not None:
        assert tuple(cell) == p.values
    else:
        assert cell == {"low": p.low, "high": p.high, "log": p.log}
        assert isinstance(cell["low"], int) == p.integer


@pytest.mark.parametrize("rows, search, key, words", [
    ([("hidden_size", "4,,8")], "grid", "space.hidden_size", "an empty value"),
    ([("hidden_size", "")], "grid", "space.hidden_size", "no values"),
    ([("hidden_size", "four")], "grid", "space.hidden_size", "'four' is not a value of hidden_size"),
    ([("lr", "1e-4 .. 1e-2")], "grid", "space.lr", "a grid needs a list of values"),
    ([("lr", "1e-2 .. 1e-4")], "random", "space.lr", "expected low < high"),
    ([("lr", "1e-4 .. x")], "random", "space.lr.high", "'x' is not a value of lr"),
    ([("lr", "1e-4 ... 1e-2")], "random", "space.lr", "is not a range"),
    ([("hiden_size", "4")], "grid", "space.hiden_size", "did you mean hidden_size"),
    ([("step", "pa, dpd")], "grid", "space.step", "not a searchable configuration field"),
    ([("lr", "1e-3"), ("learning_rate", "2e-3")], "grid", "space.lr", "given in two rows"),
    ([("", "4, 8")], "grid", "space", "a row without a parameter"),
    ([], "grid", "space", "nothing to search"),
    ([("hidden_size", "0, 4")], "grid", "space.hidden_size", "0"),
])
def test_errors_name_the_row(rows, search, key, words):
    with pytest.raises(SweepSpecError) as ei:
        spec_from_table(rows, BASE, search=search, trials=3)
    assert ei.value.key == key and words in str(ei.value) and ei.value.source == "Sweep view"


def test_the_table_offers_the_searchable_fields_only():
    assert "hidden_size" in SEARCHABLE_FIELDS and "lr" in SEARCHABLE_FIELDS and "poly_order" in SEARCHABLE_FIELDS
    assert not {"step", "extra", "name", "dataset", "pa_run"} & set(SEARCHABLE_FIELDS)
