"""Reading history rows (``EpochEnded.row`` / ``history.csv`` lines) tolerantly: keys are matched case-insensitively
and values may be numbers or the CSV's text."""
from __future__ import annotations

import math
from typing import Any, Mapping

#: Column → accepted spellings (normalized: upper case, spaces → underscores, trailing colon dropped).
ALIASES: dict[str, tuple[str, ...]] = {
    "epoch": ("EPOCH",),
    "lr": ("LR", "LEARNING_RATE"),
    "train_loss": ("TRAIN_LOSS", "LOSS_TRAIN"),
    "val_loss": ("VAL_LOSS", "LOSS_VAL"),
    "val_nmse": ("VAL_NMSE", "NMSE_VAL"),
    "val_evm": ("VAL_EVM", "EVM_VAL"),
    "val_aclr_l": ("VAL_ACLR_L",),
    "val_aclr_r": ("VAL_ACLR_R",),
    "val_aclr_avg": ("VAL_ACLR_AVG", "VAL_ACLR", "ACLR_AVG_VAL"),
    "test_nmse": ("TEST_NMSE", "NMSE_TEST"),
    "seconds": ("SECONDS", "EPOCH_SECONDS", "EPOCH_S", "TIME_S", "SEC"),
    "time_min": ("TIME",),  # history.csv's "TIME:": minutes since the run's start, at the epoch's end
}


def _norm(key: str) -> str:
    return str(key).strip().upper().replace(" ", "_").rstrip(":")


def to_float(v: Any) -> float:
    """Float from a number or text; anything unreadable → NaN."""
    if v is None:
        return math.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def value(row: Mapping[str, Any], column: str) -> float:
    """Numeric value of a logical column (see :data:`ALIASES`) in ``row``; NaN when absent."""
    norm = {_norm(k): v for k, v in row.items()}
    for alias in ALIASES.get(column, (_norm(column),)):
        if alias in norm:
            return to_float(norm[alias])
    return math.nan


def metric_label(selection_metric: str) -> tuple[str, str]:
    """("val NMSE", "dB") from a selection metric name such as ``VAL_NMSE`` or ``val_ACLR_AVG``."""
    s = _norm(selection_metric or "VAL_NMSE")
    unit = "dBc" if "ACLR" in s else "dB"
    words = s.split("_")
    if words and words[0] in ("VAL", "TEST", "TRAIN"):
        head, rest = words[0].lower(), words[1:]
    else:
        head, rest = "", words
    rest = [w if w != "AVG" else "avg" for w in rest]
    return (" ".join([head, *rest]).strip() or s), unit


def fmt(v: float, spec: str = ".2f") -> str:
    """Format a number, NaN → an em dash."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return format(v, spec)


def epoch_seconds(rows) -> list[float]:
    """Seconds of each epoch of history rows as history.csv holds them: the differences of their ``TIME:`` column
    (minutes since the run's start at each epoch's end, training/record_payload.py; a resumed run continues the
    count), the first row's own value; NaN where a row has no readable time or the times do not increase."""
    out, before = [], 0.0
    for row in rows:
        t = value(row, "time_min")
        d = (t - before) * 60.0
        out.append(d if math.isfinite(d) and d >= 0 else math.nan)
        if math.isfinite(t):
            before = t
    return out
