"""The window's queue panel (a dock): the workspace's run queue, its entries' states, and the queue runner.

Buttons: Add current form to queue, Move up / Move down, Cancel (a queued entry: at once; a running one: after its
current batch), Run queue / Stop queue. The queue is the one the command line's ``dpd-desktop queue`` uses
(``<workspace>/queue.sqlite``): entries added there show up here. While the queue runs, the toolbar's Stop stops the
followed entry and the plots, the epoch table and the progress read-out follow it
(:class:`~dpd_desktop.gui.worker.QueueWorker` emits the signals of the window's own run); an interactive Start
waits until the queue has stopped. Reading the queue here is one short SQLite query (milliseconds) on a timer.
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Slot
from PySide6.QtGui import QColor, QKeySequence
from PySide6.QtWidgets import (QAbstractItemView, QDockWidget, QFrame, QHBoxLayout, QHeaderView, QLabel, QPushButton,
                               QScrollArea, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from ..config import ConfigError
from ..lab.queue import QUEUE_FILE, QueueError, RunQueue
from .worker import QueueWorker

COLUMNS = ("#", "State", "Experiment", "Device", "Run", "Message")
STATE_COLORS = {"succeeded": "#2e7d32", "failed": "#c62828", "cancelled": "#b26a00", "interrupted": "#b26a00",
                "running": "#1565c0"}
REFRESH_MS = 2000
#: px: the buttons, the header and a row (a 1280×800 window's plots keep their height under a DPD run's banner);
#: the dock scrolls, and its splitter gives it more
DOCK_HEIGHT = 96
DOCK_MIN_HEIGHT = 20


class QueuePanel(QWidget):
    """The queue of ``window.workspace`` and its runner (see the module docstring)."""

    def __init__(self, window, parent=None):
        super().__init__(parent)
        self.window = window
        self._queue: RunQueue | None = None
        self.worker: QueueWorker | None = None
        self.ended: list[tuple[int, str]] = []  # (entry id, state) as the worker reported them, for the tests

        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        hh = self.table.horizontalHeader()
        for i in range(len(COLUMNS) - 1):
            hh.setSectionResizeMode(i, QHeaderView.ResizeMode.ResizeToContents)
        hh.setStretchLastSection(True)
        self.btn_add = QPushButton("Add current form to queue")
        self.btn_up = QPushButton("Move up")
        self.btn_down = QPushButton("Move down")
        self.btn_cancel = QPushButton("Cancel")
        self.btn_run = QPushButton("Run queue")
        self.btn_stop = QPushButton("Stop queue")
        self.status = QLabel("")
        self.status.setWordWrap(True)
        buttons = QHBoxLayout()
        for b in (self.btn_add, self.btn_up, self.btn_down, self.btn_cancel):
            buttons.addWidget(b)
        buttons.addStretch(1)
        buttons.addWidget(self.btn_run)
        buttons.addWidget(self.btn_stop)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(buttons)
        lay.addWidget(self.table, 1)
        lay.addWidget(self.status)

        self.btn_add.clicked.connect(self.add_current_form)
        self.btn_up.clicked.connect(lambda: self.move_selected(-1))
        self.btn_down.clicked.connect(lambda: self.move_selected(+1))
        self.btn_cancel.clicked.connect(self.cancel_selected)
        self.btn_run.clicked.connect(self.run_queue)
        self.btn_stop.clicked.connect(self.stop_queue)
        self.table.itemSelectionChanged.connect(self._update_buttons)
        self._timer = QTimer(self, interval=REFRESH_MS)
        self._timer.timeout.connect(self.refresh)
        self._timer.start()
        self.refresh()

    # ------------------------------------------------------------------------------------------------ the queue
    def queue(self, create: bool = True) -> RunQueue | None:
        """The workspace's queue (opened on first use; ``create``: also when its file does not exist yet, else
        None then); None, with the reason shown, when it cannot be used."""
        if self._queue is None:
            ws = getattr(self.window, "workspace", None)
            root = getattr(ws, "root", None)
            if root is None:
                self._say("No workspace: the queue is not available.")
                return None
            if not create and not (Path(root) / QUEUE_FILE).exists():
                return None  # nothing queued yet: the window creates no file until something is
            try:
                self._queue = RunQueue(root)
            except (QueueError, OSError) as exc:
                self._say(str(exc), error=True)
                return None
        return self._queue

    def entries(self):
        q = self.queue(create=False)
        if q is None:
            return []
        try:
            return q.entries()
        except QueueError as exc:
            self._say(str(exc), error=True)
            return []

    def refresh(self) -> None:
        """Redraw the table from the queue file, keeping the selected entry selected."""
        keep = self.selected_entry()
        entries = self.entries()
        self.table.setRowCount(len(entries))
        members: dict[str, list[int]] = {}
        for e in entries:
            if e.group is not None:
                members.setdefault(e.group, []).append(e.id)
        for r, e in enumerate(entries):
            cells = (str(e.id), e.state, e.label() + (f" · after #{e.after}" if e.after else "")
                     + (f" · {e.group_words()}" if e.group is not None else ""), e.device, e.run_id or "",
                     e.message)
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setData(Qt.ItemDataRole.UserRole, e.id)
                if c == 1 and e.state in STATE_COLORS:
                    item.setForeground(QColor(STATE_COLORS[e.state]))
                if c == len(cells) - 1:
                    item.setToolTip(text)
                if c == 2 and e.group is not None:
                    ids = ", ".join(f"#{i}" for i in members[e.group])
                    item.setToolTip(f"group {e.group}: entries {ids} train together in one process")
                self.table.setItem(r, c, item)
            if e.id == keep:
                self.table.selectRow(r)
        self._update_buttons()

    def states(self) -> list[tuple[int, str]]:
        """(entry id, state) of the table's rows, in order."""
        return [(int(self.table.item(r, 0).text()), self.table.item(r, 1).text()) for r in range(self.table.rowCount())]

    def selected_entry(self) -> int | None:
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        if not rows:
            return None
        item = self.table.item(rows[0].row(), 0)
        return int(item.data(Qt.ItemDataRole.UserRole)) if item is not None else None

    def _state_of(self, entry_id: int | None) -> str | None:
        for r in range(self.table.rowCount()):
            if int(self.table.item(r, 0).text()) == entry_id:
                return self.table.item(r, 1).text()
        return None

    def _update_buttons(self) -> None:
        running = self.worker is not None
        state = self._state_of(self.selected_entry())
        self.btn_up.setEnabled(state == "queued")
        self.btn_down.setEnabled(state == "queued")
        self.btn_cancel.setEnabled(state in ("queued", "running"))
        self.btn_run.setEnabled(not running and self._queue is not None)
        self.btn_stop.setEnabled(running)
        self.btn_add.setEnabled(getattr(getattr(self.window, "workspace", None), "root", None) is not None)

    def _say(self, text: str, error: bool = False) -> None:
        self.status.setText(text)
        self.status.setStyleSheet(f"color: {STATE_COLORS['failed']};" if error else "")

    # ------------------------------------------------------------------------------------------------ actions
    def add_current_form(self) -> int | None:
        """Queue the experiment the form describes; returns the entry id (None when refused, with the reason)."""
        w = self.window
        try:
            cfg = w.config_from_form()
        except ConfigError as err:
            self._say(f"Not queued: {w.form.show_error(err)}", error=True)
            return None
        if not cfg.dataset:
            self._say("Not queued: open a dataset (or the demo data) first.", error=True)
            return None
        q = self.queue()
        if q is None:
            return None
        try:
            e = q.add(cfg)
        except (QueueError, ConfigError) as exc:
            self._say(f"Not queued: {exc}", error=True)
            return None
        self._say(f"Entry {e.id} queued: {e.label()} on {e.device}.")
        self.refresh()
        return e.id

    def move_selected(self, delta: int) -> None:
        eid, q = self.selected_entry(), self.queue()
        if eid is None or q is None:
            return
        entries = self.entries()
        pos = next((i for i, e in enumerate(entries) if e.id == eid), None)
        if pos is None:
            return
        try:
            q.move(eid, pos + 1 + delta)
        except QueueError as exc:
            self._say(str(exc), error=True)
        self.refresh()

    def cancel_selected(self) -> None:
        eid, q = self.selected_entry(), self.queue()
        if eid is None or q is None:
            return
        try:
            e = q.cancel(eid)
        except QueueError as exc:
            self._say(str(exc), error=True)
            return
        self._say(f"Entry {e.id}: " + ("stops after its current batch." if e.state == "running" else e.state + "."))
        self.refresh()

    def run_queue(self) -> bool:
        """Start the queue runner; False when refused (an interactive run is going, or no queue)."""
        w = self.window
        if self.worker is not None or self.queue() is None:
            return False
        if w.runs.worker is not None or w.session.is_live:
            self._say("A run is going: the queue starts when it has ended.", error=True)
            return False
        worker = QueueWorker(w.workspace)
        w.runs.follow(worker)
        worker.entryStarted.connect(self._on_entry_started)
        worker.entryEnded.connect(self._on_entry_ended)
        worker.queueFailed.connect(self._on_queue_failed)
        worker.done.connect(self._on_done)
        self.worker = worker
        w.runs.worker = w.jobs.add(worker)  # the toolbar's Stop and the preview toggle reach the followed entry
        self._say("Queue running…")
        self._update_buttons()
        worker.start()
        return True

    def stop_queue(self) -> None:
        if self.worker is not None:
            self.worker.request_stop()
            self._say("Stopping the queue: the running entry stops after its current batch…")

    # ------------------------------------------------------------------------------------------------ the worker's
    @Slot(object, bool)
    def _on_entry_started(self, entry, followed: bool) -> None:
        w = self.window
        if followed:
            w.banner.setVisible(False)
            w.form.clear_error()
            w.reset_run_views()
            w.session.start(entry.config)
        self._say(f"Entry {entry.id} running: {entry.label()} on {entry.device}.")
        self.refresh()

    @Slot(object, object, bool)
    def _on_entry_ended(self, entry, end, followed: bool) -> None:
        w = self.window
        self.ended.append((end.entry_id, end.state))
        if followed:
            if end.state == "interrupted":
                w.session.on_interrupted(end.run_dir, f"Interrupted: {end.message}")
                w.banner.show_message("warning", f"Queue entry {entry.id} was interrupted: {end.message}",
                                      run_dir=end.run_dir)
            elif w.session.is_live:  # no outcome event reached the window (should not happen)
                w.session.on_worker_done()
            w.runs.run_ended(w.session.state, end.run_dir)
        self._say(f"Entry {end.entry_id} {end.state}" + (f": {end.message}" if end.message else "."))
        self.refresh()

    @Slot(str)
    def _on_queue_failed(self, text: str) -> None:
        self._say(f"The queue stopped: {text}", error=True)

    @Slot()
    def _on_done(self) -> None:
        # after the followed run's end, whose final plots are drawn over the next passes (RunController.run_ended)
        self.window.plots.finish_drawing(self._queue_ended)

    def _queue_ended(self) -> None:
        worker, self.worker = self.worker, None
        w = self.window
        if worker is not None:
            worker.wait(2000)
            w.jobs.discard(worker)
            if w.runs.worker is worker:
                w.runs.worker = None
        if not self.status.text().startswith("The queue stopped"):
            self._say("Queue stopped." if worker is not None and worker._stop else "Queue done.")
        self.refresh()
        w._render()


