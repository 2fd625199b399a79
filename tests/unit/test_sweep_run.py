"""Sweeps run (sweep/runner.py, local.py, optuna_search.py, cli/sweep.py) on tiny demo runs: every trial an ordinary
run of the workspace (queue, index, ``runs``); a cancel mid-way keeps the finished trials and ``resume`` runs only
the others, each trial done exactly once; Optuna's pruner stops a poor trial early and its folder stays readable."""
from __future__ import annotations

import json
import threading

import optuna
import pytest
from optuna.trial import TrialState

from dpd_desktop.cli.entry import main as cli_main
from dpd_desktop.runs.index import RunIndex
from dpd_desktop.lab.queue import RunQueue
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.sweep.optuna_search import storage_url
from dpd_desktop.sweep.runner import SweepRun, create_sweep
from dpd_desktop.sweep.spec import parse_spec
from dpd_desktop.sweep.store import SweepStore

TINY = {"dataset": "demo", "hidden_size": 4, "frame_length": 50, "epochs": 1, "max_train_samples": 200,
        "device": "cpu", "threads": 1}


def _grid(ws, **space):
    return create_sweep(ws, parse_spec({"sweep": {"name": "g"}, "base": TINY, "space": space}, "test"))


def test_grid_sweep_cancelled_mid_way_then_resumed_runs_each_trial_once(tmp_path):
    ws = Workspace(tmp_path)
    info = _grid(ws, seed=[0, 1, 2, 3])
    stop = threading.Event()

    def stop_after_two(i):
        if sum(t["state"] == "succeeded" for t in i.trials) >= 2:
            stop.set()

    first = SweepRun(ws, info.id, stop=stop, on_change=stop_after_two).run()
    states = [t["state"] for t in first.trials]
    # the third trial may have been claimed before the stop (the trials run one at a time on the cpu lane): a tiny
    # one can finish before its cancel arrives; the fourth never starts
    n_done = states.count("succeeded")
    assert n_done in (2, 3), states
    assert first.state == "cancelled" and first.doc["message"].startswith(f"cancelled: {n_done} of 4 trials done")
    assert states[:n_done] == ["succeeded"] * n_done and set(states[n_done:]) <= {"cancelled"}
    done_before = {t["number"]: t["run_id"] for t in first.trials if t["state"] == "succeeded"}
    for t in first.trials:  # every trial that has a folder reads as its state says
        if t["run_dir"]:
            assert RunRecord.open(t["run_dir"]).state == t["state"]
    sweep_file = (first.folder / "sweep.json").read_text(encoding="utf-8")
    assert json.loads(sweep_file)["state"] == "cancelled"

    assert cli_main(["--workspace", str(tmp_path), "sweep", "resume", info.id]) == 0
    final = SweepStore(tmp_path).open(info.id)
    assert final.state == "succeeded" and [t["state"] for t in final.trials] == ["succeeded"] * 4
    kept = {t["number"]: t["run_id"] for t in final.trials if t["number"] in done_before}
    assert kept == done_before  # not run again (2 or 3 of them: the third may have finished before the stop)
    # exactly one succeeded run per trial in the workspace, tagged with its trial
    ok = [r for r in ws.list_runs() if r.state == "succeeded"]
    tags = sorted(r.config.extra["sweep"]["trial"] for r in ok)
    assert tags == [0, 1, 2, 3]
    assert {t["run_id"] for t in final.trials} == {r.run_id for r in ok}
    assert [t["params"]["seed"] for t in final.trials] == [r.config.seed for r in
                                                             sorted(ok, key=lambda r: r.config.extra["sweep"]["trial"])]
    # a trial cancelled mid-run keeps its folder (readable, cancelled) and names it among its attempts
    for t in final.trials:
        for old in t["attempts"]:
            assert RunRecord.open(ws.resolve(old)).state == "cancelled"
    # every trial went through the workspace's queue
    with RunQueue(ws.root) as q:
        entries = q.entries()
    assert sum(e.state == "succeeded" for e in entries) == 4
    assert all(e.config.name.startswith(f"sweep {info.id} trial ") for e in entries)
    # nothing left to resume
    assert cli_main(["--workspace", str(tmp_path), "sweep", "resume", info.id]) == 2


