"""last.pt's resume record: what the trainer adds to each epoch's training state, and how a resumed run takes it back.

At the end of epoch k the trainer captures the RNG states where epoch k+1 continues (after epoch k's val and test
iterator seed draws, reference §4.2) and emits them with the best-so-far record and the history rows
(:func:`epoch_state`, in ``CheckpointReady``). last.pt's scheduler state is the one *before* epoch k's step (§4.7),
so :func:`restore` takes that step again with epoch k's validation value, as the uninterrupted run does.

last.pt (``torch.load(..., weights_only=True)``): ``format`` (:data:`FORMAT`), ``epoch`` (last finished, 0-based),
``model``, ``optimizer``, ``scheduler`` (state dicts), ``meta`` (the checkpoint metadata), ``rng``
(training/rng_state.py), ``best`` (``epoch``, ``value``, ``model``, ``meta``, ``row``), ``history`` (rows, plain
Python values).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..runs.artifacts import ARCH_FIELDS
from . import rng_state

FORMAT = "dpd-desktop-training-state-2"
_KEYS = ("epoch", "model", "optimizer", "scheduler", "meta", "rng", "best", "history")


class ResumeError(ValueError):
    """last.pt cannot resume this run; the message names the file and the field."""


def plain(value: Any) -> Any:
    """A history value in a form ``torch.load(weights_only=True)`` reads, exactly: NumPy float32 → a 0-dim float32
    tensor (history.csv writes float32 in its own text form, runs/artifacts.py ``format_value``: the type must come
    back), other NumPy floats → float, NumPy integers → int."""
    if isinstance(value, np.float32):
        return torch.tensor(value, dtype=torch.float32)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.integer):
        return int(value)
    return value


def unplain(value: Any) -> Any:
    """The inverse of :func:`plain`."""
    if torch.is_tensor(value) and value.dtype == torch.float32 and value.dim() == 0:
        return np.float32(value.item())
    return value


def plain_row(row) -> dict[str, Any]:
    return {str(k): plain(v) for k, v in row.items()}


def unplain_row(row) -> dict[str, Any]:
    return {k: unplain(v) for k, v in row.items()}


def epoch_state(tr, rng: dict[str, Any]) -> dict[str, Any]:
    """The resume record of the epoch that ``tr`` (the Trainer) just finished, besides its state dicts."""
    return {"format": FORMAT, "rng": rng, "history": [plain_row(r) for r in tr.history],
            "best": {"epoch": int(tr.best_epoch), "value": float(tr.best_value), "model": tr._best_state,
                     "meta": dict(tr._best_meta), "row": plain_row(tr._best_row)}}


@dataclass
class ResumeState:
    """A checked last.pt (see the module docstring): the run folder and everything :func:`restore` puts back."""

    path: Path
    doc: dict[str, Any]

    @property
    def epoch(self) -> int:
        return int(self.doc["epoch"])

    @property
    def history(self) -> list[dict[str, Any]]:
        return self.doc["history"]

    @property
    def best(self) -> dict[str, Any]:
        return self.doc["best"]

    def writer_info(self, config_doc: dict[str, Any]) -> dict[str, Any]:
        """What runs/writer.py ``RunWriter(resume=...)`` needs to reopen the folder."""
        best = {**self.best, "row": unplain_row(self.best["row"])}
        return {"config_doc": config_doc, "history": [unplain_row(r) for r in self.history], "best": best,
                "from_epoch": self.epoch}


def load(path: str | Path, config, run_id: str | None = None) -> ResumeState:
    """Read and check last.pt against the run's configuration (``config``: its ExperimentConfig).

    Raises:
        ResumeError: unreadable file, another format (e.g. written before resuming existed), a missing field, an
            architecture/step/run that differs from config.json, or history rows that do not match the epoch.
    """
    path = Path(path)
    try:
        doc = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError as exc:
        raise ResumeError(f"{path}: not found") from exc
    except Exception as exc:  # noqa: BLE001 - any unpickling failure, in plain words
        raise ResumeError(f"{path}: not a readable training state ({type(exc).__name__})") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise ResumeError(f"{path}: field 'format' is {found!r}, expected {FORMAT!r} (a training state written by "
                          "a version without resume, or not a training state)")
    for k in _KEYS:
        if k not in doc:
            raise ResumeError(f"{path}: field '{k}' is missing")
    meta = doc["meta"] if isinstance(doc["meta"], dict) else {}
    want = {"role": config.step, **{k: getattr(config, k) for k in ARCH_FIELDS}}
    for k, v in want.items():
        if meta.get(k) != v:
            raise ResumeError(f"{path}: field 'meta.{k}' is {meta.get(k)!r} but the run's config.json records {v!r}")
    if run_id is not None and meta.get("run_id") not in (None, run_id):
        raise ResumeError(f"{path}: field 'meta.run_id' is {meta.get('run_id')!r}, not this run ({run_id!r})")
    epoch = doc["epoch"]
    if not isinstance(epoch, int) or not 0 <= epoch < config.epochs:
        raise ResumeError(f"{path}: field 'epoch' is {epoch!r}, expected 0..{config.epochs - 1}")
    hist = doc["history"]
    if not isinstance(hist, list) or len(hist) != epoch + 1 or any(r.get("EPOCH") != i for i, r in enumerate(hist)):
        raise ResumeError(f"{path}: field 'history' does not hold the rows of epochs 0..{epoch}")
    best = doc["best"]
    if (not isinstance(best, dict) or not isinstance(best.get("epoch"), int) or not 0 <= best["epoch"] <= epoch
            or not isinstance(best.get("model"), dict)):
        raise ResumeError(f"{path}: field 'best' is not a best-so-far record of epochs 0..{epoch}")
    try:
        rng_state.check(doc["rng"])
    except ValueError as exc:
        raise ResumeError(f"{path}: {exc}") from exc
    return ResumeState(path, doc)


def restore(tr, st: ResumeState) -> None:
    """Put last.pt's state into the set-up Trainer ``tr`` (after its model, optimizer and fast path exist, before
    the first epoch): weights, optimizer, scheduler (plus epoch k's plateau step), history, best record, RNG states.

    Raises:
        ResumeError: the tensors do not fit the model built from config.json, or the RNG states cannot be restored.
    """
    d = st.doc
    try:
        tr.model.load_state_dict(d["model"])
    except RuntimeError as exc:
        raise ResumeError(f"{st.path}: field 'model' does not fit the recorded architecture "
                          f"({str(exc).splitlines()[0]})") from exc
    tr.optimizer.load_state_dict(d["optimizer"])
    tr.scheduler.load_state_dict(d["scheduler"])
    tr.history = [unplain_row(r) for r in d["history"]]
    tr.scheduler.step(tr.history[-1][tr.schedule_metric])  # the step epoch k's end takes after its checkpoint (§4.7)
    best = d["best"]
    tr.best_epoch, tr._best_state = best["epoch"], dict(best["model"])
    tr.best_value = float(best["value"]) if best["value"] is not None else math.nan
    tr._best_meta, tr._best_row = dict(best["meta"]), unplain_row(best["row"])
    tr.start_epoch = st.epoch + 1
    tr.elapsed_before_s = float(d["history"][-1].get("TIME:", 0.0)) * 60.0
    try:
        rng_state.restore(d["rng"])
    except ValueError as exc:
        raise ResumeError(f"{st.path}: {exc}") from exc
