"""Experiment configuration: one validated, serializable object per run.

The GUI form, the CLI flags and the saved ``config.json`` all round-trip through :class:`ExperimentConfig`, the
one table of the settings and their defaults: elsewhere a default is read from it (``ExperimentConfig.lr``), never
written again. The defaults follow the OpenDPD 2.2.1 reference CLI (reference §4.10).
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping

from .families import BACKBONES, LOWERABLE, POLY_BACKBONES

STEPS = ("pa", "dpd")
DEVICES = ("auto", "cpu", "cuda")
LOSSES = ("l2", "l1")
#: How the model's weights are found: "gradient" (the epoch loop, every family) or "ls" (least squares, MP/GMP only:
#: training/ls_fit.py; a DPD by indirect learning).
FITS = ("gradient", "ls")
#: Bounds of the MP/GMP orders (K ≤ 15, M ≤ 64: far beyond what a PA model uses; the basis grows as K·M).
MAX_POLY_ORDER = 15
MAX_MEMORY_DEPTH = 64
#: Metric profiles (dpd_desktop/metrics/profiles.py) and DPD target gain rules (dpd_desktop/training/gain.py).
METRIC_PROFILES = ("legacy-2.2.1", "corrected")
GAIN_RULES = ("peak", "small-signal", "rms")
#: Recurrence kernels (dpd_desktop/kernels): "reference" (nn.GRU/nn.LSTM, cuDNN on CUDA) or "fast" (ours).
KERNELS = ("reference", "fast")
#: Learning-rate schedules (training/schedules.py): the reference's ReduceLROnPlateau, or cosine decay to lr_end.
LR_SCHEDULES = ("plateau", "cosine")
PLATEAU_THRESHOLD_MODES = ("rel", "abs")
#: How a DPD learns (training/objectives.py): "direct" through the frozen PA (reference §5.1) or "ila" (indirect
#: learning: a post-inverse of the PA model, its weights shared with the predistorter).
DPD_LEARNING = ("direct", "ila")
#: Checkpoint selection: "reference" (val NMSE for a PA, val ACLR_AVG for a DPD, §4.8) or "power-gated" (a DPD:
#: validation output power within power_gate_db first, then the lowest 0.5·(EVM + worse-side ACLR); OpenDPD 2.4.2
#: Arena v6's rule).
SELECTIONS = ("reference", "power-gated")
#: How val/test are evaluated (training/evaluation.py): "segments" (nperseg segments, zero state each, §2.2) or
#: "overlap" (a DPD on frame_length windows at hop frame_length/2 keeping their middle half, the PA over the whole
#: split: OpenDPD 2.4.2 Arena's offline overlap-save execution).
EVALUATIONS = ("segments", "overlap")
#: training-data augmentations (training/augment.py)
AUGMENTS = ("none", "phase")
#: which out-of-band error the out-of-band term counts (training/losses.py)
OOB_SIDES = ("both", "worse")
#: Default hidden size of the trained model per step, for both faces (window and command line): the reference
#: command line's (OpenDPD 2.2.1 arguments.py: PA 23, DPD 15; reference §3.9).
DEFAULT_HIDDEN_SIZE = {"pa": 23, "dpd": 15}


#: Upper bounds of the model size: the reference's models use hidden sizes of 8-64 and 1-2 layers; far beyond these a
#: model only exhausts memory (hidden 10,000,000: a 1.2 PB allocation) or hangs in construction (100,000 layers).
MAX_HIDDEN_SIZE = 4096
MAX_NUM_LAYERS = 16


def default_hidden_size(step: str) -> int:
    """The default hidden size for ``step`` ("pa" or "dpd"), see :data:`DEFAULT_HIDDEN_SIZE`."""
    return DEFAULT_HIDDEN_SIZE[step]


def unknown_field(key: str, choices, what: str = "a configuration field") -> str:
    """The message for a key that is not ``what``: a close match if there is one, else the list."""
    close = difflib.get_close_matches(key, list(choices), n=1)
    if close:
        return f"not {what} (did you mean {close[0]}?)"
    return f"not {what} (expected one of {', '.join(sorted(choices))})"


class ConfigError(ValueError):
    """A configuration field is invalid. ``field`` names it; the message says what was expected."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


