"""The window's way to a Ray cluster: a helper process that runs the :class:`RayExecutor`, and its client.

Ray never starts inside the window's process (``ray.init`` takes over signal handling and starts threads); the
Sweep view starts ``python -m dpd_desktop.sweep.ray_helper --workspace ROOT --address ADDRESS [...]`` through
:meth:`RayHelperClient.start` on a job thread and reads its events.

The wire is JSON lines. Standard input: first ``{"trials": [{"sweep_id", "number", "config", "group"}, ...]}``, then
``{"cmd": "stop"}`` or ``{"cmd": "stop_trial", "trial": N, "reason": TEXT}``; the end of standard input stops the
sweep too. Standard output: the executor's events (ray_executor.py), then per trial ``{"event": "done", "trial",
"state", "run_dir", "message"}``, and last ``{"event": "end"}`` or ``{"event": "error", "kind": "refused" |
"failed", "message"}``. Everything else (Ray's logs) goes to standard error. Exit status (process.py ``Exit``): 0
the sweep ran, 2 refused by the security policy or bad input, 1 another failure. SIGINT is ignored: the window
decides what a terminal's Ctrl+C means.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from ..process import Exit
from ..runs.workspace import Workspace
from .executor import Trial, TrialEnd, report
from .ray_executor import (DEFAULT_TRIALS_PER_GPU, RayExecutor, RemoteEpoch, check_not_bundled, trial_from_dict,
                           trial_to_dict)
from .ray_security import OVERRIDE_FLAG, RaySecurityError

_STDERR_TAIL_LINES = 200


# ---------------------------------------------------------------------------------------------------- the helper
class _Wire:
    """The protocol's standard output: one JSON object per line, from any thread."""

    def __init__(self, fh):
        self._fh, self._lock = fh, threading.Lock()

    def send(self, obj: Mapping[str, Any]) -> None:
        text = json.dumps(dict(obj), default=str)
        with self._lock:
            try:
                self._fh.write(text + "\n")
                self._fh.flush()
            except (OSError, ValueError):  # the reader is gone
                pass


def _protocol_stdout():
    """The real standard output for the protocol; file descriptor 1 then points at standard error, so that
    nothing else (Ray, its C++ core, a library's print) can mix into the protocol."""
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(fd, "w", encoding="utf-8", buffering=1)


def _listen(stop: threading.Event, executor: RayExecutor) -> None:
    for line in sys.stdin:
        try:
            doc = json.loads(line)
            cmd = doc.get("cmd")
        except (ValueError, AttributeError):
            continue
        if cmd == "stop":
            stop.set()
        elif cmd == "stop_trial" and isinstance(doc.get("trial"), int):
            executor.stop_trial(doc["trial"], str(doc.get("reason") or "stopped by the sweep"))
    stop.set()  # end of input: the window is gone