def test_trials_are_runs_of_the_index_and_of_the_runs_command(tmp_path, capsys):
    ws = Workspace(tmp_path)
    rc = cli_main(["--workspace", str(tmp_path), "sweep", "--grid", "hidden_size=4,5", "--name", "cli", "--base",
                   "--dataset", "demo", "--epochs", "1", "--frame-length", "50", "--max-train-samples", "200",
                   "--device", "cpu", "--threads", "1", "--quiet"])
    out = capsys.readouterr().out
    assert rc == 0, out
    info = SweepStore(tmp_path).list()[0]
    assert info.state == "succeeded" and [t["params"]["hidden_size"] for t in info.trials] == [4, 5]
    rows = {r.run_id: r for r in RunIndex.open(ws).runs()}
    for t in info.trials:
        row = rows[t["run_id"]]
        assert (row.state, row.hidden_size) == ("succeeded", t["params"]["hidden_size"])
        assert row.val_nmse is not None
        hist = RunRecord.open(t["run_dir"]).history()
        assert t["value"] == pytest.approx(min(float(h["VAL_NMSE"]) for h in hist), abs=0)
    assert cli_main(["--workspace", str(tmp_path), "runs"]) == 0
    listing = capsys.readouterr().out
    assert all(t["run_id"] in listing for t in info.trials)
    assert cli_main(["--workspace", str(tmp_path), "sweep", "list"]) == 0
    assert f"{info.id}" in capsys.readouterr().out
    assert cli_main(["--workspace", str(tmp_path), "sweep", "show", info.id]) == 0
    shown = capsys.readouterr().out
    assert all(t["run_id"] in shown for t in info.trials) and "best: trial" in shown
    assert cli_main(["--workspace", str(tmp_path), "sweep", "cancel", info.id]) == 2
    assert "has already ended (succeeded)" in capsys.readouterr().err
    assert cli_main(["--workspace", str(tmp_path), "sweep", "show", "nope"]) == 2


def test_optuna_sweep_prunes_a_poor_trial_early_and_keeps_its_folder(tmp_path):
    ws = Workspace(tmp_path)
    base = {**TINY, "epochs": 5, "max_train_samples": 1000, "lr_end": 1e-6}
    spec = parse_spec({"sweep": {"name": "o", "search": "optuna", "trials": 3, "seed": 0}, "base": base,
                       "space": {"lr": {"low": 1e-5, "high": 1e-2, "log": True}},
                       "optuna": {"pruner": "median", "n_startup_trials": 1, "n_warmup_steps": 0,
                                  "enqueue": [{"lr": 5e-3}, {"lr": 1e-5}]}}, "test")
    info = create_sweep(ws, spec)
    final = SweepRun(ws, info.id).run()
    assert final.state == "succeeded" and final.doc["message"] == "3 trials done, 1 pruned"
    t0, t1, t2 = final.trials
    assert (t0["params"], t1["params"]) == ({"lr": 5e-3}, {"lr": 1e-5})
    assert t0["state"] == "succeeded" and t2["state"] == "succeeded"
    assert t1["state"] == "cancelled" and t1["pruned"] and t1["message"] == "pruned by the sweep at epoch 0"
    rec = RunRecord.open(t1["run_dir"])  # the pruned trial's folder is an ordinary, readable cancelled run
    assert rec.state == "cancelled" and rec.message == "pruned by the sweep at epoch 0"
    assert 1 <= len(rec.history()) < 5  # it really stopped early (trained epochs 0 and perhaps 1 of 5)
    assert len(RunRecord.open(t0["run_dir"]).history()) == 5
    study = optuna.load_study(study_name=info.id, storage=storage_url(final.folder))
    assert (final.folder / "optuna.sqlite").is_file()
    assert [t.state for t in study.trials] == [TrialState.COMPLETE, TrialState.PRUNED, TrialState.COMPLETE]
    assert study.trials[0].value == pytest.approx(t0["value"], abs=0)
    assert study.trials[1].intermediate_values[0] == pytest.approx(
        float(rec.history()[0]["VAL_NMSE"]), abs=1e-6)


