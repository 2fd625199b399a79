"""Isolation of queued runs (lab/supervisor.py, lab/child.py): each in a child process; a child that segfaults, is
killed, exits or raises ends its entry failed / interrupted with the reason — in the queue and in status.json — and
the next entry starts; the events cross the pipe intact; 50 tiny runs leave the supervisor's memory as it was."""
from __future__ import annotations

import json
import re
import signal
from dataclasses import replace

import numpy as np
import pytest

from dpd_desktop.cli.entry import main as cli_main
from dpd_desktop.config import ExperimentConfig
from dpd_desktop.lab import event_codec
from dpd_desktop.lab.faults import FaultSpecError, faults_of, parse_faults
from dpd_desktop.lab.queue import RunQueue
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.lab.supervisor import EntryEnded, EntryStarted, Supervisor, exit_reason
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.runs.writer import RESERVE_FILE, mark_dead_run
from dpd_desktop.runs import events as E

TINY = ExperimentConfig(step="pa", dataset="demo", hidden_size=4, frame_length=50, epochs=2, max_train_samples=200,
                        device="cpu", threads=1)


def _run_queue(ws, configs, fault="", after=None, observers=()):
    """Queue ``configs`` (``after``: {index: index of the PA entry} for DPD entries) and run them all, the children
    given the faults of ``fault`` (lab/faults.py)."""
    with RunQueue(ws.root) as q:
        ids = []
        for i, cfg in enumerate(configs):
            dep = (after or {}).get(i)
            ids.append(q.add(cfg, after=ids[dep] if dep is not None else None).id)
        ends = Supervisor(ws, queue=q, observers=observers, faults=parse_faults(fault)).run()
        return ids, ends, {e.id: e for e in q.entries()}


def test_crashing_children_end_their_entries_and_the_next_ones_run(tmp_path):
    ws = Workspace(tmp_path)
    seen = []
    dpd = replace(TINY, step="dpd", pa_run=None, epochs=1)
    ids, ends, entries = _run_queue(
        ws, [TINY, TINY, TINY, TINY, TINY, TINY, dpd],
        fault="1:segfault@epoch:1;3:kill@epoch:0;4:raise@batch:1;5:exit@start;6:oom@epoch:0",
        after={6: 1}, observers=[lambda e, ev: seen.append((e.id, type(ev).__name__))])
    assert [(e.entry_id, e.state) for e in ends] == [
        (1, "failed"), (2, "succeeded"), (3, "interrupted"), (4, "failed"), (5, "failed"), (6, "failed"),
        (7, "succeeded")]
    assert [e.message for e in ends] == [
        "process ended by signal SIGSEGV", "",
        "process ended by signal SIGKILL (a kill, or the system's out-of-memory killer)",
        "RuntimeError: test fault: raise at batch:1",
        "process exited with status 70 before reporting an outcome",
        "the computer ran out of memory: reduce the batch size, the frame length or the hidden size "
        "(test fault at epoch:0)", ""]
    # the DPD entry trained through the PA run of entry 2
    assert entries[7].config.pa_run == entries[2].run_id
    assert RunRecord.open(ws.resolve(entries[7].run_id)).config.pa_run == entries[2].run_id
    # the run folders say the same, and never more epochs than they hold
    expect = {1: ("failed", 2, 1), 2: ("succeeded", 2, None), 3: ("interrupted", 1, 0), 4: ("failed", 0, None),
              5: ("failed", 0, None), 6: ("failed", 1, 0)}
    for eid, (state, epochs, best) in expect.items():
        rec = RunRecord.open(ws.resolve(entries[eid].run_id))
        assert rec.state == state, eid
        st = rec.status_doc
        rows = (rec.run_dir / "history.csv").read_text().strip().splitlines()[1:]
        if state != "succeeded":
            assert st["message"] == entries[eid].message
            assert st["epochs_completed"] == epochs == len(rows), eid
            assert st["best_epoch"] == best, eid
    # the window's view: each entry starts, then the run's events; a dead child also yields a RunFailed
    one = [name for i, name in seen if i == 1]
    assert one[:3] == ["EntryStarted", "RunPrepared", "RunStarted"]
    assert one[-2:] == ["RunFailed", "EntryEnded"] and one.count("EpochEnded") == 1
    assert [name for i, name in seen if i == 3][-1] == "EntryEnded"
    assert "RunFailed" not in [name for i, name in seen if i == 3]  # interrupted is not a failure


