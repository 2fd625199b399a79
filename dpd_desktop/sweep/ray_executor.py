"""The Ray backend of a sweep: :class:`RayExecutor` implements the executor protocol (sweep/executor.py) on a Ray
cluster; ``dpd-desktop sweep --ray ADDRESS`` gets it from :func:`executor_for`.

A lone trial is one Ray task (ray_task.py ``train_trial``); a ``group``'s trials are one task (``train_group``:
one process, one dataset). Resources: :func:`task_resources` / :func:`group_resources` (``config.threads or 1``
CPUs; on CUDA ``1 / trials_per_gpu`` of a GPU per trial, at most one card). The driver reserves each trial's empty
run folder, ships the workspace's settings.json (and a DPD trial's PA run files), imports what comes back
(ray_task.py ``import_run``) and refreshes the index. The workers run this package itself (Ray's ``py_modules``).

Progress is polled every ``poll_s`` s from the channel actor and passed to ``on_event`` as dicts: ``cluster``
(``address``, ``dashboard_url``, ``folder``), ``warning`` (``message``), ``submitted`` (``trial``, ``run_id``,
``resources``, ``members``), ``started`` (``trial``, ``run_id``, ``node``, ``pid``), ``epoch`` (``trial``,
``epoch``, ``epochs``, ``is_best``, ``row``). ``on_start(trial, run_dir)`` and ``on_epoch(trial, RemoteEpoch)``
follow them; a reason ``on_epoch`` returns stops that trial (:meth:`RayExecutor.stop_trial`: its run ends
``cancelled`` after the current batch; Optuna prunes this way). ``with executor:`` keeps one connection for several
:meth:`RayExecutor.run` calls.

``stop`` set: running trials end ``cancelled`` after their current batch and are imported; tasks not started are
cancelled and leave no run folder. Security: sweep/ray_security.py. Ray (the optional extra
``dpd-desktop[cluster]``) is imported only when a sweep connects.
"""
from __future__ import annotations

import json
import logging
import os
import signal
import sys
import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..config import ExperimentConfig
from ..runs.index import RunIndex
from ..runs.settings import WorkspaceSettings
from ..runs.workspace import Workspace
from .executor import Trial, TrialEnd, report
from .ray_options import DEFAULT_TRIALS_PER_GPU, LOCAL_ADDRESS, add_ray_arguments
from .ray_security import TOKEN_ENV, LocalCluster, RaySecurityError, check_address, check_cluster_auth_mode
from .ray_task import (SWEEP_STOPPED, ReturnedRunError, TrialChannel, import_run, read_group_returned,
                       read_returned, shipped_files, train_group, train_trial, trial_payload)

__all__ = ["RayExecutor", "RayUnavailable", "RemoteEpoch", "check_not_bundled", "IN_BUNDLE", "RaySecurityError",
           "executor_for", "add_ray_arguments", "task_resources", "LOCAL_ADDRESS", "DEFAULT_TRIALS_PER_GPU"]

EXTRA_MISSING = "Ray is not installed: install the cluster extra (pip install 'dpd-desktop[cluster]')"
#: the packaged app (PyInstaller) holds no Ray (its raylet, GCS and ``ray start`` are programs of a Python install)
IN_BUNDLE = ("Ray sweeps need a Python install with dpd-desktop[cluster] (pip install 'dpd-desktop[cluster]'); "
             "this packaged app does not include Ray: run the sweep from that install, or without a cluster")


class RayUnavailable(RuntimeError):
    """No Ray here (the packaged app, the extra not installed) or the cluster cannot be reached; nothing was sent."""


def check_not_bundled() -> None:
    """Raises :class:`RayUnavailable` (:data:`IN_BUNDLE`) in the packaged app (``sys.frozen``)."""
    if getattr(sys, "frozen", False):
        raise RayUnavailable(IN_BUNDLE)


def _import_ray():
    """``ray``, imported on first use (an optional extra)."""
    check_not_bundled()
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailable(EXTRA_MISSING) from exc
    return ray


@dataclass(frozen=True)
class RemoteEpoch:
    """A trial's epoch end as the cluster reported it (the fields of the trainer's ``EpochEnded`` that travel):
    ``epoch`` 0-based, ``epochs`` planned, ``row`` the history row (column names of history.csv), ``is_best``."""

    epoch: int
    epochs: int
    row: Mapping[str, Any]
    is_best: bool

    @classmethod
    def from_event(cls, ev: Mapping[str, Any]) -> "RemoteEpoch | None":
        """The epoch of an ``epoch`` event dict; None when a field is missing or malformed."""
        try:
            return cls(int(ev["epoch"]), int(ev["epochs"]), dict(ev["row"]), bool(ev.get("is_best")))
        except (KeyError, TypeError, ValueError):
            return None


