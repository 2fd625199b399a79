"""CSV parsing for the dataset readers: numpy's C parser (``np.loadtxt``), and on a failure a line-by-line rescan
that reports the exact 1-based line (header = line 1), column and offending text.

:func:`read_iq_csv` / :func:`parse_iq_csv`: a two-column I/Q file (one file of a split-CSV folder, ``run-dpd
--input``); :func:`parse_columns_csv`: a single CSV with named columns. Rules: :mod:`dpd_desktop.data.readers`.
"""
from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from .errors import DatasetError
from .locks import ensure_unlocked

#: Accepted header names of a two-column I/Q CSV (split CSV files, ``read_iq_csv``), as (I name, Q name), compared
#: case-insensitively after stripping spaces and quotes; either order is accepted (Q first → columns swapped).
IQ_HEADER_PAIRS = (("I", "Q"), ("I_in", "Q_in"), ("I_out", "Q_out"), ("real", "imag"), ("re", "im"))
_IQ_PAIRS_LOWER = {(a.lower(), b.lower()) for a, b in IQ_HEADER_PAIRS}
_IQ_EXPECTED = "expected columns I,Q (any order; also accepted: " + " / ".join(
    f"{a},{b}" for a, b in IQ_HEADER_PAIRS[1:]
) + ")"
_SHOW = 80


def _show(text: str) -> str:
    text = text.rstrip("\r")
    return repr(text if len(text) <= _SHOW else text[: _SHOW - 3] + "...")


def _read_text_nl(path: Path) -> tuple[str, int]:
    """(the file's text (UTF-8, BOM dropped) with line ends normalized to ``\\n``, the number of ``\\n`` in it)."""
    ensure_unlocked(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DatasetError(f"file not found: {path}", path=path, expected="an existing file") from None
    except OSError as exc:
        raise DatasetError(f"cannot read file ({exc.strerror or exc})", path=path, expected="a readable file") from exc
    for bom, name in ((b"\xff\xfe", "UTF-16 (little-endian)"), (b"\xfe\xff", "UTF-16 (big-endian)")):
        if data.startswith(bom):
            raise DatasetError(f"{name} text (byte-order mark 0x{bom[0]:02X} 0x{bom[1]:02X})", path=path, line=1,
                               expected="UTF-8 or ASCII text: save the file as CSV (UTF-8)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DatasetError(
            f"not text: undecodable byte 0x{data[exc.start]:02x}", path=path, line=line, expected="UTF-8/ASCII CSV text"
        ) from None
    if "\r" in text:  # universal newlines, as numpy's parser sees them: line numbers then agree with its rows
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        return text, text.count("\n")
    return text, int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) == 10))  # UTF-8: byte 10 is only "\n"


_OTHER_SEPARATORS = ((";", "semicolons"), ("\t", "tabs"), ("|", "vertical bars"))


def _check_separator(header: str, path: Path, line: int) -> None:
    """A header without a comma but with another separator: the file is not comma-separated."""
    if "," in header:
        return
    for sep, name in _OTHER_SEPARATORS:
        if sep in header:
            raise DatasetError(f"the columns are separated by {name}, not commas: {_show(header)}", path=path,
                               line=line, expected="comma-separated values (save the file as CSV with ',' between "
                               "columns)")


def _body_lines(body: str, first_line: int) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, text) of the non-blank lines of ``body``, whose first line is ``first_line``."""
    for i, line in enumerate(body.split("\n")):
        if line.strip():
            yield first_line + i, line.rstrip("\r")


def _all_lines(body: str, first_line: int) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, text) of every line of ``body``, blank ones included."""
    for i, line in enumerate(body.split("\n")):
        yield first_line + i, line


def _cell(s: str) -> float:
    """float() of one CSV cell, with the same acceptance as numpy's parser (no '_' digit separators)."""
    t = s.strip()
    if len(t) >= 2 and t[0] == '"' and t[-1] == '"':
        t = t[1:-1].strip()
    if not t or "_" in t:
        raise ValueError(s)
    return float(t)


def _is_number(cell: str) -> bool:
    try:
        _cell(cell)
    except ValueError:
        return False
    return True


def _scan_for_error(path: Path, body: str, first_line: int, ncols: int, colnames: list[str], needed: list[int], *,
                    blank_ok: bool = True) -> None:
    """Find the first bad data line and raise a precise DatasetError; return if every line is fine.

    ``blank_ok=False``: a blank (empty or whitespace-only) line is an error too (``body`` must not end with blank
    lines then: the caller strips them).
    """
    names = ",".join(colnames)
    lines = _body_lines(body, first_line) if blank_ok else _all_lines(body, first_line)
    for lineno, line in lines:
        if not line.strip():
            raise DatasetError(f"empty line; expected {ncols} numeric columns ({names})", path=path, line=lineno)
        cells = line.split(",")
        if len(cells) != ncols:
            raise DatasetError(f"expected {ncols} numeric columns ({names}) separated by ',', got {len(cells)} "
                               f"column(s): {_show(line)}", path=path, line=lineno)
        for j in needed:
            try:
                _cell(cells[j])
            except ValueError:
                raise DatasetError(f"non-numeric value {cells[j].strip()!r} in column {j + 1} ({colnames[j]}) of "
                                   f"{_show(line)}; expected {ncols} numeric columns ({names})", path=path,
                                   line=lineno) from None


