"""Headless training end to end: every dataset format trains without code changes; training lowers val NMSE."""
import json
import math
from pathlib import Path

import numpy as np
import pytest

from dpd_desktop.cli.entry import main as cli_main
from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import IQDataset, Split, load_dataset, make_demo_dataset
from dpd_desktop.data.readers import save_hdf5, save_split_csv
from dpd_desktop.runs.artifacts import load_checkpoint, read_history_csv
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training.trainer import Trainer
from datasets_dir import DATASETS  # tests/datasets_dir.py

SHARED = DATASETS
TINY = ["--hidden-size", "6", "--epochs", "1", "--frame-length", "40", "--stride", "16", "--device", "cpu",
        "--no-plots", "--quiet"]


def _write_single_csv(ds, folder: Path) -> Path:
    folder.mkdir(parents=True)
    x = np.concatenate([ds.train.x, ds.val.x, ds.test.x])
    y = np.concatenate([ds.train.y, ds.val.y, ds.test.y])
    n = len(x)
    ratios = {"train": len(ds.train.x) / n, "val": len(ds.val.x) / n, "test": len(ds.test.x) / n}
    with open(folder / "pa.csv", "w") as fh:
        fh.write("I_in,Q_in,I_out,Q_out\n")
        np.savetxt(fh, np.hstack([x, y]), fmt="%.9g", delimiter=",")
    spec = ds.spec.to_dict()
    spec.update({"dataset_format": "single_csv", "csv_filename": "pa.csv", "split_ratios": ratios})
    (folder / "spec.json").write_text(json.dumps(spec))
    return folder


@pytest.mark.parametrize("fmt", ["split_csv", "single_csv", "hdf5", "hdf5_complex"])
def test_every_format_trains(tmp_path, fmt):
    ds = make_demo_dataset(seed=3, n_train=4000, n_val=4096, n_test=4096)
    if fmt == "split_csv":
        path = save_split_csv(ds, tmp_path / "split")
    elif fmt == "single_csv":
        path = _write_single_csv(ds, tmp_path / "single")
    else:
        path = save_hdf5(ds, tmp_path / "d.h5", complex_samples=fmt == "hdf5_complex")
    loaded = load_dataset(path)
    assert [len(s.x) for s in (loaded.train, loaded.val, loaded.test)] == [4000, 4096, 4096]
    rc = cli_main(["--workspace", str(tmp_path / "ws"), "train-pa", "--dataset", str(path), *TINY])
    assert rc == 0
    run = next((tmp_path / "ws" / "runs").iterdir())
    rows = read_history_csv(run / "history.csv")
    assert len(rows) == 1 and math.isfinite(float(rows[0]["VAL_NMSE"]))
    state, meta = load_checkpoint(run / "best.pt")
    assert meta["backbone"] == "gru" and meta["epoch"] == 0 and "backbone.rnn.weight_ih_l0" in state
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "succeeded"
    # the same data in any format gives the same numbers (the files round-trip float32 exactly)
    assert loaded.fingerprint() == ds.fingerprint()


def _slice(ds: IQDataset, n_train: int, n_eval: int) -> IQDataset:
    def cut(s: Split, n):
        return Split(s.x[:n], s.y[:n], x64=None if s.x64 is None else s.x64[:n],
                     y64=None if s.y64 is None else s.y64[:n])

    return IQDataset(name=ds.name + " (slice)", source=ds.source, spec=ds.spec, train=cut(ds.train, n_train),
                     val=cut(ds.val, n_eval), test=cut(ds.test, n_eval))


@pytest.mark.skipif(not (SHARED / "DPA_160MHz").is_dir(), reason="../shared/datasets/DPA_160MHz not present")
def test_cpu_training_on_dpa160_slice_lowers_val_nmse(tmp_path):
    ds = _slice(load_dataset(SHARED / "DPA_160MHz"), 20_000, 16_384)
    events = []
    cfg = ExperimentConfig(step="pa", dataset=str(ds.source), backbone="gru", hidden_size=10, epochs=3,
                           frame_length=50, stride=4, device="cpu")
    res = Trainer(cfg, dataset=ds, workspace=Workspace(tmp_path), observers=[events.append]).run()
    assert res.state == "succeeded", res.message
    nmse = [float(r["VAL_NMSE"]) for r in res.history]
    assert nmse[-1] < nmse[0] - 1.0, nmse
    assert all(b < a for a, b in zip(nmse, nmse[1:])), nmse
    # the final test metrics come from the selected checkpoint and equal that epoch's logged test metrics
    best = res.history[res.best_epoch]
    assert res.test_metrics["NMSE"] == pytest.approx(float(best["TEST_NMSE"]), abs=0)
    assert res.best_epoch == int(np.argmin(nmse))
