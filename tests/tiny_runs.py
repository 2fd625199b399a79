"""Tiny finished runs for the runs browser, compare and report tests: the demo dataset, GRU hidden size 4, frame
length 50, 2 epochs (about 1-2 s each on CPU), written by the real Trainer and RunWriter."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training.trainer import Trainer

DEMO = dict(seed=2, n_train=3000, n_val=4096, n_test=4096)
#: the fields in which run "b" differs from run "a" (config.json experiment): the expected config diff
B_DIFFERS = {"lr": 0.002, "seed": 1}


def tiny_config(**kw) -> ExperimentConfig:
    base = dict(step="pa", dataset="demo", backbone="gru", hidden_size=4, epochs=2, frame_length=50, stride=8,
                device="cpu")
    base.update(kw)
    return ExperimentConfig(**base)


def make_tiny_workspace(root: Path) -> dict[str, Path]:
    """A workspace with runs: ``a``, ``b`` (same dataset, :data:`B_DIFFERS`), ``c`` (another demo seed: another
    dataset), ``damaged`` (a copy of a whose best.pt is gone) and ``unreadable`` (config.json not JSON)."""
    ws = Workspace(root)
    ds = make_demo_dataset(**DEMO)
    out = {}
    out["a"] = Path(Trainer(tiny_config(), dataset=ds, workspace=ws).run().run_dir)
    out["b"] = Path(Trainer(tiny_config(**B_DIFFERS), dataset=ds, workspace=ws).run().run_dir)
    other = make_demo_dataset(**{**DEMO, "seed": 3})
    out["c"] = Path(Trainer(tiny_config(), dataset=other, workspace=ws).run().run_dir)
    dmg = ws.runs_dir / (out["a"].name + "-damaged")
    shutil.copytree(out["a"], dmg)
    (dmg / "best.pt").unlink()
    out["damaged"] = dmg
    bad = ws.runs_dir / "2000-01-01-000000-pa-unreadable"
    bad.mkdir(parents=True)
    (bad / "config.json").write_text("{ not json", encoding="utf-8")
    out["unreadable"] = bad
    return out


def status(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "status.json").read_text(encoding="utf-8"))


def model_block(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "config.json").read_text(encoding="utf-8"))["model"]
