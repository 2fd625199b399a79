"""Bitwise comparisons of two run folders (the group, sweep and Ray tests, CPU and GPU): :func:`assert_twins` —
history.csv's values but the clock and best.pt's tensors; :func:`assert_same_run` — also last.pt's model tensors and
results.h5's test arrays."""
from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import torch

from dpd_desktop.runs.artifacts import load_checkpoint, read_history_csv


def history_without_time(run_dir) -> list[dict]:
    """history.csv's rows, every column but the wall-clock ``TIME:``."""
    return [{k: v for k, v in row.items() if k != "TIME:"} for row in read_history_csv(Path(run_dir) / "history.csv")]


def assert_twins(a, b) -> None:
    """Bitwise: history.csv's values but the clock, best.pt's tensors (names, order, dtypes, values)."""
    assert history_without_time(a) == history_without_time(b)
    (sa, _), (sb, _) = load_checkpoint(Path(a) / "best.pt"), load_checkpoint(Path(b) / "best.pt")
    assert list(sa) == list(sb)
    for k, v in sb.items():
        assert sa[k].dtype == v.dtype and torch.equal(sa[k], v), k


def assert_same_run(ref: Path, run: Path, epochs: int) -> None:
    ref, run = Path(ref), Path(run)
    ha, hb = read_history_csv(ref / "history.csv"), read_history_csv(run / "history.csv")
    assert len(ha) == len(hb) == epochs
    for ra, rb in zip(ha, hb):
        ra.pop("TIME:"), rb.pop("TIME:")
        assert ra == rb
    (sa, _), (sb, _) = load_checkpoint(ref / "best.pt"), load_checkpoint(run / "best.pt")
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    la, lb = torch.load(ref / "last.pt", weights_only=True), torch.load(run / "last.pt", weights_only=True)
    assert la["model"].keys() == lb["model"].keys()
    assert all(torch.equal(la["model"][k], lb["model"][k]) for k in la["model"])
    with h5py.File(ref / "results.h5") as fa, h5py.File(run / "results.h5") as fb:
        for name in fa["test"]:
            assert np.array_equal(fa["test"][name][()], fb["test"][name][()]), name
