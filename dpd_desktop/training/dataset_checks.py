"""Loading a run's dataset by name and the checks a dataset must pass before a run folder is created."""
from __future__ import annotations

import math

from ..data import DatasetError, load_dataset, make_demo_dataset


def load_dataset_for(spec: str):
    """``"demo"`` → the embedded synthetic dataset; anything else → :func:`dpd_desktop.data.load_dataset`."""
    if spec == "demo":
        return make_demo_dataset()
    return load_dataset(spec)


def require_finite_gain(ds) -> None:
    """A DPD's target is g·x with g = max|y_train| / max|x_train| (reference §1.4): the training split's input and
    output must not be all zeros.

    Raises:
        DatasetError: naming the dataset and the split whose peak is 0.
    """
    g = ds.gain
    if not (math.isfinite(g) and g > 0):
        which = "input x (max|x_train| = 0)" if not math.isfinite(g) else "output y (max|y_train| = 0)"
        raise DatasetError(f"the training split's {which} is all zeros, so the DPD target gain "
                           "g = max|y_train| / max|x_train| is undefined", path=ds.source,
                           field="train_input" if not math.isfinite(g) else "train_output",
                           expected="measured, non-zero training data")


def require_whole_segment(ds) -> None:
    """Val and test must hold at least one ``nperseg``-sample segment: they are evaluated (and their PSD, ACLR and
    EVM computed) in whole segments, a shorter split would be mostly zero padding (reference §2.2).

    Raises:
        DatasetError: naming the dataset, the split, its length and the spec field ``nperseg``.
    """
    nps = int(ds.spec.nperseg)
    for name in ("val", "test"):
        n = int(getattr(ds, name).x.shape[0])
        if n < nps:
            raise DatasetError(f"the {name} split has {n} samples, fewer than one evaluation segment "
                               f"(spec field nperseg = {nps})", path=ds.source, field="nperseg",
                               expected="val and test of at least nperseg samples, or a smaller nperseg")
