"""Learning curves: train/val loss (log y) above, val NMSE and EVM [dB] and val ACLR [dBc] below, best epoch
marked."""
from __future__ import annotations

import math
from typing import Mapping

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

from .. import history, theme
from .base import IntegerAxis, LogAxis, PlotPanel, nowrap, scatter_item


class GrowingBuffer:
    """A float buffer that doubles its capacity when full (amortized O(1) appends, no per-epoch reallocation)."""

    def __init__(self, capacity: int = 64):
        self._data = np.full(capacity, np.nan)
        self._n = 0

    def append(self, v: float) -> None:
        if self._n == len(self._data):
            grown = np.full(2 * len(self._data), np.nan)
            grown[: self._n] = self._data
            self._data = grown
        self._data[self._n] = v
        self._n += 1

    def clear(self) -> None:
        self._n = 0

    @property
    def view(self) -> np.ndarray:
        return self._data[: self._n]

    def __len__(self) -> int:
        return self._n


def _extremes(y: np.ndarray, size: int) -> np.ndarray:
    """Ascending indices, each once, of the lowest and the highest finite value in each run of ``size`` values of
    ``y`` (its length a multiple of ``size``); a run without a finite value gives its first index."""
    runs = y.reshape(-1, size)
    bad = np.isnan(runs)
    lo = np.where(bad, np.inf, runs).argmin(axis=1)
    hi = np.where(bad, -np.inf, runs).argmax(axis=1)
    base = np.arange(len(runs)) * size
    pairs = np.stack([base + np.minimum(lo, hi), base + np.maximum(lo, hi)], axis=1).ravel()
    keep = np.ones(pairs.size, dtype=bool)
    keep[1::2] = lo != hi
    return pairs[keep]


