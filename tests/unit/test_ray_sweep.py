"""Sweeps on a real local Ray cluster (issue 15 point 3), CPU only.

One head node with 2 CPUs (sweep/ray_security.py ``LocalCluster``: ``ray start --head --block``, token
authentication, loopback dashboard) serves the module; the sweeps go through the window's helper process
(sweep/ray_helper.py), which runs the RayExecutor. Checked: a 6-trial sweep's runs are bitwise equal (history
without its wall-clock column, best.pt tensors) to the same trials trained here in-process; a DPD trial trains
through a PA run shipped from the workspace; a malformed returned file fails only its trial and leaves nothing; a
stop cancels the running trials (their folders come back, cancelled) and the waiting ones (no folder); a remote
cluster without token authentication is refused unless overridden.
"""
from __future__ import annotations

import argparse
import http.server
import ipaddress
import json
import os
import shutil
import signal
import sys
import time
import threading
from pathlib import Path

import pytest
import torch

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.runs import artifacts
from dpd_desktop.runs.index import RunIndex
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.sweep.executor import Trial, TrialEnd
from dpd_desktop.sweep.ray_executor import RayExecutor, add_ray_arguments, executor_for, task_resources
from dpd_desktop.sweep.ray_helper import RayHelperClient
from dpd_desktop.sweep.ray_security import (OVERRIDE_FLAG, LocalCluster, RaySecurityError, check_address,
                                            check_cluster_auth_mode, fetch_auth_mode, is_loopback,
                                            split_address)
from dpd_desktop.sweep.ray_task import STAGING_DIR, ReturnedRunError, import_run, read_returned, TASK_FORMAT
from dpd_desktop.training.dataset_checks import load_dataset_for
from dpd_desktop.training.ls_fit import make_trainer

import same_run  # tests/same_run.py
from ray_damaged_helper import parse_damage  # tests/ray_damaged_helper.py

REMOTE = "203.0.113.7:6379"  # TEST-NET-3 (RFC 5737): never a real host
NO_TOKEN_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_AUTH_TOKEN": "", "RAY_AUTH_TOKEN_PATH": ""}


def tiny(seed: int, **kw) -> ExperimentConfig:
    base = dict(hidden_size=4, frame_length=50, epochs=1, seed=seed, max_train_samples=2000, threads=1,
                device="cpu")
    base.update(kw)
    return ExperimentConfig(**base)


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(num_cpus=2) as c:
        yield c


@pytest.fixture(scope="module")
def demo():
    return load_dataset_for("demo")


def sweep(cluster, trials, root: Path, env=None, stop_after_epoch: bool = False, started_first: int = 0,
          command=None):
    """Run ``trials`` through the helper (``command``: RayHelperClient.start's); returns (ends by trial number,
    other events, exit status, client). ``stop_after_epoch``: stop at the first epoch event that comes once
    ``started_first`` trials have started (a Ray worker can start late on a busy machine)."""
    client = RayHelperClient.start(cluster.address, trials, root, env={**cluster.env, **(env or {})},
                                   command=command)
    ends: dict[int, TrialEnd] = {}
    events: list[dict] = []
    stopped = False
    for ev in client:
        if isinstance(ev, TrialEnd):
            ends[ev.trial.number] = ev
        else:
            events.append(ev)
            started = sum(e.get("event") == "started" for e in events)
            if stop_after_epoch and not stopped and ev.get("event") == "epoch" and started >= started_first:
                client.stop()
                stopped = True
    rc = client.close()
    return ends, events, rc, client


def run_folders(root: Path) -> list[str]:
    d = Path(root) / "runs"
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