def task_resources(config: ExperimentConfig, default_device: str, cluster_gpus: float,
                   trials_per_gpu: int = DEFAULT_TRIALS_PER_GPU) -> dict[str, float]:
    """The Ray resources of one trial's task (module docstring): ``{"num_cpus", "num_gpus"}``."""
    device = config.device if config.device != "auto" else default_device
    on_gpu = str(device).startswith("cuda") or (device == "auto" and cluster_gpus > 0)
    return {"num_cpus": float(config.threads or 1), "num_gpus": 1.0 / max(1, int(trials_per_gpu)) if on_gpu else 0.0}


def group_resources(config: ExperimentConfig, members: int, default_device: str, cluster_gpus: float,
                    trials_per_gpu: int = DEFAULT_TRIALS_PER_GPU) -> dict[str, float]:
    """The Ray resources of a group's task: one trial's CPUs (one process) and, on a GPU, the share of its
    ``members`` trials, at most one card: ``{"num_cpus", "num_gpus"}``."""
    res = task_resources(config, default_device, cluster_gpus, trials_per_gpu)
    if res["num_gpus"]:
        res["num_gpus"] = min(1.0, int(members) / max(1, int(trials_per_gpu)))
    return res


def _units(trials: Sequence[Trial]) -> list[list[Trial]]:
    """The tasks of ``trials``: each group's members together (first-appearance order), a trial without one alone."""
    units: list[list[Trial]] = []
    by_group: dict[int, list[Trial]] = {}
    for t in trials:
        if t.group is None:
            units.append([t])
        elif t.group in by_group:
            by_group[t.group].append(t)
        else:
            by_group[t.group] = [t]
            units.append(by_group[t.group])
    return units


