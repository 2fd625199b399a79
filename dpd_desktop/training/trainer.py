"""The trainer: epochs, validation, test, checkpoint selection, artifacts, events.

Behavioral spec: OpenDPD 2.2.1 reference §2 (framing), §4 (training loop), §5 (DPD through a frozen PA) and §6
(metrics). With the same seed, settings and library versions, a PA run reproduces the reference's selected
checkpoint and history metrics; the global torch RNG is consumed exactly as the reference consumes it (model
construction first, then per epoch: train-iterator base seed, sampler seed, val-iterator base seed, test-iterator
base seed — reference §4.1–§4.2).

Differences from the reference, all deliberate:
- After training the selected checkpoint is reloaded and evaluated once more on the test split (the reference CLI
  only reports the selected epoch's row; Studio does the same re-evaluation, reference §4.11).
- A ``last.pt`` training state is written every epoch for resuming; a ``results.h5`` holds the selected checkpoint's
  predictions, metrics and spectra.
- Cancellation is checked between batches (the reference checks at epoch end only, §9.18).
"""
from __future__ import annotations

import copy
import json
import logging
import math
import os
import platform
import random
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from ..config import ConfigError, ExperimentConfig
from .. import timing
from ..runs import artifacts
from ..runs.workspace import Workspace, process_identity
from .events import (BatchProgress, EpochEnded, PreviewReady, RunCancelled, RunFailed, RunFinished, RunStarted)

log = logging.getLogger("dpd_desktop.trainer")

PROGRESS_INTERVAL_S = 0.1
HISTORY_METRICS = ("NMSE", "EVM", "ACLR_L", "ACLR_R", "ACLR_AVG")
# history.csv columns, the reference's (§4.8), in the order of the rows built in Trainer._epoch_end
HISTORY_COLUMNS = ("EPOCH", "N_EPOCH", "TIME:", "LR", "BATCH_SIZE", "N_PARAM", "FRAME_LENGTH", "BACKBONE",
                   "HIDDEN_SIZE", "TRAIN_LOSS", "VAL_LOSS", *(f"VAL_{k}" for k in HISTORY_METRICS), "TEST_LOSS",
                   *(f"TEST_{k}" for k in HISTORY_METRICS))


class Cancelled(Exception):
    """Raised inside the trainer when a cancel was requested; turned into a RunCancelled event."""


class TrainingError(RuntimeError):
    """A run cannot start or continue; the message names the file, field or setting in plain words."""


@dataclass
class RunResult:
    """Outcome of :meth:`Trainer.run`: ``state`` is "succeeded", "failed" or "cancelled"."""

    state: str
    run_id: str | None = None
    run_dir: Path | None = None
    best_epoch: int | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    val_metrics: dict[str, float] = field(default_factory=dict)
    test_metrics: dict[str, float] = field(default_factory=dict)
    message: str = ""
    wall_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def resolve_device(requested: str):
    """"auto" → first CUDA device when available, else CPU; "cuda"/"cuda:N" must exist (never a silent fallback).

    Raises:
        TrainingError: CUDA requested but unavailable, or the index is out of range.
    """
    import torch

    if requested == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    if requested == "cpu":
        return torch.device("cpu")
    if requested.startswith("cuda"):
        if not torch.cuda.is_available():
            raise TrainingError("device: CUDA was requested but no CUDA GPU is available (choose cpu or auto)")
        dev = torch.device(requested if ":" in requested else "cuda:0")
        if dev.index >= torch.cuda.device_count():
            raise TrainingError(f"device: {requested} does not exist ({torch.cuda.device_count()} CUDA device(s))")
        return dev
    raise TrainingError(f"device: unknown device {requested!r}")


