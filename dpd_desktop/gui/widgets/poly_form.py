"""The MP/GMP part of the Model form: the fit (least squares or gradient), the orders K and M, odd orders only, a
GMP's cross terms, and an optional (K, M) grid; the fields of :class:`~dpd_desktop.config.ExperimentConfig` of the
same names (models/poly.py, training/ls_fit.py). Shown only while the backbone is MP or GMP."""
from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QCheckBox, QFormLayout, QLineEdit, QWidget

from ...config import MAX_MEMORY_DEPTH, MAX_POLY_ORDER, ExperimentConfig
from .inputs import combo, spin

POLY_BACKBONES = ("mp", "gmp")
FITS = (("ls", "least squares", "One solve (numpy.linalg.lstsq); a DPD by indirect learning on the measured data"),
        ("gradient", "gradient (epochs)", "The epoch loop of the neural models; a DPD trains through the frozen PA"))
#: Labels of the fields in error messages (gui/widgets/config_form.py FIELD_LABELS).
POLY_LABELS = {"fit": "Fit", "poly_order": "Order K", "memory_depth": "Memory depth M", "poly_odd_only": "Odd orders",
               "cross_order": "Cross order", "cross_lag": "Lagging envelope", "cross_lead": "Leading envelope",
               "grid_k": "Grid K", "grid_m": "Grid M", "rcond": "rcond"}


def parse_int_list(text: str) -> list[int] | str | None:
    """``"3, 5,7"`` → [3, 5, 7]; empty → None; anything else is returned as the text, which the configuration's
    validation then refuses, naming the field (the form is read at every change, mid-typing too)."""
    t = text.strip()
    if not t:
        return None
    try:
        return [int(v) for v in t.replace(" ", "").split(",")]
    except ValueError:
        return t


class PolyForm(QWidget):
    """The MP/GMP fields (see the module docstring); ``changed`` when one changes."""

    changed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.fit = combo(FITS, "How the coefficients are found")
        self.order = spin(1, MAX_POLY_ORDER, "K, the highest nonlinearity order: terms x(n−m)|x(n−m)|^(k−1), k ≤ K")
        self.memory = spin(1, MAX_MEMORY_DEPTH, "M, the memory depth: delays m = 0 … M−1")
        self.odd_only = QCheckBox("odd orders only (1, 3, 5, …)")
        self.cross_order = spin(1, MAX_POLY_ORDER, "GMP: the highest order of the cross terms (= K when auto)",
                                special="auto (= K)")
        self.cross_lag = spin(0, MAX_MEMORY_DEPTH, "GMP: lagging-envelope terms |x(n−m−l)|, l = 1 … L")
        self.cross_lead = spin(0, MAX_MEMORY_DEPTH, "GMP: leading-envelope terms |x(n−m+l)|, l = 1 … L")
        self.grid_k = QLineEdit()
        self.grid_k.setPlaceholderText("e.g. 3,5,7 (optional)")
        self.grid_k.setToolTip("Least squares: fit every K of this list (with every M of Grid M) and keep the lowest "
                               "validation NMSE; empty: the single K above")
        self.grid_m = QLineEdit()
        self.grid_m.setPlaceholderText("e.g. 2,4,6 (optional)")
        self.grid_m.setToolTip("Least squares: the memory depths of the grid; empty: the single M above")
        lay = QFormLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addRow("Fit", self.fit)
        lay.addRow("Order K", self.order)
        lay.addRow("Memory depth M", self.memory)
        lay.addRow("", self.odd_only)
        lay.addRow("Cross order", self.cross_order)
        lay.addRow("Lagging L", self.cross_lag)
        lay.addRow("Leading L", self.cross_lead)
        lay.addRow("Grid K", self.grid_k)
        lay.addRow("Grid M", self.grid_m)
        self._layout = lay
        self.fields = {"fit": self.fit, "poly_order": self.order, "memory_depth": self.memory,
                       "poly_odd_only": self.odd_only, "cross_order": self.cross_order, "cross_lag": self.cross_lag,
                       "cross_lead": self.cross_lead, "grid_k": self.grid_k, "grid_m": self.grid_m}
        for w in self.fields.values():
            for name in ("currentIndexChanged", "valueChanged", "toggled", "textChanged"):
                sig = getattr(w, name, None)
                if sig is not None:
                    sig.connect(lambda *_: self.changed.emit())
                    break
        self.fit.currentIndexChanged.connect(lambda *_: self._sync())
        self._family = "mp"
        self.set_config(ExperimentConfig(backbone="mp", fit="ls"))

    def set_family(self, family: str) -> None:
        """Show the GMP rows for ``"gmp"`` only."""
        self._family = family
        self._sync()

    def _sync(self) -> None:
        gmp = self._family == "gmp"
        for w in (self.cross_order, self.cross_lag, self.cross_lead):
            self._layout.setRowVisible(w, gmp)
        ls = self.fit.currentData() == "ls"
        for w in (self.grid_k, self.grid_m):
            self._layout.setRowVisible(w, ls)

    def set_config(self, cfg: ExperimentConfig) -> None:
        i = self.fit.findData(cfg.fit if str(cfg.backbone) in POLY_BACKBONES else "ls")
        self.fit.setCurrentIndex(max(i, 0))
        self.order.setValue(int(cfg.poly_order))
        self.memory.setValue(int(cfg.memory_depth))
        self.odd_only.setChecked(bool(cfg.poly_odd_only))
        self.cross_order.setValue(int(cfg.cross_order) if cfg.cross_order else self.cross_order.minimum())
        self.cross_lag.setValue(int(cfg.cross_lag))
        self.cross_lead.setValue(int(cfg.cross_lead))
        self.grid_k.setText(",".join(map(str, cfg.grid_k or [])))
        self.grid_m.setText(",".join(map(str, cfg.grid_m or [])))
        self._sync()

    def values(self) -> dict:
        """The config fields (not validated: a grid that is not a list of integers stays text)."""
        ls = self.fit.currentData() == "ls"
        cross = self.cross_order.value()
        return {"fit": self.fit.currentData(), "poly_order": self.order.value(), "memory_depth": self.memory.value(),
                "poly_odd_only": self.odd_only.isChecked(),
                "cross_order": None if cross == self.cross_order.minimum() else cross,
                "cross_lag": self.cross_lag.value(), "cross_lead": self.cross_lead.value(),
                "grid_k": parse_int_list(self.grid_k.text()) if ls else None,
                "grid_m": parse_int_list(self.grid_m.text()) if ls else None}
