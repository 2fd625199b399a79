"""Short texts of an index row (runs/index.py ``IndexedRun``) shared by ``dpd-desktop runs`` (cli/runs.py) and the
window's runs browser (gui/runs_browser.py)."""
from __future__ import annotations

import os


def dataset_label(row) -> str:
    """A short dataset name for the table: the demo and its seed, a file or folder name, or the recorded name."""
    if row.dataset_kind == "demo":
        return (row.dataset_shown or "demo").replace("synthetic demo, seed ", "demo seed ")
    if row.dataset_shown and row.dataset_shown != "?":
        return os.path.basename(row.dataset_shown.rstrip("/\\")) or row.dataset_shown
    return row.dataset_name or "-"


def format_duration(s: float | None) -> str:
    """A run's wall time in seconds → ``"12.3 s"``, ``"4.5 min"``, ``"1.2 h"``; ``"-"`` for None."""
    if s is None:
        return "-"
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def epoch_of(epoch: int, epochs: int) -> str:
    """An epoch as the record numbers it (history.csv's EPOCH, the selected epoch: from 0) with the run's range:
    ``epoch_of(2, 4)`` → ``"2 of 0–3"``. Every progress text of the command line and the window uses it, so the
    epoch a progress line names is the row of the table and the number of the selected epoch."""
    return f"{epoch} of 0–{max(int(epochs) - 1, 0)}"
