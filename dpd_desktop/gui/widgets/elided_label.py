"""A one-line label that shows as much of its text as fits, with an ellipsis (the status bar's read-outs): it asks
for its whole text's width but accepts less, so a narrow window shortens the read-outs instead of cutting them."""
from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QLabel, QSizePolicy, QStyleOption, QToolTip


class ElidedLabel(QLabel):
    """``text()`` is the whole text; the painted one is elided at ``mode`` (Qt.ElideRight, ElideLeft for paths) to
    the label's width; the tooltip shows the whole text unless one is set. ``min_chars``: the width it keeps at
    least, in average characters."""

    def __init__(self, text: str = "", mode: Qt.TextElideMode = Qt.TextElideMode.ElideRight, min_chars: int = 8,
                 parent=None):
        super().__init__(text, parent)
        self._mode = mode
        self._min_chars = min_chars
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt name)
        hint = super().minimumSizeHint()
        m = self.contentsMargins()
        width = self.fontMetrics().averageCharWidth() * self._min_chars + m.left() + m.right()
        return QSize(min(hint.width(), width), hint.height())

    @property
    def shown_text(self) -> str:
        """The text as painted at the current width."""
        m = self.contentsMargins()
        return self.fontMetrics().elidedText(self.text(), self._mode, max(0, self.width() - m.left() - m.right()))

    @property
    def elided(self) -> bool:
        return self.shown_text != self.text()

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt name)
        p = QPainter(self)
        opt = QStyleOption()
        opt.initFrom(self)
        rect = self.contentsRect()
        self.style().drawItemText(p, rect, int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft),
                                  opt.palette, self.isEnabled(), self.shown_text, self.foregroundRole())
        p.end()

    def event(self, ev) -> bool:
        if ev.type() == ev.Type.ToolTip and not self.toolTip() and self.elided:
            QToolTip.showText(ev.globalPos(), self.text(), self)
            return True
        return super().event(ev)


__all__ = ["ElidedLabel"]
