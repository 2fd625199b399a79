"""Input widgets of the forms: learning rates and loss weights in ``5e-03`` style, counts with their unit, choice
boxes with a tooltip per item."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QValidator
from PySide6.QtWidgets import QComboBox, QDoubleSpinBox, QSpinBox

__all__ = ["LearningRateSpinBox", "UnitSpinBox", "WeightSpinBox", "combo", "select", "set_count", "spin"]


def combo(choices, tip: str = "") -> QComboBox:
    """A choice box of ``choices`` ((value, label, tooltip), in order): each item's data is its value."""
    c = QComboBox()
    for value, label, item_tip in choices:
        c.addItem(label, value)
        c.setItemData(c.count() - 1, item_tip, Qt.ItemDataRole.ToolTipRole)
    if tip:
        c.setToolTip(tip)
    return c


def select(box: QComboBox, value, lookup=None) -> None:
    """Make the item whose data is ``lookup`` (default ``str(value)``) current; a value the box does not offer (a run
    of another version) is added as it is, so the form shows it and validate() names it."""
    i = box.findData(str(value) if lookup is None else lookup)
    if i < 0:
        box.addItem(str(value), str(value))
        i = box.count() - 1
    box.setCurrentIndex(i)


def set_count(box: QSpinBox, value: int) -> None:
    """Show ``value`` in ``box``, raising its maximum when a run recorded more."""
    if value > box.maximum():
        box.setMaximum(value)
    box.setValue(value)


class LearningRateSpinBox(QDoubleSpinBox):
    """A spin box for learning rates: shows ``5e-03`` style values, steps ×2 / ÷2, accepts scientific input."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setDecimals(12)
        self.setRange(1e-9, 10.0)
        self.setKeyboardTracking(False)

    def textFromValue(self, value: float) -> str:  # noqa: N802 (Qt name)
        return f"{value:.6g}"

    def valueFromText(self, text: str) -> float:  # noqa: N802
        try:
            return float(text.strip())
        except ValueError:
            return self.value()

    def validate(self, text: str, pos: int):
        t = text.strip()
        try:
            v = float(t)
        except ValueError:
            ok = all(c in "0123456789.eE+-" for c in t)
            return (QValidator.State.Intermediate if ok else QValidator.State.Invalid), text, pos
        state = QValidator.State.Acceptable if self.minimum() <= v <= self.maximum() else QValidator.State.Intermediate
        return state, text, pos

    def stepBy(self, steps: int) -> None:  # noqa: N802
        self.setValue(self.value() * (2.0 ** steps))


class UnitSpinBox(QSpinBox):
    """A spin box whose unit agrees with its value: "1 sample", "200 samples" (``unit``, ``units``)."""

    def __init__(self, unit: str, units: str | None = None, parent=None):
        super().__init__(parent)
        self.unit, self.units = unit, units or unit + "s"
        self.valueChanged.connect(self._sync_suffix)
        self._sync_suffix(self.value())

    def _sync_suffix(self, v: int) -> None:
        self.setSuffix(f" {self.unit if v == 1 else self.units}")


def spin(lo: int, hi: int, tip: str = "", unit: str = "", units: str | None = None,
         special: str | None = None) -> QSpinBox:
    """An integer box on [lo, hi] with digit grouping; ``unit``: a :class:`UnitSpinBox`; ``special``: the text shown
    at ``lo``."""
    s = UnitSpinBox(unit, units) if unit else QSpinBox()
    s.setRange(lo, hi)
    s.setGroupSeparatorShown(True)
    if tip:
        s.setToolTip(tip)
    if special:
        s.setSpecialValueText(special)
    return s


class WeightSpinBox(LearningRateSpinBox):
    """A loss term's weight W ≥ 0 in the learning-rate box's style, 0 shown as "off" (``first``: the step up from
    off)."""

    def __init__(self, first: float, tip: str = "", parent=None):
        super().__init__(parent)
        self.first = float(first)
        self.setRange(0.0, 1e6)
        self.setValue(0.0)
        if tip:
            self.setToolTip(tip)

    def textFromValue(self, value: float) -> str:  # noqa: N802 (Qt name)
        return "off" if value == 0.0 else super().textFromValue(value)

    def valueFromText(self, text: str) -> float:  # noqa: N802
        return 0.0 if text.strip() == "off" else super().valueFromText(text)

    def validate(self, text: str, pos: int):
        if text.strip() == "off":
            return QValidator.State.Acceptable, text, pos
        return super().validate(text, pos)

    def stepBy(self, steps: int) -> None:  # noqa: N802
        """Up: off → ``first``, then ×2; down: ÷2 to ``first``, then off."""
        v = self.value()
        if steps > 0:
            self.setValue(self.first if v == 0.0 else v * 2.0 ** steps)
        elif v > self.first:
            self.setValue(max(v * 2.0 ** steps, self.first))
        else:
            self.setValue(0.0)