def seed_everything(seed: int) -> None:
    """Seed Python ``random``, NumPy and torch (CPU and every CUDA device) like the reference (§4.1 step 1)."""
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class Trainer:
    """Train one PA model or one DPD through a frozen PA, and write the run to the workspace.

    Args:
        config: the experiment (validated here).
        dataset: an already loaded :class:`~dpd_desktop.data.IQDataset`; when None it is loaded from
            ``config.dataset`` ("demo" → the embedded synthetic dataset).
        workspace: where the run folder is created (default: the platform workspace).
        observers: callables receiving every event, on the training thread.
        fast_path: False forces eager training on CUDA (for equivalence tests and diagnosis).

    ``run()`` never raises for run-level failures: it emits :class:`RunFailed` and returns a failed
    :class:`RunResult`. ``request_cancel()`` is thread-safe; the flag is checked between batches.
    """

    def __init__(self, config: ExperimentConfig, dataset=None, workspace: Workspace | None = None,
                 observers: Iterable[Callable] = (), fast_path: bool = True):
        self.config = config
        self.use_fast_path = fast_path
        self.dataset = dataset
        self.workspace = workspace or Workspace()
        self.observers = list(observers)
        self._cancel = threading.Event()
        self.run_id: str | None = None
        self.run_dir: Path | None = None
        self.history: list[dict[str, Any]] = []
        self._log_fh = None
        self._pool = None
        self._pending = None
        self._shadow = None
        self._eval_stream = None

    # ------------------------------------------------------------------ public API
    def request_cancel(self) -> None:
        """Ask the run to stop at the next batch boundary (thread-safe)."""
        self._cancel.set()

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    def _mark(self, name: str, **kw) -> None:
        timing.mark(name, **kw)

    def run(self) -> RunResult:
        """Run the whole experiment (blocking). Returns the outcome; see the class docstring."""
        t0 = time.perf_counter()
        self._mark("run_start")
        self.best_epoch = None
        try:
            self._setup()
            self._emit(RunStarted(
                run_id=self.run_id, run_dir=str(self.run_dir), step=self.config.step,
                config=self.config.to_dict(), device=str(self.device), device_name=self.device_name,
                fast_path=self.fast_path_status, batched_loader=self.loader_status, n_params=self.n_params,
                n_params_model=self.n_params_model,
                n_train_frames=self.loader.n_frames, batches_per_epoch=self.loader.n_batches,
                epochs=self.config.epochs, dataset_summary=self._dataset_summary()))
            self._log(f"training: {self.loader.n_frames} frames, {self.loader.n_batches} batches/epoch, "
                      f"device {self.device} ({self.device_name}), CUDA graph: {self.fast_path_status}")
            self._epoch_loop(t0)
            result = self._finish(t0)
            return result
        except Cancelled:
            return self._on_cancel(t0)
        except Exception as exc:  # noqa: BLE001 - a run failure must be reported, not crash the app
            return self._on_failure(exc, t0)
        finally:
            self._teardown()

    # ------------------------------------------------------------------ setup
    def _setup(self) -> None:
        import torch

        self._mark("torch_imported")

        cfg = self.config.validate()
        self.device = resolve_device(cfg.device)
        self.device_name = (torch.cuda.get_device_name(self.device) if self.device.type == "cuda"
                            else platform.processor() or "CPU")
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        self._mark("setup_start")
        if self.dataset is None:
            self.dataset = load_dataset_for(cfg.dataset)
        self._mark("data_loaded")
        ds = self.dataset
        ds.spec.require_metrics(str(ds.source))
        _require_whole_segment(ds)
        self.fingerprint = ds.fingerprint()  # before the PA is loaded: a DPD checks it against the PA's dataset
        if cfg.step == "dpd":  # a bad PA run is refused before a run folder exists (the real load comes later)
            _require_finite_gain(ds)
            check_pa_run(self.workspace, cfg.pa_run, dataset=ds, fingerprint=self.fingerprint,
                         allow_dataset_mismatch=cfg.allow_dataset_mismatch)

        label = f"{cfg.step}-{cfg.backbone}{cfg.hidden_size}"
        self.run_id, self.run_dir = self.workspace.new_run_dir(label)
        self._log_fh = open(self.run_dir / "log.txt", "a", encoding="utf-8")
        self._write_status("running")
        # every run folder has a history.csv, header-only until the first epoch ends (cancel/failure before it)
        artifacts.write_history_csv(self.run_dir / "history.csv", [], header=HISTORY_COLUMNS)
        self._log(f"run {self.run_id}: {cfg.step.upper()} {cfg.backbone} H={cfg.hidden_size} on {ds.name}")

        # Reference §4.1: seed, then soft reproducibility (cuDNN benchmark on, deterministic algorithms off).
        seed_everything(cfg.seed)
        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.deterministic = False
        if torch.are_deterministic_algorithms_enabled():  # calling it at all imports torch._inductor/_dynamo
            torch.use_deterministic_algorithms(False)

        # --- data (reference §1.4, §2): no normalization; DPD target g·x computed in float64, then float32.
        self.gain = float(ds.gain)
        tr, va, te = ds.train, ds.val, ds.test
        if cfg.step == "dpd":
            targets = {s: _scaled_target(split, self.gain) for s, split in (("train", tr), ("val", va), ("test", te))}
        else:
            targets = {"train": tr.y, "val": va.y, "test": te.y}
        x_train, y_train = tr.x, targets["train"]
        if cfg.max_train_samples:
            x_train, y_train = x_train[:cfg.max_train_samples], y_train[:cfg.max_train_samples]
        if x_train.shape[0] < cfg.frame_length:
            raise ConfigError("frame_length", f"{cfg.frame_length} is longer than the training split "
                              f"({x_train.shape[0]} samples of {ds.source})")
        from ..data.framing import DISABLE_BATCHED_LOADER, FrameLoader, PlainFrameLoader, segment

        dev = self.device
        x_cpu = torch.from_numpy(np.ascontiguousarray(x_train))
        y_cpu = torch.from_numpy(np.ascontiguousarray(y_train))
        if DISABLE_BATCHED_LOADER:
            self.loader = PlainFrameLoader(x_cpu, y_cpu, cfg.frame_length, cfg.stride, cfg.batch_size, dev)
            self.loader_status = "off: disabled by DPD_DESKTOP_DISABLE_BATCHED_LOADER=1 (per-frame DataLoader)"
            self._log(f"batched loader {self.loader_status}")
        else:
            self.loader = FrameLoader(x_cpu.to(dev), y_cpu.to(dev), cfg.frame_length, cfg.stride, cfg.batch_size)
            self.loader_status = "on: whole batches gathered on the device"
        nps = ds.spec.nperseg
        self.eval_sets = {}
        for name, split in (("val", va), ("test", te)):
            xs = segment(split.x, nps)
            ts = segment(targets[name], nps)
            self.eval_sets[name] = {
                "x": torch.from_numpy(xs).to(dev), "t": torch.from_numpy(ts).to(dev),
                "x_np": split.x, "t_np": targets[name], "t_seg": ts, "x_seg": xs, "n": split.x.shape[0]}

        self._mark("tensors_on_device")
        # --- model(s) (reference §4.1 step 5: construction consumes the seeded RNG; PA first for DPD)
        from ..models import Cascade, build_model, count_parameters

        if cfg.step == "pa":
            self.net = build_model(cfg.backbone, cfg.hidden_size, cfg.num_layers)
            self.model = self.net
            self.pa_info = None
        else:
            pa, self.pa_info = load_pa_for_dpd(self.workspace, cfg.pa_run, dataset=ds, fingerprint=self.fingerprint,
                                               allow_dataset_mismatch=cfg.allow_dataset_mismatch)
            if self.pa_info.get("dataset_mismatch_allowed"):
                self._log(f"WARNING: the PA run {self.pa_info['run_id']} was trained on another dataset "
                          f"(fingerprint {self.pa_info['dataset_fingerprint']}); allowed by allow_dataset_mismatch",
                          logging.WARNING)
            if self.pa_info["run_state"] != "succeeded":
                self._log(f"WARNING: the PA run {self.pa_info['run_id']} is {self.pa_info['run_state']}; its selected "
                          "checkpoint (best.pt) is used as it is", logging.WARNING)
            dpd = build_model(cfg.backbone, cfg.hidden_size, cfg.num_layers)
            self.net = Cascade(dpd, pa)
            self.net.freeze_pa()
            self.model = dpd
        self.net.to(dev)
        self._mark("model_built")
        self.cudnn_note = None
        if dev.type == "cuda" and any(isinstance(m, (torch.nn.Conv1d, torch.nn.Conv2d)) for m in self.net.modules()):
            # cuDNN's benchmarked convolution algorithms include non-deterministic ones (atomic adds in the
            # weight gradient), which make two runs - eager or graph - differ in the last bits. Convolutional
            # families therefore use cuDNN's deterministic algorithms on CUDA (recorded in config.json).
            torch.backends.cudnn.benchmark = False
            torch.backends.cudnn.deterministic = True
            self.cudnn_note = "deterministic cuDNN convolutions (the reference lets cuDNN benchmark them)"
        self.n_params = count_parameters(self.net)  # reference N_PARAM: whole cascade for DPD (§4.8 quirk kept)
        self.n_params_model = count_parameters(self.model)
        self.trainable = [p for p in self.net.parameters() if p.requires_grad]
        if not self.trainable:
            raise TrainingError("the model has no trainable parameters")
        self.criterion = torch.nn.MSELoss() if cfg.loss == "l2" else torch.nn.L1Loss()
        from .optim import make_adamw, make_plateau

        # torch.optim.AdamW / ReduceLROnPlateau arithmetic, without importing torch._dynamo (see optim.py)
        self.optimizer = make_adamw(self.trainable, lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.scheduler = make_plateau(self.optimizer, factor=cfg.decay_factor, patience=cfg.patience,
                                      min_lr=cfg.lr_end)
        self.selection_metric = "VAL_NMSE" if cfg.step == "pa" else "VAL_ACLR_AVG"

        from .fast_path import make_fast_step

        self.fast_step, self.fast_path_status = make_fast_step(
            self.net, self.criterion, self.optimizer, self.trainable, cfg.grad_clip, self.device,
            batch_shape=(cfg.batch_size, cfg.frame_length, 2), loader=self.loader, enabled=self.use_fast_path)
        if self.fast_path_status != "on":
            self._log(f"CUDA graph: {self.fast_path_status}")
        # where the AdamW update runs with the fast path: decided at the capture (first full batch), see fast_path.py
        self.fast_path_optimizer = ("decided at the first batch" if self.fast_step is not None
                                    else "eager (no CUDA graph)")
        self._config_stale = False

        # DPD baselines (PA without DPD) and the targets' ACLR are computed once, on first use (off the
        # start-up path): the PA is frozen (§5.3) and the targets never change.
        self._baselines: dict[str, np.ndarray] = {}
        self._target_aclr: dict[str, tuple[float, float]] = {}

        self._mark("before_config")
        self._write_config()
        self._mark("setup_done")
        self._preview = None  # the frozen copy is made on the first preview (BatchPreview)
        self._preview_every = cfg.preview_every
        self._preview_failed = False

    def _baseline(self, split: str, net=None) -> np.ndarray:
        """PA(x) without DPD on the (S, N, 2) segments of ``split`` (computed once; the PA is frozen).

        ``net`` is the cascade to take the PA from: the epoch-end worker passes its snapshot, never the live
        network, whose train/eval mode must not change while the next epoch trains.
        """
        if split not in self._baselines:
            pa = (net if net is not None else self.net).pa
            self._baselines[split] = self._forward_segments(pa, self.eval_sets[split]["x"])
        return self._baselines[split]

    def _target_aclr_pair(self, split: str) -> tuple[float, float]:
        if split not in self._target_aclr:
            self._target_aclr[split] = _aclr_pair(self.eval_sets[split]["t_seg"], self.dataset.spec)
        return self._target_aclr[split]

    def _dataset_summary(self) -> dict[str, Any]:
        ds = self.dataset
        try:
            return dict(ds.summary())
        except Exception:  # noqa: BLE001 - summary is cosmetic
            return {"name": ds.name}

    def _write_config(self) -> None:
        import torch

        cfg = self.config
        ds = self.dataset
        doc = {
            "format": "dpd-desktop-run-1",
            "run_id": self.run_id,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "experiment": cfg.to_dict(),
            "dataset": {"name": ds.name, "source": str(ds.source), "fingerprint": self.fingerprint,
                        "spec": _spec_dict(ds.spec),
                        "samples": {"train": int(ds.train.x.shape[0]), "val": int(ds.val.x.shape[0]),
                                    "test": int(ds.test.x.shape[0])}},
            "gain": {"value": self.gain, "rule": "max|y_train| / max|x_train| (reference §1.4)"},
            "model": {"backbone": cfg.backbone, "hidden_size": cfg.hidden_size, "num_layers": cfg.num_layers,
                      "n_params": self.n_params_model, "n_params_total": self.n_params,
                      "model_id": f"{cfg.model_id}_P_{self.n_params_model}"},
            "pa": self.pa_info,
            "selection_metric": self.selection_metric,
            "device": {"device": str(self.device), "name": self.device_name,
                       "fast_path": self.fast_path_status, "fast_path_optimizer": self.fast_path_optimizer,
                       "batched_loader": self.loader_status,
                       "cudnn": {"benchmark": bool(torch.backends.cudnn.benchmark),
                                 "deterministic": bool(torch.backends.cudnn.deterministic),
                                 "note": self.cudnn_note}},
            "versions": _versions(),
            "training": {"n_frames": self.loader.n_frames, "batches_per_epoch": self.loader.n_batches,
                         "torch_threads": torch.get_num_threads()},
        }
        artifacts.atomic_write_json(self.run_dir / "config.json", doc)

    # ------------------------------------------------------------------ epoch loop
    def _epoch_loop(self, t0: float) -> None:
        """Train all epochs. On CUDA, an epoch's evaluation and bookkeeping overlap the next epoch's training
        whenever the learning rate provably cannot change at that boundary (see :func:`lr_may_change`): the
        weights and optimizer state are snapshotted on the training stream (device copies, microseconds) and a
        worker thread evaluates the snapshot on its own CUDA stream, writes the history row and checkpoints, builds
        the plot data, emits :class:`EpochEnded` and steps the scheduler. The numbers are the same as evaluating
        inline: the same kernels run on the same weights; the global RNG draws stay on this thread, in the
        reference's order (train iterator, sampler, val iterator, test iterator)."""
        cfg = self.config
        self._start_time = time.time()
        self.best_value = None
        self._epochs(cfg, self.device.type == "cuda")

    def _epochs(self, cfg, overlap: bool) -> None:
        """The epoch loop proper (see :meth:`_epoch_loop`)."""
        from ..data.framing import draw_dataloader_iterator_seed

        for epoch in range(cfg.epochs):
            te = time.perf_counter()
            lr = self.optimizer.param_groups[0]["lr"]
            train_loss = self._train_epoch(epoch)
            if not math.isfinite(train_loss):
                self._drain()  # earlier epochs' results and checkpoints stay as written
                raise TrainingError(
                    f"training diverged: the mean training loss of epoch {epoch} is {train_loss} (the weights are no "
                    f"longer finite); lower the learning rate (lr {self.optimizer.param_groups[0]['lr']:g}) or check "
                    "the data; earlier epochs' checkpoints are kept")
            self._refresh_fast_path_status()
            self._drain()  # the previous epoch's end is done: scheduler state is current
            draw_dataloader_iterator_seed()  # val iterator (reference §4.2)
            draw_dataloader_iterator_seed()  # test iterator
            last = epoch == cfg.epochs - 1
            if overlap and not last and not lr_may_change(self.scheduler):
                snap = self._snapshot()
                self._pending = self._executor().submit(self._epoch_end, epoch, lr, train_loss, te, snap)
            else:
                self._epoch_end(epoch, lr, train_loss, te, None)
            if self._cancel.is_set():
                self._drain()
                raise Cancelled()
        self._drain()

    def _refresh_fast_path_status(self) -> None:
        """After an epoch: take over the fast path's state (a capture may have failed, the optimizer's placement is
        known after the first capture); config.json is rewritten at this epoch's end when it changed."""
        fast = self.fast_step
        if fast is None:
            return
        status, opt_note = fast.status, fast.optimizer_note
        if (status, opt_note) != (self.fast_path_status, self.fast_path_optimizer):
            if status != self.fast_path_status:
                self._log(f"CUDA graph: {status}")
            self.fast_path_status, self.fast_path_optimizer = status, opt_note
            self._config_stale = True

    def _executor(self):
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dpd-epoch-end")
        return self._pool

    def _drain(self) -> None:
        """Wait for the pending epoch end (re-raising its error, if any)."""
        fut, self._pending = self._pending, None
        if fut is not None:
            fut.result()

    def _snapshot(self) -> dict[str, Any]:
        """Copy weights and optimizer state on the training stream; returns what the epoch-end worker needs."""
        import torch

        if self._shadow is None:
            self._shadow = copy.deepcopy(self.net)
            for p in self._shadow.parameters():
                p.requires_grad_(False)
            for m in self._shadow.modules():
                if isinstance(m, torch.nn.RNNBase):
                    m.flatten_parameters()
            self._eval_stream = torch.cuda.Stream(self.device)
        with torch.no_grad():
            for ps, pl in zip(self._shadow.parameters(), self.net.parameters()):
                ps.copy_(pl)
            opt_state = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in _opt_state_tensors(self.optimizer)}
        ready = torch.cuda.Event()
        ready.record()
        return {"net": self._shadow, "event": ready, "opt_state": opt_state,
                "opt_groups": copy.deepcopy(self.optimizer.state_dict()["param_groups"])}

    def _epoch_end(self, epoch: int, lr: float, train_loss: float, te: float, snap: dict[str, Any] | None) -> None:
        """Evaluate, log, select, checkpoint, emit and step the scheduler for one epoch (reference §4.7)."""
        import contextlib

        import torch

        cfg = self.config
        if snap is not None:
            net = snap["net"]
            stream = self._eval_stream
            stream.wait_event(snap["event"])
            ctx = torch.cuda.stream(stream)
        else:
            net, ctx = self.net, contextlib.nullcontext()
        with ctx:
            val = self._evaluate("val", net)
            test = self._evaluate("test", net)
        row = {"EPOCH": epoch, "N_EPOCH": cfg.epochs, "TIME:": (time.time() - self._start_time) / 60.0, "LR": lr,
               "BATCH_SIZE": cfg.batch_size, "N_PARAM": self.n_params, "FRAME_LENGTH": cfg.frame_length,
               "BACKBONE": cfg.backbone, "HIDDEN_SIZE": cfg.hidden_size, "TRAIN_LOSS": train_loss,
               "VAL_LOSS": val["loss"]}
        row.update({f"VAL_{k}": val["metrics"][k] for k in HISTORY_METRICS})
        row["TEST_LOSS"] = test["loss"]
        row.update({f"TEST_{k}": test["metrics"][k] for k in HISTORY_METRICS})
        self.history.append(row)
        artifacts.write_history_csv(self.run_dir / "history.csv", self.history)

        # Reference §4.8: epoch 0 always saves; later epochs only when strictly lower; NaN never wins.
        value = row[self.selection_metric]
        is_best = epoch == 0 or (self.best_value is not None and value < self.best_value)
        model_state = _model_of(net, cfg.step).state_dict()
        if is_best:
            self.best_value, self.best_epoch = value, epoch
            self._save_best(epoch, row, model_state)
        self._save_last(epoch, model_state, snap)
        seconds = time.perf_counter() - te
        row_out = dict(row, EPOCH_SECONDS=seconds)
        self._log(_format_row(row))
        plots = self._plots("validation", val, net=net)
        if self._config_stale:
            self._config_stale = False
            self._write_config()
        self._write_status("running", epochs_completed=epoch + 1)
        self._mark("epoch_end", epoch=epoch)
        self._emit(EpochEnded(epoch=epoch, epochs=cfg.epochs, row=row_out, is_best=is_best,
                              best_epoch=self.best_epoch, best_value=float(self.best_value),
                              selection_metric=self.selection_metric, epoch_seconds=seconds, plots=plots,
                              fast_path=self.fast_path_status))
        # Reference §4.4/§4.7: scheduler stepped after logging/checkpointing, on the validation metric.
        self.scheduler.step(value)

    def _train_epoch(self, epoch: int) -> float:
        import torch

        cfg = self.config
        net, opt, crit, clip = self.net, self.optimizer, self.criterion, cfg.grad_clip
        trainable = self.trainable
        fast = self.fast_step
        net.train()
        plan = self.loader.epoch()
        n_batches = len(plan)
        # Batch losses go into one preallocated buffer on the training device (no sync per batch): keeping each
        # batch's loss tensor alive instead costs ~1 MB of host memory per batch on CPU (the 0-dim loss keeps its
        # reduction's allocation), i.e. ~4 GB over a DPA_160MHz epoch. With the fast path the buffer is the graph's
        # own: a replay writes its slot; eager batches write theirs here.
        if fast is not None:
            fast.begin_epoch(plan)
            loss_buf = fast.epoch_losses
        else:
            loss_buf = torch.empty(n_batches, dtype=torch.float32, device=self.device)
        t_start = time.perf_counter()
        t_last = t_start
        cancel = self._cancel
        full = cfg.batch_size
        for b, idx in enumerate(plan):
            if cancel.is_set():
                raise Cancelled()
            if b == 0:
                self._mark("first_batch", epoch=epoch)
            replayed = fast is not None and self.loader.batch_len(idx) == full and fast(b, idx)
            if b == 0 and epoch == 0:
                # Not before: the first replay captures the graph, whose eager warm-up needs the GIL on every op,
                # and a concurrent import holding it slowed warm-up + capture from 0.5 s to 0.9–1.5 s on the GPU
                # machine (benchmarks/results/2026-11-30-gpu-epoch0.md). Once replaying, the GPU queue hides it.
                _warm_imports_in_background()
            if replayed:
                if not fast.optimizer_in_graph:
                    opt.step()
            else:
                xb, yb = self.loader.gather(idx)
                # Reference §4.6/§7.1: grads set to None on the plain path, zeroed in place when a graph exists.
                opt.zero_grad(set_to_none=fast is None)
                out = net(xb)
                loss = crit(out, yb)
                loss.backward()
                if clip != 0:
                    torch.nn.utils.clip_grad_norm_(trainable, clip)
                opt.step()
                loss_buf[b].copy_(loss.detach())
            now = time.perf_counter()
            if now - t_last >= PROGRESS_INTERVAL_S or b == n_batches - 1:
                t_last = now
                done = b + 1
                el = now - t_start
                if timing.TIMING_FILE:  # host progress timeline for benchmarks/startup_ab.py (off unless timing)
                    self._mark("progress", epoch=epoch, batch=done)
                self._emit(BatchProgress(epoch=epoch, epochs=cfg.epochs, batch=done, batches=n_batches,
                                         elapsed_s=el, eta_s=el / done * (n_batches - done)))
            every = self._preview_every
            if every and (b + 1) % every == 0 and not self._preview_failed:
                self._emit_preview(epoch, b + 1, n_batches)
        if fast is not None:
            fast.end_epoch()
        # Reference §4.5: float32 batch losses, one host copy per epoch, float64 NumPy mean.
        mean = float(np.mean(loss_buf[:n_batches].cpu().tolist())) if n_batches else float("nan")
        self._mark("train_end", epoch=epoch)
        return mean

    def _forward_segments(self, module, x_seg):
        """Run ``module`` in eval mode under inference mode on (S, N, 2) segments in eval batches; returns numpy."""
        import torch

        was_training = module.training
        module.eval()
        bs = self.config.batch_size_eval
        with torch.inference_mode():
            out = torch.cat([module(x_seg[i:i + bs]) for i in range(0, x_seg.shape[0], bs)], dim=0)
        module.train(was_training)
        return out.cpu().numpy()

    def _evaluate(self, name: str, net=None) -> dict[str, Any]:
        """Evaluate ``net`` (default: the live network) on the val or test segments (reference §4.7, net_eval):
        loss + metrics, predictions kept. Draws no random numbers (the caller draws the iterator seeds)."""
        import torch

        from ..metrics import compute_metrics

        es = self.eval_sets[name]
        net = self.net if net is None else net
        net.eval()
        bs = self.config.batch_size_eval
        preds, losses, dpd_out = [], [], []
        hook = None
        if self.config.step == "dpd":
            hook = net.dpd.register_forward_hook(lambda m, i, o: dpd_out.append(o))
        try:
            with torch.inference_mode():
                for i in range(0, es["x"].shape[0], bs):
                    out = net(es["x"][i:i + bs])
                    losses.append(self.criterion(out, es["t"][i:i + bs]))
                    preds.append(out)
        finally:
            if hook is not None:
                hook.remove()
        pred = torch.cat(preds, dim=0).cpu().numpy()
        loss = float(np.mean(torch.stack(losses).cpu().tolist()))
        metrics = compute_metrics(pred, es["t_seg"], self.dataset.spec)
        res = {"loss": loss, "metrics": metrics, "pred": pred}
        if dpd_out:
            res["u"] = torch.cat(dpd_out, dim=0).cpu().numpy()
        return res

    def _signal_names(self) -> tuple[str, str]:
        """(reference, model output) names used in the plot data: measured y / ŷ for PA, g·x / PA(DPD(x)) for DPD."""
        return ("measured y", "predicted ŷ") if self.config.step == "pa" else ("target g·x", "PA(DPD(x))")

    def _plots(self, source: str, ev: dict[str, Any], split: str = "val", net=None):
        from ..data.framing import unsegment
        from .plotdata import build_plot_data

        try:
            es = self.eval_sets[split]
            n = es["n"]
            pred = unsegment(ev["pred"], n)
            aclr = {}
            m = ev["metrics"]
            tname, pname = self._signal_names()
            if self.config.step == "pa":
                signals = {tname: es["t_np"], pname: pred}
            else:
                signals = {tname: es["t_np"], pname: pred,
                           "PA(x) no DPD": unsegment(self._baseline(split, net), n)}
                if "u" in ev:
                    signals["DPD output u"] = unsegment(ev["u"], n)
                aclr["PA(x) no DPD"] = _aclr_pair(self._baseline(split, net), self.dataset.spec)
            aclr[pname] = (m["ACLR_L"], m["ACLR_R"])
            aclr[tname] = self._target_aclr_pair(split)
            return build_plot_data(source, es["x_np"], signals, self.dataset.spec, target_name=tname,
                                   pred_name=pname, aclr=aclr, error_of=(pname, tname))
        except Exception as exc:  # noqa: BLE001 - plots must never break training
            self._log(f"plot data skipped: {type(exc).__name__}: {exc}")
            return None

    def set_preview_every(self, n: int | None) -> None:
        """Turn the live batch preview on (every ``n`` batches) or off (None) while a run is going (thread-safe:
        one attribute, read at each batch boundary). The setting is recorded in the log."""
        if n is not None and (not isinstance(n, int) or n < 1):
            raise ValueError(f"preview_every: expected a positive integer or None, got {n!r}")
        self._preview_every = n
        if self._log_fh is not None:
            self._log(f"live batch preview: {'every %d batches' % n if n else 'off'}")

    def _emit_preview(self, epoch: int, batch: int, n_batches: int) -> None:
        try:
            if self._preview is None:
                from .preview import BatchPreview

                self._preview = BatchPreview(self.net, self.eval_sets["val"], self.device)
            pred = self._preview.run(self.net)
            from ..metrics import nmse_db

            es = self.eval_sets["val"]
            n = min(es["n"], pred.shape[1])
            t_seg0 = es["t_seg"][:1]
            nmse = float(nmse_db(pred, t_seg0))
            x0 = es["x_seg"][0][:n]
            tname, pname = self._signal_names()
            sig = {tname: t_seg0[0][:n], pname: pred[0][:n]}
            from .plotdata import build_plot_data

            plots = build_plot_data("preview", x0, sig, self.dataset.spec, target_name=tname, pred_name=pname,
                                    error_of=(pname, tname))
            self._emit(PreviewReady(epoch=epoch, batch=batch, batches=n_batches, plots=plots,
                                    metrics={"NMSE": nmse}))
        except Exception as exc:  # noqa: BLE001
            self._log(f"preview disabled: {type(exc).__name__}: {exc}")
            self._preview_failed = True

    # ------------------------------------------------------------------ checkpoints
    def _ckpt_meta(self, epoch: int, row: dict[str, Any]) -> dict[str, Any]:
        cfg = self.config
        return {"format": "dpd-desktop-checkpoint-1", "role": cfg.step, "backbone": cfg.backbone,
                "hidden_size": cfg.hidden_size, "num_layers": cfg.num_layers, "epoch": epoch,
                "selection_metric": self.selection_metric, "value": float(row[self.selection_metric]),
                "run_id": self.run_id, "n_params": self.n_params_model,
                "dataset_fingerprint": self.fingerprint, "gain": self.gain}

    def _save_best(self, epoch: int, row: dict[str, Any], model_state) -> None:
        artifacts.save_checkpoint(self.run_dir / "best.pt", model_state, self._ckpt_meta(epoch, row))
        artifacts.write_history_csv(self.run_dir / "best.csv", [row])

    def _save_last(self, epoch: int, model_state, snap: dict[str, Any] | None) -> None:
        """Resumable state: model, optimizer (from the snapshot when the epoch end runs in the worker) and
        scheduler state as of this epoch's end (before its scheduler step)."""
        if snap is None:
            opt = self.optimizer.state_dict()
        else:
            ids = {id(p): i for i, p in enumerate(self.trainable)}
            state: dict[int, dict[str, Any]] = {}
            for (pid, key), v in snap["opt_state"].items():
                state.setdefault(ids[pid], {})[key] = v.detach().cpu() if hasattr(v, "detach") else v
            opt = {"state": state, "param_groups": snap["opt_groups"]}
        artifacts.save_training_state(self.run_dir / "last.pt", {
            "epoch": epoch, "model": {k: v.detach().cpu() for k, v in model_state.items()},
            "optimizer": opt, "scheduler": self.scheduler.state_dict(),
            "meta": self._ckpt_meta(epoch, self.history[-1])})

    # ------------------------------------------------------------------ end of run
    def _finish(self, t0: float) -> RunResult:
        self._mark("train_done")
        state, meta = artifacts.load_checkpoint(self.run_dir / "best.pt")
        self.model.load_state_dict(state)
        val = self._evaluate("val")
        test = self._evaluate("test")
        self._mark("final_eval_done")
        extra: dict[str, Any] = {}
        if self.config.step == "dpd":
            extra.update(self._output_power_report(test))
        self._write_results(val, test, extra)
        self._mark("results_written")
        plots = self._plots("test", test, split="test")
        wall = time.perf_counter() - t0
        self._mark("run_end")
        self._write_status("succeeded", best_epoch=self.best_epoch, best_value=_f(self.best_value),
                           test_metrics=_fmap(test["metrics"]), val_metrics=_fmap(val["metrics"]),
                           wall_s=wall, **extra)
        self._log(f"finished in {wall:.1f} s; selected epoch {self.best_epoch}; test " +
                  ", ".join(f"{k} {float(v):.4f}" for k, v in test["metrics"].items()))
        res = RunResult("succeeded", self.run_id, self.run_dir, self.best_epoch, self.history,
                        _fmap(val["metrics"]), _fmap(test["metrics"]), wall_s=wall, extra=extra)
        self._emit(RunFinished(run_id=self.run_id, run_dir=str(self.run_dir), best_epoch=self.best_epoch,
                               val_metrics=res.val_metrics, test_metrics=res.test_metrics, wall_s=wall,
                               plots=plots, extra=extra))
        return res

    def _output_power_report(self, test: dict[str, Any]) -> dict[str, Any]:
        """RMS output of the cascade with and without DPD on the test split, in dB (issue: a DPD must not
        "linearize" by changing the gain). Warns above 0.5 dB."""
        from ..data.framing import unsegment

        n = self.eval_sets["test"]["n"]
        with_dpd = unsegment(test["pred"], n).astype(np.float64)
        without = unsegment(self._baseline("test"), n).astype(np.float64)
        rms = lambda a: math.sqrt(float(np.mean(a[:, 0] ** 2 + a[:, 1] ** 2)))  # noqa: E731
        r1, r0 = rms(with_dpd), rms(without)
        diff = 20 * math.log10(r1 / r0) if r0 > 0 and r1 > 0 else float("nan")
        out = {"rms_out_with_dpd": r1, "rms_out_without_dpd": r0, "rms_out_diff_db": diff,
               "power_warning": bool(not abs(diff) <= 0.5)}
        if out["power_warning"]:
            self._log(f"WARNING: cascade RMS output with DPD differs from without DPD by {diff:+.2f} dB "
                      f"(> 0.5 dB): the DPD changes the gain")
        return out

    def _write_results(self, val: dict[str, Any], test: dict[str, Any], extra: dict[str, Any]) -> None:
        """``results.h5``: the selected checkpoint's val/test inputs, targets, predictions (and DPD outputs), metrics
        and spectra, with the configuration and spec as attributes (self-describing); written atomically."""
        artifacts.atomic_write_via(self.run_dir / "results.h5", lambda tmp: self._fill_results(tmp, val, test, extra))

    def _fill_results(self, tmp: str, val: dict[str, Any], test: dict[str, Any], extra: dict[str, Any]) -> None:
        import h5py

        from ..data.framing import unsegment

        spec = self.dataset.spec
        with h5py.File(tmp, "w") as f:
            f.attrs["run_id"] = self.run_id
            f.attrs["config_json"] = json.dumps(self.config.to_dict())
            f.attrs["selected_epoch"] = int(self.best_epoch)
            f.attrs["selection_metric"] = self.selection_metric
            f.attrs["gain"] = self.gain
            for k, v in _spec_dict(spec).items():
                if v is not None and not isinstance(v, dict):
                    f.attrs[f"spec_{k}"] = v
            for k, v in extra.items():
                f.attrs[k] = v
            for name, ev in (("val", val), ("test", test)):
                g = f.create_group(name)
                es = self.eval_sets[name]
                n = es["n"]
                g.create_dataset("x", data=es["x_np"])
                g.create_dataset("target", data=es["t_np"])
                g.create_dataset("prediction", data=unsegment(ev["pred"], n))
                if "u" in ev:
                    g.create_dataset("dpd_output", data=unsegment(ev["u"], n))
                g.attrs["loss"] = ev["loss"]
                for k, v in ev["metrics"].items():
                    g.attrs[k] = float(v)
                from ..metrics.spectra import psd_db

                fz, p = psd_db(unsegment(ev["pred"], n), spec.sample_rate_hz, min(spec.nperseg, 2048))
                g.create_dataset("psd_freq_hz", data=fz)
                g.create_dataset("psd_prediction_db", data=p)

    def _on_cancel(self, t0: float) -> RunResult:
        try:
            self._drain()
        except Exception as exc:  # noqa: BLE001
            self._log(f"epoch end failed during cancel: {exc}")
        done = len(self.history)
        self._log(f"cancelled after {done} completed epoch(s)")
        self._write_status("cancelled", epochs_completed=done, best_epoch=self.best_epoch)
        self._emit(RunCancelled(run_id=self.run_id, run_dir=str(self.run_dir), epochs_completed=done,
                                best_epoch=self.best_epoch))
        return RunResult("cancelled", self.run_id, self.run_dir, self.best_epoch, self.history,
                         wall_s=time.perf_counter() - t0, message="cancelled")

    def _on_failure(self, exc: BaseException, t0: float) -> RunResult:
        msg = describe_error(exc)
        detail = traceback.format_exc()
        try:
            self._drain()
        except Exception:  # noqa: BLE001 - the first error is the one reported
            pass
        if self.run_dir is not None:
            self._log(f"FAILED: {msg}\n{detail}")
            try:
                self._write_status("failed", message=msg, epochs_completed=len(self.history),
                                   best_epoch=self.best_epoch)
            except OSError:
                pass
        self._emit(RunFailed(run_id=self.run_id, run_dir=str(self.run_dir) if self.run_dir else None,
                             message=msg, detail=detail))
        return RunResult("failed", self.run_id, self.run_dir, self.best_epoch, self.history, message=msg,
                         wall_s=time.perf_counter() - t0)

    def _teardown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._log_fh is not None:
            try:
                self._log_fh.close()
            finally:
                self._log_fh = None

    # ------------------------------------------------------------------ helpers
    def _emit(self, event) -> None:
        for obs in self.observers:
            try:
                obs(event)
            except Exception:  # noqa: BLE001 - an observer must not kill the run
                log.exception("observer failed on %s", type(event).__name__)

    def _log(self, text: str, level: int = logging.INFO) -> None:
        """One line to the run's log.txt and to the logger (a warning also reaches the console)."""
        log.log(level, text)
        if self._log_fh is not None:
            self._log_fh.write(time.strftime("%H:%M:%S ") + text + "\n")
            self._log_fh.flush()

    def _write_status(self, state: str, **kw) -> None:
        if self.run_dir is None:
            return
        doc = {"state": state, "run_id": self.run_id, "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
               "step": self.config.step, "selection_metric": getattr(self, "selection_metric", None)}
        # who runs it: lets a reader tell a live run from one whose process was killed (workspace.owner_gone)
        doc.update(process_identity())
        doc.update(kw)
        artifacts.atomic_write_json(self.run_dir / "status.json", doc)


