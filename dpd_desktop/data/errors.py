"""Error type raised by every dataset reader, writer and spec normalizer.

A :class:`DatasetError` always says *where* (file name, and the 1-based line or the spec field) and *what was
expected*, so the GUI can show ``str(err)`` to the user as-is, e.g.::

    train_input.csv line 5: expected 2 numeric columns (I,Q), got 'abc,0.1'
    spec.json field 'input_signal_fs': expected a positive number in Hz (e.g. 640e6), got 'abc'
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["DatasetError"]


class DatasetError(ValueError):
    """A dataset (folder, CSV, HDF5 file or spec) is missing, malformed or inconsistent (a ValueError).

    ``message`` says what is wrong, without the location. ``path``: the offending file or folder, whose name (or
    ``source``, a display name such as ``'data.h5 attributes'``) is put in front; ``line``: 1-based (a CSV's header
    is line 1); ``field``: the spec field, CSV column or HDF5 object (``'nperseg'``, ``'Q_out'``, ``'/val/y'``);
    ``expected``: what would have been accepted, appended as ``"; expected ..."`` unless the message says it
    already. All are kept as attributes (``path`` as a Path).
    """

    def __init__(self, message: str, *, path: str | Path | None = None, line: int | None = None,
                 field: str | None = None, expected: str | None = None, source: str | None = None) -> None:
        self.path: Path | None = Path(path) if path is not None else None
        self.line: int | None = line
        self.field: str | None = field
        self.expected: str | None = expected
        where = source if source is not None else (self.path.name if self.path is not None else "")
        if line is not None:
            where = f"{where} line {line}".strip()
        if field is not None:
            where = f"{where} field '{field}'".strip()
        text = message
        if expected and "expected" not in message:
            text = f"{text}; expected {expected}"
        super().__init__(f"{where}: {text}" if where else text)
