"""Device resolution, seeding and the reference's reproducibility settings (reference §4.1), for every face."""
from __future__ import annotations

import platform
import random
import sys

import numpy as np
import scipy
import torch

from .. import __version__
from .errors import TrainingError


def resolve_device(requested: str) -> torch.device:
    """"auto" → first CUDA device when available, else CPU; "cuda"/"cuda:N" must exist (never a silent fallback).

    Raises:
        TrainingError: CUDA requested but unavailable, the index is out of range, or an unknown device name.
    """
    if requested == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    if requested == "cpu":
        return torch.device("cpu")
    if requested.startswith("cuda"):
        if not torch.cuda.is_available():
            raise TrainingError("device: CUDA was requested but no CUDA GPU is available (choose cpu or auto)")
        dev = torch.device(requested if ":" in requested else "cuda:0")
        if dev.index >= torch.cuda.device_count():
            raise TrainingError(f"device: {requested} does not exist ({torch.cuda.device_count()} CUDA device(s))")
        return dev
    raise TrainingError(f"device: unknown device {requested!r}")


def device_name(dev: torch.device) -> str:
    """The GPU's name on CUDA, else the processor's (or "CPU")."""
    return torch.cuda.get_device_name(dev) if dev.type == "cuda" else platform.processor() or "CPU"


def seed_everything(seed: int) -> None:
    """Seed Python ``random``, NumPy and torch (CPU and every CUDA device) like the reference (§4.1 step 1)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def reference_determinism() -> None:
    """The reference's soft reproducibility (§4.1): cuDNN benchmark on, deterministic algorithms off."""
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = False
    if torch.are_deterministic_algorithms_enabled():  # calling it at all imports torch._inductor/_dynamo
        torch.use_deterministic_algorithms(False)


def deterministic_convolutions(net: torch.nn.Module, dev: torch.device) -> str | None:
    """On CUDA, a network with convolutions uses cuDNN's deterministic algorithms; returns the note recorded in
    config.json (None when nothing changed).

    cuDNN's benchmarked convolution algorithms include non-deterministic ones (atomic adds in the weight
    gradient), which make two runs - eager or graph - differ in the last bits.
    """
    if dev.type == "cuda" and any(isinstance(m, (torch.nn.Conv1d, torch.nn.Conv2d)) for m in net.modules()):
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
        return "deterministic cuDNN convolutions (the reference lets cuDNN benchmark them)"
    return None


def cudnn_settings(note: str | None) -> dict:
    """config.json's ``device.cudnn`` block."""
    return {"benchmark": bool(torch.backends.cudnn.benchmark),
            "deterministic": bool(torch.backends.cudnn.deterministic), "note": note}


def versions() -> dict[str, str]:
    """Library versions recorded in config.json."""
    out = {"dpd_desktop": __version__, "python": sys.version.split()[0], "torch": torch.__version__,
           "numpy": np.__version__, "scipy": scipy.__version__}
    if torch.cuda.is_available():
        out["cuda"] = str(torch.version.cuda)
        out["cudnn"] = str(torch.backends.cudnn.version())
    return out
