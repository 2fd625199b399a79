"""Safe files: no pickle in the package, every torch.load with weights_only=True, checkpoints checked against the
record's architecture, paths inside a record resolved and validated."""
from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest
import torch

from dpd_desktop.models import build_model
from dpd_desktop.runs import artifacts
from dpd_desktop.runs.record import DatasetRef, DatasetUnavailable, RunRecord
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training.errors import TrainingError
from dpd_desktop.training.pa_source import load_pa_for_dpd

PACKAGE = Path(__file__).resolve().parents[2] / "dpd_desktop"
V1_PA = Path(__file__).parent / "data" / "records_v1" / "2026-12-01-083312-pa-gru4"
UNSAFE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "joblib", "shelve", "marshal"}


def _sources():
    return sorted(PACKAGE.rglob("*.py"))


def test_no_pickle_module_is_imported_by_the_package():
    found = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.name}: {n}" for n in names if n.split(".")[0] in UNSAFE_MODULES]
    assert found == []


def test_every_torch_load_passes_weights_only_true():
    calls = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "load" \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "torch":
                kw = {k.arg: k.value for k in node.keywords}
                ok = isinstance(kw.get("weights_only"), ast.Constant) and kw["weights_only"].value is True
                calls.append((f"{path.name}:{node.lineno}", ok))
    assert calls and all(ok for _, ok in calls), calls
    assert not any("numpy.load" in p.read_text() and "allow_pickle=True" in p.read_text() for p in _sources())


def _pa_from_elsewhere(tmp_path) -> Path:
    d = tmp_path / "runs" / V1_PA.name
    shutil.copytree(V1_PA, d)
    return d


def test_a_pa_run_from_elsewhere_is_checked_against_its_config(tmp_path):
    """A PA run folder copied in: its best.pt loads only when its tensors are the ones config.json's architecture
    has (names, shapes, dtypes); a best.pt of another architecture is refused naming the file and the field."""
    d = _pa_from_elsewhere(tmp_path)
    ws = Workspace(tmp_path)
    pa, info = load_pa_for_dpd(ws, d.name)
    assert info["hidden_size"] == 4 and sum(p.numel() for p in pa.parameters()) > 0
    state, meta = artifacts.load_checkpoint(d / "best.pt")
    other = build_model("gru", 5, 1).state_dict()
    artifacts.save_checkpoint(d / "best.pt", other, dict(meta, hidden_size=4))
    with pytest.raises(TrainingError, match=rf"{d / 'best.pt'}: field 'backbone\.rnn\.weight_ih_l0' has shape "
                                            r"\(15, 2\), expected \(12, 2\) for gru H=4"):
        load_pa_for_dpd(ws, d.name)
    artifacts.save_checkpoint(d / "best.pt", {k: v.double() for k, v in state.items()}, meta)
    with pytest.raises(TrainingError, match="has dtype torch.float64, expected torch.float32"):
        load_pa_for_dpd(ws, d.name)
    artifacts.save_checkpoint(d / "best.pt", state, dict(meta, format="dpd-desktop-checkpoint-7"))
    with pytest.raises(TrainingError, match=r"field 'meta\.format' is 'dpd-desktop-checkpoint-7'; this version "
                                            r"reads dpd-desktop-checkpoint-1"):
        load_pa_for_dpd(ws, d.name)
    extra = dict(state, **{"backbone.extra": torch.zeros(1)})
    artifacts.save_checkpoint(d / "best.pt", extra, meta)
    with pytest.raises(TrainingError, match=r"field 'backbone\.extra' does not match the recorded architecture"):
        load_pa_for_dpd(ws, d.name)


def _ref(source, recorded_in):
    return DatasetRef(kind="hdf5", source=source, fingerprint=None, recorded_in=str(recorded_in))


def test_a_relative_dataset_source_is_resolved_against_the_run_folder(tmp_path):
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "pa.h5").write_bytes(b"x")
    cfg = run / "config.json"
    assert _ref("../../data/pa.h5", cfg).resolved_source() == tmp_path / "data" / "pa.h5"
    assert _ref(str(tmp_path / "runs" / ".." / "data" / "pa.h5"), cfg).resolved_source() == tmp_path / "data" / "pa.h5"
    with pytest.raises(DatasetUnavailable, match=rf"{cfg}: field 'dataset\.source' names {tmp_path}/data/gone\.h5, "
                                                 r"which does not exist \(the dataset was moved or deleted"):
        _ref("../../data/gone.h5", cfg).resolved_source()
    with pytest.raises(DatasetUnavailable, match=r"field 'dataset\.source' is the relative path 'pa\.h5' and no run "
                                                 "folder to resolve it against"):
        DatasetRef(kind="hdf5", source="pa.h5", fingerprint=None).resolved_source()


def test_a_record_naming_a_missing_dataset_says_which_field(tmp_path):
    d = _pa_from_elsewhere(tmp_path)
    doc = json.loads((d / "config.json").read_text())
    doc["dataset"] = {"kind": "hdf5", "source": "no/such/file.h5", "fingerprint": None}
    (d / "config.json").write_text(json.dumps(doc))
    rec = RunRecord.open(d)
    with pytest.raises(DatasetUnavailable, match=rf"field 'dataset\.source' names {d}/no/such/file\.h5, which does "
                                                 "not exist"):
        rec.dataset.load()
