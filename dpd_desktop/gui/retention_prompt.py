"""The window's retention prompt: at start-up, the scratch runs due for removal are shown BEFORE they go.

:func:`install_retention_prompt` puts a :class:`RetentionPrompt` under the window's banner and starts a
:class:`RetentionScanJob` (off the GUI thread: runs/retention.py ``purge_trash`` + ``plan_retention``). When runs
are due, the prompt lists them (run, state, age, size) with three choices: "Remove now" (a
:class:`RetentionRemoveJob`: ``remove_due``, which removes only the runs shown that are still due, and updates the
index), "Keep them (pin)" (a :class:`RetentionPinJob`: ``set_pinned`` on each) and "Not now" (nothing happens; asked
again at the next start). Nothing is removed without the click. The prompt is not modal. It also adds Run ▸ "Keep
this run (pin)" for the run that last ended in the window.
"""
from __future__ import annotations

import traceback

from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (QFrame, QHBoxLayout, QLabel, QPushButton, QSizePolicy, QTreeWidget, QTreeWidgetItem,
                               QVBoxLayout)

from ..runs import retention
from ..runs.index import RunIndex
from ..runs.writer import set_pinned
from .jobs import PoolJob


MAX_ROWS = 6  # rows the list shows before it scrolls


class _Signals(QObject):
    done = Signal(object)  # RetentionPlan / RemovalReport / list of pinned run ids
    failed = Signal(object, str)  # exception, traceback text


class RetentionScanJob(PoolJob):
    """Purges the trash a crash left, then plans retention for ``workspace`` (reports the RetentionPlan)."""

    name = "retention scan"

    def __init__(self, workspace):
        super().__init__()
        self.workspace = workspace
        self.signals = _Signals()

    def work(self) -> None:
        try:
            retention.purge_trash(self.workspace)
            plan = retention.plan_retention(self.workspace)
        except Exception as exc:  # noqa: BLE001 - shown in the status bar
            self.signals.failed.emit(exc, traceback.format_exc())
            return
        if not self.stop_requested:
            self.signals.done.emit(plan)


class RetentionRemoveJob(PoolJob):
    """Removes the due runs of a plan that are still due (``remove_due``; the index is updated); a stop request
    before it begins skips it."""

    name = "retention removal"

    def __init__(self, workspace, plan):
        super().__init__()
        self.workspace = workspace
        self.plan = plan
        self.signals = _Signals()

    def work(self) -> None:
        if self.stop_requested:
            return
        try:
            with RunIndex.open(self.workspace, sync=False) as idx:
                report = retention.remove_due(self.workspace, self.plan, index=idx)
                idx.sync()
        except Exception as exc:  # noqa: BLE001
            self.signals.failed.emit(exc, traceback.format_exc())
            return
        self.signals.done.emit(report)


class RetentionPinJob(PoolJob):
    """Pins (keeps; ``pinned`` False: unpins) the named run folders (``set_pinned``), then refreshes their index
    rows."""

    name = "pin runs"

    def __init__(self, workspace, folders, pinned: bool = True):
        super().__init__()
        self.workspace = workspace
        self.folders = [Path(f) for f in folders]
        self.pinned = pinned
        self.signals = _Signals()

    def work(self) -> None:
        try:
            for f in self.folders:
                set_pinned(f, self.pinned)
            with RunIndex.open(self.workspace, sync=False) as idx:
                idx.refresh([f.name for f in self.folders])
        except Exception as exc:  # noqa: BLE001
            self.signals.failed.emit(exc, traceback.format_exc())
            return
        self.signals.done.emit([f.name for f in self.folders])


