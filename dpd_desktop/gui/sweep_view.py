"""The Sweep view (a bottom dock): a sweep's trials with their live best metrics, a Pareto plot of NMSE and ACLR
against the model's cost, stop / resume, and the best trial one click from open, compare and report.

The table comes from :func:`dpd_desktop.sweep.table.sweep_table` on a pool job, re-read every
:data:`LIVE_REFRESH_MS` while the shown sweep runs. Resume runs :class:`~dpd_desktop.sweep.runner.SweepRun` on a
:class:`SweepWorker` QThread (trials in child processes, or on a Ray cluster with the Ray bar, gui/sweep_ray.py).
Stop: the worker's sweep stops; a sweep run by another process is asked through sweep.json (``sweep cancel``).
"""
from __future__ import annotations

import math
import threading
import traceback

import pyqtgraph as pg
from PySide6.QtCore import QObject, QTimer, Signal, Slot
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QPushButton, QSplitter, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)

from ..runs.compare import compare_runs
from ..sweep.ray_helper import RayHelperError
from ..sweep.ray_security import RaySecurityError
from ..sweep.runner import SweepRun
from ..sweep.store import SweepStore
from ..sweep.table import COSTS, pareto_front, sweep_table
from . import theme
from .compare import CompareView
from .queue_panel import hidden_dock, read_only_rows
from .runs_jobs import start_job, write_report_job
from .sweep_define import SweepDefineDialog, rows_of
from .sweep_ray import INFO_STYLE, WARNING_STYLE, LiveTrials, RayBar
from .worker import ThreadJob

LIVE_REFRESH_MS = 2000
#: the trial columns before the searched fields: (header, value of a TrialRow)
FIXED = (("#", lambda r: str(r.number)), ("state", lambda r: r.state),
         ("family", lambda r: str(r.fields.get("backbone", "")).upper()),
         ("H", lambda r: str(r.fields.get("hidden_size", ""))),
         ("lr", lambda r: _g(r.fields.get("lr"))), ("frame", lambda r: str(r.fields.get("frame_length", ""))),
         ("seed", lambda r: str(r.fields.get("seed", ""))),
         ("group", lambda r: "" if r.group is None else str(r.group)))
_FIXED_KEYS = ("backbone", "hidden_size", "lr", "frame_length", "seed")
#: the metric columns after them: (header, TrialRow.metric name)
METRIC_COLUMNS = (("val NMSE [dB]", "val_nmse"), ("val ACLR [dBc]", "val_aclr_avg"),
                  ("test NMSE [dB]", "test_nmse"), ("test ACLR [dBc]", "test_aclr_avg"),
                  ("params", "n_params"), ("MACs/sample", "macs_per_sample"))
#: the Pareto plots: (title, metric name per split)
PLOTS = (("NMSE [dB]", {"val": "val_nmse", "test": "test_nmse"}),
         ("ACLR [dBc]", {"val": "val_aclr_avg", "test": "test_aclr_avg"}))


def _g(v) -> str:
    return "" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))


def _metric_text(name: str, v) -> str:
    if v is None:
        return ""
    return f"{int(v):,}" if name in ("n_params", "macs_per_sample") else f"{v:.2f}"


class CostAxis(pg.AxisItem):
    """The logarithmic cost axis, labelled at 1, 2 and 5 × 10^k only (pyqtgraph labels every minor tick of a short
    log range, and "9·10", "10²" then overlap)."""

    def tickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph name)
        if not self.logMode:
            return super().tickStrings(values, scale, spacing)
        out = []
        for v in values:
            x = 10.0 ** v
            mant = x / 10.0 ** math.floor(math.log10(x) + 1e-9)
            out.append(f"{x:,.0f}" if any(abs(mant - m) < 1e-3 for m in (1, 2, 5)) and x >= 1 else
                       f"{x:g}" if any(abs(mant - m) < 1e-3 for m in (1, 2, 5)) else "")
        return out


