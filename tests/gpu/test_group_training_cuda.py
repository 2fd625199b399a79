"""Trials that train together on CUDA (issue 15 point 2, training/group.py): one CUDA graph with a branch per member,
replayed once per full batch for all; each member's history and checkpoints bitwise equal to the same configuration
trained alone in the same kernel mode (reference: cuDNN; fast: ours), a DPD cascade included (with the phase
augmentation too: its series turned in place between epochs); a member cancelled
mid-way makes the others' graph be captured again without its branch, their numbers unchanged (skipped without
CUDA; run on the GPU machine)."""
import json

import pytest
import torch

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.runs import events as E
from dpd_desktop.training.group import TrainerGroup
from dpd_desktop.training.trainer import Trainer

import same_run  # tests/same_run.py

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the GPU machine)")]

EPOCHS = 2
BASE = dict(step="pa", dataset="demo", backbone="gru", hidden_size=8, epochs=EPOCHS, frame_length=50, stride=4,
            batch_size=16, device="cuda")
MEMBERS = [dict(seed=0), dict(seed=1), dict(seed=2, lr=2e-3, weight_decay=0.0)]


@pytest.fixture(scope="module")
def ds():
    return make_demo_dataset(seed=2, n_train=3000, n_val=4096, n_test=4096)


def _alone(ws, ds, cfgs):
    out = [Trainer(c, dataset=ds, workspace=ws).run() for c in cfgs]
    assert [r.state for r in out] == ["succeeded"] * len(cfgs), [r.message for r in out]
    return out


@pytest.mark.parametrize("kernel", ["reference", "fast"])
def test_a_group_graph_gives_each_member_its_lone_numbers(tmp_path, ds, kernel):
    ws = Workspace(tmp_path)
    cfgs = [ExperimentConfig(**BASE, **kw, kernel=kernel) for kw in MEMBERS]
    alone = _alone(ws, ds, cfgs)
    trainers = [Trainer(c, dataset=ds, workspace=ws) for c in cfgs]
    group = TrainerGroup(trainers, chunk=7)  # several meetings per epoch
    results = group.run()
    assert [r.state for r in results] == ["succeeded"] * 3, [r.message for r in results]
    assert group.captures == 1
    n_full = trainers[0].loader.n_frames // BASE["batch_size"]
    # a meeting every 7 batches, the queue 7 ahead: the last meeting of an epoch queues its last 14 or fewer
    assert group.meetings == EPOCHS * max(1, -(-n_full // 7) - 1)
    for a, r in zip(alone, results):
        same_run.assert_same_run(a.run_dir, r.run_dir, EPOCHS)
        dev = json.loads((r.run_dir / "config.json").read_text())["device"]
        assert dev["fast_path"] == "on" and dev["fast_path_optimizer"] == "in the graph"
        assert dev["kernel"]["used"] == {"model": kernel}


@pytest.mark.parametrize("augment", ["none", "phase"])
def test_a_dpd_group_through_a_frozen_pa_in_fast_mode(tmp_path, ds, augment):
    ws = Workspace(tmp_path)
    pa = _alone(ws, ds, [ExperimentConfig(**BASE, kernel="fast")])[0]
    cfgs = [ExperimentConfig(**{**BASE, "step": "dpd", "pa_run": pa.run_id, "hidden_size": 6, "kernel": "fast",
                                "augment": augment}, **kw)
            for kw in MEMBERS[:2]]
    alone = _alone(ws, ds, cfgs)
    group = TrainerGroup([Trainer(c, dataset=ds, workspace=ws) for c in cfgs])
    results = group.run()
    assert [r.state for r in results] == ["succeeded"] * 2, [r.message for r in results]
    assert group.captures == 1
    for a, r in zip(alone, results):
        same_run.assert_same_run(a.run_dir, r.run_dir, EPOCHS)


def test_a_member_cancelled_mid_epoch_is_captured_out(tmp_path, ds, monkeypatch):
    monkeypatch.setattr("dpd_desktop.training.trainer.PROGRESS_INTERVAL_S", 0.0)  # a BatchProgress every batch
    ws = Workspace(tmp_path)
    cfgs = [ExperimentConfig(**BASE, **kw, kernel="fast") for kw in MEMBERS]
    alone = _alone(ws, ds, cfgs[1:])
    group = None

    def cancel_mid_epoch(ev):
        if isinstance(ev, E.BatchProgress) and ev.epoch == 1 and ev.batch >= 10:
            group.request_cancel(0, "pruned by the test")

    trainers = [Trainer(c, dataset=ds, workspace=ws, observers=[cancel_mid_epoch] if i == 0 else ())
                for i, c in enumerate(cfgs)]
    group = TrainerGroup(trainers, chunk=5)
    results = group.run()
    assert [r.state for r in results] == ["cancelled", "succeeded", "succeeded"], [r.message for r in results]
    assert group.captures == 2  # the two others again, without the cancelled member's branch
    assert len(results[0].history) == 1 and results[0].message == "pruned by the test"
    for a, r in zip(alone, results[1:]):
        same_run.assert_same_run(a.run_dir, r.run_dir, EPOCHS)
