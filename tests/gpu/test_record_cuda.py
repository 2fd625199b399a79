"""On CUDA the epoch ends run on a worker thread over a snapshot (training/overlap.py): the run record they produce
must be bitwise the one of inline epoch ends (run on the GPU machine; skipped without CUDA)."""
import hashlib
import json
from pathlib import Path

import h5py
import pytest
import torch

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training import trainer as trainer_mod
from dpd_desktop.training.trainer import Trainer

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the GPU machine)")]


def _digest(run_dir: Path) -> dict:
    """Every number the record holds: history, best.pt / last.pt tensors (model, optimizer, scheduler), results."""
    def tensors(obj, h):
        if torch.is_tensor(obj):
            h.update(obj.contiguous().cpu().numpy().tobytes())
        elif isinstance(obj, dict):
            for k in sorted(obj, key=str):
                if k in ("TIME:", "run_id"):  # last.pt's history rows and best record: the wall clock, the folder
                    continue
                h.update(str(k).encode())
                tensors(obj[k], h)
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                tensors(v, h)
        else:
            h.update(repr(obj).encode())

    out = {}
    rows = (run_dir / "history.csv").read_text().splitlines()
    t = rows[0].split(",").index("TIME:")
    out["history"] = [[v for i, v in enumerate(r.split(",")) if i != t] for r in rows]
    for name in ("best.pt", "last.pt"):
        obj = torch.load(run_dir / name, weights_only=True)
        obj.get("meta", {}).pop("run_id", None)
        h = hashlib.sha256()
        tensors(obj, h)
        out[name] = h.hexdigest()
    with h5py.File(run_dir / "results.h5") as f:
        for g in f:
            for k in f[g]:
                out[f"{g}/{k}"] = hashlib.sha256(f[g][k][()].tobytes()).hexdigest()
            out[f"{g}/attrs"] = {k: float(v) for k, v in f[g].attrs.items()}
    st = json.loads((run_dir / "status.json").read_text())
    out["status"] = {k: st[k] for k in ("state", "best_epoch", "best_value", "test_metrics", "val_metrics")}
    return out


def test_overlapped_epoch_ends_write_the_record_inline_ones_write(tmp_path, monkeypatch):
    ds = make_demo_dataset(seed=2, n_train=20480, n_val=4096, n_test=4096)
    base = dict(dataset="demo", backbone="gru", hidden_size=8, epochs=5, frame_length=100, stride=2, batch_size=64,
                device="cuda")
    digests = {}
    for overlap in (True, False):
        monkeypatch.setattr(trainer_mod, "OVERLAP_EPOCH_ENDS", overlap)
        ws = Workspace(tmp_path / f"ws-{overlap}")
        pa = Trainer(ExperimentConfig(step="pa", **base), dataset=ds, workspace=ws).run()
        assert pa.state == "succeeded", pa.message
        dpd = Trainer(ExperimentConfig(step="dpd", pa_run=str(pa.run_dir), **base), dataset=ds, workspace=ws).run()
        assert dpd.state == "succeeded", dpd.message
        digests[overlap] = (_digest(Path(pa.run_dir)), _digest(Path(dpd.run_dir)))
    for a, b in zip(digests[True], digests[False]):
        assert a == b