# ---------------------------------------------------------------------------------------------------- on the cluster
def test_six_trial_sweep_is_bitwise_equal_to_local_runs(cluster, demo, tmp_path):
    trials = [Trial("ray-bitwise", i, tiny(i)) for i in range(6)]
    ends, events, rc, client = sweep(cluster, trials, tmp_path / "remote")
    assert rc == 0, client.stderr_tail
    assert sorted(ends) == list(range(6))
    assert {e.state for e in ends.values()} == {"succeeded"}, [e.message for e in ends.values()]
    # the cluster's dashboard confirmed token authentication: no warning
    assert [ev for ev in events if ev.get("event") == "warning"] == []
    # live progress: one epoch event per trial, its row the one history.csv holds
    live = {ev["trial"]: ev for ev in events if ev.get("event") == "epoch"}
    assert sorted(live) == list(range(6))
    local_ws = Workspace(tmp_path / "local")
    for t in trials:
        local = make_trainer(t.config, dataset=demo, workspace=local_ws).run()
        assert local.state == "succeeded"
        remote_dir = Path(ends[t.number].run_dir)
        same_run.assert_twins(remote_dir, local.run_dir)
        rows = artifacts.read_history_csv(remote_dir / "history.csv")
        assert f"{live[t.number]['row']['TRAIN_LOSS']:.8f}" == rows[0]["TRAIN_LOSS"]
        rec = RunRecord.open(remote_dir)
        assert rec.state == "succeeded" and rec.doc["run_id"] == rec.status_doc["run_id"] == remote_dir.name
        assert rec.config.seed == t.number
    # the seeds made different models (a comparison that cannot tell runs apart would pass anyway)
    first = artifacts.load_checkpoint(Path(ends[0].run_dir) / "best.pt")[0]
    second = artifacts.load_checkpoint(Path(ends[1].run_dir) / "best.pt")[0]
    assert any(not torch.equal(first[k], second[k]) for k in first)
    # the workspace holds the six runs, indexed, and nothing staged
    assert run_folders(tmp_path / "remote") == sorted(Path(e.run_dir).name for e in ends.values())
    assert not any((tmp_path / "remote" / STAGING_DIR).iterdir())
    with RunIndex.open(Workspace(tmp_path / "remote"), sync=False) as idx:
        assert sorted(r.run_id for r in idx.runs()) == run_folders(tmp_path / "remote")


def test_dpd_trial_trains_through_the_shipped_pa_run(cluster, demo, tmp_path):
    ws = Workspace(tmp_path / "ws")
    pa = make_trainer(tiny(0), dataset=demo, workspace=ws).run()
    assert pa.state == "succeeded"
    cfg = tiny(3, step="dpd", pa_run=pa.run_id)
    ends, _, rc, client = sweep(cluster, [Trial("ray-dpd", 0, cfg)], ws.root)
    assert rc == 0, client.stderr_tail
    assert ends[0].state == "succeeded", ends[0].message
    local = make_trainer(cfg, dataset=demo, workspace=ws).run()  # its twin, through the same PA run
    assert local.state == "succeeded"
    same_run.assert_twins(ends[0].run_dir, local.run_dir)
    rec = RunRecord.open(ends[0].run_dir)
    assert rec.pa["run_id"] == pa.run_id


def test_a_malformed_returned_file_fails_only_its_trial(cluster, tmp_path):
    trials = [Trial("ray-damage", i, tiny(i)) for i in range(4)]
    damaged = [sys.executable, str(Path(__file__).parents[1] / "ray_damaged_helper.py"), "1:config.json,2:best.pt"]
    ends, _, rc, client = sweep(cluster, trials, tmp_path, command=damaged)
    assert rc == 0, client.stderr_tail
    assert {n: e.state for n, e in ends.items()} == {0: "succeeded", 1: "failed", 2: "failed", 3: "succeeded"}
    assert ends[1].run_dir is None and "config.json" in ends[1].message and "not valid JSON" in ends[1].message
    assert ends[2].run_dir is None and "best.pt" in ends[2].message and "not a readable checkpoint" in ends[2].message
    # nothing of the two failed trials is on disk: only the two good runs, nothing staged
    assert run_folders(tmp_path) == sorted(Path(ends[n].run_dir).name for n in (0, 3))
    assert not any((tmp_path / STAGING_DIR).iterdir())


