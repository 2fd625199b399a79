"""CCDF of the instantaneous power (probability that the power exceeds the mean by L dB, log scale) of the input x,
the PA outputs and a DPD's output u, with the complex-Gaussian curve for reference and a PAPR read-out
(PlotData.ccdf / papr: metrics/ccdf.py over the whole split)."""
from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

from .. import theme
from .base import CurveSet, LogAxis, PlotPanel, ordered, plain_text, set_readout

GAUSSIAN = "complex Gaussian"


class CCDFPanel(PlotPanel):
    """CCDF curves per signal (the DPD target g·x, x scaled, and the error are left out) and the PAPR read-out."""

    title = "CCDF"
    file_stem = "ccdf"
    placeholder = "Appears when the first\nepoch ends"
    LINE_WIDTH = 2.0

    def __init__(self, parent=None, show_legend: bool = True):
        super().__init__(parent, show_legend)
        self.plot = self._add_plot(0, 0, self.title, left="probability", bottom="power above average [dB]",
                                   axisItems={"left": LogAxis("left")})
        self.plot.setLogMode(x=False, y=True)
        self.plot.getAxis("left").setWidth(52)
        # bottom left, two columns: a CCDF never goes there
        self.legend = self._add_legend(self.plot, offset=(8, -8), columns=2)
        self.curves = CurveSet(self.plot, "line")
        self.gaussian = pg.PlotDataItem(pen=pg.mkPen(theme.SIGNAL_COLORS["x"], width=1.0, style=Qt.PenStyle.DotLine),
                                        name=GAUSSIAN)
        self.gaussian.setZValue(-5)
        self._gaussian_added = False  # added with the first data: an empty plot's legend stays empty
        self.readout = self.addLabel("", row=1, col=0, size="9pt", justify="left")
        self.setToolTip("Complementary cumulative distribution of the instantaneous power over the whole split: the "
                        "fraction of samples whose power exceeds the average by the abscissa. The dotted curve is a "
                        "complex Gaussian signal's (many-carrier OFDM), exp(−10^(L/10)). PAPR: the level exceeded "
                        "with the probability shown.")
        self._sync_empty()

    @staticmethod
    def signals(plots) -> list[str]:
        names = [n for n in (getattr(plots, "ccdf", None) or {})
                 if theme.signal_role(n) not in ("target", "error")]
        first = ordered(names, plots.target_name, plots.pred_name)
        x = [n for n in first if theme.signal_role(n) == "x"]
        return x + [n for n in first if n not in x]

    def update_from(self, plots, label: str = "") -> None:
        levels = np.asarray(getattr(plots, "ccdf_db", np.empty(0)), dtype=np.float64)
        names = [n for n in self.signals(plots) if len(plots.ccdf[n]) == len(levels)]
        data = {}
        floor, top = 1.0, 0
        for n in names:
            p = np.asarray(plots.ccdf[n], dtype=np.float64)
            pos = p > 0
            if pos.any():
                floor = min(floor, float(p[pos].min()))
                top = max(top, int(np.flatnonzero(pos)[-1]) + 2)
            data[n] = (levels, np.where(pos, p, np.nan))  # log axis: 0 is not drawn
        # up to the highest level a sample exceeds (the x axis then ends near the largest peak PAPR)
        data = {n: (x[:top], y[:top]) for n, (x, y) in data.items()}
        self.curves.set(data, {n: self.LINE_WIDTH for n in names})
        if names:
            if not self._gaussian_added:
                self.plot.addItem(self.gaussian, ignoreBounds=True)
                self._gaussian_added = True
            g = np.exp(-(10.0 ** (levels / 10.0)))
            keep = (g >= floor / 10) & (np.arange(len(levels)) < top)
            self.gaussian.setData(levels[keep], g[keep])
            self.gaussian.setVisible(True)
        else:
            self.gaussian.setVisible(False)
        set_readout(self.readout, self.readout_text(plots, names))
        self.set_source_label(label)
        self._sync_empty()

    @staticmethod
    def readout_text(plots, names) -> str:
        papr = getattr(plots, "papr", None) or {}
        items, peaks, prob = [], [], None
        for n in names:
            v = papr.get(n)
            if not v:
                continue
            p, at, peak = v
            prob = p
            at_text = f"{at:.1f}" if math.isfinite(at) else "—"
            items.append(f"<span style='color:{theme.color_for(n)}'>■</span>&nbsp;{n} {at_text} dB")
            peaks.append(f"{peak:.1f}")
        if not items:
            return ""
        rows = ["  ·  ".join(items[i:i + 2]) for i in range(0, len(items), 2)]
        return (f"PAPR at {100 * prob:g} %: " + "<br>".join(rows) +
                f"<br>peak PAPR (same order): {' · '.join(peaks)} dB  ·  "
                f"<span style='color:{theme.SIGNAL_COLORS['x']}'>┈┈</span>&nbsp;{GAUSSIAN}")

    @property
    def readout_plain(self) -> str:
        """The read-out without markup (tests)."""
        return plain_text(self.readout.text)

    def clear_data(self) -> None:
        self.curves.clear()
        self.gaussian.setVisible(False)
        self.readout.setText(" ")
        self.set_source_label("")
        self._sync_empty()

    def point_count(self) -> int:
        return self.curves.point_count()
