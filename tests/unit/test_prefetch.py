"""Dataset prefetch in a forked child (command-line start-up): same dataset as a direct load, errors reported as
without it, no child left behind."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dpd_desktop.data import load_dataset
from tests.unit.test_readers import SPLIT_FILES, make_split_folder

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")

CHILD = r"""
import hashlib, json, os, sys
from dpd_desktop.data.prefetch import DatasetPrefetch
pf = DatasetPrefetch(sys.argv[1])
forked = pf.pid is not None
ds = pf.result()
out = {"forked": forked, "torch_loaded": "torch" in sys.modules, "reaped": pf.pid is None, "ok": ds is not None}
if ds is not None:
    h = hashlib.sha256()
    for s in (ds.train, ds.val, ds.test):
        for a in (s.x, s.y, s.x64, s.y64):
            h.update(a.tobytes()); h.update(str(a.dtype).encode())
    out.update(fingerprint=ds.fingerprint(), digest=h.hexdigest(), name=ds.name, spec=repr(ds.spec))
print(json.dumps(out))
"""


def _child(path) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_prefetched_dataset_equals_direct_load(tmp_path):
    folder = make_split_folder(tmp_path / "ds", n=300)
    got = _child(folder)
    assert got["forked"] and got["ok"] and got["reaped"] and not got["torch_loaded"]
    ds = load_dataset(folder)
    assert got["fingerprint"] == ds.fingerprint()
    assert got["digest"] == _digest_any(ds)  # every array bit for bit, float64 copies included
    assert got["name"] == ds.name and got["spec"] == repr(ds.spec)


def test_child_failure_means_load_in_process(tmp_path):
    folder = make_split_folder(tmp_path / "bad", n=50)
    (folder / SPLIT_FILES[0]).write_text("I,Q\n0.1,zzz\n")
    got = _child(folder)
    assert got["forked"] and not got["ok"] and got["reaped"]


def test_no_fork_once_torch_is_imported():
    import torch  # noqa: F401

    from dpd_desktop.data.prefetch import DatasetPrefetch

    pf = DatasetPrefetch("/nonexistent")
    assert pf.pid is None and pf.result() is None


def test_cli_reports_a_bad_file_as_before(tmp_path):
    """With the prefetch child in play, a malformed file still gives exit 2 and names the file and line."""
    folder = make_split_folder(tmp_path / "bad", n=50)
    (folder / SPLIT_FILES[0]).write_text("I,Q\n0.1,zzz\n")
    r = subprocess.run([sys.executable, "-m", "dpd_desktop", "--workspace", str(tmp_path / "ws"), "train-pa",
                        "--dataset", str(folder), "--epochs", "1", "--device", "cpu"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert SPLIT_FILES[0] in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "ws" / "runs").exists() or not any((tmp_path / "ws" / "runs").iterdir())


def test_cli_trains_from_the_prefetched_dataset(tmp_path):
    folder = make_split_folder(tmp_path / "ds", n=600, spec={"input_signal_fs": 800e6, "bw_main_ch": 200e6,
                                                              "n_sub_ch": 10, "nperseg": 64})
    timing = tmp_path / "t.jsonl"
    env = dict(os.environ, DPD_DESKTOP_TIMING=str(timing))
    r = subprocess.run([sys.executable, "-m", "dpd_desktop", "--workspace", str(tmp_path / "ws"), "train-pa",
                        "--dataset", str(folder), "--epochs", "1", "--device", "cpu", "--hidden-size", "4",
                        "--frame-length", "20", "--stride", "8", "--no-plots", "--quiet"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    marks = [json.loads(line)["mark"] for line in timing.read_text().splitlines()]
    assert "dataset_prefetch_wait" in marks and "dataset_load_start" not in marks  # the child's dataset was used
    run = next((tmp_path / "ws" / "runs").iterdir())
    cfg = json.loads((run / "config.json").read_text())
    assert cfg["dataset"]["fingerprint"] == load_dataset(folder).fingerprint()
    assert json.loads((run / "status.json").read_text())["state"] == "succeeded"
    rows = (run / "history.csv").read_text().splitlines()
    assert len(rows) == 2 and np.isfinite(float(rows[1].split(",")[rows[0].split(",").index("TEST_NMSE")]))


def test_cuda_driver_device_index_and_harmless_without_gpu():
    from dpd_desktop.cuda_driver import device_index, retain_primary_context_in_background

    assert [device_index(d) for d in ("auto", "cuda", "cuda:1", "cpu", "mps", "cuda:x")] == [0, 0, 1, None, None, None]
    assert retain_primary_context_in_background("cpu") is None
    t = retain_primary_context_in_background("cuda")  # no driver here (or a GPU): never raises
    t.join(timeout=30)
    assert not t.is_alive()


def test_stream_round_trip_and_truncation(tmp_path):
    """The child's stream (JSON header + raw arrays, no pickle) rebuilds the dataset exactly, float64 copies present
    or absent; a truncated stream is refused."""
    from dpd_desktop.data import make_demo_dataset
    from dpd_desktop.data.prefetch import _decode, _encode

    for ds in (load_dataset(make_split_folder(tmp_path / "ds", n=300)), make_demo_dataset()):
        got = _decode(bytearray(_encode(ds)))
        assert _digest_any(got) == _digest_any(ds) and got.fingerprint() == ds.fingerprint()
        assert repr(got.spec) == repr(ds.spec) and got.name == ds.name and got.source == ds.source
        assert got.train.x.flags.writeable
    with pytest.raises(ValueError, match="trailing or missing bytes"):
        _decode(bytearray(_encode(ds))[:-8])
    assert _decode(bytearray(b"DPDPF1NO")) is None


def _digest_any(ds) -> str:
    import hashlib

    h = hashlib.sha256()
    for s in (ds.train, ds.val, ds.test):
        for a in (s.x, s.y, s.x64, s.y64):
            h.update(b"none" if a is None else a.tobytes() + str(a.dtype).encode())
    return h.hexdigest()
