"""Trainer behavior on CPU: events, cancel, failures, live preview toggle, artifacts."""
import json
import math

import numpy as np
import pytest
import torch

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.runs.artifacts import load_checkpoint, read_history_csv
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.runs import events as E
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


def test_plain_loader_switch_gives_identical_history(tmp_path, ds):
    ref = Trainer(cfg(), dataset=ds, workspace=Workspace(tmp_path / "a")).run()
    t = Trainer(cfg(), dataset=ds, workspace=Workspace(tmp_path / "b"), batched_loader=False)
    res = t.run()
    assert t.loader_status == "off: disabled for this run (per-frame DataLoader)"
    keys = [k for k in res.history[0] if k != "TIME:"]
    assert [[r[k] for k in keys] for r in res.history] == [[r[k] for k in keys] for r in ref.history]
    assert json.loads((res.run_dir / "config.json").read_text())["device"]["batched_loader"].startswith("off")


# ---------------------------------------------------------------------------------------------- tester's defects
import os  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402

from dpd_desktop.runs import artifacts  # noqa: E402
from dpd_desktop import atomic
from dpd_desktop.runs.record import RunRecord  # noqa: E402
from dpd_desktop.runs.owner import process_start_ticks  # noqa: E402
from dpd_desktop.training import trainer as trainer_mod  # noqa: E402
from dpd_desktop.training import warm_imports  # noqa: E402
from dpd_desktop.runs.record import HISTORY_COLUMNS  # noqa: E402


def test_warm_imports_thread_never_prints_a_traceback(monkeypatch):
    """An interrupted import (the process exiting, KeyboardInterrupt, SystemExit) must stay silent in the thread."""
    seen, done = [], threading.Event()

    def boom(name, *a, **kw):
        done.set()
        raise KeyboardInterrupt

    monkeypatch.setattr(warm_imports, "__import__", boom, raising=False)
    monkeypatch.setattr(warm_imports, "_done", False)  # once per process: this test's own warm-up
    monkeypatch.setattr(warm_imports, "_running", False)
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(args.exc_type))
    before = {t.ident for t in threading.enumerate()}
    warm_imports.warm_imports_in_background()
    for t in threading.enumerate():
        if t.name == "dpd-warm-imports" and t.ident not in before:
            t.join(10)
    assert done.is_set() and seen == []


def _pa(tmp_path, ds, **kw):
    res = Trainer(cfg(epochs=1, **kw), dataset=ds, workspace=Workspace(tmp_path)).run()
    assert res.state == "succeeded", res.message
    return res


def test_dpd_refuses_a_dataset_other_than_the_pas(tmp_path, ds):
    pa = _pa(tmp_path, ds)
    pa_fp = json.loads((pa.run_dir / "config.json").read_text())["dataset"]["fingerprint"]
    other = make_demo_dataset(seed=3, n_train=3000, n_val=4096, n_test=4096)
    ev = []
    res = Trainer(cfg(step="dpd", pa_run=pa.run_id, epochs=1), dataset=other, workspace=Workspace(tmp_path),
                  observers=[ev.append]).run()
    assert res.state == "failed"
    msg = res.message
    assert msg.startswith(f"pa_run: the PA run {pa.run_id} was trained on dataset ") and "allow_dataset_mismatch" in msg
    assert pa_fp[:12] in msg and other.fingerprint()[:12] in msg and "but this DPD uses" in msg
    assert "--allow-dataset-mismatch" in msg
    # refused before a run folder exists: only the PA's folder is in the workspace
    assert res.run_dir is None and [r.run_id for r in Workspace(tmp_path).list_runs()] == [pa.run_id]

    ok = Trainer(cfg(step="dpd", pa_run=pa.run_id, epochs=1, allow_dataset_mismatch=True), dataset=other,
                 workspace=Workspace(tmp_path)).run()
    assert ok.state == "succeeded", ok.message
    block = json.loads((ok.run_dir / "config.json").read_text())["pa"]
    assert block["dataset_fingerprint"] == pa_fp and block["dataset_mismatch_allowed"] is True

    same = Trainer(cfg(step="dpd", pa_run=pa.run_id, epochs=1), dataset=ds, workspace=Workspace(tmp_path),
                   observers=[ev.append]).run()
    assert same.state == "succeeded", same.message
    block = json.loads((same.run_dir / "config.json").read_text())["pa"]
    assert block["dataset_fingerprint"] == pa_fp and block["dataset_mismatch_allowed"] is False
    started = [e for e in ev if isinstance(e, E.RunStarted)][-1]
    model_id = json.loads((same.run_dir / "config.json").read_text())["model"]["model_id"]
    assert model_id.endswith(f"_P_{started.n_params_model}") and started.n_params > started.n_params_model


