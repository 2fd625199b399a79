"""Dataset summary box: name, sample rate, bandwidth, carriers, sample counts per split."""
from __future__ import annotations

from typing import Any, Mapping

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (QFormLayout, QGroupBox, QLabel, QSizePolicy, QStackedWidget, QVBoxLayout,
                               QWidget)


def _num(v) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f else None


def _mhz(hz) -> str:
    f = _num(hz)
    return "—" if f is None else f"{f / 1e6:g} MHz"


def describe(dataset) -> dict[str, str]:
    """Display strings for an IQDataset: from ``summary()`` when it has one, else from its fields."""
    summ = None
    if hasattr(dataset, "summary"):
        try:
            summ = dataset.summary()
        except Exception:  # noqa: BLE001 - cosmetic
            summ = None
    if isinstance(summ, Mapping) and summ:
        out = describe_fields(dataset)
        out.update(describe_summary(summ))
        return out
    return describe_fields(dataset)


def describe_fields(dataset) -> dict[str, str]:
    """Display strings read from an IQDataset's ``name``, ``source``, ``spec`` and splits."""
    spec = getattr(dataset, "spec", None)
    out: dict[str, str] = {"name": str(getattr(dataset, "name", "") or "dataset")}
    src = getattr(dataset, "source", None)
    out["source"] = str(src) if src not in (None, "") else ""
    out["fs"] = _mhz(getattr(spec, "sample_rate_hz", None))
    bw = _mhz(getattr(spec, "bw_main_hz", None))
    n_sub = getattr(spec, "n_sub_ch", None)
    bw_sub = getattr(spec, "bw_sub_hz", None)
    out["bandwidth"] = bw
    if n_sub and _num(bw_sub):
        out["carriers"] = f"{int(n_sub)} × {_mhz(bw_sub)}"
    elif n_sub:
        out["carriers"] = str(int(n_sub))
    else:
        out["carriers"] = "—"
    counts = []
    for split in ("train", "val", "test"):
        s = getattr(dataset, split, None)
        x = getattr(s, "x", None)
        counts.append(f"{split} {len(x):,}" if x is not None else f"{split} ?")
    out["samples"] = " · ".join(counts)
    return out


def describe_summary(summ: Mapping[str, Any]) -> dict[str, str]:
    """Display strings from a summary mapping (e.g. ``RunStarted.dataset_summary``), best effort."""
    low = {str(k).lower(): v for k, v in summ.items()}
    out: dict[str, str] = {}
    if low.get("name"):
        out["name"] = str(low["name"])
    if low.get("source"):
        out["source"] = str(low["source"])
    if "fs_mhz" in low:
        out["fs"] = _mhz(_scaled(low["fs_mhz"], 1e6))
    if "bw_main_mhz" in low:
        out["bandwidth"] = _mhz(_scaled(low["bw_main_mhz"], 1e6))
    n_sub, bw_sub = low.get("n_sub_ch"), _num(low.get("bw_sub_mhz"))
    if n_sub:
        out["carriers"] = f"{int(n_sub)} × {bw_sub:g} MHz" if bw_sub else str(int(n_sub))
    elif "n_sub_ch" in low:
        out["carriers"] = "—"
    counts = [low.get(s, low.get(f"n_{s}")) for s in ("train", "val", "test")]
    if all(_num(c) is not None for c in counts):
        out["samples"] = " · ".join(f"{s} {int(c):,}" for s, c in zip(("train", "val", "test"), counts))
    if low.get("metrics_available") is False:
        out["note"] = ("No sample rate / bandwidth in the spec: ACLR and EVM cannot be computed "
                       "(add input_signal_fs, bw_main_ch, n_sub_ch to spec.json).")
    return out


def _scaled(v, factor: float):
    f = _num(v)
    return None if f is None else f * factor


class DatasetSummary(QGroupBox):
    """Shows what the loaded dataset is (or how to get one).

    The hint ("No dataset loaded…", "Loading…") and the fields are two pages of a QStackedWidget, whose height is
    the larger page's whichever is shown; the rows that come and go keep their lines reserved (source one line,
    note two, samples two). So the box keeps its height when a dataset loads and the form below never moves.
    """

    ROWS = (("name", "Name"), ("fs", "Sample rate"), ("bandwidth", "Bandwidth"), ("carriers", "Carriers"),
            ("samples", "Samples"))
    EMPTY_HINT = ("No dataset loaded. <b>Open dataset…</b> (Ctrl+O) or <b>Demo data</b>;"
                  " Start without one uses the demo data.")

    def __init__(self, parent=None):
        super().__init__("Dataset", parent)
        self.pages = QStackedWidget()
        outer = QVBoxLayout(self)
        outer.setContentsMargins(6, 4, 6, 4)
        outer.addWidget(self.pages)
        self.hint = QLabel(self.EMPTY_HINT)
        self.hint.setWordWrap(True)
        self.hint.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.pages.addWidget(self.hint)
        fields = QWidget()
        form = QFormLayout(fields)
        form.setContentsMargins(0, 0, 0, 0)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.DontWrapRows)
        line = self.fontMetrics().lineSpacing()
        self.values: dict[str, QLabel] = {}
        for key, label in self.ROWS:
            v = QLabel("—")
            v.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            v.setWordWrap(True)
            if key == "samples":
                v.setMinimumHeight(2 * line)  # "train 294,912 · val 98,304 · test 98,304" takes two lines
            self.values[key] = v
            form.addRow(label, v)
        self.source = QLabel()
        self.source.setForegroundRole(QPalette.ColorRole.PlaceholderText)  # follows a light/dark switch
        self.source.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.source.setMinimumHeight(line)
        self.source.setMinimumWidth(1)
        self.source.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        form.addRow(self.source)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: #b26a00;")
        self.note.setMinimumHeight(2 * line)
        self.note.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        form.addRow(self.note)
        self.pages.addWidget(fields)
        self.fields_page = fields
        self.pages.setCurrentWidget(self.hint)
        self._has_dataset = False

    def set_dataset(self, dataset) -> None:
        self.set_fields(describe(dataset))

    def set_fields(self, fields: Mapping[str, str]) -> None:
        self._has_dataset = True
        self.pages.setCurrentWidget(self.fields_page)
        for key, label in self.values.items():
            if key in fields:
                label.setText(fields[key])
        src = fields.get("source", "")
        shown = bool(src) and src != "demo" and not src.startswith("<")
        self.source.setText(self._elide_left(src) if shown else "")
        self.source.setToolTip(src if shown else "")
        self.note.setText(fields.get("note", ""))

    def _elide_left(self, text: str) -> str:
        width = max(self.source.width(), self.width() - 24, 120)
        return self.source.fontMetrics().elidedText(text, Qt.TextElideMode.ElideLeft, width)

    def set_loading(self, what: str) -> None:
        self.show_hint(f"Loading {what}…")

    def show_hint(self, text: str | None = None) -> None:
        """Show the hint page (``text``, default :attr:`EMPTY_HINT`)."""
        self.hint.setText(text or self.EMPTY_HINT)
        self.pages.setCurrentWidget(self.hint)

    def show_fields(self) -> None:
        """Back to the fields of the loaded dataset (after a failed load); the hint when none is loaded."""
        if self._has_dataset:
            self.pages.setCurrentWidget(self.fields_page)
        else:
            self.show_hint()

    @property
    def showing_hint(self) -> bool:
        return self.pages.currentWidget() is self.hint

    def text(self) -> str:
        return "\n".join(f"{k}: {v.text()}" for k, v in self.values.items())
