"""The fast CUDA kernels' fallback reasons, checked without a GPU (dpd_desktop/kernels/cuda_rnn.unsupported)."""
from __future__ import annotations

import re

from torch import nn

from dpd_desktop.kernels import cuda_rnn, nvrtc


def test_missing_bindings_name_the_extra(monkeypatch):
    monkeypatch.setattr(nvrtc, "bindings_error", lambda: "ModuleNotFoundError: No module named 'cuda'")
    reason = cuda_rnn.unsupported(nn.GRU(2, 23, batch_first=True))
    assert "install dpd-desktop[cuda]" in reason and "No module named 'cuda'" in reason


def test_hidden_size_and_device_reasons(monkeypatch):
    monkeypatch.setattr(nvrtc, "bindings_error", lambda: None)
    assert cuda_rnn.unsupported(nn.LSTM(2, 65, batch_first=True)).startswith("hidden size 65 is above")
    # parameters on the CPU: no module is built, the reason names the device
    assert cuda_rnn.unsupported(nn.GRU(2, 64, batch_first=True)) == \
        "the module's parameters are on cpu, not on a CUDA device"


def test_kernel_sources_are_package_data():
    """rnn.cu and gru_step.cu ship beside the loader (pyproject package-data) and define every kernel the loaders
    ask for (cuda_rnn.py; training/fused_step.py) as an extern "C" __global__ function."""
    from dpd_desktop.training import fused_step

    assert {"gru_fwd", "gru_bwd", "lstm_fwd", "lstm_bwd", "gru_fwd_m", "gru_bwd_m"} <= set(cuda_rnn._FUNCS)
    for source, names in ((cuda_rnn.SOURCE, cuda_rnn._FUNCS), (fused_step.SOURCE, fused_step._FUNCS)):
        src = (nvrtc.HERE / source).read_text()
        for name in names:
            assert re.search(rf'extern "C" __global__ void(?: __launch_bounds__\([^)]*\))?\s+{name}\(', src), \
                (source, name)


def test_which_models_the_fused_step_takes():
    """training/fused_step.model_eligibility: a fast GRU PA, or a fast GRU DPD through a fast GRU PA without a peak
    limit, with a plain MSE/L1 loss (checked without a GPU: the decision reads the models' types and settings)."""
    import torch

    from dpd_desktop.models import Cascade, build_model
    from dpd_desktop.training import fused_step

    def fast(net):
        for m in net.modules():
            if hasattr(m, "kernel"):
                m.kernel = "fast"
        return net

    mse = torch.nn.MSELoss()
    elig = fused_step.model_eligibility
    assert elig(fast(build_model("gru", 8)), mse) is None
    assert elig(build_model("gru", 8), mse) == "the reference kernel"
    assert elig(fast(build_model("lstm", 8)), mse) == "not a GRU PA model"
    assert elig(fast(Cascade(build_model("gru", 6), build_model("gru", 8))), mse) is None
    assert elig(fast(Cascade(build_model("gru", 6), build_model("gru", 8))), torch.nn.L1Loss()) is None
    assert elig(fast(Cascade(build_model("gru", 6), build_model("gru", 8))), torch.nn.HuberLoss()).startswith(
        "loss HuberLoss")
    assert elig(fast(Cascade(build_model("lstm", 6), build_model("gru", 8))), mse) == "not a GRU DPD through a GRU PA"
    assert elig(fast(Cascade(build_model("gru", 6), build_model("tres_gru", 8))), mse) == \
        "not a GRU DPD through a GRU PA"
    assert elig(fast(Cascade(build_model("gru", 6), build_model("gru", 8), peak_limit=1.0)), mse) == \
        "a peak limit on the DPD output"
    half = Cascade(fast(build_model("gru", 6)), build_model("gru", 8))  # the PA on the reference kernel
    assert elig(half, mse) == "the reference kernel"