@pytest.mark.parametrize("which", ["no such run", "a DPD run", "PA without best.pt", "PA of other shape",
                                   "PA still running", "PA failed", "config is a list", "experiment is text",
                                   "status unreadable"])
def test_bad_pa_run_is_refused_before_a_run_folder_exists(tmp_path, ds, which):
    pa = _pa(tmp_path, ds)
    status = pa.run_dir / "status.json"
    if which == "PA still running":  # alive: this very process
        st = json.loads(status.read_text())
        st.update(state="running", pid=os.getpid(), host=socket.gethostname(),
                  process_start=process_start_ticks(os.getpid()))
        status.write_text(json.dumps(st))
        ref = pa.run_id
    elif which == "PA failed":
        status.write_text(json.dumps({"state": "failed", "message": "training diverged at epoch 3"}))
        ref = pa.run_id
    elif which == "config is a list":
        (pa.run_dir / "config.json").write_text("[]")
        ref = pa.run_id
    elif which == "experiment is text":
        (pa.run_dir / "config.json").write_text('{"experiment": "pa"}')
        ref = pa.run_id
    elif which == "status unreadable":
        status.write_text("{broken")
        ref = pa.run_id
    elif which == "no such run":
        ref = "nosuch"
    elif which == "a DPD run":
        ref = Trainer(cfg(step="dpd", pa_run=pa.run_id, epochs=1), dataset=ds, workspace=Workspace(tmp_path)).run()
        assert ref.state == "succeeded", ref.message
        ref = ref.run_id
    elif which == "PA without best.pt":
        (pa.run_dir / "best.pt").unlink()
        ref = pa.run_id
    else:  # the checkpoint of another architecture than config.json records
        other = _pa(tmp_path, ds, hidden_size=5)
        (pa.run_dir / "best.pt").write_bytes((other.run_dir / "best.pt").read_bytes())
        ref = pa.run_id
    before = sorted(r.run_id for r in Workspace(tmp_path).list_runs())
    res = Trainer(cfg(step="dpd", pa_run=ref, epochs=1), dataset=ds, workspace=Workspace(tmp_path)).run()
    assert res.state == "failed" and res.run_dir is None, res.message
    assert sorted(r.run_id for r in Workspace(tmp_path).list_runs()) == before
    expected = {"no such run": "pa_run:", "a DPD run": "field 'experiment.step' is 'dpd'",
                "PA without best.pt": "best.pt", "PA of other shape": "best.pt",
                "PA still running": f"the PA run {pa.run_id} is still running",
                "PA failed": f"the PA run {pa.run_id} is failed ({status}: training diverged at epoch 3)",
                "config is a list": "field 'experiment' is missing or not an object",
                "experiment is text": "field 'experiment' is missing or not an object",
                "status unreadable": f"the PA run {pa.run_id} is unreadable"}[which]
    assert expected in res.message, res.message


@pytest.mark.parametrize("zero", ["x", "y"])
def test_dpd_on_all_zero_training_data_is_refused_before_a_run_folder(tmp_path, ds, zero):
    """g = max|y_train| / max|x_train| is undefined (x all zeros) or 0 (y all zeros): a dataset error naming the
    split, not a 'diverged, lower the learning rate' failure after an epoch."""
    import dataclasses

    pa = _pa(tmp_path, ds)
    tr = ds.train
    zeroed = dataclasses.replace(tr, **{zero: np.zeros_like(getattr(tr, zero)), f"{zero}64": None})
    bad = dataclasses.replace(ds, train=zeroed)
    assert not math.isfinite(bad.gain) if zero == "x" else bad.gain == 0
    before = sorted(r.run_id for r in Workspace(tmp_path).list_runs())
    res = Trainer(cfg(step="dpd", pa_run=pa.run_id, epochs=1, allow_dataset_mismatch=True), dataset=bad,
                  workspace=Workspace(tmp_path)).run()
    assert res.state == "failed" and res.run_dir is None, res.message
    which = "input x (max|x_train| = 0)" if zero == "x" else "output y (max|y_train| = 0)"
    assert f"the training split's {which} is all zeros" in res.message, res.message
    assert sorted(r.run_id for r in Workspace(tmp_path).list_runs()) == before


