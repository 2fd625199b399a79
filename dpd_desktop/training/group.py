"""Trials that train together: runs of one shape in one process, their full batches replayed as one CUDA graph.

A :class:`TrainerGroup` runs several ordinary :class:`~dpd_desktop.training.trainer.Trainer` s (own run folder,
writer, RNG stream, checkpoints) whose configurations differ only in :data:`MAY_DIFFER`. On CUDA with the fast path
one graph per full batch trains every member: the members' fused GRU or GRU DPD step (training/fused_step.py) where
all can use it, else one branch per member (training/fast_path.py). A member's history and checkpoints are bitwise
those of the same configuration trained alone (tests/gpu/test_group_training_cuda.py), unless the group's fused step
cannot be built where a lone run's can (out of memory; the log warns). The members share their evaluation constants
(evaluation.EvalConstants), computed on a thread while the first chunks train.

Isolation: the members run on threads one at a time (a baton carrying the global RNG states), so each draws the
numbers it would alone (reference §4.1–§4.2); a member that ends leaves and the graph is captured again. Members meet
every :data:`CHUNK` full batches; the last to arrive queues replays up to two chunks ahead (a cancel takes effect
within two chunks; an overlapped epoch end waits for the next meeting). A graph failure at a meeting turns every
member eager (``GroupStep.ran_to``); one while a chunk's launches go in fails the members' runs. A run with a time
limit never joins a group (:func:`group_key`). On the CPU the members take turns batch by batch, eagerly.
"""
from __future__ import annotations

import logging
import random
import threading
import time
from typing import Sequence

import numpy as np
import torch

from .. import timing
from . import eager_warmup, fused_step
from .errors import TrainingError
from .evaluation import EvalConstants
from .fast_path import WARMUP_ITERS, CudaGraphStep
from .group_plan import DEFAULT_SIZE, MAY_DIFFER, default_group_size, group_key, plan_groups  # noqa: F401
from .overlap import frozen_copy
from .report import describe_error
from .trainer import RunResult

log = logging.getLogger("dpd_desktop.group")

#: full batches between meetings (few, long chunks: each meeting passes the baton to every member in turn)
CHUNK = 512
#: fused steps per CUDA graph launch: the GPU's launch queue is bounded, one step per launch would fill it
STEPS_PER_GRAPH = 16


class _Baton:
    """One member runs at a time; the global RNG states travel with the baton (see the module docstring)."""

    def __init__(self):
        self._lock = threading.Lock()

    def take(self, m: "_Member") -> None:
        self._lock.acquire()
        m.holds_baton = True
        if m.rng is not None:
            py, npy, cpu, cuda = m.rng
            random.setstate(py)
            np.random.set_state(npy)
            torch.set_rng_state(cpu)
            if cuda is not None:
                torch.cuda.set_rng_state_all(cuda)

    def give(self, m: "_Member") -> None:
        if not m.holds_baton:
            return
        try:
            cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
            m.rng = (random.getstate(), np.random.get_state(), torch.get_rng_state(), cuda)
        finally:  # never kept: the others would wait for it forever
            m.holds_baton = False
            self._lock.release()


class _Member:
    """A trainer's place in the group: :meth:`attach` at the end of its set-up (returns its :class:`GroupStep`),
    :meth:`loop_done` once it meets no more (before its last epoch's end, or on its way out)."""

    def __init__(self, group: "TrainerGroup", index: int, trainer):
        self.group, self.index, self.trainer = group, index, trainer
        self.rng = None
        self.holds_baton = False
        self.active = True  # still meets the others (False once its epoch loop ended, or its run ended)
        self.step: GroupStep | None = None
        self.result: RunResult | None = None

    def attach(self, trainer):
        n = len(self.group.members)
        if n > 1:  # the run's log says why its clock runs slower than alone
            trainer._log(f"group: trains together with {n - 1} other run{'s' if n > 2 else ''} in one process "
                         f"(member {self.index + 1} of {n}); its times are the group's wall time")
        inner, status, note = trainer.fast_step, trainer.fast_path_status, trainer.fast_path_optimizer
        if inner is not None and not inner.index_mode:
            # the plain loader's batches reach a graph through copies into its static buffers, which a queued
            # replay cannot make: such a member meets at every batch and trains eagerly, as on the CPU
            inner, status, note = None, "off: a group member with the plain loader trains eagerly", \
                "eager (no CUDA graph)"
        self.step = GroupStep(self, inner, status, note)
        return self.step

    def loop_done(self) -> None:
        """Leave the meetings; the rest of the run draws no random numbers and runs without the baton."""
        self.group._leave(self)

    def after_next_meeting(self, fn):
        """``fn`` made to wait until the group's next meeting (counted from now) or until no member is left: an
        overlapped epoch end then runs while the group trains instead of holding up the meeting."""
        inner = self.step.inner if self.step is not None else None
        if inner is None or inner.loader.n_frames < inner.batch_size:
            return fn  # no full batch, no meeting to wait for
        start = self.group.meetings

        def deferred(*args):
            self.group._wait_meeting_after(start, self)
            return fn(*args)
        return deferred