def _row_to_line(body: str, first_line: int, row: int) -> tuple[int, str]:
    for k, (lineno, line) in enumerate(_body_lines(body, first_line)):
        if k == row:
            return lineno, line
    return -1, ""  # pragma: no cover - rows always map to lines


def _find_non_finite(path: Path, arr: np.ndarray, body: str, first_line: int, colnames: list[str],
                     needed: list[int]) -> None:
    """Raise for the first row holding NaN/Inf, else for the first row holding a finite value beyond float32's range
    (the samples are used as float32), naming the file, line, column and value."""
    with np.errstate(over="ignore"):
        as32 = arr.astype(np.float32)
    checks = (  # (finite mask, text before and after "in column … of <line>", expected)
        (np.isfinite(arr), "non-finite value ({v})", "", "finite numbers (no NaN/Inf)"),
        (np.isfinite(as32), "value {v:g}", " overflows float32",
         f"|value| ≤ {float(np.finfo(np.float32).max):.7g} (samples are stored as float32)"))
    for ok, head, tail, expected in checks:
        rows_ok = ok.all(axis=1)
        if rows_ok.all():
            continue
        row = int(np.argmin(rows_ok))
        col = int(np.argmin(ok[row]))
        lineno, line = _row_to_line(body, first_line, row)
        raise DatasetError(f"{head.format(v=arr[row, col])} in column {needed[col] + 1} ({colnames[needed[col]]}) of "
                           f"{_show(line)}{tail}", path=path, line=lineno, expected=expected)


def _loadtxt_kw(**extra: Any) -> dict[str, Any]:
    return dict(delimiter=",", comments=None, quotechar='"', ndmin=2, dtype=np.float64, **extra)


def parse_iq_csv(path: Path) -> np.ndarray:
    """Parse a two-column I/Q CSV (one file of a split-CSV folder, or ``run-dpd --input``).

    Rules: line 1 is a header naming the I/Q columns (:data:`IQ_HEADER_PAIRS`, case-insensitive, spaces/quotes
    stripped, either order); then one data row per line, two numeric cells each; no blank line between rows (one
    blank line may end the file). Returns float64 (N, 2) with I in column 0 (a ``Q,I`` file is swapped).
    """
    text, n_newlines = _read_text_nl(path)
    if not text.strip():
        raise DatasetError("empty file", path=path,
                           expected="a header line (e.g. 'I,Q') followed by at least one data row")
    nl = text.find("\n")
    header = text if nl < 0 else text[:nl]
    if not header.strip():
        raise DatasetError("empty line; expected a header line such as 'I,Q'", path=path, line=1)
    _check_separator(header, path, 1)
    cells = header.split(",")
    names = [c.strip().strip("\"'").strip() for c in cells]
    if all(_is_number(c) for c in cells):
        raise DatasetError(f"expected a header line such as 'I,Q'; found data {_show(header)}", path=path, line=1)
    if len(cells) != 2:
        raise DatasetError(f"header has {len(cells)} column(s): {_show(header)}", path=path, line=1,
                           expected="2 columns, e.g. 'I,Q'")
    low = (names[0].lower(), names[1].lower())
    if low in _IQ_PAIRS_LOWER:
        swap = False
    elif low[::-1] in _IQ_PAIRS_LOWER:
        swap = True
    else:
        raise DatasetError(f"header names {names[0]!r}, {names[1]!r} are not I/Q column names; {_IQ_EXPECTED}",
                           path=path, line=1)
    colnames = ["Q", "I"] if swap else ["I", "Q"]

    # body without the blank lines that may end the file (at most one is allowed, checked below)
    end = len(text)
    while end > nl + 1 and text[end - 1] in " \t\n":
        end -= 1
    body = "" if nl < 0 else text[nl + 1 : end]
    if not body.strip():
        raise DatasetError("header only, no data rows", path=path, line=1,
                           expected="at least one data row of 2 numbers")
    tail_text = text[end:]
    n_lines = n_newlines - 1 - tail_text.count("\n") + 1  # data lines 2 .. n_lines + 1 (= body.count("\n") + 1)
    try:
        arr = np.loadtxt(io.StringIO(body), **_loadtxt_kw())
    except ValueError as exc:
        _scan_for_error(path, body, 2, 2, colnames, [0, 1], blank_ok=False)
        raise DatasetError(f"could not parse CSV data ({exc})", path=path, expected="2 numeric columns per row") \
            from exc
    if arr.shape[1] != 2 or arr.shape[0] != n_lines:  # a blank line (numpy skips those) or a short/long row
        _scan_for_error(path, body, 2, 2, colnames, [0, 1], blank_ok=False)
        raise DatasetError(  # pragma: no cover - the scan finds it
            f"parsed {arr.shape[0]} rows of {arr.shape[1]} columns from {n_lines} lines", path=path,
            expected="one row of 2 numeric columns per line",
        )
    _find_non_finite(path, arr, body, 2, colnames, [0, 1])
    tail = tail_text.split("\n")[1:]  # the lines after the last data line
    if tail and tail[-1] == "":
        tail.pop()  # the end of the last line, not a line
    if len(tail) > 1:
        raise DatasetError("empty line; expected 2 numeric columns (" + ",".join(colnames) + ") (one blank line may "
                           "end the file, not more)", path=path, line=n_lines + 2)
    if swap:
        arr = np.ascontiguousarray(arr[:, ::-1])
    return arr


