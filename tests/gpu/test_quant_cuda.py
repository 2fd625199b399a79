"""Fixed point on CUDA (run on the GPU machine; skipped without CUDA): the fake-quantised forward on the GPU in float64
equals the CPU integer reference bit for bit, and a quantisation-aware fine-tune trains on CUDA through the command
line, its integer model scored through the frozen PA."""
import json

import numpy as np
import pytest
import torch

from dpd_desktop.cli.entry import main as cli_main
from dpd_desktop.models import build_model
from dpd_desktop.quant.backends import FakeBackend, IntBackend
from dpd_desktop.quant.lower import lower
from dpd_desktop.quant.plan import calibrate
from dpd_desktop.config import QuantSpec
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.runs.workspace import Workspace

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the GPU machine)")]

TINY = ["--dataset", "demo", "--frame-length", "50", "--stride", "8", "--no-plots", "--quiet"]


@pytest.mark.parametrize("wa", [(16, 16), (8, 8)])
def test_fake_quantisation_on_cuda_equals_the_integer_reference(wa):
    torch.manual_seed(0)
    m = build_model("gru", 12, 2).double()
    x = torch.randn(4, 200, 2, dtype=torch.float64) * 0.25
    plan = calibrate(lower(m), x.numpy(), QuantSpec(*wa), "test input")
    yi = lower(m).run(IntBackend(plan), x.numpy())
    m = m.cuda()
    with torch.no_grad():
        yf = lower(m).run(FakeBackend(plan), x.cuda()).cpu().numpy()
    assert np.array_equal(yi, yf)


def test_finetune_on_cuda(tmp_path):
    ws = tmp_path / "ws"
    assert cli_main(["--workspace", str(ws), "train-pa", "--hidden-size", "8", "--epochs", "1", "--device", "cuda",
                     *TINY]) == 0
    pa = Workspace(ws).list_runs(step="pa")[0]
    assert cli_main(["--workspace", str(ws), "train-dpd", "--pa-run", pa.run_id, "--hidden-size", "6", "--epochs",
                     "1", "--device", "cuda", *TINY]) == 0
    dpd = Workspace(ws).list_runs(step="dpd")[0]
    assert cli_main(["--workspace", str(ws), "finetune", dpd.run_id, "--qat", "8,8", "--epochs", "1",
                     "--device", "cuda", "--quiet", "--no-plots"]) == 0
    qat = RunRecord.open(Workspace(ws).list_runs(step="dpd")[0].run_dir)
    assert qat.config.qat["weights"] == 8 and qat.parent_run == dpd.run_id
    assert qat.doc["device"]["device"].startswith("cuda") and qat.doc["device"]["fast_path"].startswith("off")
    q = json.loads((qat.run_dir / "quantized.json").read_text())["evaluations"]["W8A8"]
    assert abs(q["metrics"]["test"]["ACLR_AVG"] - qat.test_metrics["ACLR_AVG"]) < 0.1
