"""A run's artifacts: the history CSVs and the checkpoints, every file written atomically (atomic.py); checkpoints
hold tensors and plain metadata only and load with ``torch.load(..., weights_only=True)``.
"""
from __future__ import annotations

import csv
import hashlib
import io
import re
import zipfile
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from ..atomic import atomic_write_bytes, atomic_write_text

# torch is imported where a checkpoint is saved or loaded: the record reader needs only JSON (import cost: 0.9 s)


def format_value(v: Any, precision: int = 8) -> str:
    """History-CSV text of one value, like the reference logger (reference §4.8): floats with ``precision``
    decimals, NumPy float32 scalars in their default text form, everything else ``str``."""
    if isinstance(v, np.float32):
        return str(v)
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.{precision}f}"
    return str(v)


def write_history_csv(path: str | Path, rows: Iterable[Mapping[str, Any]], precision: int = 8,
                      header: Iterable[str] | None = None) -> Path:
    """Rewrite the whole history CSV atomically: one header line (``header``, else the first row's keys; with
    neither, the file is empty), one line per epoch."""
    rows = list(rows)
    cols = list(header) if header is not None else (list(rows[0].keys()) if rows else [])
    buf = io.StringIO()
    if cols:
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(cols)
        for r in rows:
            w.writerow([format_value(r.get(c, ""), precision) for c in cols])
    return atomic_write_text(path, buf.getvalue())


class HistoryFormatError(ValueError):
    """A history CSV (history.csv, best.csv) whose rows do not match its header; names the file and the line."""


def read_history_csv(path: str | Path) -> list[dict[str, str]]:
    """Read a history CSV back as a list of {column: text} dicts (the header's columns, in order); empty cells past
    the header's last column (a trailing comma) are ignored.

    Raises:
        HistoryFormatError (a ValueError): a row with more non-empty cells or fewer cells than the header has
            columns, a header that names a column twice, or text that is not CSV; the message names the file and
            the 1-based line (the header is line 1). OSError: the file cannot be read.
    """
    path = Path(path)
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        try:
            header = next(reader, None)
            if header is None:
                return []
            if len(set(header)) != len(header):
                twice = sorted({c for c in header if header.count(c) > 1})
                raise HistoryFormatError(f"{path} line 1: the header names the column(s) {', '.join(twice)} twice")
            rows = []
            for cells in reader:
                if not cells:
                    continue  # a blank line
                n = len(header)
                if len(cells) > n and any(c.strip() for c in cells[n:]):
                    raise HistoryFormatError(f"{path} line {reader.line_num}: {len(cells)} cells, but the header "
                                             f"names {n} columns (an extra cell: the file was edited or damaged)")
                if len(cells) < n:
                    raise HistoryFormatError(f"{path} line {reader.line_num}: {len(cells)} cells, but the header "
                                             f"names {n} columns (a cell is missing: the file was edited or "
                                             "damaged)")
                rows.append(dict(zip(header, cells[:n])))
        except csv.Error as exc:
            raise HistoryFormatError(f"{path} line {reader.line_num}: not CSV ({exc})") from exc
        except UnicodeDecodeError as exc:
            raise HistoryFormatError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    return rows


def save_checkpoint(path: str | Path, state_dict: Mapping[str, Any], meta: Mapping[str, Any]) -> Path:
    """Save ``{"state_dict": tensors, "meta": plain metadata}`` atomically; ``meta`` holds only str/int/float/bool/
    None and lists/dicts of them, so the file loads with ``weights_only=True``."""
    import torch

    buf = io.BytesIO()
    torch.save({"state_dict": {k: v.detach().cpu() for k, v in state_dict.items()}, "meta": dict(meta)}, buf)
    return atomic_write_bytes(path, buf.getvalue())


def save_training_state(path: str | Path, payload: Mapping[str, Any]) -> Path:
    """Save a resumable training state (model + optimizer + scheduler state dicts, epoch) atomically."""
    import torch

    buf = io.BytesIO()
    torch.save(dict(payload), buf)
    return atomic_write_bytes(path, buf.getvalue())


class CheckpointError(ValueError):
    """A checkpoint file is missing, unreadable or of the wrong architecture; the message names file and field."""


#: ``meta["format"]`` of the checkpoints :func:`save_checkpoint` writes (training/record_payload.py sets it); a
#: checkpoint whose meta names another format is refused.
CHECKPOINT_FORMATS = ("dpd-desktop-checkpoint-1",)