def bottom_dock(window, title: str, object_name: str, widget) -> QDockWidget:
    """A dock at the bottom of ``window`` holding ``widget`` in a scroll area that may shrink to a strip: the dock
    must not raise the window's minimum height (a small screen, a restored geometry); its contents scroll then."""
    dock = QDockWidget(title, window)
    dock.setObjectName(object_name)
    scroll = QScrollArea()
    scroll.setWidget(widget)
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QFrame.Shape.NoFrame)
    scroll.setMinimumHeight(DOCK_MIN_HEIGHT)
    dock.setWidget(scroll)
    window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, dock)
    return dock


def read_only_rows(table, multi: bool = True) -> None:
    """Set up ``table`` as a read-only list of rows: whole-row (``multi``: extended) selection, alternating colours,
    no row numbers, 20 px rows, columns sized to their contents."""
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection if multi
                           else QAbstractItemView.SelectionMode.SingleSelection)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setAlternatingRowColors(True)
    table.verticalHeader().setVisible(False)
    table.verticalHeader().setDefaultSectionSize(20)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)


def hidden_dock(window, title: str, object_name: str, widget, *, tab_with, toggle_text: str, shortcut: str,
                tooltip: str, on_shown) -> QDockWidget:
    """A :func:`bottom_dock` tabbed with the dock ``tab_with`` (None: untabbed), hidden until its toggle (added to
    the Run menu, with ``shortcut`` and ``tooltip``) shows it; ``on_shown()`` runs each time it is shown. Hidden at
    first: a tabbed dock's tab bar would raise the window's minimum height past a small screen's."""
    dock = bottom_dock(window, title, object_name, widget)
    if tab_with is not None:
        window.tabifyDockWidget(tab_with, dock)
    dock.hide()
    toggle = dock.toggleViewAction()
    toggle.setText(toggle_text)
    toggle.setShortcut(QKeySequence(shortcut))
    toggle.setToolTip(tooltip)
    toggle.toggled.connect(lambda on: on and _raise_shown(dock, on_shown))
    window.addAction(toggle)
    for action in window.menuBar().actions():
        if action.text().replace("&", "") == "Run" and action.menu() is not None:
            action.menu().addAction(toggle)
    return dock


def _raise_shown(dock: QDockWidget, on_shown) -> None:
    """A dock just shown by its toggle comes to the front of its tab group (Qt adds its tab behind the current
    one), then ``on_shown()`` runs. The raise waits for the event loop: the action's ``toggled`` comes before the
    dock is shown."""
    QTimer.singleShot(0, dock, dock.raise_)
    on_shown()


def install_queue_panel(window) -> QueuePanel:
    """Add the queue panel to ``window`` as a bottom dock (its toggle in the Run menu); returns the panel."""
    panel = QueuePanel(window)
    dock = bottom_dock(window, "Run queue", "queue_dock", panel)
    window.resizeDocks([dock], [DOCK_HEIGHT], Qt.Orientation.Vertical)  # the plots keep most of the height
    for action in window.menuBar().actions():
        if action.text().replace("&", "") == "Run" and action.menu() is not None:
            action.menu().addSeparator()
            action.menu().addAction(dock.toggleViewAction())
    window.queue_dock = dock
    window.session.add_busy_check(lambda: "the run queue" if panel.worker is not None else None)  # close asks
    return panel
