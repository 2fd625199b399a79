"""Opening datasets in the window (a part of :class:`~dpd_desktop.gui.main_window.MainWindow`): the open dialogs,
dropping a file or folder, loading in the thread pool (:class:`~dpd_desktop.gui.jobs.DatasetLoader`) and showing
the summary. A run queued for its dataset starts when the dataset lands.
"""
from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtWidgets import QFileDialog

from .jobs import DatasetLoader
from .run_control import same_dataset

DATASET_FILTER = ("I/Q datasets (*.csv *.h5 *.hdf5 spec.json);;CSV (*.csv);;HDF5 (*.h5 *.hdf5);;"
                  "Dataset folder's spec.json (spec.json);;All files (*)")


class DatasetControl:
    """Loads datasets for the window; ``_loader`` is the loader in flight (None when none)."""

    def _on_open_triggered(self, folder: bool = False) -> None:
        start = str(self._settings.value("paths/last_dataset_dir", str(Path.home()), type=str))
        if folder:
            path = QFileDialog.getExistingDirectory(self, "Open dataset folder", start)
        else:
            dlg = QFileDialog(self, "Open dataset — a .csv / .h5 / .hdf5 file, or a folder with spec.json", start)
            dlg.setNameFilter(DATASET_FILTER)
            dlg.setFileMode(QFileDialog.FileMode.ExistingFile)
            dlg.setOption(QFileDialog.Option.DontUseNativeDialog, False)
            path = dlg.selectedFiles()[0] if dlg.exec() and dlg.selectedFiles() else ""
            if path and os.path.basename(path) == "spec.json":
                path = os.path.dirname(path)
        if path:
            self._settings.setValue("paths/last_dataset_dir", str(Path(path).parent))
            self.open_dataset(path)

    def open_dataset(self, path: str | os.PathLike) -> None:
        """Load a dataset from disk in the thread pool; the summary and title update when it arrives."""
        self._load(str(path), Path(path).name)

    def load_demo(self) -> None:
        """Load the built-in synthetic demo dataset in the thread pool."""
        self._load("demo", "the demo data")

    def set_dataset(self, dataset, ref: str | None = None) -> None:
        """Use an already loaded dataset (``ref``: ``"demo"`` or its path; default: ``dataset.source``)."""
        self._dataset = dataset
        if ref is None:
            src = getattr(dataset, "source", None)
            ref = "demo" if src in (None, "") or str(src) == "demo" or str(src).startswith("<") else str(src)
        self._dataset_ref = ref
        self.dataset_box.set_dataset(dataset)
        cfg = self.session.config
        if not self.session.is_live and cfg is not None and not same_dataset(getattr(cfg, "dataset", None), ref):
            # Another dataset than the ended run's: its plots, legend, axis ranges and Run DPD go with it.
            self._reset_run_views()
            if self.session.forget_ended_run() and self.banner.isVisible() and self.banner.kind != "error":
                self.banner.setVisible(False)
        if not self.session.is_live:
            self._suggest_defaults(dataset)
        self._update_title()
        self.update_estimate()
        self.datasetLoaded.emit(dataset)

    def _load(self, source: str, what: str) -> None:
        if self._loader is not None or self.session.state == "running":
            return
        loader = DatasetLoader(source, self.demo_kwargs if source == "demo" else None)
        loader.signals.loaded.connect(self._on_dataset_loaded)
        loader.signals.failed.connect(self._on_dataset_failed)
        self._loader = self.jobs.add(loader)
        self.dataset_box.set_loading(what)
        self.statusBar().showMessage(f"Loading {what}…")
        self.session.update(loading=True)
        loader.submit()

    def _on_dataset_loaded(self, dataset, ref: str) -> None:
        self.jobs.discard(self._loader)
        self._loader = None
        self.statusBar().showMessage(f"Loaded {getattr(dataset, 'name', ref)}", 5000)
        if self.banner.kind == "error":
            self.banner.setVisible(False)
        self.set_dataset(dataset, ref)
        self.session.update(loading=False)
        if self.session.state == "queued":  # a start waited for this dataset
            self.start_run(self.session.config)

    def _on_dataset_failed(self, exc: Exception, tb: str) -> None:
        source = self._loader.source if self._loader is not None else ""
        self.jobs.discard(self._loader)
        self._loader = None
        what = "the demo data" if source == "demo" else (f"the dataset {source}" if source else "the dataset")
        msg = f"Could not load {what}: {exc}"
        hint = ("Check that the folder holds spec.json and the six split CSVs (I,Q columns), or that the file is a "
                ".csv with I_in,Q_in,I_out,Q_out columns or an .h5/.hdf5 file in the documented layout.")
        self.banner.show_message("error", f"{msg}\n{hint}", detail=tb)
        self.dataset_box.show_fields()
        self.statusBar().showMessage("Dataset not loaded", 5000)
        self.session.update(loading=False)
        self.datasetFailed.emit(str(exc))
        if self.session.fail_queued("its dataset could not be loaded"):
            self.runEnded.emit("failed")

    @property
    def dataset(self):
        return self._dataset

    def dragEnterEvent(self, event) -> None:  # noqa: N802 (Qt name)
        urls = event.mimeData().urls() if event.mimeData().hasUrls() else []
        if len(urls) == 1 and urls[0].isLocalFile() and self.session.controls().open_dataset:
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:  # noqa: N802
        """Drop a dataset folder or file on the window to load it."""
        path = event.mimeData().urls()[0].toLocalFile()
        if os.path.basename(path) == "spec.json":
            path = os.path.dirname(path)
        self.open_dataset(path)
        event.acceptProposedAction()
