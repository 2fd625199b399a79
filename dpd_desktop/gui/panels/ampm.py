"""AM/PM: phase of out/x in degrees vs input magnitude, points and each signal's binned curve (PlotData.ampm_curve)."""
from __future__ import annotations

from .amam import AMAMPanel


class AMPMPanel(AMAMPanel):
    """∠(out/x) [deg] vs |x| scatter per signal (the AM/AM panel with the phase instead of the magnitude)."""

    title = "AM/PM"
    file_stem = "ampm"
    y_label = "∠(out/x) [deg]"
    field = "ampm"
    curve_field = "ampm_curve"
