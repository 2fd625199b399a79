"""The kernel setting on CUDA (issue 14 point 2): a fast PA run and a fast DPD cascade record what ran each module
(the CUDA backend's own answer, dpd_desktop/kernels/cuda_rnn.py), log the reason of any fallback, and a module that
ran fast stays within 0.1 dB of the reference run on every test metric (run on the GPU machine; skipped without
CUDA)."""
import json

import pytest
import torch

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.kernels.dispatch import unsupported_reason
from dpd_desktop.models import build_model
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training.trainer import Trainer

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the GPU machine)")]


def _cfg(**kw):
    base = dict(step="pa", dataset="demo", backbone="gru", hidden_size=8, epochs=2, frame_length=50, stride=8,
                device="cuda")
    base.update(kw)
    return ExperimentConfig(**base)


def _expected(backbone, hidden):
    rnn = build_model(backbone, hidden, 1).backbone.rnn.to("cuda")
    reason = unsupported_reason(rnn, torch.device("cuda"))
    return ("reference", reason) if reason else ("fast", None)


@pytest.mark.parametrize("backbone", ["gru", "lstm"])
def test_fast_pa_and_dpd_on_cuda_record_what_ran(tmp_path, backbone):
    ds = make_demo_dataset(seed=2, n_train=3000, n_val=4096, n_test=4096)
    ws = Workspace(tmp_path)
    ref = Trainer(_cfg(backbone=backbone), dataset=ds, workspace=ws).run()
    fast = Trainer(_cfg(backbone=backbone, kernel="fast"), dataset=ds, workspace=ws).run()
    assert ref.state == fast.state == "succeeded", fast.message
    used, reason = _expected(backbone, 8)
    block = json.loads((fast.run_dir / "config.json").read_text())["device"]["kernel"]
    assert block["requested"] == "fast" and block["used"] == {"model": used}
    log = (fast.run_dir / "log.txt").read_text()
    if reason:
        assert block["notes"] == [f"model: {type(build_model(backbone, 8, 1).backbone.rnn).__name__} runs on the "
                                  f"reference kernel ({reason})"]
        assert f"kernel: {block['notes'][0]}" in log
    else:
        assert block["notes"] == [] and "kernel:" not in log
        rnn = type(build_model(backbone, 8, 1).backbone.rnn).__name__
        assert f"kernels ran: model: {rnn} on fast (cuda_rnn)" in log
    for k in ("NMSE", "ACLR_AVG", "EVM"):
        assert abs(fast.test_metrics[k] - ref.test_metrics[k]) < 0.1, (k, fast.test_metrics, ref.test_metrics)
    dpd = Trainer(_cfg(step="dpd", pa_run=ref.run_id, hidden_size=6, kernel="fast"), dataset=ds, workspace=ws).run()
    assert dpd.state == "succeeded", dpd.message
    block = json.loads((dpd.run_dir / "config.json").read_text())["device"]["kernel"]
    assert block["used"] == {"dpd": _expected("gru", 6)[0], "pa": used}
