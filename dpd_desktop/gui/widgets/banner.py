"""A dismissible banner for outcomes and errors: plain words first, the technical detail one click away."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QRectF, Qt, QUrl, Signal
from PySide6.QtGui import QColor, QDesktopServices, QGuiApplication, QPainter, QPalette, QPen
from PySide6.QtWidgets import (QFrame, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QSizePolicy, QToolButton,
                               QVBoxLayout)

_KIND_COLORS = {"success": "#2ca02c", "error": "#d62728", "warning": "#e69500", "info": "#1f77b4"}
_KIND_ICONS = {"success": "✔", "error": "✖", "warning": "■", "info": "ℹ"}


class OutcomeBanner(QFrame):
    """Outcome of a run (finished / failed / cancelled) or an error, with the run folder and a Details disclosure.

    ``show_message(kind, text, run_dir=None, detail="")`` with kind in success / error / warning / info.
    """

    dismissed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("OutcomeBanner")
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.kind = "info"
        self.run_dir: str | None = None

        self.icon = QLabel()
        self.text = QLabel()
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.open_button = QPushButton("Open run folder")
        self.open_button.clicked.connect(self.open_run_folder)
        self.copy_button = QPushButton("Copy path")
        self.copy_button.clicked.connect(self.copy_path)
        self.details_button = QToolButton()
        self.details_button.setText("Details ▸")
        self.details_button.setCheckable(True)
        self.details_button.toggled.connect(self._toggle_details)
        self.close_button = QToolButton()
        self.close_button.setText("✕")
        self.close_button.setToolTip("Dismiss")
        self.close_button.setAutoRaise(True)
        self.close_button.clicked.connect(self.dismiss)

        self.detail = QPlainTextEdit()
        self.detail.setReadOnly(True)
        self.detail.setMaximumHeight(160)
        self.detail.setVisible(False)
        self.detail.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)

        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.icon)
        row.addWidget(self.text, 1)
        for w in (self.open_button, self.copy_button, self.details_button, self.close_button):
            row.addWidget(w)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 6, 6, 6)
        lay.addLayout(row)
        lay.addWidget(self.detail)
        self.setVisible(False)

    def show_message(self, kind: str, text: str, run_dir: str | None = None, detail: str = "") -> None:
        """Show the banner. ``text`` is plain words; ``detail`` (e.g. a traceback) sits behind "Details"."""
        self.kind = kind if kind in _KIND_COLORS else "info"
        self.run_dir = str(run_dir) if run_dir else None
        self._apply_style()
        self.text.setText(text + (f"\nRun folder: {self.run_dir}" if self.run_dir else ""))
        has_dir = bool(self.run_dir)
        self.open_button.setVisible(has_dir)
        self.copy_button.setVisible(has_dir)
        self.details_button.setVisible(bool(detail))
        self.details_button.setChecked(False)
        self.detail.setPlainText(detail)
        self.detail.setVisible(False)
        self.setVisible(True)

    def _apply_style(self) -> None:
        """The kind's icon color, and a repaint of the frame (:meth:`paintEvent`)."""
        color = QColor(_KIND_COLORS[self.kind])
        self.icon.setText(f"<span style='color:{color.name()}; font-size:14pt'>{_KIND_ICONS[self.kind]}</span>")
        self.update()

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt name)
        """The kind's tint and border, painted here rather than by a style sheet: a style sheet fixes its children's
        palette when they are polished, and a later light/dark switch left the banner's text and buttons in the old
        colors."""
        color = QColor(_KIND_COLORS[self.kind])
        tint = QColor(color)
        tint.setAlpha(40)
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setPen(QPen(color, 1))
        p.setBrush(tint)
        p.drawRoundedRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5), 4, 4)
        p.end()

    @property
    def message(self) -> str:
        return self.text.text()

    def _toggle_details(self, on: bool) -> None:
        self.detail.setVisible(on)
        self.details_button.setText("Details ▾" if on else "Details ▸")

    def open_run_folder(self) -> None:
        if self.run_dir and Path(self.run_dir).exists():
            QDesktopServices.openUrl(QUrl.fromLocalFile(self.run_dir))

    def copy_path(self) -> None:
        if self.run_dir:
            QGuiApplication.clipboard().setText(self.run_dir)

    def dismiss(self) -> None:
        self.setVisible(False)
        self.dismissed.emit()


def warning_color() -> str:
    """Red that reads on the current palette (used for the batch-preview warning)."""
    pal = QGuiApplication.palette()
    return "#ff6b6b" if pal.color(QPalette.ColorRole.Window).lightness() < 128 else "#c62828"
