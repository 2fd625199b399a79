"""A grouped sweep on the GPU (sweep/groups.py, runs/group_child.py, training/group.py): with ``--group-size auto``
on cuda:0 the 4 seeds of one shape are ONE group (reference mode: 4) in one child process, and each trial is
bitwise its twin of a ``--group-size 1`` sweep (history without its wall-clock column, best.pt tensors). Run on the
GPU machine; skipped without CUDA."""
from pathlib import Path

import pytest
import torch

from dpd_desktop.cli import main as cli_main
from dpd_desktop.runs import artifacts
from dpd_desktop.runs.queue import RunQueue
from dpd_desktop.runs.supervisor import Supervisor
from dpd_desktop.sweep.store import SweepStore

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the GPU machine)")]

ARGS = ["--dataset", "demo", "--hidden-size", "8", "--frame-length", "50", "--epochs", "2", "--max-train-samples",
        "4000", "--device", "cuda:0", "--kernel", "reference", "--quiet"]


def _history(run_dir):
    return [{k: v for k, v in r.items() if k != "TIME:"}
            for r in artifacts.read_history_csv(Path(run_dir) / "history.csv")]


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
        assert _history(g["run_dir"]) == _history(a["run_dir"])
        sg, _ = artifacts.load_checkpoint(Path(g["run_dir"]) / "best.pt")
        sa, _ = artifacts.load_checkpoint(Path(a["run_dir"]) / "best.pt")
        assert list(sg) == list(sa) and all(torch.equal(sg[k], sa[k]) for k in sa)
