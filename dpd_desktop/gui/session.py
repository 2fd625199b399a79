"""The window's session model, free of Qt: run state, progress read-out and ETA, enabled controls, texts.

Run state: ``None`` (no run yet) or one of :data:`dpd_desktop.runs.states.RUN_STATES` (``queued`` while the
dataset loads); a requested stop is the flag :attr:`Session.cancel_requested`, not a state.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable

from ..runs.labels import epoch_of
from ..runs.states import FINAL_STATES, LIVE_STATES
from . import history

STOPPING_SUFFIX = " · stopping after this batch…"
IDLE_TEXT = "Idle"
PREPARING_TEXT = "Preparing data and model…"
QUEUED_TEXT = "Waiting for the dataset to load…"


def plural(n: int, word: str, many: str | None = None) -> str:
    """``"1 epoch"``, ``"2 epochs"``, ``"1,234 samples"`` (``many``: the plural when it is not ``word + "s"``)."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def format_duration(seconds: float | None) -> str:
    """A time span in words: "42 s", "5 min", "1 h 12 min"; "—" for None, NaN, inf or a negative value."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "—"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    h, m = divmod(int(round(seconds / 60)), 60)
    return f"{h} h {m} min"


def epoch_pace_s(batch: int, batches: int, elapsed_s: float | None, sec_per_epoch: float | None) -> float | None:
    """Seconds per epoch: the last completed epoch's duration when there is one, else (first epoch) the pace so far
    extrapolated to the whole epoch, ``elapsed_s / batch * batches``; None when neither is known."""
    if sec_per_epoch:
        return sec_per_epoch
    if elapsed_s:
        return elapsed_s / max(batch, 1) * batches
    return None


def remaining_s(epoch: int, epochs: int, batch: int, batches: int, elapsed_s: float | None,
                eta_s: float | None, sec_per_epoch: float | None) -> float | None:
    """Seconds left at batch ``batch`` (1-based) of epoch ``epoch`` (0-based): this epoch's rest (``eta_s``, else
    pace x fraction of batches left) plus later epochs at :func:`epoch_pace_s`; None when no pace is known."""
    pace = epoch_pace_s(batch, batches, elapsed_s, sec_per_epoch)
    if pace is None:
        return None
    this_epoch = eta_s if eta_s is not None else pace * (1 - batch / max(batches, 1))
    return this_epoch + (epochs - epoch - 1) * pace


@dataclass(frozen=True)
class Controls:
    """Which of the window's controls are enabled."""

    start: bool
    stop: bool
    open_dataset: bool  # Open dataset…, Open dataset folder…, Demo data, dropping a file
    form_editable: bool  # the Model and Training forms
    step_choice: bool  # the PA / DPD step buttons
    pa_run_choice: bool  # the PA run combo of the DPD step
    preview_period: bool  # the "Preview every" field
    run_dpd: bool  # Run DPD… of the ended run
    run_dpd_saved: bool  # Run DPD of a saved DPD run…


@dataclass(frozen=True)
class SessionState:
    """Everything the controls depend on. ``run``: None or one of RUN_STATES; ``loading``/``exporting``: a dataset
    load / Run DPD job in flight; ``step``: "pa" or "dpd"; ``dpd_run_ready``: the ended run is a DPD run with a
    checkpoint."""

    run: str | None = None
    cancel_requested: bool = False
    loading: bool = False
    exporting: bool = False
    step: str = "pa"
    pa_run_available: bool = False
    preview: bool = False
    dpd_run_ready: bool = False


def controls(s: SessionState) -> Controls:
    """The enabled controls as a function of ``s`` (no other input)."""
    live = s.run in LIVE_STATES
    busy = live or s.loading
    return Controls(
        start=not busy,
        stop=live and not s.cancel_requested,
        open_dataset=not busy,
        form_editable=not live,
        step_choice=not live,
        pa_run_choice=not live and s.step == "dpd" and s.pa_run_available,
        preview_period=s.preview,  # also while running: the trainer takes a new period (set_preview_every)
        run_dpd=not live and not s.exporting and s.run in ("succeeded", "cancelled") and s.dpd_run_ready,
        run_dpd_saved=not s.exporting,
    )


def is_dpd_run(run_dir: str) -> bool:
    """:func:`dpd_desktop.export.dpd_export.is_dpd_run`, imported late: it brings PyTorch (see gui/preload.py)."""
    from ..export.dpd_export import is_dpd_run as check

    return check(run_dir)


# ---------------------------------------------------------------------------------------------------- outcome texts
#: Where a DPD run's output-power change [dB] (RMS of PA(DPD(x)) vs PA(x) on the test split) may be found, first wins.
POWER_CHANGE_KEYS = ("output_power_change_db", "rms_out_diff_db")
POWER_WARNING_DB = 0.5  # the trainer's own threshold (training/evaluation.py output_power_report)


