"""Typed, immutable observations that the trainer emits to its observers.

The trainer knows nothing of plots, progress bars or Qt: each consumer (the CLI's progress bar, the GUI worker that
turns events into Qt signals, tests) is an observer, a callable ``observer(event) -> None`` called on the training
thread. Arrays inside events are small (downsampled in the trainer) so that forwarding them to a GUI is cheap.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np


@dataclass(frozen=True)
class PlotData:
    """Downsampled data for the default panels, built from one pass of predictions (no extra inference).

    All arrays are float32 NumPy arrays of a few thousand points at most.

    Attributes:
        source: ``"validation"``, ``"test"`` or ``"preview"``.
        amam_in: (K,) |x| of decimated input samples (linear, same units as the data).
        amam: mapping signal name → (K,) output magnitude for those samples, e.g. ``{"measured y": ..., "predicted ŷ": ...}``.
        ampm: mapping signal name → (K,) phase ∠(out/x) in degrees, same samples.
        psd_freq_mhz: (F,) frequency axis in MHz, ascending.
        psd: mapping signal name → (F,) PSD in dB (10·log10 of Welch density, dB rel. 1/Hz).
        bands_mhz: ``{"main": (lo, hi), "adj_left": (lo, hi), "adj_right": (lo, hi)}`` in MHz.
        aclr: mapping signal name → (left, right) ACLR in dBc (reference §6.2 definition).
        time_idx: (W,) sample index of the time-domain window.
        time: mapping signal name → (W, 2) I/Q of that window.
        target_name / pred_name: which of the mapping keys is the reference and which is the model output.
    """

    source: str
    amam_in: np.ndarray
    amam: Mapping[str, np.ndarray]
    ampm: Mapping[str, np.ndarray]
    psd_freq_mhz: np.ndarray
    psd: Mapping[str, np.ndarray]
    bands_mhz: Mapping[str, tuple[float, float]]
    aclr: Mapping[str, tuple[float, float]]
    time_idx: np.ndarray
    time: Mapping[str, np.ndarray]
    target_name: str = "measured y"
    pred_name: str = "predicted ŷ"


@dataclass(frozen=True)
class RunStarted:
    """Emitted once, after data, model and optimizer are ready and before the first batch.

    ``n_params`` counts the whole network (for a DPD: DPD + frozen PA, the reference's N_PARAM); ``n_params_model``
    the trained model alone (the P_ of the model id).
    """

    run_id: str
    run_dir: str
    step: str
    config: Mapping[str, Any]
    device: str
    device_name: str
    fast_path: str  # "on" or "off: <reason>"
    batched_loader: str
    n_params: int
    n_train_frames: int
    batches_per_epoch: int
    epochs: int
    dataset_summary: Mapping[str, Any]
    n_params_model: int | None = None  # the trained model alone (DPD: without the frozen PA); n_params = total


@dataclass(frozen=True)
class BatchProgress:
    """Throttled progress inside an epoch (at most about ten per second). ``epoch`` is 0-based; ``batch`` 1-based."""

    epoch: int
    epochs: int
    batch: int
    batches: int
    elapsed_s: float
    eta_s: float | None


@dataclass(frozen=True)
class EpochEnded:
    """One history row: losses, LR, val/test NMSE [dB], EVM [dB], ACLR L/R/avg [dBc], seconds.

    ``row`` uses the history CSV's column names. ``is_best`` says whether this epoch became the selected checkpoint.
    ``plots`` is built from this epoch's validation predictions (no extra inference). ``fast_path`` is the CUDA
    graph state after this epoch ("on" or "off: <reason>", e.g. when the capture failed during the epoch).
    """

    epoch: int
    epochs: int
    row: Mapping[str, Any]
    is_best: bool
    best_epoch: int
    best_value: float
    selection_metric: str
    epoch_seconds: float
    plots: PlotData | None
    fast_path: str | None = None


@dataclass(frozen=True)
class PreviewReady:
    """A live batch preview (only when ``preview_every`` is set): plots from a frozen copy of the model."""

    epoch: int
    batch: int
    batches: int
    plots: PlotData
    metrics: Mapping[str, float]


@dataclass(frozen=True)
class RunFinished:
    """The run succeeded: ``test_metrics`` come from one final pass of the selected checkpoint over the test split."""

    run_id: str
    run_dir: str
    best_epoch: int
    val_metrics: Mapping[str, float]
    test_metrics: Mapping[str, float]
    wall_s: float
    plots: PlotData | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunFailed:
    """The run failed. ``message`` is plain words naming the file/field/setting; ``detail`` is the traceback."""

    run_id: str | None
    run_dir: str | None
    message: str
    detail: str = ""


@dataclass(frozen=True)
class RunCancelled:
    """The run stopped on request; completed epochs and the best checkpoint so far stay on disk."""

    run_id: str
    run_dir: str
    epochs_completed: int
    best_epoch: int | None


Event = RunStarted | BatchProgress | EpochEnded | PreviewReady | RunFinished | RunFailed | RunCancelled
Observer = Callable[[Event], None]
