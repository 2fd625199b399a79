"""A real full disk: a tiny run into a small tmpfs (mounted in a private user and mount namespace with
``unshare -rm``, no privileges needed where user namespaces are allowed), in a child process
(tests/unit/disk_full_child.py) that reads the folder back. Sizes chosen so that the disk fills at the end (the
results file, which used to crash h5py), mid-run and at the start. Where no namespace can be made, the process's
file-size limit (RLIMIT_FSIZE: EFBIG, "File too large") stands in, a real kernel refusal too.

Each case: the process does not crash (exit 0, one JSON line), the run failed naming the file, status.json says
"failed" with that reason and log.txt holds the FAILED line (the writer's space reserve, runs/writer.py, takes them),
no temporary is left, status.json never claims more than the disk holds, and what it names (best.pt) loads. A disk
too full to start a run leaves no run folder and says so.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("disk_full_child.py")


def _env():
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _tmpfs_works(tmp_path) -> bool:
    if not shutil.which("unshare"):
        return False
    d = tmp_path / "probe"
    d.mkdir()
    r = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=16k tmpfs {d}"],
                       capture_output=True, timeout=30)
    return r.returncode == 0


def _child(tmp_path, size: str | None = None, fsize: int | None = None) -> dict:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    py = [sys.executable, str(CHILD), str(ws)]
    if size is not None:
        cmd = ["unshare", "-rm", "sh", "-c", f'mount -t tmpfs -o size={size} tmpfs "$1" && shift && exec "$@"',
               "sh", str(ws), *py]
    else:
        cmd = py + [str(fsize)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=_env(), cwd=str(ROOT))
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


ARTIFACTS = ("config.json", "status.json", "history.csv", "best.pt", "best.csv", "last.pt", "results.h5", "log.txt")


def _check(out: dict, reason: str) -> str:
    """The run failed naming one of its files and the reason, and what is on disk reads consistently; returns the
    file named."""
    assert out["state"] == "failed" and out["message"].endswith(f": cannot write: {reason}"), out
    artifact = out["message"].split(":", 1)[0]
    assert artifact in ARTIFACTS, out
    assert out["leftovers"] == [] and "read_error" not in out, out
    assert out["record_state"] == "failed" and out["record_message"] == out["message"], out
    assert out["log_has_failure"] and not out["reserve_left"], out
    assert (out["epochs_completed"] or 0) <= out["history_rows"]
    if out["best_epoch"] is not None:
        assert out["best_pt_epoch"] == out["best_epoch"]
    if out.get("epochs_completed"):
        assert out["last_pt_epoch"] + 1 >= out["epochs_completed"]
    return artifact


# tmpfs sizes / RLIMIT_FSIZE bytes for this run's artifacts (results.h5 ~70 KB, last.pt ~29 KB, the rest < 4 KB,
# the writer's reserve 32 KiB): the disk fills at the results, at a training state mid-run
TMPFS = ("128k", "64k")
TMPFS_TOO_SMALL = "36k"  # room for the first files but not for the reserve too: the run does not start
FSIZE = (60_000, 5_000)


def test_a_real_full_disk_fails_the_run_naming_the_file(tmp_path):
    """And, on a tmpfs, a disk too full to start a run: no run folder is left, the message says why (without a
    tmpfs, test_disk_full.py's injected full disk shows it)."""
    # TMPFS's sizes count 4 KiB pages (tmpfs rounds each file up to a page); with larger pages the file size limit
    if os.sysconf("SC_PAGE_SIZE") == 4096 and _tmpfs_works(tmp_path):
        named = [_check(_child(tmp_path, size=size), "No space left on device") for size in TMPFS]
        out = _child(tmp_path, size=TMPFS_TOO_SMALL)
        assert out["state"] == "failed" and not out["run_dir"] and out["runs_left"] == [], out
        assert out["message"].startswith("cannot start a run in the workspace ") and "disk is full" in out["message"]
    else:
        named = [_check(_child(tmp_path, fsize=limit), "File too large") for limit in FSIZE]
    assert named[0] == "results.h5" and len(set(named)) == len(named), named  # the end, and different files


def test_a_file_size_limit_fails_the_run_naming_the_file(tmp_path):
    """The stand-in on its own (it runs wherever RLIMIT_FSIZE exists: every POSIX system)."""
    named = [_check(_child(tmp_path, fsize=limit), "File too large") for limit in FSIZE]
    assert named == ["results.h5", "last.pt"]
