"""A large sweep is queued in one transaction and cancelled in one (it took ~45 s to queue a 10,000-trial grid, one
commit per trial, and ~80 minutes to cancel it, one commit and one rewrite of sweep.json per trial). Counted here,
not timed (benchmarks/bench_sweep_cancel.py measures): transactions of queue.sqlite, writes of sweep.json, calls of
the sweep's end callbacks. No child process runs: the executor serves a device lane the trials are not on, so
every trial stays queued until the stop."""
from __future__ import annotations

import sys
import threading
import time

import pytest

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.lab.queue import RunQueue
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.sweep.executor import Trial
from dpd_desktop.sweep.local import LocalExecutor
from dpd_desktop.sweep.runner import SweepRun, create_sweep
from dpd_desktop.sweep.spec import spec_from_options
from dpd_desktop.sweep.store import SweepStore

N = 400
BASE = dict(step="pa", dataset="demo", epochs=1, hidden_size=4, frame_length=50, stride=50, device="cpu")


@pytest.fixture
def counted(monkeypatch):
    """Counts of queue transactions and sweep.json writes, by phase (set ``phase`` to switch)."""
    counts = {"phase": "add", "tx": {}, "sweep_json": {}}
    real_tx, real_update = RunQueue._tx, SweepStore.update

    def tx(self):  # the transactions that queue or cancel entries (not the supervisor's claims)
        if sys._getframe(1).f_code.co_name in ("add", "add_many", "cancel", "cancel_many"):
            counts["tx"][counts["phase"]] = counts["tx"].get(counts["phase"], 0) + 1
        return real_tx(self)

    def update(self, sweep_id, change):
        counts["sweep_json"][counts["phase"]] = counts["sweep_json"].get(counts["phase"], 0) + 1
        return real_update(self, sweep_id, change)

    monkeypatch.setattr(RunQueue, "_tx", tx)
    monkeypatch.setattr(SweepStore, "update", update)
    return counts


def _stop_once_queued(root, stop: threading.Event, counts: dict, n: int) -> threading.Thread:
    def watch():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with RunQueue(root) as q:
                    if q.pending() >= n:
                        break
            except Exception:  # noqa: BLE001 - the file may be mid-creation
                pass
            time.sleep(0.05)
        counts["phase"] = "cancel"
        stop.set()

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def test_the_local_executor_queues_and_cancels_a_sweep_in_one_transaction_each(tmp_path, counted):
    ws = Workspace(tmp_path)
    trials = [Trial("s", i, ExperimentConfig(**BASE, seed=i)) for i in range(N)]
    ends, batches = [], []
    stop = threading.Event()
    watcher = _stop_once_queued(ws.root, stop, counted, N)
    LocalExecutor(ws, lanes=["cuda:7"]).run(trials, ends.append, stop, on_many=batches.append)
    watcher.join()
    # the whole grid in one commit, every queued trial cancelled in one (it was one per trial each)
    assert counted["tx"] == {"add": 1, "cancel": 1}, counted
    assert ends == [] and len(batches) == 1 and [e.trial.number for e in batches[0]] == list(range(N))
    assert {e.state for e in batches[0]} == {"cancelled"}
    with RunQueue(ws.root) as q:
        assert [e.state for e in q.entries()] == ["cancelled"] * N
        assert [e.config.seed for e in q.entries()] == list(range(N))  # queue order is the trials' order


def test_a_stopped_sweep_records_its_cancelled_trials_in_one_write(tmp_path, counted):
    ws = Workspace(tmp_path)
    spec = spec_from_options([f"seed={','.join(map(str, range(N)))}"], ExperimentConfig(**BASE), name="big",
                             group_size="1")
    info = create_sweep(ws, spec)
    stop = threading.Event()
    watcher = _stop_once_queued(ws.root, stop, counted, N)
    final = SweepRun(ws, info.id, executor=LocalExecutor(ws, lanes=["cuda:7"]), stop=stop).run()
    watcher.join()
    assert final.state == "cancelled" and final.counts() == {"cancelled": N}
    assert final.doc["message"] == f"cancelled: 0 of {N} trials done (sweep resume runs the others)"
    # after the stop: the trials' ends in one write, the sweep's own end in one more (it was N + 1)
    assert counted["sweep_json"].get("cancel", 0) == 2, counted
    assert counted["tx"] == {"add": 1, "cancel": 1}, counted


def test_add_many_validates_every_config_before_it_queues_any(tmp_path):
    good = ExperimentConfig(**BASE)
    bad = ExperimentConfig(**{**BASE, "epochs": 0})
    with RunQueue(tmp_path) as q:
        q.add(good)
        with pytest.raises(Exception, match="epochs"):
            q.add_many([(good, None), (bad, None)])
        assert len(q.entries()) == 1
        ids = q.add_many([(good, "g#0"), (good, "g#0"), (good, None)])
        got = q.get_many(ids)
        assert [got[i].position for i in ids] == [2, 3, 4] and [got[i].group for i in ids] == ["g#0", "g#0", None]
        assert q.cancel_many([ids[0], 99]) == [ids[0]] and q.get(ids[0]).state == "cancelled"
        assert q.cancel_many([ids[0]]) == []  # ended: left as it is