def helper_main(argv: Sequence[str] | None = None, returned_files_hook=None) -> int:
    """The helper process (module docstring); returns its exit status. ``returned_files_hook``: the
    RayExecutor's (tests damage returned files with it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    p = argparse.ArgumentParser(prog="python -m dpd_desktop.sweep.ray_helper")
    p.add_argument("--workspace", required=True)
    p.add_argument("--address", required=True)
    p.add_argument(OVERRIDE_FLAG, dest="allow_unauthenticated", action="store_true")
    p.add_argument("--num-cpus", type=int, default=None)
    p.add_argument("--trials-per-gpu", type=int, default=DEFAULT_TRIALS_PER_GPU)
    args = p.parse_args(argv)
    wire = _Wire(_protocol_stdout())
    try:
        first = sys.stdin.readline()
        trials = [trial_from_dict(t) for t in json.loads(first)["trials"]]
    except (ValueError, KeyError, TypeError) as exc:
        wire.send({"event": "error", "kind": "failed", "message": f"cannot read the trials on standard input: {exc}"})
        return int(Exit.USAGE)
    stop = threading.Event()

    def done(end: TrialEnd) -> None:
        wire.send({"event": "done", "trial": end.trial.number, "state": end.state, "run_dir": end.run_dir,
                   "message": end.message})

    executor = RayExecutor(args.address, Workspace(args.workspace), allow_unauthenticated=args.allow_unauthenticated,
                           trials_per_gpu=args.trials_per_gpu, num_cpus=args.num_cpus, on_event=wire.send,
                           returned_files_hook=returned_files_hook)
    threading.Thread(target=_listen, args=(stop, executor), name="dpd-ray-helper-stdin", daemon=True).start()
    try:
        executor.run(trials, done, stop)
    except RaySecurityError as exc:
        wire.send({"event": "error", "kind": "refused", "message": str(exc)})
        return int(Exit.USAGE)
    except Exception as exc:  # noqa: BLE001 - reported to the window, which shows it
        wire.send({"event": "error", "kind": "failed", "message": f"{type(exc).__name__}: {exc}"})
        return int(Exit.FAILED)
    wire.send({"event": "end"})
    return int(Exit.OK)


# ---------------------------------------------------------------------------------------------------- the client
class RayHelperClient:
    """The core-side client of the helper (no Qt): start it, iterate its events, stop it.

    Iterating yields, in arrival order, a :class:`~dpd_desktop.sweep.executor.TrialEnd` for each ``done`` line
    (``trial`` the :class:`Trial` that was sent) and the other events as dicts; it ends when the helper closes its
    output. Then :attr:`returncode` is its exit status and :attr:`error` the message of an ``error`` event (None
    after a sweep that ran). Blocking: the window iterates on a job thread.
    """

    def __init__(self, proc: subprocess.Popen, trials: Sequence[Trial]):
        self._proc = proc
        self._trials = {t.number: t for t in trials}
        self._stderr: deque[str] = deque(maxlen=_STDERR_TAIL_LINES)
        self._lock = threading.Lock()
        self.error: str | None = None
        self.refused = False
        self._err_thread = threading.Thread(target=self._read_stderr, name="dpd-ray-helper-stderr", daemon=True)
        self._err_thread.start()

    @classmethod
    def start(cls, address: str, trials: Sequence[Trial], workspace: Workspace | str | Path, *,
              allow_unauthenticated: bool = False, num_cpus: int | None = None,
              trials_per_gpu: int = DEFAULT_TRIALS_PER_GPU, env: Mapping[str, str] | None = None,
              command: Sequence[str] | None = None) -> "RayHelperClient":
        """Start the helper for ``trials`` on the cluster at ``address`` (or ``"local"``), importing the runs into
        ``workspace``. ``env``: variables added to the helper's environment (a cluster's token settings).
        ``command``: what runs the helper, before its arguments (default: this interpreter's ``-m
        dpd_desktop.sweep.ray_helper``; a test's own helper script)."""
        check_not_bundled()  # RuntimeError in the packaged app: it holds no Ray (ray_executor.IN_BUNDLE)
        root = workspace.root if isinstance(workspace, Workspace) else Path(workspace)
        cmd = [*(command or (sys.executable, "-m", "dpd_desktop.sweep.ray_helper")), "--workspace", str(root),
               "--address", address, "--trials-per-gpu", str(int(trials_per_gpu))]
        if allow_unauthenticated:
            cmd.append(OVERRIDE_FLAG)
        if num_cpus is not None:
            cmd += ["--num-cpus", str(int(num_cpus))]
        full_env = dict(os.environ)
        full_env.update(env or {})
        # the helper imports this very package: a source checkout's root goes first on its path (an installed
        # package is found as it is; its site-packages is never put before the standard library)
        checkout = Path(__file__).resolve().parent.parent.parent
        if (checkout / "pyproject.toml").is_file():
            full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(checkout), full_env.get("PYTHONPATH", "")]))
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=full_env, text=True, encoding="utf-8", bufsize=1)
        client = cls(proc, trials)
        proc.stdin.write(json.dumps({"trials": [trial_to_dict(t) for t in trials]}) + "\n")
        proc.stdin.flush()
        return client

    def _read_stderr(self) -> None:
        for line in self._proc.stderr:
            with self._lock:
                self._stderr.append(line.rstrip("\n"))

    @property
    def stderr_tail(self) -> str:
        """The helper's last lines of standard error (Ray's logs), for a failure's details."""
        with self._lock:
            return "\n".join(self._stderr)

    def __iter__(self) -> Iterator[TrialEnd | dict]:
        for line in self._proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if not isinstance(ev, dict):
                continue
            if ev.get("event") == "done" and ev.get("trial") in self._trials:
                yield TrialEnd(self._trials[ev["trial"]], str(ev.get("state")), ev.get("run_dir"),
                               str(ev.get("message") or ""))
                continue
            if ev.get("event") == "error":
                self.error = str(ev.get("message"))
                self.refused = ev.get("kind") == "refused"
            yield ev
        self._proc.wait()

    def _send(self, cmd: dict) -> None:
        try:
            self._proc.stdin.write(json.dumps(cmd) + "\n")
            self._proc.stdin.flush()
        except (OSError, ValueError):
            pass

    def stop(self) -> None:
        """Ask the helper to stop the sweep (running trials end cancelled; the rest are not started)."""
        self._send({"cmd": "stop"})

    def stop_trial(self, number: int, reason: str) -> None:
        """Ask the helper to stop trial ``number`` with ``reason`` (a pruned trial; its run ends cancelled)."""
        self._send({"cmd": "stop_trial", "trial": int(number), "reason": reason})

    def kill(self) -> None:
        """End the helper at once (SIGKILL to this client's own process): a ``local`` cluster it started stops by
        itself (ray_security.py ``LocalCluster``); trials running elsewhere see the driver gone and cancel."""
        if self._proc.poll() is None:
            self._proc.kill()

    def close(self, timeout_s: float = 60.0) -> int:
        """Close the helper's input (it stops the sweep if still running), wait for it; returns its exit status
        (it is killed after ``timeout_s``)."""
        try:
            self._proc.stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(10)
        self._err_thread.join(5)
        return self._proc.returncode

    @property
    def returncode(self) -> int | None:
        return self._proc.poll()


