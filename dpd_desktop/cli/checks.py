"""Argument checks of the training commands that need no dataset, run before anything is loaded or created, so that
a bad option exits 2 (:data:`~dpd_desktop.process.Exit.USAGE`) naming the option and no run folder exists.

:func:`preflight` adds to :meth:`ExperimentConfig.validate` (which checks the CPU threads against the cores) what
needs the machine or the workspace: the device exists, the PA run of a DPD is a PA run folder.
:func:`option_message` adds the command line's option to a :class:`~dpd_desktop.config.ConfigError`'s message.
"""
from __future__ import annotations

from ..config import ConfigError, ExperimentConfig
from ..runs.record import RecordError, RunRecord
from ..runs.workspace import Workspace


def preflight(cfg: ExperimentConfig, ws: Workspace) -> None:
    """The checks of a validated ``cfg`` that need no dataset (see the module docstring).

    Raises:
        ConfigError: naming the field (``device``, ``pa_run``).
    """
    # here, not at the top: resolving the device imports PyTorch (0.75 s), which `dpd-desktop --help` and `runs`
    # do not need; the training commands import it anyway
    from ..training.device import resolve_device
    from ..training.errors import TrainingError

    try:
        resolve_device(cfg.device)
    except TrainingError as exc:
        raise ConfigError("device", str(exc).removeprefix("device: ")) from exc
    if cfg.step == "dpd":
        try:
            run_dir = ws.resolve(cfg.pa_run)
            rec = RunRecord.open(run_dir)
        except FileNotFoundError as exc:
            raise ConfigError("pa_run", str(exc)) from exc
        except RecordError as exc:
            raise ConfigError("pa_run", f"not a readable run folder: {exc}") from exc
        if rec.step != "pa":
            raise ConfigError("pa_run", f"{run_dir.name} is a {rec.step.upper()} run; a DPD needs a PA run")


def option_message(exc: ConfigError) -> str:
    """The message of a ConfigError with the command line's option named, e.g.
    ``"frame_length: expected a positive integer, got 0 (option --frame-length)"``."""
    return f"{exc} (option --{exc.field.replace('_', '-')})"
