"""Crash safety: a write of each run artifact fails (disk full, I/O error, permission) through a fault-injecting file
system (tests/unit/fault_injection.py: the Nth os.write / os.fsync / os.replace of one artifact raises). Each case:
no crash, the run ends ``failed`` with the file named in status.json and log.txt, no temporary file is left, and
every earlier artifact reads back (RunRecord.open, best.pt/last.pt load, results.h5 opens, status.json never claims
more epochs than history.csv and last.pt hold).

A real full disk (a small tmpfs) needs mount rights this test machine does not give; the injector stands in for it.
"""
from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import h5py
import pytest
import torch

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.runs import artifacts
from dpd_desktop import atomic
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training.trainer import Trainer

import fault_injection as fi

BASE = dict(step="pa", dataset="demo", backbone="gru", hidden_size=4, epochs=3, frame_length=40, stride=16,
            batch_size=32, device="cpu", threads=1)


@pytest.fixture(scope="module")
def demo():
    return make_demo_dataset(seed=2, n_train=3000, n_val=1024, n_test=1024, nperseg=256)


@pytest.fixture(autouse=True)
def _keep_threads():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def _run(tmp_path, demo, monkeypatch, fault: fi.Fault):
    fi.install(monkeypatch, fault)
    res = Trainer(ExperimentConfig(**BASE), dataset=demo, workspace=Workspace(tmp_path)).run()
    monkeypatch.undo()
    return res


def _check_consistent(run_dir: Path) -> RunRecord:
    """Every artifact on disk reads back, and status.json claims nothing the disk does not hold."""
    assert fi.leftovers(run_dir) == []
    rec = RunRecord.open(run_dir)
    st = rec.status_doc
    rows = rec.history()
    done = st.get("epochs_completed") or 0
    assert done <= len(rows)
    if done:
        last = torch.load(run_dir / "last.pt", weights_only=True)
        assert last["epoch"] + 1 >= done
    if st.get("best_epoch") is not None:
        _, meta = artifacts.load_checkpoint(run_dir / "best.pt")
        assert meta["epoch"] == st["best_epoch"]
    if (run_dir / "results.h5").exists():
        with h5py.File(run_dir / "results.h5", "r") as f:
            assert {"val", "test"} <= set(f)
    return rec


# (artifact, which attempt fails, at which step, errno): the attempt is chosen so that earlier versions exist
CASES = [
    ("config.json", 2, "write", errno.ENOSPC),   # the complete config after the set-up; the head stays
    ("status.json", 3, "write", errno.ENOSPC),   # after epoch 1; epoch 0's status stays
    ("history.csv", 3, "write", errno.ENOSPC),   # epoch 1's row; the header + epoch 0 stay
    ("best.pt", 1, "write", errno.ENOSPC),       # the first selected checkpoint
    ("best.csv", 1, "fsync", errno.EIO),         # best.pt of epoch 0 is written and stays loadable
    ("last.pt", 2, "write", errno.ENOSPC),       # epoch 1's training state; epoch 0's stays
    ("results.h5", 1, "write", errno.ENOSPC),    # the end of the run: every checkpoint stays
    ("log.txt", 3, "write", errno.ENOSPC),
    ("status.json", 5, "replace", errno.EACCES),  # the final "succeeded" status cannot be renamed into place
]


@pytest.mark.parametrize("artifact,nth,op,err", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in CASES])
def test_a_failed_artifact_write_fails_the_run_naming_the_file(tmp_path, demo, monkeypatch, artifact, nth, op, err):
    fault = fi.Fault(artifact, nth=nth, op=op, err=err)
    res = _run(tmp_path, demo, monkeypatch, fault)
    assert fault.fired == 1
    expected = f"{artifact}: cannot write: {os.strerror(err)}"
    assert res.state == "failed" and res.message == expected
    rec = _check_consistent(res.run_dir)
    assert rec.state == "failed" and rec.message == expected
    assert f"FAILED: {expected}" in (res.run_dir / "log.txt").read_text()


def test_results_h5_is_built_in_memory_so_h5py_never_meets_the_full_disk(tmp_path, demo, monkeypatch):
    """h5py writes to an io.BytesIO: the only disk write of results.h5 is the artifact writer's (one attempt)."""
    fault = fi.Fault("results.h5", nth=1, op="write", err=errno.ENOSPC)
    opened = []
    real_file = h5py.File

    def spy(name, *a, **kw):
        opened.append(name)
        return real_file(name, *a, **kw)

    monkeypatch.setattr(h5py, "File", spy)
    fi.install(monkeypatch, fault)
    res = Trainer(ExperimentConfig(**BASE), dataset=demo, workspace=Workspace(tmp_path)).run()
    monkeypatch.undo()
    assert res.state == "failed" and res.message == "results.h5: cannot write: No space left on device"
    assert opened and all(not isinstance(n, (str, os.PathLike)) for n in opened)  # only in-memory files
    assert not (res.run_dir / "results.h5").exists()
    assert len(_check_consistent(res.run_dir).history()) == 3


