"""``dpd-desktop sweep --ray`` (cli/sweep.py on sweep/ray_executor.py), CPU only, on real local Ray clusters with
token authentication: a ``--ray local`` grid sweep's trials are bitwise equal (history without its wall-clock column,
best.pt tensors) to the same sweep run on this machine's queue; an Optuna sweep on Ray prunes its poor trial through
the channel's per-trial stop; sweep.json records where a sweep ran and a resume reads it; the packaged app refuses.
The paths without a cluster (the channel, the helper's executor with a fake client) are checked here too."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from dpd_desktop.cli.entry import main as cli_main
from dpd_desktop.config import ExperimentConfig
from dpd_desktop.runs import artifacts
from dpd_desktop.runs.index import RunIndex
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.cli.sweep import ray_address
from dpd_desktop.sweep.executor import Trial, TrialEnd
from dpd_desktop.sweep.ray_executor import IN_BUNDLE, RemoteEpoch
from dpd_desktop.sweep.ray_helper import HelperExecutor, RayHelperClient, RayHelperError
from dpd_desktop.sweep.ray_security import LocalCluster, RaySecurityError
from dpd_desktop.sweep.ray_task import SWEEP_STOPPED, TrialChannel
from dpd_desktop.sweep.store import SweepStore

ROOT = Path(__file__).resolve().parents[2]
BASE = ["--dataset", "demo", "--hidden-size", "4", "--frame-length", "50", "--epochs", "2", "--max-train-samples",
        "2000", "--device", "cpu", "--threads", "1"]


def cli(root: Path, *argv: str, env=None) -> subprocess.CompletedProcess:
    """``python -m dpd_desktop --workspace ROOT ARGV`` in a child process (Ray is never started in pytest's)."""
    full = {**os.environ, **(env or {}), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "dpd_desktop", "--workspace", str(root), *argv], cwd=ROOT,
                          env=full, capture_output=True, text=True, timeout=300)


def only_sweep(root: Path):
    (info,) = SweepStore(root).list()
    return info


def history_without_time(run_dir) -> list[dict]:
    return [{k: v for k, v in row.items() if k != "TIME:"}
            for row in artifacts.read_history_csv(Path(run_dir) / "history.csv")]


def test_grid_sweep_on_ray_local_is_bitwise_equal_to_the_local_sweep(tmp_path):
    remote = cli(tmp_path / "ray", "sweep", "--grid", "seed=0,1", "--ray", "local", "--ray-num-cpus", "2",
                 "--base", *BASE)
    assert remote.returncode == 0, remote.stderr[-3000:]
    assert cli_main(["--workspace", str(tmp_path / "here"), "sweep", "--grid", "seed=0,1", "--base", *BASE]) == 0
    on_ray, here = only_sweep(tmp_path / "ray"), only_sweep(tmp_path / "here")
    assert on_ray.doc["ray"] == {"address": "local"} and here.doc["ray"] is None
    assert (on_ray.state, on_ray.doc["message"]) == ("succeeded", "2 trials done")
    assert [t["params"] for t in on_ray.trials] == [t["params"] for t in here.trials] == [{"seed": 0}, {"seed": 1}]
    for r, h in zip(on_ray.trials, here.trials):
        assert r["state"] == h["state"] == "succeeded"
        assert r["value"] == h["value"] and r["value"] is not None
        assert history_without_time(r["run_dir"]) == history_without_time(h["run_dir"])
        assert len(history_without_time(r["run_dir"])) == 2
        rs, _ = artifacts.load_checkpoint(Path(r["run_dir"]) / "best.pt")
        hs, _ = artifacts.load_checkpoint(Path(h["run_dir"]) / "best.pt")
        assert list(rs) == list(hs)
        for k, v in hs.items():
            assert rs[k].dtype == v.dtype and torch.equal(rs[k], v), k
        assert RunRecord.open(r["run_dir"]).config.seed == r["params"]["seed"]
    seeds = [artifacts.load_checkpoint(Path(t["run_dir"]) / "best.pt")[0] for t in on_ray.trials]
    assert any(not torch.equal(seeds[0][k], seeds[1][k]) for k in seeds[0])  # the comparison can tell runs apart
    with RunIndex.open(Workspace(tmp_path / "ray"), sync=False) as idx:  # ordinary runs of the workspace
        assert sorted(r.run_id for r in idx.runs()) == sorted(t["run_id"] for t in on_ray.trials)
    assert "trial 1: succeeded [seed=1]" in remote.stdout


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(num_cpus=2) as c:
        yield c