def test_cancelled_pa_run_is_used_and_its_state_recorded(tmp_path, ds):
    """A cancelled PA run keeps the best checkpoint of its completed epochs: accepted, state recorded in the DPD
    run's config.json (block pa)."""
    pa = _pa(tmp_path, ds)
    status = pa.run_dir / "status.json"
    status.write_text(json.dumps(dict(json.loads(status.read_text()), state="cancelled")))
    res = Trainer(cfg(step="dpd", pa_run=pa.run_id, epochs=1), dataset=ds, workspace=Workspace(tmp_path)).run()
    assert res.state == "succeeded", res.message
    assert json.loads((res.run_dir / "config.json").read_text())["pa"]["run_state"] == "cancelled"
    assert (res.run_dir / "log.txt").read_text().count(f"WARNING: the PA run {pa.run_id} is cancelled") == 1


def test_pa_check_does_not_touch_the_rng(tmp_path, ds):
    """check_pa_run builds its trial model under fork_rng: the global RNG state is unchanged."""
    pa = _pa(tmp_path, ds)
    torch.manual_seed(123)
    state = torch.get_rng_state()
    trainer_mod.check_pa_run(Workspace(tmp_path), pa.run_id, dataset=ds, fingerprint=ds.fingerprint())
    assert torch.equal(torch.get_rng_state(), state)


@pytest.mark.parametrize("payload", [b"garbage bytes here", "numpy"])
def test_garbage_pa_checkpoint_error_gives_no_unsafe_advice(tmp_path, ds, payload):
    pa = _pa(tmp_path, ds)
    ckpt = pa.run_dir / "best.pt"
    if payload == "numpy":
        import numpy as np

        torch.save({"state_dict": {"w": np.zeros(3)}}, ckpt)
    else:
        ckpt.write_bytes(payload)
    with pytest.raises(artifacts.CheckpointError) as exc:
        load_checkpoint(ckpt)
    text = str(exc.value)
    reason = "UnpicklingError)" if payload == "numpy" else "not the zip archive"  # garbage: no zip directory
    assert text.startswith(f"{ckpt}: not a readable checkpoint ({reason}"), text
    assert "\n" not in text
    for bad in ("weights_only", "Re-running", "trust", "safe_globals"):
        assert bad not in text, text
    res = Trainer(cfg(step="dpd", pa_run=pa.run_id, epochs=1), dataset=ds, workspace=Workspace(tmp_path)).run()
    assert res.state == "failed" and "not a readable checkpoint" in res.message and "weights_only" not in res.message


def test_files_get_the_umask_mode(tmp_path, ds):
    old = os.umask(0o022)
    try:
        atomic.atomic_write_bytes(tmp_path / "a.bin", b"x")
        atomic.atomic_write_via(tmp_path / "b.bin", lambda p: open(p, "wb").close())
        atomic.atomic_write_json(tmp_path / "c.json", {})
        for name in ("a.bin", "b.bin", "c.json"):
            assert (tmp_path / name).stat().st_mode & 0o777 == 0o644, name
        res = Trainer(cfg(epochs=1), dataset=ds, workspace=Workspace(tmp_path / "ws")).run()
        for name in ("config.json", "status.json", "history.csv", "best.pt", "last.pt", "results.h5"):
            assert (res.run_dir / name).stat().st_mode & 0o777 == 0o644, name
        os.umask(0o077)
        atomic.atomic_write_bytes(tmp_path / "d.bin", b"x")
        assert (tmp_path / "d.bin").stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)


def test_cancel_before_the_first_epoch_leaves_a_header_only_history(tmp_path, ds):
    t = Trainer(cfg(epochs=5), dataset=ds, workspace=Workspace(tmp_path / "a"))
    t.request_cancel()
    res = t.run()
    assert res.state == "cancelled" and res.history == []
    text = (res.run_dir / "history.csv").read_text()
    assert text == ",".join(HISTORY_COLUMNS) + "\n"
    done = Trainer(cfg(epochs=1), dataset=ds, workspace=Workspace(tmp_path / "b")).run()
    header = (done.run_dir / "history.csv").read_text().splitlines()[0]
    assert header == text.strip()  # the same columns as a run's real history