def output_power_change_db(*mappings) -> float | None:
    """The DPD's output-power change [dB] from RunFinished.extra / metrics / results attrs; None when absent."""
    for m in mappings:
        for key in POWER_CHANGE_KEYS:
            v = history.to_float((m or {}).get(key)) if key in (m or {}) else math.nan
            if math.isfinite(v):
                return v
    return None


def finished_message(ev) -> str:
    """The banner text of a ``RunFinished``: duration, selected epoch, val/test NMSE [dB], test ACLR [dBc], EVM."""
    v, t = dict(ev.val_metrics or {}), dict(ev.test_metrics or {})
    bits = [f"Run finished in {format_duration(ev.wall_s)}. Selected epoch {ev.best_epoch}"]
    if "NMSE" in v:
        bits.append(f"val NMSE {history.fmt(history.to_float(v['NMSE']))} dB")
    if "NMSE" in t:
        bits.append(f"test NMSE {history.fmt(history.to_float(t['NMSE']))} dB")
    power = output_power_change_db(getattr(ev, "extra", None), t)
    if "ACLR_AVG" in t and math.isfinite(history.to_float(t["ACLR_AVG"])):
        aclr = f"test ACLR {history.to_float(t['ACLR_AVG']):.2f} dBc"
        bits.append(aclr + (f" (output power {power:+.2f} dB with DPD)" if power is not None else ""))
    elif power is not None:
        bits.append(f"output power {power:+.2f} dB with DPD")
    if "EVM" in t and math.isfinite(history.to_float(t["EVM"])):
        bits.append(f"test EVM {history.to_float(t['EVM']):.2f} dB")
    extra = dict(getattr(ev, "extra", None) or {})
    if extra.get("metric_profile"):
        bits.append(f"metrics: {extra['metric_profile']}")
    text = " · ".join(bits) + "."
    caveat = power_caveat(power)
    return text + ("\n" + caveat if caveat else "")


def power_caveat(power_db: float | None) -> str | None:
    """The caveat shown with a DPD run whose output power changes by more than :data:`POWER_WARNING_DB` [dB] (after
    its end, after Run DPD, when reopened); None otherwise."""
    if power_db is None or not math.isfinite(power_db) or abs(power_db) <= POWER_WARNING_DB:
        return None
    return (f"The DPD changes the output power by {power_db:+.2f} dB (more than {POWER_WARNING_DB} dB): part of "
            "its ACLR gain may come from a lower drive level.")


def cancelled_message(ev) -> str:
    """The banner text of a ``RunCancelled``: epochs completed and whether a checkpoint is kept."""
    best = (f"; the best checkpoint so far (epoch {ev.best_epoch}) is kept" if ev.best_epoch is not None
            else "; no epoch completed, so there is no checkpoint")
    n, why = ev.epochs_completed, f" ({ev.reason})" if getattr(ev, "reason", "") else ""
    return f"Run stopped{why} after {plural(n, 'completed epoch')}{best}."


def failed_message(ev) -> str:
    """The banner text of a ``RunFailed`` (its message is already in plain words)."""
    return f"The run failed: {ev.message}"


