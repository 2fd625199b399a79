"""The run queue (lab/queue.py): order, moves, cancel, a DPD entry waiting for a PA entry, restarts, bad files,
two connections at once; and the ``queue`` command line's argument errors (exit 2, nothing queued)."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from dataclasses import replace

import pytest

from dpd_desktop.cli.entry import main as cli_main
from dpd_desktop.cli.queue import QUEUE_HEADER
from dpd_desktop.config import ConfigError, ExperimentConfig
from dpd_desktop.lab.queue import QUEUE_FILE, QueueError, RunQueue, device_lane

PA = ExperimentConfig(step="pa", dataset="demo", hidden_size=4, frame_length=50, epochs=1, max_train_samples=200,
                      device="cpu")
DPD = replace(PA, step="dpd", pa_run="some-pa-run")


@pytest.fixture
def q(tmp_path):
    with RunQueue(tmp_path) as queue:
        yield queue


def _ids(queue):
    return [e.id for e in queue.entries()]


def test_order_move_and_round_trip_of_the_config(q, tmp_path):
    a, b, c = q.add(PA), q.add(replace(PA, hidden_size=5)), q.add(replace(PA, seed=3, device="cuda"))
    assert _ids(q) == [1, 2, 3] and [e.position for e in q.entries()] == [1, 2, 3]
    assert c.device == "cuda:0" and c.config.device == "cuda"
    q.move(3, 1)
    assert _ids(q) == [3, 1, 2]
    q.move(1, 99)  # clamped to the end
    assert _ids(q) == [3, 2, 1]
    with RunQueue(tmp_path) as again:  # survives a restart, configs equal field by field
        assert [e.config for e in again.entries()] == [c.config, b.config, a.config]
        assert (tmp_path / QUEUE_FILE).is_file()
        assert again._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_claim_takes_queue_order_one_per_lane_and_lanes_side_by_side(q):
    q.add(PA), q.add(PA), q.add(replace(PA, device="cuda:1")), q.add(replace(PA, device="cuda:0"))
    q.move(4, 1)
    got = [q.claim_next().id, q.claim_next().id, q.claim_next().id]
    assert got == [4, 1, 3]  # cuda:0, cpu, cuda:1 side by side; entry 2 waits for the cpu lane
    assert q.claim_next() is None
    q.finish(1, "succeeded")
    assert q.claim_next(lanes=["cuda:0"]) is None  # a lane filter
    assert q.claim_next(lanes=["cpu"]).id == 2
    assert [e.state for e in q.entries()] == ["running", "succeeded", "running", "running"]


def test_dpd_entry_waits_for_its_pa_entry_and_takes_its_run(q):
    pa = q.add(PA)
    dpd = q.add(replace(DPD, pa_run=None), after=pa.id)
    assert dpd.config.pa_run is None and dpd.after == pa.id and dpd.message == "waits for entry 1"
    q.move(dpd.id, 1)
    first = q.claim_next()
    assert first.id == pa.id  # the DPD entry is first in line but not ready
    assert q.claim_next() is None
    q.set_run(pa.id, "2026-pa-run", "/runs/2026-pa-run")
    q.finish(pa.id, "succeeded")
    second = q.claim_next()
    assert second.id == dpd.id and second.config.pa_run == "2026-pa-run"
    assert q.get(dpd.id).config.pa_run == "2026-pa-run"  # recorded, not only handed out


@pytest.mark.parametrize("end", ["failed", "cancelled", "interrupted"])
def test_dpd_entry_fails_when_its_pa_entry_does_not_succeed(q, end):
    pa = q.add(PA)
    dpd = q.add(replace(DPD, pa_run=None), after=pa.id)
    q.claim_next()
    q.finish(pa.id, end, "why it ended")
    e = q.get(dpd.id)
    assert e.state == "failed"
    assert e.message == f"PA entry 1 ended {end}: why it ended; this DPD entry needs its run"
    assert q.claim_next() is None


def test_cancel_queued_running_and_ended(q):
    a, b = q.add(PA), q.add(PA)
    w = q.add(replace(DPD, pa_run=None), after=b.id)
    q.claim_next()
    assert q.cancel(b.id).state == "cancelled"
    assert q.get(w.id).state == "failed"  # its PA entry will never run
    running = q.cancel(a.id)
    assert running.state == "running" and running.cancel_requested and q.cancel_requested(a.id)
    q.finish(a.id, "cancelled")
    with pytest.raises(QueueError, match=r"entry 1: has already ended \(cancelled\)"):
        q.cancel(a.id)
    with pytest.raises(QueueError, match="only a queued entry can move"):
        q.move(a.id, 1)


def test_add_refuses_bad_configs_and_dependencies(q):
    with pytest.raises(ConfigError, match="hidden_size"):
        q.add(replace(PA, hidden_size=0))
    with pytest.raises(ConfigError, match="pa_run"):
        q.add(replace(DPD, pa_run=None))
    pa = q.add(PA)
    dpd = q.add(replace(DPD, pa_run=None), after=pa.id)
    with pytest.raises(QueueError, match="entry 2 is a DPD entry; --after needs a PA entry"):
        q.add(replace(DPD, pa_run=None), after=dpd.id)
    with pytest.raises(QueueError, match="entry 9: no such entry"):
        q.add(replace(DPD, pa_run=None), after=9)
    q.claim_next()
    q.finish(pa.id, "failed", "boom")
    with pytest.raises(QueueError, match="entry 1 ended failed; a DPD entry cannot wait for it"):
        q.add(replace(DPD, pa_run=None), after=pa.id)
    assert _ids(q) == [1, 2]  # nothing was added by a refused call


def _dead_identity() -> str:
    """The identity (owner.process_identity) of a process that has ended."""
    out = subprocess.run([sys.executable, "-c", "import json; from dpd_desktop.runs.owner import process_identity;"
                          " print(json.dumps(process_identity()))"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_running_entry_whose_supervisor_is_gone_reads_interrupted(q, tmp_path):
    pa = q.add(PA)
    q.add(replace(DPD, pa_run=None), after=pa.id)
    q.claim_next()
    assert q.get(pa.id).state == "running"  # this process supervises it
    dead = _dead_identity()
    q._db.execute("UPDATE entries SET owner=? WHERE id=1", (dead,))
    e = q.get(pa.id)
    pid = json.loads(dead)["pid"]
    assert e.state == "interrupted" and e.message == f"its supervising process (pid {pid}) ended while it ran"
    assert [x.id for x in q.recover()] == [1]
    assert q._db.execute("SELECT state FROM entries WHERE id=1").fetchone()[0] == "interrupted"
    assert q.get(2).state == "failed" and "PA entry 1 ended interrupted" in q.get(2).message


def test_two_connections_at_once(tmp_path):
    with RunQueue(tmp_path) as window, RunQueue(tmp_path) as cli:
        window.add(PA)
        cli.add(PA)
        assert _ids(window) == [1, 2]
        assert window.claim_next().id == 1
        assert cli.claim_next() is None  # the cpu lane is taken, seen through the other connection
        cli.cancel(2)
        assert window.get(2).state == "cancelled"


def test_device_lane():
    assert [device_lane(d) for d in ("cpu", "cuda", "cuda:1", "CUDA:0", "auto")] == [
        "cpu", "cuda:0", "cuda:1", "cuda:0", "auto"]


# ------------------------------------------------------------------------------------------------ bad queue files
def _valid_queue(path):
    with RunQueue.at(path) as q:
        q.add(PA)


def _sql(path, statement, *params):
    db = sqlite3.connect(path)
    db.execute(statement, params)
    db.commit()
    db.close()


def _not_sqlite(p):
    p.write_bytes(b"I,Q\n0.1,0.2\n" * 200)


def _other_tables(p):
    db = sqlite3.connect(p)
    db.execute("CREATE TABLE runs (x)")
    db.commit()
    db.close()


def _schema_99(p):
    _valid_queue(p)
    _sql(p, "UPDATE meta SET value='99' WHERE key='schema_version'")


def _no_version(p):
    _valid_queue(p)
    _sql(p, "DELETE FROM meta")


def _config_not_json(p):
    _valid_queue(p)
    _sql(p, "UPDATE entries SET config=? WHERE id=1", "{'step': 'pa',")


def _config_not_object(p):
    _valid_queue(p)
    _sql(p, "UPDATE entries SET config='[1, 2]' WHERE id=1")


def _config_bad_field(p):
    _valid_queue(p)
    _sql(p, "UPDATE entries SET config=? WHERE id=1", json.dumps({**PA.to_dict(), "hidden_size": -3}))


def _config_unknown_field(p):
    _valid_queue(p)
    _sql(p, "UPDATE entries SET config=? WHERE id=1", json.dumps({**PA.to_dict(), "colour": "red"}))


def _bad_state(p):
    _valid_queue(p)
    _sql(p, "UPDATE entries SET state='exploded' WHERE id=1")


BAD_QUEUE_FILES = [
    (_not_sqlite, r"not a queue database \(file is not a database\)", None),
    (_other_tables, r"not a queue database \(tables \['runs'\]; expected meta and entries\)", "schema_version"),
    (_schema_99, r"schema version 99, this version of DPD Desktop reads 1", "schema_version"),
    (_no_version, r"schema version none, this version of DPD Desktop reads 1", "schema_version"),
    (_config_not_json, r"entry 1: config is not valid JSON \(Expecting property name enclosed in double quotes",
     "config"),
    (_config_not_object, r"entry 1: config is not a JSON object", "config"),
    (_config_bad_field, r"entry 1: config field hidden_size: expected a positive integer, got -3", "hidden_size"),
    (_config_unknown_field, r"entry 1: config field colour: unknown configuration field", "colour"),
    (_bad_state, r"entry 1: state 'exploded' is not one of", "state"),
]


@pytest.mark.parametrize("make, message, field", BAD_QUEUE_FILES, ids=[m.__name__ for m, _, _ in BAD_QUEUE_FILES])
def test_bad_queue_file_names_the_file(tmp_path, make, message, field):
    path = tmp_path / QUEUE_FILE
    make(path)
    before = path.read_bytes()
    with pytest.raises(QueueError) as info:
        with RunQueue(tmp_path) as q:
            q.entries()
    assert str(info.value).startswith(f"queue file {path}: ")
    assert info.value.path == path and info.value.field == field
    import re

    assert re.search(message, str(info.value)), str(info.value)
    assert path.read_bytes() == before  # nothing on disk is changed by a refused file


def test_cli_reports_a_bad_queue_file_with_exit_2(tmp_path, capsys):
    _not_sqlite(tmp_path / QUEUE_FILE)
    assert cli_main(["--workspace", str(tmp_path), "queue", "list"]) == 2
    assert f"error: queue file {tmp_path / QUEUE_FILE}: not a queue database" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ command line
TINY = ["--dataset", "demo", "--hidden-size", "4", "--frame-length", "50", "--epochs", "1", "--max-train-samples",
        "200", "--device", "cpu"]


@pytest.mark.parametrize("args, message", [
    (["queue", "add", "dpd", *TINY], "give --pa-run RUN or --after ENTRY (one of them)"),
    (["queue", "add", "dpd", *TINY, "--pa-run", "x", "--after", "1"], "give --pa-run RUN or --after ENTRY"),
    (["queue", "add", "pa", *TINY, "--frame-length", "100000"], "max_train_samples: must be at least frame_length"),
    (["queue", "add", "pa", *TINY, "--lr", "-1"], "lr:"),
    (["queue", "add", "pa", *TINY, "--dataset", "no/such/folder"], "dataset no/such/folder: no such file or folder"),
    (["queue", "add", "dpd", *TINY, "--pa-run", "nope"], "--pa-run: run 'nope' not found"),
    (["queue", "add", "dpd", *TINY, "--after", "5"], "entry 5: no such entry"),
    (["queue", "move", "5", "1"], "entry 5: no such entry"),
    (["queue", "cancel", "5"], "entry 5: no such entry"),
])
def test_cli_argument_errors_exit_2_and_queue_nothing(tmp_path, capsys, args, message):
    assert cli_main(["--workspace", str(tmp_path), *args]) == 2
    assert message in capsys.readouterr().err
    if (tmp_path / QUEUE_FILE).exists():
        with RunQueue(tmp_path) as q:
            assert q.entries() == []
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_cli_add_list_move_cancel(tmp_path, capsys):
    ws = ["--workspace", str(tmp_path)]
    assert cli_main([*ws, "queue", "add", "pa", *TINY]) == 0
    assert cli_main([*ws, "queue", "add", "dpd", *TINY, "--after", "1", "--hidden-size", "3"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == ["entry 1 queued at position 1: PA GRU-4 demo on cpu",
                                "entry 2 queued at position 2: DPD GRU-3 demo on cpu, after entry 1"]
    assert cli_main([*ws, "queue", "move", "2", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[:2] == ["entry 2 moved to position 1", QUEUE_HEADER]
    assert cli_main([*ws, "queue", "cancel", "1"]) == 0
    capsys.readouterr()
    assert cli_main([*ws, "queue", "list"]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split() == ["ID", "POS", "STATE", "DEVICE", "EXPERIMENT", "RUN"]
    assert [ln.split()[:3] for ln in lines] == [["2", "1", "failed"], ["1", "2", "cancelled"]]
    assert "PA entry 1 ended cancelled: cancelled before it started; this DPD entry needs its run" in lines[0]
    with RunQueue(tmp_path) as q:
        cfg = q.get(2).config
    assert (cfg.step, cfg.hidden_size, cfg.frame_length, cfg.epochs, cfg.max_train_samples) == ("dpd", 3, 50, 1, 200)


def _queue_run_in_its_own_group_until_epoch_0(ws):
    """``queue run`` of workspace ``ws`` (its first entry of 500 epochs) as a new process group, once its log shows
    epoch 0 (a terminal's or ``timeout``'s signals reach the whole group)."""
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-m", "dpd_desktop", "--workspace", str(ws), "queue", "run"],
                            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    lines = []
    end = time.monotonic() + 120
    while not any(": epoch 0 of 0–499 " in ln for ln in lines):
        line = proc.stdout.readline()
        assert line and time.monotonic() < end, (lines, proc.poll())
        lines.append(line)
    return proc


def test_ctrl_c_on_queue_run_stops_the_running_entry_after_its_batch(tmp_path):
    """A terminal's Ctrl+C reaches the process group (the supervisor and its child): the child ignores it, the
    supervisor asks it to stop after the batch; the entry ends cancelled, the next does not start, exit status 3."""
    import os
    import signal

    with RunQueue(tmp_path) as q:
        q.add(replace(PA, epochs=500))
        q.add(PA)
    proc = _queue_run_in_its_own_group_until_epoch_0(tmp_path)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, (out, err)
    assert "stopping the queue" in err
    with RunQueue(tmp_path) as q:
        first, second = q.entries()
    assert (first.state, second.state) == ("cancelled", "queued")
    assert first.message.startswith("cancelled after ") and "entry 1: cancelled" in out


def test_sigterm_to_the_process_group_marks_the_running_entry_interrupted(tmp_path):
    """``timeout``, a terminal's hang-up, a service manager's stop: a SIGTERM to the whole process group. The child
    dies of it, and the forkserver (which ignores it, lab/forkserver_signals.py) still reports that: the entry and its
    run end interrupted by SIGTERM, not failed with multiprocessing's status 255 for a lost child."""
    import json
    import os
    import signal
    from pathlib import Path

    with RunQueue(tmp_path) as q:
        q.add(replace(PA, epochs=500))
    proc = _queue_run_in_its_own_group_until_epoch_0(tmp_path)
    os.killpg(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, (out, err)  # the supervisor's own SIGTERM is a Ctrl+C (process.py)
    with RunQueue(tmp_path) as q:
        (entry,) = q.entries()
    assert (entry.state, entry.message) == ("interrupted", "process ended by signal SIGTERM"), (out, err)
    status = json.loads((Path(entry.run_dir) / "status.json").read_text())
    assert (status["state"], status["message"]) == ("interrupted", "process ended by signal SIGTERM")


def test_cli_add_records_the_dataset_and_pa_run_as_absolute_paths(tmp_path, monkeypatch, capsys):
    """A relative --dataset (or --pa-run folder) is resolved against the cwd of ``queue add``, not of the later
    ``queue run``: the entry stores the absolute path."""
    from dpd_desktop.data import write_demo_dataset

    data = write_demo_dataset(tmp_path / "data" / "set")  # queue add inspects it (cli/flags.py): a loadable one
    pa = tmp_path / "elsewhere" / "pa-run"
    pa.mkdir(parents=True)
    (pa / "config.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    ws = ["--workspace", str(tmp_path / "ws")]
    tiny = [a if a != "demo" else "data/set" for a in TINY]
    assert cli_main([*ws, "queue", "add", "dpd", *tiny, "--pa-run", "elsewhere/pa-run"]) == 0
    with RunQueue(tmp_path / "ws") as q:
        cfg = q.get(1).config
    assert (cfg.dataset, cfg.pa_run) == (str(data), str(pa))
    assert cli_main([*ws, "queue", "add", "pa", *TINY]) == 0  # the demo and plain run ids stay as they are
    with RunQueue(tmp_path / "ws") as q:
        assert q.get(2).config.dataset == "demo"


@pytest.mark.parametrize("position", ["0", "-1"])
def test_cli_move_refuses_a_position_below_1(tmp_path, capsys, position):
    ws = ["--workspace", str(tmp_path)]
    assert cli_main([*ws, "queue", "add", "pa", *TINY]) == 0
    assert cli_main([*ws, "queue", "add", "pa", *TINY]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:  # argparse's usage error
        cli_main([*ws, "queue", "move", "2", "--", position])
    assert stop.value.code == 2
    assert "argument position: expected an integer of at least 1" in capsys.readouterr().err
    with RunQueue(tmp_path) as q:
        assert _ids(q) == [1, 2]


def test_cli_run_says_why_nothing_ran_while_entries_wait(tmp_path, capsys):
    """``queue run`` that finds only entries waiting (here: a DPD entry whose PA entry another supervisor runs)
    does not say "nothing to run" as if the queue were empty."""
    ws = ["--workspace", str(tmp_path)]
    assert cli_main([*ws, "queue", "add", "pa", *TINY]) == 0
    assert cli_main([*ws, "queue", "add", "dpd", *TINY, "--after", "1"]) == 0
    with RunQueue(tmp_path) as q:
        q.claim_next()  # entry 1 now runs under this (live) process: its lane is busy, entry 2 waits for it
    capsys.readouterr()
    assert cli_main([*ws, "queue", "run"]) == 0
    err = capsys.readouterr().err
    assert "nothing to run" not in err
    assert "nothing ready: 1 queued entry waits (for a running entry's lane or its PA entry)" in err


@pytest.mark.parametrize("args", [["list"], ["move", "1", "1"], ["cancel", "1"], ["run"],
                                  ["add", "pa", *TINY]])
def test_cli_an_unusable_workspace_is_exit_2_without_a_traceback(tmp_path, capsys, args):
    """A workspace that cannot be made (its parent is a file) is a usage error naming it, never a traceback."""
    (tmp_path / "file").write_text("x")
    ws = tmp_path / "file" / "ws"
    assert cli_main(["--workspace", str(ws), "queue", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: workspace {ws}") and "Traceback" not in err


@pytest.mark.parametrize("args", [["list"], ["move", "1", "1"], ["cancel", "1"]])
def test_cli_reading_commands_do_not_create_a_missing_workspace(tmp_path, capsys, args):
    """``queue list`` (or move/cancel) of a mistyped workspace says it does not exist and creates nothing."""
    ws = tmp_path / "typo"
    assert cli_main(["--workspace", str(ws), "queue", *args]) == 2
    assert f"error: workspace {ws}: no such folder" in capsys.readouterr().err
    assert not ws.exists()


@pytest.mark.parametrize("device", ["gpu", "cuda:x", ""])
def test_cli_run_refuses_a_device_lane_that_cannot_exist(tmp_path, capsys, device):
    """``queue run --device gpu`` is a usage error, not "nothing to run" with exit 0."""
    with pytest.raises(SystemExit) as stop:
        cli_main(["--workspace", str(tmp_path), "queue", "run", "--device", device])
    assert stop.value.code == 2
    assert "argument --device: expected auto, cpu, cuda or cuda:N" in capsys.readouterr().err


def test_cli_add_keeps_the_limit_options_and_refuses_bad_ones(tmp_path, capsys):
    """``queue add`` takes train-pa's --time-limit and --cuda-memory-fraction (they were dropped silently) and
    refuses a fraction train-pa refuses, queueing nothing."""
    ws = ["--workspace", str(tmp_path)]
    assert cli_main([*ws, "queue", "add", "pa", *TINY, "--time-limit", "20m", "--cuda-memory-fraction", "0.5"]) == 0
    with RunQueue(tmp_path) as q:
        cfg = q.get(1).config
    assert (cfg.time_limit_s, cfg.cuda_memory_fraction) == (1200.0, 0.5)
    capsys.readouterr()
    assert cli_main([*ws, "queue", "add", "pa", *TINY, "--cuda-memory-fraction", "2"]) == 2
    assert "cuda_memory_fraction: expected a fraction of the card, 0 < f <= 1, got 2.0" in capsys.readouterr().err
    with RunQueue(tmp_path) as q:
        assert _ids(q) == [1]


def test_an_orphaned_entry_whose_run_was_resumed_says_so(q, tmp_path):
    """The queue's supervisor died while an entry ran; the run was resumed outside the queue and succeeded: the
    entry reads succeeded, and its note no longer reads as if the run had ended with its supervisor."""
    from dpd_desktop.runs.workspace import Workspace
    from run_folders import make_run

    e = q.add(PA)
    q.claim_next()
    run = make_run(Workspace(tmp_path / "ws"), "2026-12-03-000000-pa-gru4", state="succeeded")
    dead = _dead_identity()
    q._db.execute("UPDATE entries SET owner=?, run_dir=?, run_id=? WHERE id=?", (dead, str(run), run.name, e.id))
    got = q.get(e.id)
    pid = json.loads(dead)["pid"]
    assert got.state == "succeeded"
    assert got.message == f"its supervising process (pid {pid}) ended while it ran; its run was resumed and succeeded"
