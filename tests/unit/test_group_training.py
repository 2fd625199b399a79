"""Trials that train together (issue 15 point 2, training/group.py), on the CPU: each member of a group ends bitwise
equal to the same configuration trained alone, although the members took turns batch by batch on threads of one
process (the global RNG travels with the baton); a member cancelled mid-way leaves the others' numbers unchanged.
The CUDA-graph side (one graph, a branch per member) is tests/gpu/test_group_training_cuda.py."""
from __future__ import annotations

import pytest

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.runs.artifacts import read_history_csv
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.runs import events as E
from dpd_desktop.training.group import TrainerGroup, default_group_size, group_key, plan_groups
from dpd_desktop.training.trainer import Trainer

import same_run  # tests/same_run.py

DEMO = dict(seed=2, n_train=3000, n_val=4096, n_test=4096)
BASE = dict(step="pa", dataset="demo", backbone="gru", hidden_size=4, epochs=2, frame_length=50, stride=8,
            batch_size=16, device="cpu", threads=1)
#: three members: two seeds, and the first seed with another learning rate and weight decay
MEMBERS = [dict(seed=0), dict(seed=1), dict(seed=0, lr=2e-3, weight_decay=0.0)]


@pytest.fixture(scope="module")
def ds():
    return make_demo_dataset(**DEMO)


@pytest.fixture(scope="module")
def alone(tmp_path_factory, ds):
    ws = Workspace(tmp_path_factory.mktemp("alone"))
    runs = [Trainer(ExperimentConfig(**BASE, **kw), dataset=ds, workspace=ws).run() for kw in MEMBERS]
    assert [r.state for r in runs] == ["succeeded"] * 3
    return [r.run_dir for r in runs]


def assert_same_run(ref, run) -> None:
    same_run.assert_same_run(ref, run, BASE["epochs"])


def n_full_batches(trainer) -> int:
    return trainer.loader.n_frames // trainer.config.batch_size


def test_members_take_turns_and_end_bitwise_equal_to_their_lone_runs(tmp_path, ds, alone):
    ws = Workspace(tmp_path)
    trainers = [Trainer(ExperimentConfig(**BASE, **kw), dataset=ds, workspace=ws) for kw in MEMBERS]
    group = TrainerGroup(trainers)
    results = group.run()
    assert [r.state for r in results] == ["succeeded"] * 3
    # one meeting per full batch of every epoch: the members really interleaved batch by batch
    assert group.meetings == BASE["epochs"] * n_full_batches(trainers[0]) > 10
    assert group.captures == 0  # no CUDA graph on the CPU
    for ref, res in zip(alone, results):
        assert_same_run(ref, res.run_dir)
    assert "group: trains together with 2 other runs in one process (member 2 of 3)" in \
        (results[1].run_dir / "log.txt").read_text()
    # and the members differ from each other (the seeds and learning rates did reach them)
    h = [read_history_csv(r.run_dir / "history.csv")[-1]["TRAIN_LOSS"] for r in results]
    assert len(set(h)) == 3


def test_a_member_cancelled_mid_way_leaves_the_others_unchanged(tmp_path, ds, alone):
    ws = Workspace(tmp_path)
    group = None

    def cancel_first_after_epoch0(ev):
        if isinstance(ev, E.EpochEnded) and ev.epoch == 0:
            group.request_cancel(0, "pruned by the test")

    trainers = [Trainer(ExperimentConfig(**BASE, **kw), dataset=ds, workspace=ws,
                        observers=[cancel_first_after_epoch0] if i == 0 else ()) for i, kw in enumerate(MEMBERS)]
    group = TrainerGroup(trainers)
    results = group.run()
    assert [r.state for r in results] == ["cancelled", "succeeded", "succeeded"]
    assert results[0].message == "pruned by the test" and len(results[0].history) == 1
    for ref, res in zip(alone[1:], results[1:]):
        assert_same_run(ref, res.run_dir)


def test_a_member_that_cannot_start_does_not_hold_up_the_others(tmp_path, ds, alone):
    ws = Workspace(tmp_path)
    bad = ExperimentConfig(**{**BASE, "step": "dpd", "pa_run": "no-such-run"})
    trainers = [Trainer(bad, dataset=ds, workspace=ws), Trainer(ExperimentConfig(**BASE, **MEMBERS[1]), dataset=ds,
                                                                 workspace=ws)]
    results = TrainerGroup(trainers).run()
    assert results[0].state == "failed" and "no-such-run" in results[0].message
    assert results[1].state == "succeeded"
    assert_same_run(alone[1], results[1].run_dir)


def test_group_keys_and_plans():
    cfgs = [ExperimentConfig(**BASE, **kw) for kw in MEMBERS]
    assert len({group_key(c) for c in cfgs}) == 1
    other = ExperimentConfig(**{**BASE, "hidden_size": 8})
    ls = ExperimentConfig(**{**BASE, "backbone": "mp", "fit": "ls"})
    assert group_key(ls) is None and group_key(other) != group_key(cfgs[0])
    assert group_key(ExperimentConfig(**BASE, time_limit_s=60.0)) is None  # the members would share one clock
    assert plan_groups([*cfgs, other, ls, *cfgs], 4) == [[0, 1, 2, 5], [3], [4], [6, 7]]
    assert plan_groups(cfgs, 1) == [[0], [1], [2]]
    with pytest.raises(ValueError, match="at least 1"):
        plan_groups(cfgs, 0)
    assert default_group_size(cfgs[0]) == 1
    assert default_group_size(ExperimentConfig(**{**BASE, "device": "cuda", "kernel": "fast"})) == 8
    assert default_group_size(ExperimentConfig(**{**BASE, "device": "cuda:1"})) == 4