def test_cancel_of_a_running_entry_stops_its_child_after_the_batch(tmp_path):
    ws = Workspace(tmp_path)
    long = replace(TINY, epochs=200)

    with RunQueue(ws.root) as q:
        q.add(long), q.add(TINY)

        def cancel_on_first_epoch(entry, ev):
            if isinstance(ev, E.EpochEnded) and entry.id == 1:
                q.cancel(1)

        ends = Supervisor(ws, queue=q, observers=[cancel_on_first_epoch]).run()
        rec = RunRecord.open(ws.resolve(q.get(1).run_id))
    assert [(e.entry_id, e.state) for e in ends] == [(1, "cancelled"), (2, "succeeded")]
    assert rec.state == "cancelled" and 1 <= rec.status_doc["epochs_completed"] < 200


def test_stop_request_cancels_the_running_child_and_starts_no_other(tmp_path):
    ws = Workspace(tmp_path)
    with RunQueue(ws.root) as q:
        q.add(replace(TINY, epochs=200)), q.add(TINY)
        sup = Supervisor(ws, queue=q, observers=[lambda e, ev: isinstance(ev, E.EpochEnded) and sup.request_stop()])
        ends = sup.run(watch=True)
        assert [(e.entry_id, e.state) for e in ends] == [(1, "cancelled")]
        assert q.get(2).state == "queued"


def test_exit_reason_table():
    assert exit_reason(-signal.SIGSEGV) == ("failed", "process ended by signal SIGSEGV")
    assert exit_reason(-signal.SIGABRT) == ("failed", "process ended by signal SIGABRT")
    assert exit_reason(-signal.SIGBUS) == ("failed", "process ended by signal SIGBUS")
    assert exit_reason(-signal.SIGTERM) == ("interrupted", "process ended by signal SIGTERM")
    assert exit_reason(-signal.SIGKILL)[0] == "interrupted"
    assert exit_reason(70) == ("failed", "process exited with status 70 before reporting an outcome")
    assert exit_reason(0) == ("failed", "process ended without reporting an outcome")


def test_fault_spec_parsing():
    assert [(f.action, f.point, f.n) for f in faults_of(parse_faults("segfault@epoch:1;2:raise@batch:3"), 2)] == [
        ("segfault", "epoch", 1), ("raise", "batch", 3)]
    assert [(f.action, f.point) for f in faults_of(parse_faults("2:raise@batch:3;exit@start"), 1)] == [
        ("exit", "start")]
    assert parse_faults("") == () and parse_faults(None) == ()
    for bad in ("explode@epoch:1", "segfault", "segfault@epoch", "raise@minute:3"):
        with pytest.raises(FaultSpecError, match="test fault: cannot read"):
            parse_faults(bad)


def test_event_codec_round_trip_is_exact_and_refuses_other_types():
    rng = np.random.default_rng(3)
    a = rng.standard_normal(700).astype(np.float32)
    plots = E.PlotData(source="validation", amam_in=a, amam={"measured y": a * 2}, ampm={"measured y": a + 1},
                       psd_freq_mhz=np.linspace(-5, 5, 64, dtype=np.float32), psd={"error": a[:64]},
                       bands_mhz={"main": (-1.0, 1.0)}, aclr={"measured y": (-40.5, float("nan"))},
                       time_idx=np.arange(10, dtype=np.float32), time={"measured y": rng.standard_normal((10, 2))})
    ev = E.EpochEnded(epoch=3, epochs=9, row={"EPOCH": 3, "VAL_NMSE": -21.25, "LR": np.float64(5e-3)}, is_best=True,
                      best_epoch=3, best_value=float("-inf"), selection_metric="VAL_NMSE", epoch_seconds=0.5,
                      plots=plots, fast_path="off: cpu")
    back = event_codec.decode(event_codec.encode(ev))
    assert type(back) is E.EpochEnded and back.row == {"EPOCH": 3, "VAL_NMSE": -21.25, "LR": 5e-3}
    assert back.best_value == float("-inf") and back.fast_path == "off: cpu"
    p = back.plots
    assert p.amam_in.dtype == np.float32 and p.amam_in.tobytes() == a.tobytes()
    assert p.time["measured y"].dtype == np.float64 and np.array_equal(p.time["measured y"], plots.time["measured y"])
    assert p.bands_mhz == {"main": (-1.0, 1.0)} and p.aclr["measured y"][0] == -40.5
    assert np.isnan(p.aclr["measured y"][1])
    for bad in (b"\x80\x04K\x01.", b'{"__dc__": "Popen", "f": {}}', b'{"__nd__": ["object", [1], ""]}',
                json.dumps({"__dc__": "PlotData", "f": {}}).encode()):
        with pytest.raises(event_codec.CodecError):
            event_codec.decode(bad)


