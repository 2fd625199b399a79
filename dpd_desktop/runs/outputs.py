"""The one rule for every file a user names as an output (reports, coefficients, run-dpd's u, plot exports, a new
dataset folder): every writer of such a file calls :func:`check_output` first.

Never written, whatever the flags (:class:`OutputRefused`, naming the path and why):

* a file of a **run folder**: any folder above the target holding a run's ``status.json``, or its ``config.json``
  with one of :data:`RUN_FILES` (runs/writer.py is a run folder's one writer); of a sweep's or a loop's folder
  (``sweep.json``, ``loop.json``);
* a file of a **dataset**: in a folder holding ``spec.json`` or a split CSV, in or equal to a dataset the command
  reads (``datasets``), an existing HDF5 file with ``/train``, ``/val``, ``/test``, an existing CSV whose header
  names ``I_in,Q_in,I_out,Q_out``;
* a file the command **reads** (``inputs``);
* the **workspace's own files** (:data:`WORKSPACE_FILES`, anything under :data:`WORKSPACE_FOLDERS`, a sweep folder),
  in the workspace given or any folder above the target holding its databases; any existing SQLite database;
* a folder, a file in a folder that does not exist (none is created), an existing read-only file.

An existing file is replaced only with ``overwrite=True`` (``--overwrite``; the window asks first). An output folder
(``folder=True``) may be an empty existing folder; a non-empty one is replaced only with ``overwrite`` and only when
its ``formats.json`` says it is a previous export. The rule is checked on the path as given and with its links
followed. :func:`write_folder` builds an output folder in a temporary sibling and moves it into place.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Callable, Iterable, Sequence

from ..data.readers import HDF5_SUFFIXES, SINGLE_CSV_COLUMNS, SPLIT_CSV_FILES
from .. import atomic

__all__ = ["OutputRefused", "check_output", "protected_reason", "recorded_dataset", "suggested_output",
           "write_folder", "WORKSPACE_FILES"]

#: files of a workspace folder that no output may replace (the databases with SQLite's journal files, the settings)
WORKSPACE_DATABASES = ("index.sqlite", "queue.sqlite")
WORKSPACE_FILES = tuple(f"{db}{suffix}" for db in WORKSPACE_DATABASES for suffix in ("", "-wal", "-shm", "-journal")) \
    + ("settings.json",)
#: folders of a workspace that hold its records: runs, sweeps, loops (loop/store.py), the Ray staging area, the cache
WORKSPACE_FOLDERS = ("runs", "sweeps", "loops", ".sweep-incoming", "cache")
#: a run folder: status.json, or config.json with one of these
RUN_FILES = ("history.csv", "best.pt", "last.pt", "results.h5", "log.txt")
SQLITE_MAGIC = b"SQLite format 3\x00"
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"  # HDF5 file format specification, "Format Signature"


class OutputRefused(ValueError):
    """An output that is not written: ``path`` as given, ``reason`` why (the message says both and what to do)."""

    def __init__(self, path: str | os.PathLike, reason: str, advice: str = ""):
        self.path, self.reason = Path(path), reason
        super().__init__(f"the output {path} {reason}" + (f" ({advice})" if advice else ""))


def check_output(path: str | os.PathLike, *, overwrite: bool = False, suffixes: Sequence[str] | None = None,
                 inputs: Iterable[str | os.PathLike] = (), datasets: Iterable[str | os.PathLike] = (),
                 workspace=None, option: str = "--out", folder: bool = False,
                 run_dir: str | os.PathLike | None = None) -> Path:
    """Check that ``path`` may be written (module docstring); returns it, ``~`` expanded.

    Args:
        suffixes: the accepted extensions, lower case with the dot (``(".csv", ".mat")``); None: any.
        inputs: files the command reads. datasets: datasets the command's runs were trained on (as recorded).
        workspace: an object with ``root`` whose files are protected besides the ones found above the target.
        option: the option that named the path, for the advice (``--out``; "" in the window).
        folder: ``path`` is an output folder (module docstring), never a file.
        run_dir: the run the output is made from: nothing inside it, even when its files are missing.

    Raises:
        OutputRefused: naming ``path`` and why.
    """
    out = Path(path).expanduser()
    other = f"give another {option}" if option else "choose another file"
    if not str(path).strip():
        raise OutputRefused(repr(str(path)), "is an empty name", other)
    if run_dir is not None:
        rd = Path(os.path.abspath(Path(run_dir).expanduser()))
        if any(t == rd or rd in t.parents for t in _candidates(out)):
            raise OutputRefused(out, f"lies inside the run folder {rd}, which holds that run's record only", other)
    why = protected_reason(out, inputs=inputs, datasets=datasets, workspace=workspace)
    if why:
        raise OutputRefused(out, why, other)
    if folder and out.exists():
        if not out.is_dir():
            raise OutputRefused(out, "is a file", "the output needs a folder name")
        if not any(out.iterdir()):
            return out  # an empty folder made for the output
        if not overwrite:
            raise OutputRefused(out, "exists; the folder is not replaced unless --overwrite is given", other)
        if not _is_export_folder(out):
            raise OutputRefused(out, "is not an export folder of DPD Desktop (no formats.json of one) and not "
                                "empty; it is not replaced, even with --overwrite", other)
        return out
    if not folder and out.is_dir():
        raise OutputRefused(out, "is a folder", f"give a file name{_ending(suffixes)}")
    if not folder and suffixes is not None and out.suffix.lower() not in suffixes:
        shown = f"extension {out.suffix!r}" if out.suffix else "no extension"
        raise OutputRefused(out, f"has {shown}", f"use one of {', '.join(suffixes)}")
    parent = out.parent if str(out.parent) else Path(".")
    if not folder and not parent.is_dir():
        what = "is not a folder" if parent.exists() else "does not exist"
        raise OutputRefused(out, f"cannot be written: the folder {parent} {what}", "no folder is created")
    if folder or not (out.exists() or out.is_symlink()):
        return out
    try:
        read_only = not (out.stat().st_mode & 0o222)
    except OSError:
        read_only = False
    if read_only:
        raise OutputRefused(out, "exists and is read-only; it is not replaced", f"{other} or make it writable")
    if not overwrite:
        raise OutputRefused(out, "exists", f"give --overwrite to replace it, or {other}" if option else other)
    return out


def suggested_output(name: str, *folders: str | os.PathLike | None, workspace=None) -> Path:
    """Where a dialog proposes to save ``name``: the first of ``folders`` (then the home folder) where the rule lets
    a new file ``name`` be written; the name is kept even when such a file exists (the dialog asks)."""
    for folder in (*folders, Path.home()):
        if folder is None or not str(folder).strip():
            continue
        f = Path(folder).expanduser()
        if f.is_dir() and not protected_reason(f / name, workspace=workspace):
            return f / name
    return Path.home() / name


def recorded_dataset(ref) -> Path | None:
    """The dataset path a run recorded (a runs/record.py ``DatasetRef``), for ``datasets``: None for the demo or
    when none is recorded; a relative one resolved as the record resolves it."""
    if ref is None or ref.kind == "demo" or not ref.source:
        return None
    try:
        return ref.resolved_source()
    except (ValueError, OSError):  # DatasetUnavailable: gone or relative without a folder; the recorded text
        return Path(ref.source).expanduser()


def _ending(suffixes) -> str:
    return f" ending in {', '.join(suffixes)}" if suffixes else ""


def _candidates(out: Path) -> list[Path]:
    """The target as given (made absolute, not resolved) and with its links followed: both are checked."""
    given = Path(os.path.abspath(out))
    try:
        real = out.resolve()
    except (OSError, RuntimeError):  # a link loop
        real = given
    return [given] if real == given else [given, real]


def protected_reason(out: str | os.PathLike, *, inputs: Iterable = (), datasets: Iterable = (),
                     workspace=None) -> str:
    """Why ``out`` must never be written (the rule's first part, module docstring), or "" when it may be."""
    out = Path(out).expanduser()
    targets = _candidates(out)
    for src in inputs:
        if src is not None and _relation(Path(src).expanduser(), targets) == "same":
            return f"is the input file {src}; writing it would destroy the input"
    for src in datasets:
        how = _relation(Path(src).expanduser(), targets) if src else None
        if how == "same":
            return f"is the dataset {src}; writing it would change the dataset"
        if how == "inside":
            return (f"is a file of the dataset {src}; writing it would change the dataset" if out.exists() else
                    f"lies in the dataset folder {src}; writing it would change the dataset")
    roots = []
    if workspace is not None and getattr(workspace, "root", None) is not None:
        roots.append(Path(os.path.abspath(Path(workspace.root).expanduser())))
        try:
            roots.append(Path(workspace.root).expanduser().resolve())
        except OSError:
            pass
    for t in targets:
        for folder in t.parents:
            if _is_run_folder(folder):
                return (f"is a file of the run folder {folder}; writing it would destroy that run's record"
                        if t.exists() else f"lies inside the run folder {folder}, which holds that run's record only")
            if (folder / "sweep.json").is_file():
                return f"lies in the sweep folder {folder}, which holds that sweep's record only"
            if (folder / "loop.json").is_file():  # loop/store.py LOOP_FILE
                return f"lies in the loop folder {folder}, which holds that loop's record only"
        if t in roots or _is_workspace(t):
            return f"is the workspace {t}, which holds its runs and records; it is never replaced"
        ws_root = next((r for r in roots if r in t.parents), None) or _workspace_above(t)
        if ws_root is not None:
            rel = t.relative_to(ws_root)
            if len(rel.parts) == 1 and rel.parts[0] in WORKSPACE_FILES:
                return f"is the workspace's own file {rel.parts[0]} (in {ws_root})"
            if rel.parts[0] in WORKSPACE_FOLDERS:
                return f"lies in the workspace's {rel.parts[0]} folder ({ws_root / rel.parts[0]}), which holds its records only"
        if _is_dataset_folder(t.parent):
            return (f"is a file of the dataset folder {t.parent}; writing it would change the dataset" if t.exists()
                    else f"lies in the dataset folder {t.parent}; writing it would change the dataset")
    kind = _existing_kind(out)
    if kind:
        return kind
    return ""


def _relation(src: Path, targets: list[Path]) -> str | None:
    """"same" when ``src`` is one of ``targets`` (links followed), "inside" when it is a folder above one, else
    None."""
    try:
        src_abs = Path(os.path.abspath(src))
        src_real = src.resolve() if src.exists() else src_abs
    except (OSError, RuntimeError):
        return None
    for t in targets:
        if t in (src_abs, src_real):
            return "same"
        try:
            if t.exists() and src.exists() and os.path.samefile(src, t):
                return "same"
        except OSError:
            pass
    for t in targets:
        if src.is_dir() and (src_abs in t.parents or src_real in t.parents):
            return "inside"
    return None


def _is_run_folder(folder: Path) -> bool:
    """config.json with a file only runs write, or a status.json that names a run and its state."""
    try:
        if (folder / "config.json").is_file() and any((folder / f).exists() for f in RUN_FILES):
            return True
        status = folder / "status.json"
        if not status.is_file():
            return False
        with open(status, "rb") as fh:
            head = fh.read(65536)
        return b'"run_id"' in head and b'"state"' in head
    except OSError:
        return False


def _is_workspace(folder: Path) -> bool:
    try:
        return any((folder / db).is_file() for db in WORKSPACE_DATABASES)
    except OSError:
        return False


def _workspace_above(t: Path) -> Path | None:
    for folder in t.parents:
        try:
            if any((folder / db).is_file() for db in WORKSPACE_DATABASES):
                return folder
        except OSError:
            continue
    return None


def _is_dataset_folder(folder: Path) -> bool:
    try:
        return (folder / "spec.json").is_file() or any((folder / f).is_file() for f in SPLIT_CSV_FILES)
    except OSError:
        return False


def _existing_kind(out: Path) -> str:
    """What an existing file is that no output may replace: an SQLite database, a dataset file; "" otherwise."""
    try:
        st = out.stat()
    except OSError:
        return ""
    if not stat.S_ISREG(st.st_mode):
        return "exists and is not a regular file" if not stat.S_ISDIR(st.st_mode) else ""
    try:
        with open(out, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return ""
    if head.startswith(SQLITE_MAGIC):
        return "is an SQLite database (a workspace's index or queue, or another program's); it is never replaced"
    suffix = out.suffix.lower()
    if suffix in HDF5_SUFFIXES and head.startswith(HDF5_MAGIC) and _hdf5_has_splits(out):
        return "is a dataset (an HDF5 file with the groups /train, /val, /test); it is never replaced"
    if suffix == ".csv":
        first = head.split(b"\n", 1)[0].decode("utf-8", "replace")
        names = {c.strip().strip('"').strip("'").lower() for c in first.split(",")}
        if {c.lower() for c in SINGLE_CSV_COLUMNS} <= names:
            return "is a dataset (a single CSV with the columns I_in, Q_in, I_out, Q_out); it is never replaced"
    return ""


def _hdf5_has_splits(path: Path) -> bool:
    import h5py  # 0.07 s; only an existing .h5 target needs it

    try:
        with h5py.File(path, "r") as f:
            return all(name in f for name in ("train", "val", "test"))
    except OSError:
        return False


def _is_export_folder(p: Path) -> bool:
    """A folder holding an export's formats.json (its ``format`` starts with ``dpd-desktop-``)."""
    try:
        doc = json.loads((p / "formats.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and str(doc.get("format", "")).startswith("dpd-desktop-")


def write_folder(target: Path, fill: Callable[[Path], None]) -> Path:
    """``fill(tmp)`` writes the folder's files into a temporary sibling, which then replaces ``target`` (an existing
    one moved aside, removed after): a reader sees the old folder or the new one. Call :func:`check_output` first.

    Raises:
        ArtifactWriteError: a file or the move could not be written (the temporary folder is removed).
    """
    target = Path(target)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    old = None
    try:
        os.chmod(tmp, 0o777 & ~atomic.current_umask())
        fill(tmp)
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
            os.rmdir(old)
            os.replace(target, old)
        os.replace(tmp, target)
        atomic.fsync_dir(target.parent)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and old.exists() and not target.exists():
            os.replace(old, target)  # put the previous export back
        if isinstance(exc, OSError) and not isinstance(exc, atomic.ArtifactWriteError):
            raise atomic.ArtifactWriteError(target, exc) from exc
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return target
