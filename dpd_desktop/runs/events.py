"""Typed, immutable events that the trainer emits to its observers (callables ``observer(event) -> None`` on the
training thread: the CLI's progress, the GUI's worker, tests). Arrays in them are small (downsampled). The record
events (:class:`RunPrepared`, :class:`LogLine`, :class:`CheckpointReady`, :class:`ResultsReady`) carry what
runs/writer.py ``RunWriter`` writes; other observers ignore them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np


@dataclass(frozen=True)
class PlotData:
    """Downsampled data for the default panels from one pass of predictions; float32 arrays of a few thousand points.

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

    The RF curves (runs/plotdata.py, over the whole split; empty mappings in data built before them):

        curve_in: (B,) mean |x| of the AM/AM bins (bins uniform in |x|).
        amam_curve, ampm_curve: signal name → (B,) the binned least-squares transfer (metrics/transfer.py):
            |G_b|·mean|x| and ∠G_b [deg].
        pin_db: (P,) input power of the compression bins (0.5 dB of |x|²) [dB re a unit-power signal].
        pout_db: signal name → (P,) output power of each bin [dB re a unit-power signal] (NaN: no sample).
        compression: signal name → :meth:`CompressionPoint.to_dict` (small-signal gain, P1dB in/out, dB re a
            unit-power signal; NaN when not reached).
        ccdf_db: (L,) power levels above the mean [dB]; ccdf: signal name → (L,) P(power > mean + level)
            (metrics/ccdf.py; the input x included).
        papr: signal name → (probability, PAPR at it [dB], peak PAPR [dB]).
        power_ref_dbm: signal name → dBm of a unit-power signal at its plane (PA input for x and u, PA output for
            the others; spec.json ``power_ref_dbm``); empty when the dataset does not give it. Add it to ``psd``
            (dB/Hz) for dBm/Hz, and to ``pin_db`` / ``pout_db`` for dBm.
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
    curve_in: np.ndarray = field(default_factory=lambda: np.empty(0, np.float32))
    amam_curve: Mapping[str, np.ndarray] = field(default_factory=dict)
    ampm_curve: Mapping[str, np.ndarray] = field(default_factory=dict)
    pin_db: np.ndarray = field(default_factory=lambda: np.empty(0, np.float32))
    pout_db: Mapping[str, np.ndarray] = field(default_factory=dict)
    compression: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    ccdf_db: np.ndarray = field(default_factory=lambda: np.empty(0, np.float32))
    ccdf: Mapping[str, np.ndarray] = field(default_factory=dict)
    papr: Mapping[str, tuple[float, float, float]] = field(default_factory=dict)
    power_ref_dbm: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RunStarted:
    """Emitted once, before the first batch. ``n_params``: the whole network (DPD + frozen PA, the reference's
    N_PARAM); ``n_params_model``: the trained model alone."""

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
    n_params_model: int | None = None
    setup: Mapping[str, Any] = field(default_factory=dict)  # config.json's blocks besides the experiment


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
    """One history row (history.csv's columns: losses, LR, NMSE/EVM [dB], ACLR [dBc]); ``plots`` from this epoch's
    validation predictions; ``fast_path`` the CUDA graph state after it ("on" or "off: <reason>")."""

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
    fast_path_optimizer: str | None = None  # where the AdamW update runs with the fast path (config.json device)


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
    best_value: float | None = None  # the selection metric's value at best_epoch (None when not finite)


@dataclass(frozen=True)
class RunFailed:
    """The run failed. ``message`` is plain words naming the file/field/setting; ``detail`` is the traceback."""

    run_id: str | None
    run_dir: str | None
    message: str
    detail: str = ""
    epochs_completed: int = 0
    best_epoch: int | None = None


@dataclass(frozen=True)
class RunCancelled:
    """The run stopped on request; completed epochs and the best checkpoint so far stay on disk."""

    run_id: str
    run_dir: str
    epochs_completed: int
    best_epoch: int | None
    reason: str = ""  # why, when not the user's request: "time limit" (training/limits.py)


@dataclass(frozen=True)
class RunPrepared:
    """The run folder exists (created after the checks that refuse a run, before the seeded set-up); ``config`` is
    the experiment (``ExperimentConfig.to_dict()``), recorded at once so that a run failing in its set-up is listed."""

    run_id: str
    run_dir: str
    step: str
    selection_metric: str
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LogLine:
    """One line of the run's log (log.txt); ``level`` is a :mod:`logging` level, ``clock`` the local "HH:MM:SS"."""

    text: str
    level: int
    clock: str


@dataclass(frozen=True)
class CheckpointReady:
    """One epoch's end, for the record (just before :class:`EpochEnded`): ``model_state`` on the CPU;
    ``optimizer_state`` / ``scheduler_state`` as ``torch.optim`` state dicts before this epoch's scheduler step;
    ``meta`` the checkpoints' plain metadata."""

    epoch: int
    row: Mapping[str, Any]
    is_best: bool
    model_state: Mapping[str, Any]
    optimizer_state: Mapping[str, Any]
    scheduler_state: Mapping[str, Any]
    meta: Mapping[str, Any]
    resume_state: Mapping[str, Any] = field(default_factory=dict)  # last.pt's rest (resume_state.py epoch_state)


@dataclass(frozen=True)
class SplitResults:
    """The selected checkpoint on one split: (N, 2) float32 ``x``, ``target``, ``prediction`` (and the DPD output
    ``dpd_output`` for a DPD), the loss, the metrics (dB / dBc) and the prediction's Welch PSD (Hz, dB/Hz)."""

    x: np.ndarray
    target: np.ndarray
    prediction: np.ndarray
    dpd_output: np.ndarray | None
    loss: float
    metrics: Mapping[str, float]
    psd_freq_hz: np.ndarray
    psd_prediction_db: np.ndarray


@dataclass(frozen=True)
class ResultsReady:
    """What results.h5 holds (emitted just before :class:`RunFinished`): root ``attrs`` and one
    :class:`SplitResults` per split ("val", "test")."""

    attrs: Mapping[str, Any]
    splits: Mapping[str, SplitResults]
