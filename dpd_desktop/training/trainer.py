"""The trainer: epochs, validation, test, checkpoint selection, events. It writes no file: the run record's writer
(runs/writer.py ``RunWriter``) observes its events and writes the run folder.

Behavioral spec: OpenDPD 2.2.1 reference §2 (framing), §4 (training loop), §5 (DPD through a frozen PA), §6
(metrics). With the same seed, settings and library versions a PA run reproduces the reference's selected checkpoint
and history; the global torch RNG is consumed as the reference does (model construction, then per epoch: train
iterator seed, sampler seed, val iterator seed, test iterator seed; §4.1–§4.2), in :meth:`Trainer._setup`'s order.

Deliberate differences: the selected checkpoint's val and test evaluations, predictions and spectra go into
results.h5 (its epoch's evaluation is reused: the same weights through the same kernels; a run resumed after its
selected epoch evaluates it again); ``last.pt`` is written every epoch for resuming; cancellation is checked between
batches (the reference: at epoch end, §9.18).
"""
from __future__ import annotations

import contextlib
import logging
import math
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import torch

from .. import timing
from ..config import ConfigError, ExperimentConfig
from ..data.framing import BatchPlan, FrameLoader, PlainFrameLoader, draw_dataloader_iterator_seed
from ..kernels.dispatch import KernelChoice, apply_kernel
from ..models import Cascade, build_model, count_parameters
from ..runs.writer import RunWriter, discard_unstarted, is_disk_full
from ..runs.workspace import Workspace
from . import limits, resume_state, rng_state
from .augment import make_augment
from .dataset_checks import load_dataset_for, require_finite_gain, require_whole_segment
from .device import deterministic_convolutions, device_name, reference_determinism, resolve_device, seed_everything
from .errors import Cancelled, TrainingError
from .evaluation import Evaluator, scaled_target
from .emitting import RunOutput
from ..runs.events import (BatchProgress, CheckpointReady, EpochEnded, PreviewReady, ResultsReady, RunCancelled,
                           RunFailed, RunFinished, RunPrepared, RunStarted)
from .fast_path import make_fast_step
from .cfr import cfr_targets
from .gain import equal_power_report, target_gain
from .losses import FrameLoss, base_criterion, make_criterion
from .objectives import ila_loss
from .optim import make_optimizer
from .overlap import EpochEndOverlap, lr_may_change, optimizer_state
from .pa_source import check_pa_run, load_pa_for_dpd
from .preview import LivePreview
from .qat_setup import parent_record, prepare_finetune
from .record_payload import checkpoint_meta, history_row, results_attrs, setup_blocks
from .report import describe_error, finite_or_none, float_map, format_row
from .schedules import make_schedule
from .warm_imports import warm_imports_in_background

__all__ = ["Trainer", "RunResult", "load_dataset_for", "check_pa_run"]

PROGRESS_INTERVAL_S = 0.1
#: CUDA: overlap an epoch's end with the next epoch's training (overlap.py); tests turn it off to compare
OVERLAP_EPOCH_ENDS = True


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


