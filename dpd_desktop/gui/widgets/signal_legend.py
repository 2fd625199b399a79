"""One legend for all data panels: the signal colors are the same everywhere, so they are named once."""
from __future__ import annotations

from typing import Iterable

from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from .. import theme


class SignalLegend(QWidget):
    """A row of colored line swatches with the signal names (measured y, predicted ŷ, input x, error, ...)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._layout = QHBoxLayout(self)
        self._layout.setContentsMargins(4, 0, 4, 0)
        self._layout.setSpacing(14)
        self._title = QLabel("Signals:")
        self._layout.addWidget(self._title)
        self._layout.addStretch(1)
        self._names: list[str] = []
        self.labels: dict[str, QLabel] = {}

    def set_signals(self, names: Iterable[str]) -> None:
        names = list(dict.fromkeys(names))
        if names == self._names:
            return
        for lab in self.labels.values():
            self._layout.removeWidget(lab)
            lab.deleteLater()
        self.labels = {}
        for i, name in enumerate(names):
            color = theme.color_for(name, i)
            lab = QLabel(f"<span style='color:{color}; font-weight:900'>━━</span>&nbsp;{name}")
            self._layout.insertWidget(self._layout.count() - 1, lab)
            self.labels[name] = lab
        self._names = names

    @property
    def names(self) -> list[str]:
        return list(self._names)