def test_a_sweeps_trial_tag_is_no_difference():
    a = ExperimentConfig(**BASE, extra={"sweep": {"id": "s1", "trial": 0}, "note": "x"})
    b = ExperimentConfig(**BASE, extra={"sweep": {"id": "s1", "trial": 1}, "note": "x"})
    c = ExperimentConfig(**BASE, extra={"sweep": {"id": "s1", "trial": 2}, "note": "y"})
    assert group_key(a) == group_key(b) != group_key(c)


def _fake_group(n_frames: int):
    """A TrainerGroup of two stand-in trainers whose members have a CUDA-graph step of n_frames frames at batch 10."""
    from types import SimpleNamespace

    group = TrainerGroup([SimpleNamespace(), SimpleNamespace()])
    for m in group.members:
        m.step = SimpleNamespace(inner=SimpleNamespace(loader=SimpleNamespace(n_frames=n_frames), batch_size=10))
    return group


def test_a_deferred_epoch_end_waits_for_the_next_meeting():
    """group.py after_next_meeting: an overlapped epoch end runs once the group met again (or nobody is left)."""
    import threading

    group = _fake_group(100)
    m = group.members[0]
    ran = []
    deferred = m.after_next_meeting(lambda x: ran.append(x) or x)
    t = threading.Thread(target=deferred, args=(7,))
    t.start()
    t.join(0.3)
    assert t.is_alive() and ran == []  # no meeting yet
    with group._cond:
        group.meetings += 1
        group._cond.notify_all()
    t.join(5)
    assert not t.is_alive() and ran == [7]
    # its own member leaves (a cancel, a failure: trainer.py _drain): it runs although the others still meet
    own = m.after_next_meeting(lambda: "own")
    t = threading.Thread(target=lambda: ran.append(own()))
    t.start()
    t.join(0.3)
    assert t.is_alive()
    group._leave(m)
    t.join(5)
    assert not t.is_alive() and ran == [7, "own"] and group.members[1].active
    # nobody left to meet: it runs at once
    later = group.members[1].after_next_meeting(lambda: "done")
    for x in group.members:
        x.active = False
    assert later() == "done"


def test_no_full_batch_means_no_wait():
    group = _fake_group(9)  # 9 frames < batch 10: the members never meet
    fn = lambda: None  # noqa: E731
    assert group.members[0].after_next_meeting(fn) is fn


def test_a_dpd_groups_members_share_their_evaluation_constants(tmp_path, ds, monkeypatch):
    """training/evaluation.EvalConstants: the PA baseline of each split is computed once for the whole group (not
    once per member), and each member's results equal its lone run's, plots' PSDs and baseline ACLR included."""
    from dpd_desktop.training import evaluation

    ws = Workspace(tmp_path)
    pa = Trainer(ExperimentConfig(**BASE, seed=0), dataset=ds, workspace=ws).run()
    assert pa.state == "succeeded"
    dpd = dict(BASE, step="dpd", pa_run=pa.run_id, epochs=2)
    calls = []
    real = evaluation.Evaluator.forward_segments

    def counted(self, module, x_seg):
        if any(x_seg is es["x"] for es in self.sets.values()):  # a baseline (gain.py's calls scale x)
            calls.append(id(self))
        return real(self, module, x_seg)

    monkeypatch.setattr(evaluation.Evaluator, "forward_segments", counted)
    lone = [Trainer(ExperimentConfig(**dpd, seed=s), dataset=ds, workspace=ws) for s in (0, 1)]
    lone_res = [t.run() for t in lone]
    assert len(calls) == 4  # each lone run: the val and the test baseline
    calls.clear()
    trainers = [Trainer(ExperimentConfig(**dpd, seed=s), dataset=ds, workspace=ws) for s in (0, 1)]
    got = TrainerGroup(trainers).run()
    assert [r.state for r in got] == ["succeeded"] * 2
    assert len(calls) == 2  # the group: val and test once
    assert trainers[0].evaluator.constants is trainers[1].evaluator.constants
    assert lone[0].evaluator.constants is not lone[1].evaluator.constants
    for a, b in zip(lone_res, got):
        same_run.assert_same_run(a.run_dir, b.run_dir, dpd["epochs"])
        assert a.extra["rms_out_without_dpd"] == b.extra["rms_out_without_dpd"]


def test_eval_constants_compute_once_under_concurrent_callers():
    import threading
    import time

    from dpd_desktop.training.evaluation import EvalConstants

    c = EvalConstants()
    n = []

    def slow():
        n.append(1)
        time.sleep(0.05)
        return len(n)

    out = []
    threads = [threading.Thread(target=lambda: out.append(c.get(("k", "val"), slow))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == [1] * 6 and len(n) == 1
    assert c.get(("k", "test"), slow) == 2  # another key: its own value
    cache, guard = c.psd_cache("val")
    with guard:
        cache["x"] = 1
    again, guard2 = c.psd_cache("val")
    assert again is cache and again == {"x": 1} and type(guard2).__name__ == "nullcontext"
    try:  # a first use that fails leaves the split unfilled: the next caller fills it under the lock
        with c.psd_cache("test")[1]:
            raise RuntimeError("plot failed")
    except RuntimeError:
        pass
    assert type(c.psd_cache("test")[1]).__name__ == "_Filling"