class RayExecutor:
    """Trials as Ray tasks (module docstring).

    Args:
        address: the cluster (``host:port``, ``ray://host:port``) or ``"local"``.
        workspace: where the trials' runs are imported.
        allow_unauthenticated: the user's explicit override of the token-authentication rule (ray_security.py).
        trials_per_gpu: trials sharing one GPU (GPU fraction ``1 / trials_per_gpu``).
        num_cpus, num_gpus: resources of a ``local`` cluster (None: Ray counts the machine's).
        on_event: receives the progress events (module docstring); warnings go to stderr without it.
        poll_s: how often the driver polls the tasks and the channel [s].
        returned_files_hook: test hook ``(trial, files) -> files`` applied to what a task returned before it is
            imported (the tests damage a file with it).

    :meth:`run` raises :class:`~dpd_desktop.sweep.ray_security.RaySecurityError` when the policy refuses the
    cluster (before any trial is sent), :class:`RayUnavailable` when Ray is not installed or the cluster cannot be
    reached, ``RayClusterError`` when a ``local`` one does not start.
    """

    def __init__(self, address: str, workspace: Workspace, *, allow_unauthenticated: bool = False,
                 trials_per_gpu: int = DEFAULT_TRIALS_PER_GPU, num_cpus: int | None = None,
                 num_gpus: int | None = None, on_event: Callable[[dict], None] | None = None, poll_s: float = 0.25,
                 returned_files_hook: Callable[[Trial, dict[str, bytes]], dict[str, bytes]] | None = None):
        self.address = address
        self.workspace = workspace
        self.allow_unauthenticated = allow_unauthenticated
        self.trials_per_gpu = trials_per_gpu
        self.num_cpus, self.num_gpus = num_cpus, num_gpus
        self.on_event = on_event
        self.poll_s = poll_s
        self.returned_files_hook = returned_files_hook
        self._trial_stops: queue.SimpleQueue[tuple[int, str]] = queue.SimpleQueue()
        self._ray = self._cluster = self._sigterm = None
        self._keep = False

    # ---------------------------------------------------------------- events
    def _emit(self, event: dict) -> None:
        if self.on_event is not None:
            self.on_event(event)
        elif event.get("event") == "warning":
            print(event["message"], file=sys.stderr)

    # ---------------------------------------------------------------- the connection
    def __enter__(self) -> "RayExecutor":
        """Keep the connection of the first :meth:`run` for the next ones (connects only when a trial is run)."""
        self._keep = True
        return self

    def __exit__(self, *exc) -> None:
        self._keep = False
        self.close()

    def open(self) -> None:
        """Connect (``local``: start the cluster first); the security policy runs here (module docstring).
        ``ray.init`` sets its own SIGTERM handler (in the main thread): :meth:`close` restores the caller's."""
        if self._ray is not None:
            return
        self._cluster = None
        main = threading.current_thread() is threading.main_thread()
        self._sigterm = signal.getsignal(signal.SIGTERM) if main else None
        try:
            if self.address == LOCAL_ADDRESS:
                self._cluster = LocalCluster(self.num_cpus, self.num_gpus).start()
                address, env, notes = self._cluster.address, self._cluster.env, []
                self._emit({"event": "cluster", "address": address, "dashboard_url": self._cluster.dashboard_url,
                            "folder": str(self._cluster.folder)})
            else:
                address, env = self.address, {}
                notes = check_address(address, self.allow_unauthenticated)
            if self._cluster is not None:
                os.environ.pop(TOKEN_ENV, None)  # it would take precedence over the local cluster's token file
            os.environ.update(env)
            ray = _import_ray()
            _refresh_ray_config(ray)
            pkg = Path(__file__).resolve().parent.parent
            try:
                ctx = ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING,
                               namespace="dpd-desktop-sweep",
                               runtime_env={"py_modules": [str(pkg)], "excludes": ["__pycache__", "*.pyc"]})
            except Exception as exc:  # noqa: BLE001 - ConnectionError, RuntimeError, ray's own: one message
                raise RayUnavailable(f"cannot connect to the Ray cluster at {address}: {_first_line(exc)}") from exc
            self._ray = ray
            notes += check_cluster_auth_mode(address, getattr(ctx, "dashboard_url", None),
                                             self.allow_unauthenticated)
            for w in notes:
                self._emit({"event": "warning", "message": w})
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Disconnect; stop a ``local`` cluster; the caller's SIGTERM handler back."""
        ray, cluster, sigterm = self._ray, self._cluster, self._sigterm
        self._ray = self._cluster = self._sigterm = None
        try:
            if ray is not None:
                ray.shutdown()
        finally:
            if cluster is not None:
                cluster.stop()
            if sigterm is not None:
                signal.signal(signal.SIGTERM, sigterm)

    # ---------------------------------------------------------------- the protocol
    def run(self, trials: Sequence[Trial], on_done: Callable[[TrialEnd], None], stop: threading.Event,
            on_epoch: Callable[[Trial, Any], str | None] | None = None,
            on_start: Callable[[Trial, str], None] | None = None,
            on_many: Callable[[list[TrialEnd]], None] | None = None) -> None:
        """Train ``trials`` on the cluster; ``on_done`` once per trial, in the order they end (module docstring;
        ``on_many`` for the trials a stop ends before they were sent). Connects first unless connected, and
        disconnects at the end unless inside ``with executor:``."""
        if not trials:
            return
        own = self._ray is None and not self._keep
        if self._ray is None:
            self.open()
        try:
            self._run_connected(self._ray, trials, on_done, stop, on_epoch, on_start, on_many)
        finally:
            if own:
                self.close()

    def stop_trial(self, number: int, reason: str) -> None:
        """Stop trial ``number`` of the running :meth:`run` with ``reason`` (thread-safe; sent to the channel at the
        next poll): its run ends ``cancelled`` with that message."""
        self._trial_stops.put((int(number), str(reason)))

    def _run_connected(self, ray, trials, on_done, stop: threading.Event, on_epoch=None, on_start=None,
                       on_many=None) -> None:
        channel = ray.remote(num_cpus=0)(TrialChannel).remote()
        task = ray.remote(max_retries=0)(train_trial)
        group_task = ray.remote(max_retries=0)(train_group)
        gpus = float(ray.cluster_resources().get("GPU", 0))
        settings = WorkspaceSettings.load(self.workspace.root)
        pending: dict[Any, list[tuple[Trial, str, Path]]] = {}
        by_number: dict[int, tuple[Trial, Path]] = {}
        unsent: list[TrialEnd] = []
        for unit in _units(trials):
            if stop.is_set():
                unsent += [TrialEnd(trial, "cancelled", None, "the sweep was stopped before this trial started")
                           for trial in unit]
                continue
            members, payloads, files = [], [], {}
            for trial in unit:
                try:
                    cfg, files = shipped_files(self.workspace, trial.config)  # a group's members: the same files
                    run_id, run_dir = self.workspace.new_run_dir(f"{cfg.step}-{cfg.size_label}")
                except (OSError, ValueError) as exc:
                    on_done(TrialEnd(trial, "failed", None, f"the trial could not be sent to the cluster: {exc}"))
                    continue
                members.append((trial, run_id, run_dir))
                payloads.append(trial_payload(trial, run_id, cfg))
            if not members:
                continue
            cfg = members[0][0].config
            if len(members) == 1:
                res = task_resources(cfg, settings.default_device, gpus, self.trials_per_gpu)
                ref = task.options(**res).remote(payloads[0], files, channel)
            else:
                res = group_resources(cfg, len(members), settings.default_device, gpus, self.trials_per_gpu)
                ref = group_task.options(**res).remote(payloads, files, channel)
            pending[ref] = members
            numbers = [t.number for t, _, _ in members]
            for trial, run_id, run_dir in members:
                by_number[trial.number] = (trial, run_dir)
                self._emit({"event": "submitted", "trial": trial.number, "run_id": run_id, "resources": res,
                            "members": numbers})
        report(unsent, on_done, on_many)
        follow = _Follow(by_number, on_epoch, on_start, self.stop_trial)
        stop_sent = False
        try:
            while pending:
                if stop.is_set() and not stop_sent:
                    ray.get(channel.stop.remote())  # first the flag: a task starting now sees it
                    for ref, members in pending.items():
                        if not any(t.number in follow.started for t, _, _ in members):
                            ray.cancel(ref)
                    stop_sent = True
                self._send_trial_stops(ray, channel, follow)
                done, _ = ray.wait(list(pending), num_returns=len(pending), timeout=self.poll_s)
                self._drain(ray, channel, follow)
                for ref in done:
                    members = pending.pop(ref)
                    for end in self._finish(ray, ref, members):
                        reason = follow.stopped.get(end.trial.number)
                        if reason and end.state == "cancelled" and end.message in ("", SWEEP_STOPPED, reason):
                            end = TrialEnd(end.trial, end.state, end.run_dir, reason)
                        on_done(end)
            self._drain(ray, channel, follow)
        except Exception as exc:  # the cluster was lost: every trial still out ends failed, then the error goes on
            for members in pending.values():
                for trial, _, run_dir in members:
                    _drop_reserved(run_dir)
                    on_done(TrialEnd(trial, "failed", None,
                                     f"the connection to the Ray cluster failed: {_first_line(exc)}"))
            raise

    def _send_trial_stops(self, ray, channel, follow: "_Follow") -> None:
        while True:
            try:
                number, reason = self._trial_stops.get_nowait()
            except queue.Empty:
                return
            if number not in follow.stopped:
                follow.stopped[number] = reason
                ray.get(channel.stop_trial.remote(number, reason))

    def _drain(self, ray, channel, follow: "_Follow") -> None:
        for text in ray.get(channel.drain.remote()):
            try:
                ev = json.loads(text)
            except ValueError:
                continue
            if isinstance(ev, dict):
                self._emit(ev)
                follow(ev)

    def _finish(self, ray, ref, members: list[tuple[Trial, str, Path]]) -> list[TrialEnd]:
        """The ends of a task's trials (one, or a group's): each returned run imported (or why not); a reserved
        folder removed when no run came back."""
        def every(state: str, message: str) -> list[TrialEnd]:
            for _, _, run_dir in members:
                _drop_reserved(run_dir)
            return [TrialEnd(trial, state, None, message) for trial, _, _ in members]

        try:
            out = ray.get(ref)
            outs = [out] if len(members) == 1 else read_group_returned(out, len(members))
        except ray.exceptions.TaskCancelledError:
            return every("cancelled", "the sweep was stopped before this trial started")
        except ray.exceptions.RayError as exc:
            return every("failed", f"the Ray task failed: {_first_line(exc)}")
        except ReturnedRunError as exc:
            return every("failed", f"what the cluster returned is malformed: {exc}")
        return [self._import(trial, run_id, run_dir, o) for (trial, run_id, run_dir), o in zip(members, outs)]

    def _import(self, trial: Trial, run_id: str, run_dir: Path, out) -> TrialEnd:
        """One trial's end from its task's return ``out``."""
        try:
            meta, files = read_returned(out)
        except ReturnedRunError as exc:
            _drop_reserved(run_dir)
            return TrialEnd(trial, "failed", None, f"what the cluster returned is malformed: {exc}")
        if not files:
            _drop_reserved(run_dir)
            state = meta.get("state") if meta.get("state") in ("cancelled", "failed") else "failed"
            return TrialEnd(trial, state, None, str(meta.get("message") or "the trial made no run folder"))
        if self.returned_files_hook is not None:
            files = self.returned_files_hook(trial, files)
        try:
            rec = import_run(self.workspace, run_id, files)
        except (ReturnedRunError, OSError) as exc:
            _drop_reserved(run_dir)
            return TrialEnd(trial, "failed", None, f"the run folder {run_id} returned by the cluster is malformed "
                            f"and was not imported: {exc}")
        with RunIndex.open(self.workspace, sync=False) as idx:
            idx.refresh([run_id])
        return TrialEnd(trial, rec.state, str(rec.run_dir), rec.message or str(meta.get("message") or ""))


