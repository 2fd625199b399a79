"""Outputs a user names (an export folder, an ONNX file): where they may be written, and writing a folder whole.

:func:`check_output` is the one rule the exports apply before they write. (Interim: a workspace-wide rule that also
refuses datasets and the workspace's databases is being written beside this; it replaces this function.)

:func:`write_folder` builds a folder in a temporary sibling (every file through runs/artifacts.py's atomic writer)
and moves it into place, so a reader sees the old folder or the new one, never half of it.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from . import artifacts

__all__ = ["OutputRefused", "check_output", "write_folder"]


class OutputRefused(ValueError):
    """An output may not be written there; the message names the path and says what to do."""


def _run_folder_of(path: Path) -> Path | None:
    for folder in (path, *path.parents):
        if (folder / "config.json").is_file() and (folder / "status.json").is_file():
            return folder
    return None


def check_output(path: str | Path, *, overwrite: bool = False, folder: bool = False,
                 run_dir: str | Path | None = None) -> Path:
    """Refuse an output inside a run folder (``run_dir`` or any folder holding config.json and status.json) — even
    with ``overwrite`` — and an existing target unless ``overwrite`` (an empty folder is taken as it is); an existing
    folder is replaced only when it is a previous export (its formats.json says so: never a dataset or any other folder); a folder output must
    not be a file, a file output not a folder; the parent folder must exist. Returns the resolved path.

    Raises:
        OutputRefused: naming the path and the reason.
    """
    p = Path(path).expanduser().resolve()
    what = "folder" if folder else "file"
    if run_dir is not None:
        rd = Path(run_dir).resolve()
        if p == rd or rd in p.parents:
            raise OutputRefused(f"{p} is inside the run folder {rd}: an export is never written into a run's "
                                "record; give a path outside it")
    owner = _run_folder_of(p if p.exists() else p.parent)
    if owner is not None:
        raise OutputRefused(f"{p} is inside the run folder {owner}: an export is never written into a run's record; "
                            "give a path outside it")
    if not p.parent.is_dir():
        raise OutputRefused(f"cannot write {p}: the folder {p.parent} does not exist")
    if p.exists():
        if folder and not p.is_dir():
            raise OutputRefused(f"{p} is a file; the export needs a folder name")
        if not folder and p.is_dir():
            raise OutputRefused(f"{p} is a folder; give a file name")
        if folder and not any(p.iterdir()):
            return p  # an empty folder made for the export
        if not overwrite:
            raise OutputRefused(f"{p} exists; the {what} is not replaced unless --overwrite is given")
        if folder and not _is_export_folder(p):
            raise OutputRefused(f"{p} is not an export folder of DPD Desktop (no formats.json of one) and not empty; "
                                "it is not replaced, even with --overwrite")
    return p


def _is_export_folder(p: Path) -> bool:
    """An empty folder, or one holding an export's formats.json (its ``format`` starts with ``dpd-desktop-``)."""
    try:
        if not any(p.iterdir()):
            return True
        doc = json.loads((p / "formats.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and str(doc.get("format", "")).startswith("dpd-desktop-")


def write_folder(target: Path, fill: Callable[[Path], None]) -> Path:
    """``fill(tmp)`` writes the folder's files into a temporary sibling folder; then it replaces ``target`` (an
    existing one is moved aside first and removed after). Returns ``target``.

    Raises:
        ArtifactWriteError: a file or the move could not be written (the temporary folder is removed).
    """
    target = Path(target)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    old = None
    try:
        os.chmod(tmp, 0o777 & ~artifacts.current_umask())
        fill(tmp)
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
            os.rmdir(old)
            os.replace(target, old)
        os.replace(tmp, target)
        artifacts.fsync_dir(target.parent)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and old.exists() and not target.exists():
            os.replace(old, target)  # put the previous export back
        if isinstance(exc, OSError) and not isinstance(exc, artifacts.ArtifactWriteError):
            raise artifacts.ArtifactWriteError(target, exc) from exc
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return target