class GroupStep:
    """A member's :class:`~dpd_desktop.training.fast_path.CudaGraphStep` stand-in (the same interface). ``inner``
    None (CPU, no fast path): each full batch is a meeting, then trains eagerly; else batches up to ``queued_to``
    are queued on the device and the next meeting is at ``meet_at``."""

    def __init__(self, member: _Member, inner: CudaGraphStep | None, status: str, optimizer_note: str):
        self.member, self.inner = member, inner
        self._status, self._optimizer_note = status, optimizer_note
        self.queued_to = 0  # full batches of this epoch queued on the device for this member
        self.meet_at = 0  # the batch at which it meets the others next (<= queued_to: the GPU has work queued)
        self.ran_to = 0  # after a failure of the group graph: the full batches it trained before (taken as replayed)

    # --- the CudaGraphStep interface the trainer uses
    @property
    def status(self) -> str:
        return self.inner.status if self.inner is not None else self._status

    @property
    def optimizer_note(self) -> str:
        return self.inner.optimizer_note if self.inner is not None else self._optimizer_note

    @property
    def optimizer_in_graph(self) -> bool:
        return self.inner is not None and self.inner.optimizer_in_graph

    @property
    def grads_in_place(self) -> bool:
        return self.inner is not None

    @property
    def epoch_losses(self):
        return self.inner.epoch_losses if self.inner is not None else None

    def begin_epoch(self, plan) -> None:
        self.queued_to = self.meet_at = self.ran_to = 0
        if self.inner is not None:
            self.inner.begin_epoch(plan)

    def end_epoch(self) -> None:
        if self.inner is not None:
            self.inner.end_epoch()

    def in_graph(self) -> bool:
        return self.inner is not None and self.inner.failed_reason is None

    def take_queued(self, b: int, limit: int) -> int:
        """How many of the batches b, b + 1, … (before ``limit``) are already trained by queued replays (after a
        group graph failure: trained before it), taken at once; 0 when batch b needs a call."""
        inner = self.inner
        if inner is None or b != inner._next or inner.graph_opt is None:
            return 0
        k = min(self.meet_at if inner.failed_reason is None else self.ran_to, limit) - b
        return self._took(k) if k > 0 else 0

    def _took(self, k: int) -> int:
        """Count ``k`` batches as trained by replays: the batch counter and, with AdamW in the graph, its steps."""
        inner = self.inner
        inner._next += k
        if inner.graph_opt is not None:
            inner.optimizer.graph_steps_pending += k
        return k

    def __call__(self, b: int, batch) -> bool:
        inner = self.inner
        if inner is not None and b < self.meet_at and b == inner._next and inner.failed_reason is None:
            return bool(self._took(1))  # queued at a meeting (checked there): the common case
        if inner is not None and inner.failed_reason is None:
            if not inner.net.training or not torch.is_grad_enabled() or inner.loader.batch_len(batch) != inner.batch_size:
                raise RuntimeError("a group member's full batch was asked for outside training")
            if b != inner._next:  # earlier batches of this epoch ran eagerly: batch b uses slot b (as CudaGraphStep)
                inner.counter.fill_(b)
                inner._next = b
                self.queued_to = min(self.queued_to, b)
                self.meet_at = min(self.meet_at, b)
        if b >= self.meet_at:
            self.member.group._meet(self.member, b)
        if inner is not None and inner.failed_reason is not None and b < self.ran_to and b == inner._next:
            return bool(self._took(1))  # the group graph trained it before it failed (queued a chunk ahead)
        if inner is None or inner.failed_reason is not None or b >= self.queued_to:
            return False  # train this batch eagerly (no graph, or the graph failed: as CudaGraphStep falls back)
        return bool(self._took(1))


