"""A run's resource limits and the failures they explain: CPU threads, the CUDA memory ceiling, the wall-clock limit,
CUDA out-of-memory and a non-finite training loss; the workspace's defaults for the limits; the fault that tests
give a trainer to inject an out-of-memory error or a NaN loss (:class:`FaultHook`).
"""
from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import torch

from ..config import ConfigError, ExperimentConfig
from ..runs.settings import FILE_NAME as SETTINGS_FILE, WorkspaceSettings
from . import cpu_threads
from .errors import TrainingError

TIME_LIMIT_REASON = "time limit"
#: PyTorch's thread count when this module is imported (before any run set one): a CPU run that sets none and runs
#: the reference kernel goes back to it, whatever an earlier run in this process (the window's) set.
TORCH_DEFAULT_THREADS = torch.get_num_threads()
OOM_REMEDY = "lower batch size or hidden size / set --cuda-memory-fraction"
NONFINITE_REMEDY = "lower the learning rate, check the data for NaN"


def with_workspace_defaults(cfg: ExperimentConfig, workspace) -> ExperimentConfig:
    """A copy of ``cfg`` whose unset limits (threads, CUDA memory fraction, time limit) take ``workspace``'s
    settings.json defaults (an object without ``root``: none). The device default is applied by the command line,
    where "unset" can be told from "auto".

    Raises:
        SettingsError: settings.json is unreadable or has a bad field. ConfigError: a default this run cannot use
            (the message names settings.json and its field).
    """
    root = getattr(workspace, "root", None)
    settings = WorkspaceSettings.load(root) if root is not None else WorkspaceSettings()
    changes = {}
    for name, default in (("threads", settings.default_threads),
                          ("cuda_memory_fraction", settings.default_cuda_memory_fraction),
                          ("time_limit_s", settings.default_time_limit_s)):
        if getattr(cfg, name) is None and default is not None:
            changes[name] = default
    if not changes:
        return cfg
    out = dataclasses.replace(cfg, **changes)
    try:
        out.validate()
    except ConfigError as exc:
        if exc.field not in changes:
            raise
        where = Path(workspace.root) / SETTINGS_FILE
        raise ConfigError(exc.field, f"{str(exc)[len(exc.field) + 2:]} (the default_{exc.field} of {where})") from None
    return out


def apply_device_limits(cfg: ExperimentConfig, device: torch.device) -> str | None:
    """CPU threads (``cfg.threads``; on the CPU, unset, the rule of :func:`.cpu_threads.choose_threads`) and, on
    CUDA, the memory ceiling ``cfg.cuda_memory_fraction`` of the card (``torch.cuda.set_per_process_memory_fraction``;
    allocations beyond it raise out-of-memory). Returns the CPU threads' log line (None on CUDA)."""
    note = None
    if device.type == "cpu":
        threads, note = cpu_threads.choose_threads(cfg.threads, cfg.kernel, TORCH_DEFAULT_THREADS)
        torch.set_num_threads(threads)
    elif cfg.threads:
        torch.set_num_threads(cfg.threads)
    if cfg.cuda_memory_fraction is not None and device.type == "cuda":
        torch.cuda.set_per_process_memory_fraction(float(cfg.cuda_memory_fraction), device)
    return note


class StopRequest:
    """A run's request to stop after the current batch (thread-safe): :meth:`request` (a user's Stop, a sweep's
    pruning: the first reason given is kept) or the run's time limit (:meth:`start_clock`: a daemon timer thread
    requests the stop; :attr:`timed_out` says it did)."""

    def __init__(self):
        self._event = threading.Event()
        self._reason = ""
        self._timer: threading.Timer | None = None
        self.timed_out = False

    def request(self, reason: str = "") -> None:
        self._reason = self._reason or reason
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def start_clock(self, seconds: float | None) -> None:
        """Request the stop once ``seconds`` of wall clock have passed (None or 0: never)."""
        if seconds:
            self._timer = threading.Timer(float(seconds), self._time_out)
            self._timer.daemon = True
            self._timer.start()

    def _time_out(self) -> None:
        self.timed_out = True
        self.request()

    def stop_clock(self) -> None:
        t, self._timer = self._timer, None
        if t is not None:
            t.cancel()

    @property
    def reason(self) -> str:
        """:data:`TIME_LIMIT_REASON` when the time limit stopped the run, else the reason given ("" for none)."""
        return TIME_LIMIT_REASON if self.timed_out else self._reason


def oom_error(device, epoch: int, batch: int | str, exc: BaseException) -> TrainingError:
    """The failure of an out-of-memory error at ``epoch`` (0-based), ``batch`` (0-based, or "evaluation")."""
    where = f"batch {batch}" if isinstance(batch, int) else str(batch)
    first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
    return TrainingError(f"out of memory on {device} at epoch {epoch}, {where}: {OOM_REMEDY} ({first})")


def nonfinite_error(device, epoch: int, losses: torch.Tensor, lr: float) -> TrainingError:
    """The failure of an epoch whose mean training loss is not finite; names the first batch (0-based) whose loss
    is not finite (``losses``: the epoch's (n_batches,) float32 batch losses)."""
    bad = (~torch.isfinite(losses.detach().cpu())).nonzero()
    batch = int(bad[0, 0]) if bad.numel() else "?"
    value = float(losses.detach().cpu()[batch]) if bad.numel() else float("nan")
    return TrainingError(f"training diverged on {device} at epoch {epoch}, batch {batch}: the training loss is "
                         f"{value} (lr {lr:g}); {NONFINITE_REMEDY}; the best checkpoint so far (best.pt) is kept")


def is_oom(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


@dataclasses.dataclass(frozen=True)
class FaultHook:
    """A fault injected into a run (tests: ``Trainer(config, fault=FaultHook("oom", 1, 2))``) when batch ``batch``
    of epoch ``epoch`` (both 0-based, counted from the first epoch the trainer runs) is gathered: ``kind`` "oom"
    raises ``torch.cuda.OutOfMemoryError``; "nan" makes that batch's input NaN (its loss is NaN). Raises ValueError
    for another kind."""

    kind: str
    epoch: int
    batch: int

    def __post_init__(self):
        if self.kind not in ("oom", "nan"):
            raise ValueError(f"fault kind {self.kind!r}: expected 'oom' or 'nan'")

    def wrap(self, loader) -> "_FaultyLoader":
        """``loader`` (data/framing.py) with this fault in its ``gather``."""
        return _FaultyLoader(loader, self)


class _FaultyLoader:
    """A loader whose ``gather`` of the fault's batch fails (see :class:`FaultHook`); everything else is the
    loader's."""

    def __init__(self, loader, fault: FaultHook):
        self._loader, self._fault = loader, fault
        self._epoch, self._batch = -1, 0

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def __len__(self) -> int:
        return len(self._loader)

    def epoch(self):
        self._epoch, self._batch = self._epoch + 1, 0
        return self._loader.epoch()

    def gather(self, idx):
        xb, yb = self._loader.gather(idx)
        hit = (self._epoch, self._batch) == (self._fault.epoch, self._fault.batch)
        self._batch += 1
        if hit and self._fault.kind == "oom":
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (injected by a test fault)")
        return (torch.full_like(xb, float("nan")), yb) if hit else (xb, yb)
