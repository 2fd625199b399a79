"""A sweep's search space as a small table (the Sweep view's "New sweep…": parameter | values or range), read into
the same :class:`~dpd_desktop.sweep.spec.SweepSpec` a TOML file or ``--grid`` gives (sweep/spec.py ``parse_spec``
validates it; errors name the row's field, ``space.lr``).

A cell is either a list of values, ``4, 8, 16`` (each read as the field's type: int, float, bool, a name, ``none``),
or a range ``low .. high`` with an optional ``log`` after it (``1e-4 .. 1e-2 log``: log-uniform; random and Optuna
searches only, a grid needs lists). :func:`param_text` writes a :class:`~dpd_desktop.sweep.spec.Param` back as such a
cell, so that a shown sweep's space fills the table again. Qt-free.
"""
from __future__ import annotations

import math
import re
from typing import Iterable

from ..config import ExperimentConfig
from .spec import AUTO
from .spec import ALIASES, NOT_SEARCHABLE, SEARCHES, Param, SweepSpec, SweepSpecError, _FIELDS, _SEARCHABLE_FIELD, \
    _coerce, base_table, parse_spec, unknown_field

__all__ = ["SOURCE", "SEARCHABLE_FIELDS", "parse_cell", "param_text", "spec_from_table", "trial_count"]

SOURCE = "Sweep view"
#: The configuration fields a sweep may search (the table's parameter choices), in the config's order.
SEARCHABLE_FIELDS = tuple(k for k in _FIELDS if k not in NOT_SEARCHABLE and k not in ("dataset", "pa_run"))
_RANGE = re.compile(r"^\s*(?P<low>[^.\s][^\s]*?)\s*\.\.\s*(?P<high>[^\s]+?)\s*(?P<log>\blog\b)?\s*$", re.IGNORECASE)


def _field(key: str, where: str) -> str:
    name = ALIASES.get(key.strip(), key.strip())
    if name not in _FIELDS or name in NOT_SEARCHABLE:
        raise SweepSpecError(SOURCE, where, unknown_field(key, SEARCHABLE_FIELDS, _SEARCHABLE_FIELD))
    return name


def parse_cell(key: str, text: str):
    """One row: the list of values, or the range ``{"low", "high", "log"}``, of field ``key`` (module docstring).

    Raises:
        SweepSpecError: an unknown field, an empty cell or value, a value not of the field's type, a range whose
            ends are not numbers.
    """
    name = _field(key, f"space.{key}")
    where = f"space.{name}"
    t = str(text).strip()
    if not t:
        raise SweepSpecError(SOURCE, where, "no values: give a list (4, 8, 16) or a range (1e-4 .. 1e-2 log)")
    m = _RANGE.match(t)
    if m:
        ends = []
        for end in ("low", "high"):
            v = _coerce(name, m.group(end), f"{where}.{end}", SOURCE)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise SweepSpecError(SOURCE, f"{where}.{end}", f"a range needs numbers, got {m.group(end)!r}")
            ends.append(v)
        return {"low": ends[0], "high": ends[1], "log": bool(m.group("log"))}
    if ".." in t:
        raise SweepSpecError(SOURCE, where, f"{t!r} is not a range: write low .. high, optionally followed by log")
    items = [s.strip() for s in t.split(",")]
    if any(not s for s in items):
        raise SweepSpecError(SOURCE, where, "an empty value (two commas, or one at the end)")
    return [_coerce(name, s, where, SOURCE) for s in items]


def param_text(p: Param) -> str:
    """A :class:`Param` as a table cell: ``4, 8, 16`` or ``0.0001 .. 0.01 log`` (``parse_cell`` reads it back)."""
    if p.values is not None:
        return ", ".join("none" if v is None else str(v).lower() if isinstance(v, bool) else f"{v:g}"
                         if isinstance(v, float) else str(v) for v in p.values)
    return f"{p.low:g} .. {p.high:g}" + (" log" if p.log else "")


def spec_from_table(rows: Iterable[tuple[str, str]], base: ExperimentConfig, *, search: str = "grid",
                    trials: int | None = None, seed: int = 0, name: str = "sweep",
                    group_size=AUTO) -> SweepSpec:
    """The sweep of the table ``rows`` ((parameter, cell) pairs, in the table's order; empty rows are skipped) over
    the configuration ``base`` (its fields that differ from the defaults, less the searched ones, are [base]).

    Raises:
        SweepSpecError: a row that cannot be read (:func:`parse_cell`), a field given twice, or anything
            ``parse_spec`` refuses (a range in a grid, too many trials, a value the configuration refuses, ...).
    """
    if search not in SEARCHES:
        raise SweepSpecError(SOURCE, "sweep.search", f"expected one of {SEARCHES}, got {search!r}")
    space: dict = {}
    for key, text in rows:
        if not str(key).strip() and not str(text).strip():
            continue
        if not str(key).strip():
            raise SweepSpecError(SOURCE, "space", f"a row without a parameter (values {text!r})")
        field = _field(str(key), f"space.{key}")
        if field in space:
            raise SweepSpecError(SOURCE, f"space.{field}", "given in two rows: one row per parameter")
        space[field] = parse_cell(field, text)
    raw_base = {k: v for k, v in base_table(base).items() if k not in space}
    sweep = {"name": name, "search": search, "seed": int(seed), "group_size": group_size}
    if search != "grid":
        sweep["trials"] = trials
    return parse_spec({"sweep": sweep, "base": raw_base, "space": space}, SOURCE)


def trial_count(spec: SweepSpec) -> int:
    """How many trials the sweep runs: the grid's combinations, else ``trials``."""
    if spec.search == "grid":
        return math.prod(len(p.values) for p in spec.space)
    return int(spec.trials or 0)
