"""The eager training path's first use, moved off the critical path: one eager step of a scratch copy of the model,
on a background thread, while the GPU is idle.

A run training through the fused step uses the eager path only for its short last batch, at the end of epoch 0,
where the process's first eager step would load cuBLAS and the autograd kernels behind a queue of fused steps
(figures: benchmarks/results/2026-12-04-notes-training.md). :func:`start` (at the fast path's set-up) does it on a
thread; :func:`wait` (before a capture) joins it. It draws no random numbers and only reads the training series; a
failure only means the loading happens later.
"""
from __future__ import annotations

import copy
import logging
import threading

import torch

log = logging.getLogger("dpd_desktop.eager_warmup")

_lock = threading.Lock()
_done: set = set()  # keys warmed (or being warmed) in this process
_threads: dict = {}  # device → the warm-up threads started on it and not joined yet


def start(step) -> None:
    """Warm the eager step of ``step`` (a CudaGraphStep in index mode) on a thread, once per process and shape, when
    its epochs end with a short batch."""
    loader = step.loader
    short = loader.n_frames % step.batch_size
    if not short or not step.index_mode or step.device.type != "cuda":
        return
    key = (str(step.device), type(step.net).__name__, tuple(tuple(p.shape) for p in step.trainable), short,
           loader.frame_length, type(step.criterion).__name__)
    with _lock:
        if key in _done:
            return
        _done.add(key)
    # the copy here, on the run's thread: a later flatten_parameters() or load_state_dict() re-points its tensors
    net = copy.deepcopy(step.net)
    t = threading.Thread(target=_work, args=(step, net, short), name="dpd-eager-warmup", daemon=True)
    with _lock:
        _threads.setdefault(str(step.device), []).append(t)
    t.start()


def wait(device) -> None:
    """Join the warm-up threads of ``device`` (a CUDA graph capture must not overlap their work)."""
    with _lock:
        threads = _threads.pop(str(device), [])
    for t in threads:
        t.join()


def _work(step, net, short: int) -> None:
    try:
        params = [p for p in net.parameters() if p.requires_grad]
        with torch.cuda.device(step.device), torch.cuda.stream(torch.cuda.Stream(step.device)):
            idx = torch.arange(short, dtype=torch.int64, device=step.device)
            xb, yb = step.loader.gather(idx)
            loss = step.criterion(net(xb), yb)
            loss.backward()
            if step.clip != 0:
                torch.nn.utils.clip_grad_norm_(params, step.clip)
            torch._foreach_zero_([p.grad for p in params])
            torch.cuda.current_stream().synchronize()
    except Exception as exc:  # noqa: BLE001 - see the module docstring
        log.debug("eager warm-up skipped: %s", exc)
