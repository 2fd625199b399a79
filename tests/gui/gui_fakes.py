"""Fakes and synthetic data for the GUI tests (importable as ``gui_fakes``; tests/gui is on sys.path)."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dpd_desktop.lab.supervisor import EntryEnded, EntryStarted
from dpd_desktop.runs.events import (BatchProgress, EpochEnded, PlotData, RunCancelled, RunFailed, RunFinished,
                                     RunStarted)
from dpd_desktop.runs.record import DatasetRef


def make_plotdata(seed: int = 0, source: str = "validation", k: int = 1500, scale: float = 1.0) -> PlotData:
    """A small synthetic PlotData shaped like the trainer's."""
    rng = np.random.default_rng(seed)
    r = rng.uniform(0.0, 1.0, k).astype(np.float32)
    y = (1.8 * np.tanh(1.3 * r) + 0.01 * rng.standard_normal(k)).astype(np.float32)
    yhat = (1.8 * np.tanh(1.3 * r) * scale + 0.02 * rng.standard_normal(k)).astype(np.float32)
    ph_y = (12.0 * r**2 + 0.5 * rng.standard_normal(k)).astype(np.float32)
    ph_p = (12.0 * r**2 * scale + 0.7 * rng.standard_normal(k)).astype(np.float32)
    f = np.linspace(-320, 320, 1024, dtype=np.float32)
    shape = np.where(np.abs(f) < 80, -70.0, -70.0 - 40.0 * np.tanh((np.abs(f) - 80) / 30)).astype(np.float32)
    psd = {"measured y": shape + rng.normal(0, 0.5, f.size).astype(np.float32),
           "predicted ŷ": shape + rng.normal(0, 0.5, f.size).astype(np.float32) + 0.5,
           "error": (shape - 35).astype(np.float32)}
    n = np.arange(300, dtype=np.float32)
    iq_y = np.stack([np.sin(n / 9), np.cos(n / 7)], axis=1).astype(np.float32)
    iq_p = (iq_y * scale + 0.02).astype(np.float32)
    return PlotData(source=source, amam_in=r, amam={"measured y": y, "predicted ŷ": yhat},
                    ampm={"measured y": ph_y, "predicted ŷ": ph_p}, psd_freq_mhz=f, psd=psd,
                    bands_mhz={"main": (-80.0, 80.0), "adj_left": (-240.0, -80.0), "adj_right": (80.0, 240.0)},
                    aclr={"measured y": (-45.2, -44.7), "predicted ŷ": (-44.9, -45.3)}, time_idx=n,
                    time={"measured y": iq_y, "predicted ŷ": iq_p})


def make_row(epoch: int, epochs: int, lr: float = 5e-3) -> dict:
    nmse = -20.0 - 3.0 * epoch
    return {"EPOCH": epoch, "N_EPOCH": epochs, "TIME:": 0.01 * (epoch + 1), "LR": lr, "TRAIN_LOSS": 1e-2 / (epoch + 1),
            "VAL_LOSS": 1.2e-2 / (epoch + 1), "VAL_NMSE": nmse, "VAL_EVM": nmse + 2, "VAL_ACLR_L": -40.0,
            "VAL_ACLR_R": -41.0, "VAL_ACLR_AVG": -40.5 - epoch, "TEST_LOSS": 1.3e-2, "TEST_NMSE": nmse + 0.3}


class FakeTrainer:
    """Emits the trainer's events with small sleeps; honours request_cancel between batches."""

    def __init__(self, config, dataset=None, workspace=None, observers=(), batches=5, batch_delay=0.01,
                 fail_at_epoch=None, run_dir=None):
        self.config = config
        self.observers = list(observers)
        self.batches = batches
        self.batch_delay = batch_delay
        self.fail_at_epoch = fail_at_epoch
        self.run_dir = str(run_dir or (Path(getattr(workspace, "root", ".")) / "runs" / "fake-run"))
        self._cancel = threading.Event()
        self.thread_ids: set[int] = set()

    def request_cancel(self):
        self._cancel.set()

    def _emit(self, ev):
        self.thread_ids.add(threading.get_ident())
        for o in self.observers:
            o(ev)

    def run(self):
        cfg = self.config
        E = cfg.epochs
        self._emit(RunStarted(run_id="fake-run", run_dir=self.run_dir, step=cfg.step, config=cfg.to_dict(),
                              device="cpu", device_name="cpu", fast_path="off: CPU device", batched_loader="on",
                              n_params=1234, n_train_frames=500, batches_per_epoch=self.batches, epochs=E,
                              dataset_summary={"name": "fake"}))
        t0 = time.monotonic()
        best, best_v = None, None
        for e in range(E):
            for b in range(1, self.batches + 1):
                if self._cancel.is_set():
                    self._emit(RunCancelled(run_id="fake-run", run_dir=self.run_dir, epochs_completed=e,
                                            best_epoch=best))
                    return None
                time.sleep(self.batch_delay)
                self._emit(BatchProgress(epoch=e, epochs=E, batch=b, batches=self.batches,
                                         elapsed_s=time.monotonic() - t0, eta_s=None))
            if self.fail_at_epoch == e:
                self._emit(RunFailed(run_id="fake-run", run_dir=self.run_dir,
                                     message="CUDA out of memory while training (batch size 64): lower the batch size",
                                     detail="Traceback (most recent call last):\n  ...\nRuntimeError: CUDA OOM"))
                return None
            row = make_row(e, E)
            is_best = best_v is None or row["VAL_NMSE"] < best_v
            if is_best:
                best, best_v = e, row["VAL_NMSE"]
            self._emit(EpochEnded(epoch=e, epochs=E, row=row, is_best=is_best, best_epoch=best, best_value=best_v,
                                  selection_metric="VAL_NMSE", epoch_seconds=self.batches * self.batch_delay,
                                  plots=make_plotdata(e, scale=1 + 0.1 / (e + 1))))
        self._emit(RunFinished(run_id="fake-run", run_dir=self.run_dir, best_epoch=best,
                               val_metrics={"NMSE": best_v}, test_metrics={"NMSE": best_v + 0.3, "ACLR_AVG": -41.0},
                               wall_s=time.monotonic() - t0, plots=make_plotdata(99, source="test")))
        return None


