"""Dataset summary box: name, sample rate, bandwidth, carriers, sample counts per split."""
from __future__ import annotations

from typing import Any, Mapping

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFormLayout, QGroupBox, QLabel


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
    """Display strings for an IQDataset (reads fields directly; falls back to ``summary()``)."""
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
        counts.append(f"{len(x):,}" if x is not None else "?")
    out["samples"] = " / ".join(counts)
    if all(c == "?" for c in counts) and hasattr(dataset, "summary"):
        try:
            summ = dataset.summary()
        except Exception:  # noqa: BLE001
            summ = None
        if isinstance(summ, Mapping):
            out.update(describe_summary(summ))
    return out


def describe_summary(summ: Mapping[str, Any]) -> dict[str, str]:
    """Display strings from a summary mapping (e.g. ``RunStarted.dataset_summary``), best effort."""
    low = {str(k).lower(): v for k, v in summ.items()}
    out: dict[str, str] = {}
    if "name" in low:
        out["name"] = str(low["name"])
    for key in ("sample_rate_hz", "fs", "fs_hz"):
        if key in low:
            out["fs"] = _mhz(low[key])
            break
    for key in ("bw_main_hz", "bandwidth_hz", "bw_main"):
        if key in low:
            out["bandwidth"] = _mhz(low[key])
            break
    counts = [low.get(f"n_{s}", low.get(f"{s}_samples")) for s in ("train", "val", "test")]
    if all(c is not None for c in counts):
        out["samples"] = " / ".join(f"{int(c):,}" for c in counts)
    return out


class DatasetSummary(QGroupBox):
    """Shows what the loaded dataset is (or how to get one)."""

    ROWS = (("name", "Name"), ("fs", "Sample rate"), ("bandwidth", "Bandwidth"), ("carriers", "Carriers"),
            ("samples", "Samples (train / val / test)"))

    def __init__(self, parent=None):
        super().__init__("Dataset", parent)
        form = QFormLayout(self)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        self.values: dict[str, QLabel] = {}
        self.hint = QLabel("No dataset loaded. <b>Open dataset…</b> (Ctrl+O) or <b>Demo data</b>;"
                           " Start without one uses the demo data.")
        self.hint.setWordWrap(True)
        form.addRow(self.hint)
        for key, label in self.ROWS:
            v = QLabel("—")
            v.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            v.setWordWrap(True)
            self.values[key] = v
            form.addRow(label, v)
        self.source = QLabel()
        self.source.setWordWrap(True)
        self.source.setStyleSheet("color: palette(placeholder-text);")
        self.source.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        form.addRow(self.source)
        self.source.setVisible(False)

    def set_dataset(self, dataset) -> None:
        self.set_fields(describe(dataset))

    def set_fields(self, fields: Mapping[str, str]) -> None:
        self.hint.setVisible(False)
        for key, label in self.values.items():
            if key in fields:
                label.setText(fields[key])
        src = fields.get("source", "")
        self.source.setText(src)
        self.source.setToolTip(src)
        self.source.setVisible(bool(src) and src != "demo")

    def set_loading(self, what: str) -> None:
        self.hint.setText(f"Loading {what}…")
        self.hint.setVisible(True)

    def text(self) -> str:
        return "\n".join(f"{k}: {v.text()}" for k, v in self.values.items())