class SweepWorker(ThreadJob):
    """Runs one sweep (:class:`SweepRun`) on its own QThread; ``changed(SweepInfo)`` after each sweep.json change,
    ``event(dict)`` for each event of a Ray helper, ``refused(str)`` when the cluster was refused (security policy),
    ``cluster_failed(str)`` when the helper could not run the sweep, ``failed(str)``, ``done()`` last.
    ``ray_address``: recorded in sweep.json before the run (None: this machine). A job of the JobRegistry."""

    name = "sweep"
    THREAD_NAME = "dpd-sweep"
    changed = Signal(object)
    event = Signal(object)
    refused = Signal(str)
    cluster_failed = Signal(str)
    failed = Signal(str)
    done = Signal()

    def __init__(self, workspace, sweep_id: str, executor=None, parent: QObject | None = None,
                 ray_address: str | None = None):
        super().__init__(parent)
        self.workspace, self.sweep_id, self.executor = workspace, sweep_id, executor
        self.ray_address = ray_address
        self.stop = threading.Event()

    def request_stop(self) -> None:
        self.stop.set()

    @Slot()
    def run(self) -> None:
        try:
            SweepStore(self.workspace.root).set_ray(self.sweep_id, self.ray_address)
            SweepRun(self.workspace, self.sweep_id, executor=self.executor, stop=self.stop,
                     on_change=self.changed.emit).run()
        except RaySecurityError as exc:  # nothing was sent to the cluster
            self.refused.emit(str(exc))
        except RayHelperError as exc:
            self.cluster_failed.emit(str(exc))
        except Exception as exc:  # noqa: BLE001 - shown in the view
            self.failed.emit(str(exc) if isinstance(exc, ValueError) else f"{exc}\n{traceback.format_exc(limit=3)}")
        finally:
            self._end()


