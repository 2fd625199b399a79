"""spec.json's optional power reference (``power_ref_dbm``, data/spec.py): the accepted forms, the errors that name
the field, and its round trips through spec.json, HDF5 attributes and a run record's config.json."""
from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest

from dpd_desktop.data import DatasetError, load_dataset, make_demo_dataset, normalize_spec, save_hdf5, save_split_csv
from dpd_desktop.data.spec import POWER_REF_RANGE_DBM
from dpd_desktop.runs.record import DatasetRef
from dpd_desktop.runs.replay import spec_of


@pytest.mark.parametrize("raw, want", [
    ({"power_ref_dbm": 10}, (10.0, 10.0)),
    ({"power_ref_dbm": "-7.5 dBm"}, (-7.5, -7.5)),
    ({"power_ref_dbm": "3e1"}, (30.0, 30.0)),
    ({"power_ref_dbm": {"input": -5, "output": 28.5}}, (-5.0, 28.5)),
    ({"input_power_ref_dbm": 0, "output_power_ref_dbm": 40}, (0.0, 40.0)),
    ({"power_ref_dbm": 3, "input_power_ref_dbm": 3.0}, (3.0, 3.0)),  # spellings that agree
    ({}, (None, None)),
])
def test_accepted_forms(raw, want):
    s = normalize_spec(raw)
    assert (s.input_power_ref_dbm, s.output_power_ref_dbm) == want
    assert s.has_power_reference == (want[0] is not None)
    assert not any(k in s.extra for k in ("power_ref_dbm", "input_power_ref_dbm", "output_power_ref_dbm"))


@pytest.mark.parametrize("raw, field, words", [
    ({"power_ref_dbm": "10 W"}, "power_ref_dbm", "expected a number of dBm"),
    ({"power_ref_dbm": float("nan")}, "power_ref_dbm", "expected a number of dBm"),
    ({"power_ref_dbm": True}, "power_ref_dbm", "expected a number of dBm"),
    ({"power_ref_dbm": POWER_REF_RANGE_DBM[1] + 1}, "power_ref_dbm", "from -150 to 90"),
    ({"power_ref_dbm": {"input": 1}}, "power_ref_dbm", "missing 'output'"),
    ({"power_ref_dbm": {"input": 1, "output": 2, "gain": 3}}, "power_ref_dbm", "unknown 'gain'"),
    ({"power_ref_dbm": {"input": "x", "output": 2}}, "power_ref_dbm.input", "expected a number of dBm"),
    ({"output_power_ref_dbm": 20}, "input_power_ref_dbm", "not the input plane's"),
    ({"power_ref_dbm": 3, "output_power_ref_dbm": 4}, "output_power_ref_dbm", "conflicting values"),
])
def test_errors_name_the_field(raw, field, words):
    with pytest.raises(DatasetError) as ei:
        normalize_spec(raw, source="spec.json")
    assert ei.value.field == field
    assert words in str(ei.value) and "spec.json" in str(ei.value)


def test_to_dict_writes_one_number_or_the_planes_and_reads_back():
    one = normalize_spec({"power_ref_dbm": 12})
    two = normalize_spec({"power_ref_dbm": {"input": -3, "output": 27}})
    assert one.to_dict()["power_ref_dbm"] == 12.0
    assert two.to_dict()["power_ref_dbm"] == {"input": -3.0, "output": 27.0}
    for s in (one, two):
        assert normalize_spec(s.to_dict()) == s
    # without it, nothing is written: the fingerprint of every existing dataset stays what it was
    assert "power_ref" not in normalize_spec({"input_signal_fs": 1e6}).canonical_json()


@pytest.mark.parametrize("writer", ["csv", "hdf5"])
def test_round_trip_through_the_files(tmp_path, writer):
    ds = make_demo_dataset(n_train=4096, n_val=4096, n_test=4096, nperseg=1024)
    ds = dataclasses.replace(ds, spec=dataclasses.replace(ds.spec, input_power_ref_dbm=-2.0,
                                                          output_power_ref_dbm=31.5))
    if writer == "csv":
        path = save_split_csv(ds, tmp_path / "d")
        assert json.loads((path / "spec.json").read_text())["power_ref_dbm"] == {"input": -2.0, "output": 31.5}
    else:
        path = save_hdf5(ds, tmp_path / "d.h5")
    back = load_dataset(path)
    assert (back.spec.input_power_ref_dbm, back.spec.output_power_ref_dbm) == (-2.0, 31.5)


def test_a_run_record_keeps_the_reference_for_its_replay():
    ds = make_demo_dataset(n_train=4096, n_val=4096, n_test=4096, nperseg=1024)
    ds = dataclasses.replace(ds, spec=dataclasses.replace(ds.spec, input_power_ref_dbm=5.0,
                                                          output_power_ref_dbm=5.0))
    ref = DatasetRef.from_dataset(ds)
    assert ref.spec["input_power_ref_dbm"] == 5.0
    spec = spec_of(SimpleNamespace(dataset=ref, config_path="config.json"))
    assert spec.has_power_reference and spec.output_power_ref_dbm == 5.0
