"""Workspace settings: ``settings.json`` at the workspace root, shared by the window and the command line. Every key
is optional: ``retention_hours`` (default 24; runs/retention.py), and the limits a run takes when it sets none of its
own: ``default_device`` ("auto"), ``default_threads`` (null: PyTorch's), ``default_cuda_memory_fraction`` (in (0, 1],
null: no ceiling), ``default_time_limit_s`` (null: none). :class:`SettingsError` (a ``ValueError``) names the file and
the field.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import atomic
from ..config import DEVICES, ExperimentConfig

FILE_NAME = "settings.json"


class SettingsError(ValueError):
    """settings.json is not readable, or one of its fields has a wrong type or value (the message names both)."""


@dataclass(frozen=True)
class WorkspaceSettings:
    retention_hours: float = 24.0
    default_device: str = ExperimentConfig.device
    default_threads: int | None = None
    default_cuda_memory_fraction: float | None = None
    default_time_limit_s: float | None = None

    @classmethod
    def load(cls, root: str | Path) -> "WorkspaceSettings":
        """The settings of the workspace at ``root``; the defaults when it has no settings.json."""
        path = Path(root) / FILE_NAME
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return cls()
        except OSError as exc:
            raise SettingsError(f"{path}: cannot read ({exc.strerror or exc})") from exc
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise SettingsError(f"{path}: not JSON ({exc})") from exc
        if not isinstance(doc, dict):
            raise SettingsError(f"{path}: expected a JSON object, found {type(doc).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(doc) - known)
        if unknown:
            raise SettingsError(f"{path}: unknown field {unknown[0]!r} (known: {', '.join(sorted(known))})")
        out = cls(**doc)
        out.validate(str(path))
        return out

    def validate(self, where: str = FILE_NAME) -> None:
        """Raise :class:`SettingsError` naming ``where`` and the field when a value is out of range."""
        def num(name, value, lo, hi, allow_none=True, integer=False):
            if value is None and allow_none:
                return
            ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
            if isinstance(value, bool) or not ok_type:
                kind = ("an integer" if integer else "a number") + (" or null" if allow_none else "")
                found = {str: "a string", bool: "a bool", float: "a float", list: "a list", dict: "an object",
                         type(None): "null"}.get(type(value), type(value).__name__)
                raise SettingsError(f"{where}: field {name!r} = {value!r}: expected {kind}, not {found}")
            if not (lo < value <= hi if name.endswith("fraction") else lo <= value <= hi):
                raise SettingsError(f"{where}: field {name!r} = {value!r} is out of range")

        num("retention_hours", self.retention_hours, 0, 1e6, allow_none=False)
        num("default_threads", self.default_threads, 1, 4096, integer=True)
        num("default_cuda_memory_fraction", self.default_cuda_memory_fraction, 0, 1)
        num("default_time_limit_s", self.default_time_limit_s, 1, 1e9)
        if not isinstance(self.default_device, str) or not self.default_device:
            raise SettingsError(f"{where}: field 'default_device' = {self.default_device!r} is not a device name")
        d = self.default_device
        if not (d in DEVICES or d.startswith("cuda:") and d[5:].isdigit()):
            raise SettingsError(f"{where}: field 'default_device' = {d!r}: expected auto, cpu, cuda or cuda:N")

    def save(self, root: str | Path) -> Path:
        """Write settings.json atomically (runs/artifacts.py) after :meth:`validate`."""
        self.validate()
        return atomic.atomic_write_json(Path(root) / FILE_NAME, self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
