"""The inspector's flags before a run (analysis/gate.py): cached by the dataset's fingerprint and the rules' version,
used again without a new inspection, recomputed when the rules or the dataset's folder differ."""
from __future__ import annotations

import json
import shutil

import pytest

from dpd_desktop.analysis import gate
from dpd_desktop.analysis.inspect import inspect_dataset
from dpd_desktop.data import load_dataset
from tests.datasets_dir import DATASETS

DPA200 = DATASETS / "DPA_200MHz"
pytestmark = pytest.mark.skipif(not (DPA200 / "spec.json").is_file(),
                                reason=f"dataset DPA_200MHz not found at {DPA200}")


@pytest.fixture(scope="module")
def swapped(tmp_path_factory):
    """DPA_200MHz with input and output exchanged: the inspector's SWAPPED error."""
    dst = tmp_path_factory.mktemp("data") / "swapped"
    dst.mkdir()
    for s in ("train", "val", "test"):
        shutil.copyfile(DPA200 / f"{s}_input.csv", dst / f"{s}_output.csv")
        shutil.copyfile(DPA200 / f"{s}_output.csv", dst / f"{s}_input.csv")
    shutil.copyfile(DPA200 / "spec.json", dst / "spec.json")
    return dst


def test_the_flags_are_cached_by_fingerprint_and_rules(tmp_path, monkeypatch, swapped):
    ds = load_dataset(str(swapped))
    first = gate.dataset_flags(ds, cache_dir=tmp_path)
    assert [f.code for f in gate.blocking(first)] == ["SWAPPED"]
    assert [p.name for p in tmp_path.iterdir()] == [f"{ds.fingerprint()}.json"]

    def no_inspection(*a, **k):
        raise AssertionError("inspected again")

    monkeypatch.setattr(gate, "inspect_dataset", no_inspection)
    assert gate.dataset_flags(ds, cache_dir=tmp_path) == first  # a hit: no inspection
    assert first == inspect_dataset(ds).flags
    doc = json.loads((tmp_path / f"{ds.fingerprint()}.json").read_text())
    assert (doc["rules"], doc["source"]) == (gate.RULES_VERSION, str(swapped))
    monkeypatch.setattr(gate, "RULES_VERSION", gate.RULES_VERSION + 1)  # other rules: the entry is stale
    with pytest.raises(AssertionError, match="inspected again"):
        gate.dataset_flags(ds, cache_dir=tmp_path)


def test_a_cache_entry_of_another_folder_is_not_used(tmp_path, monkeypatch, swapped):
    """The messages name the files: the same data in another folder is inspected again."""
    ds = load_dataset(str(swapped))
    gate.dataset_flags(ds, cache_dir=tmp_path)
    path = tmp_path / f"{ds.fingerprint()}.json"
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "source": "/elsewhere", "flags": []}))
    assert [f.code for f in gate.blocking(gate.dataset_flags(ds, cache_dir=tmp_path))] == ["SWAPPED"]


def test_an_unreadable_cache_is_inspected_again_and_rewritten(tmp_path, swapped):
    ds = load_dataset(str(swapped))
    path = tmp_path / f"{ds.fingerprint()}.json"
    path.write_text("{not json")
    assert [f.code for f in gate.blocking(gate.dataset_flags(ds, cache_dir=tmp_path))] == ["SWAPPED"]
    assert json.loads(path.read_text())["flags"][0]["code"] == "SWAPPED"