def test_a_disk_that_stays_full_leaves_a_consistent_record(tmp_path, demo, monkeypatch):
    """After epoch 0's status every write fails, even after the space reserve is deleted (another program takes the
    room at once), the failure's status too: what remains is epoch 0's record, and status.json (still "running", by
    this process: "interrupted" once it is gone) counts epoch 0 only. (test_a_full_disk_mid_run_ends_failed_in_status_
    and_log: the usual case, where the freed reserve takes the failure.)"""
    fault = fi.install(monkeypatch, fi.Fault(None, nth=10**9, op="write", sticky=True))

    def arm(ev):
        if type(ev).__name__ == "EpochEnded" and ev.epoch == 0:
            fault.nth = fault.hits + 1

    res = Trainer(ExperimentConfig(**BASE), dataset=demo, workspace=Workspace(tmp_path), observers=[arm]).run()
    monkeypatch.undo()
    assert res.state == "failed" and res.message == "history.csv: cannot write: No space left on device"
    assert fault.fired == 2  # history.csv, the failed status (the FAILED log line is appended in place)
    st = json.loads((res.run_dir / "status.json").read_text())
    assert st["state"] == "running" and st["epochs_completed"] == 1 and st["pid"] == os.getpid()
    rec = _check_consistent(res.run_dir)
    assert len(rec.history()) == 1
    _, meta = artifacts.load_checkpoint(res.run_dir / "best.pt")
    assert meta["epoch"] == 0 and torch.load(res.run_dir / "last.pt", weights_only=True)["epoch"] == 0


def test_a_full_disk_mid_run_ends_failed_in_status_and_log(tmp_path, demo, monkeypatch):
    """After epoch 0 the disk is full for every write until the writer deletes its space reserve (runs/writer.py
    RESERVE_FILE): status.json ends "failed" with the reason and log.txt holds the FAILED line (status.json stayed
    "running" with a dead pid and the log was empty); the reserve is gone and every earlier artifact reads."""
    from dpd_desktop.runs.writer import RESERVE_FILE

    fault = fi.install(monkeypatch, fi.Fault(None, nth=10**9, op="write", sticky=True, freed_by=RESERVE_FILE))

    def arm(ev):
        if type(ev).__name__ == "EpochEnded" and ev.epoch == 0:
            fault.nth = fault.hits + 1

    res = Trainer(ExperimentConfig(**BASE), dataset=demo, workspace=Workspace(tmp_path), observers=[arm]).run()
    monkeypatch.undo()
    expected = "history.csv: cannot write: No space left on device"
    assert res.state == "failed" and res.message == expected and fault.fired == 1 and fault.freed
    st = json.loads((res.run_dir / "status.json").read_text())
    assert st["state"] == "failed" and st["message"] == expected and st["epochs_completed"] == 1
    log = (res.run_dir / "log.txt").read_text()
    assert f"FAILED: {expected}" in log and log.startswith(f"{log[:8]} run {res.run_id}: PA gru")
    assert not (res.run_dir / RESERVE_FILE).exists()
    rec = _check_consistent(res.run_dir)
    assert rec.state == "failed" and rec.message == expected and len(rec.history()) == 1


@pytest.mark.parametrize("artifact", ["status.json", "history.csv", "config.json"])
def test_a_new_run_on_a_full_disk_leaves_no_run_folder(tmp_path, demo, monkeypatch, artifact):
    """The disk is full at the run's first files: the run does not start (run_dir None: exit status 2 from the
    command line), the message says so, and no run folder is left behind (one was left, empty, exit 1)."""
    fault = fi.install(monkeypatch, fi.Fault(artifact, nth=1, op="write", err=errno.ENOSPC))
    ws = Workspace(tmp_path)
    res = Trainer(ExperimentConfig(**BASE), dataset=demo, workspace=ws).run()
    monkeypatch.undo()
    assert fault.fired == 1 and res.state == "failed" and res.run_dir is None
    assert res.message == (f"cannot start a run in the workspace {tmp_path}: the disk is full (No space left on "
                           "device); free some space and start it again")
    assert list(ws.runs_dir.iterdir()) == []


