"""The runs browser: every run of the workspace in a sortable, filterable table (a dock), read from the workspace
index (runs/index.py) on a pool thread.

* The table is a :class:`RunsTableModel` (one row per :class:`~dpd_desktop.runs.index.IndexedRun`) behind a
  :class:`RunsFilterProxy` (QSortFilterProxyModel: a case-insensitive text filter over the shown cells, a step and a
  state filter; sorting by each column's raw value, empty values last).
* Open: a finished run's plots and epoch table come back from results.h5 and history.csv (runs/replay.py, on a pool
  thread), without retraining (a DPD's "PA(x) no DPD" from its PA run's results.h5); a damaged or unreadable run
  shows why in the banner. The opened run becomes the window's current run (Run DPD, Resume), as if it had just
  ended.
* New run from these settings: the run's configuration fills the form (``MainWindow.set_form_from_config``).
* Compare: two or more selected runs open a compare view (gui/compare.py). Report…: an HTML report of the selected
  run(s) (runs/report_html.py).
"""
from __future__ import annotations

import math
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSortFilterProxyModel, Qt, Signal
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QLineEdit, QPushButton, QTableView, QVBoxLayout, QWidget)

from ..runs.compare import compare_runs
from ..runs.index import quant_text
from ..runs.labels import dataset_label, format_duration
from ..runs.record import RunRecord
from ..runs.replay import load_replay
from ..runs.states import DAMAGED, RUN_STATES, UNREADABLE
from . import history
from .compare import CompareView
from .queue_panel import hidden_dock, read_only_rows
from .run_status import show_reopened
from .runs_jobs import index_rows, start_job, write_report_job
from .session import power_caveat

SORT_ROLE = Qt.ItemDataRole.UserRole + 1


def _f2(v) -> str:
    return "" if v is None else f"{v:.2f}"


#: (header, value of an IndexedRun (raw, for sorting), text)
COLUMNS: tuple[tuple[str, Any, Any], ...] = (
    ("run", lambda r: r.run_id, lambda r: r.run_id),
    ("step", lambda r: r.step, lambda r: r.step.upper()),
    ("model", lambda r: r.family, lambda r: str(r.family).upper()),
    ("H", lambda r: r.hidden_size, lambda r: "" if r.hidden_size is None else str(r.hidden_size)),
    ("state", lambda r: r.state, lambda r: r.state),
    ("kept", lambda r: r.pinned, lambda r: "★" if r.pinned else ""),
    ("dataset", lambda r: dataset_label(r), lambda r: dataset_label(r)),
    ("best ep", lambda r: r.best_epoch, lambda r: "" if r.best_epoch is None else str(r.best_epoch)),
    ("val NMSE [dB]", lambda r: r.val_nmse, lambda r: _f2(r.val_nmse)),
    ("test NMSE [dB]", lambda r: r.test_nmse, lambda r: _f2(r.test_nmse)),
    ("test ACLR [dBc]", lambda r: r.test_aclr_avg, lambda r: _f2(r.test_aclr_avg)),
    ("test EVM [dB]", lambda r: r.test_evm, lambda r: _f2(r.test_evm)),
    ("quant", lambda r: quant_text(r), quant_text),
    ("quant ACLR [dBc]", lambda r: r.quant_test_aclr_avg, lambda r: _f2(r.quant_test_aclr_avg)),
    ("quant EVM [dB]", lambda r: r.quant_test_evm, lambda r: _f2(r.quant_test_evm)),
    ("profile", lambda r: r.metric_profile, lambda r: r.metric_profile or ""),
    ("kernel", lambda r: r.kernel, lambda r: r.kernel or ""),
    ("params", lambda r: r.n_params, lambda r: "" if r.n_params is None else f"{r.n_params:,}"),
    ("MACs/sample", lambda r: r.macs_per_sample,
     lambda r: "" if r.macs_per_sample is None else f"{r.macs_per_sample:,}"),
    ("time", lambda r: r.wall_s, lambda r: "" if r.wall_s is None else format_duration(r.wall_s)),
    ("group", lambda r: r.run_group, lambda r: r.run_group or ""),  # a loop's iterations, a sweep's trials (runs/index.py)
)
STATE_FILTERS = ("all", *RUN_STATES, DAMAGED, UNREADABLE)