def test_mark_dead_run_claims_no_more_than_the_disk_holds(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    header = "EPOCH,N_EPOCH,VAL_NMSE\n"
    (d / "history.csv").write_text(header + "0,5,-10\n1,5,-12\n")
    (d / "best.csv").write_text(header + "1,5,-12\n")
    (d / "status.json").write_text(json.dumps({"state": "running", "epochs_completed": 3, "pid": 1, "step": "pa"}))
    (d / "log.txt").write_text("10:00:00 epoch 0: …\n10:00:05 epoch 1: …\n")
    (d / RESERVE_FILE).write_bytes(b"\0" * 32768)  # the dead writer's space reserve
    assert mark_dead_run(d, "failed", "process ended by signal SIGSEGV") is True
    log = (d / "log.txt").read_text().splitlines()
    assert log[:2] == ["10:00:00 epoch 0: …", "10:00:05 epoch 1: …"]
    assert re.fullmatch(r"\d\d:\d\d:\d\d failed: process ended by signal SIGSEGV", log[2]) and len(log) == 3
    assert not (d / RESERVE_FILE).exists()
    st = json.loads((d / "status.json").read_text())
    assert (st["state"], st["message"], st["epochs_completed"], st["best_epoch"], st["step"]) == (
        "failed", "process ended by signal SIGSEGV", 2, None, "pa")  # no best.pt: no best epoch claimed
    (d / "best.pt").write_bytes(b"PK")
    st["state"] = "running"
    (d / "status.json").write_text(json.dumps(st))
    mark_dead_run(d, "interrupted", "killed")
    st = json.loads((d / "status.json").read_text())
    assert (st["state"], st["epochs_completed"], st["best_epoch"]) == ("interrupted", 2, 1)
    before, log_before = (d / "status.json").read_text(), (d / "log.txt").read_text()
    assert mark_dead_run(d, "failed", "again") is False  # a final status stays as the run wrote it
    assert (d / "status.json").read_text() == before and (d / "log.txt").read_text() == log_before


def test_lanes_run_side_by_side(tmp_path):
    """Two lanes (cpu and auto, which is the CPU here): the second entry starts before the first ends."""
    ws = Workspace(tmp_path)
    order = []
    ids, ends, _ = _run_queue(ws, [replace(TINY, epochs=6), replace(TINY, device="auto", epochs=6)],
                              observers=[lambda e, ev: isinstance(ev, (EntryStarted, EntryEnded)) and
                                         order.append((type(ev).__name__, e.id))])
    assert order[:2] == [("EntryStarted", 1), ("EntryStarted", 2)]
    assert sorted(e.state for e in ends) == ["succeeded", "succeeded"]


def rss_bytes() -> int | None:
    """This process's resident set size (``VmRSS`` of /proc/self/status); None where /proc does not exist."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def test_fifty_tiny_runs_leave_the_supervisor_memory_as_it_was(tmp_path, capsys):
    """Issue 10: a 50-run queue of tiny runs under `queue run` (its supervisor in this process) grows this
    process by less than 100 MB."""
    cfg = replace(TINY, epochs=1, max_train_samples=100)
    with RunQueue(tmp_path) as q:
        for seed in range(50):
            q.add(replace(cfg, seed=seed))
        q.get(1)  # the configs' validation has imported the model registry: part of the start, not growth
    before = rss_bytes()
    assert cli_main(["--workspace", str(tmp_path), "queue", "run"]) == 0
    after = rss_bytes()
    out = capsys.readouterr().out.splitlines()
    assert [ln for ln in out if ln.endswith(": succeeded")] == [f"entry {i}: succeeded" for i in range(1, 51)]
    assert sum(": epoch 0 of 0–0 " in ln for ln in out) == 50
    with RunQueue(tmp_path) as q:
        entries = q.entries()
    assert [e.state for e in entries] == ["succeeded"] * 50 and len({e.run_id for e in entries}) == 50
    assert before is not None and after - before < 100 * 2**20, (before, after)


def test_the_child_forwarder_goes_quiet_when_its_supervisor_is_gone():
    """A supervisor killed (SIGKILL) mid-run closes the event pipe: the child's forwarder drops the events from
    then on instead of raising BrokenPipeError at every one (a traceback per batch in the console and log); the
    events sent before are intact."""
    import multiprocessing

    from dpd_desktop.lab.child import _Forwarder

    reader, writer = multiprocessing.Pipe(duplex=False)
    fwd = _Forwarder(writer)
    ev = E.BatchProgress(epoch=0, epochs=2, batch=3, batches=9, elapsed_s=1.0, eta_s=2.0)
    fwd(ev)
    assert event_codec.decode(reader.recv_bytes()) == ev
    reader.close()
    for _ in range(3):
        fwd(ev)  # no exception
    assert fwd.supervisor_gone


def test_a_killed_queue_run_leaves_its_entry_and_run_folder_agreeing(tmp_path):
    """SIGKILL of `queue run` mid-run: the child notices the closed pipe, stops after its batch and records why
    (status.json cancelled, resumable); the queue then reads the run folder's state, not a guess."""
    import subprocess
    import sys
    import time

    ws = Workspace(tmp_path)
    ws.check(create=True)
    with RunQueue(ws.root) as q:
        eid = q.add(replace(TINY, epochs=400, max_train_samples=2000)).id
    proc = subprocess.Popen([sys.executable, "-m", "dpd_desktop", "--workspace", str(tmp_path), "queue", "run"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    hist = None
    while time.monotonic() < deadline:  # until the child has finished one epoch
        runs = list((tmp_path / "runs").glob("*/history.csv")) if (tmp_path / "runs").is_dir() else []
        if runs and len(runs[0].read_text().splitlines()) >= 2:
            hist = runs[0]
            break
        time.sleep(0.2)
    assert hist is not None, "the queued run never finished an epoch"
    proc.kill()
    proc.wait(timeout=30)
    rec = None
    while time.monotonic() < deadline:
        rec = RunRecord.read(hist.parent)
        if rec is not None and rec.state != "running":
            break
        time.sleep(0.2)
    assert rec.state == "cancelled" and rec.message == "the queue's supervising process ended"
    with RunQueue(ws.root) as q:
        entry = q.get(eid)
        assert (entry.state, entry.message) == ("cancelled", "the queue's supervising process ended")
        q.recover()
        assert q.get(eid).state == "cancelled"


def test_a_supervisor_without_plot_data_gets_events_without_plots_and_the_same_run_folder(tmp_path):
    """Supervisor(plot_data=False) (a sweep's, sweep/local.py): the children's runs compute no plot data, so their
    EpochEnded and RunFinished carry none; the run folder's history is that of a run with plot data."""
    got = {True: [], False: []}
    for flag in (True, False):
        ws = Workspace(tmp_path / str(flag))
        with RunQueue(ws.root) as q:
            q.add(replace(TINY, seed=3))
            Supervisor(ws, queue=q, plot_data=flag, observers=[lambda e, ev, f=flag: got[f].append(ev)]).run()
    for flag in (True, False):
        ends = [ev for ev in got[flag] if isinstance(ev, (E.EpochEnded, E.RunFinished))]
        assert [type(ev).__name__ for ev in ends] == ["EpochEnded", "EpochEnded", "RunFinished"]
        assert all((ev.plots is not None) == flag for ev in ends)
    rows = {f: [{k: v for k, v in ev.row.items() if k not in ("EPOCH_SECONDS", "TIME:")} for ev in got[f]
                if isinstance(ev, E.EpochEnded)] for f in got}
    assert rows[True] == rows[False]
