"""The Loop view: the instrument loop (dpd_desktop/loop) from the window — instruments, PA, strategy, targets and
the power limit; Start / Stop; the iterations live (a table, and per iteration ACLR/EVM/NMSE and the output power
against its target, with the PSD of the last capture); the loop's HTML report and a capture → dataset in one click.

The loop runs on a :class:`LoopWorker` QThread (opening the instruments too: a VISA connection may block), never on
the GUI thread; its events arrive as Qt signals (latest value wins: each iteration redraws once). Stop asks the
loop to stop: it mutes the generator at its next step, before anything else. The report and the dataset are written
on pool jobs (gui/runs_jobs.py). A bottom dock tabbed with the runs browser, shown by Run ▸ Loop (Ctrl+Shift+L).
"""
from __future__ import annotations

import dataclasses
import math
import threading
import traceback
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtWidgets import (QComboBox, QDoubleSpinBox, QFileDialog, QFormLayout, QGridLayout, QHBoxLayout, QLabel,
                               QLineEdit, QPushButton, QSpinBox, QSplitter, QTableWidget, QTableWidgetItem, QVBoxLayout,
                               QWidget)

from ..config import ConfigError
from ..instruments.connect import open_bench, parse_instrument
from ..loop import events as LE
from ..loop.config import LoopConfig
from . import theme
from ..runs.outputs import suggested_output
from .queue_panel import hidden_dock, read_only_rows
from .runs_jobs import start_job
from .worker import ThreadJob

#: the iteration table: (header, IterationEnded.row() key, format)
COLUMNS = (("#", "index", "{:d}"), ("kind", "kind", "{}"), ("ACLR [dBc]", "ACLR_AVG", "{:.2f}"),
           ("EVM [dB]", "EVM", "{:.2f}"), ("NMSE [dB]", "NMSE", "{:.2f}"), ("out [dBm]", "output_dbm", "{:.2f}"),
           ("target [dBm]", "target_output_dbm", "{:.2f}"), ("peak in [dBm]", "input_peak_dbm", "{:.2f}"),
           ("delay [samples]", "delay_samples", "{:.4f}"), ("run", "run_id", "{}"))
#: the linearity plot's curves: (label, row key, color)
CURVES = (("ACLR [dBc]", "ACLR_AVG", theme.SERIES_COLORS["val_aclr"]),
          ("EVM [dB]", "EVM", theme.SERIES_COLORS["val_evm"]),
          ("NMSE [dB]", "NMSE", theme.SERIES_COLORS["val_nmse"]))
INSTRUMENTS = (("virtual (virtual PA)", "virtual"), ("simulated SCPI (pyvisa-sim)", "sim"), ("VISA resource…", "visa"))


