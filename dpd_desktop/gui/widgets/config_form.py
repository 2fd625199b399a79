"""The Model and Training forms; they build an :class:`~dpd_desktop.config.ExperimentConfig` and show a
:class:`~dpd_desktop.config.ConfigError` in plain words next to the field it names."""
from __future__ import annotations

import dataclasses
import math

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QFormLayout, QGroupBox, QLabel, QVBoxLayout, QWidget

from ...config import MAX_HIDDEN_SIZE, MAX_NUM_LAYERS, ConfigError, ExperimentConfig
from .poly_form import POLY_BACKBONES, POLY_LABELS, PolyForm
from .inputs import LearningRateSpinBox, select, set_count, spin as _spin
from .training_options import OPTION_LABELS, TrainingOptions

#: The families offered in the form (value, label, tooltip) — labels from the model registry when present.
BACKBONES: tuple[tuple[str, str, str], ...] = (
    ("gru", "GRU", "Gated recurrent unit"),
    ("dgru", "DGRU", "GRU on amplitude/phase features (reference 'dgru')"),
    ("lstm", "LSTM", "Long short-term memory"),
    ("tres_gru", "TRes-GRU", "GRU with temporal residual"),
    ("rvtdcnn", "RVTDCNN", "Real-valued time-delay CNN"),
    ("deltagru", "DeltaGRU", "Delta-thresholded GRU on amplitude/phase features (OpenDPD 2.4.2; dense at zero "
                             "thresholds)"),
    ("tres_deltagru", "TRes-DeltaGRU", "TRes-GRU with a delta-thresholded recurrence (OpenDPD 2.4.2)"),
    ("gru_amp", "GRU-amp", "GRU on [I, Q, |x|, |x|³] (OpenDPD 2.4.2 qgru_amp1, float32)"),
    ("gru_gain", "GRU-gain", "GRU on amplitude/phase features whose head is a complex gain on x plus an additive "
                             "term: y = x·(1 + g) + a"),
    ("gru_gain3", "GRU-gain-3", "GRU-gain with complex gains on x(t−1), x(t), x(t+1)"),
    ("gru_gain3p", "GRU-gain-3p", "GRU-gain-3 with a gain on x(t)·|x(t)|² as well"),
    ("gru_gain5", "GRU-gain-5", "GRU-gain with complex gains on x(t−2) … x(t+2)"),
    ("tcn", "TCN", "Dilated depthwise temporal convolutions with an I/Q residual (OpenDPD 2.4.2; hidden size = "
                   "channels)"),
    ("mp", "MP", "Memory polynomial (least squares, or gradient through the frozen PA for a DPD)"),
    ("gmp", "GMP", "Generalized memory polynomial: MP plus lagging and leading envelope cross terms"),
)
DEVICES = (("auto", "auto (CUDA when available)"), ("cpu", "cpu"), ("cuda", "cuda"))
#: The recurrence kernels (config.py KERNELS, dpd_desktop/kernels): (value, label, tooltip).
KERNEL_CHOICES: tuple[tuple[str, str, str], ...] = (
    ("reference", "reference", "nn.GRU / nn.LSTM (cuDNN on CUDA): bitwise equal to OpenDPD 2.2.1"),
    ("fast", "fast", "Our own recurrence kernels: faster; the same equations, rounded differently (a PA model lands within a few tenths of a dB; a DPD's training path can drift further)"),
)
KERNEL_TIP = ("Recurrence kernels of GRU, DGRU, LSTM and TRes-GRU (a DPD run: its DPD and the frozen PA).\n"
              "reference: nn.GRU / nn.LSTM (cuDNN on CUDA), bitwise equal to OpenDPD 2.2.1.\n"
              "fast: our own kernels, faster; same equations, different rounding (not bitwise equal to the reference).\n"
              "Where fast cannot run a model (device, shape), it runs on reference and the run says why.")

FIELD_LABELS = {
    "backbone": "Backbone", "hidden_size": "Hidden size", "num_layers": "Layers", "epochs": "Epochs",
    "batch_size": "Batch size", "lr": "Learning rate", "lr_end": "Final learning rate",
    "frame_length": "Frame length", "stride": "Stride", "seed": "Seed", "device": "Device",
    "preview_every": "Preview every N batches", "pa_run": "PA run", "step": "Step", "dataset": "Dataset",
    "max_train_samples": "Max training samples", "batch_size_eval": "Eval batch size", "kernel": "Kernel",
    **POLY_LABELS, **OPTION_LABELS,
}