# ---------------------------------------------------------------------------------------------------- the executor
class RayHelperError(RuntimeError):
    """The helper could not run the sweep (Ray missing, the cluster unreachable, the helper died); the message
    says what it reported."""


class HelperExecutor:
    """The executor protocol (sweep/executor.py) through the helper process: the window's way to a cluster (its
    :class:`~dpd_desktop.sweep.runner.SweepRun` runs on a worker thread, Ray in the helper).

    Each :meth:`run` starts one helper (``start``: :meth:`RayHelperClient.start`, a fake in tests) for its trials;
    ``on_start`` is called at a trial's ``started`` event (its run folder ``runs/<run_id>`` of the workspace),
    ``on_epoch`` at each ``epoch`` event with a :class:`~dpd_desktop.sweep.ray_executor.RemoteEpoch` (a reason it
    returns is sent as ``stop_trial``: an Optuna sweep prunes through the window too); every event also goes to
    ``on_event`` (the view's live rows, warnings). ``stop`` set: ``stop`` is sent.

    Raises (from :meth:`run`): :class:`RaySecurityError` when the helper reports the policy's refusal (nothing was
    sent to the cluster), :class:`RayHelperError` for another error of the helper (the message names it; trials
    that did not end are reported failed first).
    """

    def __init__(self, address: str, workspace: Workspace, *, allow_unauthenticated: bool = False,
                 num_cpus: int | None = None, trials_per_gpu: int = DEFAULT_TRIALS_PER_GPU,
                 env: Mapping[str, str] | None = None, on_event=None, start=None):
        self.address, self.workspace = address, workspace
        self.allow_unauthenticated, self.num_cpus, self.trials_per_gpu = allow_unauthenticated, num_cpus, \
            trials_per_gpu
        self.env, self.on_event = dict(env or {}), on_event
        self._start = start or RayHelperClient.start

    def run(self, trials: Sequence[Trial], on_done, stop: threading.Event, on_epoch=None, on_start=None,
            on_many=None) -> None:
        if not trials:
            return
        if stop.is_set():
            report([TrialEnd(t, "cancelled", None, "the sweep was stopped before this trial started") for t in trials],
                   on_done, on_many)
            return
        client = self._start(self.address, trials, self.workspace, allow_unauthenticated=self.allow_unauthenticated,
                             num_cpus=self.num_cpus, trials_per_gpu=self.trials_per_gpu, env=self.env)
        by_number = {t.number: t for t in trials}
        ended: set[int] = set()
        stopped: dict[int, str] = {}
        finished = threading.Event()

        def watch_stop() -> None:
            while not finished.wait(0.2):
                if stop.is_set():
                    client.stop()
                    return

        watcher = threading.Thread(target=watch_stop, name="dpd-ray-helper-stop", daemon=True)
        watcher.start()
        try:
            for ev in client:
                if isinstance(ev, TrialEnd):
                    n = ev.trial.number
                    ended.add(n)
                    msg = stopped[n] if ev.state == "cancelled" and n in stopped else ev.message
                    on_done(TrialEnd(ev.trial, ev.state, ev.run_dir, msg))
                    continue
                if self.on_event is not None:
                    self.on_event(ev)
                trial = by_number.get(ev.get("trial")) if isinstance(ev.get("trial"), int) else None
                if trial is None:
                    continue
                if ev.get("event") == "started" and on_start is not None and ev.get("run_id"):
                    on_start(trial, str(Path(self.workspace.runs_dir) / str(ev["run_id"])))
                elif ev.get("event") == "epoch" and on_epoch is not None and trial.number not in stopped:
                    epoch = RemoteEpoch.from_event(ev)
                    reason = on_epoch(trial, epoch) if epoch is not None else None
                    if reason:
                        stopped[trial.number] = str(reason)
                        client.stop_trial(trial.number, str(reason))
        finally:
            finished.set()
            rc = client.close()
            watcher.join(5)
        if client.refused:
            raise RaySecurityError(client.error or "the Ray cluster was refused")
        missing = [t for n, t in by_number.items() if n not in ended]
        if client.error or rc != 0 or missing:
            why = client.error or f"the Ray helper exited with status {rc}"
            for t in missing:
                on_done(TrialEnd(t, "failed", None, f"the Ray helper ended before this trial did: {why}"))
            if client.error or rc != 0:
                raise RayHelperError(f"the Ray sweep failed: {why}")


if __name__ == "__main__":
    sys.exit(helper_main())
