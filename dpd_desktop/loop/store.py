"""The loop's record: ``<workspace>/loops/<loop-id>/loop.json`` (writer :class:`LoopStore`, reader
:func:`read_loop`), and each iteration as a run folder (runs/writer.py ``RunWriter``) plus its own files.

loop.json (``format`` :data:`FORMAT`), written whole and atomically (runs/artifacts.py)::

    {"format", "id", "created", "updated", "state": a runs/states.py word, "message", "owner" (runs/owner.py),
     "config": LoopConfig.to_dict(), "bench", "signal", "identities", "target_output_dbm", "target_gain_db",
     "iterations": [IterationEnded.row()], "best": the row of the lowest ACLR, "datasets": [folders written],
     "fit": the DPD fit's run id and family (or null), "rf_off": bool}

A loop recorded ``running`` whose process is gone reads ``interrupted``.

An iteration's run folder (the runs browser lists it; ``config.json``'s ``experiment.extra["loop"]`` =
``{"id", "iteration"}`` groups it with its loop): config.json (step ``dpd``; backbone ``ilc``, the ILA's ``mp``/
``gmp`` or the fitted family; the ``loop`` block: bench, levels, alignment), status.json (``test_metrics`` the
iteration's metrics), an empty history.csv, results.h5 (``test`` split: x, target = x, prediction = the
gain-normalised output, dpd_output = the waveform played, all in units of the waveform's peak), log.txt, and:

* ``pa_input.h5``: ``x``, the waveform played (complex, √mW at the generator), attributes ``sample_rate_hz``…;
* ``pa_output.h5``: ``y``, the capture averaged over its periods (complex √mW), ``raw`` every captured sample,
  ``aligned`` y after the delay — the two files a dataset is made of (loop/dataset.py);
* ``waveform.wv``: the R&S waveform file of the waveform played (instruments/rs_wv.py);
* ``plots/psd.svg``, ``plots/amam.svg``.

Every file is written atomically, and status.json last: a folder never says more than it holds.
"""
from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from .. import atomic
from ..runs.owner import owner_gone, process_identity
from ..runs.states import LIVE_STATES
from ..runs.svg_plot import Series, line_chart
from ..runs.writer import RunWriter
from ..runs import events as E

__all__ = ["FORMAT", "LOOPS_DIR", "LOOP_FILE", "LoopStore", "LoopInfo", "read_loop", "list_loops",
           "IterationRecord", "h5_bytes", "LoopRecordError"]

FORMAT = "dpd-desktop-loop-1"
LOOPS_DIR = "loops"
LOOP_FILE = "loop.json"


class LoopRecordError(ValueError):
    """A loop folder that cannot be read; names loop.json and the field."""


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


class LoopStore:
    """The one writer of a loop folder's loop.json."""

    def __init__(self, folder: Path, doc: dict[str, Any]):
        self.folder, self.doc = Path(folder), doc

    @property
    def loop_id(self) -> str:
        return self.doc["id"]

    @classmethod
    def create(cls, workspace, config: Mapping[str, Any], label: str = "loop") -> "LoopStore":
        root = Path(workspace.root) / LOOPS_DIR
        root.mkdir(parents=True, exist_ok=True)
        base = time.strftime("%Y-%m-%d-%H%M%S") + "-" + label
        loop_id, n = base, 1
        while True:
            try:
                (root / loop_id).mkdir()
                break
            except FileExistsError:
                n += 1
                loop_id = f"{base}-{n}"
        doc = {"format": FORMAT, "id": loop_id, "created": _now(), "updated": _now(), "state": "running",
               "message": "", "owner": process_identity(), "config": dict(config), "bench": {}, "signal": {},
               "identities": {}, "target_output_dbm": None, "target_gain_db": None, "iterations": [], "best": None,
               "datasets": [], "fit": None, "rf_off": True}
        store = cls(root / loop_id, doc)
        store.write()
        return store

    def write(self) -> None:
        self.doc["updated"] = _now()
        atomic.atomic_write_json(self.folder / LOOP_FILE, self.doc)

    def update(self, **fields) -> None:
        self.doc.update(fields)
        self.write()

    def add_iteration(self, row: Mapping[str, Any]) -> None:
        self.doc["iterations"].append(dict(row))
        rows = [r for r in self.doc["iterations"] if isinstance(r.get("ACLR_AVG"), (int, float))]
        self.doc["best"] = min(rows, key=lambda r: r["ACLR_AVG"]) if rows else None
        self.write()

    def finish(self, state: str, message: str, rf_off: bool) -> None:
        self.doc["owner"] = None
        self.update(state=state, message=message, rf_off=bool(rf_off))


@dataclass(frozen=True)
class LoopInfo:
    """A loop folder read back: ``doc`` (loop.json) and the state read (owner gone → interrupted)."""

    folder: Path
    doc: dict[str, Any]
    state: str

    @property
    def id(self) -> str:
        return str(self.doc.get("id", self.folder.name))

    @property
    def iterations(self) -> list[dict[str, Any]]:
        return list(self.doc.get("iterations") or [])


