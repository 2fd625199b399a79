"""Resume (issue 10 point 4): a run killed mid-epoch (SIGKILL) or cancelled, then resumed, ends bitwise equal to the
uninterrupted run (history.csv values, best.pt tensors, results.h5 metrics and predictions); the refusals.

The configuration changes the learning rate at the epoch before the interruption (ReduceLROnPlateau, patience 0,
epoch 3 is worse than epoch 2) and selects an epoch before the last, so the scheduler's replayed step and the
best-so-far record are both exercised.
"""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from dpd_desktop import cli
from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.process import Exit
from dpd_desktop.runs.artifacts import load_checkpoint, read_history_csv
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.runs import events as E
from dpd_desktop.training.resume import ResumeRefused, prepare_resume, resume_run
from dpd_desktop.training.trainer import Trainer

REPO = Path(__file__).resolve().parents[2]
DEMO = dict(seed=2, n_train=3000, n_val=4096, n_test=4096)
CFG = dict(step="pa", dataset="demo", backbone="gru", hidden_size=6, epochs=5, frame_length=40, stride=8,
           batch_size=32, device="cpu", lr=0.5, lr_end=1e-3, patience=0)

# the child process: trains CFG and SIGKILLs itself at the first progress report of epoch KILL_EPOCH (mid-epoch:
# that epoch's checkpoint is never written; last.pt holds epoch KILL_EPOCH - 1)
CHILD = """
import json, os, signal, sys
from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.runs import events as E
from dpd_desktop.training.trainer import Trainer
ws, kill_epoch, cfg, demo = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4])
def kill(ev):
    if isinstance(ev, E.BatchProgress) and ev.epoch == kill_epoch:
        os.kill(os.getpid(), signal.SIGKILL)
Trainer(ExperimentConfig(**cfg), dataset=make_demo_dataset(**demo), workspace=Workspace(ws), observers=[kill]).run()
"""


@pytest.fixture(scope="module")
def ds():
    return make_demo_dataset(**DEMO)


@pytest.fixture(scope="module")
def reference(tmp_path_factory, ds):
    """The uninterrupted run."""
    res = Trainer(ExperimentConfig(**CFG), dataset=ds, workspace=Workspace(tmp_path_factory.mktemp("ref"))).run()
    assert res.state == "succeeded"
    lrs = [float(r["LR"]) for r in res.history]
    assert lrs[:4] == [0.5] * 4 and lrs[4] == 0.25, lrs  # the plateau step after epoch 3 halves the LR
    assert res.best_epoch == 2
    return res.run_dir


def assert_same_run(ref: Path, run: Path) -> None:
    """Bitwise: every history.csv value but the clock, best.pt's tensors and meta, results.h5's metrics and arrays."""
    ha, hb = read_history_csv(ref / "history.csv"), read_history_csv(run / "history.csv")
    assert len(ha) == len(hb) == CFG["epochs"]
    for ra, rb in zip(ha, hb):
        ra.pop("TIME:"), rb.pop("TIME:")
        assert ra == rb
    (sa, ma), (sb, mb) = load_checkpoint(ref / "best.pt"), load_checkpoint(run / "best.pt")
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    ma.pop("run_id"), mb.pop("run_id")
    assert ma == mb
    with h5py.File(ref / "results.h5") as fa, h5py.File(run / "results.h5") as fb:
        for split in ("val", "test"):
            ga, gb = fa[split], fb[split]
            assert dict(ga.attrs) == dict(gb.attrs)
            for name in ga:
                assert np.array_equal(ga[name][()], gb[name][()]), (split, name)
        assert fa.attrs["selected_epoch"] == fb.attrs["selected_epoch"] == 2
    st = json.loads((run / "status.json").read_text())
    assert st["state"] == "succeeded" and st["best_epoch"] == 2
    assert st["test_metrics"] == json.loads((ref / "status.json").read_text())["test_metrics"]