def test_dpd_sweep_trains_through_a_given_pa_run(tmp_path):
    ws = Workspace(tmp_path)
    pa = SweepRun(ws, _grid(ws, seed=[0]).id).run()
    pa_run = pa.trials[0]["run_id"]
    spec = parse_spec({"sweep": {"name": "dpd"}, "base": {**TINY, "step": "dpd", "pa_run": pa_run},
                       "space": {"gain_rule": ["peak", "rms"]}}, "test")
    assert spec.metric == "VAL_ACLR_AVG"  # a DPD's selection metric
    final = SweepRun(ws, create_sweep(ws, spec).id).run()
    assert final.state == "succeeded"
    for t in final.trials:
        rec = RunRecord.open(t["run_dir"])
        assert (rec.step, rec.config.gain_rule, rec.pa["run_id"]) == ("dpd", t["params"]["gain_rule"], pa_run)
        hist = rec.history()
        assert t["value"] == min(float(h["VAL_ACLR_AVG"]) for h in hist)
    # a DPD sweep without its PA run is refused before anything is created, naming the key
    with pytest.raises(ValueError, match=r"test: base\.pa_run: a DPD run needs the PA run"):
        parse_spec({"base": {**TINY, "step": "dpd"}, "space": {"seed": [0]}}, "test")


def test_sweep_cancel_from_another_process_and_an_interrupted_sweep(tmp_path, capsys):
    ws = Workspace(tmp_path)
    info = _grid(ws, seed=[0, 1, 2, 3, 4, 5])  # tiny trials (~1 s): six, so that the cancel lands before the last
    store = SweepStore(tmp_path)
    result = {}

    def cancel_when_running(i):
        if any(t["state"] == "running" for t in i.trials) and "sent" not in result:
            result["sent"] = cli_main(["--workspace", str(tmp_path), "sweep", "cancel", info.id])

    out = SweepRun(ws, info.id, on_change=cancel_when_running).run()
    assert result["sent"] == 0 and "stop after their current batch" in capsys.readouterr().out
    assert out.state == "cancelled" and not all(t["state"] == "succeeded" for t in out.trials)
    # a sweep recorded running by a process that is gone reads interrupted, and resumes
    store.update(info.id, lambda d: d.update(state="running", owner={"pid": 2**22 + 12345, "host":
                                                                     __import__("socket").gethostname(),
                                                                     "process_start": 1}))
    assert store.open(info.id).state == "interrupted"
    assert cli_main(["--workspace", str(tmp_path), "sweep", "resume", info.id]) == 0
    assert [t["state"] for t in store.open(info.id).trials] == ["succeeded"] * 6


def test_a_killed_trial_fails_the_sweep_alone_and_resume_reruns_it(tmp_path, monkeypatch):
    from child_faults import inject_child_faults  # tests/child_faults.py

    ws = Workspace(tmp_path)
    info = _grid(ws, seed=[0, 1])
    with monkeypatch.context() as m:
        inject_child_faults(m, "1:kill@epoch:0")  # queue entry 1 = trial 0: SIGKILL after its first epoch
        assert cli_main(["--workspace", str(tmp_path), "sweep", "resume", info.id]) == 1
    first = SweepStore(tmp_path).open(info.id)
    assert [t["state"] for t in first.trials] == ["interrupted", "succeeded"]  # the other trial ran on
    assert first.state == "failed" and first.doc["message"].startswith("1 of 2 trials done; the others did not")
    killed = first.trials[0]["run_id"]
    assert cli_main(["--workspace", str(tmp_path), "sweep", "resume", info.id]) == 0
    final = SweepStore(tmp_path).open(info.id)
    assert [t["state"] for t in final.trials] == ["succeeded"] * 2
    assert final.trials[0]["attempts"] == [killed] and final.trials[1]["run_id"] == first.trials[1]["run_id"]


def _dead_owner():
    import socket

    return {"pid": 2**22 + 12345, "host": socket.gethostname(), "process_start": 1}


