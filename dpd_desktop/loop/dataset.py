"""Datasets from the loop, each in one step:

* :func:`capture_to_dataset` — an iteration's capture (``pa_input.h5``, ``pa_output.h5``) becomes a split-CSV
  dataset folder with spec.json through the capture import (analysis/capture_import.py), with the channel layout of
  the iteration's config.json (``loop.signal``);
* :func:`write_dataset` — an in-memory dataset (the DPD fit's x → u pairs, loop/fit.py) written the same way.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..analysis.capture_import import CaptureImportError, ImportResult, import_capture
from ..data import load_dataset, save_split_csv
from ..runs.outputs import write_folder

__all__ = ["capture_to_dataset", "write_dataset", "CaptureImportError"]


def capture_to_dataset(run_dir: str | Path, out: str | Path, *, split=(0.6, 0.2, 0.2),
                       nperseg: int | None = None) -> ImportResult:
    """The dataset of the loop iteration at ``run_dir`` (module docstring), written to ``out`` (a new folder).
    ``nperseg`` (the dataset's segment length): default the loop's metric window, halved until a segment fits
    into val and test.

    Raises CaptureImportError naming the file: not a loop iteration (no pa_input.h5 / pa_output.h5 or no ``loop``
    block in config.json), or what :func:`import_capture` refuses (``out`` exists, splits too short, …)."""
    run_dir = Path(run_dir)
    cfg = run_dir / "config.json"
    try:
        doc = json.loads(cfg.read_text(encoding="utf-8"))
        sig = doc["loop"]["signal"]
        fs, bw, nsc = float(sig["sample_rate_hz"]), float(sig["bw_main_hz"]), int(sig["n_sub_ch"])
    except KeyError as exc:
        key = exc.args[0] if exc.args else ""
        field = {"loop": "loop", "signal": "loop.signal"}.get(key, f"loop.signal.{key}")
        raise CaptureImportError(f"{cfg}: not a loop iteration's configuration (field '{field}' is missing; give "
                                 "the run of a loop iteration, as its loop.json lists them)") from exc
    except (OSError, ValueError, TypeError) as exc:
        raise CaptureImportError(f"{cfg}: not a loop iteration's configuration (field 'loop.signal': {exc})") from exc
    x_file, y_file = run_dir / "pa_input.h5", run_dir / "pa_output.h5"
    for f in (x_file, y_file):
        if not f.is_file():
            raise CaptureImportError(f"{f}: missing (the iteration did not finish its capture)")
    loop = doc.get("loop", {})
    nps = int(nperseg or loop.get("nperseg") or 2048)
    if nperseg is None:  # the loop's window, halved until one segment fits the shortest of val and test
        n = int(sig.get("samples") or 0)
        while nps > 64 and n and nps > int(n * min(split[1], split[2])) - 8:
            nps //= 2
    return import_capture(x_file, y_file, out, sample_rate_hz=fs, bandwidth_hz=bw, n_sub_ch=nsc, nperseg=nps,
                          split=tuple(split), description=f"loop {loop.get('id')} iteration {loop.get('iteration')} "
                                                          f"({loop.get('kind')}): PA input played, PA output captured")


def write_dataset(ds, out: str | Path) -> Path:
    """Write ``ds`` as a split-CSV folder at ``out`` (new or empty) through a temporary sibling folder renamed into
    place, then load it back (the folder must read). Raises OSError / DatasetError naming the folder."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out}: already exists; choose a new folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    write_folder(out, lambda tmp: save_split_csv(ds, tmp))
    load_dataset(out)
    return out