#: the fixed-point settings (``qat`` of a fine-tune, ``export --format fixed``): bit-width ranges, LUT interpolation
BITS_RANGE = (4, 16)
LUT_BITS_RANGE = (4, 14)
LUT_INTERPS = ("linear", "nearest")


class QuantError(ValueError):
    """A quantisation setting is out of range or a plan cannot be read; the message names the field."""


@dataclass(frozen=True)
class QuantSpec:
    """Bit widths: ``weights`` W and ``activations`` A (4–16), the tables' ``lut_bits`` L (4–14: 2^L + 1
    entries), ``lut_interp`` ("linear" or "nearest") and ``io_bits`` (4–16) of the input and output words."""

    weights: int = 16
    activations: int = 16
    lut_bits: int = 10
    lut_interp: str = "linear"
    io_bits: int = 16

    def check(self) -> "QuantSpec":
        for name, (lo, hi) in (("weights", BITS_RANGE), ("activations", BITS_RANGE), ("lut_bits", LUT_BITS_RANGE),
                               ("io_bits", BITS_RANGE)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise QuantError(f"{name}: expected an integer from {lo} to {hi} bits, got {v!r}")
        if self.lut_interp not in LUT_INTERPS:
            raise QuantError(f"lut_interp: expected one of {', '.join(LUT_INTERPS)}, got {self.lut_interp!r}")
        return self

    @property
    def label(self) -> str:
        """``W16A16``; ``W8A8-IO8`` when the input/output words are not 16 bits, ``W8A8-L8n`` when the tables are not
        the default 10-bit linear ones."""
        io = "" if self.io_bits == 16 else f"-IO{self.io_bits}"
        tail = "" if (self.lut_bits, self.lut_interp) == (10, "linear") else \
            f"-L{self.lut_bits}{'n' if self.lut_interp == 'nearest' else ''}"
        return f"W{self.weights}A{self.activations}{io}{tail}"

    def to_dict(self) -> dict[str, Any]:
        return {"weights": self.weights, "activations": self.activations, "lut_bits": self.lut_bits,
                "lut_interp": self.lut_interp, "io_bits": self.io_bits}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "QuantSpec":
        known = {"weights", "activations", "lut_bits", "lut_interp", "io_bits"}
        odd = sorted(set(d) - known)
        if odd:
            raise QuantError(f"unknown quantisation field {odd[0]!r} (known: {', '.join(sorted(known))})")
        return cls(**dict(d)).check()


#: the MP/GMP orders of a polynomial backbone (models/poly.py: the basis, the fit and the module)
@dataclass(frozen=True)
class Term:
    """One basis column: x(n − delay) · |x(n − env_delay)|^power (env_delay = delay for the aligned terms)."""

    order: int
    delay: int
    env_delay: int

    @property
    def power(self) -> int:
        return self.order - 1


@dataclass(frozen=True)
class PolySpec:
    """The orders of an MP/GMP model.

    Attributes:
        kind: "mp" or "gmp".
        order: K ≥ 1, nonlinearity order of the aligned terms.
        memory_depth: M ≥ 1 (delays 0 … M−1).
        odd_only: only odd orders 1, 3, 5 … (a PA's even-order products fall outside the band).
        cross_order: Kc, highest order of the GMP cross terms (≥ 2; ignored for "mp").
        cross_lag: L_lag ≥ 0, lagging-envelope depth (GMP; 0 for "mp").
        cross_lead: L_lead ≥ 0, leading-envelope depth (GMP; 0 for "mp"): reads L_lead future samples.
    """

    kind: str = "mp"
    order: int = 5
    memory_depth: int = 4
    odd_only: bool = False
    cross_order: int = 5
    cross_lag: int = 2
    cross_lead: int = 2

    @classmethod
    def from_mapping(cls, kind: str, data: Mapping[str, Any] | None) -> "PolySpec":
        """Build from a dict (config.json's ``poly`` block); unknown keys raise ValueError naming the key."""
        data = dict(data or {})
        data.pop("kind", None)
        known = {"order", "memory_depth", "odd_only", "cross_order", "cross_lag", "cross_lead"}
        odd = sorted(set(data) - known)
        if odd:
            raise ValueError(f"unknown MP/GMP field {odd[0]!r} (known: {', '.join(sorted(known))})")
        spec = cls(kind=kind, **data)
        if kind == "mp":
            spec = cls(kind="mp", order=spec.order, memory_depth=spec.memory_depth, odd_only=spec.odd_only,
                       cross_order=spec.order, cross_lag=0, cross_lead=0)
        spec.check()
        return spec

    def check(self) -> None:
        """Raises ValueError naming the field that is out of range."""
        if self.kind not in POLY_BACKBONES:
            raise ValueError(f"kind: expected one of {POLY_BACKBONES}, got {self.kind!r}")
        for name, low in (("order", 1), ("memory_depth", 1), ("cross_order", 1), ("cross_lag", 0),
                          ("cross_lead", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"{name}: expected an integer >= {low}, got {v!r}")
        if not isinstance(self.odd_only, bool):
            raise ValueError(f"odd_only: expected true or false, got {self.odd_only!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def orders(self, top: int, first: int = 1) -> list[int]:
        return [k for k in range(first, top + 1) if not self.odd_only or k % 2 == 1]

    @property
    def terms(self) -> tuple[Term, ...]:
        """The basis columns in coefficient order (module docstring)."""
        out = [Term(k, m, m) for k in self.orders(self.order) for m in range(self.memory_depth)]
        if self.kind == "gmp":
            cross = self.orders(self.cross_order, first=2)
            out += [Term(k, m, m + l) for k in cross for m in range(self.memory_depth)
                    for l in range(1, self.cross_lag + 1)]
            out += [Term(k, m, m - l) for k in cross for m in range(self.memory_depth)
                    for l in range(1, self.cross_lead + 1)]
        return tuple(out)

    @property
    def n_coefficients(self) -> int:
        """Number of complex coefficients (the real parameter count is twice it)."""
        return len(self.terms)


@dataclass
class ExperimentConfig:
    """Everything that decides what a run computes.

    Attributes (units in brackets):
        step: ``"pa"`` (PA behavioral model, target = measured y) or ``"dpd"`` (DPD trained through a frozen PA,
            target = g·x, reference §5.1).
        dataset: dataset path (split-CSV folder, single CSV, HDF5) or ``"demo"`` for the embedded synthetic PA.
        backbone, hidden_size, num_layers: the trained model (the DPD model when ``step == "dpd"``).
        pa_run: for ``step == "dpd"``, the PA run id or run folder whose selected checkpoint is frozen.
        epochs, batch_size, batch_size_eval [frames / segments], lr, lr_end, decay_factor, patience [epochs],
        weight_decay, grad_clip (global L2 norm; 0 disables), frame_length, stride [samples], seed, loss.
        device: ``auto`` (CUDA when available), ``cpu``, ``cuda`` or ``cuda:N``.
        preview_every: ``None`` (plots once per epoch, no extra inference) or N (live batch preview every N batches).
        threads: torch intra-op threads on CPU (``None``: the workspace's default, else PyTorch's); at most the
            machine's core count (``os.cpu_count()``).
        cuda_memory_fraction: CUDA memory ceiling as a fraction of the card, 0 < f <= 1 (``None``: the workspace's
            default, else none); applied with ``torch.cuda.set_per_process_memory_fraction`` (training/limits.py).
        time_limit_s: wall-clock limit [s] (``None``: the workspace's default, else none); when it passes the run
            stops after the current batch and ends ``cancelled`` with the message "time limit".
        max_train_samples: use only the first N training samples (``None`` = all); the DPD gain still comes from the
            full training split (reference §1.4).
        allow_dataset_mismatch: for ``step == "dpd"``, train even when the dataset is not the one the PA run was
            trained on (different fingerprint); by default such a DPD run refuses to start.
        fit: ``"gradient"`` (the epoch loop) or ``"ls"`` (least squares; MP/GMP only; a DPD by indirect learning).
        poly_order (K), memory_depth (M), poly_odd_only, cross_order (Kc; None = K), cross_lag (L_lag), cross_lead
            (L_lead): the MP/GMP orders (models/poly.py; the cross terms are GMP's, ignored for MP).
        thx, thh: a delta family's thresholds on |Δx| and |Δh| (DeltaGRU, TRes-DeltaGRU: models/deltagru.py); 0 (the
            default) runs the dense recurrence; ignored by the other families.
        lr_schedule: ``"plateau"`` (ReduceLROnPlateau on the selection metric, the reference's) or ``"cosine"`` (lr
            to lr_end by a half cosine over the epochs after the warm-up, stepped per epoch); training/schedules.py.
        warmup_epochs: epochs of linear learning-rate warm-up, lr·(e+1)/W in epoch e < W (0: none).
        plateau_threshold, plateau_threshold_mode: the plateau scheduler's improvement threshold, relative
            (``"rel"``: value < best·(1 − t), the reference's 1e-4) or absolute (``"abs"``: value < best − t, in the
            metric's unit, dB).
        dpd_learning: ``"direct"`` (through the frozen PA, §5.1) or ``"ila"`` (indirect learning architecture, a
            post-inverse of the PA model trained on (PA(u)/g → u), shared with the predistorter;
            training/objectives.py). DPD only.
        power_weight: w ≥ 0 of the gain-rule-aware loss term w·mean(t²)·ΔP², ΔP = 10·log10(Σ|ŷ|²/Σ|t|²) dB of each
            batch (training/losses.py); 0: off (the plain loss).
        oob_weight: w ≥ 0: the part of the squared error that lies outside the main channel (each loss window's DFT
            bins with f < −bw_main/2 or f ≥ bw_main/2) counts (1 + w) times (training/losses.py); 0: off. Needs the
            dataset's ``input_signal_fs`` and ``bw_main_ch``; an L2 loss only.
        oob_side: ``"both"`` (the error on both sides of the main channel) or ``"worse"`` (twice the larger side's,
            per batch: the side that sets the worse-side ACLR); :data:`OOB_SIDES`.
        augment: ``"none"`` or ``"phase"``: every epoch turns the training series' input and target by a phase ramp
            of a random start and one turn over the series (training/augment.py); :data:`AUGMENTS`.
        gain_value: a fixed DPD target gain g (> 0) instead of the gain rule's (recorded as rule ``fixed``).
        peak_limit: a DPD's output magnitude limit before the PA (|u| ≤ peak, the direction kept; None: none).
        target_cfr_db: a DPD's target g·x with its peaks reduced to max|y_train|·10^(c/20) by repeated clipping and
            filtering to the main channel (training/cfr.py; −20 ≤ c ≤ 6 dB; None: the plain g·x); direct learning
            only; needs the dataset's ``input_signal_fs`` and ``bw_main_ch``. target_cfr_iterations: its rounds
            (1 to 100). target_cfr_band_hz: the band [−b/2, b/2) its filter keeps [Hz] (None: bw_main_ch; narrower
            keeps the reduction's error off a main channel's outer guard, e.g. 158e6 for DPA_160MHz).
        loss_window: [start, stop): the loss counts only these samples of each training frame (None: all).
        selection: ``"reference"`` or ``"power-gated"`` (a DPD; :data:`SELECTIONS`); power_gate_db: its gate [dB].
        evaluation: ``"segments"`` or ``"overlap"`` (a DPD; :data:`EVALUATIONS`).
        test_every_epoch: evaluate the test split at every epoch (the reference's; history's TEST_* columns), or only
            the selected checkpoint at the end (TEST_* NaN before).
        rcond: least squares' singular-value cutoff relative to the largest (numpy.linalg.lstsq), 0 ≤ rcond < 1.
        grid_k, grid_m: least squares only: fit every (K, M) of these lists and keep the lowest validation NMSE
            (None: the single (poly_order, memory_depth)).
        metric_profile: ``"legacy-2.2.1"`` (OpenDPD 2.2.1's numbers, bitwise) or ``"corrected"`` (valid samples,
            half-open bands, full adjacent channels, pooled NMSE): every metric of the run, its checkpoint selection
            included (metrics/profiles.py).
        gain_rule: the DPD target gain g of g·x: ``"peak"`` (max|y|/max|x|, the reference's), ``"small-signal"``
            (least squares on the lowest-amplitude 40 % of training samples) or ``"rms"`` (rms(y)/rms(x));
            training/gain.py. Recorded for a PA run, used by a DPD run.
        kernel: the recurrence kernels, ``"reference"`` (nn.GRU / nn.LSTM as the reference computes them, bitwise
            equal to OpenDPD 2.2.1) or ``"fast"`` (ours, dpd_desktop/kernels; unsupported shapes fall back with a
            logged reason).
        qat: quantisation-aware training (a DPD fine-tune of ``parent_run``, dpd_desktop/quant): ``{"weights": W,
            "activations": A, "lut_bits": L, "lut_interp": "linear"|"nearest"}`` (:class:`QuantSpec`); None:
            a float run.
        parent_run: the DPD run a fine-tune starts from (its selected checkpoint's weights); required with ``qat``;
            without it a float fine-tune.
    """

    step: str = "pa"
    dataset: str = "demo"
    backbone: str = "gru"
    hidden_size: int = DEFAULT_HIDDEN_SIZE["pa"]
    num_layers: int = 1
    pa_run: str | None = None
    epochs: int = 150
    batch_size: int = 64
    batch_size_eval: int = 64
    lr: float = 5e-3
    lr_end: float = 5e-5
    decay_factor: float = 0.5
    patience: int = 5
    weight_decay: float = 0.01
    grad_clip: float = 200.0
    frame_length: int = 200
    stride: int = 1
    seed: int = 0
    loss: str = "l2"
    device: str = "auto"
    preview_every: int | None = None
    threads: int | None = None
    cuda_memory_fraction: float | None = None
    time_limit_s: float | None = None
    max_train_samples: int | None = None
    allow_dataset_mismatch: bool = False
    metric_profile: str = "legacy-2.2.1"
    gain_rule: str = "peak"
    kernel: str = "reference"
    name: str | None = None
    fit: str = "gradient"
    poly_order: int = 5
    memory_depth: int = 4
    poly_odd_only: bool = False
    cross_order: int | None = None
    cross_lag: int = 2
    cross_lead: int = 2
    rcond: float = 1e-10
    grid_k: list[int] | None = None
    grid_m: list[int] | None = None
    thx: float = 0.0
    thh: float = 0.0
    lr_schedule: str = "plateau"
    warmup_epochs: int = 0
    plateau_threshold: float = 1e-4
    plateau_threshold_mode: str = "rel"
    dpd_learning: str = "direct"
    power_weight: float = 0.0
    oob_weight: float = 0.0
    oob_side: str = "both"
    augment: str = "none"
    gain_value: float | None = None
    peak_limit: float | None = None
    target_cfr_db: float | None = None
    target_cfr_iterations: int = 4
    target_cfr_band_hz: float | None = None
    loss_window: list[int] | None = None
    selection: str = "reference"
    power_gate_db: float = 0.5
    evaluation: str = "segments"
    test_every_epoch: bool = True
    qat: dict[str, Any] | None = None
    parent_run: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> "ExperimentConfig":
        """Check every field; return self. Raises :class:`ConfigError` naming the first bad field."""
        if self.step not in STEPS:
            raise ConfigError("step", f"expected one of {STEPS}, got {self.step!r}")
        if str(self.backbone).lower() not in BACKBONES:
            raise ConfigError("backbone", f"expected one of {tuple(BACKBONES)}, got {self.backbone!r}")
        self.backbone = str(self.backbone).lower()
        for name in ("hidden_size", "num_layers", "epochs", "batch_size", "batch_size_eval", "frame_length", "stride"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(name, f"expected a positive integer, got {v!r}")
        if self.stride > self.frame_length:
            raise ConfigError("stride", f"{self.stride} is longer than frame_length ({self.frame_length}): the samples "
                              "between two frames would never be trained on; expected 1 to frame_length")
        for name, top in (("hidden_size", MAX_HIDDEN_SIZE), ("num_layers", MAX_NUM_LAYERS)):
            if getattr(self, name) > top:
                raise ConfigError(name, f"expected at most {top} (a PA/DPD model of this size would not fit in "
                                  f"memory or train in a lab's time), got {getattr(self, name)}")
        if not isinstance(self.patience, int) or self.patience < 0:
            raise ConfigError("patience", f"expected an integer >= 0, got {self.patience!r}")
        if not isinstance(self.dataset, str) or not self.dataset.strip():
            raise ConfigError("dataset", f"expected a dataset path or 'demo', got {self.dataset!r}")
        for name in ("lr", "lr_end"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < math.inf:
                raise ConfigError(name, f"expected a finite positive number, got {v!r}")
        if self.lr_end > self.lr:
            raise ConfigError("lr_end", f"must not exceed lr ({self.lr}), got {self.lr_end}")
        if not 0 < self.decay_factor < 1:
            raise ConfigError("decay_factor", f"expected 0 < factor < 1, got {self.decay_factor}")
        for name in ("weight_decay", "grad_clip"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf:
                raise ConfigError(name, f"expected a finite number >= 0 (0: off), got {v!r}")
        if self.loss not in LOSSES:
            raise ConfigError("loss", f"expected one of {LOSSES}, got {self.loss!r}")
        dev = str(self.device)
        if not (dev in DEVICES or dev.startswith("cuda:") and dev[5:].isdigit()):
            raise ConfigError("device", f"expected auto, cpu, cuda or cuda:N, got {dev!r}")
        if self.preview_every is not None and (not isinstance(self.preview_every, int) or self.preview_every < 1):
            raise ConfigError("preview_every", f"expected a positive integer or none, got {self.preview_every!r}")
        if self.threads is not None and (not isinstance(self.threads, int) or self.threads < 1):
            raise ConfigError("threads", f"expected a positive integer or none, got {self.threads!r}")
        cores = os.cpu_count() or 1
        if self.threads is not None and self.threads > cores:
            raise ConfigError("threads", f"{self.threads} is more than the {cores} CPU cores of this machine")
        f = self.cuda_memory_fraction
        if f is not None and (isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 1):
            raise ConfigError("cuda_memory_fraction", f"expected a fraction of the card, 0 < f <= 1, got {f!r}")
        t = self.time_limit_s
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < math.inf):
            raise ConfigError("time_limit_s", f"expected a positive number of seconds or none, got {t!r}")
        if self.max_train_samples is not None and self.max_train_samples < self.frame_length:
            raise ConfigError("max_train_samples", f"must be at least frame_length ({self.frame_length})")
        if self.step == "dpd" and not self.pa_run:
            raise ConfigError("pa_run", "a DPD run needs the PA run (id or folder) whose model it trains through")
        if not isinstance(self.allow_dataset_mismatch, bool):
            raise ConfigError("allow_dataset_mismatch", f"expected true or false, got {self.allow_dataset_mismatch!r}")
        self._validate_poly()
        for name in ("thx", "thh"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf:
                raise ConfigError(name, f"expected a finite delta threshold >= 0, got {v!r}")
        self._validate_training_options()
        self._validate_qat()
        if self.kernel not in KERNELS:
            raise ConfigError("kernel", f"expected one of {KERNELS}, got {self.kernel!r}")
        if self.metric_profile not in METRIC_PROFILES:
            raise ConfigError("metric_profile", f"expected one of {METRIC_PROFILES}, got {self.metric_profile!r}")
        if self.gain_rule not in GAIN_RULES:
            raise ConfigError("gain_rule", f"expected one of {GAIN_RULES}, got {self.gain_rule!r}")
        if not 0 <= self.seed <= 2**32 - 1:  # the range NumPy's legacy seeding accepts (the reference seeds it too)
            raise ConfigError("seed", f"expected an integer from 0 to 4294967295 (2**32 - 1), got {self.seed}")
        return self

    def _validate_training_options(self) -> None:
        """The schedule, DPD learning, loss, gain, limiter, selection and evaluation options (class docstring)."""
        for name, choices in (("lr_schedule", LR_SCHEDULES), ("plateau_threshold_mode", PLATEAU_THRESHOLD_MODES),
                              ("dpd_learning", DPD_LEARNING), ("selection", SELECTIONS),
                              ("evaluation", EVALUATIONS), ("augment", AUGMENTS),
                              ("oob_side", OOB_SIDES)):
            if getattr(self, name) not in choices:
                raise ConfigError(name, f"expected one of {choices}, got {getattr(self, name)!r}")
        w = self.warmup_epochs
        if isinstance(w, bool) or not isinstance(w, int) or not 0 <= w < self.epochs:
            raise ConfigError("warmup_epochs", f"expected an integer from 0 to epochs - 1 ({self.epochs - 1}), "
                              f"got {w!r}")
        for name, positive in (("plateau_threshold", False), ("power_weight", False), ("oob_weight", False),
                               ("power_gate_db", True)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 < v if positive else 0 <= v) \
                    or not v < math.inf:
                raise ConfigError(name, f"expected a finite number {'> 0' if positive else '>= 0'}, got {v!r}")
        for name in ("gain_value", "peak_limit"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < math.inf):
                raise ConfigError(name, f"expected a finite number > 0 or none, got {v!r}")
        if self.oob_weight and self.loss != "l2":
            raise ConfigError("oob_weight", f"the out-of-band term is a share of the squared error: it needs loss "
                              f"'l2', got {self.loss!r}")
        win = self.loss_window
        if win is not None and (not isinstance(win, (list, tuple)) or len(win) != 2
                                or any(isinstance(e, bool) or not isinstance(e, int) for e in win)
                                or not 0 <= win[0] < win[1] <= self.frame_length):
            raise ConfigError("loss_window", f"expected [start, stop] with 0 <= start < stop <= frame_length "
                              f"({self.frame_length}), got {win!r}")
        if win is not None:
            self.loss_window = [int(win[0]), int(win[1])]
        if not isinstance(self.test_every_epoch, bool):
            raise ConfigError("test_every_epoch", f"expected true or false, got {self.test_every_epoch!r}")
        if self.step == "pa":
            for name, default in (("dpd_learning", "direct"), ("selection", "reference"), ("evaluation", "segments")):
                if getattr(self, name) != default:
                    raise ConfigError(name, f"{getattr(self, name)!r} is for a DPD run (step 'dpd'); a PA run uses "
                                      f"{default!r}")
            if self.peak_limit is not None:
                raise ConfigError("peak_limit", "limits a DPD's output; a PA run has none")
            if self.target_cfr_db is not None:
                raise ConfigError("target_cfr_db", "shapes a DPD's target; a PA run's target is the measured output")
        c = self.target_cfr_db
        if c is not None and (isinstance(c, bool) or not isinstance(c, (int, float)) or not -20 <= c <= 6):
            raise ConfigError("target_cfr_db", f"expected a peak limit from -20 to 6 dB re max|y_train|, or none, "
                              f"got {c!r}")
        n = self.target_cfr_iterations
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 100:
            raise ConfigError("target_cfr_iterations", f"expected an integer from 1 to 100, got {n!r}")
        b = self.target_cfr_band_hz
        if b is not None and (isinstance(b, bool) or not isinstance(b, (int, float)) or not 0 < b < math.inf):
            raise ConfigError("target_cfr_band_hz", f"expected a finite band > 0 Hz, or none, got {b!r}")
        if c is not None and self.dpd_learning == "ila":
            raise ConfigError("target_cfr_db", "the shaped target is for direct learning (through the PA model); ILA "
                              "fits the PA's inverse and has no target to shape")
        if c is not None and self.fit != "gradient":
            raise ConfigError("target_cfr_db", f"the shaped target is trained towards by gradient (fit 'gradient'); "
                              f"the least-squares fit ({self.fit!r}) is indirect learning and has no target to shape")
        if self.dpd_learning == "ila" and self.fit != "gradient":
            raise ConfigError("dpd_learning", "ILA here trains by gradient (fit = 'gradient'); the least-squares fit "
                              "of MP/GMP is indirect learning already")

    def _validate_poly(self) -> None:
        """The MP/GMP fields and the fit (see the class docstring)."""
        if self.fit not in FITS:
            raise ConfigError("fit", f"expected one of {FITS}, got {self.fit!r}")
        if self.fit == "ls" and self.backbone not in POLY_BACKBONES:
            raise ConfigError("fit", f"least squares fits the MP/GMP backbones only ({', '.join(POLY_BACKBONES)}), "
                              f"not {self.backbone!r}")
        for name, low, top in (("poly_order", 1, MAX_POLY_ORDER), ("memory_depth", 1, MAX_MEMORY_DEPTH),
                               ("cross_lag", 0, MAX_MEMORY_DEPTH), ("cross_lead", 0, MAX_MEMORY_DEPTH)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= top:
                raise ConfigError(name, f"expected an integer from {low} to {top}, got {v!r}")
        if self.cross_order is not None and (isinstance(self.cross_order, bool) or not isinstance(self.cross_order, int)
                                             or not 2 <= self.cross_order <= MAX_POLY_ORDER):
            raise ConfigError("cross_order", f"expected an integer from 2 to {MAX_POLY_ORDER} or none, "
                              f"got {self.cross_order!r}")
        if not isinstance(self.poly_odd_only, bool):
            raise ConfigError("poly_odd_only", f"expected true or false, got {self.poly_odd_only!r}")
        if isinstance(self.rcond, bool) or not isinstance(self.rcond, (int, float)) or not 0 <= self.rcond < 1:
            raise ConfigError("rcond", f"expected a number with 0 <= rcond < 1, got {self.rcond!r}")
        for name, low, top in (("grid_k", 1, MAX_POLY_ORDER), ("grid_m", 1, MAX_MEMORY_DEPTH)):
            v = getattr(self, name)
            if v is None:
                continue
            if self.fit != "ls":
                raise ConfigError(name, "a (K, M) grid search needs the least-squares fit (fit = 'ls')")
            if (not isinstance(v, list) or not v
                    or any(isinstance(e, bool) or not isinstance(e, int) or not low <= e <= top for e in v)):
                raise ConfigError(name, f"expected a non-empty list of integers from {low} to {top}, got {v!r}")

    def _validate_qat(self) -> None:
        """``qat`` and ``parent_run`` (see the class docstring)."""
        if self.qat is None:
            if self.parent_run and self.step != "dpd":
                raise ConfigError("parent_run", "a fine-tune starts from a DPD run (step 'dpd')")
            return
        if self.step != "dpd":
            raise ConfigError("qat", "quantisation-aware training fine-tunes a DPD run (step 'dpd')")
        if self.backbone not in LOWERABLE:
            raise ConfigError("qat", f"the {self.backbone!r} family has no fixed-point lowering (dpd_desktop/quant)")
        if not isinstance(self.qat, dict):
            raise ConfigError("qat", f"expected a mapping of bit widths, got {self.qat!r}")
        try:
            QuantSpec.from_dict(self.qat)
        except (QuantError, TypeError) as exc:
            raise ConfigError("qat", str(exc)) from exc
        if not self.parent_run:
            raise ConfigError("parent_run", "quantisation-aware training needs the run it fine-tunes")

    def poly_spec(self):
        """The MP/GMP orders as a :class:`PolySpec` (None for a neural backbone); with a grid, the given (K, M)
        replace poly_order and memory_depth."""
        if self.backbone not in POLY_BACKBONES:
            return None
        return PolySpec.from_mapping(self.backbone, {
            "order": self.poly_order, "memory_depth": self.memory_depth, "odd_only": self.poly_odd_only,
            "cross_order": self.cross_order or max(2, self.poly_order), "cross_lag": self.cross_lag,
            "cross_lead": self.cross_lead})

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serializable dict (all fields)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ExperimentConfig":
        """Build from a dict (a saved ``config.json``'s ``experiment`` block, read by runs/record.py); unknown keys →
        ConfigError naming the first. Fields left out take their defaults; nothing is validated here (call
        :meth:`validate`)."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ConfigError(unknown[0], f"unknown configuration field (known: {', '.join(sorted(names))})")
        return cls(**data)

    @property
    def size_label(self) -> str:
        """The model in a run folder's name: ``gru23``, ``mp-k5m4``, ``gmp-k5m4``; ``mp-grid`` for a (K, M) grid
        search, whose orders are chosen after the folder is named (config.json has them); ``gru23-qat-w8a8`` for a
        quantisation-aware fine-tune."""
        if self.qat:
            return f"{self.backbone}{self.hidden_size}-qat-w{self.qat.get('weights')}a{self.qat.get('activations')}"
        if self.parent_run:
            return f"{self.backbone}{self.hidden_size}-ft"
        if self.backbone in ("mp", "gmp") and (self.grid_k or self.grid_m):
            return f"{self.backbone}-grid"
        if self.backbone in ("mp", "gmp"):
            return f"{self.backbone}-k{self.poly_order}m{self.memory_depth}"
        return f"{self.backbone}{self.hidden_size}"

    @property
    def model_id(self) -> str:
        """Reference-style model id without the parameter count, e.g. ``PA_S_0_M_GRU_H_23_F_200`` (reference §3.8)."""
        role = "PA" if self.step == "pa" else "DPD"
        if self.backbone in ("mp", "gmp"):
            size = f"K_{self.poly_order}_M_{self.memory_depth}"
            if self.backbone == "gmp":
                size += f"_KC_{self.cross_order or self.poly_order}_LAG_{self.cross_lag}_LEAD_{self.cross_lead}"
            return f"{role}_S_{self.seed}_M_{self.backbone.upper()}_{size}_F_{self.frame_length}"
        return f"{role}_S_{self.seed}_M_{self.backbone.upper()}_H_{self.hidden_size}_F_{self.frame_length}"