class Trainer:
    """Train one PA model or one DPD through a frozen PA; the run folder is written by a :class:`RunWriter`.

    Args:
        dataset: an already loaded :class:`~dpd_desktop.data.IQDataset` (None: loaded from ``config.dataset``).
        workspace: where the run folder is created (default: the platform workspace).
        observers: callables receiving every event, on the training thread (or the epoch-end worker thread).
        fast_path, fused_step, batched_loader: False turns off the CUDA graph, the fused GRU (or GRU DPD) step in
            it, the device-resident loader (diagnostic switches for equivalence tests and benchmarks).
        plot_data: False: the epoch ends and the run's end carry no plot data (``plots`` None), for runs whose
            events nobody draws (a sweep's trials, a headless run without plots); the run folder is the same.
        resume: a checked last.pt (resume_state.py ``ResumeState``): the run continues in its own folder (with a
            resuming RunWriter).
        writer: the observer that writes the run folder (default: a new :class:`RunWriter`); it sees every event
            first and its errors fail the run (other observers' errors are logged and ignored).
        fault: a fault injected into the training batches (tests; limits.py :class:`~.limits.FaultHook`).

    ``run()`` never raises for run-level failures: it emits :class:`RunFailed` and returns a failed
    :class:`RunResult`. ``request_cancel()`` is thread-safe; the flag is checked between batches.
    """

    def __init__(self, config: ExperimentConfig, dataset=None, workspace: Workspace | None = None,
                 observers: Iterable[Callable] = (), fast_path: bool = True, writer: RunWriter | None = None,
                 resume: resume_state.ResumeState | None = None, fault: limits.FaultHook | None = None,
                 fused_step: bool = True, batched_loader: bool = True, plot_data: bool = True):
        self.config = config
        self.plot_data = plot_data
        self.resume = resume
        self.use_fast_path, self.use_fused_step, self.use_batched_loader = fast_path, fused_step, batched_loader
        self.dataset = dataset
        self.workspace = workspace or Workspace()
        self.output = RunOutput(writer if writer is not None else RunWriter(), observers)
        self._stop = limits.StopRequest()
        # --- the run (set by _setup_run_folder)
        self.run_id: str | None = None
        self.run_dir: Path | None = None
        self.selection_metric: str | None = None
        self.schedule_metric: str | None = None  # what the LR schedule steps on (the selection metric, or OBJECTIVE)
        # --- device and data (_setup_device, _setup_dataset, _setup_data)
        self.device: torch.device | None = None
        self.device_name: str | None = None
        self.threads_note: str | None = None  # the CPU threads' log line (limits.apply_device_limits)
        self.fingerprint: str | None = None
        self.gain: float | None = None
        self.gain_info = None  # TargetGain (gain.py): the rule, the value, every rule's candidate
        self.cfr = None  # CFRResult (cfr.py) when the DPD's target is crest-factor reduced
        self.loader = None
        self.loader_status: str | None = None
        self.evaluator: Evaluator | None = None
        # --- model (_setup_model): net is what trains (the cascade for a DPD), model the trained model alone
        self.net = None
        self.model = None
        self.pa_info: dict[str, Any] | None = None
        self.finetune_block: tuple[str, dict] | None = None  # a fine-tune's config.json block (qat_setup.py)
        self.cudnn_note: str | None = None
        self.kernels: KernelChoice | None = None  # the kernel dispatch's decision (kernels/dispatch.py)
        self.n_params: int | None = None
        self.n_params_model: int | None = None
        self.trainable: list = []
        self.criterion = None
        # --- optimizer (_setup_optimizer) and fast path (_setup_fast_path)
        self.optimizer = None
        self.optimizer_impl: str | None = None
        self.scheduler = None
        self.fast_step = None
        self.fast_path_status: str | None = None
        self.fast_path_optimizer: str | None = None
        # --- the epoch loop
        self.history: list[dict[str, Any]] = []
        self.best_epoch: int | None = None
        self.best_value: float | None = None
        self._best_state: dict[str, torch.Tensor] | None = None  # the selected epoch's model tensors, on the CPU
        self._best_meta: dict[str, Any] | None = None
        self._best_row: dict[str, Any] | None = None
        self._best_evals: tuple[dict, dict] | None = None  # the selected epoch's val and test evaluations
        self.start_epoch = 0  # > 0 when resumed (resume_state.restore)
        self.elapsed_before_s = 0.0  # the TIME: column's minutes before the resume, in seconds
        self._fault = fault
        self._start_time: float | None = None
        self._overlap = EpochEndOverlap()  # CUDA: epoch ends on a worker thread (see overlap.py)
        self.preview = LivePreview(config.preview_every)
        self.group_member = None  # set by training/group.py TrainerGroup: this run trains together with others
        self.eval_constants = None  # the group's shared evaluation constants (evaluation.EvalConstants), or its own

    # ------------------------------------------------------------------ public API
    @property
    def observers(self) -> list:
        """The observers of the run's events (a list that may grow while the run goes)."""
        return self.output.observers

    def request_cancel(self, reason: str = "") -> None:
        """Ask the run to stop at the next batch boundary (thread-safe); ``reason`` goes into status.json."""
        self._stop.request(reason)

    def set_preview_every(self, n: int | None) -> None:
        """Turn the live batch preview on (every ``n`` batches) or off (None) while a run is going (thread-safe;
        the change is logged by the training thread at the epoch's end). Raises ValueError for a bad ``n``."""
        self.preview.set_every(n)

    def run(self) -> RunResult:
        """Run the whole experiment (blocking). Returns the outcome; see the class docstring."""
        t0 = time.perf_counter()
        timing.mark("run_start")
        try:
            self._setup()
            self.output.emit(RunStarted(
                run_id=self.run_id, run_dir=str(self.run_dir), step=self.config.step,
                config=self.config.to_dict(), device=str(self.device), device_name=self.device_name,
                fast_path=self.fast_path_status, batched_loader=self.loader_status, n_params=self.n_params,
                n_params_model=self.n_params_model,
                n_train_frames=self.loader.n_frames, batches_per_epoch=self.loader.n_batches,
                epochs=self.config.epochs, dataset_summary=_dataset_summary(self.dataset),
                setup=setup_blocks(self)))
            timing.mark("setup_done")
            work = ("least-squares fit (no frames, no batches)" if self.config.fit == "ls"
                    else f"{self.loader.n_frames} frames, {self.loader.n_batches} batches/epoch")
            self._log(f"training: {work}, device {self.device} ({self.device_name}), "
                      f"CUDA graph: {self.fast_path_status}")
            if self.threads_note:
                self._log(self.threads_note)
            self._epoch_loop()  # a group's member has left the group by its end (_drain)
            return self._finish(t0)
        except Cancelled:
            try:
                return self._on_cancel(t0)
            except OSError as exc:  # the cancelled state could not be written (disk full): the run failed
                return self._on_failure(exc, t0)
        except Exception as exc:  # noqa: BLE001 - a run failure must be reported, not crash the app
            return self._on_failure(exc, t0)
        finally:
            self._teardown()

    # ------------------------------------------------------------------ set-up, in the reference's RNG order
    def _setup(self) -> None:
        """The named set-up steps. Nothing before ``_setup_seed`` draws from the global RNG (the PA check runs
        under fork_rng); after it, the RNG is consumed as the reference does: model construction (the PA's first
        for a DPD), then nothing until the first epoch's iterator seeds (reference §4.1 steps 1-5)."""
        timing.mark("torch_imported")
        cfg = self.config = limits.with_workspace_defaults(self.config, self.workspace).validate()
        self._setup_device(cfg)       # 1. device, its name, CPU threads, CUDA memory ceiling, time limit
        self._setup_dataset(cfg)      # 2. load and check the dataset; a DPD's PA run is checked (no RNG, no folder)
        self._setup_run_folder(cfg)   # 3. the run folder exists from here on (a failure is recorded as "failed")
        self._setup_seed(cfg)         # 4. seed random/NumPy/torch; cuDNN as the reference sets it
        self._setup_data(cfg)         # 5. targets, training loader, val/test segments on the device
        self._setup_model(cfg)        # 6. model construction (consumes the RNG; PA first for a DPD)
        self._setup_optimizer(cfg)    # 7. loss, AdamW, ReduceLROnPlateau
        self._setup_fast_path(cfg)    # 8. CUDA graph step (captured at the first full batch)
        if self.group_member is not None:  # a group's member: its full batches are the group's (group.py)
            self.fast_step = self.group_member.attach(self)
        if self.resume is not None:   # 9. a resumed run: last.pt's state, RNG states last (resume_state.py)
            resume_state.restore(self, self.resume)
            self._log(f"resumed from epoch {self.resume.epoch} (last.pt); continuing at epoch {self.start_epoch}")
        timing.mark("before_config")

    def _setup_device(self, cfg: ExperimentConfig) -> None:
        self.device = resolve_device(cfg.device)
        self.device_name = device_name(self.device)
        self.threads_note = limits.apply_device_limits(cfg, self.device)
        self._stop.start_clock(cfg.time_limit_s)
        timing.mark("setup_start")

    def _setup_dataset(self, cfg: ExperimentConfig) -> None:
        if self.dataset is None:
            self.dataset = load_dataset_for(cfg.dataset)
        timing.mark("data_loaded")
        ds = self.dataset
        ds.spec.require_metrics(str(ds.source))
        require_whole_segment(ds)
        n_train = min(ds.train.x.shape[0], cfg.max_train_samples or ds.train.x.shape[0])
        if n_train < cfg.frame_length:  # refused before a run folder exists
            raise ConfigError("frame_length", f"{cfg.frame_length} is longer than the training split "
                              f"({n_train} samples of {ds.name})")
        self.fingerprint = ds.fingerprint()  # before the PA is loaded: a DPD checks it against the PA's dataset
        if cfg.step == "dpd":  # a bad PA run is refused before a run folder exists (the real load comes later)
            require_finite_gain(ds)
            check_pa_run(self.workspace, cfg.pa_run, dataset=ds, fingerprint=self.fingerprint,
                         allow_dataset_mismatch=cfg.allow_dataset_mismatch)
            if cfg.parent_run is not None:  # a fine-tune's parent is checked before a run folder exists too
                parent_record(self.workspace, cfg.parent_run)

    def _setup_run_folder(self, cfg: ExperimentConfig) -> None:
        self.selection_metric = "VAL_NMSE" if cfg.step == "pa" else "VAL_ACLR_AVG"
        self.schedule_metric = self.selection_metric
        if cfg.selection == "power-gated":  # record_payload.history_row: VAL_SELECTION = OBJECTIVE (+1000 if out)
            self.selection_metric, self.schedule_metric = "VAL_SELECTION", "VAL_OBJECTIVE"
        if self.resume is not None:
            self.run_dir = self.resume.path.parent
            self.run_id = self.run_dir.name
        else:
            try:
                self.run_id, self.run_dir = self.workspace.new_run_dir(f"{cfg.step}-{cfg.size_label}")
            except OSError as exc:
                raise TrainingError(f"cannot start a run in the workspace {self.workspace.root}: no run folder can "
                                    f"be made in {self.workspace.runs_dir} ({exc.strerror or exc})") from exc
        try:
            self.output.emit(RunPrepared(run_id=self.run_id, run_dir=str(self.run_dir), step=cfg.step,
                                          selection_metric=self.selection_metric, config=cfg.to_dict()))
        except OSError as exc:
            if self.resume is not None or not is_disk_full(exc):
                raise  # a resumed run's folder is never removed; another error fails the run in its folder
            # a full disk before the run started: nothing of it is kept, no empty run folder is left
            folder, self.run_dir, self.run_id = self.run_dir, None, None
            left = "" if discard_unstarted(folder) else f"; the folder {folder} could not be removed"
            raise TrainingError(f"cannot start a run in the workspace {self.workspace.root}: the disk is full "
                                f"({exc.strerror or exc}); free some space and start it again{left}") from exc
        self._log(f"run {self.run_id}: {cfg.step.upper()} {cfg.backbone} H={cfg.hidden_size} on {self.dataset.name}")

    def _setup_seed(self, cfg: ExperimentConfig) -> None:
        # Reference §4.1: seed, then soft reproducibility (cuDNN benchmark on, deterministic algorithms off).
        seed_everything(cfg.seed)
        reference_determinism()

    def _setup_data(self, cfg: ExperimentConfig) -> None:
        # Reference §1.4, §2: no normalization; DPD target g·x computed in float64, then float32.
        ds = self.dataset
        self.gain_info = target_gain(ds, cfg.gain_rule, cfg.gain_value)  # "peak": float(ds.gain) (gain.py)
        self.gain = self.gain_info.value
        if cfg.step == "dpd" and cfg.target_cfr_db is not None:  # g·x with its peaks reduced in-band (cfr.py)
            self.cfr = cfr_targets(ds, self.gain, cfg.target_cfr_db, cfg.target_cfr_iterations,
                                   cfg.target_cfr_band_hz)
            targets = self.cfr.targets
            tr = self.cfr.splits["train"]
            self._log(f"target: g·x with crest-factor reduction to {cfg.target_cfr_db:+.2f} dB re max|y_train| "
                      f"({cfg.target_cfr_iterations} rounds): training target peak {tr['peak_before_db']:+.2f} -> "
                      f"{tr['peak_after_db']:+.2f} dB re the limit, power {tr['power_change_db']:+.3f} dB, error "
                      f"{tr['error_db']:.1f} dB against g·x")
        elif cfg.step == "dpd":
            targets = {s: scaled_target(getattr(ds, s), self.gain) for s in ("train", "val", "test")}
        else:
            targets = {"train": ds.train.y, "val": ds.val.y, "test": ds.test.y}
        x_train, y_train = ds.train.x, targets["train"]
        if cfg.max_train_samples:
            x_train, y_train = x_train[:cfg.max_train_samples], y_train[:cfg.max_train_samples]
        dev = self.device
        x_cpu = torch.from_numpy(np.ascontiguousarray(x_train))
        y_cpu = torch.from_numpy(np.ascontiguousarray(y_train))
        if cfg.augment != "none":  # turned in place every epoch: copies, never the dataset's (or targets') arrays
            x_cpu, y_cpu = x_cpu.clone(), y_cpu.clone()
        if not self.use_batched_loader:
            self.loader = PlainFrameLoader(x_cpu, y_cpu, cfg.frame_length, cfg.stride, cfg.batch_size, dev)
            self.loader_status = "off: disabled for this run (per-frame DataLoader)"
            self._log(f"batched loader {self.loader_status}")
        else:
            self.loader = FrameLoader(x_cpu.to(dev), y_cpu.to(dev), cfg.frame_length, cfg.stride, cfg.batch_size)
            self.loader_status = "on: whole batches gathered on the device"
        self.augment = make_augment(cfg.augment, self.loader, cfg.seed)  # None: the series stay as read
        if self.augment is not None:
            self._log(f"augmentation {cfg.augment}: the training input and target turned by a new phase ramp "
                      f"every epoch")
        if self._fault is not None:
            self.loader = self._fault.wrap(self.loader)
        # the criterion is needed by the evaluator; building it draws no random numbers
        self.criterion = make_criterion(cfg, ds.spec)  # the reference's MSELoss/L1Loss unless a window/power term is set
        if isinstance(self.criterion, FrameLoss):
            self._log(f"loss: {self.criterion.describe()}")
        if cfg.step == "dpd" and cfg.target_cfr_db is None and (
                cfg.target_cfr_band_hz is not None
                or cfg.target_cfr_iterations != ExperimentConfig.target_cfr_iterations):
            self._log("target_cfr_iterations / target_cfr_band_hz have no effect: the target's crest-factor "
                      "reduction is off (target_cfr_db none)")
        if cfg.oob_side != "both" and not cfg.oob_weight:
            self._log(f"oob_side {cfg.oob_side!r} has no effect: the out-of-band term is off (oob_weight 0)")
        self.evaluator = Evaluator(ds, targets, cfg.step, base_criterion(self.criterion), cfg.batch_size_eval, dev,
                                   metric_profile=cfg.metric_profile, mode=cfg.evaluation,
                                   frame_length=cfg.frame_length, constants=self.eval_constants)
        timing.mark("tensors_on_device")

    def _setup_model(self, cfg: ExperimentConfig) -> None:
        # Reference §4.1 step 5: construction consumes the seeded RNG; the PA first for a DPD (§5.1).
        if cfg.step == "pa":
            self.net = build_model(cfg.backbone, cfg.hidden_size, cfg.num_layers, poly=cfg.poly_spec(),
                                   thx=cfg.thx, thh=cfg.thh)
            self.model = self.net
        else:
            pa, self.pa_info = load_pa_for_dpd(self.workspace, cfg.pa_run, dataset=self.dataset,
                                               fingerprint=self.fingerprint,
                                               allow_dataset_mismatch=cfg.allow_dataset_mismatch)
            if self.pa_info.get("dataset_mismatch_allowed"):
                self._log(f"WARNING: the PA run {self.pa_info['run_id']} was trained on another dataset "
                          f"(fingerprint {self.pa_info['dataset_fingerprint']}); allowed by allow_dataset_mismatch",
                          logging.WARNING)
            if self.pa_info["run_state"] != "succeeded":
                self._log(f"WARNING: the PA run {self.pa_info['run_id']} is {self.pa_info['run_state']}; its selected "
                          "checkpoint (best.pt) is used as it is", logging.WARNING)
            dpd = build_model(cfg.backbone, cfg.hidden_size, cfg.num_layers, poly=cfg.poly_spec(),
                              thx=cfg.thx, thh=cfg.thh)
            if cfg.parent_run is not None:  # a fine-tune: the parent's weights (fake-quantised with qat)
                dpd, self.finetune_block = prepare_finetune(cfg, dpd, self.workspace, self.dataset, self.pa_info)
                kind, block = self.finetune_block
                self._log(f"fine-tune of {block['parent_run']}" + (
                    f", quantisation-aware ({block['label']}); CUDA graph off" if kind == "qat" else ""))
            self.net = Cascade(dpd, pa, peak_limit=cfg.peak_limit)
            self.net.freeze_pa()
            self.model = dpd
        self.net.to(self.device)
        self.kernels = apply_kernel(self.net, cfg.kernel, self.device)
        for note in self.kernels.notes:
            self._log(f"kernel: {note}")
        self._log(f"kernels ran: {self.kernels.summary}")
        timing.mark("model_built")
        # convolutional families use deterministic cuDNN algorithms on CUDA (recorded in config.json)
        self.cudnn_note = deterministic_convolutions(self.net, self.device)
        self.n_params = count_parameters(self.net)  # reference N_PARAM: whole cascade for DPD (§4.8 quirk kept)
        self.n_params_model = count_parameters(self.model)
        self.trainable = [p for p in self.net.parameters() if p.requires_grad]
        if not self.trainable:
            raise TrainingError("the model has no trainable parameters")

    def _setup_optimizer(self, cfg: ExperimentConfig) -> None:
        # torch.optim.AdamW / ReduceLROnPlateau arithmetic, without importing torch._dynamo (see optim.py)
        self.optimizer, self.optimizer_impl = make_optimizer(self.trainable, lr=cfg.lr, weight_decay=cfg.weight_decay)
        if not self.optimizer_impl.startswith("torch-private"):
            self._log(f"WARNING: optimizer: {self.optimizer_impl}", logging.WARNING)
        self.scheduler = make_schedule(self.optimizer, cfg)  # the reference's plateau scheduler by default

    def _setup_fast_path(self, cfg: ExperimentConfig) -> None:
        ila = cfg.step == "dpd" and cfg.dpd_learning == "ila"
        self.fast_step, self.fast_path_status = make_fast_step(
            self.net, self.criterion, self.optimizer, self.trainable, cfg.grad_clip, self.device,
            batch_shape=(cfg.batch_size, cfg.frame_length, 2), loader=self.loader,
            enabled=self.use_fast_path and not ila and cfg.qat is None,  # fake quantisation reads formats on the host
            fused=self.use_fused_step)
        if ila and self.device.type == "cuda" and self.fast_path_status == "off: disabled for this run":
            self.fast_path_status = "off: ILA trains eagerly (its step runs the network three times)"
        if self.fast_path_status != "on":
            self._log(f"CUDA graph: {self.fast_path_status}")
        # where the AdamW update runs with the fast path: decided at the capture (first full batch), see fast_path.py
        self.fast_path_optimizer = ("decided at the first batch" if self.fast_step is not None
                                    else "eager (no CUDA graph)")

    # ------------------------------------------------------------------ epoch loop
    def _epoch_loop(self) -> None:
        """Train all epochs. On CUDA an epoch's end (evaluation, checkpoint, EpochEnded, scheduler step) runs on a
        worker thread on a snapshot of the weights, overlapping the next epoch, whenever the learning rate cannot
        change at that boundary (:func:`lr_may_change`); the numbers are those of the inline path, and the RNG
        draws stay on this thread in the reference's order."""
        cfg = self.config
        overlap = self.device.type == "cuda" and OVERLAP_EPOCH_ENDS
        self._start_time = time.time() - self.elapsed_before_s
        for epoch in range(self.start_epoch, cfg.epochs):
            te = time.perf_counter()
            lr = self.optimizer.param_groups[0]["lr"]
            self._train_epoch(epoch)
            self._refresh_fast_path_status()
            self._drain(leave_group=False)  # the previous epoch's end is done: scheduler state is current
            timing.mark("boundary_drained", epoch=epoch)
            draw_dataloader_iterator_seed()  # val iterator (reference §4.2)
            draw_dataloader_iterator_seed()  # test iterator
            rng = rng_state.capture(self.device)  # where epoch + 1 continues: for last.pt (resume_state.py)
            last = epoch == cfg.epochs - 1
            member = self.group_member
            if last and member is not None:
                member.loop_done()  # no more meetings or RNG draws: the rest runs beside the others'
            train_loss = self._mean_train_loss(epoch)  # waits for the epoch's batches on the device
            while self.preview.notes:
                self._log(self.preview.notes.pop(0))
            if not math.isfinite(train_loss):
                self._drain()  # earlier epochs' results and checkpoints stay as written
                raise limits.nonfinite_error(self.device, epoch, self._epoch_losses, lr)
            if overlap and not last and not lr_may_change(self.scheduler):
                snap = self._overlap.snapshot(self.net, self.optimizer, self.device)
                end = self._epoch_end if member is None else member.after_next_meeting(self._epoch_end)
                self._overlap.submit(end, epoch, lr, train_loss, te, snap, rng)
            else:
                self._epoch_end(epoch, lr, train_loss, te, None, rng)
            if self._stop.is_set():
                self._drain()
                raise Cancelled()
        self._drain()

    def _refresh_fast_path_status(self) -> None:
        """After an epoch: take over the fast path's state (a capture may have failed, the optimizer's placement is
        known after the first capture); the record rewrites config.json at this epoch's end when it changed."""
        fast = self.fast_step
        if fast is None:
            return
        status, opt_note = fast.status, fast.optimizer_note
        if status != self.fast_path_status:
            self._log(f"CUDA graph: {status}")
        self.fast_path_status, self.fast_path_optimizer = status, opt_note

    def _epoch_end(self, epoch: int, lr: float, train_loss: float, te: float, snap: dict[str, Any] | None,
                   rng: dict[str, Any]) -> None:
        """Evaluate, select, emit the checkpoint and the row, step the scheduler for one epoch (reference §4.7)."""
        cfg = self.config
        if snap is not None:
            net = snap["net"]
            stream = self._overlap.eval_stream
            stream.wait_event(snap["event"])
            ctx = torch.cuda.stream(stream)
        else:
            net, ctx = self.net, contextlib.nullcontext()
        timing.mark("eval_start", epoch=epoch, run=self.run_id)
        with ctx:
            val = self.evaluator.evaluate("val", net)
            test = self.evaluator.evaluate("test", net) if cfg.test_every_epoch else _not_evaluated(val)
            # one host copy of the trained model and the optimizer state per epoch, on the evaluation's stream (on
            # the training stream they would wait for every batch queued since)
            model = net if cfg.step == "pa" else net.dpd
            model_state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
            opt_state = optimizer_state(self.optimizer, self.trainable, snap)
        timing.mark("eval_done", epoch=epoch, run=self.run_id)
        row = history_row(self, epoch, cfg.epochs, lr, train_loss, val, test)
        self.history.append(row)

        # Reference §4.8: epoch 0 always saves; later epochs only when strictly lower; NaN never wins.
        value = row[self.selection_metric]
        is_best = epoch == 0 or (self.best_value is not None and value < self.best_value)
        meta = checkpoint_meta(self, epoch, row)
        if is_best:
            self.best_value, self.best_epoch, self._best_state = value, epoch, model_state
            self._best_meta, self._best_row = meta, row
            self._best_evals = (val, test)  # the run's final results (_finish): the same weights
        self.output.emit(CheckpointReady(epoch=epoch, row=row, is_best=is_best, model_state=model_state,
                                          optimizer_state=opt_state,
                                          scheduler_state=self.scheduler.state_dict(), meta=meta,
                                          resume_state=resume_state.epoch_state(self, rng)))
        timing.mark("checkpoint_emitted", epoch=epoch, run=self.run_id)
        seconds = time.perf_counter() - te
        row_out = dict(row, EPOCH_SECONDS=seconds)
        self._log(format_row(row))
        plots = self._plots("validation", val, "val", net)
        timing.mark("epoch_end", epoch=epoch, run=self.run_id)
        self.output.emit(EpochEnded(epoch=epoch, epochs=cfg.epochs, row=row_out, is_best=is_best,
                                     best_epoch=self.best_epoch, best_value=float(self.best_value),
                                     selection_metric=self.selection_metric, epoch_seconds=seconds, plots=plots,
                                     fast_path=self.fast_path_status, fast_path_optimizer=self.fast_path_optimizer))
        # Reference §4.4/§4.7: scheduler stepped after logging/checkpointing, on the validation metric.
        self.scheduler.step(row[self.schedule_metric])
        timing.mark("epoch_end_done", epoch=epoch, run=self.run_id)

    def _train_epoch(self, epoch: int) -> None:
        cfg = self.config
        net, opt, crit, clip = self.net, self.optimizer, self.criterion, cfg.grad_clip
        trainable = self.trainable
        fast = self.fast_step
        net.train()
        plan = self.loader.epoch()
        if self.augment is not None:
            self.augment.apply(epoch)
        n_batches = len(plan)
        # Batch losses go into one preallocated buffer on the training device (no sync per batch; a batch's loss
        # tensor kept alive would keep its reduction's allocation). With the fast path the buffer is the graph's
        # own: a replay writes its slot; eager batches write theirs here.
        if fast is not None:
            fast.begin_epoch(plan)
        loss_buf = fast.epoch_losses if fast is not None else None
        if loss_buf is None:
            loss_buf = torch.empty(n_batches, dtype=torch.float32, device=self.device)
        in_place = fast is not None and getattr(fast, "grads_in_place", True)
        t_start = time.perf_counter()
        throttle = timing.Throttle(PROGRESS_INTERVAL_S, start=t_start, clock=time.perf_counter)
        stop, preview = self._stop, self.preview
        full = cfg.batch_size
        # a batch plan (the device loader) has its full batches first, only the last may be short: one length check
        n_full = (n_batches - (1 if n_batches and self.loader.batch_len(plan[-1]) != full else 0)
                  if isinstance(plan, BatchPlan) else None)
        ila = cfg.step == "dpd" and cfg.dpd_learning == "ila"
        gain = self.gain

        def report(done: int) -> None:  # progress every PROGRESS_INTERVAL_S and at the end; the live preview
            if throttle.ready(final=done == n_batches):
                el = throttle.last - t_start
                timing.mark("progress", epoch=epoch, batch=done)  # host progress timeline (benchmarks/startup_ab.py)
                self.output.emit(BatchProgress(epoch=epoch, epochs=cfg.epochs, batch=done, batches=n_batches,
                                                elapsed_s=el, eta_s=el / done * (n_batches - done)))
            if preview.due(done):
                self._emit_preview(epoch, done, n_batches)

        # A group's member takes the batches a meeting queued for it a run at a time (training/group.py
        # GroupStep.take_queued): a loop turn per batch would hold the GIL that the epoch ends need.
        take = getattr(fast, "take_queued", None) if n_full is not None else None
        it = None if isinstance(plan, BatchPlan) else iter(plan)
        b = 0
        try:
            while b < n_batches:
                if stop.is_set():
                    raise Cancelled()
                if b == 0:
                    timing.mark("first_batch", epoch=epoch)
                if take is not None:
                    every = preview.every  # a run stops at each preview's batch
                    k = take(b, min(n_full, (b // every + 1) * every) if every else n_full)
                    if k:
                        b += k
                        report(b)
                        continue
                idx = plan[b] if it is None else next(it)
                replayed = fast is not None and (b < n_full if n_full is not None
                                                 else self.loader.batch_len(idx) == full) and fast(b, idx)
                if b == 0 and epoch == 0:
                    # Not before: the first replay captures the graph, whose eager warm-up needs the GIL on every op
                    # (a concurrent import slows it). Once replaying, the GPU queue hides the imports.
                    warm_imports_in_background()
                if replayed:
                    if not fast.optimizer_in_graph:
                        opt.step()
                else:
                    xb, yb = self.loader.gather(idx)
                    # Reference §4.6/§7.1: grads set to None on the plain path, zeroed in place when a graph exists.
                    opt.zero_grad(set_to_none=not in_place)
                    if ila:  # indirect learning: the post-inverse's loss (objectives.py)
                        loss = ila_loss(net, xb, gain, crit, epoch)
                    else:
                        out = net(xb)
                        loss = crit(out, yb)
                    loss.backward()
                    if clip != 0:
                        torch.nn.utils.clip_grad_norm_(trainable, clip)
                    opt.step()
                    loss_buf[b].copy_(loss.detach())
                report(b + 1)
                b += 1
        except torch.OutOfMemoryError as exc:
            raise limits.oom_error(self.device, epoch, b, exc) from exc
        if fast is not None:
            fast.end_epoch()
        self._epoch_losses = loss_buf[:n_batches]  # a non-finite mean names its first bad batch (limits.py)

    def _mean_train_loss(self, epoch: int) -> float:
        """Reference §4.5: float32 batch losses, one host copy per epoch, float64 NumPy mean (NaN without batches)."""
        losses = self._epoch_losses
        mean = float(np.mean(losses.cpu().tolist())) if losses.shape[0] else float("nan")
        timing.mark("train_end", epoch=epoch)
        return mean

    # ------------------------------------------------------------------ end of run
    def _finish(self, t0: float) -> RunResult:
        timing.mark("train_done")
        self.model.load_state_dict(self._best_state)  # the selected checkpoint, as best.pt holds it
        if self._best_evals is not None:  # its epoch's evaluation: the same weights through the same kernels
            val, test = self._best_evals
            if "pred" not in test:  # test_every_epoch off: the selected checkpoint's test pass, now
                test = self.evaluator.evaluate("test", self.net)
        else:  # selected before a resume: evaluated again
            val = self.evaluator.evaluate("val", self.net)
            test = self.evaluator.evaluate("test", self.net)
        timing.mark("final_eval_done")
        extra: dict[str, Any] = {"metric_profile": self.config.metric_profile}
        if self.config.step == "dpd":
            extra.update(self.evaluator.output_power_report(test, self.net), gain_rule=self.config.gain_rule)
            if self.cfr is not None:  # the metrics are against the reduced target (cfr.py): say so beside them
                extra.update(target_cfr_db=self.cfr.limit_db,
                             target_cfr_error_db=self.cfr.splits["test"]["error_db"])
            extra.update(equal_power_report(self.evaluator, test, self.net, self.config.metric_profile))
            if extra["power_warning"]:
                self._log(f"WARNING: cascade RMS output with DPD differs from without DPD by "
                          f"{extra['rms_out_diff_db']:+.2f} dB (> 0.5 dB): the DPD changes the gain")
        self.output.emit(ResultsReady(attrs=results_attrs(self, extra),
                                       splits={name: self.evaluator.split_results(name, ev)
                                               for name, ev in (("val", val), ("test", test))}))
        timing.mark("results_written")
        plots = self._plots("test", test, "test", self.net)
        wall = self._wall_s(t0)  # a resumed run: the time before the resume too
        timing.mark("run_end")
        self._log(f"finished in {wall:.1f} s; selected epoch {self.best_epoch}; test " +
                  ", ".join(f"{k} {float(v):.4f}" for k, v in test["metrics"].items()))
        res = RunResult("succeeded", self.run_id, self.run_dir, self.best_epoch, self.history,
                        float_map(val["metrics"]), float_map(test["metrics"]), wall_s=wall, extra=extra)
        self.output.emit(RunFinished(run_id=self.run_id, run_dir=str(self.run_dir), best_epoch=self.best_epoch,
                                     val_metrics=res.val_metrics, test_metrics=res.test_metrics, wall_s=wall,
                                     plots=plots, extra=self._status_extra(extra),
                                     best_value=finite_or_none(self.best_value)))
        return res

    def _status_extra(self, extra: dict[str, Any]) -> dict[str, Any]:
        """RunFinished's ``extra`` (status.json's fields besides the outcome): ``extra`` as it is."""
        return extra

    def _on_cancel(self, t0: float) -> RunResult:
        try:
            self._drain()
        except Exception as exc:  # noqa: BLE001
            self._log(f"epoch end failed during cancel: {exc}")
        done = len(self.history)
        reason = self._stop.reason
        self._log(f"cancelled{': ' + reason if reason else ''} after {done} completed epoch(s)")
        self.output.emit(RunCancelled(run_id=self.run_id, run_dir=str(self.run_dir), epochs_completed=done,
                                      best_epoch=self.best_epoch, reason=reason))
        return RunResult("cancelled", self.run_id, self.run_dir, self.best_epoch, self.history,
                         wall_s=self._wall_s(t0), message=reason or "cancelled")

    def _on_failure(self, exc: BaseException, t0: float) -> RunResult:
        """Log and emit the failure (the record's writer first: a failure it cannot write still reaches the
        observers) and return the failed :class:`RunResult`."""
        if limits.is_oom(exc) and not isinstance(exc, TrainingError):  # outside a training batch (evaluation)
            exc = limits.oom_error(self.device, len(self.history), "outside a training batch", exc)
        msg = describe_error(exc)
        detail = traceback.format_exc()
        try:
            self._drain()
        except Exception:  # noqa: BLE001 - the first error is the one reported
            pass
        if self.run_dir is not None:
            try:
                self._log(f"FAILED: {msg}\n{detail}")
            except OSError:  # the log cannot be written either: the status below still says "failed"
                pass
        event = RunFailed(run_id=self.run_id, run_dir=str(self.run_dir) if self.run_dir else None, message=msg,
                          detail=detail, epochs_completed=len(self.history), best_epoch=self.best_epoch)
        try:
            self.output.writer(event)
        except OSError:  # the folder cannot take the failure either; the event still reaches the observers
            pass
        self.output.notify(event)
        return RunResult("failed", self.run_id, self.run_dir, self.best_epoch, self.history, message=msg,
                         wall_s=self._wall_s(t0))

    def _wall_s(self, t0: float) -> float:
        """Seconds since ``t0`` (``time.perf_counter()`` at :meth:`run`'s start), plus a resumed run's time before
        the resume."""
        return time.perf_counter() - t0 + self.elapsed_before_s

    # ------------------------------------------------------------------ log, plots, preview
    def _log(self, text: str, level: int = logging.INFO) -> None:
        """A line to the logger and, once the run folder exists, to the run's log."""
        self.output.log(text, level, to_run_log=self.run_dir is not None)

    def _plots(self, source: str, ev: dict[str, Any], split: str, net):
        if not self.plot_data:
            return None
        try:
            return self.evaluator.plots(source, ev, split, net)
        except Exception as exc:  # noqa: BLE001 - plots must never break training
            self._log(f"plot data skipped: {type(exc).__name__}: {exc}")
            return None

    def _emit_preview(self, epoch: int, batch: int, n_batches: int) -> None:
        try:
            plots, nmse = self.preview.plots(self.net, self.evaluator.sets["val"], self.device, self.dataset.spec,
                                             self.evaluator.signal_names())
            self.output.emit(PreviewReady(epoch=epoch, batch=batch, batches=n_batches, plots=plots,
                                          metrics={"NMSE": nmse}))
        except Exception as exc:  # noqa: BLE001
            self._log(f"preview disabled: {type(exc).__name__}: {exc}")
            self.preview.failed = True

    def _drain(self, leave_group: bool = True) -> None:
        """Wait for the pending epoch end (re-raising its error, if any). A group's member first leaves the group
        unless ``leave_group`` is False (an epoch boundary): its pending epoch end may wait for a meeting that only
        the others can hold now (group.py ``after_next_meeting``)."""
        if leave_group and self.group_member is not None:
            self.group_member.loop_done()
        self._overlap.drain()

    def _teardown(self) -> None:
        self._stop.stop_clock()
        self._overlap.shutdown()
        self.output.writer.close()


# ---------------------------------------------------------------------- module helpers
def _not_evaluated(val: dict) -> dict:
    """The test evaluation of an epoch when test_every_epoch is off: NaN metrics and loss, no predictions."""
    nan = float("nan")
    return {"loss": nan, "metrics": {k: nan for k in val["metrics"]},
            "extra": {k: nan for k in val.get("extra", {})}}



def _dataset_summary(ds) -> dict[str, Any]:
    try:
        return dict(ds.summary())
    except Exception:  # noqa: BLE001 - summary is cosmetic
        return {"name": ds.name}
