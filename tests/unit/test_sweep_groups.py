"""Sweeps train their trials in groups (sweep/groups.py, runner.py, local.py; lab/queue.py groups, supervisor.py,
group_child.py) on tiny demo runs on the CPU: a group is ONE child process whose members each end on their own —
bitwise equal to the same trial trained alone, a cancel or prune stopping one member only, a crash ending every
unfinished member with a readable folder; old queue files still open; bad group sizes name the option or the field."""
from __future__ import annotations

import json
import sqlite3
import threading
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from dpd_desktop.cli.entry import main as cli_main
from dpd_desktop.config import ExperimentConfig
from dpd_desktop.runs import artifacts
from dpd_desktop.lab.queue import QUEUE_FILE, RunQueue
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.lab.faults import parse_faults
from dpd_desktop.lab.supervisor import EntryStarted, Supervisor
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.sweep.executor import Trial
from dpd_desktop.sweep.local import LocalExecutor
from dpd_desktop.sweep.runner import SweepRun, create_sweep
from dpd_desktop.sweep.spec import parse_spec
from dpd_desktop.sweep.store import SweepStore

import same_run  # tests/same_run.py

TINY_ARGS = ["--dataset", "demo", "--hidden-size", "4", "--frame-length", "50", "--epochs", "2",
             "--max-train-samples", "200", "--device", "cpu", "--threads", "1", "--quiet"]
TINY = ExperimentConfig(step="pa", dataset="demo", hidden_size=4, frame_length=50, epochs=2, max_train_samples=200,
                        device="cpu", threads=1)


@pytest.fixture
def launches(monkeypatch):
    """The entry ids of each child process the supervisors start (one list per child)."""
    seen: list[list[int]] = []
    original = Supervisor._launch

    def counting(self, entries):
        seen.append([e.id for e in entries])
        return original(self, entries)

    monkeypatch.setattr(Supervisor, "_launch", counting)
    return seen


def _sweep_cli(root, group_size):
    rc = cli_main(["--workspace", str(root), "sweep", "--grid", "seed=0,1,2,3", "--group-size", group_size,
                   "--name", f"g{group_size}", "--base", *TINY_ARGS])
    assert rc == 0
    return SweepStore(root).list()[-1]


