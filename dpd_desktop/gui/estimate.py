"""The run-time estimate shown beside Start, and suggested epochs/stride for a dataset (Qt-free).

A small calibrated model, not a promise. An epoch trains ``frames = (N_train - F) // stride + 1`` frames of ``F``
samples (``frames * F`` sample-steps) and evaluates val and test once; once per run come the child's start (the
dataset read again), the set-up and the results. Per epoch [s], CPU: ``frames * F * CPU_S_PER_SAMPLE_STEP *
model_factor + N_eval * CPU_EVAL_S_PER_SAMPLE + CPU_EPOCH_S``, plus ``CPU_RUN_S + (N_train + N_eval) *
CPU_RUN_S_PER_SAMPLE`` once, on an idle machine (:attr:`Estimate.seconds`) and × :data:`CPU_BUSY_FACTOR` with one
other busy process (:attr:`Estimate.seconds_busy`). CUDA: :data:`CUDA_S_PER_BATCH` per batch of 64 frames of 200
samples, scaled by the frame length. :func:`model_factor`: the family's factor × ``0.7 + 0.3 * work(H) / work(23)``
with ``work(H) = H * (H + 2)``; a DPD step adds its frozen PA's. MP/GMP are a least-squares fit: seconds.

The constants are fitted by ``benchmarks/estimate_calibration.py --fit``
(benchmarks/results/2026-12-02-estimate-calibration.md); the CUDA figure is the README's DPA_160MHz epoch on an H200.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

CPU_S_PER_SAMPLE_STEP = 5.0e-6
CPU_EVAL_S_PER_SAMPLE = 2.0e-6
CPU_EPOCH_S = 0.2  # each epoch's fixed work: last.pt, the history row, the plots' data
CPU_RUN_S = 0.4
CPU_RUN_S_PER_SAMPLE = 3.0e-6
#: the CPU run's time with one other busy process on the machine, relative to the idle machine's
CPU_BUSY_FACTOR = 2.0
CUDA_S_PER_BATCH = 0.54e-3
EVAL_FRACTION = 0.2  # CUDA: evaluation cost per val/test sample, relative to one training sample-step
#: a family's training cost relative to a GRU of the same size, on the CPU (fitted) and on CUDA (the extra layers
#: per step)
CPU_FAMILY_FACTOR = {"gru": 1.0, "lstm": 0.3, "dgru": 1.2, "tres_gru": 1.5, "rvtdcnn": 0.65}
FAMILY_FACTOR = {"gru": 1.0, "lstm": 1.3, "dgru": 1.5, "tres_gru": 2.0, "rvtdcnn": 1.0}
#: the hidden size of the PA a DPD step trains through, when the estimate is not told (the reference's PA size)
PA_HIDDEN_DEFAULT = 23
LEAST_SQUARES = ("mp", "gmp")
#: Suggested defaults aim at this many seconds per epoch on the CPU, idle (and keep at least this many epochs).
CPU_EPOCH_TARGET_S = 60.0
CPU_SUGGESTED_EPOCHS = 10


@dataclass(frozen=True)
class Estimate:
    """``seconds`` for the whole run and ``epoch_s`` per epoch on an idle machine, ``seconds_busy`` and
    ``epoch_s_busy`` with one other busy process (the same figures on CUDA); ``frames`` per epoch; ``basis``: how
    (for a tooltip)."""

    seconds: float
    epoch_s: float
    frames: int
    basis: str
    seconds_busy: float = math.nan
    epoch_s_busy: float = math.nan


def n_frames(n_train: int, frame_length: int, stride: int) -> int:
    """Training frames per epoch: ``(n_train - frame_length) // stride + 1`` (0 when a frame does not fit)."""
    if n_train < frame_length or frame_length < 1 or stride < 1:
        return 0
    return (n_train - frame_length) // stride + 1


def _size_factor(hidden_size: int) -> float:
    """A GRU of ``hidden_size`` against a GRU-23 (see the module docstring)."""
    work = hidden_size * (hidden_size + 2)
    return 0.7 + 0.3 * work / (23 * 25)


def model_factor(backbone: str, hidden_size: int, step: str = "pa", pa_hidden_size: int | None = None,
                 cuda: bool = False) -> float:
    """The cost of a training sample-step relative to a GRU-23 PA's: the family's (:data:`CPU_FAMILY_FACTOR` or
    :data:`FAMILY_FACTOR`) and the hidden size's factors; a DPD step adds its frozen PA's (a GRU of
    ``pa_hidden_size``, default :data:`PA_HIDDEN_DEFAULT`), through which it trains forward and backward."""
    family = str(backbone).lower()
    own = (FAMILY_FACTOR if cuda else CPU_FAMILY_FACTOR).get(family, 1.5) * _size_factor(hidden_size)
    if step == "dpd":
        own += _size_factor(pa_hidden_size or PA_HIDDEN_DEFAULT)
    return own


def estimate_run(n_train: int, n_eval: int, *, backbone: str, hidden_size: int, epochs: int, batch_size: int,
                 frame_length: int, stride: int, step: str = "pa", cuda: bool = False,
                 pa_hidden_size: int | None = None) -> Estimate | None:
    """Seconds for a run of ``epochs`` on ``n_train`` training and ``n_eval`` val+test samples; None for a
    least-squares family (MP/GMP) or when a frame does not fit the training split. ``pa_hidden_size``: a DPD's PA
    (see :func:`model_factor`)."""
    family = str(backbone).lower()
    if family in LEAST_SQUARES:
        return None
    frames = n_frames(n_train, frame_length, stride)
    if frames == 0:
        return None
    factor = model_factor(family, hidden_size, step, pa_hidden_size, cuda)
    if cuda:
        batches = math.ceil(frames / max(batch_size, 1))
        train = batches * CUDA_S_PER_BATCH * (frame_length / 200) * factor
        evaluate = n_eval * CUDA_S_PER_BATCH / (64 * 200) * EVAL_FRACTION * factor
        once, busy = 0.0, 1.0
        basis = f"{batches:,} batches × {CUDA_S_PER_BATCH * 1e3:.2f} ms (GRU-23 on an H200, frame 200) × {factor:.2f}"
    else:
        train = frames * frame_length * CPU_S_PER_SAMPLE_STEP * factor
        evaluate = n_eval * CPU_EVAL_S_PER_SAMPLE + CPU_EPOCH_S
        once, busy = CPU_RUN_S + (n_train + n_eval) * CPU_RUN_S_PER_SAMPLE, CPU_BUSY_FACTOR
        basis = (f"{frames:,} frames × {frame_length} samples × {CPU_S_PER_SAMPLE_STEP * 1e6:.1f} µs "
                 f"(GRU-23 on 2 idle CPU cores) × {factor:.2f}, + {evaluate:.1f} s evaluation per epoch, "
                 f"+ {once:.1f} s per run; × {CPU_BUSY_FACTOR:g} with another busy process")
    epoch_s = train + evaluate
    seconds = epoch_s * max(epochs, 0) + once
    return Estimate(seconds=seconds, epoch_s=epoch_s, frames=frames, basis=basis, seconds_busy=seconds * busy,
                    epoch_s_busy=epoch_s * busy)


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
