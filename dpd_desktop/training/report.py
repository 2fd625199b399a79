"""Plain words for a run: the failure message and the log line of an epoch; float helpers for the status."""
from __future__ import annotations

import math
from typing import Any

from ..config import ConfigError
from .errors import TrainingError


def describe_error(exc: BaseException) -> str:
    """Plain-words message for a run failure (out-of-memory gets advice)."""
    text = str(exc) or type(exc).__name__
    low = text.lower()
    if isinstance(exc, (ConfigError, TrainingError)):  # our own words (limits.py names the remedy of an OOM)
        return text
    if "out of memory" in low:
        return ("the GPU ran out of memory: reduce the batch size, the frame length or the hidden size, or train "
                f"on the CPU ({text.splitlines()[0]})")
    if "can't allocate memory" in low or isinstance(exc, MemoryError):
        return ("the computer ran out of memory: reduce the batch size, the frame length or the hidden size "
                f"({text.splitlines()[0]})")
    if exc.__class__.__name__ in ("DatasetError", "CheckpointError", "RecordError", "ArtifactWriteError"):
        return text
    return f"{type(exc).__name__}: {text}"


def finite_or_none(v) -> float | None:
    """``float(v)`` when finite, else None (JSON has no NaN)."""
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def float_map(m: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in m.items()}


def format_row(row: dict[str, Any]) -> str:
    """The log line of one history row: LR, losses, val NMSE [dB], ACLR [dBc], EVM [dB], test NMSE [dB]."""
    def g(k):
        v = row.get(k)
        return f"{float(v):.4f}" if v is not None else "-"

    return (f"epoch {row['EPOCH']}: lr {row['LR']:.2e} train {row['TRAIN_LOSS']:.3e} val {row['VAL_LOSS']:.3e} "
            f"val NMSE {g('VAL_NMSE')} dB, ACLR {g('VAL_ACLR_AVG')} dBc, EVM {g('VAL_EVM')} dB; "
            f"test NMSE {g('TEST_NMSE')} dB")