def registry_labels() -> dict[str, tuple[str, str]]:
    """Family → (label, description) from the model registry; {} when it cannot be imported.

    Not called while the form is built: dpd_desktop.models imports torch, which the window imports
    behind its first paint (gui/preload.py); :meth:`ConfigForm.apply_registry_labels` runs once it has.
    """
    try:
        from ...models import REGISTRY  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - the core may not be importable yet; static labels suffice
        return {}
    out = {}
    for name, fam in REGISTRY.items():
        out[str(name)] = (str(getattr(fam, "label", name)), str(getattr(fam, "description", "")))
    return out


class ConfigForm(QWidget):
    """Model form (backbone, hidden size, layers) and Training form (epochs, batch, lr, frame, stride, seed, device,
    kernel, preview period; folded under it, :class:`TrainingOptions`: schedule, final LR, augmentation, loss terms).
    Fields not on the form (``patience``, ``decay_factor``, ...) are kept from the last config set."""

    changed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self._base = ExperimentConfig()

        self.model_box = QGroupBox("Model")
        mf = QFormLayout(self.model_box)
        self.backbone = QComboBox()
        for value, label, tip in BACKBONES:
            self.backbone.addItem(label, value)
            self.backbone.setItemData(self.backbone.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)
        self.hidden_size = _spin(1, MAX_HIDDEN_SIZE, "Hidden units per layer")
        self.num_layers = _spin(1, MAX_NUM_LAYERS, "Number of recurrent layers")
        mf.addRow("Backbone", self.backbone)
        mf.addRow("Hidden size", self.hidden_size)
        mf.addRow("Layers", self.num_layers)
        self.poly = PolyForm()  # K, M, fit, GMP cross terms: shown for MP/GMP instead of hidden size and layers
        mf.addRow(self.poly)
        self._model_layout = mf

        self.training_box = QGroupBox("Training")
        tf = QFormLayout(self.training_box)
        self.epochs = _spin(1, 1_000_000, "Number of passes over the training frames")
        self.batch_size = _spin(1, 1_000_000, "Frames per training batch", "frame")
        self.lr = LearningRateSpinBox()
        self.lr.setToolTip("Initial AdamW learning rate (halved on plateau down to the final LR)")
        self.frame_length = _spin(1, 1_000_000, "Samples per training frame", "sample")
        self.stride = _spin(1, 1_000_000, "Step between frame starts", "sample")
        self.seed = _spin(0, 2**31 - 1, "Random seed (model init, batch order)")
        self.device = QComboBox()
        for value, label in DEVICES:
            self.device.addItem(label, value)
        self.kernel = QComboBox()
        for value, label, tip in KERNEL_CHOICES:
            self.kernel.addItem(label, value)
            self.kernel.setItemData(self.kernel.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)
        self.kernel.setToolTip(KERNEL_TIP)
        self.preview_every = _spin(1, 1_000_000, "With Live batch preview on: plots refresh every N batches "
                                   "(can change during a run)", "batch", "batches")
        self.preview_every.setValue(200)
        tf.addRow("Epochs", self.epochs)
        tf.addRow("Batch size", self.batch_size)
        tf.addRow("Learning rate", self.lr)
        tf.addRow("Frame length", self.frame_length)
        tf.addRow("Stride", self.stride)
        tf.addRow("Seed", self.seed)
        tf.addRow("Device", self.device)
        tf.addRow("Kernel", self.kernel)
        tf.addRow("Preview every", self.preview_every)
        self.options = TrainingOptions()
        tf.addRow(self.options)

        self.error_label = QLabel()
        self.error_label.setWordWrap(True)
        self.error_label.setStyleSheet("color: #c62828;")
        self.error_label.setVisible(False)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.model_box)
        lay.addWidget(self.training_box)
        lay.addWidget(self.error_label)

        self._fields = {
            "backbone": self.backbone, "hidden_size": self.hidden_size, "num_layers": self.num_layers,
            "epochs": self.epochs, "batch_size": self.batch_size, "lr": self.lr, "frame_length": self.frame_length,
            "stride": self.stride, "seed": self.seed, "device": self.device, "kernel": self.kernel,
            "preview_every": self.preview_every,
        }
        for w in self._fields.values():
            sig = getattr(w, "currentIndexChanged", None) or w.valueChanged
            sig.connect(self._on_changed)
        self.poly.changed.connect(self._on_changed)
        self.options.changed.connect(self._on_changed)
        self.backbone.currentIndexChanged.connect(lambda *_: self._sync_family())
        self.set_config(self._base)

    def apply_registry_labels(self, labels: dict[str, tuple[str, str]] | None = None) -> None:
        """Backbone labels and tooltips from the model registry (:func:`registry_labels` unless given)."""
        labels = registry_labels() if labels is None else labels
        for i in range(self.backbone.count()):
            found = labels.get(str(self.backbone.itemData(i)))
            if found:
                self.backbone.setItemText(i, found[0])
                if found[1]:
                    self.backbone.setItemData(i, found[1], Qt.ItemDataRole.ToolTipRole)

    # -- config round trip ----------------------------------------------------------------------------------------
    def set_config(self, cfg: ExperimentConfig) -> None:
        """Fill the form from ``cfg`` (and remember it for the fields the form does not show)."""
        self._base = dataclasses.replace(cfg, extra=dict(cfg.extra))
        select(self.backbone, cfg.backbone, lookup=str(cfg.backbone).lower())
        for name in ("hidden_size", "num_layers", "epochs", "batch_size", "frame_length", "stride", "seed"):
            set_count(self._fields[name], int(getattr(cfg, name)))
        self.lr.setValue(float(cfg.lr))
        select(self.device, cfg.device)
        select(self.kernel, cfg.kernel)
        if cfg.preview_every:
            self.preview_every.setValue(int(cfg.preview_every))
        self.poly.set_config(cfg)
        self.options.set_config(cfg)
        self._sync_family()
        self.clear_error()

    @property
    def is_poly(self) -> bool:
        """The backbone is MP or GMP (the polynomial fields apply, hidden size and layers do not)."""
        return self.backbone.currentData() in POLY_BACKBONES

    def _sync_family(self) -> None:
        poly = self.is_poly
        self._model_layout.setRowVisible(self.hidden_size, not poly)
        self._model_layout.setRowVisible(self.num_layers, not poly)
        self._model_layout.setRowVisible(self.poly, poly)
        if poly:
            self.poly.set_family(self.backbone.currentData())

    def config(self, **overrides) -> ExperimentConfig:
        """An ExperimentConfig from the form (not yet validated); ``overrides`` set fields the form does not own."""
        values = dict(
            backbone=self.backbone.currentData(),
            hidden_size=self.hidden_size.value(),
            num_layers=self.num_layers.value(),
            epochs=self.epochs.value(),
            batch_size=self.batch_size.value(),
            lr=float(self.lr.value()),
            frame_length=self.frame_length.value(),
            stride=self.stride.value(),
            seed=self.seed.value(),
            device=self.device.currentData(),
            kernel=self.kernel.currentData(),
        )
        if self.is_poly:
            values.update(self.poly.values())
        else:  # a neural backbone trains by gradient; a grid is least squares' only
            values.update(fit="gradient", grid_k=None, grid_m=None)
        values.update(self.options.values())
        values.update(overrides)
        return dataclasses.replace(self._base, extra=dict(self._base.extra), **values)

    @property
    def preview_period(self) -> int:
        return int(self.preview_every.value())

    # -- errors & state -------------------------------------------------------------------------------------------
    def show_error(self, err: ConfigError | Exception) -> str:
        """Show a configuration error in plain words next to the form; highlight the field. Returns the text."""
        field = getattr(err, "field", None)
        label = FIELD_LABELS.get(field, field.replace("_", " ").capitalize() if field else "Setting")
        msg = str(err)
        if field and msg.startswith(f"{field}: "):
            msg = msg[len(field) + 2:]
        text = f"{label}: {msg}"
        self.error_label.setText(text)
        self.error_label.setVisible(True)
        for name, w in {**self._fields, **self.poly.fields, **self.options.fields}.items():
            w.setStyleSheet("border: 1px solid #c62828;" if name == field else "")
        if field in self.options.fields:
            self.options.set_open(True)
        return text

    def clear_error(self) -> None:
        self.error_label.setVisible(False)
        for w in (*self._fields.values(), *self.poly.fields.values(), *self.options.fields.values()):
            w.setStyleSheet("")

    def set_read_only(self, read_only: bool) -> None:
        """Lock the form while a run is going (values stay readable); "Preview every" follows
        :meth:`set_preview_enabled` instead (it may change during a run)."""
        self.model_box.setEnabled(not read_only)
        for name, w in self._fields.items():
            if w.parent() is self.training_box and name != "preview_every":
                w.setEnabled(not read_only)
        self.options.body.setEnabled(not read_only)  # still unfolds, to read the options of a running run

    def set_preview_enabled(self, on: bool) -> None:
        self.preview_every.setEnabled(on)

    def _on_changed(self, *_):
        self.clear_error()
        self.changed.emit()


def finite_or_none(v) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None
