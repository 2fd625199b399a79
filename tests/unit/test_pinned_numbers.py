"""The numbers of a CPU run are pinned to those of commit cee7e91 (before the restructure): history metrics, the
selected epoch, the selected checkpoint's tensors and the test metrics, for a PA run and a DPD run through it.

On a machine whose arithmetic fingerprint (tests/machine.py) is the one recorded with the pinned file, they must be
bitwise equal; on any other machine (another CPU vendor or instruction set, MKL/oneDNN build, torch release) within
the stated tolerances of tests/machine.py. ``python tests/unit/test_pinned_numbers.py --record`` writes the file
again from this machine: do it only for a deliberate numeric change, or to add the tensors' values on a machine
that reproduces the recorded hashes.
"""
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ (pytest puts it there; a script run does not)
from machine import (PRINTED_ATOL, assert_close_array, assert_close_tensors, close_number, describe,  # noqa: E402
                     fingerprint, same_arithmetic)

from dpd_desktop.config import ExperimentConfig  # noqa: E402
from dpd_desktop.data import make_demo_dataset  # noqa: E402
from dpd_desktop.runs.artifacts import load_checkpoint  # noqa: E402
from dpd_desktop.runs.workspace import Workspace  # noqa: E402
from dpd_desktop.training.trainer import Trainer  # noqa: E402

PINNED_FILE = Path(__file__).parent / "data" / "pinned_cee7e91.json"
PINNED = json.loads(PINNED_FILE.read_text())
BASE = dict(dataset="demo", backbone="gru", hidden_size=6, epochs=3, frame_length=40, stride=8, batch_size=32,
            device="cpu", threads=1)
KEYS = ("TRAIN", "VAL", "TEST", "LR")


def _runs(tmp_path: Path) -> dict:
    """The pinned PA run and the DPD run through it, trained here."""
    threads = torch.get_num_threads()
    try:
        ds = make_demo_dataset(seed=2, n_train=3000, n_val=4096, n_test=4096)
        ws = Workspace(tmp_path)
        pa = Trainer(ExperimentConfig(step="pa", **BASE), dataset=ds, workspace=ws).run()
        assert pa.state == "succeeded", pa.message
        dpd = Trainer(ExperimentConfig(step="dpd", pa_run=str(pa.run_dir), **dict(BASE, hidden_size=5)),
                      dataset=ds, workspace=ws).run()
        assert dpd.state == "succeeded", dpd.message
    finally:
        torch.set_num_threads(threads)
    return {"pa": pa, "dpd": dpd}


def _state(path: Path) -> tuple[dict, int]:
    """best.pt's tensors as float arrays (in the file's order) and its epoch."""
    state, meta = load_checkpoint(path)
    return {k: v.contiguous().numpy() for k, v in state.items()}, meta["epoch"]


def _hash(state: dict) -> str:
    h = hashlib.sha256()
    for k in sorted(state):
        h.update(k.encode())
        h.update(state[k].tobytes())
    return h.hexdigest()


def _history(rows) -> list[dict]:
    keys = [k for k in rows[0] if k.startswith(KEYS)]
    return [{k: float(r[k]) for k in keys} for r in rows]


def _pinned_tensors(want: dict) -> dict:
    return {k: np.array([float.fromhex(x) for x in t["values"]], dtype=np.float32).reshape(t["shape"])
            for k, t in want["best_tensors"].items()}


def test_pa_and_dpd_runs_equal_to_cee7e91(tmp_path):
    runs = _runs(tmp_path)
    bitwise = same_arithmetic(PINNED["_fingerprint"])
    for name, res in runs.items():
        want = PINNED[name]
        hist = _history(res.history)
        state, epoch = _state(res.run_dir / "best.pt")
        test = {k: float(v) for k, v in res.test_metrics.items()}
        if bitwise:
            assert [{k: v.hex() for k, v in row.items()} for row in hist] == want["history"], name
            assert [_hash(state), epoch] == want["best"], name
            assert {k: v.hex() for k, v in test.items()} == want["test"], name
            continue
        why = f"{name} (compared within tolerance: {describe(PINNED['_fingerprint'])})"
        assert len(hist) == len(want["history"]), why
        for i, (row, wrow) in enumerate(zip(hist, want["history"])):
            assert list(row) == list(wrow), why
            bad = {k: (row[k], float.fromhex(v)) for k, v in wrow.items() if not close_number(row[k], float.fromhex(v))}
            assert not bad, f"{why}: epoch {i}: {bad}"
        assert epoch == want["best"][1], why
        assert_close_tensors(state, _pinned_tensors(want), why)
        assert list(test) == list(want["test"]), why
        bad = {k: (v, float.fromhex(want["test"][k])) for k, v in test.items()
               if not close_number(v, float.fromhex(want["test"][k]))}
        assert not bad, f"{why}: test metrics {bad}"


def test_the_tolerances_catch_a_change_of_the_science():
    """The fallback comparison is not blind: a metric moved by 5e-5 relative (0.0014 dB of a −28 dB NMSE; a rounding
    difference moves it by ~2e-7) fails it, and so does one weight moved by 1e-4 of its tensor's largest value."""
    want = float.fromhex(PINNED["pa"]["history"][-1]["VAL_NMSE"])
    assert close_number(want * (1 + 5e-7), want) and not close_number(want * (1 + 5e-5), want)
    assert not close_number(want + 2e-5 + 2e-6 * abs(want), want) and close_number(want + PRINTED_ATOL, want, True)
    t = _pinned_tensors(PINNED["pa"])
    k = next(iter(t))
    moved = t[k].copy()
    moved.flat[0] += 1e-4 * np.abs(t[k]).max()
    try:
        assert_close_array(moved, t[k], k)
    except AssertionError:
        pass
    else:
        raise AssertionError("a 1e-4 relative move passed the tensor tolerance")
    assert_close_array(t[k].copy(), t[k], k)


def record(tmp_path: Path) -> None:
    """Write PINNED_FILE from this machine's runs, keeping the recorded hashes' meaning (see the module docstring)."""
    runs = _runs(tmp_path)
    doc = {"_about": PINNED["_about"], "_torch": torch.__version__.split("+")[0], "_fingerprint": fingerprint()}
    for name, res in runs.items():
        state, epoch = _state(res.run_dir / "best.pt")
        doc[name] = {
            "best": [_hash(state), epoch],
            "history": [{k: v.hex() for k, v in row.items()} for row in _history(res.history)],
            "test": {k: float(v).hex() for k, v in res.test_metrics.items()},
            "best_tensors": {k: {"shape": list(v.shape), "values": [float(x).hex() for x in v.ravel()]}
                             for k, v in state.items()},
        }
        if doc[name]["best"] != PINNED[name]["best"] or doc[name]["history"] != PINNED[name]["history"]:
            print(f"{name}: this machine does not reproduce the pinned bits ({describe(PINNED.get('_fingerprint', {}))})")
    PINNED_FILE.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {PINNED_FILE}")


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        record(Path(d))
