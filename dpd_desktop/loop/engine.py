"""The loop: play → capture → align → normalise → measure → update, for N iterations or until the targets are met.

:class:`LoopRunner` drives a :class:`~dpd_desktop.instruments.connect.Bench` and records every iteration as a run
(store.py); observers get the events of events.py. One iteration:

1. **Safety**: the waveform's peak envelope power (PEP, dBm) must not exceed ``power_limit_dbm``; one that would is
   refused before anything is sent (:class:`~dpd_desktop.instruments.errors.PowerLimitError`).
2. **Play**: RF off, load the waveform (its shape), set its RMS level, start the ARB, RF on.
3. **Capture** ``averages`` whole periods (marker-triggered) and average them coherently.
4. **Align** (align.py): the fractional delay τ (estimated and reported) is removed; the complex gain ĝ measured.
5. **Normalise**: y_n = y·e^(−j∠ĝ)/G, G the target gain (|G|² = target output power / input level; without a
   target, the first capture's RMS gain: linearise at the output power reached without DPD).
6. **Measure** (measure.py, dpd_desktop/metrics): NMSE, EVM, ACLR of y_n against x; output power.
7. **Update** (update.py): ILC u ← u + μ(x − y_n), or ILA u ← P(x).

Iteration 0 plays x itself (no DPD: the baseline). After the loop, ``fit`` fits a DPD family to the last waveform
through the training core (fit.py) and plays the fitted DPD's output once more as the last iteration.

Stop (:meth:`LoopRunner.request_stop`, thread-safe) is checked after every instrument call. On a stop or any
failure the generator is **muted first**, then the iteration's run is marked cancelled / failed and loop.json
records the one-line message and whether RF is known to be off.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from .. import __version__
from ..config import ExperimentConfig
from ..instruments.base import dbm_to_mw, peak_dbm, rms_dbm
from ..instruments.errors import InstrumentError, PowerLimitError
from ..instruments.rs_wv import encode_wv
from ..runs.record import DatasetRef
from ..runs.events import SplitResults
from . import events as LE
from .align import align, average_periods
from .config import LoopConfig
from .measure import iq, loop_metrics, psd_mhz
from .signal import LoopSignal, load_signal
from .store import IterationRecord, LoopStore, h5_bytes, plots_svg
from .update import ila_update, ilc_update

__all__ = ["LoopRunner", "LoopResult", "Stopped"]

_AMAM_POINTS = 1500


class Stopped(Exception):
    """The loop was asked to stop."""


@dataclass
class LoopResult:
    loop_id: str
    folder: Path
    state: str
    message: str
    rf_off: bool
    iterations: list[dict[str, Any]] = field(default_factory=list)
    best: dict[str, Any] | None = None
    delay_samples: float | None = None


class LoopRunner:
    """One loop (module docstring).

    Args:
        config: the loop's settings (validated here).
        bench: the instruments (instruments/connect.py ``Bench``); the caller opened them and closes them.
        workspace: where the loop and its iteration runs are recorded (runs/workspace.py ``Workspace``).
        observers: callables ``observer(event)`` called on the loop's thread.
        signal: the reference waveform (default: ``config.signal`` loaded by signal.py).
    """

    def __init__(self, config: LoopConfig, bench, workspace, observers: Iterable[Callable] = (),
                 signal: LoopSignal | None = None):
        self.config = config.validate()
        self.bench = bench
        self.workspace = workspace
        self.observers = list(observers)
        self.signal = signal
        self._stop = threading.Event()
        self._trainer = None
        self.store: LoopStore | None = None
        self._record: IterationRecord | None = None
        self._delays: list[float] = []

    # ---------------------------------------------------------------- control
    def request_stop(self) -> None:
        """Ask the loop to stop (thread-safe): it mutes the generator at its next step and ends cancelled."""
        self._stop.set()
        trainer = self._trainer
        if trainer is not None:
            trainer.request_cancel("the loop was stopped")

    def _check(self) -> None:
        if self._stop.is_set():
            raise Stopped()

    def _emit(self, ev) -> None:
        for o in self.observers:
            o(ev)

    def _log(self, text: str) -> None:
        if self._record is not None:
            self._record.log(text)
        self._emit(LE.LoopLog(text))

    # ---------------------------------------------------------------- the loop
    def run(self) -> LoopResult:
        cfg = self.config
        self.store = store = LoopStore.create(self.workspace, cfg.to_dict(), label=(cfg.name or cfg.strategy))
        state, message = "failed", ""
        try:
            sig = self.signal or load_signal(cfg.signal, cfg.signal_samples, cfg.signal_seed)
            self.signal = sig
            store.update(signal=sig.describe(), bench=dict(self.bench.describe))
            idents = self._setup()
            store.update(identities=idents)
            self._emit(LE.LoopStarted(store.loop_id, str(store.folder), cfg.to_dict(), dict(self.bench.describe),
                                      sig.describe(), idents))
            message = self._iterate(sig)
            state = "succeeded"
        except BaseException as exc:  # noqa: BLE001 - mute first, whatever it was; re-raised when not ours
            rf_note = self._mute()
            state = "cancelled" if isinstance(exc, (Stopped, KeyboardInterrupt)) else "failed"
            if isinstance(exc, (Stopped, KeyboardInterrupt)):
                message = "stopped by the user; generator muted"
            elif isinstance(exc, InstrumentError):
                message = str(exc)
            elif isinstance(exc, (ValueError, OSError, RuntimeError)):
                message = f"{type(exc).__name__}: {exc}" if not str(exc).startswith(type(exc).__name__) else str(exc)
            else:
                message = f"{type(exc).__name__}: {exc}"
            message = " ".join((message + (f"; {rf_note}" if rf_note else "")).split())
            if self._record is not None:
                self._record.fail(message, cancelled=state == "cancelled")
            rf_off = rf_note is None
            store.finish(state, message, rf_off)
            self._emit(LE.LoopEnded(store.loop_id, str(store.folder), state, message,
                                    len(store.doc["iterations"]), rf_off, store.doc.get("best")))
            if not isinstance(exc, (Stopped, InstrumentError, ValueError, OSError, RuntimeError, KeyboardInterrupt)):
                raise
            return self._result(state, message, rf_off)
        rf_note = self._mute()
        rf_off = rf_note is None
        if rf_note:
            message = f"{message}; {rf_note}"
        store.finish(state, message, rf_off)
        self._emit(LE.LoopEnded(store.loop_id, str(store.folder), state, message, len(store.doc["iterations"]),
                                rf_off, store.doc.get("best")))
        return self._result(state, message, rf_off)

    def _result(self, state, message, rf_off) -> LoopResult:
        s = self.store
        return LoopResult(s.loop_id, s.folder, state, message, rf_off, list(s.doc["iterations"]), s.doc.get("best"),
                          self._delays[0] if self._delays else None)

    def _mute(self) -> str | None:
        """RF off; None when confirmed, else the words for the message."""
        why = self.bench.generator.mute()
        if why is None:
            return None
        return f"RF state unknown: the generator did not confirm RF off ({why}); switch it off at the instrument"

    def _setup(self) -> dict[str, Any]:
        cfg, gen, ana = self.config, self.bench.generator, self.bench.analyzer
        idents = {"generator": gen.identify().to_dict()}
        self._check()
        idents["analyzer"] = ana.identify().to_dict()
        self._check()
        gen.reset()
        self._check()
        ana.reset()
        self._check()
        if hasattr(gen, "set_level_limit"):
            gen.set_level_limit(cfg.power_limit_dbm)
            self._check()
        gen.set_frequency(cfg.center_hz)
        self._check()
        return idents

    def _iterate(self, sig: LoopSignal) -> str:
        cfg = self.config
        x = sig.x * math.sqrt(dbm_to_mw(cfg.input_level_dbm) / float(np.mean(np.abs(sig.x) ** 2)))
        gain = None
        if cfg.target_output_dbm is not None:
            gain = math.sqrt(dbm_to_mw(cfg.target_output_dbm) / dbm_to_mw(cfg.input_level_dbm))
            self.store.update(target_output_dbm=cfg.target_output_dbm, target_gain_db=20 * math.log10(gain))
        u = x.copy()
        message = f"{cfg.iterations} iteration(s) done"
        for k in range(cfg.iterations):
            self._check()
            kind = "no-dpd" if k == 0 else cfg.strategy
            y_n, gain, ev = self._iteration(k, kind, u, x, gain, sig)
            if self._targets_met(ev.metrics):
                message = f"targets met at iteration {k}"
                break
            if k < cfg.iterations - 1:
                if cfg.strategy == "ilc":
                    u = ilc_update(u, x, y_n, cfg.mu)
                else:
                    u, info = ila_update(u, x, y_n, cfg.ila_kind, cfg.ila_order, cfg.ila_memory)
                    self._log(f"ILA fit: {cfg.ila_kind.upper()} K={cfg.ila_order} M={cfg.ila_memory}, "
                              f"train NMSE {info['train_nmse_db']:.2f} dB")
        if cfg.fit:
            self._check()
            from .fit import fit_dpd

            folder = self.store.folder / "datasets" / "dpd-fit"
            try:
                u_fit, run_id, info = fit_dpd(self.workspace, folder, x, u, sig, cfg, self.store.loop_id,
                                              on_trainer=lambda t: setattr(self, "_trainer", t))
            except RuntimeError:
                self._check()  # a fit cancelled by the loop's stop ends the loop cancelled, not failed
                raise
            finally:
                self._trainer = None
            self.store.update(fit=info, datasets=[*self.store.doc["datasets"], str(folder)])
            self._check()
            _, _, ev = self._iteration(len(self.store.doc["iterations"]), f"dpd-{cfg.fit}", u_fit, x, gain, sig,
                                       fit_run=run_id)
            message += f"; {cfg.fit.upper()} DPD fitted (run {run_id}) and played"
        return message

    def _targets_met(self, m) -> bool:
        cfg = self.config
        if cfg.target_aclr_dbc is None and cfg.target_evm_db is None:
            return False
        ok = cfg.target_aclr_dbc is None or m["ACLR_AVG"] <= cfg.target_aclr_dbc
        return ok and (cfg.target_evm_db is None or m["EVM"] <= cfg.target_evm_db)

    # ---------------------------------------------------------------- one iteration
    def _experiment(self, k: int, kind: str, sig: LoopSignal, fit_run: str | None) -> dict[str, Any]:
        cfg = self.config
        backbone = {"no-dpd": "ilc", "ilc": "ilc", "ila": cfg.ila_kind}.get(kind, cfg.fit or "ilc")
        return ExperimentConfig(
            step="dpd", dataset=cfg.signal, backbone=backbone, pa_run=fit_run, metric_profile=cfg.metric_profile,
            name=f"{self.store.loop_id} #{k} {kind}", poly_order=cfg.ila_order if kind == "ila" else cfg.fit_order,
            memory_depth=cfg.ila_memory if kind == "ila" else cfg.fit_memory,
            extra={"loop": {"id": self.store.loop_id, "iteration": k, "kind": kind}}).to_dict()

    def _iteration(self, k: int, kind: str, u: np.ndarray, x: np.ndarray, gain: float | None, sig: LoopSignal,
                   fit_run: str | None = None):
        cfg, gen, ana = self.config, self.bench.generator, self.bench.analyzer
        rec = self._record = IterationRecord(self.workspace, self.store.loop_id, k, kind)
        fs, n = sig.sample_rate_hz, x.size
        setup = {"dataset": DatasetRef.from_dataset(sig.dataset).to_dict() if sig.dataset is not None else None,
                 "device": {"device": "instruments", "device_name": self._device_name()},
                 "versions": {"dpd_desktop": __version__},
                 "loop": {"id": self.store.loop_id, "iteration": k, "kind": kind, "config": cfg.to_dict(),
                          "bench": dict(self.bench.describe), "signal": sig.describe(), "nperseg": cfg.nperseg}}
        rec.start(self._experiment(k, kind, sig, fit_run), setup)
        pep, level = peak_dbm(u), rms_dbm(u)
        rec.log(f"iteration {k} ({kind}): waveform RMS {level:.2f} dBm, peak {pep:.2f} dBm")
        if not math.isfinite(pep) or pep > cfg.power_limit_dbm + 1e-9:
            raise PowerLimitError("generator", f"refused iteration {k}'s waveform before playing it: its peak "
                                  f"{pep:.2f} dBm would exceed the power limit {cfg.power_limit_dbm:.2f} dBm")
        gen.rf(False)
        self._check()
        gen.load(u, fs, name=f"dpd_loop_{k:02d}")
        self._check()
        gen.set_level(level)
        self._check()
        gen.play()
        self._check()
        gen.rf(True)
        self._check()
        ref = cfg.ref_level_dbm
        if ref is None:
            ref = (cfg.target_output_dbm if cfg.target_output_dbm is not None else level + 30.0) + 13.0
        raw = ana.capture(cfg.averages * n, cfg.center_hz, fs, ref)
        self._check()
        y = average_periods(np.asarray(raw, dtype=np.complex128), n)
        ya, al = align(x, y)
        self._delays.append(al.delay_samples)
        if gain is None:  # linearise at the output power reached without DPD (the first capture's RMS gain)
            gain = math.sqrt(float(np.mean(np.abs(ya) ** 2)) / float(np.mean(np.abs(x) ** 2)))
            self.store.update(target_output_dbm=rms_dbm(ya), target_gain_db=20 * math.log10(gain))
        y_n = ya * np.exp(-1j * np.angle(al.gain)) / gain
        metrics = loop_metrics(y_n, x, sig.spec_like(cfg.nperseg), cfg.metric_profile)
        out_dbm = rms_dbm(ya)
        target_dbm = rms_dbm(x) + 20 * math.log10(gain)
        rec.log(f"delay {al.delay_samples:.4f} samples, gain {al.gain_db:.3f} dB, phase {al.phase_deg:.2f} deg, "
                f"output {out_dbm:.2f} dBm (target {target_dbm:.2f}); ACLR {metrics['ACLR_AVG']:.2f} dBc, "
                f"EVM {metrics['EVM']:.2f} dB, NMSE {metrics['NMSE']:.2f} dB")
        s = float(np.max(np.abs(x)))
        f_mhz, p_x = psd_mhz(x / s, fs, cfg.nperseg)
        _, p_y = psd_mhz(y_n / s, fs, cfg.nperseg)
        _, p_u = psd_mhz(u / s, fs, cfg.nperseg)
        attrs = {"loop_id": self.store.loop_id, "iteration": k, "kind": kind, "sample_rate_hz": fs,
                 "delay_samples": al.delay_samples, "gain_db": al.gain_db, "phase_deg": al.phase_deg,
                 "output_dbm": out_dbm, "input_rms_dbm": level, "input_peak_dbm": pep, "averages": cfg.averages,
                 "metric_profile": cfg.metric_profile, "units": "sqrt(mW) at the instrument port"}
        pick = np.linspace(0, n - 1, min(n, _AMAM_POINTS)).astype(int)
        files = {"pa_input.h5": h5_bytes({"x": u.astype(np.complex64), "reference": x.astype(np.complex64)}, attrs),
                 "pa_output.h5": h5_bytes({"y": y.astype(np.complex64), "raw": np.asarray(raw, np.complex64),
                                           "aligned": ya.astype(np.complex64)}, attrs),
                 "waveform.wv": encode_wv(u, fs, comment=f"DPD Desktop loop {self.store.loop_id} iteration {k}"),
                 **plots_svg(f_mhz, {"x": p_x, "output (normalised)": p_y, "waveform played": p_u},
                             np.abs(x[pick]) / s, {"output (normalised)": np.abs(y_n[pick]) / s,
                                                   "waveform played": np.abs(u[pick]) / s},
                             f"{self.store.loop_id} #{k} {kind}")}
        rec.write_files(files)
        nmse_lin = float(np.sum(np.abs(y_n - x) ** 2) / np.sum(np.abs(x) ** 2))
        split = SplitResults(x=iq(x / s), target=iq(x / s), prediction=iq(y_n / s), dpd_output=iq(u / s),
                             loss=nmse_lin, metrics=metrics, psd_freq_hz=(f_mhz * 1e6).astype(np.float64),
                             psd_prediction_db=p_y.astype(np.float64))
        rec.finish(split, {"metric_profile": cfg.metric_profile, **attrs},
                   {"metric_profile": cfg.metric_profile, "loop": {"id": self.store.loop_id, "iteration": k,
                                                                   "kind": kind, **al.to_dict(),
                                                                   "output_dbm": out_dbm}})
        self._record = None
        ev = LE.IterationEnded(self.store.loop_id, k, kind, rec.run_id, str(rec.run_dir), metrics, out_dbm,
                               target_dbm, level, pep, al.delay_samples, al.gain_db, al.phase_deg,
                               {"x": (f_mhz, p_x), "output": (f_mhz, p_y)})
        self.store.add_iteration(ev.row())
        self._emit(ev)
        return y_n, gain, ev

    def _device_name(self) -> str:
        d = self.store.doc.get("identities") or {}
        parts = [f"{role}: {v.get('manufacturer', '')} {v.get('model', '')}".strip() for role, v in d.items()]
        return "; ".join(parts)
