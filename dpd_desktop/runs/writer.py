"""The run record's writer: :class:`RunWriter`, the one writer of a run folder (runs/record.py is its reader); the
trainer itself writes no file.
"""
from __future__ import annotations

import csv
import errno
import io
import json
import os
import time
from pathlib import Path
from typing import Any, Mapping

from . import artifacts
from . import events as E
from .. import atomic
from .owner import process_identity
from .record import FORMAT, HISTORY_COLUMNS, PIN_FILE, QUANTIZED_FILE, SCHEMA

#: disk space set aside for a run's last words (the failure's log line and status.json), freed on a full disk
RESERVE_FILE = ".space-reserve"
RESERVE_BYTES = 32 * 1024
#: the errors of a full disk (or a full quota)
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
#: what the writer puts in a new run folder before its run has started (RunPrepared): all of it may go again
PREPARED_FILES = ("config.json", "status.json", "history.csv", "log.txt", RESERVE_FILE)


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is a write refused for want of space (ENOSPC, EDQUOT)."""
    return isinstance(exc, OSError) and exc.errno in DISK_FULL


class RunWriter:
    """Observer of the trainer's events that writes the run folder, every file atomically (log.txt too, whole).

    ``RunPrepared`` → status.json "running", a header-only history.csv; ``LogLine`` → log.txt; ``RunStarted`` →
    config.json; ``CheckpointReady`` → history.csv, best.pt + best.csv (selected epoch), last.pt; ``EpochEnded`` →
    config.json when the fast path's state changed, status.json; ``ResultsReady`` → results.h5; an outcome → the
    final status.json. Status is written after the files it describes: it never says more than the disk holds.

    A failed write raises :class:`~dpd_desktop.atomic.ArtifactWriteError` and leaves the earlier file as it was (the
    trainer calls the writer first; its error fails the run). Full disk: :data:`RESERVE_BYTES` are set aside at
    ``RunPrepared`` (a disk without them starts no run) and freed when a write finds the disk full; log lines are
    then appended in place. :meth:`close` (idempotent) frees the reserve.

    ``resume`` (training/resume.py) reopens a run folder: log.txt goes on, config.json's ``resumes`` gains an entry,
    history.csv and best.pt/best.csv are rewritten from last.pt's record (``history``, ``best``: ``model``,
    ``meta``, ``row``), status.json is "running" again.
    """

    def __init__(self, resume: Mapping[str, Any] | None = None) -> None:
        self.resume = resume
        self.run_id: str | None = None
        self.run_dir: Path | None = None
        self.step: str | None = None
        self.selection_metric: str | None = None
        self.history: list[Mapping[str, Any]] = []
        self.config_doc: dict[str, Any] | None = None
        self.epochs_written = 0  # epochs whose history row and checkpoints are on disk
        self.best_written: int | None = None  # the epoch best.pt holds
        self.best_so_far: dict[str, Any] = {}  # best_value and val_metrics of that epoch (status.json before the end)
        self._config_written = False
        self._log_text: str | None = None  # log.txt's text (None: no run folder yet, or closed)
        self._log_on_disk = 0  # how much of _log_text log.txt holds
        self._reserve: Path | None = None  # the space set aside (None: not made, or freed)
        self.disk_full = False  # a write found the disk full: log lines are appended from then on

    def __call__(self, event) -> None:
        handler = _WRITER_HANDLERS.get(type(event))
        if handler is not None:
            try:
                handler(self, event)
            except OSError as exc:
                if is_disk_full(exc):  # room for the failure's log line and status
                    self.disk_full = True
                    self._free_reserve()
                raise

    def close(self) -> None:
        self._log_text = None
        self._free_reserve()

    def _make_reserve(self) -> None:
        """Allocate :data:`RESERVE_BYTES` (not a sparse file). Raises ArtifactWriteError on a full disk; any other
        refusal leaves the run without a reserve."""
        path = self.run_dir / RESERVE_FILE
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                if hasattr(os, "posix_fallocate"):
                    try:
                        os.posix_fallocate(fd, 0, RESERVE_BYTES)
                    except OSError as exc:  # a file system without fallocate: zeros written instead
                        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                            raise
                        os.write(fd, bytes(RESERVE_BYTES))
                else:
                    os.write(fd, bytes(RESERVE_BYTES))
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            try:
                path.unlink()
            except OSError:
                pass
            if is_disk_full(exc):
                raise atomic.ArtifactWriteError(path, exc) from exc
            return  # another refusal (a file-size limit, a read-only reserve): the run goes on without one
        self._reserve = path

    def _free_reserve(self) -> None:
        if self._reserve is not None:
            try:
                self._reserve.unlink()
            except OSError:
                pass
            self._reserve = None

    # ---------------------------------------------------------------- handlers
    def _prepared(self, ev) -> None:
        self.run_id, self.run_dir = ev.run_id, Path(ev.run_dir)
        self.step, self.selection_metric = ev.step, ev.selection_metric
        self._make_reserve()  # before anything: a disk without room for the run's last words starts no run
        log = self.run_dir / "log.txt"  # kept and continued (a resumed run's log goes on)
        self._log_text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
        self._log_on_disk = len(self._log_text)
        if self.resume is not None:
            self._reopen(ev)
            return
        # config.json with the experiment alone until RunStarted completes it: a run that fails or is killed in its
        # set-up is still a readable run (listed failed / interrupted), not a folder the reader skips
        self.config_doc = self._config_head(ev.config)
        if ev.config:
            self._write_config()
        self.write_status("running")
        # every run folder has a history.csv, header-only until the first epoch ends (cancel/failure before it)
        artifacts.write_history_csv(self.run_dir / "history.csv", [], header=HISTORY_COLUMNS)

    def _reopen(self, ev) -> None:
        r = self.resume
        self.config_doc = dict(r["config_doc"])
        self.config_doc["experiment"] = dict(ev.config)
        self.config_doc["resumes"] = [*self.config_doc.get("resumes", []),
                                      {"at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "from_epoch": r["from_epoch"]}]
        self._write_config()
        self.history = [dict(row) for row in r["history"]]
        artifacts.write_history_csv(self.run_dir / "history.csv", self.history, header=HISTORY_COLUMNS)
        best = r["best"]
        artifacts.save_checkpoint(self.run_dir / "best.pt", best["model"], best["meta"])
        self.best_written = best["meta"].get("epoch")
        artifacts.write_history_csv(self.run_dir / "best.csv", [best["row"]])
        self._remember_best(best["row"])
        self.epochs_written = len(self.history)
        self.write_status("running", epochs_completed=self.epochs_written, resumed_from_epoch=r["from_epoch"])

    def _log_line(self, ev) -> None:
        if self._log_text is not None:
            self._log_text += f"{ev.clock} {ev.text}\n"  # kept on a failed write: the next one carries it
            if self.disk_full:  # appended in place: a whole new copy of the log might not fit
                self._append_log()
                return
            atomic.atomic_write_text(self.run_dir / "log.txt", self._log_text)
            self._log_on_disk = len(self._log_text)

    def _append_log(self) -> None:
        """Append the lines log.txt lacks (after a full disk; a cut append loses only the end of the last line)."""
        path = self.run_dir / "log.txt"
        try:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(self._log_text[self._log_on_disk:])
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            raise atomic.ArtifactWriteError(path, exc) from exc
        self._log_on_disk = len(self._log_text)

    def _started(self, ev) -> None:
        self.config_doc = {**(self.config_doc or self._config_head(ev.config)), "experiment": dict(ev.config),
                           **dict(ev.setup)}
        self._write_config()

    def _config_head(self, experiment) -> dict[str, Any]:
        return {"format": FORMAT, "schema": SCHEMA, "run_id": self.run_id,
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "experiment": dict(experiment or {})}

    def _checkpoint(self, ev) -> None:
        d = self.run_dir
        self.history.append(ev.row)
        artifacts.write_history_csv(d / "history.csv", self.history)
        if ev.is_best:
            artifacts.save_checkpoint(d / "best.pt", ev.model_state, ev.meta)
            self.best_written = ev.epoch
            artifacts.write_history_csv(d / "best.csv", [ev.row])
            self._remember_best(ev.row)
        artifacts.save_training_state(d / "last.pt", {
            **dict(ev.resume_state), "epoch": ev.epoch, "model": dict(ev.model_state),
            "optimizer": ev.optimizer_state, "scheduler": ev.scheduler_state, "meta": dict(ev.meta)})
        self.epochs_written = ev.epoch + 1

    def _remember_best(self, row) -> None:
        """The selected epoch's validation metrics and selection value, for status.json until RunFinished."""
        val = {k: v for k in ("NMSE", "EVM", "ACLR_L", "ACLR_R", "ACLR_AVG")
               if (v := _number(row.get(f"VAL_{k}"))) is not None}
        best = _number(row.get(self.selection_metric)) if self.selection_metric else None
        self.best_so_far = {"val_metrics": val, **({"best_value": best} if best is not None else {})}

    def _epoch_ended(self, ev) -> None:
        dev = (self.config_doc or {}).get("device")
        if isinstance(dev, dict):
            changed = False
            for key, value in (("fast_path", ev.fast_path), ("fast_path_optimizer", ev.fast_path_optimizer)):
                if value is not None and dev.get(key) != value:
                    dev[key], changed = value, True
            if changed:
                self._write_config()
        self.write_status("running", epochs_completed=ev.epoch + 1, best_epoch=self.best_written,
                          **self.best_so_far)

    def _results(self, ev) -> None:
        atomic.atomic_write_bytes(self.run_dir / "results.h5", results_image(ev))

    def _finished(self, ev) -> None:
        self.write_status("succeeded", epochs_completed=self.epochs_written, best_epoch=ev.best_epoch,
                          best_value=ev.best_value,
                          test_metrics=dict(ev.test_metrics), val_metrics=dict(ev.val_metrics), wall_s=ev.wall_s,
                          **dict(ev.extra))
        self.close()

    def _cancelled(self, ev) -> None:
        extra = {"message": ev.reason} if ev.reason else {}
        self.write_status("cancelled", epochs_completed=min(ev.epochs_completed, self.epochs_written),
                          best_epoch=self.best_written, **self.best_so_far, **extra)
        self.close()

    def _failed(self, ev) -> None:
        try:
            # ev.run_dir None: the run never started and its folder is gone (trainer.py, full disk at the start)
            if self.run_dir is not None and ev.run_dir is not None:
                if not self._config_written and self.config_doc:
                    try:  # a run whose first config.json failed: one more try, so that the failed run is listed
                        self._write_config()
                    except OSError:
                        pass
                # never more epochs than the disk holds (a failed write of an epoch's files is not counted), and
                # the selected epoch is the one best.pt holds
                self.write_status("failed", message=ev.message,
                                  epochs_completed=min(ev.epochs_completed, self.epochs_written),
                                  best_epoch=self.best_written, **self.best_so_far)
        finally:
            self.close()

    # ---------------------------------------------------------------- files
    def write_status(self, state: str, **kw) -> None:
        """status.json: the state, the run, its process's identity (runs/owner.py), the kernels and ``kw``."""
        if self.run_dir is None:
            return
        doc = {"state": state, "run_id": self.run_id, "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
               "step": self.step, "selection_metric": self.selection_metric}
        doc.update(process_identity())
        kernel = ((self.config_doc or {}).get("device") or {}).get("kernel")
        if isinstance(kernel, dict):  # known from RunStarted on (kernels/record.py)
            doc["kernel"] = {"requested": kernel.get("requested"), "ran": kernel.get("ran")}
        doc.update(kw)
        atomic.atomic_write_json(self.run_dir / "status.json", doc)

    def _write_config(self) -> None:
        atomic.atomic_write_json(self.run_dir / "config.json", self.config_doc)
        self._config_written = True