class RunsTableModel(QAbstractTableModel):
    """Index rows as a table; DisplayRole the text, :data:`SORT_ROLE` the raw value, ToolTipRole folder, message and
    why the fast kernel fell back."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.rows: list = []

    def set_rows(self, rows) -> None:
        self.beginResetModel()
        self.rows = list(rows)
        self.endResetModel()

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802 (Qt name)
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(COLUMNS)

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        r = self.rows[index.row()]
        _, raw, text = COLUMNS[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            return text(r)
        if role == SORT_ROLE:
            return raw(r)
        if role == Qt.ItemDataRole.ToolTipRole:
            return (r.folder + (f"\n{r.message}" if r.message else "")
                    + (f"\nkernel fell back: {r.kernel_notes}" if r.kernel_notes else ""))
        if role == Qt.ItemDataRole.TextAlignmentRole and index.column() >= 7:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section][0]
        return None


class RunsFilterProxy(QSortFilterProxyModel):
    """Text, step and state filters; sorting by raw values (None / NaN after every number, text by case-folded
    order), ties by run id."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.text = ""
        self.step: str | None = None
        self.state: str | None = None
        self.setSortRole(SORT_ROLE)

    def set_filters(self, text: str | None = None, step: str | None | bool = False,
                    state: str | None | bool = False) -> None:
        """Change the filters given (``False``: keep); None step/state: all."""
        begin = getattr(self, "beginFilterChange", None)  # Qt 6.9+; invalidateFilter() is deprecated there
        if begin is not None:
            begin()
        if text is not None:
            self.text = text.strip().casefold()
        if step is not False:
            self.step = step
        if state is not False:
            self.state = state
        if begin is not None:
            self.endFilterChange()
        else:
            self.invalidateFilter()

    def filterAcceptsRow(self, source_row: int, source_parent) -> bool:  # noqa: N802 (Qt name)
        r = self.sourceModel().rows[source_row]
        if self.step is not None and r.step != self.step:
            return False
        if self.state is not None and r.state != self.state:
            return False
        if not self.text:
            return True
        return any(self.text in str(text(r)).casefold() for _, _, text in COLUMNS)

    def lessThan(self, left, right) -> bool:  # noqa: N802
        a, b = left.data(SORT_ROLE), right.data(SORT_ROLE)
        missing = lambda v: v is None or (isinstance(v, float) and math.isnan(v))  # noqa: E731
        if missing(a) or missing(b):
            if missing(a) and missing(b):
                return self._tie(left, right)
            # empty last in ascending order
            return missing(b)
        if isinstance(a, str) and isinstance(b, str):
            a, b = a.casefold(), b.casefold()
        if a == b:
            return self._tie(left, right)
        try:
            return a < b
        except TypeError:
            return str(a) < str(b)

    def _tie(self, left, right) -> bool:
        rows = self.sourceModel().rows
        return rows[left.row()].run_id < rows[right.row()].run_id