class SweepView(QWidget):
    """The view (see the module docstring). Signals: ``tableLoaded(SweepTable | None)``, ``compareOpened(view)``,
    ``reportWritten(path or exception)``."""

    tableLoaded = Signal(object)
    compareOpened = Signal(object)
    reportWritten = Signal(object)

    def __init__(self, window, parent=None):
        super().__init__(parent)
        self.window_ = window
        self.table_data = None
        self.worker: SweepWorker | None = None
        self.compare_views: list = []
        self._loading = False
        self._loading_for: str | None = None  # the sweep whose read is in flight (None: the newest)
        self._again: str | bool = False  # a read asked for while one is in flight: its sweep id, or True
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        bar = QHBoxLayout()
        self.sweep_combo = QComboBox()
        self.sweep_combo.setMinimumContentsLength(28)
        self.sweep_combo.setToolTip("The sweeps of the workspace (dpd-desktop sweep list)")
        self.refresh_button = QPushButton("Refresh")
        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("Stop the sweep: running trials end cancelled after their current batch")
        self.new_button = QPushButton("New sweep…")
        self.new_button.setToolTip("Define a sweep: the search space as a table (parameter, values or range) over "
                                   "the Train form's settings; create and run it here")
        self.resume_button = QPushButton("Resume")
        self.resume_button.setToolTip("Run the trials that did not finish (each a queue entry, in its own process)")
        self.status = QLabel("")
        bar.addWidget(QLabel("Sweep"))
        bar.addWidget(self.sweep_combo, 1)
        for b in (self.refresh_button, self.new_button, self.stop_button, self.resume_button):
            bar.addWidget(b)
        bar.addWidget(self.status, 2)
        lay.addLayout(bar)
        self.ray_bar = RayBar()
        lay.addWidget(self.ray_bar)
        self.live = LiveTrials()
        self._ray_shown_for: str | None = None

        split = QSplitter()
        self.table = QTableWidget(0, 0)
        read_only_rows(self.table)
        split.addWidget(self.table)
        plots = QWidget()
        pl = QVBoxLayout(plots)
        pl.setContentsMargins(0, 0, 0, 0)
        axes = QHBoxLayout()
        self.cost_combo = QComboBox()
        for key, label in COSTS:
            self.cost_combo.addItem(label, key)
        self.split_combo = QComboBox()
        self.split_combo.addItem("validation", "val")
        self.split_combo.addItem("test", "test")
        axes.addWidget(QLabel("Pareto: against"))
        axes.addWidget(self.cost_combo)
        axes.addWidget(QLabel("on"))
        axes.addWidget(self.split_combo)
        axes.addStretch(1)
        pl.addLayout(axes)
        row = QHBoxLayout()
        self.plots = []
        for title, _ in PLOTS:
            w = pg.PlotWidget(axisItems={"bottom": CostAxis("bottom")})
            w.setMinimumSize(240, 200)
            w.showGrid(x=True, y=True, alpha=0.25)
            w.setLogMode(x=True, y=False)
            w.setLabel("left", title)
            w.setTitle(f"{title} vs cost", size="9pt")
            w.getViewBox().setDefaultPadding(0.08)  # the front's labels stay inside the plot
            row.addWidget(w)
            self.plots.append(w)
        pl.addLayout(row, 1)
        key = QLabel("<span style='color:#1f77b4'>●</span> trial &nbsp; <span style='color:#d62728'>○—</span> Pareto "
                     "front (#trial: no other trial is both cheaper and better) &nbsp; "
                     "<span style='color:#ff9f1c'>★</span> best trial")
        key.setWordWrap(True)
        pl.addWidget(key)
        split.addWidget(plots)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        split.setSizes([820, 680])
        self.splitter = split
        lay.addWidget(split, 1)

        actions = QHBoxLayout()
        self.best_label = QLabel("")
        self.open_button = QPushButton("Open best")
        self.open_button.setToolTip("Show the best trial's run in the window (from its folder)")
        self.compare_button = QPushButton("Compare best…")
        self.compare_button.setToolTip("Compare the selected trials, or the best with the rest of the Pareto front")
        self.report_button = QPushButton("Report best…")
        self.report_button.setToolTip("An HTML report of the best trial's run (or of the selected trials)")
        actions.addWidget(self.best_label, 1)
        for b in (self.open_button, self.compare_button, self.report_button):
            actions.addWidget(b)
        lay.addLayout(actions)

        self.timer = QTimer(self)
        self.timer.setInterval(LIVE_REFRESH_MS)
        self.timer.timeout.connect(self._tick)
        self.refresh_button.clicked.connect(lambda: self.refresh())
        self.sweep_combo.activated.connect(lambda _: self.refresh(self.current_id()))  # the choice, by id
        self.cost_combo.currentIndexChanged.connect(lambda _: self._draw_pareto())
        self.split_combo.currentIndexChanged.connect(lambda _: self._draw_pareto())
        self.stop_button.clicked.connect(self.stop_sweep)
        self.resume_button.clicked.connect(lambda: self.resume_sweep())
        self.new_button.clicked.connect(lambda: self.define_sweep())
        self.define_dialog: SweepDefineDialog | None = None
        self.open_button.clicked.connect(self.open_best)
        self.compare_button.clicked.connect(self.compare_best)
        self.report_button.clicked.connect(lambda: self.report_best())
        self._update_buttons()

    # ---------------------------------------------------------------- reading
    def current_id(self) -> str | None:
        return self.sweep_combo.currentData() if self.sweep_combo.count() else None

    def refresh(self, sweep_id: str | None = None) -> None:
        """Read the sweep (``sweep_id``, else the chosen one, else the newest) on a pool job."""
        ws = self.window_.workspace
        if ws is None:
            return
        if self._loading:  # read again when this read is in (it is then dropped): no change or choice is lost;
            # a plain refresh (the live timer's) keeps the sweep asked for before, else the one being read, so a
            # sweep chosen while another's read is in flight is never dropped for the combo's stale choice
            held = self._again if isinstance(self._again, str) else None
            self._again = sweep_id or held or self._loading_for or True
            return
        self._loading = True
        self._loading_for = sweep_id or self.current_id()
        start_job(self.window_, "sweep table", sweep_table, ws, self._loading_for, done=self._loaded,
                  failed=self._load_failed)

    def _load_failed(self, exc, tb) -> None:
        self._loading = False
        self.status.setText(f"cannot read the sweep: {exc}")
        if self._again:
            again, self._again = self._again, False
            self.refresh(again if isinstance(again, str) else None)

    def _tick(self) -> None:
        if self.isVisible():
            self.refresh()

    def _loaded(self, data) -> None:
        self._loading = False
        if self._again:  # superseded by a later request: read again, show that one
            again, self._again = self._again, False
            self.refresh(again if isinstance(again, str) else None)
            return
        self.table_data = data
        self.sweep_combo.blockSignals(True)
        self.sweep_combo.clear()
        if data is not None:
            for sid in reversed(data.sweep_ids):
                self.sweep_combo.addItem(sid, sid)
            self.sweep_combo.setCurrentIndex(self.sweep_combo.findData(data.info.id))
        self.sweep_combo.blockSignals(False)
        if data is not None and self.worker is None and self._ray_shown_for != data.info.id:
            self._ray_shown_for = data.info.id  # where the shown sweep last ran: its resume goes there again
            recorded = (data.info.doc.get("ray") or {}).get("address")
            self.ray_bar.enabled_box.setChecked(bool(recorded) and self.ray_bar.enabled_box.isEnabled())
            if recorded:
                self.ray_bar.address_edit.setText(recorded)
        self._fill_table()
        self._draw_pareto()
        self._update_buttons()
        live = data is not None and (data.info.state == "running" or self.worker is not None)
        if live and not self.timer.isActive():
            self.timer.start()
        elif not live:
            self.timer.stop()
        self.tableLoaded.emit(data)

    # ---------------------------------------------------------------- table
    def columns(self) -> list[str]:
        data = self.table_data
        extra = [p.key for p in data.info.spec.space if p.key not in _FIXED_KEYS] if data else []
        return [h for h, _ in FIXED] + extra + [h for h, _ in METRIC_COLUMNS] + ["run"]

    def cell_texts(self) -> list[list[str]]:
        """The table's cells as shown (tests)."""
        return [[self.table.item(r, c).text() for c in range(self.table.columnCount())]
                for r in range(self.table.rowCount())]

    def _fill_table(self) -> None:
        data = self.table_data
        cols = self.columns()
        self.table.clear()
        self.table.setColumnCount(len(cols))
        self.table.setHorizontalHeaderLabels(cols)
        rows = data.rows if data else ()
        self.table.setRowCount(len(rows))
        extra = [p.key for p in data.info.spec.space if p.key not in _FIXED_KEYS] if data else []
        best = data.best() if data else None
        groups: dict[int, list[int]] = {}
        for r in rows:
            if r.group is not None:
                groups.setdefault(r.group, []).append(r.number)
        group_col = [h for h, _ in FIXED].index("group")
        for i, r in enumerate(rows):
            cells = [f(r) for _, f in FIXED] + [_g(r.fields.get(k)) for k in extra]
            cells[1] = self.live.state_text(r.number, r.state)
            cells += [_metric_text(m, r.metric(m) if r.metric(m) is not None else
                                   self.live.metric(r.number, m) if r.state == "running" else None)
                      for _, m in METRIC_COLUMNS] + [r.run_id or ""]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if r.message:
                    item.setToolTip(r.message)
                elif c == group_col:
                    item.setToolTip(f"trials {', '.join(map(str, groups[r.group]))} train together in one process"
                                    if r.group is not None else "not in a group: trains alone")
                if best is not None and r.number == best.number:
                    f = item.font()
                    f.setBold(True)
                    item.setFont(f)
                self.table.setItem(i, c, item)
        if data is None:
            self.status.setText("no sweep in this workspace (dpd-desktop sweep SPEC.toml)")
        else:
            counts = ", ".join(f"{n} {k}" for k, n in sorted(_counts(rows).items()))
            spec = data.info.spec
            self.status.setText(f"{spec.search} · {data.info.state} · {len(rows)} trial{'' if len(rows) == 1 else 's'} ({counts})")
            self.best_label.setText(
                f"Best: trial {best.number}, {spec.metric} {best.value:.2f} ({best.run_id})" if best else
                "Best: none yet")

    # ---------------------------------------------------------------- Pareto
    def pareto_points(self, plot: int) -> tuple[list, list]:
        """(all points, front points) of Pareto plot ``plot`` as (trial number, cost, metric), front in cost
        order."""
        data = self.table_data
        if data is None:
            return [], []
        metric = PLOTS[plot][1][self.split_combo.currentData()]
        pts = data.points(self.cost_combo.currentData(), metric)
        done = data.points(self.cost_combo.currentData(), metric, succeeded_only=True)  # the front: results only
        return pts, [done[i] for i in pareto_front([(x, y) for _, x, y in done])]

    def _draw_pareto(self) -> None:
        data = self.table_data
        best = data.best() if data else None
        point_color = theme.SERIES_COLORS["val_nmse"]
        for k, w in enumerate(self.plots):
            w.clear()
            w.setLabel("bottom", self.cost_combo.currentText())
            pts, front = self.pareto_points(k)
            if not pts:
                continue
            # PlotDataItems only: they follow the logarithmic x axis (a bare ScatterPlotItem would not)
            w.plot([x for _, x, _ in pts], [y for _, _, y in pts], pen=None, symbol="o", symbolSize=8,
                   symbolBrush=pg.mkBrush(point_color), symbolPen=pg.mkPen(None), name="trials")
            w.plot([x for _, x, _ in front], [y for _, _, y in front], pen=pg.mkPen("#d62728", width=2),
                   symbol="o", symbolSize=12, symbolBrush=None, symbolPen=pg.mkPen("#d62728", width=2),
                   name="Pareto front")
            if best is not None:
                b = [(x, y) for n, x, y in pts if n == best.number]
                if b:
                    w.plot([b[0][0]], [b[0][1]], pen=None, symbol="star", symbolSize=16,
                           symbolBrush=pg.mkBrush("#ff9f1c"), symbolPen=pg.mkPen("k"), name="best trial")
            for n, x, y in front:
                label = pg.TextItem(f"#{n}", anchor=(0, 1), color="#d62728")
                label.setPos(math.log10(x) if x > 0 else 0.0, y)  # the x axis is logarithmic: items in log10
                w.addItem(label)

    # ---------------------------------------------------------------- actions
    def _update_buttons(self) -> None:
        data = self.table_data
        best = data.best() if data else None
        running_here = self.worker is not None
        state = data.info.state if data else None
        self.stop_button.setEnabled(running_here or state == "running")
        self.new_button.setEnabled(not running_here and self.window_.workspace is not None)
        self.resume_button.setEnabled(not running_here and state in ("cancelled", "interrupted", "failed",
                                                                      "queued"))
        self.open_button.setEnabled(best is not None)
        self.report_button.setEnabled(best is not None)
        self.compare_button.setEnabled(best is not None and sum(r.run is not None for r in data.rows) >= 2)

    def selected_rows(self) -> list:
        if self.table_data is None:
            return []
        idx = sorted({i.row() for i in self.table.selectionModel().selectedRows()})
        return [self.table_data.rows[i] for i in idx if i < len(self.table_data.rows)]

    def compare_folders(self) -> list[str]:
        """The selected trials' runs (two or more), else the best trial's and the rest of the NMSE front's."""
        sel = [r.run.folder for r in self.selected_rows() if r.run is not None]
        if len(sel) >= 2:
            return sel
        data = self.table_data
        best = data.best() if data else None
        by_number = {r.number: r for r in data.rows} if data else {}
        out = [best.run.folder] if best is not None else []
        for n, _, _ in self.pareto_points(0)[1]:
            r = by_number.get(n)
            if r is not None and r.run is not None and r.run.folder not in out:
                out.append(r.run.folder)
        if len(out) < 2:  # a front of one: the next best trials
            ranked = sorted((r for r in data.rows if r.run is not None and r.value is not None),
                            key=lambda r: r.value) if data else []
            out += [r.run.folder for r in ranked if r.run.folder not in out][:2 - len(out)]
        return out

    def stop_sweep(self) -> None:
        if self.worker is not None:
            self.worker.request_stop()
            self.status.setText("stopping: the running trials stop after their current batch…")
            return
        sid = self.current_id()
        if sid:
            start_job(self.window_, "sweep cancel", SweepStore(self.window_.workspace.root).request_cancel, sid,
                      done=lambda info: self.refresh(), failed=self._load_failed)

    def define_sweep(self) -> SweepDefineDialog:
        """Open the "New sweep…" dialog (gui/sweep_define.py), its table filled from the shown sweep's space (or two
        example rows); a sweep it creates is shown and run here (:meth:`run_new_sweep`)."""
        data = self.table_data
        dialog = SweepDefineDialog(self.window_, rows=rows_of(data.info.spec) if data is not None else None,
                                   parent=self)
        if data is not None:
            dialog.search_combo.setCurrentIndex(max(0, dialog.search_combo.findData(data.info.spec.search)))
            if data.info.spec.trials:
                dialog.trials_spin.setValue(int(data.info.spec.trials))
        dialog.created.connect(self.run_new_sweep)
        self.define_dialog = dialog
        dialog.open()
        return dialog

    def run_new_sweep(self, info, executor=None) -> SweepWorker | None:
        """Show the sweep just created and run it (as Resume does)."""
        self.refresh(info.id)
        return self.resume_sweep(executor=executor, sweep_id=info.id)

    def resume_sweep(self, executor=None, sweep_id: str | None = None) -> SweepWorker | None:
        """Run the unfinished trials of the shown sweep (or of ``sweep_id``) on a :class:`SweepWorker`."""
        sid = sweep_id or self.current_id()
        if sid is None or self.worker is not None:
            return None
        worker = SweepWorker(self.window_.workspace, sid, executor=executor)
        if executor is None:  # the Ray bar's choice: the helper process, or None (the workspace's queue)
            worker.executor = self.ray_bar.executor(self.window_.workspace, worker.event.emit)
            worker.ray_address = self.ray_bar.address()
        self.live.clear()
        self.ray_bar.show_message("")
        self.ray_bar._sync()
        # bound slots of this view, not lambdas: PySide6 calls a lambda on the emitting (worker) thread
        worker.changed.connect(self._sweep_changed)
        worker.event.connect(self._ray_event)
        worker.refused.connect(self._ray_refused)
        worker.cluster_failed.connect(self._ray_failed)
        worker.failed.connect(self._sweep_failed)
        worker.done.connect(self._worker_done)
        self.worker = worker
        self.window_.jobs.add(worker)
        worker.start()
        self._update_buttons()
        self.timer.start()
        return worker

    @Slot(object)
    def _sweep_changed(self, info) -> None:
        self.refresh()

    @Slot(str)
    def _sweep_failed(self, text: str) -> None:
        self.status.setText(f"the sweep stopped: {text}")

    @Slot(object)
    def _ray_event(self, ev) -> None:
        """An event of the Ray helper (sweep/ray_helper.py): live rows, warnings, the cluster started."""
        if self.live.add(ev):
            self._fill_table()
        elif ev.get("event") == "warning":
            self.ray_bar.show_message(str(ev.get("message")), WARNING_STYLE)
        elif ev.get("event") == "cluster":
            self.ray_bar.show_message(f"Local Ray cluster at {ev.get('address')} (dashboard "
                                      f"{ev.get('dashboard_url')}, token authentication), for this sweep",
                                      INFO_STYLE)

    @Slot(str)
    def _ray_refused(self, text: str) -> None:
        self.ray_bar.show_message(f"The Ray cluster was refused; nothing was sent to it. {text}")
        self.status.setText("the sweep was not sent to the cluster (see the message below)")

    @Slot(str)
    def _ray_failed(self, text: str) -> None:
        self.ray_bar.show_message(text)
        self.status.setText("the sweep stopped: the Ray helper failed (see the message below)")

    def _worker_done(self) -> None:
        worker, self.worker = self.worker, None
        if worker is not None:
            worker.wait(5000)
            self.window_.jobs.discard(worker)
        self._loading = False
        self.refresh()

    def open_best(self) -> None:
        best = self.table_data.best() if self.table_data else None
        browser = getattr(self.window_, "runs_browser", None)
        if best is not None and browser is not None:
            browser.open_run(best.run)

    def compare_best(self) -> None:
        folders = self.compare_folders()
        if len(folders) < 2:
            return
        start_job(self.window_, "compare runs", compare_runs, folders, done=self._show_compare,
                  failed=lambda exc, tb: self.status.setText(f"the runs cannot be compared: {exc}"))

    def _show_compare(self, cmp) -> None:
        view = CompareView(cmp, self.window_, parent=self.window_)
        self.compare_views.append(view)
        view.show()
        self.compareOpened.emit(view)

    def report_best(self, path: str | None = None) -> None:
        sel = [r.run.folder for r in self.selected_rows() if r.run is not None]
        best = self.table_data.best() if self.table_data else None
        folders = sel or ([best.run.folder] if best is not None else [])
        if folders:
            write_report_job(self.window_, folders, path, self.reportWritten.emit)


def _counts(rows) -> dict:
    out: dict = {}
    for r in rows:
        out[r.state] = out.get(r.state, 0) + 1
    return out


def install_sweep_view(window) -> SweepView:
    """Add the Sweep view to ``window`` as a bottom dock tabbed with the runs browser, hidden until Run ▸ Sweeps
    (Ctrl+Shift+W); it reads the newest sweep when shown."""
    view = SweepView(window)
    dock = hidden_dock(window, "Sweeps", "sweeps_dock", view, tab_with=getattr(window, "runs_dock", None),
                       toggle_text="Sweeps", shortcut="Ctrl+Shift+W",
                       tooltip="The sweeps of the workspace: trials, Pareto plot, stop/resume (Ctrl+Shift+W)",
                       on_shown=view.refresh)
    window.sweeps_dock = dock
    window.session.add_busy_check(lambda: "a sweep" if view.worker is not None else None)
    return view