def test_optuna_sweep_on_ray_prunes_its_poor_trial(cluster, tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text('[sweep]\nname = "o"\nsearch = "optuna"\ntrials = 2\nseed = 0\n'
                    '[base]\ndataset = "demo"\nhidden_size = 4\nframe_length = 50\nepochs = 20\n'
                    'max_train_samples = 1000\ndevice = "cpu"\nthreads = 1\nlr_end = 1e-6\n'
                    '[space]\nlr = {low = 1e-5, high = 1e-2, log = true}\n'
                    '[optuna]\npruner = "median"\nn_startup_trials = 1\nn_warmup_steps = 0\n'
                    'enqueue = [{lr = 5e-3}, {lr = 1e-5}]\n')
    out = cli(tmp_path / "ws", "sweep", str(spec), "--ray", cluster.address, env=cluster.env)
    assert out.returncode == 0, out.stderr[-3000:]
    info = only_sweep(tmp_path / "ws")
    assert (info.state, info.doc["message"]) == ("succeeded", "2 trials done, 1 pruned")
    assert info.doc["ray"] == {"address": cluster.address}
    t0, t1 = info.trials
    assert (t0["params"], t1["params"]) == ({"lr": 5e-3}, {"lr": 1e-5})
    assert t0["state"] == "succeeded" and len(RunRecord.open(t0["run_dir"]).history()) == 20
    assert t1["state"] == "cancelled" and t1["pruned"] and t1["message"].startswith("pruned by the sweep at epoch")
    rec = RunRecord.open(t1["run_dir"])  # the pruned trial came back as an ordinary cancelled run
    assert rec.state == "cancelled" and rec.message == t1["message"]
    assert 1 <= len(rec.history()) < 20
    assert "trial 1: pruned [lr=1e-05]" in out.stdout


# ---------------------------------------------------------------------------------------------------- no cluster
def test_the_channel_stops_one_trial_with_its_reason_and_all_on_a_sweep_stop():
    ch = TrialChannel()
    assert ch.stop_reason(0) == ch.stop_reason(1) == ""
    ch.stop_trial(1, "pruned by the sweep at epoch 3")
    ch.stop_trial(1, "a later reason is not taken")
    assert (ch.stop_reason(0), ch.stop_reason(1)) == ("", "pruned by the sweep at epoch 3")
    ch.stop()
    assert (ch.stop_reason(0), ch.stop_reason(1)) == (SWEEP_STOPPED, "pruned by the sweep at epoch 3")


def test_resume_reads_the_recorded_address_unless_given():
    recorded = argparse.Namespace(doc={"ray": {"address": "10.0.0.5:6379"}})
    none = argparse.Namespace(doc={"ray": None})
    assert ray_address(argparse.Namespace(target="resume", ray=None), recorded) == "10.0.0.5:6379"
    assert ray_address(argparse.Namespace(target="resume", ray="local"), recorded) == "local"
    assert ray_address(argparse.Namespace(target="resume", ray="none"), recorded) is None
    assert ray_address(argparse.Namespace(target="resume", ray=None), none) is None
    assert ray_address(argparse.Namespace(target=None, ray=None), recorded) is None  # a new sweep: only --ray


def test_the_packaged_app_refuses_a_ray_sweep_clearly(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    rc = cli_main(["--workspace", str(tmp_path), "sweep", "--grid", "seed=0", "--ray", "local", "--base", *BASE])
    assert rc == 2 and IN_BUNDLE in capsys.readouterr().err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())  # nothing trained
    with pytest.raises(RuntimeError, match="need a Python install with dpd-desktop"):
        RayHelperClient.start("local", [], tmp_path)


class FakeClient:
    """RayHelperClient's surface, replaying ``events`` (dicts, and ('done', n, state, message) for a TrialEnd)."""

    def __init__(self, trials, events, error=None, refused=False, rc=0):
        self.trials = {t.number: t for t in trials}
        self.events, self.error, self.refused, self.rc = events, error, refused, rc
        self.sent: list = []

    def __iter__(self):
        for ev in self.events:
            if isinstance(ev, tuple):
                _, n, state, msg = ev
                yield TrialEnd(self.trials[n], state, f"/ws/runs/r{n}" if state != "failed" else None, msg)
            else:
                yield ev

    def stop(self):
        self.sent.append(("stop",))

    def stop_trial(self, number, reason):
        self.sent.append(("stop_trial", number, reason))

    def close(self):
        return self.rc


def _trials(n):
    return [Trial("s", i, ExperimentConfig(seed=i)) for i in range(n)]


def test_helper_executor_prunes_through_the_helper_and_names_the_runs(tmp_path):
    trials = _trials(2)
    row = {"VAL_NMSE": -3.5, "TRAIN_LOSS": 0.25}
    events = [{"event": "submitted", "trial": 0, "run_id": "r0"}, {"event": "started", "trial": 0, "run_id": "r0"},
              {"event": "started", "trial": 1, "run_id": "r1"},
              {"event": "epoch", "trial": 0, "epoch": 0, "epochs": 4, "is_best": True, "row": row},
              {"event": "epoch", "trial": 1, "epoch": 0, "epochs": 4, "is_best": True, "row": row},
              {"event": "epoch", "trial": 1, "epoch": 1, "epochs": 4, "is_best": False, "row": row},
              ("done", 0, "succeeded", ""), ("done", 1, "cancelled", "the sweep was stopped")]
    fake = {}

    def start(address, ts, ws, **kw):
        fake["kw"] = kw
        fake["client"] = FakeClient(ts, events)
        return fake["client"]

    seen, starts, ends, epochs = [], [], [], []

    def on_epoch(trial, ep):
        epochs.append((trial.number, ep))
        return "pruned by the sweep at epoch 0" if trial.number == 1 else None

    ex = HelperExecutor("local", Workspace(tmp_path), num_cpus=2, on_event=seen.append, start=start)
    ex.run(trials, ends.append, threading.Event(), on_epoch=on_epoch,
           on_start=lambda t, d: starts.append((t.number, d)))
    assert fake["kw"]["num_cpus"] == 2 and not fake["kw"]["allow_unauthenticated"]
    assert starts == [(0, str(tmp_path / "runs" / "r0")), (1, str(tmp_path / "runs" / "r1"))]
    # trial 1's second epoch is not asked about again: it was already told to stop
    assert epochs == [(0, RemoteEpoch(0, 4, row, True)), (1, RemoteEpoch(0, 4, row, True))]
    assert fake["client"].sent == [("stop_trial", 1, "pruned by the sweep at epoch 0")]
    assert [(e.trial.number, e.state, e.message) for e in ends] == [
        (0, "succeeded", ""), (1, "cancelled", "pruned by the sweep at epoch 0")]
    assert [e["event"] for e in seen] == ["submitted", "started", "started", "epoch", "epoch", "epoch"]


def test_helper_executor_raises_the_refusal_and_fails_what_did_not_end(tmp_path):
    trials = _trials(2)
    refused = FakeClient(trials, [{"event": "error", "kind": "refused", "message": "refused: arbitrary code"}],
                         error="refused: arbitrary code", refused=True, rc=2)
    ends: list = []
    with pytest.raises(RaySecurityError, match="arbitrary code"):
        HelperExecutor("203.0.113.7:6379", Workspace(tmp_path), start=lambda *a, **k: refused).run(
            trials, ends.append, threading.Event())
    assert ends == []
    lost = FakeClient(trials, [("done", 0, "succeeded", "")], error="ConnectionError: lost", rc=1)
    with pytest.raises(RayHelperError, match="ConnectionError: lost"):
        HelperExecutor("local", Workspace(tmp_path), start=lambda *a, **k: lost).run(
            trials, ends.append, threading.Event())
    assert [(e.trial.number, e.state) for e in ends] == [(0, "succeeded"), (1, "failed")]
    assert "ConnectionError: lost" in ends[1].message


def _no_token(monkeypatch, tmp_path):
    for k, v in {"RAY_AUTH_MODE": "disabled", "RAY_AUTH_TOKEN": "", "RAY_AUTH_TOKEN_PATH": ""}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.ray/auth_token


def test_a_refused_cluster_exits_2_before_anything_is_created(tmp_path, monkeypatch, capsys):
    _no_token(monkeypatch, tmp_path)
    for remote in ("203.0.113.7:6379", "ray://203.0.113.7:10001"):  # TEST-NET-3 (RFC 5737): no connection made
        rc = cli_main(["--workspace", str(tmp_path / "ws"), "sweep", "--grid", "seed=0,1", "--ray", remote,
                       "--base", *BASE])
        err = capsys.readouterr().err
        assert rc == 2 and remote in err and "--ray-allow-unauthenticated" in err and "arbitrary code" in err
        assert "Traceback" not in err
        assert not (tmp_path / "ws").exists()  # nothing created: no sweep folder, no run


@pytest.mark.parametrize("address, words", [
    ("bogus", "bogus: not a Ray address (host:port, ray://host:port or local)"),
    ("203.0.113.7:notaport", "203.0.113.7:notaport: not a Ray address (host:port, ray://host:port or local): "
                             "the port is not a number"),
    ("ray://203.0.113.7", "not a Ray address"),
    ("203.0.113.7:70000", "the port 70000 is not from 1 to 65535"),
])
def test_a_bad_ray_address_is_one_line_exit_2_and_nothing_created(tmp_path, monkeypatch, capsys, address, words):
    _no_token(monkeypatch, tmp_path)
    rc = cli_main(["--workspace", str(tmp_path / "ws"), "sweep", "--grid", "seed=0,1", "--ray", address,
                   "--base", *BASE])
    err = capsys.readouterr().err
    assert rc == 2 and words in err and "token" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "ws").exists()


def test_a_recorded_remote_address_is_refused_on_resume_and_the_sweep_left_as_it_was(tmp_path, monkeypatch, capsys):
    from dpd_desktop.sweep.runner import create_sweep
    from dpd_desktop.sweep.spec import parse_spec

    _no_token(monkeypatch, tmp_path)
    ws = Workspace(tmp_path / "ws")
    ws.check(create=True)
    info = create_sweep(ws, parse_spec({"base": {"dataset": "demo", "epochs": 1}, "space": {"seed": [0, 1]}}, "t"))
    store = SweepStore(ws.root)
    store.set_ray(info.id, "203.0.113.7:6379")
    before = (info.folder / "sweep.json").read_bytes()
    rc = cli_main(["--workspace", str(ws.root), "sweep", "resume", info.id])
    err = capsys.readouterr().err
    assert rc == 2 and "refusing to connect to the Ray cluster at 203.0.113.7:6379" in err
    assert (info.folder / "sweep.json").read_bytes() == before  # states untouched: resume runs both later
    assert not (ws.root / "runs").exists() or not any((ws.root / "runs").iterdir())