def read_loop(folder: str | Path) -> LoopInfo:
    """Read ``folder/loop.json``. Raises LoopRecordError naming the file and what is wrong."""
    p = Path(folder) / LOOP_FILE
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise LoopRecordError(f"{p}: cannot read ({exc})") from exc
    except ValueError as exc:
        raise LoopRecordError(f"{p}: not valid JSON ({exc})") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise LoopRecordError(f"{p}: field 'format' is not {FORMAT!r}: not a loop record")
    if not isinstance(doc.get("iterations"), list):
        raise LoopRecordError(f"{p}: field 'iterations' is missing or not a list")
    state = doc.get("state", "unknown")
    owner = doc.get("owner")
    if state in LIVE_STATES and isinstance(owner, dict) and owner_gone(owner):
        state = "interrupted"
    return LoopInfo(Path(folder), doc, str(state))


def list_loops(workspace) -> list[LoopInfo]:
    """The workspace's loops, newest first; unreadable folders are left out."""
    root = Path(workspace.root) / LOOPS_DIR
    out = []
    if root.is_dir():
        for d in sorted(root.iterdir(), reverse=True):
            try:
                out.append(read_loop(d))
            except LoopRecordError:
                continue
    return out


def h5_bytes(datasets: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> bytes:
    """An HDF5 file's bytes, built in memory (h5py on io.BytesIO, like runs/writer.py ``results_image``)."""
    import h5py  # 0.07 s import: see runs/writer.py

    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        for k, v in attrs.items():
            f.attrs[k] = v
        for k, v in datasets.items():
            f.create_dataset(k, data=v)
    return buf.getvalue()


class IterationRecord:
    """One iteration's run folder, written through :class:`RunWriter` (the one writer) fed the trainer's record
    events, plus the iteration's own files (module docstring)."""

    def __init__(self, workspace, loop_id: str, index: int, kind: str):
        # "<date>-<time>-loop-<loop's time>-itNN-<kind>": the loop id's date is the run id's own
        short = loop_id.split("-")[3] if loop_id.count("-") >= 3 else loop_id
        self.run_id, self.run_dir = workspace.new_run_dir(f"loop-{short}-it{index:02d}-{kind}")
        self.writer = RunWriter()
        self.index, self.kind = index, kind
        self.t0 = time.monotonic()
        self.ended = False

    def start(self, experiment: Mapping[str, Any], setup: Mapping[str, Any]) -> None:
        w = self.writer
        w(E.RunPrepared(run_id=self.run_id, run_dir=str(self.run_dir), step="dpd", selection_metric="TEST_ACLR_AVG",
                        config=dict(experiment)))
        w(E.RunStarted(run_id=self.run_id, run_dir=str(self.run_dir), step="dpd", config=dict(experiment),
                       device="instruments", device_name=str(setup.get("device", {}).get("device_name", "")),
                       fast_path="off: instrument loop", batched_loader="n/a", n_params=0, n_train_frames=0,
                       batches_per_epoch=0, epochs=0, dataset_summary={}, setup=dict(setup)))

    def log(self, text: str) -> None:
        self.writer(E.LogLine(text=text, level=20, clock=time.strftime("%H:%M:%S")))

    def write_files(self, files: Mapping[str, bytes]) -> None:
        for name, data in files.items():
            (self.run_dir / name).parent.mkdir(parents=True, exist_ok=True)
            atomic.atomic_write_bytes(self.run_dir / name, data)

    def finish(self, split: E.SplitResults, attrs: Mapping[str, Any], extra: Mapping[str, Any]) -> None:
        self.writer(E.ResultsReady(attrs=dict(attrs), splits={"test": split}))
        self.writer(E.RunFinished(run_id=self.run_id, run_dir=str(self.run_dir), best_epoch=None, val_metrics={},
                                  test_metrics=dict(split.metrics), wall_s=time.monotonic() - self.t0,
                                  extra=dict(extra)))
        self.ended = True

    def fail(self, message: str, cancelled: bool = False) -> None:
        if self.ended:
            return
        self.ended = True
        if cancelled:
            self.writer(E.RunCancelled(run_id=self.run_id, run_dir=str(self.run_dir), epochs_completed=0,
                                       best_epoch=None, reason=message))
        else:
            self.writer(E.RunFailed(run_id=self.run_id, run_dir=str(self.run_dir), message=message))


def plots_svg(fmhz: np.ndarray, psds: Mapping[str, np.ndarray], amam_x: np.ndarray,
              amam: Mapping[str, np.ndarray], title: str) -> dict[str, bytes]:
    """The iteration's plots: ``plots/psd.svg`` and ``plots/amam.svg`` (runs/svg_plot.py)."""
    psd = line_chart([Series(k, fmhz, v) for k, v in psds.items()], f"PSD — {title}", "frequency [MHz]",
                     "PSD [dB/Hz]")
    am = line_chart([Series(k, amam_x, v, kind="points") for k, v in amam.items()], f"AM/AM — {title}",
                    "|x| [rel. peak]", "|out| [rel. peak]")
    head = '<?xml version="1.0" encoding="UTF-8"?>\n'
    return {"plots/psd.svg": (head + psd).encode("utf-8"), "plots/amam.svg": (head + am).encode("utf-8")}