class TrainerGroup:
    """Runs ``trainers`` (``len >= 1``; one device, one dataset object, one :func:`group_key`) as one group.

    :meth:`run` blocks until every member ended and returns their :class:`RunResult` s in order, never raising for
    a member's failure. :meth:`request_cancel` (thread-safe) stops one member within two :data:`CHUNK` s.
    ``meetings``: how many times the members met (on the CPU, one per full batch)."""

    def __init__(self, trainers: Sequence, chunk: int = CHUNK):
        if not trainers:
            raise ValueError("a group needs at least one trainer")
        self.trainers = list(trainers)
        self.chunk = chunk
        self.members = [_Member(self, i, t) for i, t in enumerate(self.trainers)]
        constants = EvalConstants()  # the members agree on everything it depends on (group_key)
        for m in self.members:
            m.trainer.group_member = m
            m.trainer.eval_constants = constants
        self._baton = _Baton()
        self._cond = threading.Condition()
        self._waiting: dict[_Member, int] = {}
        self._generation = 0
        self._graph = None
        self._graph_members: tuple = ()
        self._failed: str | None = None  # the group graph's failure (every member then trains eagerly)
        self._abort: str | None = None  # a failure that eager training cannot follow: every member's run fails
        self.meetings = 0
        self.captures = 0
        self._chunk_events: list = []  # timing only: (first batch, steps, (start, end) CUDA events) per chunk
        self._warm: threading.Thread | None = None  # the evaluation constants computed ahead (_start_warm)

    def request_cancel(self, index: int, reason: str = "") -> None:
        self.trainers[index].request_cancel(reason)

    def cancel_all(self, reason: str = "") -> None:
        for t in self.trainers:
            t.request_cancel(reason)

    def run(self) -> list[RunResult]:
        threads = [threading.Thread(target=self._member_main, args=(m,), name=f"dpd-group-{m.index}", daemon=True)
                   for m in self.members]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if self._warm is not None:
            self._warm.join()
        if timing.recording() and self._chunk_events:  # the chunks' GPU spans, from their CUDA events
            torch.cuda.synchronize()
            first = self._chunk_events[0][2][0]
            for b, n, (e0, e1) in self._chunk_events:
                timing.mark("chunk_gpu", batch=b, steps=n, start_ms=round(first.elapsed_time(e0), 3),
                            span_ms=round(e0.elapsed_time(e1), 3))
        return [m.result for m in self.members]

    # ------------------------------------------------------------------ a member's thread
    def _member_main(self, m: _Member) -> None:
        self._baton.take(m)
        try:
            m.result = m.trainer.run()
        except BaseException as exc:  # noqa: BLE001 - run() reports its own failures; this is a last resort
            m.result = RunResult("failed", m.trainer.run_id, m.trainer.run_dir, message=describe_error(exc))
        finally:
            self._leave(m)

    def _wait_meeting_after(self, n: int, member: "_Member", timeout_s: float = 60.0) -> None:
        """Block until more than ``n`` meetings happened, ``member`` left, or no member is active (at most
        ``timeout_s``)."""
        with self._cond:
            self._cond.wait_for(lambda: self.meetings > n or not member.active
                                or not any(x.active for x in self.members), timeout_s)

    def _leave(self, m: _Member) -> None:
        with self._cond:
            if m.active:
                m.active = False
                self._waiting.pop(m, None)
                self._cond.notify_all()
        self._baton.give(m)

    # ------------------------------------------------------------------ meetings
    def _meet(self, m: _Member, b: int) -> None:
        """Member ``m`` needs full batch ``b``: wait (without the baton) until every active member needs one; the
        last to arrive queues the next chunk of replays (or, without a graph, just lets everyone go on)."""
        timing.mark("meet_arrive", batch=b)
        self._baton.give(m)
        try:
            with self._cond:
                self._waiting[m] = b
                gen = self._generation
                while self._generation == gen:
                    active = [x for x in self.members if x.active]
                    if all(x in self._waiting for x in active):
                        try:
                            self._lead(active)
                        finally:
                            self._waiting.clear()
                            self._generation += 1
                            self.meetings += 1
                            self._cond.notify_all()
                        break
                    self._cond.wait()
        finally:
            self._baton.take(m)
        if self._abort is not None:
            raise TrainingError(self._abort)

    def _lead(self, active: list[_Member]) -> None:
        steps = [x.step for x in active]
        if self._failed is not None or not all(s is not None and s.in_graph() for s in steps):
            for s in steps:
                if s is not None:
                    s.queued_to = s.meet_at = self._waiting[s.member] + (0 if s.in_graph() else 1)
            return
        b = {self._waiting[s.member] for s in steps}
        inners = [s.inner for s in steps]
        replaying = False
        try:
            if len(b) != 1:
                raise RuntimeError(f"the members need different batches {sorted(b)}")
            b = b.pop()
            n_full = {s.loader.n_frames // s.batch_size for s in inners}
            if len(n_full) != 1:
                raise RuntimeError(f"the members have different numbers of full batches {sorted(n_full)}")
            n_full = n_full.pop()
            queued = {s.queued_to for s in steps}
            if len(queued) != 1:
                raise RuntimeError(f"the members' queued batches differ {sorted({s.queued_to for s in steps})}")
            # one chunk ahead: up to 2 chunks queued, the next meeting after one (the GPU keeps a chunk to run
            # while the members go through theirs)
            start, end = max(b, steps[0].queued_to), min(b + 2 * self.chunk, n_full)
            meet_at = min(b + self.chunk, n_full) if end < n_full else n_full
            stale = self._graph is None or self._graph_members != tuple(id(s) for s in inners) \
                or any(s._pointers() != s._ptrs for s in inners)
            if stale:
                if self._graph is not None:  # its queued replays finish before it goes (a member left)
                    torch.cuda.synchronize(inners[0].device)
                if self._warm is not None:  # no other thread's work during a capture
                    self._warm.join()
                self._graph = None
                self._graph = _capture(inners)
                self._graph_members = tuple(id(s) for s in inners)
                self.captures += 1
                if any(s.graph_opt is None for s in inners):  # an eager AdamW step would come after a chunk
                    raise RuntimeError("a member's AdamW update is not in the graph")
            with torch.cuda.device(inners[0].device):
                if timing.recording():
                    t_host = time.perf_counter()
                    ev = [torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)]
                    ev[0].record()
                replaying = True
                self._graph.replay_steps(end - start)
                if timing.recording():
                    ev[1].record()
                    self._chunk_events.append((start, end - start, ev))
                    timing.mark("group_meeting", batch=b, members=len(inners),
                                queue_s=round(time.perf_counter() - t_host, 5))
        except Exception as exc:  # noqa: BLE001 - any failure here is the group's, not the leader's: eager for all
            self._graph = None
            self._failed = f"group graph failed ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})"
            if replaying:  # some of this chunk's launches may have gone in: which batches ran is not known
                self._abort = (f"{self._failed} while queueing batches {start}-{end - 1} of this epoch; the run "
                               "stops (its finished epochs are on disk)")
                log.error("group of %d: %s", len(inners), self._abort)
                return
            log.warning("group of %d: training eagerly: %s", len(inners), self._failed)
            for s in inners:
                # graph_opt stays: the batches the graph trained before (ran_to) were AdamW steps in it
                s.failed_reason, s.graph = self._failed, None
                s.optimizer_note = "eager (no CUDA graph)"
                for p in s.trainable:
                    if p.grad is not None:
                        p.grad.zero_()
            try:
                torch.cuda.synchronize()
            except Exception:  # noqa: BLE001
                pass
            for s in steps:  # the batches queued at earlier meetings ran (synchronized above): taken as replayed
                s.ran_to = s.queued_to
                s.queued_to = s.meet_at = self._waiting[s.member] + 1
            return
        for s in steps:
            s.queued_to, s.meet_at = end, meet_at
        if self._warm is None:
            self._warm = _start_warm(active[0].trainer)


