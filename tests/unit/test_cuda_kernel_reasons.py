"""The fast CUDA kernels' fallback reasons, checked without a GPU (dpd_desktop/kernels/cuda_rnn.unsupported)."""
from __future__ import annotations

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


def test_kernel_source_is_package_data():
    """rnn.cu ships beside the loader (pyproject package-data) and defines the four kernels the loader asks for."""
    src = (nvrtc.HERE / cuda_rnn.SOURCE).read_text()
    for name in ("gru_fwd", "gru_bwd", "lstm_fwd", "lstm_bwd"):
        assert f"\n{name}(" in src
