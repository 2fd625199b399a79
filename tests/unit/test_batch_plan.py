"""data/framing.py BatchPlan: the same batches as ``list(perm.split(B))``, in order, made when asked for."""
from __future__ import annotations

import pytest
import torch

from dpd_desktop.data.framing import BatchPlan


@pytest.mark.parametrize("n,bs", [(10, 3), (12, 4), (1, 5)])
def test_the_batches_of_split(n, bs):
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(n))
    want = list(perm.split(bs))
    plan = BatchPlan(perm, bs)
    assert len(plan) == len(want)
    assert [t.tolist() for t in plan] == [t.tolist() for t in want]
    assert [plan[b].tolist() for b in range(len(plan))] == [t.tolist() for t in want]
    if want:
        assert plan[-1].tolist() == want[-1].tolist() and plan[-len(want)].tolist() == want[0].tolist()
        assert plan[0].data_ptr() == perm.data_ptr()  # a view, not a copy
    for bad in (len(want), -len(want) - 1):
        with pytest.raises(IndexError):
            plan[bad]
