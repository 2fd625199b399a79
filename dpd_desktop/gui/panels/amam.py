"""AM/AM: output magnitude vs input magnitude, decimated points per signal and each signal's binned transfer curve
over the whole split (PlotData.amam_curve: the least-squares gain per |x| bin, metrics/transfer.py)."""
from __future__ import annotations

from .base import CurveSet, PlotPanel, ordered

CURVE_TIP = ("Points: decimated samples. Lines: the transfer over the whole split, binned by |x| (the least-squares "
             "complex gain of each bin; noise uncorrelated with x averages out).")


class AMAMPanel(PlotPanel):
    """|out| vs |x| scatter (measured y, predicted ŷ, ...), same samples for every signal, and each signal's curve
    (a line of the same color above the points)."""

    title = "AM/AM"
    file_stem = "amam"
    y_label = "|out| [lin., data units]"
    field = "amam"  # the PlotData mapping drawn against PlotData.amam_in
    curve_field = "amam_curve"  # the PlotData mapping drawn against PlotData.curve_in
    #: The curve's pen width (the points are 3 px): the model's line reads over the measured cloud.
    CURVE_WIDTH = 2.5

    def __init__(self, parent=None, show_legend: bool = True):
        super().__init__(parent, show_legend)
        self.plot = self._add_plot(0, 0, self.title, left=self.y_label, bottom="|x| [lin., data units]")
        self.legend = self._add_legend(self.plot, offset=(8, 8))
        self.points = CurveSet(self.plot, "scatter", symbol_size=3)
        self.curves = CurveSet(self.plot, "line", legend=False, z_offset=10)
        self.setToolTip(CURVE_TIP)
        self._sync_empty()

    def update_from(self, plots, label: str = "") -> None:
        values = getattr(plots, self.field)
        names = ordered(values.keys(), plots.target_name, plots.pred_name)
        self.points.set({n: (plots.amam_in, values[n]) for n in names})
        curves = getattr(plots, self.curve_field, None) or {}
        x = getattr(plots, "curve_in", None)
        names = [n for n in ordered(curves.keys(), plots.target_name, plots.pred_name)
                 if x is not None and len(curves[n]) == len(x)]
        self.curves.set({n: (x, curves[n]) for n in names}, {n: self.CURVE_WIDTH for n in names})
        self.set_source_label(label)
        self._sync_empty()

    def curve_names(self) -> list[str]:
        """The signals whose curve is drawn (tests)."""
        out = []
        for n, item in self.curves.items.items():
            x, _ = item.getData()
            if item.isVisible() and x is not None and len(x):
                out.append(n)
        return out

    def clear_data(self) -> None:
        self.points.clear()
        self.curves.clear()
        self.set_source_label("")
        self._sync_empty()

    def point_count(self) -> int:
        return self.points.point_count()
