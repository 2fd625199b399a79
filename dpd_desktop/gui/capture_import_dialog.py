"""Dataset ▸ Import capture…: two measured signals → a dataset folder (:mod:`dpd_desktop.analysis.capture_import`),
written by an :class:`ImportCaptureJob` in the window's job registry, then loaded into the window (and inspected:
gui/inspector.py)."""
from __future__ import annotations

import traceback
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import (QCheckBox, QDialog, QDialogButtonBox, QDoubleSpinBox, QFileDialog, QFormLayout,
                               QHBoxLayout, QLabel, QLineEdit, QPushButton, QSpinBox, QWidget)

from ..analysis.capture_import import import_capture
from .jobs import PoolJob

__all__ = ["ImportCaptureDialog", "ImportCaptureJob", "open_import_dialog", "SIGNAL_FILTER"]

SIGNAL_FILTER = "I/Q signals (*.csv *.h5 *.hdf5 *.mat);;All files (*)"


class _ImportSignals(QObject):
    done = Signal(object)  # ImportResult
    failed = Signal(object, str)


class ImportCaptureJob(PoolJob):
    """``import_capture(**kwargs)`` in the thread pool; ``signals.done(result)`` / ``signals.failed(exc, tb)``."""

    name = "capture import"

    def __init__(self, **kwargs):
        super().__init__()
        self.kwargs = kwargs
        self.signals = _ImportSignals()

    def work(self) -> None:
        try:
            res = import_capture(**self.kwargs)
        except Exception as exc:  # noqa: BLE001 - shown in the dialog
            self.signals.failed.emit(exc, traceback.format_exc())
            return
        self.signals.done.emit(res)


def _file_row(dialog, edit: QLineEdit, save_folder: bool = False) -> QWidget:
    w = QWidget()
    h = QHBoxLayout(w)
    h.setContentsMargins(0, 0, 0, 0)
    h.addWidget(edit, 1)
    b = QPushButton("Browse…")

    def pick():
        if save_folder:
            path, _ = QFileDialog.getSaveFileName(dialog, "New dataset folder", edit.text())
        else:
            path, _ = QFileDialog.getOpenFileName(dialog, "Signal file", edit.text(), SIGNAL_FILTER)
        if path:
            edit.setText(path)

    b.clicked.connect(pick)
    h.addWidget(b)
    return w


class ImportCaptureDialog(QDialog):
    """The form of ``dpd-desktop import-capture``; :meth:`kwargs` gives :func:`import_capture`'s arguments."""

    imported = Signal(object)  # ImportResult

    def __init__(self, window=None):
        super().__init__(window)
        self.window_ = window
        self.setWindowTitle("Import capture")
        self.setMinimumWidth(560)
        form = QFormLayout(self)
        self.x_file, self.y_file, self.out = QLineEdit(), QLineEdit(), QLineEdit()
        self.x_file.setPlaceholderText("PA input x: .csv (header I,Q), .h5/.hdf5 or .mat")
        self.y_file.setPlaceholderText("PA output y: the same capture, measured")
        self.out.setPlaceholderText("a new folder")
        form.addRow("Input x", _file_row(self, self.x_file))
        form.addRow("Output y", _file_row(self, self.y_file))
        self.fs = QDoubleSpinBox(decimals=3, maximum=1e6, value=800.0, suffix=" MHz")
        self.bw = QDoubleSpinBox(decimals=3, maximum=1e6, value=200.0, suffix=" MHz")
        self.carriers = QSpinBox(minimum=1, maximum=64, value=1)
        self.nperseg = QSpinBox(minimum=16, maximum=1 << 20, value=2560)
        self.split = QLineEdit("0.6,0.2,0.2")
        self.normalize = QCheckBox("divide x and y by max|x| of the train range", checked=True)
        form.addRow("Sample rate", self.fs)
        form.addRow("Bandwidth", self.bw)
        form.addRow("Carriers", self.carriers)
        form.addRow("nperseg", self.nperseg)
        form.addRow("Split train,val,test", self.split)
        form.addRow("Normalize", self.normalize)
        form.addRow("Dataset folder", _file_row(self, self.out, save_folder=True))
        self.message = QLabel()
        self.message.setWordWrap(True)
        form.addRow(self.message)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.import_button = self.buttons.addButton("Import", QDialogButtonBox.ButtonRole.AcceptRole)
        self.buttons.accepted.connect(self.start)
        self.buttons.rejected.connect(self.reject)
        form.addRow(self.buttons)
        self.job: ImportCaptureJob | None = None

    def kwargs(self) -> dict:
        """Raises ValueError for a split that is not three numbers or an empty file field."""
        for name, e in (("input x", self.x_file), ("output y", self.y_file), ("dataset folder", self.out)):
            if not e.text().strip():
                raise ValueError(f"choose the {name}")
        parts = [float(t) for t in self.split.text().split(",")]
        if len(parts) != 3:
            raise ValueError("split: three ratios train,val,test")
        return dict(x_file=self.x_file.text().strip(), y_file=self.y_file.text().strip(),
                    out=self.out.text().strip(), sample_rate_hz=self.fs.value() * 1e6,
                    bandwidth_hz=self.bw.value() * 1e6, n_sub_ch=self.carriers.value(),
                    nperseg=self.nperseg.value(), split=tuple(parts), normalize=self.normalize.isChecked())

    def start(self) -> ImportCaptureJob | None:
        try:
            kw = self.kwargs()
        except ValueError as exc:
            self.message.setText(f"<b>{exc}</b>")
            return None
        self.message.setText("Importing…")
        self.import_button.setEnabled(False)
        job = self.job = ImportCaptureJob(**kw)
        job.signals.done.connect(self._done)
        job.signals.failed.connect(self._failed)
        jobs = getattr(self.window_, "jobs", None)
        if jobs is not None:
            jobs.add(job)
        job.submit()
        return job

    def _done(self, res) -> None:
        self.message.setText(f"Wrote {res.folder} (delay {res.delay_integer} samples removed).")
        self.import_button.setEnabled(True)
        self.imported.emit(res)
        if self.window_ is not None and hasattr(self.window_, "open_dataset"):
            self.window_.open_dataset(Path(res.folder))
        self.accept()

    def _failed(self, exc, _tb) -> None:
        self.import_button.setEnabled(True)
        self.message.setText(f"<b>Not imported:</b> {exc}")


def open_import_dialog(window) -> ImportCaptureDialog:
    dlg = ImportCaptureDialog(window)
    window.import_dialog = dlg
    dlg.show()
    return dlg
