"""The epoch table: one row per epoch, ★ on the selected (best) epoch.

A QTableView on a model that keeps the numbers in one float array (no item object per cell): an append costs the
same at the first epoch and the ten-thousandth.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView

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
_NUMERIC = COLUMNS[1:]


class EpochModel(QAbstractTableModel):
    """Rows of :data:`COLUMNS` held as an (n, 8) float64 array that doubles its capacity when full."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._data = np.full((64, len(_NUMERIC)), np.nan)
        self._n = 0
        self.best_row: int | None = None
        self.header_tips: dict[int, str] = {}  # column → header tooltip (the metric profile, set_metric_profile)
        self._bold = QFont()
        self._bold.setBold(True)

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802 (Qt name)
        return 0 if parent.isValid() else self._n

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if orientation != Qt.Orientation.Horizontal:
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section][0]
        if role == Qt.ItemDataRole.ToolTipRole:
            return self.header_tips.get(section)
        return None

    def text(self, r: int, c: int) -> str:
        if c == 0:
            return "★" if r == self.best_row else ""
        v = float(self._data[r, c - 1])
        spec = COLUMNS[c][2]
        return history.fmt(int(v), "d") if spec == "d" and v == v else history.fmt(v, spec or ".4g")

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        r, c = index.row(), index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self.text(r, c)
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter) if c else \
                int(Qt.AlignmentFlag.AlignCenter)
        if role == Qt.ItemDataRole.FontRole and r == self.best_row:
            return self._bold
        return None

    def append(self, values: list[float]) -> int:
        if self._n == len(self._data):
            grown = np.full((2 * len(self._data), self._data.shape[1]), np.nan)
            grown[: self._n] = self._data
            self._data = grown
        r = self._n
        self.beginInsertRows(QModelIndex(), r, r)
        self._data[r] = values
        self._n += 1
        self.endInsertRows()
        return r

    def set_best(self, r: int | None) -> None:
        old, self.best_row = self.best_row, r
        for row in {old, r} - {None}:
            if row < self._n:
                self.dataChanged.emit(self.index(row, 0), self.index(row, len(COLUMNS) - 1))

    def clear(self) -> None:
        self.beginResetModel()
        self._n = 0
        self.best_row = None
        self.endResetModel()

    def epoch_values(self) -> np.ndarray:
        return self._data[: self._n, 0]


class _Cell:
    """What ``item(r, c)`` returns (the QTableWidget-like read access the tests and callers use)."""

    def __init__(self, model: EpochModel, r: int, c: int):
        self._model, self._r, self._c = model, r, c

    def text(self) -> str:
        return self._model.text(self._r, self._c)

    def font(self) -> QFont:
        return self._model._bold if self._r == self._model.best_row else QFont()


class EpochTable(QTableView):
    """History rows as they arrive; the star follows the selected checkpoint's epoch."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._model = EpochModel(self)
        self.setModel(self._model)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setAlternatingRowColors(True)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        self.verticalHeader().setDefaultSectionSize(20)
        hdr = self.horizontalHeader()
        hdr.setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        # Fixed, not ResizeToContents: that would measure every row at every append.
        hdr.setSectionResizeMode(0, QHeaderView.ResizeMode.Fixed)
        hdr.resizeSection(0, self.fontMetrics().horizontalAdvance("★") + 16)

    def set_metric_profile(self, profile: str | None) -> None:
        """Name the metric profile (metrics/profiles.py) the metric columns follow: in their headers' tooltips and
        the table's own tooltip."""
        text = f"metrics: {profile or 'legacy-2.2.1'}"
        self._model.header_tips = {c: f"{label} · {text}" for c, (label, key, _) in enumerate(COLUMNS)
                                   if key and key.startswith(("val_", "test_"))}
        self._model.headerDataChanged.emit(Qt.Orientation.Horizontal, 0, len(COLUMNS) - 1)
        self.setToolTip(text)

    def append_row(self, row: Mapping, is_best: bool = False, epoch: int | None = None,
                   seconds: float | None = None) -> None:
        values = []
        for _, key, _ in _NUMERIC:
            v = history.value(row, key)
            if key == "epoch" and epoch is not None and v != v:
                v = float(epoch)
            if key == "seconds" and seconds is not None and v != v:
                v = float(seconds)
            values.append(v)
        if values[0] != values[0]:
            values[0] = float(epoch if epoch is not None else self._model.rowCount())
        r = self._model.append(values)
        if is_best:
            self.mark_best_row(r)
        self.scrollToBottom()

    def mark_best_row(self, r: int | None) -> None:
        self._model.set_best(r)

    def mark_best_epoch(self, epoch: int) -> None:
        """Move the star to the row of ``epoch`` (0-based, as in history.csv)."""
        hits = np.flatnonzero(self._model.epoch_values() == epoch)
        if hits.size:
            self.mark_best_row(int(hits[-1]))

    @property
    def best_row(self) -> int | None:
        return self._model.best_row

    def rowCount(self) -> int:  # noqa: N802 (the QTableWidget name callers use)
        return self._model.rowCount()

    def columnCount(self) -> int:  # noqa: N802
        return self._model.columnCount()

    def item(self, r: int, c: int) -> _Cell:
        return _Cell(self._model, r, c)

    def clear_rows(self) -> None:
        self._model.clear()