def parse_columns_csv(path: Path, *, columns: tuple[str, ...]) -> np.ndarray:
    """Parse a single CSV with one header line and pick the named ``columns`` (any order, extra columns ignored).

    Blank lines are skipped (like pandas). Returns a float64 array (N, len(columns)).
    """
    text = _read_text_nl(path)[0]
    if not text.strip():
        raise DatasetError("empty file", path=path,
                           expected=f"a header line (e.g. '{','.join(columns)}') followed by at least one data row")
    # header = first non-blank line (pandas skips leading blank lines)
    lead = 0
    pos = 0
    while True:
        nl = text.find("\n", pos)
        line = text[pos:] if nl < 0 else text[pos:nl]
        if line.strip() or nl < 0:
            break
        lead += 1
        pos = nl + 1
    header_line = lead + 1
    header = line
    body = "" if nl < 0 else text[nl + 1 :]
    first_line = header_line + 1
    _check_separator(header, path, header_line)
    hdr = [h.strip().strip('"').strip() for h in header.split(",")]

    idx: list[int] = []
    for c in columns:
        hits = [i for i, h in enumerate(hdr) if h == c] or [i for i, h in enumerate(hdr) if h.lower() == c.lower()]
        if not hits:
            hint = ""
            if re.fullmatch(r"(train|val|test)_(input|output)\.csv", path.name):
                hint = " (this looks like one file of a split-CSV dataset: open its folder instead)"
            raise DatasetError(f"missing column '{c}' in header {_show(header)}{hint}", path=path, line=header_line,
                               field=c, expected="header columns " + ",".join(columns) + " (any order)")
        if len(hits) > 1:
            raise DatasetError(f"column '{c}' appears {len(hits)} times in header {_show(header)}", path=path,
                               line=header_line, field=c, expected="each of " + ",".join(columns) + " exactly once")
        idx.append(hits[0])
    ncols = len(hdr)
    if not body.strip():
        raise DatasetError("header only, no data rows", path=path, line=header_line,
                           expected=f"at least one data row of {ncols} numbers")

    kw = _loadtxt_kw(usecols=idx)
    try:
        arr = np.loadtxt(io.StringIO(body), **kw)
    except ValueError as exc:
        # precise location first; a whitespace-only line is the one thing the scan tolerates and loadtxt does not
        _scan_for_error(path, body, first_line, ncols, hdr, idx)
        try:
            arr = np.loadtxt(io.StringIO(re.sub(r"(?m)^[ \t]+$", "", body)), **kw)
        except ValueError:
            raise DatasetError(f"could not parse CSV data ({exc})", path=path,
                               expected=f"{ncols} numeric columns per row") from exc
    if arr.shape[1] != len(idx):
        _scan_for_error(path, body, first_line, ncols, hdr, idx)
        raise DatasetError(f"got {arr.shape[1]} columns", path=path,  # pragma: no cover - the scan finds it
                           expected=f"{ncols} numeric columns")
    if body.count(",") != arr.shape[0] * (ncols - 1):
        # usecols makes loadtxt lenient about extra/missing trailing cells: enforce the header's column count
        _scan_for_error(path, body, first_line, ncols, hdr, idx)
    _find_non_finite(path, arr, body, first_line, hdr, idx)
    return arr


def read_iq_csv(path: str | Path) -> np.ndarray:
    """:func:`parse_iq_csv` cast to float32 (reference §1.4): (N, 2) C-contiguous, columns I, Q.

    Raises:
        DatasetError: file missing/unreadable, empty, numeric line 1 (no header), header names not I/Q, header only,
            header or a row not having 2 columns, a blank line between rows, non-numeric cell, NaN/Inf — naming the
            file and the 1-based line (header = line 1) and quoting the offending text.
    """
    return np.ascontiguousarray(parse_iq_csv(Path(path)), dtype=np.float32)
