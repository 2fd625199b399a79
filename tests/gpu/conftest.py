"""The GPU tests on a machine with CUDA but without the ``dpd-desktop[cuda]`` extra (NVIDIA's CUDA bindings and
NVRTC, which the fast kernels compile with): every test here skips with that reason instead of failing at the
first kernel build. ``make gpu-test`` installs the extra."""
import pytest
import torch

from dpd_desktop.kernels.nvrtc import bindings_error


def pytest_collection_modifyitems(config, items):
    if not torch.cuda.is_available():
        return  # each module skips: "needs a CUDA GPU (run on the GPU machine)"
    missing = bindings_error()
    if missing is None:
        return
    skip = pytest.mark.skipif(True, reason=f"needs a CUDA GPU with the dpd-desktop[cuda] extra (make gpu-test "
                                           f"installs it): {missing}")
    here = config.rootpath / "tests" / "gpu"
    for item in items:
        if here in item.path.parents:
            item.add_marker(skip)