def test_write_history_csv_with_explicit_header(tmp_path):
    artifacts.write_history_csv(tmp_path / "h.csv", [], header=["A", "B"])
    assert (tmp_path / "h.csv").read_text() == "A,B\n"
    artifacts.write_history_csv(tmp_path / "h.csv", [{"A": 1, "B": "x"}], header=["A", "B"])
    assert read_history_csv(tmp_path / "h.csv") == [{"A": "1", "B": "x"}]


def _fake_run(tmp_path, status):
    d = tmp_path / "runs" / "2026-01-01-000000-pa-gru4"
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps({"experiment": {"step": "pa", "backbone": "gru", "hidden_size": 4}}))
    (d / "status.json").write_text(json.dumps(status))
    return d


def test_status_records_the_process_and_a_killed_run_reads_interrupted(tmp_path, ds):
    res = Trainer(cfg(epochs=1), dataset=ds, workspace=Workspace(tmp_path / "ws")).run()
    st = json.loads((res.run_dir / "status.json").read_text())
    assert st["pid"] == os.getpid() and st["host"] == socket.gethostname()
    assert st["process_start"] == process_start_ticks(os.getpid())

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = socket.gethostname()
    d = _fake_run(tmp_path, {"state": "running", "pid": dead.pid, "host": host})
    assert RunRecord.read(d).status == "interrupted"
    assert Workspace(tmp_path).list_runs()[0].status == "interrupted"
    me = {"pid": os.getpid(), "host": host, "process_start": process_start_ticks(os.getpid())}
    _fake_run(tmp_path, {"state": "running", **me})
    assert RunRecord.read(d).status == "running"  # alive: still running
    _fake_run(tmp_path, {"state": "queued", "pid": dead.pid, "host": "another-host"})
    assert RunRecord.read(d).status == "queued"  # another host: cannot tell
    _fake_run(tmp_path, {"state": "succeeded", "pid": dead.pid, "host": host})
    assert RunRecord.read(d).status == "succeeded"
    if me["process_start"] is not None:  # pid reused by another process: its start time differs
        _fake_run(tmp_path, {"state": "running", **dict(me, process_start=me["process_start"] - 1)})
        assert RunRecord.read(d).status == "interrupted"


@pytest.mark.parametrize("field,value", [("lr", float("inf")), ("lr", float("nan")), ("lr_end", float("inf")),
                                         ("weight_decay", float("inf")), ("grad_clip", float("inf")),
                                         ("weight_decay", -1.0), ("dataset", ""), ("dataset", "  ")])
def test_non_finite_or_empty_settings_are_refused(field, value):
    from dpd_desktop.config import ConfigError

    with pytest.raises(ConfigError) as ei:
        cfg(**{field: value}).validate()
    assert str(ei.value).startswith(field)


def test_a_diverging_run_fails_and_says_so(tmp_path, ds):
    """lr 1e30: the weights leave the float range in the first epoch; the run fails naming the epoch and the lr
    instead of finishing 'succeeded' with NaN metrics."""
    res = Trainer(cfg(lr=1e30, lr_end=1e-6, epochs=2), dataset=ds, workspace=Workspace(tmp_path)).run()
    assert res.state == "failed"
    # epoch, first non-finite batch, device, remedy (training/limits.py)
    assert res.message.startswith("training diverged on cpu at epoch 0, batch "), res.message
    assert "lr 1e+30" in res.message and "lower the learning rate, check the data for NaN" in res.message
    assert json.loads((res.run_dir / "status.json").read_text())["state"] == "failed"


def test_val_or_test_shorter_than_one_segment_is_refused_before_a_run_folder(tmp_path):
    short = make_demo_dataset(seed=2, n_train=3000, n_val=4096, n_test=1000)  # nperseg 4096
    res = Trainer(cfg(), dataset=short, workspace=Workspace(tmp_path)).run()
    assert res.state == "failed" and res.run_dir is None
    assert "the test split has 1000 samples, fewer than one evaluation segment (spec field nperseg = 4096)" in \
        res.message
    assert Workspace(tmp_path).list_runs() == []