class RunsBrowser(QWidget):
    """The runs table with its filters and actions, bound to a :class:`MainWindow` (its workspace, jobs, banner,
    panels and form).

    Signals (for the window and tests): ``rowsLoaded(list)``, ``runOpened(object)`` (the Replay shown),
    ``openFailed(str)`` (the message shown), ``formFilled(object)`` (the config), ``compareOpened(object)`` (the
    CompareView), ``reportWritten(object)`` (the path, or the exception).
    """

    rowsLoaded = Signal(object)
    runOpened = Signal(object)
    openFailed = Signal(str)
    formFilled = Signal(object)
    compareOpened = Signal(object)
    reportWritten = Signal(object)

    def __init__(self, window, parent=None):
        super().__init__(parent)
        self.window_ = window
        self.compare_views: list = []
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        bar = QHBoxLayout()
        self.filter_edit = QLineEdit()
        self.filter_edit.setPlaceholderText("Filter runs (id, model, dataset, state…)")
        self.filter_edit.setClearButtonEnabled(True)
        self.step_combo = QComboBox()
        for text, data in (("PA and DPD", None), ("PA", "pa"), ("DPD", "dpd")):
            self.step_combo.addItem(text, data)
        self.state_combo = QComboBox()
        for s in STATE_FILTERS:
            self.state_combo.addItem("every state" if s == "all" else s, None if s == "all" else s)
        self.refresh_button = QPushButton("Refresh")
        bar.addWidget(self.filter_edit, 1)
        bar.addWidget(self.step_combo)
        bar.addWidget(self.state_combo)
        bar.addWidget(self.refresh_button)
        lay.addLayout(bar)

        self.model = RunsTableModel(self)
        self.proxy = RunsFilterProxy(self)
        self.proxy.setSourceModel(self.model)
        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(0, Qt.SortOrder.DescendingOrder)
        read_only_rows(self.table)
        self.table.horizontalHeader().setStretchLastSection(True)
        lay.addWidget(self.table, 1)

        actions = QHBoxLayout()
        self.open_button = QPushButton("Open")
        self.open_button.setToolTip("Show the run's plots and epoch table from its folder (no retraining)")
        self.settings_button = QPushButton("New run from these settings")
        self.compare_button = QPushButton("Compare")
        self.compare_button.setToolTip("Compare two or more selected runs")
        self.report_button = QPushButton("Report…")
        self.report_button.setToolTip("Write an HTML report of the selected run(s), plots embedded")
        self.count_label = QLabel("")
        for b in (self.open_button, self.settings_button, self.compare_button, self.report_button):
            actions.addWidget(b)
        actions.addStretch(1)
        actions.addWidget(self.count_label)
        lay.addLayout(actions)

        self.filter_edit.textChanged.connect(lambda t: self._filters_changed(text=t))
        self.step_combo.currentIndexChanged.connect(lambda _: self._filters_changed(step=self.step_combo.currentData()))
        self.state_combo.currentIndexChanged.connect(
            lambda _: self._filters_changed(state=self.state_combo.currentData()))
        self.refresh_button.clicked.connect(self.refresh)
        self.table.doubleClicked.connect(lambda _: self.open_selected())
        self.open_button.clicked.connect(self.open_selected)
        self.settings_button.clicked.connect(self.fill_form_from_selected)
        self.compare_button.clicked.connect(self.compare_selected)
        self.report_button.clicked.connect(lambda: self.report_selected())
        self.table.selectionModel().selectionChanged.connect(lambda *_: self._update_buttons())
        self._update_buttons()

    # ---------------------------------------------------------------- rows
    def refresh(self) -> None:
        """Sync the index with the folders and reload the table (pool thread)."""
        ws = self.window_.workspace
        if ws is None:
            return
        self.count_label.setText("reading the workspace…")
        start_job(self.window_, "runs index", index_rows, ws, done=self._rows_loaded,
                  failed=lambda exc, tb: self.count_label.setText(f"cannot read the runs: {exc}"))

    def _rows_loaded(self, rows) -> None:
        selected = set(self.selected_ids())
        self.model.set_rows(rows)
        if selected:
            sel = self.table.selectionModel()
            for i in range(self.proxy.rowCount()):
                if self.proxy.index(i, 0).data() in selected:
                    sel.select(self.proxy.index(i, 0), sel.SelectionFlag.Select | sel.SelectionFlag.Rows)
        self._update_count()
        self.rowsLoaded.emit(rows)

    def _filters_changed(self, **kw) -> None:
        self.proxy.set_filters(**kw)
        self._update_count()

    def _update_count(self) -> None:
        n, total = self.proxy.rowCount(), self.model.rowCount()
        self.count_label.setText(f"{n} of {total} runs" if n != total else f"{total} runs")

    def visible_rows(self) -> list:
        """The index rows in the table's present order, filtered."""
        return [self.model.rows[self.proxy.mapToSource(self.proxy.index(i, 0)).row()]
                for i in range(self.proxy.rowCount())]

    def selected_rows(self) -> list:
        rows = sorted({i.row() for i in self.table.selectionModel().selectedRows()})
        return [self.model.rows[self.proxy.mapToSource(self.proxy.index(i, 0)).row()] for i in rows]

    def selected_ids(self) -> list[str]:
        return [r.run_id for r in self.selected_rows()]

    def select_ids(self, run_ids) -> None:
        """Select the rows of ``run_ids`` (tests, and after a refresh)."""
        sel = self.table.selectionModel()
        sel.clearSelection()
        for i in range(self.proxy.rowCount()):
            if self.proxy.index(i, 0).data() in set(run_ids):
                sel.select(self.proxy.index(i, 0), sel.SelectionFlag.Select | sel.SelectionFlag.Rows)

    def _update_buttons(self) -> None:
        n = len(self.table.selectionModel().selectedRows())
        self.open_button.setEnabled(n == 1)
        self.settings_button.setEnabled(n == 1)
        self.compare_button.setEnabled(n >= 2)
        self.report_button.setEnabled(n >= 1)

    # ---------------------------------------------------------------- actions
    def _fail(self, title: str, exc) -> None:
        text = f"{title}: {exc}"
        self.window_.banner.show_message("error", text)
        self.openFailed.emit(text)

    def open_selected(self) -> None:
        rows = self.selected_rows()
        if len(rows) == 1:
            self.open_run(rows[0])

    def open_run(self, row) -> None:
        """Show the run of ``row`` (an IndexedRun) in the window's panels; damaged/unreadable: a clear message."""
        start_job(self.window_, "replay run", load_replay, row.folder, done=self._show_replay,
                  failed=lambda exc, tb: self._fail(f"Run {row.run_id} cannot be opened", exc))

    def _show_replay(self, replay) -> None:
        show_replay(self.window_, replay)
        self.window_.plots.finish_drawing(lambda: self.runOpened.emit(replay))

    def fill_form_from_selected(self) -> None:
        rows = self.selected_rows()
        if len(rows) != 1:
            return
        row = rows[0]
        start_job(self.window_, "read run config", lambda d: RunRecord.open(d).config, row.folder,
                  done=self._fill_form,
                  failed=lambda exc, tb: self._fail(f"The settings of {row.run_id} cannot be read", exc))

    def _fill_form(self, cfg) -> None:
        self.window_.set_form_from_config(cfg)
        self.window_.statusBar().showMessage(f"Form filled from run settings ({cfg.step.upper()}, {cfg.backbone}-"
                                             f"{cfg.hidden_size}); press Start for a new run", 6000)
        self.formFilled.emit(cfg)

    def compare_selected(self) -> None:
        rows = self.selected_rows()
        if len(rows) < 2:
            return
        start_job(self.window_, "compare runs", compare_runs, [r.folder for r in rows], done=self._show_compare,
                  failed=lambda exc, tb: self._fail("The runs cannot be compared", exc))

    def _show_compare(self, cmp) -> None:
        view = CompareView(cmp, self.window_, parent=self.window_)  # a window of its own, closed with the main one
        self.compare_views = [v for v in self.compare_views if _alive(v)] + [view]
        view.show()
        self.compareOpened.emit(view)

    def report_selected(self, path: str | None = None) -> None:
        rows = self.selected_rows()
        if not rows:
            return
        write_report_job(self.window_, [r.folder for r in rows], path, self.reportWritten.emit)