def discard_unstarted(run_dir: str | Path) -> bool:
    """Remove a new run folder whose ``RunPrepared`` failed, if it holds only :data:`PREPARED_FILES` and their
    temporary files. Returns True when the folder is gone."""
    folder = Path(run_dir)
    try:
        entries = list(folder.iterdir())
    except OSError:
        return False
    ours = [p for p in entries if p.is_file() and not p.is_symlink() and (
        p.name in PREPARED_FILES or any(p.name.startswith(f".{n}.") and p.name.endswith(".tmp")
                                        for n in PREPARED_FILES))]
    if len(ours) != len(entries):
        return False
    try:
        for p in ours:
            p.unlink()
        folder.rmdir()
    except OSError:
        return False
    return True


def write_evaluation(run_dir: str | Path, profile: str, doc: Mapping[str, Any]) -> Path:
    """A re-evaluation of a finished run under a metric profile (runs/evaluate.py), written atomically beside
    results.h5 as ``evaluation-<profile>.json``; returns the path."""
    return atomic.atomic_write_json(Path(run_dir) / f"evaluation-{profile}.json", dict(doc))


def write_quantized(run_dir: str | Path, doc: Mapping[str, Any]) -> Path:
    """Add a quantised evaluation (export/quantized.py) to ``quantized.json`` under its label (``{"format",
    "evaluations": {label: doc}}``; an unreadable file is started anew); returns the path."""
    path = Path(run_dir) / QUANTIZED_FILE
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
        evals = dict(old.get("evaluations") or {}) if isinstance(old, dict) else {}
    except (OSError, ValueError, AttributeError):
        evals = {}
    evals[str(doc["label"])] = dict(doc)
    return atomic.atomic_write_json(path, {"format": "dpd-desktop-quantized-1", "evaluations": evals})


