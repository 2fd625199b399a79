"""The batch loader equals DataLoader + RandomSampler: values, order, RNG consumption, short final batch."""
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from dpd_desktop.data.framing import (FrameLoader, PlainFrameLoader, draw_dataloader_iterator_seed, frames, n_frames,
                                      segment, unsegment)


@pytest.mark.parametrize("n,L,S", [(1000, 200, 1), (997, 50, 7), (64, 64, 1), (23040, 200, 1)])
def test_n_frames_formula(n, L, S):
    assert n_frames(n, L, S) == (n - L) // S + 1
    assert frames(np.zeros((n, 2), np.float32), L, S).shape == ((n - L) // S + 1, L, 2)


def test_n_frames_worked_numbers():
    # reference §2.1 worked numbers
    assert n_frames(294_912, 200, 1) == 294_713
    assert -(-294_713 // 64) == 4_605 and 294_713 % 64 == 57
    assert n_frames(23_040, 200, 1) == 22_841
    assert n_frames(23_040, 50, 16) == 1_437


def test_n_frames_errors():
    with pytest.raises(ValueError, match="fewer than one frame"):
        n_frames(10, 20, 1)
    with pytest.raises(ValueError):
        n_frames(10, 0, 1)


def test_segment_zero_pads_tail_and_roundtrips():
    x = np.arange(14, dtype=np.float32).reshape(7, 2)
    s = segment(x, 3)
    assert s.shape == (3, 3, 2)
    assert np.array_equal(s[2, 0], x[6]) and np.all(s[2, 1:] == 0)
    assert np.array_equal(unsegment(s, 7), x)


@pytest.mark.parametrize("n,L,S,B,epochs", [(1500, 40, 3, 16, 3), (700, 50, 1, 64, 2), (333, 33, 5, 7, 2)])
def test_batches_equal_dataloader(n, L, S, B, epochs):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, 2)).astype(np.float32)
    y = rng.standard_normal((n, 2)).astype(np.float32)
    fx, fy = torch.from_numpy(frames(x, L, S)), torch.from_numpy(frames(y, L, S))
    assert fx.shape[0] % B != 0 or n == 700  # most cases have a short final batch
    ref_loader = DataLoader(TensorDataset(fx, fy), batch_size=B, shuffle=True)

    torch.manual_seed(123)
    ref = []
    for _ in range(epochs):
        ref.append([(a.clone(), b.clone()) for a, b in ref_loader])
        draw_dataloader_iterator_seed()  # a val iterator in between, as in training
    ref_state = torch.get_rng_state()

    torch.manual_seed(123)
    loader = FrameLoader(torch.from_numpy(x), torch.from_numpy(y), L, S, B)
    ours = []
    for _ in range(epochs):
        ours.append([loader.gather(idx) for idx in loader.epoch()])
        draw_dataloader_iterator_seed()
    assert torch.equal(torch.get_rng_state(), ref_state), "RNG consumption differs from DataLoader"
    for e in range(epochs):
        assert len(ours[e]) == len(ref[e]) == len(loader)
        for (a, b), (c, d) in zip(ours[e], ref[e]):
            assert a.shape == c.shape and torch.equal(a, c) and torch.equal(b, d)
        assert ours[e][-1][0].shape[0] == (fx.shape[0] % B or B)  # short final batch kept
    # epochs differ (a new permutation each epoch)
    assert not torch.equal(ours[0][0][0], ours[1][0][0])


def test_plain_loader_matches_batched_loader():
    rng = np.random.default_rng(4)
    x = torch.from_numpy(rng.standard_normal((900, 2)).astype(np.float32))
    y = torch.from_numpy(rng.standard_normal((900, 2)).astype(np.float32))
    torch.manual_seed(9)
    fast = FrameLoader(x, y, 30, 4, 16)
    a = [fast.gather(i) for i in fast.epoch()]
    state_a = torch.get_rng_state()
    torch.manual_seed(9)
    plain = PlainFrameLoader(x, y, 30, 4, 16, "cpu")
    b = [plain.gather(batch) for batch in plain.epoch()]
    assert torch.equal(torch.get_rng_state(), state_a)
    assert len(a) == len(b) == len(fast) == len(plain)
    assert all(torch.equal(p[0], q[0]) and torch.equal(p[1], q[1]) for p, q in zip(a, b))
