"""The window's Resume action: continue the current/last run when it was cancelled, interrupted or failed, in its own
run folder, after its last finished epoch (the core's training/resume.py; the numbers are those of an uninterrupted
run). Offered only for a run with a ``last.pt``; the checks (its contents, the dataset fingerprint) and the loading
run in the run's child process; a refusal reaches the banner as the "could not start" failure, in the core's words."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QStyle, QToolBar

from . import history
from .run_control import same_dataset

RESUMABLE = ("cancelled", "interrupted", "failed")


class ResumeControl(QObject):
    """The Resume action (toolbar and Run menu, after Stop) of ``window`` (a MainWindow); enabled when the
    current/last run ended cancelled, interrupted or failed and nothing runs."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self._worker = None  # the worker of the resume in flight
        st = window.style()
        self.action = QAction(st.standardIcon(QStyle.StandardPixmap.SP_MediaSeekForward), "Resume", window)
        self.action.setObjectName("act_resume")
        self.action.setToolTip("Continue the stopped run in its own folder after its last finished epoch "
                               "(the same numbers as a run never stopped)")
        self.action.triggered.connect(lambda: self.resume())
        bars = [tb for tb in window.findChildren(QToolBar)]
        bars += [a.menu() for a in window.menuBar().actions() if a.menu() is not None]
        for bar in bars:
            if window.act_stop in bar.actions():
                _insert_after(bar, window.act_stop, self.action)
        window.session.subscribe(self._render)
        window.runEnded.connect(self._render)  # after the worker is gone (the session may not change then)
        self._render()

    def can_resume(self) -> bool:
        """A stopped run with a finished epoch (its ``last.pt``; a resume of one without would only be refused)."""
        s, w = self.window.session, self.window
        return (s.state in RESUMABLE and bool(s.run_dir) and s.config is not None and w.runs.worker is None
                and Path(s.run_dir, "last.pt").is_file())

    def _render(self, *_) -> None:
        self.action.setEnabled(self.can_resume())

    def resume(self) -> bool:
        """Resume the current/last run; False when there is none to resume (the action is disabled then)."""
        if not self.can_resume():
            return False
        w = self.window
        cfg = w.session.config
        data = w.data
        dataset = data.dataset if data.dataset is not None and same_dataset(data.ref, cfg.dataset) else None
        worker = w.runs.launch(cfg, dataset, resume=w.session.run_dir)
        self._worker = worker
        worker.started.connect(self._on_started)  # queued to this GUI-thread object, before any epoch row
        w.statusBar().showMessage(f"Resuming {w.session.run_dir}…", 3000)
        return True

    @Slot(object)
    def _on_started(self, ev) -> None:
        """Show the epochs done before the resume in the epoch table and the learning curves."""
        w, rows = self.window, (self._worker.resumed_rows if self._worker is not None else [])
        w.plots.add_rows(rows, history.epoch_seconds(rows))
        w.session.epochs_done = len(rows)


def _insert_after(bar, anchor, action) -> None:
    """Put ``action`` right after ``anchor`` in a toolbar or menu."""
    actions = bar.actions()
    i = actions.index(anchor)
    if i + 1 < len(actions):
        bar.insertAction(actions[i + 1], action)
    else:
        bar.addAction(action)
