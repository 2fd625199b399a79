"""Power spectral density: measured vs predicted vs error, main and adjacent channels shaded, ACLR L/R read-out."""
from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg

from ...metrics.spectra import psd_dbm_per_hz
from .. import theme
from .base import CurveSet, PlotPanel, nowrap, ordered


BEFORE_DPD, AFTER_DPD = "PA(x) no DPD", "PA(DPD(x))"
#: The y axis in each unit: absolute when the dataset gives its power reference (spec.json power_ref_dbm).
LABEL_DBM, LABEL_REL = "PSD [dBm/Hz]", "PSD [dB/Hz rel.]"
TIP_DBM = ("Power spectral density in dBm/Hz: the dataset's spec.json gives power_ref_dbm (the dBm of a signal of "
           "mean |I + jQ|² = 1 at the PA input and output).")
TIP_REL = ("Power spectral density in dB/Hz relative to a signal of mean |I + jQ|² = 1 (the dataset gives no power "
           "reference). Add power_ref_dbm to spec.json for dBm/Hz.")


class PSDPanel(PlotPanel):
    """PSD (Welch density) vs frequency [MHz]: dBm/Hz when the PlotData carries a power reference for every drawn
    signal (``PlotData.power_ref_dbm``), else dB/Hz relative to a unit-power signal; the axis says which."""

    title = "PSD"
    file_stem = "psd"
    #: 1-px lines: Qt strokes antialiased lines up to 1 px wide on its fast path; at 1.5 px the four noisy PSD
    #: curves (2,048 bins each on DPA_160MHz) took 10 of the window's 48 ms per epoch end, at 1 px 2 ms
    #: (bench_gui_responsiveness.py --part epoch-end, 2-core machine).
    LINE_WIDTH = 1.0

    def __init__(self, parent=None, show_legend: bool = True):
        super().__init__(parent, show_legend)
        self.plot = self._add_plot(0, 0, self.title, left=LABEL_REL, bottom="frequency [MHz]")
        self.unit_label = LABEL_REL
        self.setToolTip(TIP_REL)
        self.plot.getAxis("left").setWidth(56)
        self.legend = self._add_legend(self.plot, columns=2)
        # The input's (and the DPD target g·x's) noise floor can sit 100 dB below the output's: keep it out of the
        # auto range.
        self.curves = CurveSet(self.plot, "line", ignore_bounds=("x", "target"))
        self.regions: dict[str, pg.LinearRegionItem] = {}
        for band in ("adj_left", "main", "adj_right"):
            region = pg.LinearRegionItem(values=(0, 1), movable=False, brush=pg.mkBrush(*theme.BAND_BRUSHES[band]),
                                         pen=pg.mkPen(None))
            region.setZValue(-10)
            region.setVisible(False)
            for line in region.lines:
                line.setPen(pg.mkPen(None))
            self.plot.addItem(region, ignoreBounds=True)
            self.regions[band] = region
        self.nextRow()
        self.readout = self.addLabel("", row=1, col=0, size="8pt", justify="left")
        self._aclr_text = ""
        self._power_change_db: float | None = None
        self._sync_empty()

    def set_power_change(self, db: float | None) -> None:
        """The DPD's output-power change [dB] (with vs without DPD), shown after the ACLR read-out; None: none."""
        self._power_change_db = db
        self.readout.setText(self._readout_text() or " ")

    def _readout_text(self) -> str:
        text = self._aclr_text
        if self._power_change_db is not None:
            text += (" · " if text else "") + nowrap(f"output power with DPD {self._power_change_db:+.2f} dB")
        return text

    def update_from(self, plots, label: str = "") -> None:
        f = np.asarray(plots.psd_freq_mhz, dtype=np.float64)
        names = ordered(plots.psd.keys(), plots.target_name, plots.pred_name)
        refs = getattr(plots, "power_ref_dbm", None) or {}
        absolute = bool(names) and all(n in refs for n in names)
        self._set_unit(absolute)
        self.curves.set({n: (f, psd_dbm_per_hz(plots.psd[n], refs[n]) if absolute else plots.psd[n]) for n in names},
                        {n: self.LINE_WIDTH for n in names})
        for band, region in self.regions.items():
            lohi = (plots.bands_mhz or {}).get(band)
            if lohi is None or not all(np.isfinite(lohi)):
                region.setVisible(False)
            else:
                region.setRegion((float(lohi[0]), float(lohi[1])))
                region.setVisible(True)
        self._aclr_text = self._format_aclr(plots)
        self.readout.setText(self._readout_text() or " ")
        self.set_source_label(label)
        self._sync_empty()

    def _set_unit(self, absolute: bool) -> None:
        label = LABEL_DBM if absolute else LABEL_REL
        if label != self.unit_label:
            self.unit_label = label
            self.plot.setLabel("left", label)
            self.setToolTip(TIP_DBM if absolute else TIP_REL)

    @staticmethod
    def _format_aclr(plots) -> str:
        lines = []
        for name in ordered((plots.aclr or {}).keys(), plots.target_name, plots.pred_name):
            left, right = plots.aclr[name]
            if not (math.isfinite(left) or math.isfinite(right)):
                continue
            lines.append(nowrap(f"{name}: L {left:.1f} / R {right:.1f}"))
        if not lines:
            return ""
        gain = PSDPanel._dpd_gain(plots.aclr or {})
        if gain:
            lines.append(gain)
        # one flowing paragraph, broken only between its pieces (fit_label): fixed rows of two signals each took two
        # lines in a narrow panel, six in all for a DPD, and left the plot 30 px at 1280×800
        return "ACLR [dBc] " + " · ".join(lines)

    @staticmethod
    def _dpd_gain(aclr) -> str:
        """DPD step: "before → after" of the average ACLR (PA(x) without DPD vs PA(DPD(x)))."""
        before, after = aclr.get(BEFORE_DPD), aclr.get(AFTER_DPD)
        if before is None or after is None:
            return ""
        b, a = (float(np.mean(v)) for v in (before, after))
        if not (math.isfinite(b) and math.isfinite(a)):
            return ""
        verdict = "better" if a < b else "worse" if a > b else "unchanged"
        return (nowrap(f"ACLR avg before DPD {b:.1f}") + " " + nowrap(f"→ after DPD {a:.1f}") + " "
                + nowrap(f"({a - b:+.1f} dB, {verdict})"))

    @property
    def aclr_text(self) -> str:
        """The ACLR read-out (and the output-power change when set), rich text."""
        return self._readout_text()

    def clear_data(self) -> None:
        self.curves.clear()
        for r in self.regions.values():
            r.setVisible(False)
        self.readout.setText(" ")
        self._aclr_text = ""
        self._power_change_db = None
        self.set_source_label("")
        self._sync_empty()

    def point_count(self) -> int:
        return self.curves.point_count()