def test_sigkill_mid_epoch_then_resume_is_bitwise_equal(tmp_path, reference):
    ws = tmp_path / "ws"
    proc = subprocess.run([sys.executable, "-c", CHILD, str(ws), "4", json.dumps(CFG), json.dumps(DEMO)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    (run,) = list((ws / "runs").iterdir())
    rec = RunRecord.open(run)
    assert rec.state == "interrupted"  # status.json says running, its process is gone
    assert torch.load(run / "last.pt", weights_only=True)["epoch"] == 3
    assert len(read_history_csv(run / "history.csv")) == 4
    # resumed through the command line, the demo dataset regenerated from config.json and its fingerprint checked
    assert cli.main(["--workspace", str(ws), "resume", run.name, "--quiet", "--no-plots"]) == Exit.OK
    assert_same_run(reference, run)
    log = (run / "log.txt").read_text()
    assert "resumed from epoch 3 (last.pt); continuing at epoch 4" in log
    assert log.index("epoch 3:") < log.index("resumed from epoch 3") < log.index("epoch 4:")
    assert json.loads((run / "config.json").read_text())["resumes"][0]["from_epoch"] == 3


def test_cancel_then_resume_is_bitwise_equal_and_twice(tmp_path, ds, reference):
    """Cancelled in epoch 1, resumed and cancelled again in epoch 3, resumed to the end. (A cancel stops after the
    current batch; a tiny epoch's first progress report may be its last batch, so the epoch may still finish.)"""
    ws = Workspace(tmp_path)
    trainer = Trainer(ExperimentConfig(**CFG), dataset=ds, workspace=ws)

    def cancel_in(epoch, tr):
        return lambda ev: isinstance(ev, E.BatchProgress) and ev.epoch == epoch and tr.request_cancel()

    trainer.observers.append(cancel_in(1, trainer))
    res = trainer.run()
    assert res.state == "cancelled" and len(res.history) in (1, 2)
    assert RunRecord.open(res.run_dir).state == "cancelled"
    # killed between its history row and its last.pt: history.csv has a row last.pt does not, best.csv is gone;
    # the resume rewrites both from last.pt
    with open(res.run_dir / "history.csv", "a") as fh:
        fh.write(",".join(["9"] * 22) + "\n")
    (res.run_dir / "best.csv").unlink()
    plan = prepare_resume(ws, res.run_id, dataset=ds)
    from dpd_desktop.training.resume import resume_trainer

    tr2 = resume_trainer(plan, ws)
    tr2.observers.append(cancel_in(3, tr2))
    assert tr2.run().state == "cancelled"
    assert len(read_history_csv(res.run_dir / "history.csv")) in (3, 4)
    seen = []
    final = resume_run(res.run_dir, ws, observers=[seen.append])
    assert final.state == "succeeded" and [r["EPOCH"] for r in final.history] == list(range(5))
    assert [e.epoch for e in seen if isinstance(e, E.EpochEnded)][-1] == 4
    assert_same_run(reference, res.run_dir)
    assert len(json.loads((res.run_dir / "config.json").read_text())["resumes"]) == 2


def _interrupted_copy(tmp_path, ds, cancel_epoch=2):
    ws = Workspace(tmp_path)
    trainer = Trainer(ExperimentConfig(**CFG), dataset=ds, workspace=ws)
    trainer.observers.append(lambda ev: isinstance(ev, E.BatchProgress) and ev.epoch == cancel_epoch
                             and trainer.request_cancel())
    return ws, trainer.run().run_dir


def _refused(ws, run, capsys, *more):
    assert cli.main(["--workspace", str(ws.root), "resume", str(run), "--quiet", *more]) == Exit.USAGE
    return capsys.readouterr().err


def test_refusals_exit_2_with_the_reason(tmp_path, ds, reference, capsys):
    ws, run = _interrupted_copy(tmp_path, ds)
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    # succeeded
    assert "already succeeded" in _refused(Workspace(reference.parents[1]), reference.name, capsys)
    # still running: status.json names this (live) process
    st = json.loads((run / "status.json").read_text())
    (run / "status.json").write_text(json.dumps({**st, "state": "running", "pid": os.getpid()}))
    assert "is still running (process" in _refused(ws, run.name, capsys)
    # an unreadable status.json: the file is named
    (run / "status.json").write_text("x")
    assert f"is unreadable: {run / 'status.json'} is not a JSON object" in _refused(ws, run.name, capsys)
    (run / "status.json").write_bytes(before["status.json"])
    # last.pt of another architecture than config.json
    doc = json.loads(before["config.json"])
    doc["experiment"]["hidden_size"] = 7
    (run / "config.json").write_text(json.dumps(doc))
    assert "field 'meta.hidden_size' is 6 but the run's config.json records 7" in _refused(ws, run.name, capsys)
    # the dataset changed: the recorded fingerprint is not the regenerated demo's
    doc = json.loads(before["config.json"])
    doc["dataset"]["fingerprint"] = "0" * 64
    (run / "config.json").write_text(json.dumps(doc))
    assert "has changed since the run" in _refused(ws, run.name, capsys)
    (run / "config.json").write_bytes(before["config.json"])
    # a last.pt without the resume record (an older version's)
    state = torch.load(run / "last.pt", weights_only=True)
    torch.save({k: state[k] for k in ("epoch", "model", "optimizer", "scheduler", "meta")}, run / "last.pt")
    assert "field 'format' is None" in _refused(ws, run.name, capsys)
    # no last.pt at all
    (run / "last.pt").unlink()
    assert "has no last.pt" in _refused(ws, run.name, capsys)
    # a bad limit
    (run / "last.pt").write_bytes(before["last.pt"])
    assert "cuda_memory_fraction" in _refused(ws, run.name, capsys, "--cuda-memory-fraction", "1.5")
    # nothing was written by a refusal
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before
    with pytest.raises(ResumeRefused, match="not found"):
        prepare_resume(ws, "no-such-run")


def test_dpd_cancel_then_resume_is_bitwise_equal(tmp_path, ds):
    """A DPD through a frozen PA: the trained model is the cascade's DPD (last.pt holds its tensors only)."""
    ws = Workspace(tmp_path)
    pa = Trainer(ExperimentConfig(**dict(CFG, epochs=1, lr=5e-3)), dataset=ds, workspace=ws).run()
    dpd = dict(CFG, step="dpd", pa_run=pa.run_id, hidden_size=4, epochs=3, lr=5e-3, lr_end=1e-4)
    ref = Trainer(ExperimentConfig(**dpd), dataset=ds, workspace=ws).run()
    assert ref.state == "succeeded", ref.message
    tr = Trainer(ExperimentConfig(**dpd), dataset=ds, workspace=ws)
    tr.observers.append(lambda ev: isinstance(ev, E.EpochEnded) and ev.epoch == 0 and tr.request_cancel())
    part = tr.run()
    assert part.state == "cancelled" and len(part.history) == 1
    assert set(torch.load(part.run_dir / "last.pt", weights_only=True)["model"]) == set(
        torch.load(ref.run_dir / "last.pt", weights_only=True)["model"])
    res = resume_run(part.run_dir, ws, dataset=ds)
    assert res.state == "succeeded" and res.best_epoch == ref.best_epoch
    got, want = read_history_csv(part.run_dir / "history.csv"), read_history_csv(ref.run_dir / "history.csv")
    for row in got + want:
        row.pop("TIME:")
    assert got == want and len(got) == 3
    (sa, _), (sb, _) = load_checkpoint(ref.run_dir / "best.pt"), load_checkpoint(part.run_dir / "best.pt")
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert res.test_metrics == ref.test_metrics and res.extra == ref.extra
