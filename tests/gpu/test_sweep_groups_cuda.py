"""A grouped sweep on the GPU (sweep/groups.py, lab/group_child.py, training/group.py): with ``--group-size auto``
on cuda:0 the 4 seeds of one shape are ONE group (reference mode: 4) in one child process, and each trial is
bitwise its twin of a ``--group-size 1`` sweep (history without its wall-clock column, best.pt tensors). Run on the
GPU machine; skipped without CUDA."""

import pytest
import torch

from dpd_desktop.cli.entry import main as cli_main
from dpd_desktop.lab.queue import RunQueue
from dpd_desktop.lab.supervisor import Supervisor
from dpd_desktop.sweep.store import SweepStore

import same_run  # tests/same_run.py

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the GPU machine)")]

ARGS = ["--dataset", "demo", "--hidden-size", "8", "--frame-length", "50", "--epochs", "2", "--max-train-samples",
        "4000", "--device", "cuda:0", "--kernel", "reference", "--quiet"]


def test_auto_groups_on_cuda_are_one_child_and_bitwise_their_lone_twins(tmp_path, monkeypatch):
    launched = []
    original = Supervisor._launch
    monkeypatch.setattr(Supervisor, "_launch", lambda self, es: (launched.append([e.id for e in es]),
                                                                 original(self, es))[1])
    infos = {}
    for size in ("auto", "1"):
        root = tmp_path / size
        assert cli_main(["--workspace", str(root), "sweep", "--grid", "seed=0,1,2,3", "--group-size", size,
                         "--base", *ARGS]) == 0
        infos[size] = SweepStore(root).list()[-1]
    assert launched == [[1, 2, 3, 4], [1], [2], [3], [4]]
    assert [t["group"] for t in infos["auto"].trials] == [0] * 4
    with RunQueue(tmp_path / "auto") as q:
        assert [e.state for e in q.entries()] == ["succeeded"] * 4
    for g, a in zip(infos["auto"].trials, infos["1"].trials):
        assert g["state"] == a["state"] == "succeeded"
        same_run.assert_twins(g["run_dir"], a["run_dir"])