def test_a_resume_on_a_full_disk_keeps_the_run_folder(tmp_path, demo, monkeypatch):
    """A resumed run's folder is never removed, whatever its first writes meet."""
    from dpd_desktop.training.resume import prepare_resume, resume_trainer

    ws = Workspace(tmp_path)
    tr = Trainer(ExperimentConfig(**BASE), dataset=demo, workspace=ws)
    tr.observers.append(lambda ev: type(ev).__name__ == "EpochEnded" and tr.request_cancel())
    res = tr.run()
    assert res.state == "cancelled"
    files = sorted(p.name for p in res.run_dir.iterdir())
    fi.install(monkeypatch, fi.Fault("config.json", nth=1, op="write", err=errno.ENOSPC))
    again = resume_trainer(prepare_resume(ws, res.run_id, dataset=demo), ws).run()
    monkeypatch.undo()
    assert again.state == "failed" and again.run_dir == res.run_dir
    assert sorted(p.name for p in res.run_dir.iterdir()) == files and fi.leftovers(res.run_dir) == []
    _check_consistent(res.run_dir)


def test_another_write_error_at_the_start_fails_the_run_in_its_folder(tmp_path, demo, monkeypatch):
    """Not a full disk (permission refused): the run fails in its folder as before, which stays readable."""
    fi.install(monkeypatch, fi.Fault("history.csv", nth=1, op="write", err=errno.EACCES))
    res = Trainer(ExperimentConfig(**BASE), dataset=demo, workspace=Workspace(tmp_path)).run()
    monkeypatch.undo()
    assert res.state == "failed" and res.run_dir is not None
    assert RunRecord.open(res.run_dir).state == "failed"


def test_atomic_write_removes_the_temporary_and_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "status.json"
    atomic.atomic_write_json(target, {"state": "running"})
    for op, err in (("write", errno.ENOSPC), ("fsync", errno.EIO), ("replace", errno.EACCES)):
        fi.install(monkeypatch, fi.Fault("status.json", op=op, err=err))
        with pytest.raises(atomic.ArtifactWriteError) as info:
            atomic.atomic_write_json(target, {"state": "succeeded"})
        monkeypatch.undo()
        assert str(info.value) == f"status.json: cannot write: {os.strerror(err)}"
        assert info.value.errno == err and info.value.path == target
        assert json.loads(target.read_text()) == {"state": "running"} and fi.leftovers(tmp_path) == []


def test_atomic_write_syncs_the_file_and_its_folder(tmp_path, monkeypatch):
    synced = []
    real = os.fsync

    def fsync(fd):
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    atomic.atomic_write_text(tmp_path / "history.csv", "EPOCH\n")
    monkeypatch.undo()
    assert len(synced) == 2 and synced[0].startswith(".history.csv.") and synced[1] == tmp_path.name


def test_plots_that_cannot_be_written_are_named_and_leave_nothing(tmp_path, monkeypatch, qapp):
    """plots/*.png are drawn after the run succeeded (the record is complete): a failed PNG is reported naming the
    file (the command line prints it as a warning), leaves no temporary, and the run stays as it was."""
    from dpd_desktop.gui.export import write_run_plots

    rows = [{"EPOCH": 0, "TRAIN_LOSS": 1.0, "VAL_LOSS": 1.0, "VAL_NMSE": -10.0, "TEST_NMSE": -10.0}]
    fi.install(monkeypatch, fi.Fault("learning_curves.png", op="write"))
    with pytest.raises(atomic.ArtifactWriteError,
                       match=r"^learning_curves\.png: cannot write: No space left on device$"):
        write_run_plots(tmp_path, rows, None, size=(300, 200), width=300)
    monkeypatch.undo()
    assert fi.leftovers(tmp_path) == [] and not (tmp_path / "plots" / "learning_curves.png").exists()
    paths = write_run_plots(tmp_path, rows, None, size=(300, 200), width=300)
    assert [p.name for p in paths] == ["learning_curves.png"] and paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_command_line_names_a_plot_it_cannot_write_and_the_run_stays_succeeded(tmp_path, monkeypatch, capsys):
    from dpd_desktop.cli.entry import main as cli_main

    fi.install(monkeypatch, fi.Fault("psd.png", op="write"))
    rc = cli_main(["--workspace", str(tmp_path), "train-pa", "--dataset", "demo", "--epochs", "1", "--hidden-size",
                   "4", "--frame-length", "40", "--stride", "40", "--device", "cpu", "--quiet"])
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert rc == 0 and "warning: plots not written: psd.png: cannot write: No space left on device" in err, err
    (run,) = (tmp_path / "runs").iterdir()
    assert fi.leftovers(run) == [] and _check_consistent(run).state == "succeeded"
    assert (run / "plots" / "learning_curves.png").is_file() and not (run / "plots" / "psd.png").exists()
