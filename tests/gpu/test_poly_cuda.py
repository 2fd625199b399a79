"""MP/GMP on CUDA through the command line (run on the GPU machine; skipped without CUDA): a least-squares PA, a
least-squares DPD (indirect learning) and a gradient-trained MP DPD through the frozen PA with the CUDA graph on;
run-dpd exports each DPD; the CUDA evaluation of a least-squares fit matches the CPU's."""
import json

import pytest
import torch

from dpd_desktop.cli.entry import main as cli_main
from dpd_desktop.runs.workspace import Workspace

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the GPU machine)")]

TINY = ["--dataset", "demo", "--frame-length", "50", "--stride", "8", "--no-plots", "--quiet"]


def _status(run):
    return json.loads((run.run_dir / "status.json").read_text())


@pytest.mark.parametrize("backbone", ["mp", "gmp"])
def test_poly_pa_ls_dpd_and_gradient_dpd_on_cuda(tmp_path, backbone):
    ws = tmp_path / "ws"
    assert cli_main(["--workspace", str(ws), "train-pa", "--backbone", "gru", "--hidden-size", "8", "--epochs", "1",
                     "--device", "cuda", *TINY]) == 0
    pa = Workspace(ws).list_runs(step="pa")[0]
    assert cli_main(["--workspace", str(ws), "train-pa", "--backbone", backbone, "--device", "cuda", *TINY]) == 0
    assert cli_main(["--workspace", str(ws), "train-pa", "--backbone", backbone, "--device", "cpu", *TINY]) == 0
    ls_pas = [r for r in Workspace(ws).list_runs(step="pa") if r.backbone == backbone]
    cuda_pa, cpu_pa = sorted(ls_pas, key=lambda r: r.doc["device"]["device"] == "cpu")
    # the same float32 coefficients evaluated on two devices: the metrics agree to float32 rounding
    assert _status(cuda_pa)["test_metrics"]["NMSE"] == pytest.approx(_status(cpu_pa)["test_metrics"]["NMSE"],
                                                                       abs=1e-3)
    assert cli_main(["--workspace", str(ws), "train-dpd", "--pa-run", pa.run_id, "--backbone", backbone,
                     "--device", "cuda", *TINY]) == 0
    assert cli_main(["--workspace", str(ws), "train-dpd", "--pa-run", pa.run_id, "--backbone", backbone,
                     "--fit", "gradient", "--epochs", "1", "--device", "cuda", *TINY]) == 0
    dpds = Workspace(ws).list_runs(step="dpd")
    assert len(dpds) == 2
    for run in dpds:
        assert _status(run)["state"] == "succeeded"
        if run.config.fit == "gradient":
            assert run.doc["device"]["fast_path"] == "on"
        else:
            assert _status(run)["fit"]["rank"] == _status(run)["fit"]["n_coefficients"]
        out = tmp_path / f"u-{run.run_id}.h5"
        assert cli_main(["--workspace", str(ws), "run-dpd", "--run", run.run_id, "--out", str(out),
                         "--device", "cuda"]) == 0
