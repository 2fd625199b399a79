"""The run-time estimate shown beside Start, and suggested epochs/stride for a dataset (Qt-free).

A small calibrated model, not a promise. One epoch trains every frame once: ``frames = (N_train - F) // stride + 1``
frames of ``F`` samples, ``frames * F`` sample-steps (forward, backward and the AdamW update per sample of a frame),
then evaluates val and test once (about a fifth of a training sample-step per sample).

Calibration (GRU-23, batch 64, PA step):

* CPU, 2 cores: :data:`CPU_S_PER_SAMPLE_STEP` = 6e-6 s. Measured 9.3 µs on the development machine while other
  jobs shared its 2 cores (demo data, frame 200, stride 8: 1.53 M sample-steps, epoch 14.3 s) and 4.2 µs quiet
  (README: one CPU epoch of DPA_160MHz, 58.9 M sample-steps, 200–300 s); 6 µs sits between the two. Smaller or larger
  hidden sizes change little on the CPU at these sizes (GRU-8 took 8–10 µs under the same load): the per-step
  overhead dominates, so the cost scales as ``0.7 + 0.3 * work(H) / work(23)`` with ``work(H) = H * (H + 2)``.
* CUDA: :data:`CUDA_S_PER_BATCH` = 0.54 ms per batch of 64 frames of 200 samples (README: DPA_160MHz steady epoch
  2.5 s on one H200 for 4,605 batches), scaled by the frame length.

Other families cost :data:`FAMILY_FACTOR` times a GRU of the same size (their extra layers per step); a DPD step
trains through the frozen PA, :data:`DPD_FACTOR` times a PA step. MP/GMP are a least-squares fit: seconds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

CPU_S_PER_SAMPLE_STEP = 6e-6
CUDA_S_PER_BATCH = 0.54e-3
EVAL_FRACTION = 0.2  # evaluation cost per val/test sample, relative to one training sample-step
FAMILY_FACTOR = {"gru": 1.0, "lstm": 1.3, "dgru": 1.5, "tres_gru": 2.0, "rvtdcnn": 1.0}
DPD_FACTOR = 2.2
LEAST_SQUARES = ("mp", "gmp")
#: Suggested defaults aim at this many seconds per epoch on the CPU (and keep at least this many epochs).
CPU_EPOCH_TARGET_S = 60.0
CPU_SUGGESTED_EPOCHS = 10


@dataclass(frozen=True)
class Estimate:
    """``seconds`` for the whole run, ``epoch_s`` per epoch, ``frames`` per epoch; ``basis``: how (for a tooltip)."""

    seconds: float
    epoch_s: float
    frames: int
    basis: str


def n_frames(n_train: int, frame_length: int, stride: int) -> int:
    """Training frames per epoch: ``(n_train - frame_length) // stride + 1`` (0 when a frame does not fit)."""
    if n_train < frame_length or frame_length < 1 or stride < 1:
        return 0
    return (n_train - frame_length) // stride + 1


def _size_factor(hidden_size: int) -> float:
    work = hidden_size * (hidden_size + 2)
    return 0.7 + 0.3 * work / (23 * 25)


def estimate_run(n_train: int, n_eval: int, *, backbone: str, hidden_size: int, epochs: int, batch_size: int,
                 frame_length: int, stride: int, step: str = "pa", cuda: bool = False) -> Estimate | None:
    """Seconds for a run of ``epochs`` on ``n_train`` training and ``n_eval`` val+test samples; None for a
    least-squares family (MP/GMP) or when a frame does not fit the training split."""
    family = str(backbone).lower()
    if family in LEAST_SQUARES:
        return None
    frames = n_frames(n_train, frame_length, stride)
    if frames == 0:
        return None
    factor = FAMILY_FACTOR.get(family, 1.5) * _size_factor(hidden_size) * (DPD_FACTOR if step == "dpd" else 1.0)
    if cuda:
        batches = math.ceil(frames / max(batch_size, 1))
        train = batches * CUDA_S_PER_BATCH * (frame_length / 200) * factor
        evaluate = n_eval * CUDA_S_PER_BATCH / (64 * 200) * EVAL_FRACTION * factor
        basis = f"{batches:,} batches × {CUDA_S_PER_BATCH * 1e3:.2f} ms (GRU-23 on an H200, frame 200) × {factor:.2f}"
    else:
        train = frames * frame_length * CPU_S_PER_SAMPLE_STEP * factor
        evaluate = n_eval * CPU_S_PER_SAMPLE_STEP * EVAL_FRACTION * factor
        basis = (f"{frames:,} frames × {frame_length} samples × {CPU_S_PER_SAMPLE_STEP * 1e6:.0f} µs "
                 f"(GRU-23 on 2 CPU cores) × {factor:.2f}")
    epoch_s = train + evaluate
    return Estimate(seconds=epoch_s * max(epochs, 0), epoch_s=epoch_s, frames=frames, basis=basis)


def suggest_cpu_defaults(n_train: int, frame_length: int) -> dict[str, int]:
    """Epochs and stride for a CPU run on ``n_train`` samples: the smallest power-of-two stride that brings a GRU-23
    epoch under :data:`CPU_EPOCH_TARGET_S`, and :data:`CPU_SUGGESTED_EPOCHS` epochs."""
    stride = 1
    while stride < 1024:
        est = estimate_run(n_train, 0, backbone="gru", hidden_size=23, epochs=1, batch_size=64,
                           frame_length=frame_length, stride=stride)
        if est is None or est.epoch_s <= CPU_EPOCH_TARGET_S:
            break
        stride *= 2
    return {"epochs": CPU_SUGGESTED_EPOCHS, "stride": stride}