# ---------------------------------------------------------------------- module helpers
def load_dataset_for(spec: str):
    """``"demo"`` → the embedded synthetic dataset; anything else → :func:`dpd_desktop.data.load_dataset`."""
    from ..data import load_dataset, make_demo_dataset

    if spec == "demo":
        return make_demo_dataset()
    return load_dataset(spec)


def _require_finite_gain(ds) -> None:
    """A DPD's target is g·x with g = max|y_train| / max|x_train| (reference §1.4): the training split's input and
    output must not be all zeros.

    Raises:
        DatasetError: naming the dataset and the split whose peak is 0.
    """
    from ..data import DatasetError

    g = ds.gain
    if not (math.isfinite(g) and g > 0):
        which = "input x (max|x_train| = 0)" if not math.isfinite(g) else "output y (max|y_train| = 0)"
        raise DatasetError(f"the training split's {which} is all zeros, so the DPD target gain "
                           "g = max|y_train| / max|x_train| is undefined", path=ds.source,
                           field="train_input" if not math.isfinite(g) else "train_output",
                           expected="measured, non-zero training data")


def _require_whole_segment(ds) -> None:
    """Val and test must hold at least one ``nperseg``-sample segment: they are evaluated (and their PSD, ACLR and
    EVM computed) in whole segments, a shorter split would be mostly zero padding (reference §2.2).

    Raises:
        DatasetError: naming the dataset, the split, its length and the spec field ``nperseg``.
    """
    from ..data import DatasetError

    nps = int(ds.spec.nperseg)
    for name in ("val", "test"):
        n = int(getattr(ds, name).x.shape[0])
        if n < nps:
            raise DatasetError(f"the {name} split has {n} samples, fewer than one evaluation segment "
                               f"(spec field nperseg = {nps})", path=ds.source, field="nperseg",
                               expected="val and test of at least nperseg samples, or a smaller nperseg")


