"""Training frames and the batch loader (evaluation segments: data/segments.py, re-exported here).

Training frames (reference §2.1): frame k covers samples [k·S, k·S + L) of the train split; the number of frames is
floor((N − L)/S) + 1; no padding, no wrap. The loader never materializes the overlapping frames (≈0.9 GB for
DPA_160MHz at L = 200, S = 1): it keeps the raw (N, 2) series on the training device and gathers a whole batch with
one indexing operation, in exactly the order, and with exactly the global-RNG use, of
``torch.utils.data.DataLoader(shuffle=True, num_workers=0)`` — the short final batch included.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import DataLoader

from .segments import segment, unsegment  # noqa: F401 - re-exported (the evaluation segments' owner)


def n_frames(n_samples: int, frame_length: int, stride: int) -> int:
    """Number of training frames: floor((N − L)/S) + 1 (reference §2.1).

    Raises:
        ValueError: L ≤ 0, S ≤ 0, or N < L.
    """
    if frame_length <= 0 or stride <= 0:
        raise ValueError(f"frame_length and stride must be positive (got {frame_length}, {stride})")
    if n_samples < frame_length:
        raise ValueError(
            f"the training split has {n_samples} samples, fewer than one frame of {frame_length} samples")
    return (n_samples - frame_length) // stride + 1


def frames(series: np.ndarray, frame_length: int, stride: int) -> np.ndarray:
    """Materialized (F, L, 2) frames as contiguous copies (the tests' reference for the loaders)."""
    f = n_frames(series.shape[0], frame_length, stride)
    idx = np.arange(f)[:, None] * stride + np.arange(frame_length)[None, :]
    return np.ascontiguousarray(series[idx])


def draw_dataloader_iterator_seed():
    """Consume the global torch RNG exactly as creating a ``DataLoader`` iterator does (one int64 base-seed draw)."""
    return torch.empty((), dtype=torch.int64).random_()


def epoch_permutation(n: int):
    """The epoch's frame order as ``RandomSampler`` without a generator draws it (reference §4.2): one int64 draw of
    the global torch generator seeds a private CPU generator; returns ``torch.randperm(n)`` (int64, CPU)."""
    seed = int(torch.empty((), dtype=torch.int64).random_().item())
    g = torch.Generator()
    g.manual_seed(seed)
    return torch.randperm(n, generator=g)


class BatchPlan(Sequence):
    """An epoch's batches: item b is ``perm[b·B : (b+1)·B]`` (a view, made when asked for, not all at each epoch's
    start, where a group's members wait for each other; only the last is short)."""

    def __init__(self, perm: torch.Tensor, batch_size: int):
        self.perm, self.batch_size = perm, batch_size
        self._n = -(-int(perm.shape[0]) // batch_size)

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, b: int) -> torch.Tensor:
        if not -self._n <= b < self._n:
            raise IndexError(f"batch {b} of {self._n}")
        b %= self._n
        return self.perm[b * self.batch_size:(b + 1) * self.batch_size]

    def __iter__(self):
        perm, bs = self.perm, self.batch_size
        for start in range(0, int(perm.shape[0]), bs):
            yield perm[start:start + bs]


@dataclass
class FrameLoader:
    """Shuffled batches of training frames gathered from the raw series ``x``, ``y`` ((N, 2) float32 tensors on
    the training device; ``frame_length``, ``stride`` in samples; the final batch is short, no drop_last).

    Each :meth:`epoch` mirrors one epoch of ``DataLoader(TensorDataset(frames_x, frames_y), batch_size,
    shuffle=True)``: the iterator's base-seed draw, then the sampler's seed draw and permutation.
    """

    x: torch.Tensor
    y: torch.Tensor
    frame_length: int
    stride: int
    batch_size: int

    def __post_init__(self):
        self.n_frames = n_frames(int(self.x.shape[0]), self.frame_length, self.stride)
        self.n_batches = -(-self.n_frames // self.batch_size)
        self._offsets = torch.arange(self.frame_length, device=self.x.device)

    def series(self):
        """``(x, y)``: the training series the batches are gathered from (turned in place by training/augment.py)."""
        return self.x, self.y

    def gather(self, frame_idx):
        """(B,) int64 frame indices on the series' device → (x, y) batches of shape (B, L, 2)."""
        win = frame_idx.unsqueeze(1) * self.stride + self._offsets
        return self.x[win], self.y[win]

    def epoch(self):
        """Start an epoch (the RNG consumed like a DataLoader iterator's): a :class:`BatchPlan` of (B,) int64 index
        tensors on the series' device."""
        draw_dataloader_iterator_seed()
        perm = epoch_permutation(self.n_frames).to(self.x.device, non_blocking=True)
        self.last_perm = perm  # the whole permutation: the CUDA fast path gathers its batches inside the graph
        return BatchPlan(perm, self.batch_size)

    @staticmethod
    def batch_len(idx) -> int:
        """Number of frames in one batch handle (an index tensor)."""
        return int(idx.shape[0])

    def __len__(self) -> int:
        return self.n_batches


class _FrameViews:
    """Map-style dataset: item k = (x[kS : kS+L], y[kS : kS+L]) as views of the CPU series (no copies)."""

    def __init__(self, x, y, frame_length: int, stride: int):
        self.x, self.y, self.L, self.S = x, y, frame_length, stride
        self.n = n_frames(int(x.shape[0]), frame_length, stride)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, k: int):
        s = k * self.S
        return self.x[s:s + self.L], self.y[s:s + self.L]


class PlainFrameLoader:
    """Diagnostic fallback (the trainer's ``batched_loader=False``): a standard ``DataLoader`` over per-frame
    views of the CPU series (pinned memory on CUDA, one host→device copy per batch); same order, RNG use and batches
    as :class:`FrameLoader`, slower. ``epoch()`` returns the DataLoader iterator of ``(x, y)`` CPU batches,
    ``gather(batch)`` moves one to the device."""

    def __init__(self, x_cpu, y_cpu, frame_length: int, stride: int, batch_size: int, device):
        self.device = device
        self.frame_length, self.stride, self.batch_size = frame_length, stride, batch_size
        ds = _FrameViews(x_cpu, y_cpu, frame_length, stride)
        self.n_frames = ds.n
        self.n_batches = -(-ds.n // batch_size)
        self._loader = DataLoader(ds, batch_size=batch_size, shuffle=True, num_workers=0,
                                  pin_memory=torch.device(device).type == "cuda")

    def series(self):
        """``(x, y)``: the CPU series the frames are views of (turned in place by training/augment.py)."""
        ds = self._loader.dataset
        return ds.x, ds.y

    def epoch(self):
        return iter(self._loader)

    def gather(self, batch):
        nb = torch.device(self.device).type == "cuda"
        return batch[0].to(self.device, non_blocking=nb), batch[1].to(self.device, non_blocking=nb)

    @staticmethod
    def batch_len(batch) -> int:
        return int(batch[0].shape[0])

    def __len__(self) -> int:
        return self.n_batches