def test_stop_cancels_running_and_waiting_trials(cluster, tmp_path):
    # 2 CPUs: trials 0 and 1 run, 2 and 3 wait; the stop comes at the first epoch's end after both have started
    trials = [Trial("ray-stop", i, tiny(i, epochs=200, max_train_samples=4000)) for i in range(4)]
    ends, events, rc, client = sweep(cluster, trials, tmp_path, stop_after_epoch=True, started_first=2)
    assert rc == 0, client.stderr_tail
    assert sorted(ends) == [0, 1, 2, 3] and {e.state for e in ends.values()} == {"cancelled"}
    started = {ev["trial"] for ev in events if ev.get("event") == "started"}
    with_folder = {n for n, e in ends.items() if e.run_dir is not None}
    assert with_folder == started and len(started) == 2
    # the trial whose epoch end sent the stop: the first epoch event after the second start
    second_start = [i for i, ev in enumerate(events) if ev.get("event") == "started"][1]
    first_epoch = next(ev["trial"] for ev in events[second_start:] if ev.get("event") == "epoch")
    for n in with_folder:
        rec = RunRecord.open(ends[n].run_dir)
        assert rec.state == "cancelled" and rec.message == "the sweep was stopped"
        # the trial whose epoch end sent the stop has it on disk; the other may have been mid-epoch
        assert (1 if n == first_epoch else 0) <= rec.status_doc["epochs_completed"] < 200
        assert len(rec.history()) == rec.status_doc["epochs_completed"]
    assert run_folders(tmp_path) == sorted(Path(ends[n].run_dir).name for n in with_folder)


def test_a_killed_helper_leaves_no_local_cluster_behind(tmp_path):
    """``--ray local`` through the helper; the helper killed (SIGKILL) mid-trial: its cluster stops by itself."""
    trials = [Trial("ray-kill", 0, tiny(0, epochs=200, max_train_samples=4000))]
    client = RayHelperClient.start("local", trials, tmp_path, num_cpus=1)
    info = None
    try:
        for ev in client:
            if isinstance(ev, dict) and ev.get("event") == "cluster":
                info = ev
            if isinstance(ev, dict) and ev.get("event") == "epoch":
                assert fetch_auth_mode(info["dashboard_url"]) == "token"
                client.kill()
                break
        client.close()
        assert info is not None and client.returncode == -signal.SIGKILL
        deadline = time.monotonic() + 60
        while fetch_auth_mode(info["dashboard_url"], timeout_s=1) is not None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert fetch_auth_mode(info["dashboard_url"], timeout_s=1) is None
    finally:
        if info is not None:  # what only the killed helper would have removed: the node's temporary folder
            shutil.rmtree(info["folder"], ignore_errors=True)


def test_the_cluster_we_start_requires_its_token(cluster):
    assert fetch_auth_mode(cluster.dashboard_url) == "token"
    assert is_loopback(cluster.dashboard_url)
    assert check_cluster_auth_mode(cluster.address, cluster.dashboard_url) == []
    assert Path(cluster.env["RAY_AUTH_TOKEN_PATH"]).stat().st_mode & 0o077 == 0
    # that the dashboard (and its Jobs API) and every other port listen on the loopback only: the test below


def _descendants(pid: int) -> set[int]:
    """``pid`` and every process below it (from /proc/<pid>/stat's parent field)."""
    parent = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, grew = {pid}, True
    while grew:
        new = {p for p, pp in parent.items() if pp in found} - found
        found |= new
        grew = bool(new)
    return found