class LoopWorker(ThreadJob):
    """Opens the bench and runs one loop on its own QThread. Signals carry the loop's events: ``started``
    (LoopStarted), ``iteration`` (IterationEnded), ``log`` (str), ``ended`` (LoopEnded), ``failed`` (str: the bench
    could not be opened, or an error outside the loop), ``done`` last. A job of the window's JobRegistry."""

    name = "instrument loop"
    THREAD_NAME = "dpd-loop"
    started = Signal(object)
    iteration = Signal(object)
    log = Signal(str)
    ended = Signal(object)
    failed = Signal(str)
    done = Signal()

    def __init__(self, workspace, config: LoopConfig, generator: str, analyzer: str, *, virtual_pa=None,
                 pa_run=None, bench_factory=None, parent: QObject | None = None):
        super().__init__(parent)
        self.workspace, self.config = workspace, config
        self.generator, self.analyzer = generator, analyzer
        self.virtual_pa, self.pa_run = virtual_pa, pa_run
        self.bench_factory = bench_factory  # tests pass one (a Bench with fault plans)
        self.runner = None
        self._stop = threading.Event()
        self.result = None

    def request_stop(self) -> None:
        self._stop.set()
        runner = self.runner
        if runner is not None:
            runner.request_stop()

    def _bench(self, signal):
        if self.bench_factory is not None:
            return self.bench_factory()
        gen, ana = parse_instrument(self.generator, "generator"), parse_instrument(self.analyzer, "analyzer")
        sim_yaml = share = None
        if "sim" in (gen.kind, ana.kind):
            from ..instruments.sim import prepare_sim

            sim_yaml, share = prepare_sim(Path(self.workspace.root) / "loops" / "sim", signal.x,
                                          self.config.input_level_dbm)
            if ana.kind == "sim":  # the simulated analyzer answers one period
                self.config = dataclasses.replace(self.config, averages=1)
        return open_bench(gen, ana, virtual_pa=self.virtual_pa if gen.kind == "virtual" else None,
                          pa_run=self.pa_run, workspace=self.workspace, sim_yaml=sim_yaml, share_dir=share,
                          timeout_s=self.config.timeout_s)

    def _observe(self, ev) -> None:
        if isinstance(ev, LE.LoopStarted):
            self.started.emit(ev)
        elif isinstance(ev, LE.IterationEnded):
            self.iteration.emit(ev)
        elif isinstance(ev, LE.LoopLog):
            self.log.emit(ev.text)
        elif isinstance(ev, LE.LoopEnded):
            self.ended.emit(ev)

    @Slot()
    def run(self) -> None:
        from ..loop.engine import LoopRunner
        from ..loop.signal import load_signal

        bench = None
        try:
            signal = load_signal(self.config.signal, self.config.signal_samples, self.config.signal_seed)
            bench = self._bench(signal)
            self.runner = LoopRunner(self.config, bench, self.workspace, observers=[self._observe], signal=signal)
            if self._stop.is_set():
                self.runner.request_stop()
            self.result = self.runner.run()
        except Exception as exc:  # noqa: BLE001 - shown in the view, in one line
            self.failed.emit(" ".join(str(exc).split()) if isinstance(exc, (ValueError, OSError, RuntimeError))
                             else f"{exc}\n{traceback.format_exc(limit=3)}")
        finally:
            if bench is not None:
                bench.close()
            self._end()