def _number(v) -> float | None:
    """``v`` as a float (NumPy scalars and numeric text included), None when it is not a number."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


#: the writer's handler of each event class it writes (the others are ignored)
_WRITER_HANDLERS = {E.RunPrepared: RunWriter._prepared, E.LogLine: RunWriter._log_line,
                    E.RunStarted: RunWriter._started, E.CheckpointReady: RunWriter._checkpoint,
                    E.EpochEnded: RunWriter._epoch_ended, E.ResultsReady: RunWriter._results,
                    E.RunFinished: RunWriter._finished, E.RunCancelled: RunWriter._cancelled,
                    E.RunFailed: RunWriter._failed}


def results_image(ev) -> bytes:
    """results.h5's bytes, built in memory (h5py never meets a full disk mid-file): root attributes, then per split
    the datasets x, target, prediction (dpd_output), psd_freq_hz, psd_prediction_db and attributes loss, metrics."""
    import h5py  # off the start-up paths that import the record (benchmarks/results/2026-12-04-notes-training.md)

    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        for k, v in ev.attrs.items():
            f.attrs[k] = v
        for name, sr in ev.splits.items():
            g = f.create_group(name)
            g.create_dataset("x", data=sr.x)
            g.create_dataset("target", data=sr.target)
            g.create_dataset("prediction", data=sr.prediction)
            if sr.dpd_output is not None:
                g.create_dataset("dpd_output", data=sr.dpd_output)
            g.attrs["loss"] = sr.loss
            for k, v in sr.metrics.items():
                g.attrs[k] = float(v)
            g.create_dataset("psd_freq_hz", data=sr.psd_freq_hz)
            g.create_dataset("psd_prediction_db", data=sr.psd_prediction_db)
    return buf.getvalue()


def set_pinned(run_dir: str | Path, pinned: bool) -> Path:
    """Mark the run kept (retention never removes it) or scratch in pinned.json (``{"pinned", "updated"}``; read
    by runs/record.py ``read_pinned``); returns its path. Raises FileNotFoundError for a folder without config.json."""
    run_dir = Path(run_dir)
    if not (run_dir / "config.json").is_file():
        raise FileNotFoundError(f"{run_dir}: not a run folder (no config.json)")
    return atomic.atomic_write_json(run_dir / PIN_FILE, {"pinned": bool(pinned),
                                                           "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z")})


def mark_dead_run(run_dir: str | Path, state: str, message: str) -> bool:
    """Final status.json ("failed" or "interrupted", ``message`` why) of a run whose process died without one.
    Claims no more than the disk holds (``epochs_completed`` at most history.csv's rows, ``best_epoch`` only with
    best.pt and best.csv); a final status is left as it is. log.txt gains a line saying why the run ended, and the
    dead writer's space reserve (``.space-reserve``) is removed. Returns True when status.json was written."""
    run_dir = Path(run_dir)
    path = run_dir / "status.json"
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
        old = old if isinstance(old, dict) else {}
    except (OSError, ValueError):
        old = {}
    if old.get("state") not in (None, "queued", "running"):
        return False
    rows: list = []
    try:
        rows = artifacts.read_history_csv(run_dir / "history.csv")
    except (OSError, ValueError, csv.Error):
        pass
    recorded = old.get("epochs_completed")
    done = len(rows) if not isinstance(recorded, int) else min(recorded, len(rows))
    best = None
    if done and (run_dir / "best.pt").is_file():
        try:
            best_rows = artifacts.read_history_csv(run_dir / "best.csv")
            best = int(float(best_rows[0]["EPOCH"])) if best_rows else None
        except (OSError, ValueError, KeyError, IndexError, csv.Error):
            best = None
    doc = {**old, "state": state, "message": message, "epochs_completed": done, "best_epoch": best,
           "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    doc.setdefault("run_id", run_dir.name)
    atomic.atomic_write_json(path, doc)
    try:  # appended: the log is the dead writer's, whole up to its last atomic write
        with open(run_dir / "log.txt", "a", encoding="utf-8") as fh:
            fh.write(f"{time.strftime('%H:%M:%S')} {state}: {message}\n")
    except OSError:
        pass  # status.json says it; a log that cannot be written is not a reason to leave the run "running"
    (run_dir / RESERVE_FILE).unlink(missing_ok=True)
    return True
