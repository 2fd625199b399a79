"""Queued runs on the GPU (lab/supervisor.py): a cuda:0 entry and a cpu entry run side by side in their own child
processes (PyTorch preloaded in the forkserver, CUDA initialised only in the child); a CUDA child that segfaults
fails its entry and the next CUDA entry succeeds. Run on the GPU machine; skipped without CUDA."""
from dataclasses import replace

import pytest
import torch

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.lab.queue import RunQueue
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.lab.faults import parse_faults
from dpd_desktop.lab.supervisor import EntryEnded, EntryStarted, Supervisor
from dpd_desktop.runs.workspace import Workspace

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the GPU machine)")]

TINY = ExperimentConfig(step="pa", dataset="demo", hidden_size=8, frame_length=50, epochs=3, max_train_samples=4000,
                        device="cuda:0")


def test_cuda_and_cpu_lanes_side_by_side_and_a_segfault_on_cuda(tmp_path):
    ws = Workspace(tmp_path)
    order = []
    with RunQueue(ws.root) as q:
        q.add(TINY), q.add(replace(TINY, seed=1)), q.add(replace(TINY, device="cpu", epochs=2))
        ends = Supervisor(ws, queue=q, observers=[
            lambda e, ev: isinstance(ev, (EntryStarted, EntryEnded)) and order.append((type(ev).__name__, e.id))
        ], faults=parse_faults("1:segfault@epoch:0")).run()
        entries = {e.id: e for e in q.entries()}
    assert order[:2] == [("EntryStarted", 1), ("EntryStarted", 3)]  # cuda:0 and cpu at once
    assert {e.entry_id: (e.state, e.message) for e in ends} == {
        1: ("failed", "process ended by signal SIGSEGV"), 2: ("succeeded", ""), 3: ("succeeded", "")}
    rec = RunRecord.open(ws.resolve(entries[2].run_id))
    assert rec.state == "succeeded" and str(rec.device.get("device", "")).startswith("cuda")
    assert RunRecord.open(ws.resolve(entries[1].run_id)).status_doc["epochs_completed"] == 1
