"""The inspector's flags under the dataset summary: one row per flag, tinted by its severity.

A row's colours come from the current palette: its background is the palette's Window blended with the severity's
hue (:func:`severity_tint`), its text the palette's WindowText, so a light/dark switch recolours it with no style
sheet (a style sheet would fix the colours of the moment it was set; see widgets/banner.py).
"""
from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPalette, QPen
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

#: Severity → hue (the banner's error / warning / info hues).
SEVERITY_HUES = {"error": "#d62728", "warning": "#e69500", "info": "#1f77b4"}
SEVERITY_ICONS = {"error": "✖", "warning": "▲", "info": "ℹ"}
_TINT = 0.22  # share of the hue in a row's background


def severity_tint(palette: QPalette, severity: str) -> QColor:
    """A row's background: ``palette``'s Window colour blended with the severity's hue (:data:`SEVERITY_HUES`)."""
    base = palette.color(QPalette.ColorRole.Window)
    hue = QColor(SEVERITY_HUES.get(severity, SEVERITY_HUES["info"]))
    mix = [round((1 - _TINT) * a + _TINT * b) for a, b in zip(base.getRgb()[:3], hue.getRgb()[:3])]
    return QColor(*mix)


def severity_ink(palette: QPalette, severity: str) -> QColor:
    """The icon's and border's colour: the hue, lighter on a dark palette (contrast with the tinted row)."""
    hue = QColor(SEVERITY_HUES.get(severity, SEVERITY_HUES["info"]))
    return hue.lighter(150) if palette.color(QPalette.ColorRole.Window).lightness() < 128 else hue


class FlagRow(QLabel):
    """One flag: icon, code, the inspector's sentence (wrapped); the tint is painted in :meth:`paintEvent`."""

    def __init__(self, severity: str, code: str, message: str, parent=None):
        super().__init__(parent)
        self.severity, self.code, self.message = severity, code, message
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setForegroundRole(QPalette.ColorRole.WindowText)
        self.setContentsMargins(6, 3, 6, 3)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setToolTip(f"{severity}: {code}\n{message}")
        self._set_text()

    def _set_text(self) -> None:
        ink = severity_ink(self.palette(), self.severity).name()
        icon = SEVERITY_ICONS.get(self.severity, "•")
        msg = self.message.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        self.setText(f"<span style='color:{ink}'>{icon}</span> <b>{self.severity}</b> · {self.code}<br>{msg}")

    def changeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        if event.type() == event.Type.PaletteChange:
            self._set_text()
        super().changeEvent(event)

    def paintEvent(self, event) -> None:  # noqa: N802
        pal = self.palette()
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setPen(QPen(severity_ink(pal, self.severity), 1))
        p.setBrush(severity_tint(pal, self.severity))
        p.drawRoundedRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5), 3, 3)
        p.end()
        super().paintEvent(event)


class FlagList(QWidget):
    """The flags of the loaded dataset (:meth:`show_flags`), or a one-line state ("Checking…", no flags, failed)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._lay = QVBoxLayout(self)
        self._lay.setContentsMargins(0, 2, 0, 2)
        self._lay.setSpacing(3)
        self.state = QLabel()
        self.state.setWordWrap(True)
        self.state.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.state.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self._lay.addWidget(self.state)
        self.rows: list[FlagRow] = []
        self.clear()

    def clear(self) -> None:
        """No dataset: nothing shown."""
        self._set_rows(())
        self.state.setText("")
        self.setVisible(False)

    def show_state(self, text: str) -> None:
        self._set_rows(())
        self.state.setText(text)
        self.setVisible(True)

    def show_flags(self, flags) -> None:
        """One row per flag (objects with ``severity``, ``code``, ``message``), errors first."""
        order = {"error": 0, "warning": 1, "info": 2}
        flags = sorted(flags, key=lambda f: order.get(f.severity, 3))
        self._set_rows(flags)
        n_err = sum(f.severity == "error" for f in flags)
        self.state.setText("Checks: no flags, the capture looks usable." if not flags else
                           f"Checks: {len(flags)} flag(s), {n_err} error(s)")
        self.setVisible(True)

    def _set_rows(self, flags) -> None:
        for r in self.rows:
            self._lay.removeWidget(r)
            r.deleteLater()
        self.rows = [FlagRow(f.severity, f.code, f.message) for f in flags]
        for r in self.rows:
            self._lay.addWidget(r)
            r.show()  # at once: a layout shows a new child of a shown widget only at the next event-loop pass
