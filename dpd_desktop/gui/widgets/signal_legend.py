"""One legend for all data panels: the signal colors are the same everywhere, so they are named once."""
from __future__ import annotations

from typing import Iterable

from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QWidget

from .. import theme


class SignalLegend(QWidget):
    """"Signals:" and a colored line swatch with each signal's name (measured y, predicted ŷ, input x, error, ...),
    in one label that wraps between entries when the plots are narrow (a DPD run's six signals side by side are
    wider than the two data columns at 1280 px)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 0)
        self.text = QLabel("Signals:")
        self.text.setWordWrap(True)
        self.text.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        layout.addWidget(self.text, 1)
        self._names: list[str] = []

    def set_signals(self, names: Iterable[str]) -> None:
        names = list(dict.fromkeys(names))
        if names == self._names:
            return
        entries = [f"<span style='color:{theme.color_for(name, i)}; font-weight:900'>━━</span>&nbsp;"
                   + name.replace(" ", "&nbsp;") for i, name in enumerate(names)]
        self.text.setText("Signals:&nbsp;&nbsp; " + " &nbsp;&nbsp; ".join(entries))
        self._names = names

    @property
    def names(self) -> list[str]:
        return list(self._names)