def check_pa_run(workspace: Workspace, pa_run: str, dataset=None, fingerprint: str | None = None,
                 allow_dataset_mismatch: bool = False) -> None:
    """Every check of :func:`load_pa_for_dpd` — the run exists and is a PA run of this dataset, its ``best.pt`` is
    there and has the recorded architecture — without touching the global RNG (the trial load runs under
    ``torch.random.fork_rng``), so that a DPD run can refuse a bad PA before its run folder exists.

    Raises:
        TrainingError: as :func:`load_pa_for_dpd`.
    """
    import torch

    with torch.random.fork_rng(devices=[]):
        load_pa_for_dpd(workspace, pa_run, dataset=dataset, fingerprint=fingerprint,
                        allow_dataset_mismatch=allow_dataset_mismatch)


def load_pa_for_dpd(workspace: Workspace, pa_run: str, dataset=None, fingerprint: str | None = None,
                    allow_dataset_mismatch: bool = False):
    """Build the frozen PA of a DPD run from a PA run of the workspace.

    Builds the PA model first (consuming the seeded RNG like the reference, §5.1 step 1), then loads the PA run's
    selected checkpoint. Returns ``(pa_model, info)`` where info records the PA run id, checkpoint path and sha256,
    the architecture and the PA's dataset fingerprint (``dataset_fingerprint``).

    When ``fingerprint`` (of the DPD's ``dataset``) is given, it must equal the fingerprint recorded in the PA run's
    ``config.json`` (a DPD learned through a PA model of another PA/dataset is meaningless), unless
    ``allow_dataset_mismatch`` (then ``info["dataset_mismatch_allowed"]`` is True). A PA run without a recorded
    fingerprint is not checked.

    A PA run that is still queued or running, that failed, or whose ``status.json`` is unreadable is refused; a
    cancelled or interrupted one (its ``best.pt`` is the best of the epochs it completed) is accepted; its state is
    recorded (``info["run_state"]``) and the trainer writes a warning to the run's log.

    Raises:
        TrainingError: the PA run, its ``config.json`` or ``best.pt`` is missing, it is not a PA run, it is running
            or failed, it was trained on another dataset, or the checkpoint's architecture (field names and tensor
            shapes) differs from the one recorded.
    """
    from ..models import build_model

    try:
        run_dir = workspace.resolve(pa_run)
    except FileNotFoundError as exc:
        raise TrainingError(f"pa_run: {exc}") from exc
    cfg_path = run_dir / "config.json"
    try:
        cfg = json.loads(cfg_path.read_text())
    except (OSError, ValueError) as exc:
        raise TrainingError(f"{cfg_path}: cannot read the PA run's configuration ({exc})") from exc
    exp = cfg.get("experiment") if isinstance(cfg, dict) else None
    if not isinstance(exp, dict):
        raise TrainingError(f"{cfg_path}: field 'experiment' is missing or not an object (not a run's configuration)")
    missing = [k for k in ("backbone", "hidden_size", "num_layers") if k not in exp]
    if missing:
        raise TrainingError(f"{cfg_path}: field 'experiment.{missing[0]}' is missing")
    arch = {k: exp[k] for k in ("backbone", "hidden_size", "num_layers")}
    if exp.get("step") != "pa":
        raise TrainingError(f"{cfg_path}: field 'experiment.step' is {exp.get('step')!r}; a DPD needs a PA run")
    from ..runs.workspace import read_run_record

    record = read_run_record(run_dir)
    state = record.status if record is not None else "unknown"
    if state in ("queued", "running"):
        raise TrainingError(f"pa_run: the PA run {run_dir.name} is still {state} ({run_dir / 'status.json'}); its "
                            "selected checkpoint may still change: wait until it has finished")
    if state in ("failed", "unreadable"):
        raise TrainingError(f"pa_run: the PA run {run_dir.name} is {state} ({run_dir / 'status.json'}"
                            + (f": {record.summary.get('message')}" if record.summary.get("message") else "")
                            + "); train the DPD through a PA run that succeeded")
    pa_ds = cfg.get("dataset") if isinstance(cfg.get("dataset"), dict) else {}
    pa_fp = pa_ds.get("fingerprint")
    mismatch = bool(fingerprint and pa_fp and pa_fp != fingerprint)
    if mismatch and not allow_dataset_mismatch:
        name = getattr(dataset, "name", "?")
        source = getattr(dataset, "source", "?")
        raise TrainingError(
            f"pa_run: the PA run {run_dir.name} was trained on dataset {pa_ds.get('name', '?')} "
            f"({pa_ds.get('source', '?')}, fingerprint {pa_fp[:12]}…) but this DPD uses {name} ({source}, "
            f"fingerprint {fingerprint[:12]}…); train the DPD on the PA's dataset, or allow the mismatch "
            "(command line: --allow-dataset-mismatch; experiment setting: allow_dataset_mismatch)")
    ckpt = run_dir / "best.pt"
    pa = build_model(arch["backbone"], arch["hidden_size"], arch["num_layers"])
    try:
        meta = artifacts.load_state_checked(pa, ckpt, arch)
    except artifacts.CheckpointError as exc:
        raise TrainingError(str(exc)) from exc
    info = {"run_id": run_dir.name, "run_dir": str(run_dir), "checkpoint": str(ckpt),
            "sha256": artifacts.file_sha256(ckpt), **arch, "selected_epoch": meta.get("epoch"),
            "dataset_fingerprint": pa_fp, "dataset_mismatch_allowed": mismatch, "run_state": state}
    return pa, info


