"""The trainer's events as bytes, for the pipe between a queued run's child process and its supervisor.

JSON, not pickle: the supervisor rebuilds only the event dataclasses of :mod:`dpd_desktop.runs.events` (and
their :class:`~dpd_desktop.runs.events.PlotData`), whatever the bytes say. NumPy arrays travel as dtype, shape
and base64 of their bytes (C order); tuples stay tuples; NaN and ±inf stay floats (Python's JSON extension).
"""
from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any

import numpy as np

from ..runs import events as E

#: The events a child forwards (the record events that carry checkpoints and results stay in the child, whose
#: RunWriter writes them; RunPrepared is small and names the run folder at once).
FORWARDED = (E.RunPrepared, E.RunStarted, E.BatchProgress, E.EpochEnded, E.PreviewReady, E.RunFinished,
             E.RunFailed, E.RunCancelled)
#: the classes that travel, by their name on the wire
_CLASSES = {c.__name__: c for c in (*FORWARDED, E.PlotData)}
_NAMES = {c: name for name, c in _CLASSES.items()}
_DTYPES = {"float32", "float64", "int32", "int64", "complex64", "complex128", "bool", "uint8"}


class CodecError(ValueError):
    """Bytes that are not an encoded event."""


def _pack(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        name = _NAMES.get(type(obj))
        if name is None:
            raise CodecError(f"cannot encode {type(obj).__name__}")
        return {"__dc__": name, "f": {f.name: _pack(getattr(obj, f.name)) for f in dataclasses.fields(obj)}}
    if isinstance(obj, np.ndarray):
        a = np.ascontiguousarray(obj)
        return {"__nd__": [a.dtype.name, list(a.shape), base64.b64encode(a.tobytes()).decode("ascii")]}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, tuple):
        return {"__tuple__": [_pack(v) for v in obj]}
    if isinstance(obj, list):
        return [_pack(v) for v in obj]
    if isinstance(obj, dict) or hasattr(obj, "items"):
        return {"__map__": [[_pack(k), _pack(v)] for k, v in obj.items()]}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return str(obj)  # a path or another plain value: its text


def _unpack(obj: Any) -> Any:
    if isinstance(obj, list):
        return [_unpack(v) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__dc__" in obj:
        cls = _CLASSES.get(obj["__dc__"])
        if cls is None:
            raise CodecError(f"unknown event type {obj['__dc__']!r}")
        return cls(**{k: _unpack(v) for k, v in obj["f"].items()})
    if "__nd__" in obj:
        dtype, shape, data = obj["__nd__"]
        if dtype not in _DTYPES:
            raise CodecError(f"array dtype {dtype!r} not accepted")
        return np.frombuffer(base64.b64decode(data), dtype=dtype).reshape(shape).copy()
    if "__tuple__" in obj:
        return tuple(_unpack(v) for v in obj["__tuple__"])
    if "__map__" in obj:
        return {_unpack(k): _unpack(v) for k, v in obj["__map__"]}
    raise CodecError("unexpected object")


def encode(event) -> bytes:
    """An event of :data:`FORWARDED` → UTF-8 JSON bytes."""
    return json.dumps(_pack(event), separators=(",", ":")).encode("utf-8")


def decode(data: bytes):
    """Bytes from :func:`encode` → the event. Raises :class:`CodecError` for anything else."""
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CodecError(f"not an encoded event ({exc})") from exc
    try:
        ev = _unpack(obj)
    except (TypeError, KeyError, ValueError) as exc:
        raise CodecError(f"not an encoded event ({type(exc).__name__}: {exc})") from exc
    if not isinstance(ev, FORWARDED):
        raise CodecError("not an event")
    return ev
