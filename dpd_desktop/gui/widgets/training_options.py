"""The Training form's optional part, folded under a "Training options" button: the learning-rate schedule, its final
learning rate and its warm-up, the training-data augmentation, and the loss's out-of-band and output-power terms — the
fields of :class:`~dpd_desktop.config.ExperimentConfig` of the same names (training/schedules.py, augment.py,
losses.py). Folded, the button names the options that differ from their defaults, so a run's settings are never
hidden."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFormLayout, QSizePolicy, QToolButton, QVBoxLayout, QWidget

from ...config import ExperimentConfig
from .inputs import LearningRateSpinBox, WeightSpinBox, combo, select, set_count, spin

#: (value, label, tooltip) of the choices, in config.py's order
LR_SCHEDULE_CHOICES = (
    ("plateau", "plateau (reference)", "Halve the learning rate when validation stops improving (OpenDPD's)"),
    ("cosine", "cosine", "A half cosine from the learning rate to the final learning rate over the epochs after the "
                         "warm-up"),
)
AUGMENT_CHOICES = (
    ("none", "none", "The training series as measured"),
    ("phase", "phase ramp", "Each epoch turns the training input and target by a new phase ramp: more, equally "
                            "valid inputs for a DPD trained through the frozen PA (training/augment.py)"),
)
OOB_SIDE_CHOICES = (
    ("both", "both sides", "The out-of-band error on both sides of the main channel"),
    ("worse", "worse side", "Twice the out-of-band error of the batch's worse side: the side that sets the "
                            "worse-side ACLR"),
)
#: Labels of the fields in error messages (gui/widgets/config_form.py FIELD_LABELS).
OPTION_LABELS = {"lr_schedule": "LR schedule", "lr_end": "Final learning rate", "warmup_epochs": "Warm-up",
                 "augment": "Augmentation", "oob_weight": "Out-of-band weight", "oob_side": "Out-of-band side",
                 "power_weight": "Power weight"}


class TrainingOptions(QWidget):
    """The folded options (module docstring); ``changed`` when one changes."""

    changed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.toggle = QToolButton()
        self.toggle.setCheckable(True)
        self.toggle.setArrowType(Qt.ArrowType.RightArrow)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.setAutoRaise(True)
        # the title never widens the form: it is elided to the width the form has (resizeEvent)
        self.toggle.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.toggle.setMinimumWidth(0)
        self.title = ""
        self.lr_schedule = combo(LR_SCHEDULE_CHOICES, "How the learning rate changes over the epochs")
        self.lr_end = LearningRateSpinBox()
        self.lr_end.setToolTip("The learning rate's floor: where the plateau schedule stops halving, where the cosine "
                               "schedule ends")
        self.warmup_epochs = spin(0, 1_000_000, "Epochs of linear learning-rate warm-up (0: none)", "epoch")
        self.augment = combo(AUGMENT_CHOICES, "Training-data augmentation")
        self.oob_weight = WeightSpinBox(1.0, "The squared error outside the main channel counts 1 + W times (needs "
                                             "the dataset's sample rate and main-channel bandwidth; 0: off)")
        self.oob_side = combo(OOB_SIDE_CHOICES, "Which side of the main channel the out-of-band term counts")
        self.power_weight = WeightSpinBox(1e-4, "Weight of the output-power term: holds a DPD at its target's power "
                                                "(1e-4 makes a 0.5 dB power error cost as much as a −46 dB error; "
                                                "0: off)")
        self.body = QWidget()
        form = QFormLayout(self.body)
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow("LR schedule", self.lr_schedule)
        form.addRow("Final LR", self.lr_end)
        form.addRow("Warm-up", self.warmup_epochs)
        form.addRow("Augmentation", self.augment)
        form.addRow("Out-of-band weight", self.oob_weight)
        form.addRow("Out-of-band side", self.oob_side)
        form.addRow("Power weight", self.power_weight)
        self.body.setVisible(False)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addWidget(self.toggle)
        lay.addWidget(self.body)
        self.fields = {"lr_schedule": self.lr_schedule, "lr_end": self.lr_end, "warmup_epochs": self.warmup_epochs,
                       "augment": self.augment, "oob_weight": self.oob_weight, "oob_side": self.oob_side,
                       "power_weight": self.power_weight}
        for w in self.fields.values():
            (getattr(w, "currentIndexChanged", None) or w.valueChanged).connect(self._on_changed)
        self.oob_weight.valueChanged.connect(self._sync_side)
        self._sync_side()
        self.toggle.toggled.connect(self.set_open)
        self._sync_title()

    def set_open(self, on: bool) -> None:
        """Unfold (``on``) or fold the options."""
        self.toggle.setChecked(on)
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if on else Qt.ArrowType.RightArrow)
        self.body.setVisible(on)

    def set_config(self, cfg: ExperimentConfig) -> None:
        select(self.lr_schedule, cfg.lr_schedule)
        self.lr_end.setValue(float(cfg.lr_end))
        set_count(self.warmup_epochs, int(cfg.warmup_epochs))
        select(self.augment, cfg.augment)
        self.oob_weight.setValue(float(cfg.oob_weight))
        select(self.oob_side, cfg.oob_side)
        self.power_weight.setValue(float(cfg.power_weight))
        self._sync_title()

    def values(self) -> dict:
        return dict(lr_schedule=self.lr_schedule.currentData(), lr_end=float(self.lr_end.value()),
                    warmup_epochs=self.warmup_epochs.value(), augment=self.augment.currentData(),
                    oob_weight=float(self.oob_weight.value()),
                    oob_side=self.oob_side.currentData(), power_weight=float(self.power_weight.value()))

    def changed_from_defaults(self) -> list[str]:
        """Short words for the options that differ from ExperimentConfig's defaults, in the form's order."""
        d, v = ExperimentConfig(), self.values()
        out = []
        if v["lr_schedule"] != d.lr_schedule:
            out.append(self.lr_schedule.currentText())
        if v["lr_end"] != d.lr_end:
            out.append(f"final LR {self.lr_end.text()}")
        if v["warmup_epochs"] != d.warmup_epochs:
            out.append(f"warm-up {v['warmup_epochs']}")
        if v["augment"] != d.augment:
            out.append(self.augment.currentText())
        if v["oob_weight"] != d.oob_weight:
            out.append(f"out-of-band {self.oob_weight.text()}")
        if v["oob_side"] != d.oob_side:
            out.append(self.oob_side.currentText())
        if v["power_weight"] != d.power_weight:
            out.append(f"power {self.power_weight.text()}")
        return out

    def _sync_title(self) -> None:
        """The button's title names the options set (elided to its width; whole in its tooltip)."""
        changed = self.changed_from_defaults()
        self.title = "Training options" + (f": {', '.join(changed)}" if changed else "")
        self.toggle.setToolTip(f"{self.title}\n(schedule, augmentation and loss terms; folded, the title names the "
                               f"ones that differ from the defaults)")
        self._elide()

    def _elide(self) -> None:
        room = self.toggle.width() - self.toggle.iconSize().width() - 16  # the arrow and the button's margins
        self.toggle.setText(self.toggle.fontMetrics().elidedText(self.title, Qt.TextElideMode.ElideRight,
                                                                 max(room, 40)))

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        super().resizeEvent(event)
        self._elide()

    def _sync_side(self, *_):
        """The side matters only with the out-of-band term on."""
        self.oob_side.setEnabled(self.oob_weight.value() > 0)

    def _on_changed(self, *_):
        self._sync_title()
        self.changed.emit()
