"""Trainer behavior on CPU: events, cancel, failures, live preview toggle, artifacts."""
import json

import pytest
import torch

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.runs.artifacts import load_checkpoint, read_history_csv
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training import events as E
from dpd_desktop.training.trainer import Trainer


@pytest.fixture(scope="module")
def ds():
    return make_demo_dataset(seed=2, n_train=3000, n_val=4096, n_test=4096)


def cfg(**kw):
    base = dict(step="pa", dataset="demo", backbone="gru", hidden_size=6, epochs=2, frame_length=40, stride=8,
                batch_size=32, device="cpu")
    base.update(kw)
    return ExperimentConfig(**base)


def test_events_and_artifacts(tmp_path, ds):
    ev = []
    res = Trainer(cfg(), dataset=ds, workspace=Workspace(tmp_path), observers=[ev.append]).run()
    assert res.state == "succeeded"
    kinds = [type(e).__name__ for e in ev]
    assert kinds[0] == "RunStarted" and kinds[-1] == "RunFinished"
    assert kinds.count("EpochEnded") == 2
    ends = [e for e in ev if isinstance(e, E.EpochEnded)]
    assert all(e.plots is not None and len(e.plots.amam_in) > 0 for e in ends)
    started = ev[0]
    assert started.fast_path.startswith("off: CPU") and started.batches_per_epoch == -(-started.n_train_frames // 32)
    for name in ("config.json", "history.csv", "best.pt", "best.csv", "last.pt", "results.h5", "log.txt",
                 "status.json"):
        assert (res.run_dir / name).is_file(), name
    state, meta = load_checkpoint(res.run_dir / "best.pt")
    assert meta["epoch"] == res.best_epoch and meta["backbone"] == "gru"
    torch.load(res.run_dir / "last.pt", weights_only=True)  # resumable state loads safely
    import h5py

    with h5py.File(res.run_dir / "results.h5") as f:
        assert f["test/prediction"].shape == (4096, 2)
        assert f["test"].attrs["NMSE"] == pytest.approx(res.test_metrics["NMSE"])
        assert json.loads(f.attrs["config_json"])["hidden_size"] == 6


def test_preview_toggle_mid_run_does_not_change_numbers(tmp_path, ds):
    ev = []
    trainer = Trainer(cfg(), dataset=ds, workspace=Workspace(tmp_path / "a"), observers=[ev.append])

    def toggle(e):
        if isinstance(e, E.BatchProgress) and e.epoch == 0:
            trainer.set_preview_every(5)

    trainer.observers.append(toggle)
    res = trainer.run()
    previews = [e for e in ev if isinstance(e, E.PreviewReady)]
    assert previews and all(e.plots.source == "preview" for e in previews)
    ref = Trainer(cfg(), dataset=ds, workspace=Workspace(tmp_path / "b")).run()
    keys = [k for k in res.history[0] if k != "TIME:"]
    assert [[r[k] for k in keys] for r in res.history] == [[r[k] for k in keys] for r in ref.history]


def test_cancel_mid_run_keeps_run_readable(tmp_path, ds):
    ev = []
    trainer = Trainer(cfg(epochs=50), dataset=ds, workspace=Workspace(tmp_path), observers=[ev.append])

    def stop(e):
        if isinstance(e, E.EpochEnded) and e.epoch == 1:
            trainer.request_cancel()

    trainer.observers.append(stop)
    res = trainer.run()
    assert res.state == "cancelled"
    assert isinstance(ev[-1], E.RunCancelled) and ev[-1].epochs_completed == 2
    assert len(read_history_csv(res.run_dir / "history.csv")) == 2
    assert json.loads((res.run_dir / "status.json").read_text())["state"] == "cancelled"
    load_checkpoint(res.run_dir / "best.pt")


def test_cuda_requested_without_gpu_fails_clearly(tmp_path, ds):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    ev = []
    res = Trainer(cfg(device="cuda"), dataset=ds, workspace=Workspace(tmp_path), observers=[ev.append]).run()
    assert res.state == "failed" and "device" in res.message and "CUDA" in res.message
    assert isinstance(ev[-1], E.RunFailed)


def test_dpd_needs_existing_pa_run(tmp_path, ds):
    res = Trainer(cfg(step="dpd", pa_run="no-such-run"), dataset=ds, workspace=Workspace(tmp_path)).run()
    assert res.state == "failed" and "pa_run" in res.message and "no-such-run" in res.message


def test_frame_longer_than_training_split(tmp_path):
    small = make_demo_dataset(seed=0, n_train=300, n_val=4096, n_test=4096)
    res = Trainer(cfg(frame_length=400), dataset=small, workspace=Workspace(tmp_path)).run()
    assert res.state == "failed" and "frame_length" in res.message


def test_plain_loader_switch_gives_identical_history(tmp_path, ds, monkeypatch):
    import dpd_desktop.data.framing as framing

    ref = Trainer(cfg(), dataset=ds, workspace=Workspace(tmp_path / "a")).run()
    monkeypatch.setattr(framing, "DISABLE_BATCHED_LOADER", True)
    t = Trainer(cfg(), dataset=ds, workspace=Workspace(tmp_path / "b"))
    res = t.run()
    assert t.loader_status.startswith("off: disabled by DPD_DESKTOP_DISABLE_BATCHED_LOADER")
    keys = [k for k in res.history[0] if k != "TIME:"]
    assert [[r[k] for k in keys] for r in res.history] == [[r[k] for k in keys] for r in ref.history]
    assert json.loads((res.run_dir / "config.json").read_text())["device"]["batched_loader"].startswith("off")