class LearningPanel(PlotPanel):
    """Learning curves, one point per epoch (:meth:`append_row`); x axis linked between the two plots."""

    title = "Learning curves"
    file_stem = "learning_curves"
    placeholder = "Learning curves appear\nwhen the first epoch ends"
    #: At most this many points per curve are drawn: up to it every epoch, beyond it each bin of 2^k epochs (at most
    #: MAX_DRAWN / 2 bins) drawn by its lowest and highest value, at their epochs (a spike stays visible), the last
    #: epoch always in. The cost of an append stays flat however long the run: 10,000 epochs draw 626 points per
    #: curve, a run of 1,000 draws 1,000 (the even stride before drew up to 2,000 and the paint grew 1.5×,
    #: benchmarks/bench_gui_responsiveness.py --part many-epochs).
    MAX_DRAWN = 1000
    #: Markers only while the curves are short (a marker per epoch of a long run would be a solid band).
    MAX_MARKED = 200
    SERIES = (
        ("train_loss", "train loss", "loss"),
        ("val_loss", "val loss", "loss"),
        ("val_nmse", "val NMSE", "metric"),
        ("val_aclr_avg", "val ACLR avg", "metric"),
        ("val_evm", "val EVM", "metric"),
    )

    def __init__(self, parent=None, show_legend: bool = True):
        super().__init__(parent, show_legend)
        self.loss_plot = self._add_plot(0, 0, self.title, left="loss [MSE, data units²]", bottom="",
                                        axisItems={"left": LogAxis("left"), "bottom": IntegerAxis("bottom")})
        self.loss_plot.setLogMode(x=False, y=True)
        # The legends are rows of their own under each plot, so that they never cover a curve.
        self.loss_legend = self.addLabel("", row=1, col=0, size="9pt")
        self.metric_plot = self._add_plot(2, 0, None, left="NMSE, EVM [dB] · ACLR [dBc]", bottom="epoch",
                                          axisItems={"bottom": IntegerAxis("bottom")})
        self.metric_legend = self.addLabel("", row=3, col=0, size="9pt")
        self.metric_plot.setXLink(self.loss_plot)
        self.loss_plot.getAxis("bottom").setStyle(showValues=True)
        for p in (self.loss_plot, self.metric_plot):
            p.getAxis("left").setWidth(62)
        self._epochs = GrowingBuffer()
        self._buffers = {key: GrowingBuffer() for key, _, _ in self.SERIES}
        self._has_values = {key: False for key, _, _ in self.SERIES}  # a finite value arrived (no O(n) scan)
        self._bins: dict[str, tuple[int, int, np.ndarray]] = {}  # key → (bin size, complete bins, their indices)
        self._curves: dict[str, pg.PlotDataItem] = {}
        self._colors: dict[str, str] = {}
        for key, label, where in self.SERIES:
            color = theme.SERIES_COLORS.get("val_aclr" if key == "val_aclr_avg" else key)
            self._colors[key] = color
            plot = self.loss_plot if where == "loss" else self.metric_plot
            pen = pg.mkPen(color, width=2)
            item = scatter_item(pen=pen, symbol="o", symbolSize=5, symbolBrush=color, symbolPen=None, name=label,
                                connect="finite")
            plot.addItem(item)
            self._curves[key] = item
        self._marked = True
        self._set_legends()
        best_pen = pg.mkPen(theme.SERIES_COLORS["best"], width=1.5, style=Qt.PenStyle.DashLine)
        self._best_lines = [pg.InfiniteLine(angle=90, movable=False, pen=best_pen) for _ in range(2)]
        for line, plot in zip(self._best_lines, (self.loss_plot, self.metric_plot)):
            line.setVisible(False)
            plot.addItem(line, ignoreBounds=True)
        self._best_epoch: float | None = None
        self._sync_empty()

    def _legend_html(self, where: str) -> str:
        return " &nbsp;&nbsp;".join(
            nowrap(f"<span style='color:{self._colors[key]}; font-weight:900'>━●━</span>&nbsp;{label}")
            for key, label, w in self.SERIES if w == where)

    def _set_legends(self) -> None:
        self.loss_legend.setText(self._legend_html("loss"))
        self.metric_legend.setText(self._legend_html("metric"))

    def legend_names(self) -> dict[str, list[str]]:
        """The series named in each legend row: ``{"loss": [...], "metric": [...]}``."""
        return {where: [label for _, label, w in self.SERIES if w == where] for where in ("loss", "metric")}

    def append_row(self, row: Mapping, is_best: bool = False) -> None:
        """Append one epoch (a history row). ``is_best`` moves the ★ line to this epoch."""
        ep = history.value(row, "epoch")
        if math.isnan(ep):
            ep = float(len(self._epochs))
        self._epochs.append(ep)
        for key, _, _ in self.SERIES:
            v = history.value(row, key)
            if key in ("train_loss", "val_loss") and not v > 0:
                v = math.nan  # log axis
            self._buffers[key].append(v)
            if math.isfinite(v):
                self._has_values[key] = True
        if is_best:
            self.set_best_epoch(ep)
        self._redraw()

    def set_best_epoch(self, epoch: float | None) -> None:
        """Mark the selected epoch with a dashed vertical line on both plots."""
        self._best_epoch = epoch
        for line in self._best_lines:
            if epoch is None:
                line.setVisible(False)
            else:
                line.setValue(epoch)
                line.setVisible(True)

    def bin_size(self) -> int:
        """Epochs per drawn bin: 1 up to :attr:`MAX_DRAWN` epochs, else the smallest power of two that makes at most
        ``MAX_DRAWN // 2`` bins (fixed bin edges: a longer run changes the drawing only when the size doubles)."""
        n, size = len(self._epochs), 1
        if n <= self.MAX_DRAWN:
            return 1
        while -(-n // size) > self.MAX_DRAWN // 2:
            size *= 2
        return size

    def drawn_index(self, values: np.ndarray | None = None, key: str | None = None) -> slice | np.ndarray:
        """Which epochs of a series (``values``, its buffer) are drawn: all up to :attr:`MAX_DRAWN`, else each bin's
        lowest and highest finite value (:meth:`bin_size`) and the last epoch, in epoch order. With the series'
        ``key`` the bins already complete are kept until the bin size changes (the buffers only grow)."""
        n = len(self._epochs)
        size = self.bin_size()
        if size == 1:
            return slice(0, n)
        y = values if values is not None else np.arange(n, dtype=np.float64)
        full = n // size
        size0, done, idx = self._bins.get(key, (0, 0, None)) if key else (0, 0, None)
        if size0 != size or done > full or idx is None:
            done, idx = 0, np.empty(0, dtype=np.int64)
        if full > done:
            idx = np.concatenate([idx, done * size + _extremes(y[done * size:full * size], size)])
        if key:
            self._bins[key] = (size, full, idx)
        tail = full * size + _extremes(y[full * size:n], n - full * size) if n > full * size else idx[:0]
        out = np.concatenate([idx, tail])
        return out if len(out) and out[-1] == n - 1 else np.append(out, n - 1)

    def _redraw(self) -> None:
        x_all = self._epochs.view
        marked = len(x_all) <= self.MAX_MARKED
        for key, item in self._curves.items():
            if marked != self._marked:
                item.setSymbol("o" if marked else None)
            if not self._has_values[key]:
                item.setData([], [])
                continue
            values = self._buffers[key].view
            idx = self.drawn_index(values, key)
            item.setData(x_all[idx], values[idx])
        self._marked = marked
        self._sync_empty()
        self.settle_ranges()

    def update_from(self, plots, label: str = "") -> None:
        """Learning curves come from rows, not PlotData; nothing to do."""

    def clear_data(self) -> None:
        self._epochs.clear()
        self._bins.clear()
        for b in self._buffers.values():
            b.clear()
        self._has_values = {key: False for key in self._has_values}
        self.set_best_epoch(None)
        self._redraw()

    def point_count(self) -> int:
        return sum(len(item.getData()[0] if item.getData()[0] is not None else []) for item in self._curves.values())

    @property
    def n_epochs(self) -> int:
        return len(self._epochs)
