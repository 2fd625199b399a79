"""Child process of tests/unit/test_disk_full_real.py: a tiny PA run into a workspace on a full(-ing) file system,
then the run folder read back; prints one JSON line with what it found (the parent cannot see a private mount).

    python disk_full_child.py WORKSPACE [FSIZE_LIMIT_BYTES]

With FSIZE_LIMIT_BYTES the process's file-size limit (RLIMIT_FSIZE) stands in for the full disk: writes beyond it
fail with EFBIG ("File too large"), a real kernel refusal like ENOSPC.
"""
from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import torch

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.runs import artifacts
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training.trainer import Trainer


def main() -> None:
    ws = Path(sys.argv[1])
    demo = make_demo_dataset(seed=2, n_train=3000, n_val=1024, n_test=1024, nperseg=256)  # before any limit
    if len(sys.argv) > 2:
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write then fails with EFBIG instead of killing us
        limit = int(sys.argv[2])
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    torch.set_num_threads(1)
    cfg = ExperimentConfig(step="pa", dataset="demo", backbone="gru", hidden_size=4, epochs=3, frame_length=40,
                           stride=16, batch_size=32, device="cpu", threads=1)
    res = Trainer(cfg, dataset=demo, workspace=Workspace(ws)).run()
    out = {"state": res.state, "message": res.message, "run_dir": res.run_dir is not None,
           "runs_left": sorted(p.name for p in (ws / "runs").iterdir()) if (ws / "runs").is_dir() else []}
    if res.run_dir is not None:
        d = Path(res.run_dir)
        out["files"] = sorted(p.name for p in d.iterdir())
        out["leftovers"] = sorted(p.name for p in d.rglob("*.tmp"))
        try:
            rec = RunRecord.open(d)
            st = rec.status_doc
            out.update(record_state=rec.state, record_message=rec.message, history_rows=len(rec.history()),
                       epochs_completed=st.get("epochs_completed"), best_epoch=st.get("best_epoch"))
            if st.get("best_epoch") is not None:
                out["best_pt_epoch"] = artifacts.load_checkpoint(d / "best.pt")[1]["epoch"]
            if (d / "last.pt").exists():
                out["last_pt_epoch"] = torch.load(d / "last.pt", weights_only=True)["epoch"]
            out["log_has_failure"] = "FAILED: " in (d / "log.txt").read_text() if (d / "log.txt").exists() else None
            out["reserve_left"] = (d / ".space-reserve").exists()
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails
            out["read_error"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
