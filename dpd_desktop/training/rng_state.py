"""Every random-number state a run consumes, as plain tensors/lists/ints that ``torch.load(weights_only=True)`` reads.

A run draws from Python ``random``, NumPy's legacy global generator, the torch CPU generator (the loader's iterator
and sampler seeds, reference §4.2) and, on CUDA, each device's generator. :func:`capture` records them at one point;
:func:`restore` puts them back, so that a resumed run draws exactly what the uninterrupted run would have drawn.
"""
from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

FORMAT = "dpd-desktop-rng-1"


def capture(device: torch.device | None = None) -> dict[str, Any]:
    """The RNG states now: ``{"format", "python", "numpy", "torch_cpu", "cuda"}``.

    ``python``: ``{"version": int, "state": (625,) int64 tensor, "gauss_next": float | None}`` (``random.getstate``);
    ``numpy``: ``{"name": str, "keys": (624,) int64 tensor, "pos", "has_gauss": int, "cached_gaussian": float}``
    (``np.random.get_state``); ``torch_cpu``: uint8 tensor; ``cuda``: the uint8 generator state of each CUDA device
    in use, listed in ``cuda_devices`` (their indices): ``device``'s when it is a CUDA device, else none (a CPU run
    does not initialise CUDA; the other GPUs of the machine are not touched).
    """
    version, state, gauss_next = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    cuda, indices = [], []
    if device is not None and torch.device(device).type == "cuda":
        dev = torch.device(device)
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        cuda, indices = [torch.cuda.get_rng_state(index).clone()], [int(index)]
    return {"format": FORMAT,
            "python": {"version": int(version), "state": torch.tensor(state, dtype=torch.int64),
                       "gauss_next": None if gauss_next is None else float(gauss_next)},
            "numpy": {"name": str(name), "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64).copy()),
                      "pos": int(pos), "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
            "torch_cpu": torch.get_rng_state().clone(),
            "cuda": cuda, "cuda_devices": indices}


def restore(doc: dict[str, Any]) -> None:
    """Put back the states of :func:`capture`. Raises ValueError naming the field when ``doc`` is not one."""
    check(doc)
    py = doc["python"]
    random.setstate((py["version"], tuple(int(v) for v in py["state"].tolist()), py["gauss_next"]))
    n = doc["numpy"]
    np.random.set_state((n["name"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"],
                         n["cached_gaussian"]))
    torch.set_rng_state(doc["torch_cpu"])
    for state, index in zip(doc["cuda"], doc["cuda_devices"]):
        if not torch.cuda.is_available() or index >= torch.cuda.device_count():
            raise ValueError(f"field 'rng.cuda_devices': the run used CUDA device {index}, which this machine does "
                             "not have")
        torch.cuda.set_rng_state(state, index)


def check(doc: Any) -> None:
    """Raise ValueError naming the first field of ``doc`` that is not what :func:`capture` writes."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"field 'rng.format': expected {FORMAT!r}")
    py, n = doc.get("python"), doc.get("numpy")
    if not isinstance(py, dict) or not torch.is_tensor(py.get("state")) or py["state"].numel() != 625:
        raise ValueError("field 'rng.python': not a Python random state (625 integers)")
    if not isinstance(n, dict) or not torch.is_tensor(n.get("keys")) or n["keys"].numel() != 624:
        raise ValueError("field 'rng.numpy': not a NumPy MT19937 state (624 keys)")
    if not torch.is_tensor(doc.get("torch_cpu")) or doc["torch_cpu"].dtype != torch.uint8:
        raise ValueError("field 'rng.torch_cpu': not a torch generator state (uint8 tensor)")
    if not isinstance(doc.get("cuda"), list) or not all(torch.is_tensor(t) for t in doc["cuda"]):
        raise ValueError("field 'rng.cuda': expected a list of CUDA generator states")
    idx = doc.get("cuda_devices")
    if not isinstance(idx, list) or len(idx) != len(doc["cuda"]) or not all(isinstance(i, int) for i in idx):
        raise ValueError("field 'rng.cuda_devices': expected one device index per CUDA generator state")
