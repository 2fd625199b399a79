"""Gain compression (gain relative to the small-signal gain vs input power, P1dB marked) and Pin/Pout (output power
vs input power, the linear-gain line and P1dB marked), from PlotData's binned power transfer (runs/plotdata.py
rf_curves: 0.5 dB input bins over the whole split; metrics/transfer.py compression_point).

Powers are in dBm when the dataset gives its power reference (spec.json ``power_ref_dbm``, PlotData.power_ref_dbm),
else in dB relative to a signal of mean |I + jQ|² = 1; the axes say which.
"""
from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

from .. import theme
from ...runs.plotdata import INPUT_NAME
from .base import CurveSet, PlotPanel, ordered, plain_text, set_readout


def power_unit(plots, names) -> tuple[bool, str]:
    """(absolute, unit text): dBm when the input and every named signal have a power reference."""
    refs = getattr(plots, "power_ref_dbm", None) or {}
    absolute = INPUT_NAME in refs and all(n in refs for n in names)
    return absolute, ("dBm" if absolute else "dB rel.")


def fmt_db(v: float, unit: str) -> str:
    return f"{v:.1f} {unit}" if math.isfinite(v) else "—"


class _PowerPanel(PlotPanel):
    """Shared parts: the signals drawn, their offsets to absolute units, the P1dB markers and the read-out."""

    placeholder = "Appears when the first\nepoch ends"
    LINE_WIDTH = 2.0

    def __init__(self, parent=None, show_legend: bool = True, left: str = "", bottom: str = ""):
        super().__init__(parent, show_legend)
        self.plot = self._add_plot(0, 0, self.title, left=left, bottom=bottom)
        self.plot.getAxis("left").setWidth(52)
        self.legend = self._add_legend(self.plot, offset=(8, -8) if self.legend_bottom else (8, 8))
        self.curves = CurveSet(self.plot, "line")
        self.markers = CurveSet(self.plot, "scatter", symbol_size=11, legend=False, z_offset=20)
        self.readout = self.addLabel("", row=1, col=0, size="9pt", justify="left")
        self.unit = "dB rel."
        self._labels = (left, bottom)
        self._sync_empty()

    legend_bottom = False

    def signals(self, plots) -> list[str]:
        """The signals drawn (subclasses choose)."""
        return ordered([n for n in (getattr(plots, "pout_db", None) or {}) if n != INPUT_NAME],
                       plots.target_name, plots.pred_name)

    def _offsets(self, plots, names) -> tuple[float, dict[str, float]]:
        refs = getattr(plots, "power_ref_dbm", None) or {}
        absolute, self.unit = power_unit(plots, names)
        return (refs[INPUT_NAME] if absolute else 0.0), {n: (refs[n] if absolute else 0.0) for n in names}

    def _set_labels(self, left: str, bottom: str) -> None:
        if (left, bottom) != self._labels:
            self._labels = (left, bottom)
            self.plot.setLabel("left", left)
            self.plot.setLabel("bottom", bottom)

    def update_from(self, plots, label: str = "") -> None:
        pin = np.asarray(getattr(plots, "pin_db", np.empty(0)), dtype=np.float64)
        names = [n for n in self.signals(plots) if len(plots.pout_db[n]) == len(pin)] if len(pin) else []
        in_off, out_off = self._offsets(plots, names)
        comp = getattr(plots, "compression", None) or {}
        self.draw(plots, pin + in_off, names, in_off, out_off, comp)
        set_readout(self.readout, self.readout_text(names, comp, in_off, out_off))
        self.set_source_label(label)
        self._sync_empty()

    def readout_text(self, names, comp, in_off: float, out_off: dict[str, float]) -> str:
        rows = []
        for n in names:
            c = comp.get(n) or {}
            g = c.get("gain_ss_db", math.nan)
            if not math.isfinite(g):
                continue
            color = theme.color_for(n)
            gain = g + out_off[n] - in_off
            most = c.get("max_compression_db", math.nan)
            if c.get("reached"):
                where = (f"P1dB {fmt_db(c['pin_db'] + in_off, self.unit)} in, "
                         f"{fmt_db(c['pout_db'] + out_off[n], self.unit)} out")
            elif math.isfinite(most) and most >= 0.05:
                where = f"no P1dB (at most {most:.2f} dB compressed)"
            else:
                where = "no compression"
            rows.append(f"<span style='color:{color}'>■</span>&nbsp;{n}: G {gain:.2f} dB · {where}")
        return "<br>".join(rows)

    def p1db_points(self, names, comp, in_off, out_off, y_of) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        out = {}
        for n in names:
            c = comp.get(n) or {}
            if c.get("reached") and math.isfinite(c.get("pin_db", math.nan)):
                out[n] = (np.array([c["pin_db"] + in_off]), np.array([y_of(n, c)]))
        return out

    def clear_data(self) -> None:
        self.curves.clear()
        self.markers.clear()
        self.readout.setText(" ")
        self.set_source_label("")
        self._sync_empty()

    def point_count(self) -> int:
        return self.curves.point_count()

    @property
    def readout_plain(self) -> str:
        """The read-out without markup (tests)."""
        return plain_text(self.readout.text)