class RetentionPrompt(QFrame):
    """A non-modal panel listing the runs retention would remove, with Remove now / Keep them (pin) / Not now.

    Signals: ``planned(plan)`` when a scan reported (shown or not); ``finished(str)`` with "removed", "pinned",
    "not now" or "failed" once the user's choice is done.
    """

    planned = Signal(object)
    finished = Signal(str)

    def __init__(self, workspace, jobs, status=None, parent=None):
        super().__init__(parent)
        self.setObjectName("RetentionPrompt")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet("#RetentionPrompt { border: 1px solid #e69500; border-radius: 4px; }")
        self.workspace = workspace
        self.jobs = jobs
        self._status = status or (lambda text: None)
        self.plan = None
        self.report = None
        self.pin_action: QAction | None = None  # Run ▸ Keep this run (pin), set by install_retention_prompt

        self.text = QLabel()
        self.text.setWordWrap(True)
        self.list = QTreeWidget()
        self.list.setHeaderLabels(["Run", "State", "Ended", "Size"])
        self.list.setRootIsDecorated(False)
        self.list.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Maximum)
        self.remove_button = QPushButton("Remove now")
        self.remove_button.setToolTip("Delete these run folders now (only those still due)")
        self.remove_button.clicked.connect(self.remove_now)
        self.pin_button = QPushButton("Keep them (pin)")
        self.pin_button.setToolTip("Mark these runs kept: retention never removes a kept run")
        self.pin_button.clicked.connect(self.keep_them)
        self.later_button = QPushButton("Not now")
        self.later_button.setToolTip("Leave them for now; you are asked again at the next start")
        self.later_button.clicked.connect(self.not_now)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.text, 1)
        for b in (self.remove_button, self.pin_button, self.later_button):
            row.addWidget(b)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 6, 6, 6)
        lay.addLayout(row)
        lay.addWidget(self.list)
        self.setVisible(False)

    # ---------------------------------------------------------------- scan
    def scan(self) -> RetentionScanJob:
        """Plan retention off the GUI thread; the prompt shows itself when runs are due."""
        job = RetentionScanJob(self.workspace)
        job.signals.done.connect(self._on_planned)
        job.signals.failed.connect(self._on_failed)
        self.jobs.add(job)
        job.submit()
        return job

    @Slot(object)
    def _on_planned(self, plan) -> None:
        self.plan = plan
        self.show_plan(plan)
        self.planned.emit(plan)

    def show_plan(self, plan) -> None:
        """Fill the list with ``plan.due`` (hidden when nothing is due)."""
        self.list.clear()
        for item in plan.due:
            row = QTreeWidgetItem([item.run_id, item.state, f"{retention.format_age(item.age_s)} ago",
                                   retention.format_size(item.size_bytes)])
            row.setToolTip(0, f"{item.folder}\n{item.reason}")
            self.list.addTopLevelItem(row)
        for c in range(4):
            self.list.resizeColumnToContents(c)
        # as tall as its rows, at most MAX_ROWS (then it scrolls)
        shown = max(1, min(len(plan.due), MAX_ROWS))
        row_h = self.list.sizeHintForRow(0) if len(plan.due) else 18
        self.list.setFixedHeight(self.list.header().sizeHint().height() + shown * row_h
                                 + 2 * self.list.frameWidth() + 2)
        n = len(plan.due)
        self.text.setText(f"{n} scratch run{'s' if n != 1 else ''} ended more than {plan.retention_hours:g} h ago "
                          f"and will be removed ({retention.format_size(plan.due_bytes)}). Kept (pinned) runs, live "
                          "runs and the PA runs of kept DPD runs stay.")
        self._enable(True)
        self.setVisible(n > 0)

    @property
    def shown_run_ids(self) -> list[str]:
        return [self.list.topLevelItem(i).text(0) for i in range(self.list.topLevelItemCount())]

    # ---------------------------------------------------------------- choices
    def _enable(self, on: bool) -> None:
        for b in (self.remove_button, self.pin_button, self.later_button):
            b.setEnabled(on)

    def remove_now(self) -> RetentionRemoveJob | None:
        if self.plan is None or not self.plan.due:
            return None
        self._enable(False)
        self.text.setText(f"Removing {len(self.plan.due)} run(s)…")
        job = RetentionRemoveJob(self.workspace, self.plan)
        job.signals.done.connect(self._on_removed)
        job.signals.failed.connect(self._on_failed)
        self.jobs.add(job)
        job.submit()
        return job

    def keep_them(self) -> RetentionPinJob | None:
        if self.plan is None or not self.plan.due:
            return None
        self._enable(False)
        job = RetentionPinJob(self.workspace, [i.folder for i in self.plan.due])
        job.signals.done.connect(self._on_pinned)
        job.signals.failed.connect(self._on_failed)
        self.jobs.add(job)
        job.submit()
        return job

    def not_now(self) -> None:
        self.setVisible(False)
        self.finished.emit("not now")

    @Slot(object)
    def _on_removed(self, report) -> None:
        self.report = report
        self.setVisible(False)
        text = f"Removed {len(report.removed)} scratch run(s)"
        if report.skipped:
            text += "; kept " + ", ".join(f"{r} ({why})" for r, why in report.skipped)
        self._status(text)
        self.finished.emit("removed")

    @Slot(object)
    def _on_pinned(self, run_ids) -> None:
        self.setVisible(False)
        self._status(f"Kept {len(run_ids)} run(s): retention will not remove them")
        self.finished.emit("pinned")

    # ---------------------------------------------------------------- the current run
    def pin_current(self, run_dir, pinned: bool) -> RetentionPinJob:
        """Keep (or make scratch again) the window's current run, off the GUI thread."""
        job = RetentionPinJob(self.workspace, [run_dir], pinned)
        job.signals.done.connect(self._on_pinned_current)
        job.signals.failed.connect(self._on_failed)
        self.jobs.add(job)
        job.submit()
        return job

    @Slot(object)
    def _on_pinned_current(self, run_ids) -> None:
        self._status(f"{run_ids[0]}: " + ("kept (retention never removes it)" if self.pin_action.isChecked()
                                          else "scratch again (removed once older than the retention time)"))

    @Slot(object, str)
    def _on_failed(self, exc, tb: str) -> None:
        self._enable(True)
        self._status(f"Retention: {type(exc).__name__}: {exc}")
        self.finished.emit("failed")


def install_retention_prompt(window) -> RetentionPrompt | None:
    """Put a :class:`RetentionPrompt` under ``window.banner`` and scan ``window.workspace`` (a real Workspace with a
    runs folder; otherwise nothing is installed). The scan and every removal run in ``window.jobs``."""
    ws = getattr(window, "workspace", None)
    if ws is None or not hasattr(ws, "runs_dir"):
        return None
    prompt = RetentionPrompt(ws, window.jobs, status=lambda t: window.statusBar().showMessage(t, 10000))
    layout = window.banner.parentWidget().layout()
    layout.insertWidget(layout.indexOf(window.banner) + 1, prompt)
    if ws.runs_dir.is_dir():
        prompt.scan()
    # Run ▸ Keep this run (pin): for the run that last ended in this window (a new run is scratch)
    act = prompt.pin_action = QAction("Keep this run (pin)", window, checkable=True, enabled=False)
    act.setToolTip("Keep the last run: retention never removes a kept run")
    act.triggered.connect(lambda on: window.session.run_dir and prompt.pin_current(window.session.run_dir, on))
    window.runEnded.connect(lambda *_: (act.setChecked(False), act.setEnabled(bool(window.session.run_dir))))
    for m in window.menuBar().actions():
        if m.menu() is not None and m.text() == "&Run":
            m.menu().addAction(act)
    return prompt
