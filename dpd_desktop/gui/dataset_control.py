"""Opening datasets in the window: the open dialogs, dropping a file or folder, loading in the thread pool
(:class:`~dpd_desktop.gui.jobs.DatasetLoader`) and showing the summary.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog, QWidget

from .jobs import DatasetLoader

DATASET_FILTER = ("I/Q datasets (*.csv *.h5 *.hdf5 spec.json);;CSV (*.csv);;HDF5 (*.h5 *.hdf5);;"
                  "Dataset folder's spec.json (spec.json);;All files (*)")


def dataset_ref(dataset) -> str:
    """``"demo"`` for a generated dataset (or one without a file), else its source path."""
    src = getattr(dataset, "source", None)
    return "demo" if src in (None, "") or str(src) == "demo" or str(src).startswith("<") else str(src)


class DatasetController(QObject):
    """The window's dataset: :attr:`dataset` and :attr:`ref` (``"demo"`` or its path), :attr:`loader` (the
    :class:`DatasetLoader` in flight, or None).

    Args:
        jobs: the window's JobRegistry. session: its Session (``loading``). dataset_box: the DatasetSummary.
        banner: the OutcomeBanner (load errors). settings: QSettings (the dialogs' last folder).
        demo_kwargs: keyword arguments of ``make_demo_dataset``. status: ``status(text, ms)``.
        parent: the dialogs' parent widget.

    Signals: ``datasetSet(dataset, ref)`` when a dataset is shown; ``loaded()`` after a load succeeded (the session
    is no longer ``loading``); ``loadFailed(message)``.
    """

    datasetSet = Signal(object, str)
    loaded = Signal()
    loadFailed = Signal(str)

    def __init__(self, jobs, session, dataset_box, banner, settings, demo_kwargs: dict,
                 status: Callable[[str, int], None], parent: QWidget):
        super().__init__(parent)
        self._jobs, self._session, self._box, self._banner = jobs, session, dataset_box, banner
        self._settings, self.demo_kwargs, self._status, self._parent = settings, demo_kwargs, status, parent
        self.dataset = None
        self.ref: str | None = None
        self.loader: DatasetLoader | None = None

    def ask_open(self, folder: bool = False) -> None:
        """The open dialog (a file, or with ``folder`` a folder), then :meth:`open`."""
        start = str(self._settings.value("paths/last_dataset_dir", str(Path.home()), type=str))
        if folder:
            path = QFileDialog.getExistingDirectory(self._parent, "Open dataset folder", start)
        else:
            dlg = QFileDialog(self._parent, "Open dataset — a .csv / .h5 / .hdf5 file, or a folder with spec.json",
                              start)
            dlg.setNameFilter(DATASET_FILTER)
            dlg.setFileMode(QFileDialog.FileMode.ExistingFile)
            dlg.setOption(QFileDialog.Option.DontUseNativeDialog, False)
            path = dlg.selectedFiles()[0] if dlg.exec() and dlg.selectedFiles() else ""
            if path and os.path.basename(path) == "spec.json":
                path = os.path.dirname(path)
        if path:
            self._settings.setValue("paths/last_dataset_dir", str(Path(path).parent))
            self.open(path)

    def open(self, path: str | os.PathLike) -> None:
        """Load a dataset from disk in the thread pool."""
        self._load(str(path), Path(path).name)

    def load_demo(self) -> None:
        """Load the built-in synthetic demo dataset in the thread pool."""
        self._load("demo", "the demo data")

    def set(self, dataset, ref: str | None = None) -> None:
        """Show an already loaded dataset (``ref``: ``"demo"`` or its path; default: :func:`dataset_ref`)."""
        self.dataset = dataset
        self.ref = ref if ref is not None else dataset_ref(dataset)
        self._box.set_dataset(dataset)
        self.datasetSet.emit(dataset, self.ref)

    def _load(self, source: str, what: str) -> None:
        if self.loader is not None or self._session.state == "running":
            return
        loader = DatasetLoader(source, self.demo_kwargs if source == "demo" else None)
        loader.signals.loaded.connect(self._on_loaded)
        loader.signals.failed.connect(self._on_failed)
        self.loader = self._jobs.add(loader)
        self._box.set_loading(what)
        self._status(f"Loading {what}…", 0)
        self._session.update(loading=True)
        loader.submit()

    def _on_loaded(self, dataset, ref: str) -> None:
        self._jobs.discard(self.loader)
        self.loader = None
        self._status(f"Loaded {getattr(dataset, 'name', ref)}", 5000)
        if self._banner.kind == "error":
            self._banner.setVisible(False)
        self.set(dataset, ref)
        self._session.update(loading=False)
        self.loaded.emit()

    def _on_failed(self, exc: Exception, tb: str) -> None:
        source = self.loader.source if self.loader is not None else ""
        self._jobs.discard(self.loader)
        self.loader = None
        what = "the demo data" if source == "demo" else (f"the dataset {source}" if source else "the dataset")
        hint = ("Check that the folder holds spec.json and the six split CSVs (I,Q columns), or that the file is a "
                ".csv with I_in,Q_in,I_out,Q_out columns or an .h5/.hdf5 file in the documented layout.")
        self._banner.show_message("error", f"Could not load {what}: {exc}\n{hint}", detail=tb)
        self._box.show_fields()
        self._status("Dataset not loaded", 5000)
        self._session.update(loading=False)
        self.loadFailed.emit(str(exc))

    def accepts_drop(self, event) -> bool:
        """Whether a drag onto the window carries one local file or folder and a dataset may be opened now."""
        urls = event.mimeData().urls() if event.mimeData().hasUrls() else []
        return len(urls) == 1 and urls[0].isLocalFile() and self._session.controls().open_dataset

    def drop(self, event) -> None:
        """A dataset folder or file dropped on the window: load it."""
        path = event.mimeData().urls()[0].toLocalFile()
        if os.path.basename(path) == "spec.json":
            path = os.path.dirname(path)
        self.open(path)
