"""Time domain: I (top) and Q (bottom) of a window, measured y vs predicted ŷ; x axes linked, zoomable."""
from __future__ import annotations

import numpy as np

from .. import theme
from .base import CurveSet, PlotPanel, ordered


class TimeDomainPanel(PlotPanel):
    """In-phase and quadrature components of a short window of every signal in ``PlotData.time``."""

    title = "Time domain I/Q [data units]"
    file_stem = "time_domain"

    def __init__(self, parent=None, show_legend: bool = True):
        super().__init__(parent, show_legend)
        # "I" and "Q", their unit in the title: "I [data units]" was longer than a plot of the panel's half height
        # at 1280×800 and the two vertical labels ran into each other
        self.i_plot = self._add_plot(0, 0, self.title, left="I", bottom="")
        self.q_plot = self._add_plot(1, 0, None, left="Q", bottom="sample index n")
        self.q_plot.setXLink(self.i_plot)
        for p in (self.i_plot, self.q_plot):
            p.getAxis("left").setWidth(56)
        self.legend = self._add_legend(self.i_plot, columns=2)
        self.i_curves = CurveSet(self.i_plot, "line")
        self.q_curves = CurveSet(self.q_plot, "line")
        self._sync_empty()

    def update_from(self, plots, label: str = "") -> None:
        n = np.asarray(plots.time_idx, dtype=np.float64)
        # The input x (another scale: the PA gain) would flatten the comparison; it is in the PSD panel.
        names = [n for n in ordered(plots.time.keys(), plots.target_name, plots.pred_name)
                 if theme.signal_role(n) != "x" or n in (plots.target_name, plots.pred_name)]
        iq = {name: np.asarray(plots.time[name], dtype=np.float64).reshape(-1, 2) for name in names}
        # The reference is drawn wider so that it stays visible under a model that fits it well; the others at 1 px
        # (Qt's fast path for antialiased lines, as the PSD's): at 1.5 px they took 3.5 of the panel's 8.5 ms paint
        # on DPA_160MHz plot data (bench_gui_responsiveness.py --part epoch-end)
        widths = {name: (3.0 if name == plots.target_name else 1.0) for name in iq}
        self.i_curves.set({name: (n, v[:, 0]) for name, v in iq.items()}, widths)
        self.q_curves.set({name: (n, v[:, 1]) for name, v in iq.items()}, widths)
        self.set_source_label(label)
        self._sync_empty()

    def clear_data(self) -> None:
        self.i_curves.clear()
        self.q_curves.clear()
        self.set_source_label("")
        self._sync_empty()

    def point_count(self) -> int:
        return self.i_curves.point_count() + self.q_curves.point_count()