def _alive(widget) -> bool:
    """Whether a compare view is still open (one closed is deleted: WA_DeleteOnClose)."""
    try:
        return widget.isVisible()
    except RuntimeError:
        return False


def show_replay(window, replay) -> None:
    """Put a replayed run into the window's epoch table and learning curves, and queue its plots (drawn one data
    panel per event-loop pass: ``window.plots.finish_drawing(then)`` calls back when they are)."""
    window.reset_run_views()
    best = replay.best_epoch
    # durations from history.csv's TIME: column
    window.plots.add_rows(replay.history, history.epoch_seconds(replay.history), best)
    if replay.plots is not None:
        window.plots.queue(replay.plots, f"test · saved run, epoch {best}")
    rec = replay.record
    # the reopened run is the window's current run, as if it had just ended: Run DPD and Resume follow it
    window.session.on_reopened(rec.config, rec.run_id, str(rec.run_dir), rec.state, epochs_done=len(replay.history))
    kernel = rec.kernel
    text = f"Run {rec.run_id} ({rec.state}, kernel {kernel.label}) shown from its folder; nothing was retrained."
    if kernel.fell_back:
        text += " Fell back: " + ("; ".join(kernel.notes) or "no reason recorded") + "."
    if replay.notes:
        text += " " + "; ".join(n[0].upper() + n[1:] for n in replay.notes) + "."
    # the title and status bar describe this run now; a DPD's output-power change stands beside its ACLR
    show_reopened(window, replay)
    window.session.power_caveat = caveat = power_caveat(replay.power_change_db)  # Run DPD repeats it
    if caveat:
        text += "\n" + caveat
    window.banner.show_message("warning" if rec.state == DAMAGED or caveat else "info", text,
                               run_dir=str(rec.run_dir))


def install_runs_browser(window) -> RunsBrowser:
    """Add the runs browser to ``window`` as a bottom dock, tabbed with the run queue and hidden until shown (its
    toggle in the Run menu); it reads the index when shown and, while shown, after each run; returns the browser."""
    browser = RunsBrowser(window)
    dock = hidden_dock(window, "Runs", "runs_dock", browser, tab_with=getattr(window, "queue_dock", None),
                       toggle_text="Runs browser", shortcut="Ctrl+Shift+B",
                       tooltip="Every run of the workspace: open, compare, report (Ctrl+Shift+B)",
                       on_shown=browser.refresh)
    window.runs_dock = dock
    window.runEnded.connect(lambda *_: dock.isVisible() and browser.refresh())
    return browser