def _proc_address(hex_addr: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address of /proc/net/tcp{,6}: hex 32-bit words in host order (little-endian on every Linux we run)."""
    raw = bytes.fromhex(hex_addr)
    return ipaddress.ip_address(b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4)))


def listening_sockets(pids: set[int]) -> list[tuple[int, str, str, int]]:
    """(pid, process name, address, port) of every TCP socket in LISTEN that one of ``pids`` holds, from /proc."""
    listen = {}
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A":  # TCP_LISTEN
                addr, port = f[1].split(":")
                listen[f[9]] = (_proc_address(addr), int(port, 16))
    out = []
    for pid in sorted(pids):
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
        except OSError:  # gone, or not ours
            continue
        for link in links:
            inode = link[len("socket:["):-1] if link.startswith("socket:[") else None
            if inode in listen:
                addr, port = listen[inode]
                out.append((pid, name, str(addr), port))
    return out


def _is_loopback(addr: str) -> bool:
    ip = ipaddress.ip_address(addr)
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


@pytest.mark.skipif(not Path("/proc/net/tcp").is_file(), reason="platform: the socket listing reads Linux's /proc")
def test_every_port_of_the_local_cluster_listens_on_the_loopback(cluster):
    """Issue 28: measured with ``ss -ltnp`` on Ray 2.60 before the fix, a ``LocalCluster`` listened on every
    interface with its GCS, raylet (node manager, object manager) and dashboard agent gRPC ports (guarded by the
    token), and with three Prometheus metrics servers on 0.0.0.0 without any token (dashboard 44227, autoscaler
    monitor 44217, dashboard agent); the runtime-env agent and the agent's HTTP port listened on the machine's
    address. Now the node is single-machine (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``) and every socket of its
    processes listens on the loopback, the token-guarded ones included."""
    pids = _descendants(cluster._proc.pid)
    deadline = time.monotonic() + 60  # the dashboard agent, the last to start, opens its ports after the node is up
    while True:
        socks = listening_sockets(pids)
        agent = [s for s in socks if s[1].startswith("ray::Dashboard")]  # comm: 15 characters
        if len(agent) >= 3 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
        pids = _descendants(cluster._proc.pid)
    ports = {s[3] for s in socks}
    assert split_address(cluster.address)[1] in ports and split_address(cluster.dashboard_url)[1] in ports
    assert len(agent) >= 3, socks  # its gRPC, HTTP and metrics ports: the listing saw the whole node
    assert [s for s in socks if not _is_loopback(s[2])] == []
    assert is_loopback(cluster.address)


# ---------------------------------------------------------------------------------------------------- the policy
def test_remote_cluster_without_token_is_refused_unless_overridden():
    with pytest.raises(RaySecurityError) as info:
        check_address(REMOTE, env=NO_TOKEN_ENV)
    text = str(info.value)
    assert REMOTE in text and "arbitrary code" in text and OVERRIDE_FLAG in text and "RAY_AUTH_MODE=token" in text
    (warning,) = check_address(REMOTE, allow_unauthenticated=True, env=NO_TOKEN_ENV)
    assert warning.startswith("WARNING") and "arbitrary code" in warning
    assert check_address(REMOTE, env={"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "abc"}) == []
    # a token without the mode is not token authentication
    with pytest.raises(RaySecurityError):
        check_address(REMOTE, env={"RAY_AUTH_MODE": "disabled", "RAY_AUTH_TOKEN": "abc"})
    # the loopback is warned about, not refused
    (loop,) = check_address("127.0.0.1:6379", env=NO_TOKEN_ENV)
    assert "other users of this machine" in loop


@pytest.mark.parametrize("address, host, port, loopback", [
    ("127.0.0.1:6379", "127.0.0.1", 6379, True), ("ray://localhost:10001", "localhost", 10001, True),
    ("[::1]:6379", "::1", 6379, True), ("127.8.9.10", "127.8.9.10", None, True),
    ("10.0.0.5:6379", "10.0.0.5", 6379, False), ("head.example.org:6379", "head.example.org", 6379, False),
])
def test_addresses_are_read_and_classified(address, host, port, loopback):
    assert split_address(address) == (host, port)
    assert is_loopback(address) is loopback


def test_the_helper_refuses_a_remote_cluster_without_token(tmp_path):
    client = RayHelperClient.start(REMOTE, [Trial("s", 0, tiny(0))], tmp_path, env=NO_TOKEN_ENV)
    events = list(client)
    assert client.close() == 2
    assert client.refused and events[-1]["event"] == "error" and "arbitrary code" in client.error
    assert not any(isinstance(e, TrialEnd) for e in events) and run_folders(tmp_path) == []


def test_sweep_command_options_give_a_ray_executor_that_refuses_without_token(tmp_path, monkeypatch):
    for k, v in NO_TOKEN_ENV.items():
        monkeypatch.setenv(k, v)
    parser = argparse.ArgumentParser()
    add_ray_arguments(parser)
    assert executor_for(parser.parse_args([]), Workspace(tmp_path)) is None  # the local executor's case
    ex = executor_for(parser.parse_args(["--ray", REMOTE, "--ray-trials-per-gpu", "2"]), Workspace(tmp_path))
    assert isinstance(ex, RayExecutor) and ex.address == REMOTE and ex.trials_per_gpu == 2
    assert not ex.allow_unauthenticated
    ended: list = []
    with pytest.raises(RaySecurityError, match=OVERRIDE_FLAG):  # refused before Ray is imported or anything sent
        ex.run([Trial("s", 0, tiny(0))], ended.append, threading.Event())
    assert ended == [] and run_folders(tmp_path) == []
    args = parser.parse_args(["--ray", REMOTE, OVERRIDE_FLAG])
    assert executor_for(args, Workspace(tmp_path)).allow_unauthenticated


class _ModeHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the http.server name
        body = json.dumps({"authentication_mode": "disabled"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_cluster_that_says_its_authentication_is_disabled_is_refused():
    server = http.server.HTTPServer(("127.0.0.1", 0), _ModeHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"127.0.0.1:{server.server_address[1]}"
        assert fetch_auth_mode(url) == "disabled"
        with pytest.raises(RaySecurityError, match="authentication 'disabled'"):
            check_cluster_auth_mode(REMOTE, url)
        (w,) = check_cluster_auth_mode(REMOTE, url, allow_unauthenticated=True)
        assert w.startswith("WARNING")
        (unknown,) = check_cluster_auth_mode(REMOTE, "127.0.0.1:9")  # nothing listens on the discard port
        assert "did not say" in unknown
    finally:
        server.shutdown()
        server.server_close()


def test_task_resources_give_a_gpu_fraction_to_cuda_trials_only():
    assert task_resources(tiny(0), "auto", 0) == {"num_cpus": 1.0, "num_gpus": 0.0}
    assert task_resources(tiny(0, device="cuda"), "auto", 0, trials_per_gpu=4) == {"num_cpus": 1.0, "num_gpus": 0.25}
    assert task_resources(tiny(0, device="auto", threads=2), "auto", 8, 2) == {"num_cpus": 2.0, "num_gpus": 0.5}
    assert task_resources(tiny(0, device="auto"), "cpu", 8) == {"num_cpus": 1.0, "num_gpus": 0.0}


def test_parse_damage_reads_the_test_hook():
    assert parse_damage("1:config.json,2:best.pt,1:status.json") == {1: ["config.json", "status.json"],
                                                                      2: ["best.pt"]}
    with pytest.raises(ValueError, match="cannot read 'x:config.json'"):
        parse_damage("x:config.json")


# ---------------------------------------------------------------------------------------------------- the import
@pytest.fixture(scope="module")
def returned(demo, tmp_path_factory):
    """A real run folder as a task returns it: (run id, {name: bytes})."""
    ws = Workspace(tmp_path_factory.mktemp("worker"))
    r = make_trainer(tiny(0), dataset=demo, workspace=ws).run()
    return r.run_id, {p.name: p.read_bytes() for p in Path(r.run_dir).iterdir()}


def _reserve(root: Path, run_id: str) -> Workspace:
    ws = Workspace(root)
    (ws.runs_dir / run_id).mkdir(parents=True)
    return ws


def test_import_writes_the_run_as_it_came(returned, tmp_path):
    run_id, files = returned
    ws = _reserve(tmp_path, run_id)
    rec = import_run(ws, run_id, files)
    assert rec.state == "succeeded" and rec.run_dir == ws.runs_dir / run_id
    assert {p.name: p.read_bytes() for p in rec.run_dir.iterdir()} == files


@pytest.mark.parametrize("damage, expected", [
    ({"../evil.json": b"{}"}, "not a plain relative path"),
    ({"status.json": b'{"state": "running", "run_id": "x"}'}, "field 'run_id'"),
    ({"results.h5": b"not hdf5"}, "results.h5: cannot read the results"),
    ({"status.json": b'{"state": "running"}'}, "status.json: field 'run_id' is None"),
    ({"history.csv": b"\xff\xfe\x00"}, "history.csv: not UTF-8 text"),
])
def test_import_refuses_a_malformed_folder_and_writes_nothing(returned, tmp_path, damage, expected):
    run_id, files = returned
    ws = _reserve(tmp_path, run_id)
    with pytest.raises(ReturnedRunError, match=expected.replace("(", r"\(")) as info:
        import_run(ws, run_id, {**files, **damage})
    assert str(tmp_path / STAGING_DIR) not in str(info.value)
    assert list((ws.runs_dir / run_id).iterdir()) == []  # the reserved folder is as it was: empty
    assert not any((tmp_path / STAGING_DIR).iterdir()) and not (tmp_path / "evil.json").exists()


def test_read_returned_accepts_only_text_meta_and_bytes():
    meta = json.dumps({"format": TASK_FORMAT, "state": "succeeded"})
    assert read_returned({"meta": meta, "files": {"log.txt": b"x"}}) == ({"format": TASK_FORMAT,
                                                                          "state": "succeeded"}, {"log.txt": b"x"})
    for bad in ({"meta": meta, "files": {"log.txt": "text"}}, {"meta": "{}", "files": {}}, ["meta"],
                {"meta": meta, "files": {"/etc/passwd": b""}}):
        with pytest.raises(ReturnedRunError):
            read_returned(bad)


# ---------------------------------------------------------------------------------------------------- groups
def test_a_group_of_trials_is_one_task_and_each_member_is_bitwise_its_local_twin(cluster, demo, tmp_path):
    trials = [Trial("ray-group", i, tiny(i), group=0 if i < 2 else 1) for i in range(4)]
    ends, events, rc, client = sweep(cluster, trials, tmp_path / "remote")
    assert rc == 0, client.stderr_tail
    assert {e.state for e in ends.values()} == {"succeeded"}, [e.message for e in ends.values()]
    submitted = {ev["trial"]: ev for ev in events if ev.get("event") == "submitted"}
    assert [submitted[n]["members"] for n in range(4)] == [[0, 1], [0, 1], [2, 3], [2, 3]]  # two tasks
    assert all(submitted[n]["resources"] == {"num_cpus": 1.0, "num_gpus": 0.0} for n in range(4))
    started = {ev["trial"]: ev for ev in events if ev.get("event") == "started"}
    assert started[0]["pid"] == started[1]["pid"] and started[2]["pid"] == started[3]["pid"]  # one process each
    local_ws = Workspace(tmp_path / "local")
    for t in trials:
        local = make_trainer(t.config, dataset=demo, workspace=local_ws).run()
        same_run.assert_twins(Path(ends[t.number].run_dir), local.run_dir)
        rec = RunRecord.open(ends[t.number].run_dir)
        assert rec.state == "succeeded" and rec.config.seed == t.number
    assert run_folders(tmp_path / "remote") == sorted(Path(e.run_dir).name for e in ends.values())


def test_group_resources_units_and_a_group_return_of_the_wrong_shape():
    from dpd_desktop.sweep.ray_executor import _units, group_resources
    from dpd_desktop.sweep.ray_task import read_group_returned

    assert group_resources(tiny(0), 8, "auto", 0) == {"num_cpus": 1.0, "num_gpus": 0.0}
    assert group_resources(tiny(0, device="cuda"), 2, "auto", 0, trials_per_gpu=4) == {"num_cpus": 1.0,
                                                                                       "num_gpus": 0.5}
    assert group_resources(tiny(0, device="cuda"), 8, "auto", 0, trials_per_gpu=4) == {"num_cpus": 1.0,
                                                                                       "num_gpus": 1.0}
    ts = [Trial("s", i, tiny(i), group=g) for i, g in enumerate([3, None, 5, 3, 5])]
    assert [[t.number for t in u] for u in _units(ts)] == [[0, 3], [1], [2, 4]]
    with pytest.raises(ReturnedRunError, match="the group's task returned a list of 1, expected a list of its 2"):
        read_group_returned([{}], 2)
    with pytest.raises(ReturnedRunError, match="returned a dict, expected a list"):
        read_group_returned({"meta": "{}", "files": {}}, 2)