def _warm_imports_in_background() -> None:
    """Import what the first epoch end and the end of the run need (scipy.signal, h5py) on a daemon thread
    while the GPU trains, so that neither the first evaluation nor the results file waits for an import."""

    def work():
        # Never a traceback from this thread: the process may exit (Ctrl+C, os._exit) in the middle of an import,
        # and a failed warm-up only means the import happens later, where it is needed.
        try:
            for name in ("scipy.signal", "scipy.fft", "h5py"):
                try:
                    __import__(name)
                except ImportError:
                    pass
            timing.mark("warm_imports_done")
        except BaseException:  # noqa: BLE001
            pass

    threading.Thread(target=work, name="dpd-warm-imports", daemon=True).start()


def lr_may_change(sched) -> bool:
    """Whether the next ``ReduceLROnPlateau.step`` could lower any learning rate, whatever the metric.

    It cannot while in cooldown, while one more bad epoch would not exceed the patience, or when every LR is
    already within ``eps`` of its minimum (PyTorch's ReduceLROnPlateau rules).
    """
    if getattr(sched, "cooldown_counter", 0) > 0:
        return False
    if sched.num_bad_epochs + 1 <= sched.patience:
        return False
    for group, min_lr in zip(sched.optimizer.param_groups, sched.min_lrs):
        old = float(group["lr"])
        if old - max(old * sched.factor, min_lr) > sched.eps:
            return True
    return False