def test_a_killed_sweep_reads_no_running_trial_and_resume_clears_what_it_left(tmp_path, capsys):
    from dpd_desktop.lab.supervisor import Supervisor
    from dpd_desktop.sweep.spec import trial_config

    ws = Workspace(tmp_path)
    info = _grid(ws, seed=[0, 1, 2])
    store = SweepStore(tmp_path)
    runs = tmp_path / "runs"
    reserved, old_reserved = runs / "pa-reserved-1", runs / "pa-reserved-0"
    reserved.mkdir(parents=True)
    old_reserved.mkdir()
    stranger = runs / "not-the-sweeps"  # empty, but not recorded in sweep.json: left alone
    stranger.mkdir()
    with RunQueue(ws.root) as q:  # what a killed pass left: trial 1's entry still queued
        stale = q.add(trial_config(info.spec, info.trials[1]["params"], info.id, 1)).id

    def killed(d):
        d.update(state="running", owner=_dead_owner())
        t0, t1, t2 = d["trials"]
        t0.update(state="running", run_id=reserved.name, run_dir=str(reserved), attempts=[old_reserved.name])
        t1.update(state="running", run_id=None, run_dir=None)
        t2.update(state="cancelled", run_id="gone-run", run_dir=str(runs / "gone-run"), value=-9.422)
    store.update(info.id, killed)
    read = store.open(info.id)
    assert read.state == "interrupted"
    assert [t["state"] for t in read.trials] == ["interrupted", "interrupted", "cancelled"]
    # a plain queue pass never takes the sweep's entry
    with RunQueue(ws.root) as q:
        assert Supervisor(ws, queue=q).run() == [] and q.get(stale).state == "queued"
    assert cli_main(["--workspace", str(tmp_path), "queue", "run"]) == 0
    assert "1 of a sweep: only the sweep runs them" in capsys.readouterr().err

    seen = []

    def watch(i):
        for t in i.trials:
            if t["state"] == "running":
                seen.append((t["number"], t["run_id"], t["value"], list(t["attempts"])))
    final = SweepRun(ws, info.id, on_change=watch).run()
    assert final.state == "succeeded" and [t["state"] for t in final.trials] == ["succeeded"] * 3
    firsts = {}
    for number, run_id, value, attempts in seen:
        firsts.setdefault(number, (run_id, value, attempts))
    assert set(firsts) == {0, 1, 2}
    for number, (run_id, value, attempts) in firsts.items():
        assert run_id not in (reserved.name, "gone-run") and value is None and attempts == []
    assert not reserved.exists() and not old_reserved.exists() and stranger.is_dir()
    assert all(t["attempts"] == [] for t in final.trials)
    with RunQueue(ws.root) as q:
        entries = q.entries()
    assert [e.state for e in entries if e.id == stale] == ["cancelled"]
    assert sorted(e.state for e in entries) == ["cancelled", "succeeded", "succeeded", "succeeded"]

    # killed again with trial 0 recorded running: it reads its run folder's real (final) state
    def again(d):
        d.update(state="running", owner=_dead_owner())
        d["trials"][0]["state"] = "running"
    store.update(info.id, again)
    assert [t["state"] for t in store.open(info.id).trials] == ["succeeded"] * 3
    assert json.loads((info.folder / "sweep.json").read_text())["trials"][0]["state"] == "running"  # read, not written


class _FailingExecutor:
    def run(self, trials, on_done, stop, on_epoch=None, on_start=None, on_many=None):
        from dpd_desktop.sweep.executor import TrialEnd

        for t in trials:
            on_done(TrialEnd(t, "failed", None, "device: no such device"))


def test_a_sweep_with_no_succeeded_trial_fails_and_a_missing_device_is_refused(tmp_path, capsys):
    ws = Workspace(tmp_path)
    info = _grid(ws, seed=[0, 1])
    final = SweepRun(ws, info.id, executor=_FailingExecutor()).run()
    assert final.state == "failed" and final.doc["message"] == "no trial succeeded: 2 trials done, 2 failed"
    assert json.loads((final.folder / "sweep.json").read_text())["state"] == "failed"

    spec = tmp_path / "spec.toml"
    spec.write_text('[sweep]\nname = "gpu"\ndevices = ["cuda:99"]\n[base]\ndataset = "demo"\nepochs = 1\n'
                    '[space]\nseed = [0]\n', encoding="utf-8")
    before = sorted(p.name for p in (tmp_path / "sweeps").iterdir())
    assert cli_main(["--workspace", str(tmp_path), "sweep", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "sweep.json" not in err and "devices: device: " in err and ("cuda:99" in err or "CUDA" in err)
    assert sorted(p.name for p in (tmp_path / "sweeps").iterdir()) == before  # no sweep was created
    with RunQueue(ws.root) as q:
        assert q.entries() == []
