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