def test_groups_of_two_are_two_children_and_each_trial_is_bitwise_its_lone_twin(tmp_path, launches, capsys):
    grouped = _sweep_cli(tmp_path / "a", "2")
    assert launches == [[1, 2], [3, 4]]  # 2 groups of 2 queue entries, one child each
    assert grouped.spec.group_size == 2 and [t["group"] for t in grouped.trials] == [0, 0, 1, 1]
    with RunQueue(tmp_path / "a") as q:
        entries = q.entries()
    assert [e.group for e in entries] == [f"{grouped.id}#0"] * 2 + [f"{grouped.id}#1"] * 2
    assert [e.state for e in entries] == ["succeeded"] * 4
    launches.clear()
    alone = _sweep_cli(tmp_path / "b", "1")
    assert launches == [[1], [2], [3], [4]] and [t["group"] for t in alone.trials] == [None] * 4
    with RunQueue(tmp_path / "b") as q:
        assert [e.group for e in q.entries()] == [None] * 4
    for g, a in zip(grouped.trials, alone.trials):
        assert g["state"] == a["state"] == "succeeded" and g["params"] == a["params"]
        same_run.assert_twins(g["run_dir"], a["run_dir"])
        assert g["value"] == a["value"]
    # the seeds made different models (a comparison that cannot tell runs apart would pass anyway)
    s0 = artifacts.load_checkpoint(Path(grouped.trials[0]["run_dir"]) / "best.pt")[0]
    s1 = artifacts.load_checkpoint(Path(grouped.trials[1]["run_dir"]) / "best.pt")[0]
    assert any(not torch.equal(s0[k], s1[k]) for k in s0)
    # sweep show prints each trial's group ("-": alone)
    capsys.readouterr()
    assert cli_main(["--workspace", str(tmp_path / "a"), "sweep", "show", grouped.id]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "group size 2 (groups of up to 2);" in lines[1] and lines[2].split()[:3] == ["#", "STATE", "GROUP"]
    assert [ln.split()[:3] for ln in lines[3:7]] == [["0", "succeeded", "0"], ["1", "succeeded", "0"],
                                                    ["2", "succeeded", "1"], ["3", "succeeded", "1"]]
    assert cli_main(["--workspace", str(tmp_path / "b"), "sweep", "show", alone.id]) == 0
    assert [ln.split()[2] for ln in capsys.readouterr().out.splitlines()[3:7]] == ["-"] * 4


def test_pruning_one_member_cancels_it_alone(tmp_path, launches):
    ws = Workspace(tmp_path)
    cfg = replace(TINY, epochs=4, max_train_samples=600)
    trials = [Trial("s", i, replace(cfg, seed=i, extra={"sweep": {"id": "s", "trial": i}}), group=0)
              for i in range(2)]
    ends = {}

    def on_epoch(trial, ev):
        return "pruned by the test at epoch 0" if trial.number == 0 and ev.epoch == 0 else None

    LocalExecutor(ws).run(trials, lambda e: ends.setdefault(e.trial.number, e), threading.Event(),
                          on_epoch=on_epoch)
    assert launches == [[1, 2]]
    assert (ends[0].state, ends[0].message) == ("cancelled", "pruned by the test at epoch 0")
    rec = RunRecord.open(ends[0].run_dir)
    assert rec.state == "cancelled" and rec.message == "pruned by the test at epoch 0"
    assert 1 <= len(rec.history()) < 4  # stopped after its current batch, not at the end
    assert ends[1].state == "succeeded" and len(RunRecord.open(ends[1].run_dir).history()) == 4


class _StopAtTrial(SweepRun):
    """Stops the sweep at the first epoch end of trial ``at``."""

    at = 2

    def on_epoch(self, trial, ev):
        if trial.number == self.at:
            self.stop.set()
        return None


def test_a_grouped_sweep_cancelled_mid_way_keeps_its_finished_trials_and_resumes_in_groups(tmp_path, launches):
    ws = Workspace(tmp_path)
    base = {"dataset": "demo", "frame_length": 50, "epochs": 3, "max_train_samples": 600, "device": "cpu",
            "threads": 1}
    spec = parse_spec({"sweep": {"name": "c", "group_size": 2}, "base": base,
                       "space": {"hidden_size": [4, 5], "seed": [0, 1]}}, "test")
    info = create_sweep(ws, spec)
    first = _StopAtTrial(ws, info.id).run()
    assert launches == [[1, 2], [3, 4]]  # two shapes: two groups
    states = [t["state"] for t in first.trials]
    assert first.state == "cancelled" and states[:2] == ["succeeded", "succeeded"], states
    assert set(states[2:]) == {"cancelled"}
    for t in first.trials:  # every trial's folder reads as sweep.json says
        assert RunRecord.open(t["run_dir"]).state == t["state"]
    assert [t["group"] for t in first.trials] == [0, 0, 1, 1]
    done = {t["number"]: t["run_id"] for t in first.trials[:2]}
    cancelled = {t["number"]: t["run_id"] for t in first.trials[2:]}
    launches.clear()
    assert cli_main(["--workspace", str(tmp_path), "sweep", "resume", info.id]) == 0
    assert launches == [[5, 6]]  # only the two trials left, again one group
    final = SweepStore(tmp_path).open(info.id)
    assert [t["state"] for t in final.trials] == ["succeeded"] * 4
    assert {t["number"]: t["run_id"] for t in final.trials[:2]} == done
    assert [t["group"] for t in final.trials] == [0, 0, 1, 1]  # planned again (the pass cleared their group)
    for t in final.trials[2:]:
        assert t["attempts"] == [cancelled[t["number"]]] and t["run_id"] != cancelled[t["number"]]
        assert RunRecord.open(ws.resolve(t["attempts"][0])).state == "cancelled"


def test_a_killed_group_child_ends_its_unfinished_entries_and_the_next_group_runs(tmp_path, launches):
    ws = Workspace(tmp_path)
    kill = parse_faults("1:kill@epoch:0")  # entry 1, the first member of group A: SIGKILL
    seen = []
    with RunQueue(ws.root) as q:
        ids = [q.add(replace(TINY, seed=i), group="A" if i < 2 else "B").id for i in range(4)]
        ends = Supervisor(ws, queue=q, observers=[lambda e, ev: seen.append((e.id, ev))], faults=kill).run()
        entries = {e.id: e for e in q.entries()}
    assert launches == [[1, 2], [3, 4]]
    pids = {i: ev.pid for i, ev in seen if isinstance(ev, EntryStarted)}
    assert pids[1] == pids[2] != pids[3] == pids[4]
    by_id = {e.entry_id: e for e in ends}
    words = ("the group's process (entries 1, 2) ended by signal SIGKILL (a kill, or the system's out-of-memory "
             "killer)")
    for i in ids[:2]:
        assert (by_id[i].state, by_id[i].message) == ("interrupted", words)
        assert (entries[i].state, entries[i].message) == ("interrupted", words)
        if entries[i].run_id:  # a member that had made its folder: readable, and it says the same
            rec = RunRecord.open(ws.resolve(entries[i].run_id))
            assert (rec.state, rec.message) == ("interrupted", words)
    assert entries[1].run_id and len(RunRecord.open(ws.resolve(entries[1].run_id)).history()) == 1
    assert [by_id[i].state for i in ids[2:]] == ["succeeded", "succeeded"]  # the next group ran on


def test_groups_on_two_lanes_run_at_the_same_time_and_queue_list_names_them(tmp_path, launches, capsys):
    ws = Workspace(tmp_path)
    seen = []
    with RunQueue(ws.root) as q:
        for i in range(2):  # the cpu lane, and "auto", a lane of its own (runs on the CPU here)
            q.add(replace(TINY, seed=i), group="s#0")
            q.add(replace(TINY, seed=i, device="auto"), group="s#1")
        ends = Supervisor(ws, queue=q, observers=[lambda e, ev: seen.append((type(ev).__name__, e.id))]).run()
    assert launches == [[1, 3], [2, 4]]
    kinds = [k for k, _ in seen if k in ("EntryStarted", "EntryEnded")]
    assert kinds[:4] == ["EntryStarted"] * 4  # both groups' children started before either ended
    assert sorted(e.state for e in ends) == ["succeeded"] * 4
    assert cli_main(["--workspace", str(tmp_path), "queue", "list"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [r.split("·")[1].split()[:4] for r in rows] == [["sweep", "s", "group", "0"], ["sweep", "s", "group", "1"],
                                                          ["sweep", "s", "group", "0"], ["sweep", "s", "group", "1"]]


def test_a_queue_cancel_of_one_running_member_stops_it_alone(tmp_path, launches):
    ws = Workspace(tmp_path)
    cfg = replace(TINY, epochs=4, max_train_samples=600)
    with RunQueue(ws.root) as q:
        a, b = (q.add(replace(cfg, seed=i), group="G").id for i in range(2))

        seen = {}

        def cancel_a(entry, ev):
            if entry.id == a and type(ev).__name__ == "EpochEnded" and ev.epoch == 0:
                q.cancel(a)  # `dpd-desktop queue cancel A` while it runs: its flag, then "A cancel" to the child
            if entry.id == a and type(ev).__name__ == "EntryEnded":  # A's entry is final while B still trains
                seen.update(a=q.get(a).state, b=q.get(b).state, running=sup.running_entries(),
                            b_had_finished="b_finished" in seen)
            if entry.id == b and type(ev).__name__ == "RunFinished":
                seen["b_finished"] = True

        sup = Supervisor(ws, queue=q, observers=[cancel_a])
        ends = {e.entry_id: e for e in sup.run()}
        entries = {e.id: e for e in q.entries()}
    assert launches == [[a, b]]
    assert seen == {"a": "cancelled", "b": "running", "running": [b], "b_had_finished": False, "b_finished": True}
    assert ends[a].state == "cancelled" and ends[a].message.startswith("cancelled after ")
    assert 1 <= len(RunRecord.open(ws.resolve(entries[a].run_id)).history()) < 4
    assert ends[b].state == "succeeded" and len(RunRecord.open(ws.resolve(entries[b].run_id)).history()) == 4


def _queue_v1(path: Path) -> None:
    """A queue file of schema version 1 (before groups), with one entry."""
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE entries (id INTEGER PRIMARY KEY AUTOINCREMENT, position INTEGER NOT NULL, step TEXT NOT NULL,
            config TEXT NOT NULL, device TEXT NOT NULL, after INTEGER, state TEXT NOT NULL, run_id TEXT,
            run_dir TEXT, message TEXT NOT NULL DEFAULT '', owner TEXT, cancel_requested INTEGER NOT NULL DEFAULT 0,
            created TEXT NOT NULL, updated TEXT NOT NULL);
        INSERT INTO meta VALUES ('schema_version', '1');""")
    db.execute("INSERT INTO entries (position, step, config, device, state, message, created, updated) "
               "VALUES (1, 'pa', ?, 'cpu', 'queued', '', 'then', 'then')", (json.dumps(TINY.to_dict()),))
    db.commit()
    db.close()


def test_a_queue_file_of_schema_1_opens_and_gains_the_group_column(tmp_path):
    path = tmp_path / QUEUE_FILE
    _queue_v1(path)
    with RunQueue(tmp_path) as q:
        (old,) = q.entries()
        assert (old.id, old.state, old.group, old.config) == (1, "queued", None, TINY)
        new = q.add(TINY, group="g")
        assert new.group == "g"
        assert q.claim_next().id == 1 and q.claim_group(q.get(1)) == [q.get(1)]  # alone: just itself
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("2",)
    assert [r[0] for r in db.execute("SELECT group_id FROM entries ORDER BY id")] == [None, "g"]
    db.close()
    # a version-1 file that lacks one of its columns is refused, and left as it was
    broken = tmp_path / "broken"
    broken.mkdir()
    _queue_v1(broken / QUEUE_FILE)
    db = sqlite3.connect(broken / QUEUE_FILE)
    db.execute("ALTER TABLE entries DROP COLUMN owner")
    db.commit()
    db.close()
    before = (broken / QUEUE_FILE).read_bytes()
    with pytest.raises(ValueError, match=r"table entries lacks the columns \['owner'\]"):
        RunQueue(broken)
    assert (broken / QUEUE_FILE).read_bytes() == before


def test_claim_group_takes_the_groups_queued_entries_on_its_lane_only(tmp_path):
    with RunQueue(tmp_path) as q:
        a1 = q.add(TINY, group="A")
        b1 = q.add(replace(TINY, device="cuda:1"), group="A")  # another lane: not this group's child
        lone = q.add(TINY)
        a2 = q.add(TINY, group="A")
        a3 = q.add(TINY, group="A")
        q.cancel(a3.id)
        first = q.claim_next(lanes=["cpu"])
        assert first.id == a1.id
        assert [e.id for e in q.claim_group(first)] == [a1.id, a2.id]
        assert [q.get(i).state for i in (a1.id, b1.id, lone.id, a2.id, a3.id)] == [
            "running", "queued", "queued", "running", "cancelled"]
        with pytest.raises(ValueError, match="cannot train in a group"):
            q.add(replace(TINY, step="dpd", pa_run=None), after=a1.id, group="A")


@pytest.mark.parametrize("value", ["0", "abc", "-2"])
def test_cli_refuses_a_bad_group_size_naming_the_option(tmp_path, capsys, value):
    rc = cli_main(["--workspace", str(tmp_path / "ws"), "sweep", "--grid", "seed=0,1", "--group-size", value,
                   "--base", *TINY_ARGS])
    assert rc == 2
    assert capsys.readouterr().err == (f"error: command line: --group-size: expected a positive integer or \"auto\", "
                                       f"got {value!r}\n")
    assert not (tmp_path / "ws").exists()


def test_toml_group_size_minus_one_names_the_file_and_the_field(tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_text('[sweep]\ngroup_size = -1\n[base]\ndataset = "demo"\nepochs = 1\n[space]\nseed = [0]\n',
                    encoding="utf-8")
    assert cli_main(["--workspace", str(tmp_path / "ws"), "sweep", str(spec)]) == 2
    assert capsys.readouterr().err == (f"error: {spec}: sweep.group_size: expected a positive integer or \"auto\", "
                                       "got -1\n")
    assert not (tmp_path / "ws").exists()
    for ok, want in (("\"auto\"", "auto"), ("3", 3)):
        spec.write_text(f'[sweep]\ngroup_size = {ok}\n[base]\ndataset = "demo"\n[space]\nseed = [0]\n',
                        encoding="utf-8")
        from dpd_desktop.sweep.spec import SweepSpec, load_spec

        s = load_spec(spec)
        assert s.group_size == want and SweepSpec.from_dict(s.to_dict()).group_size == want
    # an old sweep.json without the field reads auto; a resume cannot change what sweep.json recorded
    assert SweepSpec.from_dict({k: v for k, v in s.to_dict().items() if k != "group_size"}).group_size == "auto"
    assert cli_main(["--workspace", str(tmp_path / "ws"), "sweep", "resume", "x", "--group-size", "2"]) == 2
    assert "--group-size: sweep resume keeps the group size recorded in sweep.json" in capsys.readouterr().err


def test_plan_with_auto_size_is_one_per_group_on_the_cpu_and_groups_keys_apart():
    from dpd_desktop.sweep.groups import plan_trial_groups

    cfgs = [replace(TINY, seed=0), replace(TINY, seed=1), replace(TINY, hidden_size=5), replace(TINY, seed=2)]
    assert plan_trial_groups(cfgs, "auto") == [[0], [1], [2], [3]]  # the CPU: default_group_size 1
    assert plan_trial_groups(cfgs, 2) == [[0, 1], [2], [3]]
    assert plan_trial_groups(cfgs, 8) == [[0, 1, 3], [2]]
    cuda = [replace(c, device="cuda:0", kernel=k) for c in cfgs[:2] for k in ("fast", "reference")]
    # fast 8 and reference 4 on CUDA (training/group.py DEFAULT_SIZE); the two kernels never share a group
    assert plan_trial_groups(cuda, "auto") == [[0, 2], [1, 3]]


def test_optuna_asks_a_group_at_a_time_and_prunes_one_member_alone(tmp_path, launches):
    ws = Workspace(tmp_path)
    base = {"dataset": "demo", "hidden_size": 4, "frame_length": 50, "epochs": 3, "max_train_samples": 1000,
            "device": "cpu", "threads": 1, "lr_end": 1e-6}
    spec = parse_spec({"sweep": {"name": "o", "search": "optuna", "trials": 4, "seed": 0, "group_size": 2},
                       "base": base, "space": {"lr": {"low": 1e-5, "high": 1e-2, "log": True}},
                       "optuna": {"pruner": "median", "n_startup_trials": 1, "n_warmup_steps": 0,
                                  "enqueue": [{"lr": 5e-3}, {"lr": 5e-3}, {"lr": 1e-5}, {"lr": 5e-3}]}}, "test")
    final = SweepRun(ws, create_sweep(ws, spec).id).run()
    assert launches == [[1, 2], [3, 4]]  # two trials asked at a time, each pair one child
    assert [t["group"] for t in final.trials] == [0, 0, 1, 1]
    assert final.state == "succeeded" and final.doc["message"] == "4 trials done, 1 pruned"
    t0, t1, t2, t3 = final.trials
    assert [t["state"] for t in (t0, t1, t3)] == ["succeeded"] * 3
    assert t2["pruned"] and t2["message"] == "pruned by the sweep at epoch 0"
    assert 1 <= len(RunRecord.open(t2["run_dir"]).history()) < 3
    assert len(RunRecord.open(t3["run_dir"]).history()) == 3  # its group's other member went on


def test_the_sweeps_time_limit_reason_is_the_trainers():
    from dpd_desktop.sweep.runner import TIME_LIMIT_REASON
    from dpd_desktop.training.limits import TIME_LIMIT_REASON as TRAINER_REASON
    assert TIME_LIMIT_REASON == TRAINER_REASON


def test_time_limited_trials_train_alone_are_done_and_the_sweep_succeeds(tmp_path):
    root = tmp_path / "ws"
    args = [a for a in TINY_ARGS if a != "--quiet"]
    rc = cli_main(["--workspace", str(root), "sweep", "--grid", "seed=0,1", "--group-size", "2", "--base", *args,
                   "--epochs", "50", "--max-train-samples", "2000", "--time-limit", "1.5", "--quiet"])
    info = SweepStore(root).list()[-1]
    assert rc == 0 and info.state == "succeeded", (rc, info.doc.get("message"))
    assert [t["group"] for t in info.trials] == [None, None]  # a time limit: each trial trains alone
    assert [t["state"] for t in info.trials] == ["cancelled", "cancelled"]
    assert all(t["time_limited"] and t["message"].startswith("time limit") for t in info.trials)
    assert "2 stopped by their time limit" in info.doc["message"]


def test_a_damaged_group_size_in_sweep_json_is_named(tmp_path):
    root = tmp_path / "ws"
    assert cli_main(["--workspace", str(root), "sweep", "--grid", "seed=0", "--base", *TINY_ARGS]) == 0
    info = SweepStore(root).list()[-1]
    path = info.folder / "sweep.json"
    doc = json.loads(path.read_text())
    doc["spec"]["group_size"] = "many"
    path.write_text(json.dumps(doc))
    with pytest.raises(Exception) as exc:
        SweepStore(root).open(info.id)
    assert "sweep.json: spec.group_size: expected a positive integer" in str(exc.value)
    assert cli_main(["--workspace", str(root), "sweep", "resume", info.id]) == 2