def load_checkpoint(path: str | Path) -> tuple[dict, dict]:
    """(state_dict, meta) of a checkpoint written by :func:`save_checkpoint`, or of a plain OpenDPD ``state_dict``
    file (empty meta); ``weights_only=True``: a pickled object is refused by torch's restricted unpickler.

    Raises:
        CheckpointError: missing file, not a checkpoint (not a zip, truncated, a pickled object), a ``meta.format``
            of another program or version, a ``state_dict`` that is not a mapping of names to tensors; the message
            names the file and the field.
    """
    import torch

    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint file not found")
    try:
        is_zip = zipfile.is_zipfile(path)
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read the checkpoint ({exc.strerror or exc})") from exc
    if not is_zip:  # torch.save's container since PyTorch 1.6; a truncated file has lost its zip directory
        raise CheckpointError(f"{path}: not a readable checkpoint (not the zip archive torch.save writes: the file "
                              "is cut short, damaged or of another kind)")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - report any unpickling failure in plain words
        detail = _load_error_detail(exc)
        raise CheckpointError(f"{path}: not a readable checkpoint ({type(exc).__name__})"
                              + (f": {detail}" if detail else "")) from exc
    if isinstance(obj, dict) and "state_dict" in obj:
        state, meta = obj["state_dict"], obj.get("meta", {})
        if not isinstance(meta, dict):
            raise CheckpointError(f"{path}: field 'meta' is a {type(meta).__name__}, expected a mapping")
        fmt = meta.get("format")
        if fmt is not None and fmt not in CHECKPOINT_FORMATS:
            raise CheckpointError(f"{path}: field 'meta.format' is {fmt!r}; this version reads "
                                  f"{', '.join(CHECKPOINT_FORMATS)}")
    elif isinstance(obj, dict) and obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
        state, meta = obj, {}
    else:
        raise CheckpointError(f"{path}: field 'state_dict' missing; not a DPD Desktop or OpenDPD checkpoint")
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: field 'state_dict' is a {type(state).__name__}, expected tensors by name")
    for k, v in state.items():
        if not isinstance(k, str) or not isinstance(v, torch.Tensor):
            raise CheckpointError(f"{path}: field 'state_dict.{k}' is a {type(v).__name__}, expected a tensor")
    return dict(state), dict(meta)


_UNSAFE_ADVICE = re.compile(r"weights[_ ]only|trust|can still be loaded|safe_globals|two options", re.IGNORECASE)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _load_error_detail(exc: BaseException) -> str:
    """One line of ``torch.load``'s error, without its advice to load with ``weights_only=False`` (which runs
    arbitrary code from the file) or to allow-list globals: the unpickler's own reason when there is one, else the
    message's first line, minus every sentence about weights_only or trusting the file."""
    text = _ANSI.sub("", str(exc))
    marker = "WeightsUnpickler error:"
    if marker in text:
        text = text.split(marker, 1)[1]
    refused = re.search(r"unsupported GLOBAL (\S+)", text)
    if refused:  # a pickled Python object (code that would run on a plain torch.load): refused, never run
        return (f"it holds a pickled Python object ({refused.group(1)}), which a checkpoint never contains; "
                "it was not loaded")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return ""
    sentences = re.split(r"(?<=[.!?])\s+", lines[0])
    return " ".join(s for s in sentences if s and not _UNSAFE_ADVICE.search(s)).strip()


ARCH_FIELDS = ("backbone", "hidden_size", "num_layers")
#: families whose architecture also records the delta thresholds (models/deltagru.py)
DELTA_BACKBONES = ("deltagru", "tres_deltagru")


def delta_fields(config) -> dict[str, float]:
    """``{"thx", "thh"}`` of a delta family's configuration (an ExperimentConfig), else {}."""
    if config.backbone not in DELTA_BACKBONES:
        return {}
    return {"thx": float(config.thx), "thh": float(config.thh)}


def load_state_checked(model, path: str | Path, arch: Mapping[str, Any]) -> dict:
    """Load the checkpoint at ``path`` into ``model`` once its metadata agrees with ``arch`` (the run's recorded
    architecture) and its tensors have exactly the model's keys, shapes and dtypes; returns its metadata.

    Raises:
        CheckpointError: a missing or unreadable file, or a field that differs (file and field named).
    """
    state, meta = load_checkpoint(path)
    for k in (*ARCH_FIELDS, "poly", "thx", "thh"):
        if k in meta and k in arch and meta[k] != arch[k]:
            raise CheckpointError(f"{path}: field '{k}' is {meta[k]!r} but the run's config.json records {arch[k]!r}")
    own = model.state_dict()
    if set(own) != set(state):
        odd = sorted(set(own) - set(state)) or sorted(set(state) - set(own))
        raise CheckpointError(f"{path}: field '{odd[0]}' does not match the recorded architecture "
                              f"{arch['backbone']} H={arch['hidden_size']}")
    for k, v in own.items():
        if tuple(v.shape) != tuple(state[k].shape):
            raise CheckpointError(f"{path}: field '{k}' has shape {tuple(state[k].shape)}, expected {tuple(v.shape)} "
                                  f"for {arch['backbone']} H={arch['hidden_size']}")
        if state[k].dtype != v.dtype:
            raise CheckpointError(f"{path}: field '{k}' has dtype {state[k].dtype}, expected {v.dtype}")
    model.load_state_dict(state)
    return meta


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
