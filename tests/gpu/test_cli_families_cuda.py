"""Every family trains as PA and as DPD through the command line on CUDA, with the CUDA graph on, and run-dpd
exports u (run on the GPU machine; skipped without CUDA). The window's counterpart is
tests/gui/test_main_window.py::test_every_family_trains_as_pa_and_dpd_from_the_window[...-cuda]."""
import json

import pytest
import torch

from dpd_desktop.cli.entry import main as cli_main
from dpd_desktop.runs.workspace import Workspace

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the GPU machine)")]

TINY = ["--dataset", "demo", "--epochs", "2", "--device", "cuda", "--hidden-size", "8", "--frame-length", "50",
        "--stride", "8", "--no-plots", "--quiet"]


@pytest.mark.parametrize("backbone", ["gru", "dgru", "lstm", "tres_gru", "rvtdcnn"])
def test_cli_pa_dpd_run_dpd_on_cuda(tmp_path, backbone):
    ws = tmp_path / "ws"
    assert cli_main(["--workspace", str(ws), "train-pa", "--backbone", backbone, *TINY]) == 0
    pa = Workspace(ws).list_runs(step="pa")[0]
    assert cli_main(["--workspace", str(ws), "train-dpd", "--pa-run", pa.run_id, "--backbone", backbone,
                     *TINY]) == 0
    dpd = Workspace(ws).list_runs(step="dpd")[0]
    for run in (pa, dpd):
        cfg = json.loads((run.run_dir / "config.json").read_text())
        assert cfg["device"]["device"].startswith("cuda")
        assert cfg["device"]["fast_path"] == "on" and cfg["device"]["fast_path_optimizer"] == "in the graph"
        assert json.loads((run.run_dir / "status.json").read_text())["state"] == "succeeded"
    out = tmp_path / "u.h5"
    assert cli_main(["--workspace", str(ws), "run-dpd", "--run", dpd.run_id, "--out", str(out),
                     "--device", "cuda"]) == 0
    assert out.is_file() and (tmp_path / "u.h5.meta.json").is_file()