def _start_warm(trainer) -> threading.Thread:
    """The group's evaluation constants (evaluation.EvalConstants: the targets' ACLR, a DPD's baselines and their
    ACLR) computed on a thread with its own high-priority CUDA stream while the first chunks train, on a copy of the
    PA: the first epoch end then finds them, where it would otherwise compute them while the group's next epoch
    boundary waits for it."""
    ev, device = trainer.evaluator, trainer.device
    pa = frozen_copy(trainer.net.pa) if trainer.config.step == "dpd" else None

    def work() -> None:
        try:
            with torch.cuda.device(device), torch.cuda.stream(torch.cuda.Stream(device, priority=-1)):
                ev.warm(pa)
                torch.cuda.current_stream().synchronize()
        except Exception as exc:  # noqa: BLE001 - the first epoch end computes what is missing
            log.warning("group: evaluation constants not computed ahead (%s: %s)", type(exc).__name__, exc)

    t = threading.Thread(target=work, name="dpd-group-warm", daemon=True)
    t.start()
    return t


def _capture(inners: list[CudaGraphStep]):
    """One CUDA graph of every member's training step: the fused GRU step when every member can use it, else one
    branch (stream) per member holding its step as :meth:`CudaGraphStep._capture` captures it alone, warmed up on
    that stream (its AccumulateGrad nodes then match the capture)."""
    device = inners[0].device
    with torch.cuda.device(device), torch.random.fork_rng(devices=[device]):
        for s in inners:
            s._sync_steps()
            s.prepare_capture()
        fused = None
        if all(s.fused_reason is None for s in inners) and len({fused_step.shape_of(s) for s in inners}) == 1:
            fused, reason = fused_step.build(inners)
            if reason is not None:  # the branches below: each member's autograd step, not its lone fused numbers
                log.warning("group of %d: %s; the members train through the autograd step (their numbers are not "
                            "bitwise those of lone fused runs)", len(inners), reason)
        eager_warmup.wait(device)  # no other thread's work during the capture
        if fused is not None:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            graphs = {}
            for k in sorted({1, STEPS_PER_GRAPH}):
                graphs[k] = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graphs[k], stream=side, capture_error_mode="thread_local"):
                    for _ in range(k):
                        fused.launch()
            torch.cuda.synchronize(device)
            for s in inners:
                s._ptrs = s._pointers()
                s.captures += 1
            log.info("group CUDA graph captured: %d members, one fused GRU step (%d per launch)", len(inners),
                     STEPS_PER_GRAPH)
            return _GroupGraph(graphs, fused)
        cur = torch.cuda.current_stream()
        side = torch.cuda.Stream()
        branches = [torch.cuda.Stream() for _ in inners]
        for s, st in zip(inners, branches):
            st.wait_stream(cur)
            with torch.cuda.stream(st):
                for _ in range(WARMUP_ITERS):
                    s._forward_backward()
            cur.wait_stream(st)
        torch.cuda.synchronize(device)
        side.wait_stream(cur)
        graph = torch.cuda.CUDAGraph()
        # thread_local: other threads of this process (members' epoch ends, finished members) may use the device
        with torch.cuda.graph(graph, stream=side, capture_error_mode="thread_local"):
            for st in branches:  # fork every branch first: a join before the next fork would chain the branches
                st.wait_stream(side)
            for s, st in zip(inners, branches):
                with torch.cuda.stream(st):
                    s._body()
            for st in branches:
                side.wait_stream(st)
        torch.cuda.synchronize(device)
    for s in inners:
        s._ptrs = s._pointers()
        s.captures += 1
    log.info("group CUDA graph captured: %d members", len(inners))
    return _GroupGraph({1: graph})


class _GroupGraph:
    """``graphs``: k → a CUDA graph of k training steps of every member; ``fused`` owns the graphs' buffers."""

    def __init__(self, graphs: dict, fused=None):
        self.graphs, self.fused = graphs, fused
        self._sizes = sorted(graphs, reverse=True)

    def replay_steps(self, n: int) -> None:
        """Enqueue ``n`` training steps on the current stream, the longest graphs first."""
        for k in self._sizes:
            g = self.graphs[k]
            for _ in range(n // k):
                g.replay()
            n %= k
