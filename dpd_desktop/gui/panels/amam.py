"""AM/AM: output magnitude vs input magnitude, decimated points per signal."""
from __future__ import annotations

from .base import CurveSet, PlotPanel, ordered


class AMAMPanel(PlotPanel):
    """|out| vs |x| scatter (measured y, predicted ŷ, ...), same samples for every signal."""

    title = "AM/AM"
    file_stem = "amam"
    y_label = "|out| [lin., data units]"
    field = "amam"  # the PlotData mapping drawn against PlotData.amam_in

    def __init__(self, parent=None, show_legend: bool = True):
        super().__init__(parent, show_legend)
        self.plot = self._add_plot(0, 0, self.title, left=self.y_label, bottom="|x| [lin., data units]")
        self.legend = self._add_legend(self.plot, offset=(8, 8))
        self.points = CurveSet(self.plot, "scatter", symbol_size=3)
        self._sync_empty()

    def update_from(self, plots, label: str = "") -> None:
        values = getattr(plots, self.field)
        names = ordered(values.keys(), plots.target_name, plots.pred_name)
        self.points.set({n: (plots.amam_in, values[n]) for n in names})
        self.set_source_label(label)
        self._sync_empty()

    def clear_data(self) -> None:
        self.points.clear()
        self.set_source_label("")
        self._sync_empty()

    def point_count(self) -> int:
        return self.points.point_count()