class CompressionPanel(_PowerPanel):
    """Gain relative to each signal's small-signal gain [dB] vs input power, a dashed line at -1 dB and each
    signal's P1dB marked; the read-out gives the small-signal gain and P1dB (input and output referred)."""

    title = "Gain compression"
    file_stem = "gain_compression"
    legend_bottom = True

    def __init__(self, parent=None, show_legend: bool = True):
        super().__init__(parent, show_legend, left="gain − small-signal gain [dB]", bottom="Pin [dB rel.]")
        self.one_db = pg.InfiniteLine(pos=-1.0, angle=0, movable=False,
                                      pen=pg.mkPen(theme.SERIES_COLORS["best"], width=1.2, style=Qt.PenStyle.DashLine))
        self.plot.addItem(self.one_db, ignoreBounds=True)
        self.setToolTip("Gain of 0.5 dB input-power bins over the whole split (the least-squares gain of each bin), "
                        "relative to the small-signal gain; the dashed line is 1 dB of compression and ● marks each "
                        "signal's P1dB. Bins with too few samples to tell the gain are not drawn.")

    def signals(self, plots) -> list[str]:
        # every signal against x: a DPD's output u shows its expansion, PA(DPD(x)) the linearised cascade; not a
        # DPD's target g·x (a flat line by construction)
        return [n for n in super().signals(plots) if theme.signal_role(n) not in ("error", "target")]

    def draw(self, plots, pin, names, in_off, out_off, comp) -> None:
        self._set_labels("gain − small-signal gain [dB]", f"Pin [{self.unit}]")
        data = {}
        for n in names:
            g_ss = (comp.get(n) or {}).get("gain_ss_db", math.nan)
            pout = np.asarray(plots.pout_db[n], dtype=np.float64)
            data[n] = (pin, pout - (pin - in_off) - g_ss if math.isfinite(g_ss) else np.full_like(pout, np.nan))
        self.curves.set(data, {n: self.LINE_WIDTH for n in names})
        self.markers.set(self.p1db_points(names, comp, in_off, out_off, lambda n, c: -c["drop_db"]))


class PinPoutPanel(_PowerPanel):
    """Output power vs input power of the PA-output signals, the linear extrapolation of the reference's
    small-signal gain (dashed) and each signal's P1dB marked."""

    title = "Pin/Pout"
    file_stem = "pin_pout"

    def __init__(self, parent=None, show_legend: bool = True):
        super().__init__(parent, show_legend, left="Pout [dB rel.]", bottom="Pin [dB rel.]")
        self.linear = pg.PlotDataItem(pen=pg.mkPen(theme.SIGNAL_COLORS["x"], width=1.2, style=Qt.PenStyle.DashLine))
        self.plot.addItem(self.linear, ignoreBounds=True)
        self._peaks: dict[str, tuple[float, float]] = {}
        self.setToolTip("Output power of 0.5 dB input-power bins over the whole split; the dashed line continues the "
                        "reference's small-signal gain (the measured y; a DPD's target g·x), ● marks each signal's "
                        "P1dB.")

    def signals(self, plots) -> list[str]:
        # the PA output plane only (a DPD's output u is a PA input); a DPD's target g·x is the dashed line
        return [n for n in super().signals(plots) if theme.signal_role(n) not in ("u", "error", "x", "target")]

    def readout_text(self, names, comp, in_off: float, out_off: dict[str, float]) -> str:
        rows = []
        for n in names:
            c = comp.get(n) or {}
            peak = self._peaks.get(n, (math.nan, math.nan))
            p1 = fmt_db(c["pout_db"] + out_off[n], self.unit) if c.get("reached") else "not reached"
            rows.append(f"<span style='color:{theme.color_for(n)}'>■</span>&nbsp;{n}: Pout max "
                        f"{fmt_db(peak[1], self.unit)} at {fmt_db(peak[0], self.unit)} in · P1dB {p1}")
        return "<br>".join(rows)

    def draw(self, plots, pin, names, in_off, out_off, comp) -> None:
        self._set_labels(f"Pout [{self.unit}]", f"Pin [{self.unit}]")
        self._peaks = {}
        for n in names:
            pout = np.asarray(plots.pout_db[n], dtype=np.float64) + out_off[n]
            if np.isfinite(pout).any():
                i = int(np.nanargmax(pout))
                self._peaks[n] = (float(pin[i]), float(pout[i]))
        self.curves.set({n: (pin, np.asarray(plots.pout_db[n], dtype=np.float64) + out_off[n]) for n in names},
                        {n: self.LINE_WIDTH for n in names})
        self.markers.set(self.p1db_points(names, comp, in_off, out_off, lambda n, c: c["pout_db"] + out_off[n]))
        # the reference's small-signal gain (the measured y; a DPD's target g·x), continued as a straight line
        ref = next((n for n in (plots.target_name, *names) if n in comp), None)
        g = (comp.get(ref) or {}).get("gain_ss_db", math.nan) if ref else math.nan
        refs = getattr(plots, "power_ref_dbm", None) or {}
        off = refs.get(ref, 0.0) if names and all(n in refs for n in names) and INPUT_NAME in refs else 0.0
        if ref is not None and math.isfinite(g) and len(pin):
            lo, hi = float(np.nanmin(pin)), float(np.nanmax(pin))
            self.linear.setData([lo, hi], [lo - in_off + g + off, hi - in_off + g + off])
            self.linear.setVisible(True)
        else:
            self.linear.setVisible(False)
