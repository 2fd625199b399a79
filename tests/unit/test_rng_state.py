"""training/rng_state.py: every RNG state a run draws from round-trips through torch.save and
torch.load(weights_only=True) and, restored, gives the very draws that followed the capture."""
import io
import random

import numpy as np
import pytest
import torch

from dpd_desktop.training import rng_state


def _draws():
    return random.random(), random.gauss(0, 1), np.random.rand(3).tolist(), np.random.randn(), torch.rand(4).tolist()


def test_capture_restore_round_trip_through_weights_only_load():
    random.seed(3), np.random.seed(4), torch.manual_seed(5)
    random.gauss(0, 1), np.random.randn()  # cached Gaussians (Python gauss_next, NumPy has_gauss) are part of the state
    buf = io.BytesIO()
    torch.save(rng_state.capture(torch.device("cpu")), buf)
    expected = _draws()
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    buf.seek(0)
    doc = torch.load(buf, weights_only=True)
    assert doc["cuda"] == [] and doc["cuda_devices"] == []
    rng_state.restore(doc)
    assert _draws() == expected


@pytest.mark.parametrize("field,value,words", [
    ("format", "other", "rng.format"),
    ("python", {"state": torch.zeros(3, dtype=torch.int64)}, "rng.python"),
    ("torch_cpu", torch.zeros(3), "rng.torch_cpu"),
    ("cuda_devices", [0], "rng.cuda_devices"),
])
def test_damaged_states_name_the_field(field, value, words):
    doc = rng_state.capture()
    doc[field] = value
    with pytest.raises(ValueError, match=words):
        rng_state.restore(doc)
