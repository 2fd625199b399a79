"""training/group.py GroupStep.take_queued: the queued batches a member's trainer skips in one go, with the same
bookkeeping as one call per batch (the batch counter, the optimizer's pending graph steps)."""
from __future__ import annotations

from types import SimpleNamespace

from dpd_desktop.training.group import GroupStep


class _Inner(SimpleNamespace):
    def update(self, **kw):
        self.__dict__.update(kw)


def _step(meet_at=512, nxt=0, opt_in_graph=True, failed=None):
    inner = _Inner(_next=nxt, graph_opt=object() if opt_in_graph else None, failed_reason=failed,
                   optimizer=SimpleNamespace(graph_steps_pending=0))
    g = GroupStep.__new__(GroupStep)
    g.member, g.inner, g.queued_to, g.meet_at, g.ran_to = None, inner, 2 * meet_at, meet_at, 0
    return g, inner


def test_takes_up_to_the_next_meeting_or_the_limit():
    g, inner = _step(meet_at=512, nxt=1)
    assert g.take_queued(1, 4605) == 511 and inner._next == 512 and inner.optimizer.graph_steps_pending == 511
    assert g.take_queued(512, 4605) == 0  # the meeting's batch: a call
    g, inner = _step(meet_at=512, nxt=10)
    assert g.take_queued(10, 100) == 90 and inner._next == 100  # a preview's batch (or the full batches) first
    assert g.take_queued(100, 512) == 412 and inner.optimizer.graph_steps_pending == 502


def test_takes_nothing_where_a_call_is_needed():
    assert _step(nxt=5)[0].take_queued(3, 4605) == 0  # out of step with the counter
    assert _step(opt_in_graph=False)[0].take_queued(0, 4605) == 0  # AdamW after each replay, in the trainer
    assert _step(failed="capture failed")[0].take_queued(0, 4605) == 0  # eager from here on
    g = GroupStep.__new__(GroupStep)
    g.inner, g.meet_at = None, 0  # the CPU: every batch is a meeting
    assert g.take_queued(0, 10) == 0


def test_a_failed_recapture_after_queued_batches_falls_back_without_training_them_twice(monkeypatch):
    """A member left mid-epoch, the others' graph cannot be captured again: the batches queued a chunk ahead ran in
    the old graph (synchronized), so they count as replayed (ran_to); eager training starts after them."""
    import torch

    from dpd_desktop.training import group as G

    grp = G.TrainerGroup([SimpleNamespace(group_member=None) for _ in range(2)])
    steps = []
    for m in grp.members:
        g, inner = _step(meet_at=512, nxt=512)
        inner.update(graph=object(), optimizer_note="in the graph", trainable=[], batch_size=64, device="cpu",
                     loader=SimpleNamespace(n_frames=64 * 4605), _pointers=lambda: (), _ptrs=())
        g.member, g.queued_to = m, 1024
        m.step = g
        steps.append((g, inner))

    def no_capture(inners):
        raise torch.OutOfMemoryError("CUDA out of memory (the test)")

    monkeypatch.setattr(G, "_capture", no_capture)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    grp._graph, grp._graph_members = object(), ("a member that left",)  # stale
    grp._waiting = {m: 512 for m in grp.members}
    grp._lead(list(grp.members))
    assert grp._abort is None and grp._failed.startswith("group graph failed (OutOfMemoryError")
    for g, inner in steps:
        assert inner.failed_reason == grp._failed and inner.graph is None and inner.graph_opt is not None
        assert (g.ran_to, g.queued_to, g.meet_at) == (1024, 513, 513)
        assert g.take_queued(512, 4605) == 512 and inner._next == 1024  # batches 512-1023: trained in the graph
        assert inner.optimizer.graph_steps_pending == 512
        assert g.take_queued(1024, 4605) == 0  # eager from here


def test_a_failure_while_queueing_fails_the_members_runs(monkeypatch):
    import torch

    from dpd_desktop.training import group as G

    grp = G.TrainerGroup([SimpleNamespace(group_member=None)])
    g, inner = _step(meet_at=512, nxt=512)
    inner.update(graph=object(), trainable=[], batch_size=64, device="cpu", loader=SimpleNamespace(n_frames=64 * 4605),
                 _pointers=lambda: (), _ptrs=())
    g.member, g.queued_to = grp.members[0], 1024
    grp.members[0].step = g

    class Broken:
        def replay_steps(self, n):
            raise RuntimeError("CUDA error: launch failure (the test)")

    grp._graph, grp._graph_members = Broken(), (id(inner),)
    monkeypatch.setattr(torch.cuda, "device", lambda d: __import__("contextlib").nullcontext())
    grp._waiting = {grp.members[0]: 512}
    grp._lead([grp.members[0]])
    assert grp._abort is not None and "while queueing batches 1024-1535" in grp._abort


def test_a_plain_loader_member_trains_eagerly():
    """The plain loader's batches reach a captured step by copies that a queued replay cannot make: no graph."""
    from dpd_desktop.training import group as G

    logs = []
    trainer = SimpleNamespace(group_member=None, fast_step=SimpleNamespace(index_mode=False), fast_path_status="on",
                              fast_path_optimizer="in the graph", _log=logs.append)
    grp = G.TrainerGroup([trainer])
    step = grp.members[0].attach(trainer)
    assert step.inner is None and not step.in_graph() and step.status.startswith("off: a group member with the plain")
    assert step.optimizer_note == "eager (no CUDA graph)"
