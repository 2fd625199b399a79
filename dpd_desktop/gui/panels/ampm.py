"""AM/PM: phase of out/x in degrees vs input magnitude."""
from __future__ import annotations

from .base import CurveSet, PlotPanel, ordered


class AMPMPanel(PlotPanel):
    """∠(out/x) [deg] vs |x| scatter per signal."""

    title = "AM/PM"
    file_stem = "ampm"

    def __init__(self, parent=None, show_legend: bool = True):
        super().__init__(parent, show_legend)
        self.plot = self._add_plot(0, 0, self.title, left="∠(out/x) [deg]", bottom="|x| [lin., data units]")
        self.legend = self._add_legend(self.plot, offset=(8, 8))
        self.points = CurveSet(self.plot, "scatter", symbol_size=3)

    def update_from(self, plots, label: str = "") -> None:
        names = ordered(plots.ampm.keys(), plots.target_name, plots.pred_name)
        self.points.set({n: (plots.amam_in, plots.ampm[n]) for n in names})
        self.set_source_label(label)

    def clear_data(self) -> None:
        self.points.clear()
        self.set_source_label("")

    def point_count(self) -> int:
        return self.points.point_count()
