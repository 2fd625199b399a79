"""The inspector's flags in the dataset panel, and Start asking when one is an error.

``install_dataset_flags(window)`` (one line in main_window.py) puts a :class:`~.widgets.flag_list.FlagList` under
the dataset summary. Each loaded dataset is inspected (:func:`dpd_desktop.analysis.inspect.inspect_dataset`) in an
:class:`~.inspector.InspectJob` of the window's job registry, never on the GUI thread. ``start_run`` asks
:meth:`DatasetFlags.check_start` first: while the checks still run the start waits (``queued``) and goes on when they
end; with an error-level flag :func:`ask_start` shows the flags and No keeps the run from starting.
"""
from __future__ import annotations

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QMessageBox

from .inspector import InspectJob
from .widgets.flag_list import FlagList

__all__ = ["DatasetFlags", "ask_start", "confirm_flags", "install_dataset_flags"]

START, WAIT, REFUSE = "start", "wait", "refuse"


def confirm_flags(parent, flags) -> bool:
    """Ask whether to train on a dataset with these flags (the errors first); True for Yes. No is the default."""
    errors = [f for f in flags if f.severity == "error"]
    others = [f for f in flags if f.severity != "error"]
    box = QMessageBox(QMessageBox.Icon.Warning, "Start on a flagged dataset?",
                      f"The dataset inspector marked {len(errors)} error(s) in this dataset. A model trained on it "
                      "may be meaningless.\n\nStart anyway?", QMessageBox.StandardButton.Yes |
                      QMessageBox.StandardButton.No, parent)
    box.setDefaultButton(QMessageBox.StandardButton.No)
    box.setInformativeText("\n".join(f"• {f.severity} {f.code}: {f.message}" for f in errors + others))
    box.setObjectName("flaggedStartPrompt")
    return box.exec() == QMessageBox.StandardButton.Yes


#: What Start calls (``ask_start(window, flags) -> bool``); a module attribute so that a test may answer for it.
ask_start = confirm_flags


class DatasetFlags(QObject):
    """Inspects each dataset the window loads and shows its flags; :meth:`check_start` gates Start.

    ``enabled`` False: no inspection (the flags stay hidden, Start is never held).
    """

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.enabled = True
        self.view = FlagList()
        window.dataset_box.layout().addWidget(self.view)
        self.report = None  # the CaptureReport of the loaded dataset (None: not inspected, pending or failed)
        self.error: str | None = None  # why the inspection failed
        self._dataset = None
        self._job: InspectJob | None = None
        window.datasetLoaded.connect(self._on_dataset_loaded)

    @property
    def pending(self) -> bool:
        """The loaded dataset's checks are still running."""
        return self._job is not None

    @property
    def flags(self) -> tuple:
        return tuple(self.report.flags) if self.report is not None else ()

    @Slot(object)
    def _on_dataset_loaded(self, dataset) -> None:
        if self._job is not None:
            self._job.request_stop()
            self.window.jobs.discard(self._job)
            self._job = None
        self.report, self.error, self._dataset = None, None, dataset
        if not self.enabled:
            self.view.clear()
            return
        self.view.show_state("Checking the dataset…")
        job = InspectJob(dataset, None)  # no frame-length check: the form may change; Start validates it
        job.signals.done.connect(self._on_done)
        job.signals.failed.connect(self._on_failed)
        self._job = self.window.jobs.add(job)
        job.submit()

    def _ours(self) -> bool:
        job = self._job
        return job is not None and self.sender() is job.signals

    @Slot(object)
    def _on_done(self, report) -> None:
        if not self._ours():
            return
        self._finish()
        self.report = report
        self.view.show_flags(report.flags)
        self._resume_start()

    @Slot(object, str)
    def _on_failed(self, exc, _tb: str) -> None:
        if not self._ours():
            return
        self._finish()
        self.error = str(exc)
        self.view.show_state(f"Checks failed: {exc}")
        self._resume_start()

    def _finish(self) -> None:
        self.window.jobs.discard(self._job)
        self._job = None

    def _resume_start(self) -> None:
        """A start that waited for these checks goes on (and asks, when they found an error)."""
        w = self.window
        if w.session.state == "queued" and w.data.loader is None and w.data.dataset is self._dataset:
            w.start_run(w.session.config)

    def check_start(self) -> str:
        """For a start on the loaded dataset: ``"wait"`` while its checks run, ``"refuse"`` when it has an
        error-level flag and the user answered No, else ``"start"``."""
        dataset = self.window.data.dataset
        if not self.enabled or dataset is None or dataset is not self._dataset:
            return START
        if self.pending:
            return WAIT
        if self.report is not None and self.report.errors:
            return START if ask_start(self.window, self.report.flags) else REFUSE
        return START


def install_dataset_flags(window) -> DatasetFlags:
    """Add the flags under ``window``'s dataset summary; returns the controller (``window.dataset_flags``)."""
    window.dataset_flags = DatasetFlags(window)
    return window.dataset_flags