def fake_factory(**kw):
    created = []

    def factory(config, dataset=None, workspace=None, observers=()):
        t = FakeTrainer(config, dataset, workspace, observers, **kw)
        created.append(t)
        return t

    factory.created = created
    return factory


class InThreadSupervisor:
    """The window's test seam (``MainWindow(supervisor_factory=InThreadSupervisor.factory(trainer_factory))``): in
    place of lab/supervisor.py's Supervisor, trains the window's entry with ``trainer_factory(config, dataset=,
    workspace=, observers=)`` on the calling thread (the window's run worker) and hands the trainer's events to the
    observers as the supervisor does (``observer(entry, event)``, then EntryEnded). The trainer gets the demo
    dataset regenerated from the entry's options, as the child would (None for other datasets). ``send`` and
    ``request_stop`` reach the trainer as the child's control pipe does."""

    def __init__(self, trainer_factory, workspace, observers=(), **_kw):
        self.trainer_factory, self.workspace, self.observers = trainer_factory, workspace, list(observers)
        self._lock = threading.Lock()
        self._trainer = None
        self._stop = False

    @classmethod
    def factory(cls, trainer_factory):
        return lambda workspace, observers=(), **kw: cls(trainer_factory, workspace, observers, **kw)

    def request_stop(self) -> None:
        self.send(None, "cancel")

    def send(self, entry_id, message: str) -> None:
        with self._lock:
            trainer = self._trainer
            self._stop = self._stop or message == "cancel"
        if trainer is None:
            return
        if message == "cancel":
            trainer.request_cancel()
        elif message.startswith("preview:") and hasattr(trainer, "set_preview_every"):
            n = message.split(":", 1)[1]
            trainer.set_preview_every(int(n) if n.isdigit() else None)

    def run_entry(self, entry, options=None):
        outcome = []

        def notify(ev):
            if isinstance(ev, (RunFinished, RunFailed, RunCancelled)):
                outcome.append(ev)
            for o in self.observers:
                o(entry, ev)

        ref = (options or {}).get("dataset")
        notify(EntryStarted(entry.id, None))
        try:
            dataset = DatasetRef.from_record(ref, schema=2).load() if ref and ref.get("kind") == "demo" else None
            trainer = self.trainer_factory(entry.config, dataset=dataset, workspace=self.workspace,
                                           observers=[notify])
        except Exception as exc:  # noqa: BLE001 - as the child reports it
            notify(RunFailed(run_id=None, run_dir=None, message=f"the run could not start: {exc}"))
        else:
            with self._lock:
                self._trainer = trainer
                stop = self._stop
            if stop:
                trainer.request_cancel()
            trainer.run()
        state = {RunFinished: "succeeded", RunCancelled: "cancelled"}.get(type(outcome[0]), "failed") \
            if outcome else "failed"
        end = EntryEnded(entry.id, state, "", getattr(outcome[0], "run_dir", None) if outcome else None)
        notify(end)
        return end


@dataclass
class FakeRunRecord:
    run_id: str
    run_dir: Path
    step: str = "pa"
    backbone: str = "gru"
    hidden_size: int = 23
    status: str = "succeeded"
    best_epoch: int | None = 3
    summary: dict = field(default_factory=dict)


class FakeWorkspace:
    def __init__(self, root):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.runs: list[FakeRunRecord] = []

    def list_runs(self, step=None):
        return [r for r in self.runs if step is None or r.step == step]


class FakeDataset:
    """Stands in for IQDataset in tests of the window alone."""

    def __init__(self, name="fake-ds", n=(600, 200, 200)):
        class _S:
            def __init__(self, k):
                self.x = np.zeros((k, 2), np.float32)
                self.y = np.zeros((k, 2), np.float32)

        class _Spec:
            sample_rate_hz = 640e6
            bw_main_hz = 160e6
            bw_sub_hz = 40e6
            n_sub_ch = 4

        self.name = name
        self.source = "demo"
        self.spec = _Spec()
        self.train, self.val, self.test = (_S(k) for k in n)

    def fingerprint(self) -> str:
        return f"fake-{self.name}"
