"""Starting, stopping and following the window's training run.

The run state, its texts and the enabled controls live in the session model (:mod:`.session`); the
:class:`RunController` turns the run worker's signals (gui/worker.py: the supervisor trains in a child process) into
session transitions and hands what the events carry to the plot area, the banner and the status bar. After a run
that succeeded its PNGs are written by a process of their own (gui/run_plots.py).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from .. import timing
from ..config import ConfigError, ExperimentConfig
from ..lab.supervisor import Supervisor
from . import history
from .kernel_view import show_run_kernel
from .preload import preload_job
from .run_plots import PlotsProcess
from .session import (POWER_WARNING_DB, cancelled_message, failed_message, finished_message, output_power_change_db,
                      power_caveat)
from .widgets.config_form import BACKBONES
from .widgets.dataset_summary import describe_summary
from .worker import RunWorker


def same_dataset(a: str | None, b: str | None) -> bool:
    """Whether two dataset references (``"demo"`` or paths) name the same data."""
    if a is None or b is None:
        return a is None and b is None or (a or b) == "demo"
    if a == b:
        return True
    if "demo" in (a, b):
        return False
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


def validate_config(cfg: ExperimentConfig) -> ExperimentConfig:
    """``cfg.validate()``; while the PyTorch preload runs, or when the model registry cannot be imported, the
    backbone and the DPD's PA run are checked by hand (the run's child validates the whole config and reports):
    ``validate`` imports the model registry, i.e. torch, which the GUI thread must not wait for."""
    job = preload_job()
    try:
        if job is not None and not job.is_done():
            raise ImportError("the PyTorch preload is still running")
        return cfg.validate()
    except ImportError:
        known = {v for v, _, _ in BACKBONES}
        if str(cfg.backbone).lower() not in known:
            raise ConfigError("backbone", f"expected one of {tuple(sorted(known))}, got {cfg.backbone!r}")
        if cfg.step == "dpd" and not cfg.pa_run:
            raise ConfigError("pa_run", "a DPD run needs the PA run (id or folder) whose model it trains through")
        return cfg


class RunController(QObject):
    """Start (:meth:`start`), stop (:meth:`stop`) and follow a training run; :attr:`worker` is the run's worker
    (or the queue's, gui/queue_panel.py), None when nothing runs.

    Args:
        session: the Session. jobs: the JobRegistry. workspace: the run workspace.
        plots: the PlotArea (drawing, banner, form, epoch table). bar: the Actions (status-bar read-outs).
        data: the DatasetController (the loaded dataset; a start on another one loads it first).
        config_of_form: ``config_of_form()`` the form's ExperimentConfig (raises ConfigError).
        reset_views: ``reset_views()`` forgets what shows the last run (at each start).
        status: ``status(text, ms)``. supervisor_factory: builds the supervisor (tests train in their process).

    Signals: ``ended(state)`` when a run has ended and its final plots are drawn; ``plotsWritten(paths or
    exception)`` after a succeeded run's PNGs.
    """

    ended = Signal(str)
    plotsWritten = Signal(object)

    def __init__(self, session, jobs, workspace, plots, bar, data, config_of_form: Callable[[], ExperimentConfig],
                 reset_views: Callable[[], None], status: Callable[[str, int], None],
                 supervisor_factory: Callable = Supervisor, parent: QObject | None = None):
        super().__init__(parent)
        self.session, self.jobs, self.workspace = session, jobs, workspace
        self.plots, self.bar, self.data = plots, bar, data
        self._config_of_form, self._reset_views = config_of_form, reset_views
        self._status, self._factory = status, supervisor_factory
        self.worker = None
        self.write_plots = True  # PNGs of a succeeded run (gui/run_plots.py)
        self.gate = None  # the dataset's flags (gui/dataset_flags.py): ``check_start()`` → start / wait / refuse
        self._metric_profile = ExperimentConfig.metric_profile
        self._pending_progress = None
        self._progress_timer = QTimer(self, singleShot=True, interval=100)
        self._progress_timer.timeout.connect(self._flush_progress)

    # ------------------------------------------------------------------------------------------------ start / stop
    def start(self, config: ExperimentConfig | None = None) -> bool:
        """Start a training run (from the form unless ``config`` is given). Returns False when refused.

        When the config's dataset is not the loaded one, or a dataset is still loading, the run is ``queued``: its
        dataset is loaded first (the demo when the config says ``"demo"``) and the run starts when it arrives.
        """
        s, data = self.session, self.data
        if s.state == "running" or self.worker is not None:
            return False
        if config is None and (s.state == "queued" or data.loader is not None):
            return False
        try:
            cfg = config if config is not None else self._config_of_form()
            if config is not None:
                validate_config(cfg)
        except ConfigError as err:
            text = self.plots.form.show_error(err)
            self.plots.banner.show_message("error", f"Cannot start: {text}")
            return False
        if data.loader is not None or data.dataset is None or not same_dataset(data.ref, cfg.dataset):
            s.queue(cfg)
            if data.loader is None:
                if cfg.dataset in (None, "demo"):
                    data.load_demo()
                else:
                    data.open(cfg.dataset)
            return True
        verdict = self.gate.check_start() if self.gate is not None else "start"
        if verdict == "wait":  # goes on when the dataset's checks end
            s.queue(cfg)
            self._status("Checking the dataset before the start…", 4000)
            return True
        if verdict == "refuse":
            if s.refuse_queued("the dataset has error flags (see the dataset panel)"):
                self.ended.emit(s.state)
            return False
        self.launch(cfg, data.dataset)
        return True

    def launch(self, cfg: ExperimentConfig, dataset, resume: str | None = None) -> RunWorker:
        """Start the run worker of ``cfg`` on ``dataset`` (``resume``: the run folder the Resume action continues,
        gui/resume_control.py; the child reloads its recorded dataset when ``dataset`` is None); returns it."""
        self.plots.banner.setVisible(False)
        self.plots.form.clear_error()
        self._reset_views()
        worker = RunWorker(cfg, dataset=dataset, workspace=self.workspace, resume=resume,
                           supervisor_factory=self._factory)
        worker.interrupted.connect(self._on_run_interrupted)
        worker.done.connect(self._on_worker_done)
        self.follow(worker)
        self.worker = self.jobs.add(worker)
        self.session.start(cfg)
        self._status("Starting…", 3000)
        worker.start()
        return worker

    def follow(self, worker) -> None:
        """Show the run whose events ``worker`` emits (a RunWorker, or the queue's QueueWorker)."""
        for sig, slot in ((worker.started, self._on_run_started), (worker.batchProgress, self._on_batch_progress),
                          (worker.epochEnded, self._on_epoch_ended), (worker.previewReady, self._on_preview_ready),
                          (worker.finished, self._on_run_finished), (worker.failed, self._on_run_failed),
                          (worker.cancelled, self._on_run_cancelled)):
            sig.connect(slot)

    def stop(self) -> None:
        """Cooperative stop: the trainer ends at the next batch boundary and reports RunCancelled; a queued run ends
        ``cancelled`` at once."""
        s = self.session
        if s.state == "queued":
            s.request_cancel()
            self.ended.emit(s.state)
            return
        if self.worker is None or not s.request_cancel():
            return
        self.worker.request_cancel()

    def set_preview_every(self, n: int | None) -> None:
        """A new preview period (None: off) reaches the running trainer at its next batch."""
        if self.worker is not None:
            self.worker.set_preview_every(n)

    # ------------------------------------------------------------------------------------------------ run events
    @Slot(object)
    def _on_run_started(self, ev) -> None:
        name = str(ev.device_name or "")
        dev = str(ev.device) + (f" · {name}" if name and name.lower() != str(ev.device).lower() else "")
        show_run_kernel(self.bar.device_label, self.plots.banner, ev, dev, f"batched loader: {ev.batched_loader}")
        self.bar.show_fast_path(ev.fast_path)
        self.bar.run_folder_label.setText(f"run {ev.run_dir}")
        self.bar.run_folder_label.setToolTip(str(ev.run_dir))
        if ev.dataset_summary and self.data.dataset is None:
            self.plots.dataset_box.set_fields(describe_summary(ev.dataset_summary))
        self._metric_profile = (ev.config or {}).get("metric_profile", ExperimentConfig.metric_profile)
        self.plots.epoch_table.set_metric_profile(self._metric_profile)
        self.session.on_started(ev)
        self._status(f"Run {ev.run_id} started: {ev.n_train_frames:,} training frames", 5000)

    @Slot(object)
    def _on_batch_progress(self, ev) -> None:
        self._pending_progress = ev
        if not self._progress_timer.isActive():
            self._progress_timer.start()

    def _flush_progress(self) -> None:
        ev, self._pending_progress = self._pending_progress, None
        if ev is not None:
            self.session.on_batch(ev)

    @Slot(object)
    def _on_epoch_ended(self, ev) -> None:
        if ev.fast_path and ev.fast_path != self.bar.fast_path_shown:
            self.bar.show_fast_path(ev.fast_path)  # e.g. the capture failed during the first epoch
        self.plots.add_epoch(ev)
        name, unit = history.metric_label(ev.selection_metric)
        self.bar.best_label.setText(f"best {name} {history.fmt(ev.best_value)} {unit} (ep {ev.best_epoch}) · "
                                    f"metrics: {self._metric_profile}")
        self.session.on_epoch(ev)

    @Slot(object)
    def _on_preview_ready(self, ev) -> None:
        if not self.session.snapshot.preview:
            return
        self.plots.queue(ev.plots, f"preview · epoch {ev.epoch} · batch {ev.batch:,}/{ev.batches:,}")
        nmse = ev.metrics.get("NMSE") if ev.metrics else None
        if nmse is not None:
            self._status(f"Preview NMSE {nmse:.2f} dB (epoch {ev.epoch}, batch {ev.batch:,})", 3000)

    @Slot(object)
    def _on_run_finished(self, ev) -> None:
        timing.mark("gui_run_finished")
        if ev.plots is not None:
            # drawn one panel per event-loop pass after this one; ``ended`` waits for them (run_ended)
            self.plots.queue(ev.plots, f"{ev.plots.source} · selected epoch {ev.best_epoch}")
        self.plots.mark_best(ev.best_epoch)
        power = output_power_change_db(ev.extra, ev.test_metrics)
        self.plots.psd_panel.set_power_change(power)
        kind = "warning" if power is not None and abs(power) > POWER_WARNING_DB else "success"
        self.plots.banner.show_message(kind, finished_message(ev), run_dir=ev.run_dir)
        self.session.on_finished(ev)
        self.session.power_caveat = power_caveat(power)  # Run DPD's banners repeat it

    @Slot(object)
    def _on_run_failed(self, ev) -> None:
        self.plots.banner.show_message("error", failed_message(ev), run_dir=ev.run_dir, detail=ev.detail)
        self.session.on_failed(ev)

    @Slot(object)
    def _on_run_cancelled(self, ev) -> None:
        self.plots.banner.show_message("warning", cancelled_message(ev), run_dir=ev.run_dir)
        self.session.on_cancelled(ev)

    @Slot(object)
    def _on_run_interrupted(self, end) -> None:
        """The run's child process was killed (no outcome reported; status.json says ``interrupted``)."""
        self.session.on_interrupted(end.run_dir, f"Interrupted: {end.message}")
        self.plots.banner.show_message("warning", f"The run was interrupted: {end.message}", run_dir=end.run_dir)

    @Slot()
    def _on_worker_done(self) -> None:
        worker, self.worker = self.worker, None
        if worker is not None:
            worker.wait(2000)
            self.jobs.discard(worker)
        s = self.session
        ended = s.on_worker_done()  # no outcome event arrived (should not happen): do not stay stuck
        if ended == "cancelled":
            self.plots.banner.show_message("warning", "Run stopped.", run_dir=s.run_dir)
        elif ended == "failed":
            self.plots.banner.show_message("error", "The run ended without reporting an outcome.", run_dir=s.run_dir)
        self.run_ended(s.state, s.run_dir)

    def run_ended(self, state: str | None, run_dir: str | None) -> None:
        """A followed run has ended (its process too): its final plots drawn (one panel per event-loop pass),
        then, in a pass of its own, its PNGs started and ``ended``."""
        self.plots.finish_drawing(lambda: self._after_drawing(state, run_dir))

    def _after_drawing(self, state: str | None, run_dir: str | None) -> None:
        timing.mark("gui_final_plots_shown")
        if state == "succeeded" and run_dir and self.write_plots:
            self.write_run_plots(run_dir)
        self.ended.emit(state)

    def write_run_plots(self, run_dir: str) -> None:
        """Write the run's PNGs in a process of their own (gui/run_plots.py); ``plotsWritten`` gets the paths or
        the error."""
        job = PlotsProcess(run_dir, self)

        def ended(result, job=job) -> None:
            self.jobs.discard(job)
            if isinstance(result, Exception):
                self._status(f"Could not write the plot PNGs: {result}", 10000)
            else:
                timing.mark("gui_png_written")
                self._status(f"Wrote {len(result)} plots to {Path(run_dir) / 'plots'}", 6000)
            self.plotsWritten.emit(result)

        job.written.connect(ended)
        job.failed.connect(lambda text: ended(OSError(text)))
        self.jobs.add(job)
        timing.mark("gui_png_render_start")
        job.start()