class _Follow:
    """The driver's view of its trials' events: which started (``on_start``), each epoch to ``on_epoch`` (a reason
    it returns goes to ``stop_trial``), which were stopped and why (``stopped``)."""

    def __init__(self, by_number: dict[int, tuple[Trial, Path]], on_epoch, on_start, stop_trial):
        self.by_number, self.on_epoch, self.on_start, self.stop_trial = by_number, on_epoch, on_start, stop_trial
        self.started: set[int] = set()
        self.stopped: dict[int, str] = {}

    def __call__(self, ev: dict) -> None:
        number = ev.get("trial")
        known = self.by_number.get(number) if isinstance(number, int) else None
        if ev.get("event") == "started":
            self.started.add(number)
            if known is not None and self.on_start is not None:
                self.on_start(known[0], str(known[1]))
        elif ev.get("event") == "epoch" and known is not None and self.on_epoch is not None \
                and number not in self.stopped:
            epoch = RemoteEpoch.from_event(ev)
            reason = self.on_epoch(known[0], epoch) if epoch is not None else None
            if reason:
                self.stop_trial(number, str(reason))


def _drop_reserved(run_dir: Path) -> None:
    try:
        run_dir.rmdir()  # only while empty: a folder that holds anything is never removed here
    except OSError:
        pass


