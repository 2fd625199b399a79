"""The epoch table: one row per epoch, ★ on the selected (best) epoch."""
from __future__ import annotations

from typing import Mapping

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from .. import history

COLUMNS = (
    ("★", None, ""),
    ("epoch", "epoch", "d"),
    ("lr", "lr", ".3g"),
    ("train loss", "train_loss", ".3e"),
    ("val NMSE [dB]", "val_nmse", ".2f"),
    ("ACLR avg [dBc]", "val_aclr_avg", ".2f"),
    ("EVM [dB]", "val_evm", ".2f"),
    ("test NMSE [dB]", "test_nmse", ".2f"),
    ("s", "seconds", ".1f"),
)


class EpochTable(QTableWidget):
    """History rows as they arrive; the star follows the selected checkpoint's epoch."""

    def __init__(self, parent=None):
        super().__init__(0, len(COLUMNS), parent)
        self.setHorizontalHeaderLabels([c[0] for c in COLUMNS])
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setAlternatingRowColors(True)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(20)
        hdr = self.horizontalHeader()
        hdr.setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        hdr.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self._best_row: int | None = None
        self._epochs: list[int] = []

    def set_metric_profile(self, profile: str | None) -> None:
        """Name the metric profile (metrics/profiles.py) the metric columns follow: in their headers' tooltips and
        the table's own tooltip."""
        text = f"metrics: {profile or 'legacy-2.2.1'}"
        for c, (label, key, _) in enumerate(COLUMNS):
            if key and key.startswith(("val_", "test_")):
                self.horizontalHeaderItem(c).setToolTip(f"{label} · {text}")
        self.setToolTip(text)

    def append_row(self, row: Mapping, is_best: bool = False, epoch: int | None = None,
                   seconds: float | None = None) -> None:
        r = self.rowCount()
        self.insertRow(r)
        for c, (_, key, spec) in enumerate(COLUMNS):
            if key is None:
                text = ""
            else:
                v = history.value(row, key)
                if key == "epoch" and epoch is not None and v != v:
                    v = float(epoch)
                if key == "seconds" and seconds is not None and v != v:
                    v = float(seconds)
                text = history.fmt(int(v), "d") if spec == "d" and v == v else history.fmt(v, spec or ".4g")
            item = QTableWidgetItem(text)
            item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter if c else
                                  Qt.AlignmentFlag.AlignCenter)
            self.setItem(r, c, item)
        self._epochs.append(int(epoch) if epoch is not None else r)
        if is_best:
            self.mark_best_row(r)
        self.scrollToBottom()

    def mark_best_row(self, r: int | None) -> None:
        if self._best_row is not None and self._best_row < self.rowCount():
            self.item(self._best_row, 0).setText("")
            self._set_bold(self._best_row, False)
        self._best_row = r
        if r is not None:
            self.item(r, 0).setText("★")
            self._set_bold(r, True)

    def mark_best_epoch(self, epoch: int) -> None:
        """Move the star to the row of ``epoch`` (0-based, as in history.csv)."""
        if epoch in self._epochs:
            self.mark_best_row(self._epochs.index(epoch))

    def _set_bold(self, r: int, bold: bool) -> None:
        for c in range(self.columnCount()):
            item = self.item(r, c)
            f = item.font()
            f.setBold(bold)
            item.setFont(f)

    @property
    def best_row(self) -> int | None:
        return self._best_row

    def clear_rows(self) -> None:
        self.setRowCount(0)
        self._best_row = None
        self._epochs = []
