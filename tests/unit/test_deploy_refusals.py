"""After training, found by a fresh-clone trial: a fine-tune whose parent's frozen PA changed or is gone is refused
before a run folder exists (naming the checkpoint and the config.json field), and a resumed quantisation-aware
fine-tune scores its integer model as the finetune command does (quantized.json, the runs table's Q ACLR)."""
from __future__ import annotations

import errno
import shutil
from pathlib import Path

import pytest

from dpd_desktop import atomic, cli
from dpd_desktop.cli.deploy import finetune_config
from dpd_desktop.config import ExperimentConfig, QuantSpec
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.export import onnx_export
from dpd_desktop.runs import events as E
from dpd_desktop.runs.index import RunIndex
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training.trainer import Trainer

DEMO = dict(seed=2, n_train=3000, n_val=4096, n_test=4096)


@pytest.fixture
def runs(tmp_path):
    """A PA run (GRU 4) and a DPD run (GRU 4) on the demo dataset, 1 epoch each, in a workspace of this test."""
    ws = Workspace(tmp_path / "ws")
    ds = make_demo_dataset(**DEMO)
    base = dict(dataset="demo", backbone="gru", hidden_size=4, epochs=1, frame_length=50, stride=16, device="cpu")
    pa = Trainer(ExperimentConfig(step="pa", **base), dataset=ds, workspace=ws).run()
    dpd = Trainer(ExperimentConfig(step="dpd", pa_run=pa.run_id, **base), dataset=ds, workspace=ws).run()
    assert pa.state == dpd.state == "succeeded"
    return {"ws": ws, "ds": ds, "pa_dir": Path(pa.run_dir), "dpd": dpd.run_id, "dpd_dir": Path(dpd.run_dir)}


def _finetune(runs, *extra):
    return cli.main(["--workspace", str(runs["ws"].root), "finetune", runs["dpd"], "--epochs", "1", "--quiet",
                     "--no-plots", *extra])


@pytest.mark.parametrize("qat", [(), ("--qat", "8,8")])
def test_finetune_refuses_a_changed_pa_checkpoint_before_a_run_exists(runs, capsys, qat):
    """It was exit 1 with a failed run folder and "trained through another PA checkpoint (<the same PA run>)"."""
    pa_ckpt = runs["pa_dir"] / "best.pt"
    pa_ckpt.write_bytes(pa_ckpt.read_bytes() + b"changed")
    before = sorted(p.name for p in runs["ws"].runs_dir.iterdir())
    assert _finetune(runs, *qat) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"error: {pa_ckpt}: the PA checkpoint changed since the parent run (its SHA-256 differs "
                           f"from 'pa.sha256' in {runs['dpd_dir'] / 'config.json'}); a fine-tune trains through "
                           "the parent's PA")
    assert sorted(p.name for p in runs["ws"].runs_dir.iterdir()) == before


def test_finetune_refuses_a_removed_pa_run_naming_the_field(runs, capsys):
    """It named an option the finetune command does not have ("(option --pa-run)")."""
    moved = runs["pa_dir"].with_name("elsewhere")
    shutil.move(runs["pa_dir"], moved)
    before = sorted(p.name for p in runs["ws"].runs_dir.iterdir())
    assert _finetune(runs, "--qat", "8,8") == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"error: {runs['dpd_dir'] / 'config.json'}: field 'pa.checkpoint' names "
                           f"{runs['pa_dir'] / 'best.pt'}, which is not there (the PA run was moved or removed); a "
                           "fine-tune trains through the parent's PA")
    assert "--pa-run" not in err
    assert sorted(p.name for p in runs["ws"].runs_dir.iterdir()) == before


def test_a_resumed_quantisation_aware_finetune_scores_its_integer_model(runs, capsys):
    """A QAT fine-tune stopped after its first epoch and resumed ended succeeded without quantized.json: the runs
    table showed QUANT "qat W8A8" and Q ACLR "-"."""
    ws = runs["ws"]
    parent = RunRecord.open(runs["dpd_dir"])
    cfg = finetune_config(parent, QuantSpec(8, 8), epochs=2)
    tr = Trainer(cfg, dataset=runs["ds"], workspace=ws)
    tr.observers.append(lambda ev: isinstance(ev, E.EpochEnded) and ev.epoch == 0 and tr.request_cancel())
    first = tr.run()
    assert first.state == "cancelled"
    run_dir = Path(first.run_dir)
    assert not (run_dir / "quantized.json").exists()
    assert cli.main(["--workspace", str(ws.root), "resume", run_dir.name, "--quiet", "--no-plots"]) == 0
    assert "integer model test" in capsys.readouterr().out
    rec = RunRecord.open(run_dir)
    q = rec.quantized["W8A8"]
    assert q["plan_source"].startswith("recorded by the quantisation-aware run")
    assert q["metrics"]["test"]["ACLR_AVG"] == pytest.approx(rec.test_metrics["ACLR_AVG"], abs=0.05)
    with RunIndex.open(ws) as idx:
        row = idx.get(run_dir.name)
    assert (row.quant_label, row.quant_test_aclr_avg) == ("W8A8", pytest.approx(q["metrics"]["test"]["ACLR_AVG"]))


def test_an_onnx_file_that_cannot_be_written_is_named_with_its_folder(runs, tmp_path, monkeypatch):
    """A read-only output folder gave "e.onnx: cannot write: Read-only file system" (no folder named)."""
    out = tmp_path / "ro" / "e.onnx"
    out.parent.mkdir()

    def read_only(path, data):
        raise atomic.ArtifactWriteError(path, OSError(errno.EROFS, "Read-only file system"))

    monkeypatch.setattr(onnx_export.atomic, "atomic_write_bytes", read_only)
    with pytest.raises(onnx_export.OnnxExportError) as ei:
        onnx_export.export_onnx(runs["ws"], runs["dpd"], out, dataset=runs["ds"])
    assert str(ei.value) == f"cannot write {out}: Read-only file system; nothing written"
    assert list(out.parent.iterdir()) == []


def test_golden_frames_beyond_the_test_split_are_said_to_be_capped(runs, tmp_path, capsys):
    """The demo's test split holds 4096 // 50 = 81 frames of 50 samples; --golden-frames 1000 was capped silently."""
    out = tmp_path / "fx"
    assert cli.main(["--workspace", str(runs["ws"].root), "export", runs["dpd"], "--format", "fixed",
                     "--golden-frames", "1000", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"wrote {out}: W16A16 integer reference of gru (") and lines[0].endswith(
        " golden tensors, 81 frames), C header, README")
    assert lines[1] == ("note: --golden-frames 1000: the test split holds 81 frames of 50 samples, all of them in "
                        "the golden vectors")
    assert cli.main(["--workspace", str(runs["ws"].root), "export", runs["dpd"], "--format", "fixed",
                     "--golden-frames", "81", "--out", str(tmp_path / "fx81")]) == 0
    assert "note:" not in capsys.readouterr().out
