"""training/group.py GroupStep.take_queued: the queued batches a member's trainer skips in one go, with the same
bookkeeping as one call per batch (the batch counter, the optimizer's pending graph steps)."""
from __future__ import annotations

from types import SimpleNamespace

from dpd_desktop.training.group import GroupStep


def _step(meet_at=512, nxt=0, opt_in_graph=True, failed=None):
    inner = SimpleNamespace(_next=nxt, graph_opt=object() if opt_in_graph else None, failed_reason=failed,
                            optimizer=SimpleNamespace(graph_steps_pending=0))
    g = GroupStep.__new__(GroupStep)
    g.member, g.inner, g.queued_to, g.meet_at = None, inner, 2 * meet_at, meet_at
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