# ---------------------------------------------------------------------------------------------------- the session
class Session:
    """The run state of the window and what follows from it; listeners are called after every change.

    Args:
        dpd_run_check: ``check(run_dir) -> bool``, whether a run folder is a DPD run with a checkpoint; asked once
            when a run ends (default: the core's ``is_dpd_run``).
    """

    def __init__(self, dpd_run_check: Callable[[str], bool] | None = None):
        self._dpd_run_check = dpd_run_check or is_dpd_run
        self._state = SessionState()
        self._listeners: list[Callable[[Session], None]] = []
        self.config: Any = None  # the ExperimentConfig of the current/last run
        self.run_id: str | None = None
        self.run_dir: str | None = None
        self.epochs = 0
        self.epochs_done = 0
        self.sec_per_epoch: float | None = None
        self.lr: float | None = None
        self.progress = 0.0  # fraction of the run done, 0..1
        self.power_caveat: str | None = None  # the DPD's output-power caveat of the run shown (power_caveat)
        self._text = IDLE_TEXT
        self._busy_checks: list[Callable[[], str | None]] = []

    # -- reading ---------------------------------------------------------------------------------------------------
    @property
    def snapshot(self) -> SessionState:
        return self._state

    @property
    def state(self) -> str | None:
        """None (no run yet) or one of RUN_STATES."""
        return self._state.run

    @property
    def is_live(self) -> bool:
        """A run is queued or running (a cancel may be in progress)."""
        return self._state.run in LIVE_STATES

    @property
    def cancel_requested(self) -> bool:
        return self._state.cancel_requested

    def controls(self) -> Controls:
        return controls(self._state)

    @property
    def progress_text(self) -> str:
        """The progress read-out; while a stop is pending it says so."""
        if self._state.cancel_requested and self.is_live:
            return self._text + STOPPING_SUFFIX
        return self._text

    # -- what a quit would stop ---------------------------------------------------------------------------------
    def add_busy_check(self, check: Callable[[], str | None]) -> None:
        """Add ``check() -> str | None``: what another part keeps busy ("2 queued runs"), None when idle."""
        self._busy_checks.append(check)

    def busy(self) -> list[str]:
        """What quitting now would stop, in words ([] when nothing): the live run, then every added check's."""
        out = []
        if self.is_live:
            out.append(self.live_run_text())
        out += [t for t in (check() for check in self._busy_checks) if t]
        return out

    def live_run_text(self) -> str:
        """The live run in words: "the PA run 2026-12-01-101500-pa-gru23 (epoch 3 of 0–149)"."""
        step = str(getattr(self.config, "step", "") or "").upper()
        what = f"the {step} run" if step else "the run"
        if self._state.run == "queued":
            return f"{what} waiting for its dataset"
        where = f" {self.run_id}" if self.run_id else ""
        epoch = f" (epoch {epoch_of(min(self.epochs_done, self.epochs - 1), self.epochs)})" if self.epochs else ""
        return f"{what}{where}{epoch}"

    def subscribe(self, listener: Callable[[Session], None]) -> None:
        self._listeners.append(listener)

    def _changed(self) -> None:
        for fn in list(self._listeners):
            fn(self)

    def update(self, **flags) -> None:
        """Set SessionState fields other than the run state (``loading``, ``exporting``, ``step``,
        ``pa_run_available``, ``preview``). Raises ValueError for ``run``/``cancel_requested``/unknown names."""
        if {"run", "cancel_requested"} & flags.keys():
            raise ValueError("the run state changes only through the session's transitions")
        new = replace(self._state, **flags)
        if new != self._state:
            self._state = new
            self._changed()

    # -- transitions -----------------------------------------------------------------------------------------------
    def _set_run(self, run: str | None, cancel_requested: bool = False, **flags) -> None:
        self._state = replace(self._state, run=run, cancel_requested=cancel_requested, **flags)
        self._changed()

    def _reset(self, config) -> None:
        self.config = config
        self.run_id = self.run_dir = None
        self.epochs = int(getattr(config, "epochs", 0) or 0)
        self.epochs_done = 0
        self.sec_per_epoch = self.lr = None
        self.progress = 0.0
        self.power_caveat = None

    def queue(self, config=None) -> bool:
        """A start that waits for its dataset: → ``queued``. False (nothing changes) while a run is live."""
        if self.is_live:
            return False
        self._reset(config)
        self._text = QUEUED_TEXT
        self._set_run("queued", dpd_run_ready=False)
        return True

    def start(self, config=None) -> bool:
        """→ ``running`` (from no run, a final state or ``queued``). False while running: no double start."""
        if self._state.run == "running":
            return False
        if self._state.run != "queued" or config is not None:
            self._reset(config if config is not None else self.config)
        self._text = PREPARING_TEXT
        self._set_run("running", dpd_run_ready=False)
        return True

    def request_cancel(self) -> bool:
        """Stop: a queued run ends ``cancelled`` at once, a running one sets the flag. False when nothing to stop."""
        if self._state.run == "queued":
            self._text = "Stopped before it started"
            self._set_run("cancelled")
            return True
        if self._state.run != "running" or self._state.cancel_requested:
            return False
        self._set_run("running", cancel_requested=True)
        return True

    def refuse_queued(self, message: str) -> bool:
        """A declined queued start → ``cancelled`` ("Not started: <message>"). False when no run is queued."""
        if self._state.run != "queued":
            return False
        self._text = f"Not started: {message}"
        self._set_run("cancelled")
        return True

    def fail_queued(self, message: str = "the dataset could not be loaded") -> bool:
        """A queued run's dataset failed to load → ``failed``. False when no run is queued."""
        if self._state.run != "queued":
            return False
        self._text = f"Not started: {message}"
        self._set_run("failed")
        return True

    # -- the trainer's events (plain dataclasses of dpd_desktop.runs.events) ----------------------------------
    def on_started(self, ev) -> None:
        """RunStarted: "E epochs (0–E−1) · B batches per epoch · P parameters"."""
        self.run_id, self.run_dir, self.epochs = ev.run_id, ev.run_dir, ev.epochs
        self._text = (f"{plural(ev.epochs, 'epoch')} (0–{max(ev.epochs - 1, 0)}) · {plural(ev.batches_per_epoch, 'batch', 'batches')} per epoch · "
                      f"{plural(ev.n_params, 'parameter')}")
        self._changed()

    def on_batch(self, ev) -> None:
        """BatchProgress: progress fraction, "Epoch e of 0–E · batch b/B · s/epoch · time left · lr". Ignored unless
        running."""
        if self._state.run != "running":
            return
        frac = (ev.epoch + ev.batch / max(ev.batches, 1)) / max(ev.epochs, 1)
        self.progress = min(max(frac, 0.0), 1.0)
        left = remaining_s(ev.epoch, ev.epochs, ev.batch, ev.batches, ev.elapsed_s, ev.eta_s, self.sec_per_epoch)
        parts = [f"Epoch {epoch_of(ev.epoch, ev.epochs)}", f"batch {ev.batch:,}/{ev.batches:,}"]
        if self.sec_per_epoch:
            parts.append(f"{self.sec_per_epoch:.1f} s/epoch")
        if left is not None:
            parts.append(f"{format_duration(left)} left")
        if self.lr is not None:
            parts.append(f"lr {self.lr:.3g}")
        self._text = " · ".join(parts)
        self._changed()

    def on_epoch(self, ev) -> None:
        """EpochEnded: the pace (this epoch's seconds), the lr of its row, "Epoch e of 0–E done · … left"."""
        self.epochs_done += 1
        if ev.epoch_seconds and ev.epoch_seconds > 0:
            self.sec_per_epoch = ev.epoch_seconds
        lr = history.value(ev.row, "lr")
        if math.isfinite(lr):
            self.lr = lr
        self.progress = min((ev.epoch + 1) / max(ev.epochs, 1), 1.0)
        parts = [f"Epoch {epoch_of(ev.epoch, ev.epochs)} done"]
        if self.sec_per_epoch:
            left = (ev.epochs - ev.epoch - 1) * self.sec_per_epoch
            parts += [f"{self.sec_per_epoch:.1f} s/epoch", f"{format_duration(left)} left"]
        if self.lr is not None:
            parts.append(f"lr {self.lr:.3g}")
        self._text = " · ".join(parts)
        self._changed()

    def _end(self, state: str, run_dir: str | None) -> None:
        if run_dir:
            self.run_dir = str(run_dir)
        ready = bool(state in ("succeeded", "cancelled") and self.run_dir and self._dpd_run_check(self.run_dir))
        self._set_run(state, dpd_run_ready=ready)

    def on_finished(self, ev) -> None:
        """RunFinished → ``succeeded``: "Finished · N epochs · duration", progress 1."""
        self.progress = 1.0
        self._text = f"Finished · {plural(self.epochs_done, 'epoch')} · {format_duration(ev.wall_s)}"
        self._end("succeeded", ev.run_dir)

    def on_failed(self, ev) -> None:
        """RunFailed → ``failed``."""
        self._text = "Failed"
        self._end("failed", ev.run_dir)

    def on_cancelled(self, ev) -> None:
        """RunCancelled → ``cancelled``: "Stopped · N epochs completed"."""
        self._text = f"Stopped · {plural(ev.epochs_completed, 'epoch')} completed"
        self._end("cancelled", ev.run_dir)

    def on_reopened(self, config, run_id: str, run_dir: str, state: str, epochs_done: int = 0) -> bool:
        """A run reopened from its folder becomes the current run, as if just ended in ``state`` (a final state).
        False (nothing changes) while a run is live or for a state that is not final."""
        if self.is_live or state not in FINAL_STATES:
            return False
        self._reset(config)
        self.run_id, self.epochs_done = run_id, int(epochs_done)
        self.progress = 1.0 if state == "succeeded" else 0.0
        self._text = f"Reopened · {state} · {plural(self.epochs_done, 'epoch')}"
        self._end(state, str(run_dir))
        return True

    def forget_ended_run(self) -> bool:
        """Another dataset was loaded → no run (Idle). False (nothing changes) while a run is live, when there is
        none, or when it ended without a run folder."""
        if self._state.run is None or self.is_live or not self.run_dir:
            return False
        self._reset(None)
        self._text = IDLE_TEXT
        self._set_run(None, dpd_run_ready=False)
        return True

    def on_interrupted(self, run_dir: str | None = None, text: str = "Interrupted") -> None:
        """A queued run's process was killed (gui/queue_panel.py) → ``interrupted``."""
        self._text = text
        self._end("interrupted", run_dir)

    def on_worker_done(self) -> str | None:
        """The training thread ended without an outcome event: → ``cancelled`` (stop requested) or ``failed``;
        returns that state, or None when an outcome had arrived."""
        if self._state.run != "running":
            return None
        state = "cancelled" if self._state.cancel_requested else "failed"
        self._text = "Stopped" if state == "cancelled" else "Failed"
        self._end(state, None)
        return state


__all__ = ["Controls", "Session", "SessionState", "cancelled_message", "controls", "epoch_pace_s", "failed_message",
           "finished_message", "format_duration", "output_power_change_db", "plural", "power_caveat", "remaining_s"]
