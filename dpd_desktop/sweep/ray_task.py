"""The wire between a Ray sweep's driver and its workers: what a trial task gets, what it returns, and the driver's
check and import of the returned run folder.

A task (:func:`train_trial`) gets the trial as JSON text (:func:`trial_payload`: configuration and the run id the
driver reserved) and the files of a temporary workspace (``settings.json``; a DPD trial's PA run :data:`PA_FILES`).
It trains there (``make_trainer``) and returns ``{"meta": JSON text, "files": {relative path: bytes}}``: bytes,
never a pickled object of ours. The dataset is read on the worker from ``config.dataset`` (a shared path; the run's
fingerprint tells whether it was the same data). A group of trials is one task, :func:`train_group` (one dataset,
TrainerGroup), returning each member's ``{"meta", "files"}`` in order.

:func:`import_run` writes the files into a staging folder of the workspace, reads it back as the reader does
(RunRecord, ``torch.load(weights_only=True)``, ``read_results``) and only then moves it onto the reserved run
folder: a malformed return fails its trial with a message naming the file and field, and reaches no run folder.

Progress and stop go through one actor (:class:`TrialChannel`, polled by the driver): workers push ``started`` and
``epoch`` events; a thread of each task polls its stop reason (the sweep's stop, or a pruned trial's own) every
:data:`STOP_POLL_S` s and calls ``request_cancel(reason)``.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import tempfile
import threading
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any, Mapping

from ..config import ExperimentConfig
from ..runs import artifacts
from .. import atomic
from ..runs.record import RecordError, RunRecord
from ..runs.settings import FILE_NAME as SETTINGS_FILE
from ..runs.workspace import Workspace
from ..runs import events as E
from ..training.report import describe_error

TASK_FORMAT = "dpd-desktop-ray-trial-1"
#: the PA run folder's files a DPD trial's worker needs (the record, its selected checkpoint, its history)
PA_FILES = ("config.json", "status.json", "best.pt", "best.csv", "history.csv")
#: where the driver stages a returned run folder before it moves it into runs/ (same file system, never listed)
STAGING_DIR = ".sweep-incoming"
#: the most a returned run folder may hold [bytes] (a run of the largest models holds a few MB)
MAX_RETURN_BYTES = 2 << 30
STOP_POLL_S = 0.5
_SAFE_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_MAX_DEPTH = 3
#: the final states a returned run may have (a live or unreadable one is malformed)
RETURNED_STATES = ("succeeded", "failed", "cancelled")


class ReturnedRunError(ValueError):
    """What came back from the cluster is not a well-formed run folder; the message names the file and field."""


SWEEP_STOPPED = "the sweep was stopped"


class TrialChannel:
    """The actor between the driver and its tasks (wrapped with ``ray.remote`` by the driver): JSON text events
    pushed by the tasks, drained by the driver; the sweep's stop flag and each trial's own stop (a pruned trial)."""

    def __init__(self) -> None:
        self._events: list[str] = []
        self._stopped = False
        self._trial_stops: dict[int, str] = {}

    def push(self, text: str) -> None:
        self._events.append(text)

    def drain(self) -> list[str]:
        out, self._events = self._events, []
        return out

    def stop(self) -> bool:
        self._stopped = True
        return True

    def stopped(self) -> bool:
        return self._stopped

    def stop_trial(self, number: int, reason: str) -> bool:
        """Stop trial ``number`` (running or not yet started) with ``reason`` (its run's message)."""
        self._trial_stops.setdefault(int(number), str(reason) or SWEEP_STOPPED)
        return True

    def stop_reason(self, number: int) -> str:
        """Why trial ``number`` must stop: its own stop's reason, else the sweep's stop, else "" (run on)."""
        return self._trial_stops.get(int(number)) or (SWEEP_STOPPED if self._stopped else "")


def check_relative_path(rel: Any) -> PurePosixPath:
    """``rel`` as a safe relative path: 1 to 3 parts of letters, digits, ``_.-`` (not starting with a dot).

    Raises:
        ReturnedRunError: anything else (absolute, ``..``, hidden, odd characters, not a string).
    """
    if not isinstance(rel, str):
        raise ReturnedRunError(f"a returned file name is a {type(rel).__name__}, expected a relative path")
    p = PurePosixPath(rel)
    if p.is_absolute() or not p.parts or len(p.parts) > _MAX_DEPTH or \
            any(not _SAFE_PART.match(part) for part in p.parts):
        raise ReturnedRunError(f"returned file {rel!r}: not a plain relative path inside a run folder")
    return p


def trial_payload(trial, run_id: str, config: ExperimentConfig) -> str:
    """The task's JSON text: the trial (sweep id, number), the reserved ``run_id`` and ``config``."""
    return json.dumps({"format": TASK_FORMAT, "sweep_id": trial.sweep_id, "number": trial.number, "run_id": run_id,
                       "config": config.to_dict()})


def shipped_files(workspace: Workspace, config: ExperimentConfig) -> tuple[ExperimentConfig, dict[str, bytes]]:
    """The files a trial's worker needs from the driver's workspace, and the config it runs there: settings.json
    (the workspace's defaults) and, for a DPD, the PA run's :data:`PA_FILES`, with ``pa_run`` set to its run id.

    Raises:
        FileNotFoundError: the PA run is not in the workspace (names what was looked for).
        ReturnedRunError: the PA run folder lacks config.json or best.pt.
    """
    files: dict[str, bytes] = {}
    settings = Path(workspace.root) / SETTINGS_FILE
    if settings.is_file():
        files[SETTINGS_FILE] = settings.read_bytes()
    if config.step != "dpd":
        return config, files
    pa_dir = workspace.resolve(config.pa_run)
    for name in PA_FILES:
        p = pa_dir / name
        if p.is_file():
            files[f"runs/{pa_dir.name}/{name}"] = p.read_bytes()
        elif name in ("config.json", "best.pt"):
            raise ReturnedRunError(f"{p}: missing: the DPD trial's PA run cannot be sent to the cluster")
    cfg = ExperimentConfig.from_dict({**config.to_dict(), "pa_run": pa_dir.name})
    return cfg, files


class _OneRunWorkspace(Workspace):
    """The worker's temporary workspace, whose one new run folder is ``runs/<run_id>`` (the driver's reserved id,
    so that every file of the run names the run as the driver's workspace will hold it)."""

    def __init__(self, root: Path, run_id: str):
        super().__init__(root)
        self._run_id = run_id

    def new_run_dir(self, label: str) -> tuple[str, Path]:
        d = self.runs_dir / self._run_id
        d.mkdir(parents=True)
        return self._run_id, d


class _Progress:
    """The trainer's observer on the worker: ``epoch`` events (the history row) pushed to the channel, unawaited."""

    def __init__(self, channel, number: int):
        self._channel, self._number = channel, number

    def __call__(self, ev) -> None:
        if isinstance(ev, E.EpochEnded):
            row = {k: (v if isinstance(v, (str, int)) and not isinstance(v, bool) else _number(v))
                   for k, v in ev.row.items()}
            self._channel.push.remote(json.dumps({"event": "epoch", "trial": self._number, "epoch": ev.epoch,
                                                  "epochs": ev.epochs, "is_best": bool(ev.is_best), "row": row}))


def _number(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return str(v)


def _watch_stop(ray, channel, number: int, trainer, done: threading.Event) -> None:
    """Every :data:`STOP_POLL_S` s, the channel's stop reason for trial ``number`` (its own or the sweep's); one
    given: ``request_cancel(reason)``. Never blocks in ``ray.get`` on a pending reply (``ray.wait`` with no timeout
    first): a task blocked in ``ray.get`` lends its CPUs back to the scheduler, which would start one more trial than
    the cluster has CPUs for."""
    ref = None
    while not done.wait(STOP_POLL_S):
        try:
            if ref is None:
                ref = channel.stop_reason.remote(number)
            ready, _ = ray.wait([ref], timeout=0)
            if not ready:
                continue
            ref = None
            reason = ray.get(ready[0])
            if reason:
                trainer.request_cancel(str(reason))
                return
        except Exception:  # noqa: BLE001 - the driver is gone: stop this run too
            trainer.request_cancel("the sweep's driver is gone")
            return


def _meta(state: str, message: str = "") -> str:
    return json.dumps({"format": TASK_FORMAT, "state": state, "message": message, "node": socket.gethostname()})


def train_trial(payload: str, shipped: Mapping[str, bytes], channel) -> dict[str, Any]:
    """The Ray task of one trial (module docstring); a stopped sweep is seen by the trainer's first batches (the
    run ends cancelled). Returns ``{"meta": JSON text, "files": {path: bytes}}``;
    ``files`` is empty when the run made no folder (it could not start: ``meta`` says why)."""
    import ray  # this runs on a Ray worker, where ray is imported already

    doc = json.loads(payload)
    number, run_id = doc["number"], doc["run_id"]
    channel.push.remote(json.dumps({"event": "started", "trial": number, "run_id": run_id,
                                    "node": socket.gethostname(), "pid": os.getpid()}))
    with tempfile.TemporaryDirectory(prefix="dpd-ray-trial-") as tmp:
        root = Path(tmp)
        try:
            for rel, data in shipped.items():
                target = root / check_relative_path(rel)
                atomic.atomic_write_bytes(target, bytes(data))
            ws = _OneRunWorkspace(root, run_id)
            cfg = ExperimentConfig.from_dict(doc["config"]).validate()
            from ..training.dataset_checks import load_dataset_for
            from ..training.ls_fit import make_trainer

            dataset = load_dataset_for(cfg.dataset)
            trainer = make_trainer(cfg, dataset=dataset, workspace=ws, observers=[_Progress(channel, number)])
        except Exception as exc:  # noqa: BLE001 - the trial's failure, reported to the driver
            return {"meta": _meta("failed", f"the run could not start on the cluster: {describe_error(exc)}"),
                    "files": {}}
        done = threading.Event()
        threading.Thread(target=_watch_stop, args=(ray, channel, number, trainer, done), daemon=True).start()
        try:
            result = trainer.run()
        finally:
            done.set()
        return {"meta": _meta(result.state, result.message), "files": _run_files(ws.runs_dir / run_id)}


class _MemberStop:
    """What :func:`_watch_stop` stops for one member of a group: ``request_cancel`` through the group."""

    def __init__(self, group, index: int):
        self._group, self._index = group, index

    def request_cancel(self, reason: str = "") -> None:
        self._group.request_cancel(self._index, reason)


def _run_files(run_dir: Path) -> dict[str, bytes]:
    if not run_dir.is_dir():
        return {}
    return {p.relative_to(run_dir).as_posix(): p.read_bytes()
            for p in sorted(run_dir.rglob("*")) if p.is_file() and not p.name.startswith(".")}


def train_group(payloads: list[str], shipped: Mapping[str, bytes], channel) -> list[dict[str, Any]]:
    """The Ray task of a group of trials (module docstring): a list of each member's return as
    :func:`train_trial`'s, in ``payloads`` order. A member that cannot start fails alone."""
    import ray  # this runs on a Ray worker, where ray is imported already

    from ..training.dataset_checks import load_dataset_for
    from ..training.group import TrainerGroup
    from ..training.ls_fit import make_trainer

    docs = [json.loads(p) for p in payloads]
    for doc in docs:
        channel.push.remote(json.dumps({"event": "started", "trial": doc["number"], "run_id": doc["run_id"],
                                        "node": socket.gethostname(), "pid": os.getpid()}))
    out: list[dict[str, Any] | None] = [None] * len(docs)
    with tempfile.TemporaryDirectory(prefix="dpd-ray-group-") as tmp:
        trainers, members, dataset = [], [], None
        for i, doc in enumerate(docs):
            try:
                root = Path(tmp) / f"member-{i}"
                for rel, data in shipped.items():
                    atomic.atomic_write_bytes(root / check_relative_path(rel), bytes(data))
                ws = _OneRunWorkspace(root, doc["run_id"])
                cfg = ExperimentConfig.from_dict(doc["config"]).validate()
                if dataset is None:  # ONE dataset object for every member (training/group.py)
                    dataset = load_dataset_for(cfg.dataset)
                trainers.append(make_trainer(cfg, dataset=dataset, workspace=ws,
                                             observers=[_Progress(channel, doc["number"])]))
                members.append((i, ws))
            except Exception as exc:  # noqa: BLE001 - this member's failure, reported to the driver
                out[i] = {"meta": _meta("failed", f"the run could not start on the cluster: {describe_error(exc)}"),
                          "files": {}}
        if trainers:
            group = TrainerGroup(trainers)
            done = threading.Event()
            for j, (i, _) in enumerate(members):
                threading.Thread(target=_watch_stop, args=(ray, channel, docs[i]["number"], _MemberStop(group, j),
                                                           done), daemon=True).start()
            try:
                results = group.run()
            finally:
                done.set()
            for (i, ws), result in zip(members, results):
                out[i] = {"meta": _meta(result.state, result.message),
                          "files": _run_files(ws.runs_dir / docs[i]["run_id"])}
    return out


def read_group_returned(out: Any, n: int) -> list[Any]:
    """A group task's return value checked for shape: a list of ``n`` members' returns (each then read by
    :func:`read_returned`). Raises :class:`ReturnedRunError`."""
    if not isinstance(out, list) or len(out) != n:
        what = f"a list of {len(out)}" if isinstance(out, list) else f"a {type(out).__name__}"
        raise ReturnedRunError(f"the group's task returned {what}, expected a list of its {n} members' runs")
    return out


def read_returned(out: Any) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The (meta, files) of a task's return value, checked for shape: JSON meta text and a {str: bytes} mapping.

    Raises:
        ReturnedRunError: another shape, a bad file name, more than :data:`MAX_RETURN_BYTES`.
    """
    if not isinstance(out, dict) or not isinstance(out.get("meta"), str) or not isinstance(out.get("files"), dict):
        raise ReturnedRunError(f"the task returned a {type(out).__name__}, expected {{'meta': text, 'files': "
                               "{path: bytes}}")
    try:
        meta = json.loads(out["meta"])
    except ValueError as exc:
        raise ReturnedRunError(f"field 'meta' is not JSON ({exc})") from exc
    if not isinstance(meta, dict) or meta.get("format") != TASK_FORMAT:
        raise ReturnedRunError(f"field 'meta.format' is not {TASK_FORMAT!r}")
    files: dict[str, bytes] = {}
    total = 0
    for rel, data in out["files"].items():
        check_relative_path(rel)
        if not isinstance(data, (bytes, bytearray)):
            raise ReturnedRunError(f"returned file {rel!r} is a {type(data).__name__}, expected bytes")
        total += len(data)
        files[rel] = bytes(data)
    if total > MAX_RETURN_BYTES:
        raise ReturnedRunError(f"the returned run folder holds {total} bytes, more than {MAX_RETURN_BYTES}")
    return meta, files


def _check_staged(staging: Path, run_id: str) -> RunRecord:
    try:
        rec = RunRecord.open(staging)
    except RecordError as exc:
        raise ReturnedRunError(str(exc)) from exc
    for name, doc in (("config.json", rec.doc), ("status.json", rec.status_doc)):
        if doc.get("run_id") != run_id:
            raise ReturnedRunError(f"{name}: field 'run_id' is {doc.get('run_id')!r}, expected {run_id!r}")
    recorded = rec.status_doc.get("state")
    if recorded not in RETURNED_STATES:
        raise ReturnedRunError(f"status.json: field 'state' is {recorded!r}, expected one of "
                               f"{', '.join(RETURNED_STATES)}")
    try:  # each file through its reader, so that the message names the file
        rec.history()
        if rec.best_epoch is not None:
            artifacts.load_checkpoint(rec.best_checkpoint)  # torch.load(weights_only=True)
        if rec.last_checkpoint.exists() and not zipfile.is_zipfile(rec.last_checkpoint):
            raise ReturnedRunError("last.pt: not a checkpoint file (not the zip archive torch.save writes)")
        if recorded == "succeeded":
            rec.read_results()
    except (RecordError, artifacts.CheckpointError) as exc:
        raise ReturnedRunError(str(exc)) from exc
    if rec.state != recorded:  # the reader's own verdict (e.g. damaged) on what the checks above let pass
        raise ReturnedRunError(f"status.json: field 'state' is {recorded!r} but the folder reads {rec.state!r}")
    return rec


def import_run(workspace: Workspace, run_id: str, files: Mapping[str, bytes]) -> RunRecord:
    """Write a returned run folder into ``workspace`` as ``runs/<run_id>`` (module docstring); ``runs/<run_id>``
    is the empty folder the driver reserved. Returns the record of the imported folder.

    Raises:
        ReturnedRunError: a malformed folder (the message names the file and field, with the run id in place of the
            staging path); the staging folder is removed and ``runs/<run_id>`` left as it was.
        OSError: the workspace cannot be written (ArtifactWriteError names the file).
    """
    target = Path(workspace.runs_dir) / run_id
    base = Path(workspace.root) / STAGING_DIR
    base.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{run_id}.", dir=base))
    try:
        for rel, data in files.items():
            atomic.atomic_write_bytes(staging / check_relative_path(rel), data)
        try:
            _check_staged(staging, run_id)
        except ReturnedRunError as exc:
            raise ReturnedRunError(str(exc).replace(str(staging), run_id)) from exc
        try:
            os.replace(staging, target)  # POSIX: onto the reserved empty folder, at once
        except OSError:
            os.rmdir(target)  # where a folder cannot replace another (Windows): the reserved one goes first
            os.rename(staging, target)
        atomic.fsync_dir(target.parent)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return RunRecord.open(target)