def _model_of(net, step: str):
    return net if step == "pa" else net.dpd


def _opt_state_tensors(optimizer):
    """(param id, key) → value pairs of the optimizer state (for a device-side snapshot)."""
    for p, st in optimizer.state.items():
        for k, v in st.items():
            yield (id(p), k), v


def describe_error(exc: BaseException) -> str:
    """Plain-words message for a run failure (out-of-memory gets advice)."""
    text = str(exc) or type(exc).__name__
    low = text.lower()
    if "out of memory" in low:
        return ("the GPU ran out of memory: reduce the batch size, the frame length or the hidden size, or train "
                f"on the CPU ({text.splitlines()[0]})")
    if isinstance(exc, (ConfigError, TrainingError)):
        return text
    if exc.__class__.__name__ in ("DatasetError", "CheckpointError"):
        return text
    return f"{type(exc).__name__}: {text}"


def _scaled_target(split, gain: float) -> np.ndarray:
    """g·x in float64 from the float64 samples when the reader kept them, then cast to float32 (reference §2.3)."""
    x64 = getattr(split, "x64", None)
    if x64 is None:
        x64 = split.x.astype(np.float64)
    return np.ascontiguousarray((gain * x64).astype(np.float32))


def _aclr_pair(seg: np.ndarray, spec) -> tuple[float, float]:
    from ..metrics import aclr_db

    left, right, _ = aclr_db(seg, spec.sample_rate_hz, spec.bw_main_hz, spec.n_sub_ch)
    return float(left), float(right)


