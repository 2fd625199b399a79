"""The numbers of a CPU run are pinned to those of commit cee7e91 (before the restructure): history metrics and the
selected checkpoint's tensors must stay bitwise equal, for a PA run and a DPD run through it."""
import hashlib
import json
from pathlib import Path

import pytest
import torch

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.runs.artifacts import load_checkpoint
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training.trainer import Trainer

PINNED = json.loads((Path(__file__).parent / "data" / "pinned_cee7e91.json").read_text())
BASE = dict(dataset="demo", backbone="gru", hidden_size=6, epochs=3, frame_length=40, stride=8, batch_size=32,
            device="cpu", threads=1)

pytestmark = pytest.mark.skipif(
    torch.__version__.split("+")[0] != PINNED["_torch"],
    reason=f"pinned numbers: recorded with torch {PINNED['_torch']} CPU (this is torch {torch.__version__})")


def _state_hash(path: Path) -> tuple[str, int]:
    state, meta = load_checkpoint(path)
    h = hashlib.sha256()
    for k in sorted(state):
        h.update(k.encode())
        h.update(state[k].contiguous().numpy().tobytes())
    return h.hexdigest(), meta["epoch"]


def _history(rows):
    keys = [k for k in rows[0] if k.startswith(("TRAIN", "VAL", "TEST", "LR"))]
    return [{k: float(r[k]).hex() for k in keys} for r in rows]


def test_pa_and_dpd_runs_bitwise_equal_to_cee7e91(tmp_path):
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
    for name, res in (("pa", pa), ("dpd", dpd)):
        want = PINNED[name]
        assert _history(res.history) == want["history"], name
        assert list(_state_hash(res.run_dir / "best.pt")) == want["best"], name
        assert {k: float(v).hex() for k, v in res.test_metrics.items()} == want["test"], name
