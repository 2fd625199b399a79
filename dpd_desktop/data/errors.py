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
    """A dataset (folder, CSV, HDF5 file or spec) is missing, malformed or inconsistent.

    Subclass of :class:`ValueError`, so callers that already catch ``ValueError`` keep working.

    Parameters
    ----------
    message:
        What is wrong, in plain words (without the location prefix).
    path:
        The offending file or folder (``str`` or :class:`~pathlib.Path`); its *name* is put in front of the message.
        ``None`` when no file is involved (e.g. a spec dict given in memory; then ``source`` names it).
    line:
        1-based line number inside ``path`` (the header line of a CSV is line 1), or ``None``.
    field:
        Spec field / CSV column / HDF5 object the error is about (e.g. ``'nperseg'``, ``'Q_out'``, ``'/val/y'``).
    expected:
        What would have been accepted; appended as ``"; expected ..."`` unless the message already says it.
    source:
        Display name used instead of ``path.name`` (e.g. ``'spec.json'`` or ``'data.h5 attributes'``).

    Attributes
    ----------
    path: Path | None
    line: int | None
    field: str | None
    expected: str | None
    detail: str
        ``message`` without the location prefix.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
        expected: str | None = None,
        source: str | None = None,
    ) -> None:
        self.path: Path | None = Path(path) if path is not None else None
        self.line: int | None = line
        self.field: str | None = field
        self.expected: str | None = expected
        self.detail: str = message
        where = source if source is not None else (self.path.name if self.path is not None else "")
        if line is not None:
            where = f"{where} line {line}".strip()
        if field is not None:
            where = f"{where} field '{field}'".strip()
        text = message
        if expected and "expected" not in message:
            text = f"{text}; expected {expected}"
        super().__init__(f"{where}: {text}" if where else text)
