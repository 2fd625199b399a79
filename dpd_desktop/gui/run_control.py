"""Starting, stopping and following a training run in the window, and Run DPD… (a part of
:class:`~dpd_desktop.gui.main_window.MainWindow`).

The run state, its texts and the enabled controls live in the session model (:mod:`.session`); this part turns the
training worker's signals into session transitions and draws what the events carry (epoch table, learning curves,
plots, banner). Training runs in a child process followed from a QThread (gui/child_worker.py), or for the tests'
fake trainers on the worker's QThread (gui/worker.py); Run DPD in the thread pool; all are registered jobs.
"""
from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QFileDialog

from .. import timing
from ..config import ConfigError, ExperimentConfig
from ..lab.interactive import reloadable
from ..runs.outputs import suggested_output
from . import history
from .jobs import DpdExportJob
from .kernel_view import show_run_kernel
from .model_exports import dpd_papr_text
from .preload import preload_job
from .session import (POWER_WARNING_DB, cancelled_message, failed_message, finished_message, output_power_change_db,
                      power_caveat)
from .widgets.config_form import BACKBONES
from .widgets.dataset_summary import describe_summary
from .child_worker import ChildTrainingWorker
from .form_state import on_cuda
from .worker import ResumeFactory, TrainingWorker

#: Output formats of "Run DPD…" (filter → extension added when the name has none).
DPD_OUTPUT_FILTERS = {"CSV: I,Q,I_dpd,Q_dpd (*.csv)": ".csv", "HDF5: datasets x, u (*.h5 *.hdf5)": ".h5",
                      "MATLAB: x, u (*.mat)": ".mat"}


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
    backbone and the DPD's PA run are checked by hand (the run's child validates the whole config and reports).

    ``cfg.validate()`` imports the model registry, i.e. torch: on the GUI thread while the preload thread imports
    torch it waited for that import (a 1.4 s stall of the event loop at a Start 1 s after the first paint,
    bench_gui_responsiveness.py --part ticks, load 5)."""
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



class RunControl:
    """Run control of the window: :meth:`start_run`, :meth:`stop_run`, the run events, :meth:`run_dpd_export`."""

    # ------------------------------------------------------------------------------------------------ start / stop
    def start_run(self, config: ExperimentConfig | None = None) -> bool:
        """Start a training run (from the form unless ``config`` is given). Returns False when refused.

        When the config's dataset is not the loaded one, or a dataset is still loading, the run is ``queued``: its
        dataset is loaded first (the demo when the config says ``"demo"``) and the run starts when it arrives.
        """
        s = self.session
        if s.state == "running" or self._worker is not None:
            if s.state != "running" and self._worker is not None:  # the ended run's child still writes its PNGs
                self.statusBar().showMessage("The last run is still writing its plots; Start again in a moment.",
                                             4000)
            return False
        if config is None and (s.state == "queued" or self._loader is not None):
            return False
        try:
            cfg = config if config is not None else self.config_from_form()
            if config is not None:
                validate_config(cfg)
        except ConfigError as err:
            text = self.form.show_error(err)
            self.banner.show_message("error", f"Cannot start: {text}")
            return False
        if self._loader is not None or self._dataset is None or not same_dataset(self._dataset_ref, cfg.dataset):
            s.queue(cfg)
            if self._loader is None:
                if cfg.dataset in (None, "demo"):
                    self.load_demo()
                else:
                    self.open_dataset(cfg.dataset)
            return True
        gate = getattr(self, "dataset_flags", None)  # the inspector's flags (gui/dataset_flags.py)
        verdict = gate.check_start() if gate is not None else "start"
        if verdict == "wait":  # goes on when the dataset's checks end
            s.queue(cfg)
            self.statusBar().showMessage("Checking the dataset before the start…", 4000)
            return True
        if verdict == "refuse":
            if s.refuse_queued("the dataset has error flags (see the dataset panel)"):
                self.runEnded.emit(s.state)
            return False
        self._launch_worker(cfg, self._dataset)
        return True

    def _launch_worker(self, cfg: ExperimentConfig, dataset, resume: str | None = None):
        """Start the training worker of ``cfg`` (``resume``: the run folder the Resume action continues,
        gui/resume_control.py) with its signals wired to this part; returns it.

        With the real trainer a CPU run goes to a child process (:class:`ChildTrainingWorker`) when
        :attr:`train_in_child` is set (the default) and the child can load the dataset again (a folder or the
        demo); with a ``trainer_factory`` given to the window (the tests' fakes), an in-memory dataset, or a CUDA
        run (unless :attr:`child_on_cuda`), it trains on a QThread of this process (:class:`TrainingWorker`).

        Why CUDA stays in this process: there the training thread waits on graph replays with the GIL released, and
        the child's start (fork, the dataset read again and fingerprinted) cost 0.5 s of the 12.2 s DPA_160MHz
        headline on the H200: GUI / headless 1.041 through the child (benchmarks/gui_overhead.py --path child),
        over the 3 % the window may add (results: benchmarks/results/2026-12-01-gpu-gui-overhead-child.md). On the
        CPU the training thread holds the GIL against the event loop (stalls of 250-300 ms), so the child wins.
        """
        s = self.session
        self.banner.setVisible(False)
        self.form.clear_error()
        self._reset_run_views()
        root = getattr(self.workspace, "root", None)
        if self._trainer_factory is None and self.train_in_child and root is not None and \
                (resume or reloadable(dataset)) and (self.child_on_cuda or not on_cuda(cfg.device)):
            # a resume reloads the run's recorded dataset in the child (fingerprint-checked; training/resume.py)
            worker = ChildTrainingWorker(cfg, dataset=None if resume else dataset, workspace=self.workspace,
                                         resume=resume, write_plots=self.write_plots_on_finish)
        else:
            factory = ResumeFactory(resume) if resume else self._trainer_factory
            worker = TrainingWorker(cfg, dataset=dataset, workspace=self.workspace, trainer_factory=factory)
        worker.interrupted.connect(self._on_run_interrupted)
        worker.plotsWritten.connect(self._on_child_plots_written)
        worker.started.connect(self._on_run_started)
        worker.batchProgress.connect(self._on_batch_progress)
        worker.epochEnded.connect(self._on_epoch_ended)
        worker.previewReady.connect(self._on_preview_ready)
        worker.finished.connect(self._on_run_finished)
        worker.failed.connect(self._on_run_failed)
        worker.cancelled.connect(self._on_run_cancelled)
        worker.done.connect(self._on_worker_done)
        self._worker = self.jobs.add(worker)
        s.start(cfg)
        self.statusBar().showMessage("Starting…", 3000)
        worker.start()
        return worker

    def stop_run(self) -> None:
        """Cooperative stop: the trainer ends at the next batch boundary and reports RunCancelled; a queued run ends
        ``cancelled`` at once."""
        s = self.session
        if s.state == "queued":
            s.request_cancel()
            self.runEnded.emit(s.state)
            return
        if self._worker is None or not s.request_cancel():
            return
        self._worker.request_cancel()

    # ------------------------------------------------------------------------------------------------ run events
    def _on_run_started(self, ev) -> None:
        name = str(ev.device_name or "")
        dev = str(ev.device) + (f" · {name}" if name and name.lower() != str(ev.device).lower() else "")
        self._run_kernel = show_run_kernel(self, ev, dev, f"batched loader: {ev.batched_loader}")
        self._show_fast_path(ev.fast_path)
        self.run_folder_label.setText(f"run {ev.run_dir}")
        self.run_folder_label.setToolTip(str(ev.run_dir))
        if ev.dataset_summary and self._dataset is None:
            self.dataset_box.set_fields(describe_summary(ev.dataset_summary))
        self._metric_profile = (ev.config or {}).get("metric_profile", ExperimentConfig.metric_profile)
        self.epoch_table.set_metric_profile(self._metric_profile)
        self.session.on_started(ev)
        self.statusBar().showMessage(f"Run {ev.run_id} started: {ev.n_train_frames:,} training frames", 5000)

    def _on_batch_progress(self, ev) -> None:
        self._pending_progress = ev
        if not self._progress_timer.isActive():
            self._progress_timer.start()

    def _flush_progress(self) -> None:
        ev, self._pending_progress = self._pending_progress, None
        if ev is not None:
            self.session.on_batch(ev)

    def _on_epoch_ended(self, ev) -> None:
        if ev.fast_path and ev.fast_path != getattr(self, "_fast_path_shown", None):
            self._show_fast_path(ev.fast_path)  # e.g. the capture failed during the first epoch
        row = dict(ev.row)
        self._history_rows.append(row)
        self.epoch_table.append_row(row, is_best=ev.is_best, epoch=ev.epoch, seconds=ev.epoch_seconds)
        if not ev.is_best:
            self.epoch_table.mark_best_epoch(ev.best_epoch)
        self.learning_panel.append_row(row, is_best=ev.is_best)
        self.learning_panel.set_best_epoch(ev.best_epoch)
        name, unit = history.metric_label(ev.selection_metric)
        self.best_label.setText(f"best {name} {history.fmt(ev.best_value)} {unit} (ep {ev.best_epoch}) · metrics: "
                                f"{getattr(self, '_metric_profile', ExperimentConfig.metric_profile)}")
        self.session.on_epoch(ev)
        if ev.plots is not None:
            self._queue_plots(ev.plots, f"validation · epoch {ev.epoch}")

    def _on_run_finished(self, ev) -> None:
        timing.mark("gui_run_finished")
        if ev.plots is not None:
            # the first panel now, the others one per event-loop pass (all four in one went 48 ms on the GUI thread,
            # bench_gui_responsiveness.py --part ticks); runEnded waits for them (_on_worker_done)
            self._plot_timer.stop()
            self._pending_plots = (ev.plots, f"{ev.plots.source} · selected epoch {ev.best_epoch}")
            self._flush_plots()
        timing.mark("gui_final_plots_shown")
        self.epoch_table.mark_best_epoch(ev.best_epoch)
        self.learning_panel.set_best_epoch(ev.best_epoch)
        power = output_power_change_db(ev.extra, ev.test_metrics)
        self.psd_panel.set_power_change(power)
        self._power_caveat = power_caveat(power)  # Run DPD's banners repeat it (_with_caveat)
        kind = "warning" if power is not None and abs(power) > POWER_WARNING_DB else "success"
        self.banner.show_message(kind, finished_message(ev), run_dir=ev.run_dir)
        self.session.on_finished(ev)
        if self.write_plots_on_finish and ev.run_dir:
            if isinstance(self._worker, TrainingWorker):  # trained here: the PNGs from the data in hand
                QTimer.singleShot(0, lambda d=ev.run_dir, p=(ev.plots or self._last_plots): self._write_plots(d, p))
            elif not isinstance(self._worker, ChildTrainingWorker):  # a queued run: in a process of their own
                self._write_plots_apart(ev.run_dir)
            # a ChildTrainingWorker's child writes them after the run (gui/child_plots.py): plotsWritten follows

    def _on_run_failed(self, ev) -> None:
        self.banner.show_message("error", failed_message(ev), run_dir=ev.run_dir, detail=ev.detail)
        self.session.on_failed(ev)

    def _on_run_cancelled(self, ev) -> None:
        self.banner.show_message("warning", cancelled_message(ev), run_dir=ev.run_dir)
        self.session.on_cancelled(ev)

    def _on_child_plots_written(self, result) -> None:
        """The run's child wrote its PNGs (a list of paths) or did not (an OSError)."""
        if isinstance(result, Exception):
            self._plots_failed(result)
            return
        timing.mark("gui_png_written")
        self.statusBar().showMessage(f"Wrote {len(result)} plots to {Path(result[0]).parent}", 6000)
        self.plotsWritten.emit(result)

    def _on_run_interrupted(self, end) -> None:
        """The run's child process was killed (no outcome reported; status.json says ``interrupted``)."""
        self.session.on_interrupted(end.run_dir, f"Interrupted: {end.message}")
        self.banner.show_message("warning", f"The run was interrupted: {end.message}", run_dir=end.run_dir)

    def _on_worker_done(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.wait(2000)
            self.jobs.discard(worker)
        ended = self.session.on_worker_done()  # no outcome event arrived (should not happen): do not stay stuck
        if ended == "cancelled":
            self.banner.show_message("warning", "Run stopped.", run_dir=self.session.run_dir)
        elif ended == "failed":
            self.banner.show_message("error", "The run ended without reporting an outcome.",
                                     run_dir=self.session.run_dir)
        self.finish_drawing()  # the final plots' panels still queued: drawn before runEnded
        self.runEnded.emit(self.session.state)

    # ------------------------------------------------------------------------------------------------ Run DPD
    def finished_dpd_run(self) -> str | None:
        """The run folder of the current run when it ended (succeeded, or cancelled with a checkpoint) and is a DPD
        run with a ``best.pt``; None otherwise."""
        s = self.session
        return s.run_dir if s.state in ("succeeded", "cancelled") and s.snapshot.dpd_run_ready else None

    def _on_run_dpd_saved(self) -> None:
        root = getattr(self.workspace, "runs_dir", None) or getattr(self.workspace, "root", None) or Path.home()
        folder = QFileDialog.getExistingDirectory(self, "Choose a DPD run folder", str(root))
        if folder:
            self.run_dpd_export(run_dir=folder)

    def run_dpd_export(self, out: str | os.PathLike | None = None, run_dir: str | os.PathLike | None = None,
                       split: str = "test", input_file: str | os.PathLike | None = None,
                       overwrite: bool | None = None) -> bool:
        """Write u = DPD(x) of a DPD run (default: the ended one) for ``split`` (or the waveform ``input_file``, see
        gui/model_exports.py) to ``out`` in the thread pool.

        Asks for the output file (CSV / HDF5 / MAT) unless ``out`` is given. The outcome is shown in the banner and
        signalled by :attr:`dpdExportEnded`. Returns False when nothing was started.
        """
        if self.session.snapshot.exporting:
            return False
        run_dir = str(run_dir) if run_dir is not None else self.finished_dpd_run()
        if run_dir is None:
            self.banner.show_message("error", "Run DPD needs a finished DPD run: train one (Step: DPD), or choose a "
                                     "saved DPD run folder with Run → Run DPD of a saved DPD run….")
            return False
        if overwrite is None:
            overwrite = out is None  # the save dialog asks before replacing a file
        if out is None:
            # never the run folder itself (runs/outputs.py: a run folder holds its run's record only)
            suggested = str(suggested_output(f"{Path(run_dir).name}_u_{split}.csv",
                                             self._settings.value("paths/last_dpd_dir", "", type=str),
                                             workspace=self.workspace))
            out, chosen = QFileDialog.getSaveFileName(self, f"Run DPD: write u = DPD(x) of the {split} split",
                                                      suggested, ";;".join(DPD_OUTPUT_FILTERS))
            if not out:
                return False
            if Path(out).suffix.lower() not in (".csv", ".h5", ".hdf5", ".mat"):
                out += DPD_OUTPUT_FILTERS.get(chosen, ".csv")
            self._settings.setValue("paths/last_dpd_dir", str(Path(out).parent))
        self._dpd_export_dir = run_dir
        job = DpdExportJob(self.workspace, run_dir, str(out), split=split, dataset=self._dataset,
                           input_file=input_file, overwrite=overwrite)
        job.signals.done.connect(lambda meta, job=job: self._on_dpd_export_done(meta, job))
        job.signals.failed.connect(lambda exc, tb, job=job: self._on_dpd_export_failed(exc, tb, job))
        self.jobs.add(job)
        what = f"the {split} split" if input_file is None else str(input_file)
        self.banner.show_message("info", self._with_caveat(
            f"Running the DPD of {Path(run_dir).name} on {what} → {out} …"))
        self.statusBar().showMessage("Run DPD: computing u = DPD(x)…")
        self.session.update(exporting=True)
        job.submit()
        return True

    def _with_caveat(self, text: str) -> str:
        """``text`` and, when Run DPD works on the shown run, that run's output-power caveat (a Run DPD banner
        replaces the one that carried it)."""
        caveat = getattr(self, "_power_caveat", None)
        if caveat and getattr(self, "_dpd_export_dir", None) == self.session.run_dir:
            return f"{text}\n{caveat}"
        return text

    def _on_dpd_export_done(self, meta, job=None) -> None:
        self.jobs.discard(job)
        what = f"the {meta.get('split')} split" if meta.get("split") else f"{meta.get('input_file')}"
        text = (f"Wrote u = DPD(x) of {what} ({meta.get('samples', 0):,} samples; peak |x| "
                f"{meta.get('peak_abs_x', float('nan')):.4g}, peak |u| {meta.get('peak_abs_u', float('nan')):.4g}"
                f"{dpd_papr_text(meta)}) to {meta.get('file')}\nMetadata: {meta.get('file')}.meta.json")
        if meta.get("nonfinite_u_samples"):
            text += f"\n{meta['nonfinite_u_samples']} samples of u are not finite."
        shown = self._with_caveat(text)
        self.banner.show_message("warning" if shown != text or meta.get("nonfinite_u_samples") else "success", shown)
        self.statusBar().showMessage(f"Run DPD: wrote {meta.get('file')}", 8000)
        self.session.update(exporting=False)
        self.dpdExportEnded.emit("succeeded")

    def _on_dpd_export_failed(self, exc, tb: str, job=None) -> None:
        self.jobs.discard(job)
        msg = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
        self.banner.show_message("error", self._with_caveat(f"Run DPD failed: {msg}"), detail=tb)
        self.statusBar().showMessage("Run DPD failed", 8000)
        self.session.update(exporting=False)
        self.dpdExportEnded.emit("failed")