def _first_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[-1] if lines else type(exc).__name__


def _refresh_ray_config(ray) -> None:
    """Let an already imported Ray see the authentication variables just set (Ray's own
    ``_enable_token_auth`` does the same)."""
    try:
        from ray._raylet import Config

        Config.initialize("")
    except Exception:  # noqa: BLE001 - an older or newer Ray without it reads the environment at ray.init
        pass


# ---------------------------------------------------------------------------------------------------- command line
def executor_for(args, workspace: Workspace | None = None,
                 on_event: Callable[[dict], None] | None = None) -> RayExecutor | None:
    """The executor the sweep command's ``args`` ask for: a :class:`RayExecutor` with ``--ray``, None without it
    (the sweep's local executor then runs the trials). ``workspace`` defaults to ``args.workspace``'s."""
    address = getattr(args, "ray", None)
    if not address:
        return None
    ws = workspace if workspace is not None else Workspace(getattr(args, "workspace", None))
    return RayExecutor(address, ws, allow_unauthenticated=bool(getattr(args, "ray_allow_unauthenticated", False)),
                       trials_per_gpu=getattr(args, "ray_trials_per_gpu", DEFAULT_TRIALS_PER_GPU) or 1,
                       num_cpus=getattr(args, "ray_num_cpus", None), on_event=on_event)


def trial_from_dict(doc: Mapping[str, Any]) -> Trial:
    """A :class:`Trial` from ``{"sweep_id", "number", "config", "group"}`` (the helper's wire form; ``group``
    optional)."""
    group = doc.get("group")
    return Trial(str(doc["sweep_id"]), int(doc["number"]), ExperimentConfig.from_dict(dict(doc["config"])),
                 int(group) if isinstance(group, int) and not isinstance(group, bool) else None)


def trial_to_dict(trial: Trial) -> dict[str, Any]:
    return {"sweep_id": trial.sweep_id, "number": trial.number, "config": trial.config.to_dict(),
            "group": trial.group}