def _c(a: np.ndarray) -> np.ndarray:
    return a[:, 0].astype(np.float64) + 1j * a[:, 1].astype(np.float64)


def _f(v) -> float | None:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _fmap(m: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in m.items()}


def _spec_dict(spec) -> dict[str, Any]:
    import dataclasses

    try:
        return dataclasses.asdict(spec)
    except TypeError:
        return dict(vars(spec))


def _versions() -> dict[str, str]:
    import sys

    import torch

    from .. import __version__

    out = {"dpd_desktop": __version__, "python": sys.version.split()[0], "torch": torch.__version__,
           "numpy": np.__version__}
    try:
        import scipy

        out["scipy"] = scipy.__version__
    except ImportError:  # pragma: no cover
        pass
    if torch.cuda.is_available():
        out["cuda"] = str(torch.version.cuda)
        out["cudnn"] = str(torch.backends.cudnn.version())
    return out


def _format_row(row: dict[str, Any]) -> str:
    def g(k):
        v = row.get(k)
        return f"{float(v):.4f}" if v is not None else "-"

    return (f"epoch {row['EPOCH']}: lr {row['LR']:.2e} train {row['TRAIN_LOSS']:.3e} val {row['VAL_LOSS']:.3e} "
            f"val NMSE {g('VAL_NMSE')} dB, ACLR {g('VAL_ACLR_AVG')} dBc, EVM {g('VAL_EVM')} dB; "
            f"test NMSE {g('TEST_NMSE')} dB")