class LoopView(QWidget):
    """The view (module docstring). Signals: ``loopEnded(LoopEnded | str)``, ``reportWritten(path | exception)``,
    ``datasetWritten(result | exception)``."""

    loopEnded = Signal(object)
    reportWritten = Signal(object)
    datasetWritten = Signal(object)

    def __init__(self, window, parent=None):
        super().__init__(parent)
        self.window_ = window
        self.worker: LoopWorker | None = None
        self.rows: list[dict] = []
        self.loop_folder: str | None = None
        self.last_psd = None
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(self._build_settings())
        bar = QHBoxLayout()
        self.start_button = QPushButton("Start loop")
        self.start_button.setToolTip("Play, capture, align and update the DPD for the iterations set, or until the "
                                     "targets are met")
        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("Stop the loop: the generator is muted at its next step, before anything else")
        self.report_button = QPushButton("Report…")
        self.report_button.setToolTip("The loop as one HTML file")
        self.dataset_button = QPushButton("Capture → dataset…")
        self.dataset_button.setToolTip("Make a dataset (split CSV + spec.json) of the selected iteration's capture")
        self.status = QLabel("")
        self.status.setWordWrap(True)
        for b in (self.start_button, self.stop_button, self.report_button, self.dataset_button):
            bar.addWidget(b)
        bar.addWidget(self.status, 1)
        lay.addLayout(bar)

        split = QSplitter()
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels([c[0] for c in COLUMNS])
        read_only_rows(self.table, multi=False)
        split.addWidget(self.table)
        plots = QWidget()
        pl = QHBoxLayout(plots)
        pl.setContentsMargins(0, 0, 0, 0)
        self.lin_plot = self._plot("Linearity per iteration", "dB · dBc")
        self.pow_plot = self._plot("Output power per iteration", "dBm")
        self.psd_plot = self._plot("PSD of the last capture", "dB/Hz", xlabel="frequency [MHz]")
        self.curves = {key: self.lin_plot.plot([], [], pen=pg.mkPen(color, width=2), symbol="o", symbolSize=6,
                                               symbolBrush=color, name=label) for label, key, color in CURVES}
        self.pow_curve = self.pow_plot.plot([], [], pen=pg.mkPen(theme.SIGNAL_COLORS["yhat"], width=2), symbol="o",
                                            symbolSize=6, symbolBrush=theme.SIGNAL_COLORS["yhat"], name="output")
        self.target_curve = self.pow_plot.plot([], [], pen=pg.mkPen(theme.SIGNAL_COLORS["target"], width=1,
                                                                     style=pg.QtCore.Qt.PenStyle.DashLine),
                                               name="target")
        self.psd_x = self.psd_plot.plot([], [], pen=pg.mkPen(theme.SIGNAL_COLORS["x"], width=1), name="x")
        self.psd_y = self.psd_plot.plot([], [], pen=pg.mkPen(theme.SIGNAL_COLORS["yhat"], width=1),
                                        name="output (normalised)")
        for p in (self.lin_plot, self.pow_plot, self.psd_plot):
            pl.addWidget(p)
        split.addWidget(plots)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        split.setSizes([620, 1000])
        self.splitter = split
        lay.addWidget(split, 1)

        self.start_button.clicked.connect(lambda: self.start())
        self.stop_button.clicked.connect(self.stop)
        self.report_button.clicked.connect(lambda: self.write_report())
        self.dataset_button.clicked.connect(lambda: self.make_dataset())
        self.table.itemSelectionChanged.connect(self._update_buttons)
        self._update_buttons()

    # ---------------------------------------------------------------- building
    def _plot(self, title: str, ylabel: str, xlabel: str = "iteration") -> pg.PlotWidget:
        w = pg.PlotWidget()
        w.setMinimumSize(220, 180)
        w.showGrid(x=True, y=True, alpha=0.25)
        w.setTitle(title, size="9pt")
        w.setLabel("left", ylabel)
        w.setLabel("bottom", xlabel)
        w.addLegend(offset=(-4, 4), labelTextSize="8pt")
        if xlabel == "iteration":
            w.getAxis("bottom").setTickSpacing(1, 1)  # whole iterations only
        return w

    def _build_settings(self) -> QGridLayout:
        d = LoopConfig()
        g = QGridLayout()
        self.generator_combo, self.generator_res = self._instrument_row("rs-smw")
        self.analyzer_combo, self.analyzer_res = self._instrument_row("rs-fsw")
        self.pa_combo = QComboBox()
        self.pa_combo.addItem("memory-polynomial PA", None)
        self.pa_combo.setToolTip("The virtual bench's PA: the memory-polynomial model, or a trained PA run")
        self.delay = self._dspin(-1000, 1000, 3.37, 3, "path delay of the virtual bench, samples")
        self.snr = self._dspin(0, 200, 40.0, 1, "SNR per capture sample over the capture bandwidth, dB")
        self.strategy = QComboBox()
        self.strategy.addItem("ILC (per sample)", "ilc")
        self.strategy.addItem("ILA (MP indirect learning)", "ila")
        self.iterations = QSpinBox()
        self.iterations.setRange(1, 1000)
        self.iterations.setValue(d.iterations)
        self.mu = self._dspin(0.01, 2.0, d.mu, 2, "ILC learning gain μ")
        self.target_aclr = self._dspin(-200, 0, -50.0, 1, "stop when ACLR ≤ this, dBc (−200: no target)")
        self.target_out = self._dspin(-150, 90, 20.0, 2, "PA output power to linearise at, dBm")
        self.input_level = self._dspin(-150, 60, d.input_level_dbm, 2, "RMS level of the undistorted waveform, dBm")
        self.power_limit = self._dspin(-150, 60, 6.0, 2, "the generator's peak envelope power never exceeds this, "
                                       "dBm (a waveform whose peak would is refused before it is played)")
        self.averages = QSpinBox()
        self.averages.setRange(1, 4096)
        self.averages.setValue(d.averages)
        self.averages.setToolTip("whole periods captured and averaged")
        self.fit = QComboBox()
        for label, v in (("no DPD fit", None), ("fit GMP (least squares)", "gmp"), ("fit MP (least squares)", "mp"),
                         ("fit GRU (training)", "gru")):
            self.fit.addItem(label, v)
        cells = [("Generator", self.generator_combo), ("", self.generator_res), ("Analyzer", self.analyzer_combo),
                 ("", self.analyzer_res), ("PA", self.pa_combo), ("delay [samples]", self.delay),
                 ("SNR [dB]", self.snr), ("Strategy", self.strategy), ("iterations", self.iterations), ("μ", self.mu),
                 ("target ACLR [dBc]", self.target_aclr), ("target out [dBm]", self.target_out),
                 ("input [dBm]", self.input_level), ("power limit [dBm]", self.power_limit),
                 ("averages", self.averages), ("after the loop", self.fit)]
        for i, (label, w) in enumerate(cells):
            r, c = divmod(i, 8)
            box = QFormLayout()
            box.setContentsMargins(0, 0, 0, 0)
            box.addRow(label, w)
            g.addLayout(box, r, c)
        return g

    def _instrument_row(self, profile: str):
        combo = QComboBox()
        for label, v in INSTRUMENTS:
            combo.addItem(label, v)
        res = QLineEdit()
        res.setPlaceholderText(f"TCPIP0::host::hislip0::INSTR;profile={profile}")
        res.setEnabled(False)
        combo.currentIndexChanged.connect(lambda _: res.setEnabled(combo.currentData() == "visa"))
        combo.currentIndexChanged.connect(lambda _: self._sync_instruments(combo))
        return combo, res

    def _sync_instruments(self, changed: QComboBox) -> None:
        """Virtual goes with virtual (the virtual PA sits between them)."""
        other = self.analyzer_combo if changed is self.generator_combo else self.generator_combo
        if (changed.currentData() == "virtual") != (other.currentData() == "virtual"):
            other.setCurrentIndex(changed.currentIndex() if changed.currentData() == "virtual" else
                                  max(other.findData("sim"), 0) if other.currentData() == "virtual" else
                                  other.currentIndex())
        virtual = self.generator_combo.currentData() == "virtual"
        for w in (self.pa_combo, self.delay, self.snr):
            w.setEnabled(virtual)

    @staticmethod
    def _dspin(lo, hi, value, decimals, tip) -> QDoubleSpinBox:
        s = QDoubleSpinBox()
        s.setRange(lo, hi)
        s.setDecimals(decimals)
        s.setValue(value)
        s.setToolTip(tip)
        return s

    # ---------------------------------------------------------------- settings → loop
    def _spec(self, combo: QComboBox, res: QLineEdit) -> str:
        kind = combo.currentData()
        return f"visa:{res.text().strip()}" if kind == "visa" else kind

    def config(self) -> LoopConfig:
        """The LoopConfig the settings describe (validated; raises ConfigError naming the field)."""
        aclr = self.target_aclr.value()
        return LoopConfig(strategy=self.strategy.currentData(), iterations=self.iterations.value(),
                          mu=self.mu.value(), target_aclr_dbc=None if aclr <= -200 else aclr,
                          target_output_dbm=self.target_out.value(), input_level_dbm=self.input_level.value(),
                          power_limit_dbm=self.power_limit.value(), averages=self.averages.value(),
                          fit=self.fit.currentData()).validate()

    def refresh_pa_runs(self) -> None:
        """Offer the workspace's finished PA runs as the virtual PA (listed on a pool job: the folders are read)."""
        ws = getattr(self.window_, "workspace", None)
        if ws is not None:
            start_job(self.window_, "PA runs for the loop", _succeeded_pa_runs, ws, done=self._fill_pa_runs,
                      failed=lambda exc, tb: None)

    def _fill_pa_runs(self, run_ids: list[str]) -> None:
        keep = self.pa_combo.currentData()
        self.pa_combo.clear()
        self.pa_combo.addItem("memory-polynomial PA", None)
        for run_id in run_ids:
            self.pa_combo.addItem(f"PA run {run_id}", run_id)
        self.pa_combo.setCurrentIndex(max(self.pa_combo.findData(keep), 0))

    def start(self, config: LoopConfig | None = None, bench_factory=None) -> LoopWorker | None:
        """Start a loop (the settings' unless ``config``); None when one runs or the settings are refused (the
        status line says why)."""
        if self.worker is not None:
            return None
        try:
            cfg = config if config is not None else self.config()
        except (ConfigError, ValueError) as exc:
            self.status.setText(f"not started: {exc}")
            return None
        virtual = None
        if self.generator_combo.currentData() == "virtual":
            virtual = {"delay_samples": self.delay.value(), "snr_db": self.snr.value()}
        worker = LoopWorker(self.window_.workspace, cfg, self._spec(self.generator_combo, self.generator_res),
                            self._spec(self.analyzer_combo, self.analyzer_res), virtual_pa=virtual,
                            pa_run=self.pa_combo.currentData(), bench_factory=bench_factory)
        worker.started.connect(self._started)
        worker.iteration.connect(self._iteration)
        worker.log.connect(self._log)
        worker.ended.connect(self._ended)
        worker.failed.connect(self._failed)
        worker.done.connect(self._worker_done)
        self.rows = []
        self.table.setRowCount(0)
        self._draw()
        self.worker = worker
        self.window_.jobs.add(worker)
        worker.start()
        self.status.setText("starting: opening the instruments…")
        self._update_buttons()
        return worker

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.request_stop()
            self.status.setText("stopping: the generator is muted at the loop's next step…")

    # ---------------------------------------------------------------- events (GUI thread)
    @Slot(object)
    def _started(self, ev) -> None:
        self.loop_folder = ev.folder
        ids = ", ".join(f"{v.get('manufacturer')} {v.get('model')}" for v in ev.identities.values())
        self.status.setText(f"loop {ev.loop_id} running · {ids}")
        self._update_buttons()

    @Slot(object)
    def _iteration(self, ev) -> None:
        row = ev.row()
        self.rows.append(row)
        r = self.table.rowCount()
        self.table.insertRow(r)
        for c, (_, key, fmt) in enumerate(COLUMNS):
            v = row.get(key)
            item = QTableWidgetItem(fmt.format(v) if v is not None else "")
            self.table.setItem(r, c, item)
        self.last_psd = ev.psd
        self._draw()
        self.status.setText(f"iteration {ev.index} ({ev.kind}): ACLR {ev.metrics['ACLR_AVG']:.2f} dBc, output "
                            f"{ev.output_dbm:.2f} dBm, delay {ev.delay_samples:.4f} samples")

    @Slot(str)
    def _log(self, text: str) -> None:
        self.window_.statusBar().showMessage(text, 5000)

    @Slot(object)
    def _ended(self, ev) -> None:
        rf = "" if ev.rf_off else " — RF NOT CONFIRMED OFF"
        self.status.setText(f"{ev.state}: {ev.message}{rf}")
        self.loopEnded.emit(ev)

    @Slot(str)
    def _failed(self, text: str) -> None:
        self.status.setText(f"not run: {text.splitlines()[0]}")
        self.loopEnded.emit(text)

    @Slot()
    def _worker_done(self) -> None:
        worker, self.worker = self.worker, None
        if worker is not None:
            worker.wait(5000)
            self.window_.jobs.discard(worker)
        self._update_buttons()
        browser = getattr(self.window_, "runs_browser", None)
        if browser is not None and hasattr(browser, "refresh"):
            browser.refresh()

    def _draw(self) -> None:
        it = np.array([r["index"] for r in self.rows], dtype=float)
        for _, key, _ in CURVES:
            self.curves[key].setData(it, np.array([r.get(key, math.nan) for r in self.rows], dtype=float))
        self.pow_curve.setData(it, np.array([r["output_dbm"] for r in self.rows], dtype=float))
        self.target_curve.setData(it, np.array([r["target_output_dbm"] for r in self.rows], dtype=float))
        psd = self.last_psd or {}
        for curve, key in ((self.psd_x, "x"), (self.psd_y, "output")):
            f, p = psd.get(key, ([], []))
            curve.setData(np.asarray(f), np.asarray(p))
        out = np.asarray(psd.get("output", ([], []))[1], dtype=float)
        if out.size:  # the output's range: the reference's empty stopband (−250 dB/Hz) would squash it
            self.psd_plot.setYRange(float(np.percentile(out, 1)) - 15, float(out.max()) + 5, padding=0)

    def _update_buttons(self) -> None:
        live = self.worker is not None
        self.start_button.setEnabled(not live)
        self.stop_button.setEnabled(live)
        self.report_button.setEnabled(self.loop_folder is not None)
        self.dataset_button.setEnabled(bool(self.rows) and not live)

    # ---------------------------------------------------------------- report, dataset
    def write_report(self, path: str | None = None) -> None:
        if self.loop_folder is None:
            return
        overwrite = path is None  # the save dialog asks before replacing a file
        if path is None:
            start = suggested_output(f"{Path(self.loop_folder).name}-report.html", workspace=self.window_.workspace)
            path, _ = QFileDialog.getSaveFileName(self, "Loop report", str(start), "HTML (*.html)")
            if not path:
                return
        from ..loop.report import write_loop_report

        start_job(self.window_, "loop report", write_loop_report, self.loop_folder, path, overwrite,
                  self.window_.workspace, "",
                  done=self._report_done, failed=lambda exc, tb: self._report_done(exc))

    def _report_done(self, result) -> None:
        self.status.setText(f"report written: {result}" if isinstance(result, Path) else f"report failed: {result}")
        self.reportWritten.emit(result)

    def selected_run(self) -> str | None:
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        r = rows[0].row() if rows else len(self.rows) - 1
        return self.rows[r]["run_id"] if 0 <= r < len(self.rows) else None

    def make_dataset(self, out: str | None = None) -> None:
        run_id = self.selected_run()
        if run_id is None:
            return
        if out is None:
            out = QFileDialog.getExistingDirectory(self, "New dataset folder (empty)")
            if not out:
                return
        from ..loop.dataset import capture_to_dataset

        start_job(self.window_, "capture to dataset", capture_to_dataset,
                  Path(self.window_.workspace.runs_dir) / run_id, out,
                  done=self._dataset_done, failed=lambda exc, tb: self._dataset_done(exc))

    def _dataset_done(self, result) -> None:
        if isinstance(result, Exception):
            self.status.setText(f"dataset not written: {result}")
        else:
            self.status.setText(f"dataset written: {result.folder} ({result.n_used} samples)")
        self.datasetWritten.emit(result)


def _succeeded_pa_runs(workspace) -> list[str]:
    """The ids of the workspace's succeeded PA runs, newest first (a pool thread)."""
    return [r.run_id for r in workspace.list_runs(step="pa") if r.state == "succeeded"]


def install_loop_view(window) -> LoopView:
    """Add the Loop view to ``window`` as a bottom dock tabbed with the runs browser, hidden until Run ▸ Loop
    (Ctrl+Shift+L); a running loop counts as busy when the window closes."""
    view = LoopView(window)
    dock = hidden_dock(window, "Loop", "loop_dock", view, tab_with=getattr(window, "runs_dock", None),
                       toggle_text="Instrument loop", shortcut="Ctrl+Shift+L",
                       tooltip="Close the loop with an amplifier: play, capture, update the DPD (Ctrl+Shift+L)",
                       on_shown=view.refresh_pa_runs)
    window.loop_dock = dock
    window.session.add_busy_check(lambda: "an instrument loop" if view.worker is not None else None)
    return view
