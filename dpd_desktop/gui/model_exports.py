"""What a trained model gives away, from the window: Run DPD… (u = DPD(x) of a DPD run for a split of its dataset,
or of a waveform file the user picks: ``run-dpd``, export/dpd_export.py) and an MP/GMP run's coefficients (Run ▸
Export MP/GMP coefficients…, the ``coefficients`` command's core: export/coef_export.py). They run on the thread
pool; the output file is checked by the core (which refuses a file of a run folder or of the dataset, as on the
command line); the outcome goes to the banner.
"""
from __future__ import annotations

import os
import traceback
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QWidget

from ..metrics.ccdf import peak_papr_db
from ..runs.outputs import suggested_output
from ..runs.record import RunRecord
from .jobs import PoolJob
from .preload import wait_for_core
from .runs_jobs import start_job

#: Output formats of "Run DPD…" (filter → extension added when the name has none).
DPD_OUTPUT_FILTERS = {"CSV: I,Q,I_dpd,Q_dpd (*.csv)": ".csv", "HDF5: datasets x, u (*.h5 *.hdf5)": ".h5",
                      "MATLAB: x, u (*.mat)": ".mat"}

COEF_FILTERS = {"CSV: M-by-K matrix, a+bi cells (*.csv)": ".csv", "MAT: Coefficients, w, terms (*.mat)": ".mat"}
WAVEFORM_FILTER = "I/Q waveform (*.csv *.h5 *.hdf5 *.mat);;All files (*)"
POLY = ("mp", "gmp")


def dpd_papr_text(meta: dict) -> str:
    """"; peak PAPR x 9.9 dB → u 10.6 dB" from run_dpd's metadata (the DPD's expansion raises the PAPR a DAC and
    the PA must take), or "" when the numbers are not there."""
    px = peak_papr_db(meta.get("peak_abs_x"), meta.get("rms_abs_x"))
    pu = peak_papr_db(meta.get("peak_abs_u"), meta.get("rms_abs_u"))
    if px != px or pu != pu:  # NaN
        return ""
    return f"; peak PAPR x {px:.1f} dB → u {pu:.1f} dB"


def _export_coefficients(workspace, run_dir: str, out: str, overwrite: bool = False) -> dict:
    """Pool thread: wait for the PyTorch preload (never import it on two threads at once), then the core's export."""
    wait_for_core()
    from ..export.coef_export import export_coefficients  # PyTorch: the checkpoint's model

    return export_coefficients(workspace, run_dir, out, overwrite=overwrite)


class ModelExports:
    """The two actions and their dialogs (``window``: the MainWindow)."""

    def __init__(self, window, run_dpd: "RunDpd"):
        self.window = window
        self.run_dpd = run_dpd
        self.act_coefficients = QAction("Export MP/GMP coefficients…", window)
        self.act_coefficients.setToolTip("Write an MP/GMP run's coefficients as CSV or MAT (MATLAB comm.DPD "
                                         "M-by-K layout): the run shown, or a run folder you choose")
        self.act_coefficients.triggered.connect(lambda: self.export_coefficients())
        self.act_waveform = QAction("Run DPD on a waveform file…", window)
        self.act_waveform.setToolTip("Predistort an I/Q file of your own (CSV I,Q / HDF5 x / MAT x) with a DPD run: "
                                     "u = DPD(x), written as CSV, HDF5 or MAT with a .meta.json side-car")
        self.act_waveform.triggered.connect(lambda: self.run_dpd_on_file())
        self.last_result = None  # the last export's outcome (tests)

    # ------------------------------------------------------------------------------------------ coefficients
    def poly_run(self) -> str | None:
        """The run folder the window shows when it is an MP/GMP run with a checkpoint, else None."""
        run_dir = self.window.session.run_dir
        rec = RunRecord.read(run_dir) if run_dir else None
        if rec is None or str(rec.backbone) not in POLY or not rec.best_checkpoint.is_file():
            return None
        return str(run_dir)

    def export_coefficients(self, run_dir: str | os.PathLike | None = None,
                            out: str | os.PathLike | None = None) -> bool:
        """Export the coefficients of ``run_dir`` (default: the shown MP/GMP run, else one chosen in a dialog) to
        ``out`` (asked when not given). Returns False when nothing was started."""
        w = self.window
        run_dir = str(run_dir) if run_dir is not None else self.poly_run()
        if run_dir is None:
            root = getattr(w.workspace, "runs_dir", None) or Path.home()
            run_dir = QFileDialog.getExistingDirectory(w, "Choose an MP/GMP run folder", str(root))
            if not run_dir:
                return False
        overwrite = out is None  # the save dialog asked before replacing a file (runs/outputs.py: the one rule)
        if out is None:
            start = str(w._settings.value("paths/last_coef_dir", str(Path.home()), type=str))  # noqa: SLF001
            out, chosen = QFileDialog.getSaveFileName(w, "Export MP/GMP coefficients",
                                                      str(Path(start) / f"{Path(run_dir).name}_coefficients.csv"),
                                                      ";;".join(COEF_FILTERS))
            if not out:
                return False
            if Path(out).suffix.lower() not in (".csv", ".mat"):
                out += COEF_FILTERS.get(chosen, ".csv")
            w._settings.setValue("paths/last_coef_dir", str(Path(out).parent))  # noqa: SLF001
        w.statusBar().showMessage(f"Exporting the coefficients of {Path(run_dir).name}…")
        start_job(w, "coefficients", _export_coefficients, w.workspace, run_dir, str(out), overwrite,
                  done=self._coefficients_done, failed=self._failed("The coefficients were not written"))
        return True

    def _coefficients_done(self, info: dict) -> None:
        self.last_result = info
        files = info.get("files") or []
        m, k = (info.get("shape") or ["?", "?"])[:2]
        self.window.banner.show_message(
            "success", f"Wrote {info.get('n_coefficients')} coefficients of {info.get('run_id')} ({m}×{k}, "
            f"{info.get('layout')}) to {', '.join(files)}")
        self.window.statusBar().showMessage(f"Coefficients written to {files[0] if files else ''}", 8000)

    def _failed(self, what: str):
        def failed(exc, tb) -> None:
            self.last_result = exc
            msg = str(exc) if isinstance(exc, (ValueError, FileNotFoundError)) else f"{type(exc).__name__}: {exc}"
            self.window.banner.show_message("error", f"{what}: {msg}", detail=tb)
            self.window.statusBar().showMessage(what, 8000)
        return failed

    # ------------------------------------------------------------------------------------------ Run DPD on a file
    def run_dpd_on_file(self, input_file: str | os.PathLike | None = None, out: str | os.PathLike | None = None,
                        run_dir: str | os.PathLike | None = None) -> bool:
        """u = DPD(x) of the waveform ``input_file`` (asked when not given) with the DPD run ``run_dir`` (default:
        the ended DPD run, else one chosen in a dialog), written to ``out`` (asked). :meth:`RunDpd.run` does the
        work. Returns False when nothing was started."""
        w = self.window
        if w.session.snapshot.exporting:
            return False
        run_dir = str(run_dir) if run_dir is not None else self.run_dpd.finished_dpd_run()
        if run_dir is None:
            root = getattr(w.workspace, "runs_dir", None) or Path.home()
            run_dir = QFileDialog.getExistingDirectory(w, "Choose a DPD run folder", str(root))
            if not run_dir:
                return False
        if input_file is None:
            start = str(w._settings.value("paths/last_waveform_dir", str(Path.home()), type=str))  # noqa: SLF001
            input_file, _ = QFileDialog.getOpenFileName(w, "Run DPD: the waveform x to predistort", start,
                                                        WAVEFORM_FILTER)
            if not input_file:
                return False
            w._settings.setValue("paths/last_waveform_dir", str(Path(input_file).parent))  # noqa: SLF001
        asked = out is None  # the save dialog asks before replacing a file
        if out is None:
            src = Path(input_file)
            start = str(w._settings.value("paths/last_dpd_dir", str(src.parent), type=str))  # noqa: SLF001
            out, chosen = QFileDialog.getSaveFileName(w, f"Run DPD: write u = DPD(x) of {src.name}",
                                                      str(Path(start) / f"{src.stem}_u_{Path(run_dir).name}.csv"),
                                                      ";;".join(DPD_OUTPUT_FILTERS))
            if not out:
                return False
            if Path(out).suffix.lower() not in (".csv", ".h5", ".hdf5", ".mat"):
                out += DPD_OUTPUT_FILTERS.get(chosen, ".csv")
            w._settings.setValue("paths/last_dpd_dir", str(Path(out).parent))  # noqa: SLF001
        return self.run_dpd.run(out=out, run_dir=run_dir, input_file=str(input_file), overwrite=asked)


class _DpdExportSignals(QObject):
    done = Signal(object)  # the metadata dict of run_dpd
    failed = Signal(object, str)  # exception, traceback text


class DpdExportJob(PoolJob):
    """Runs :func:`dpd_desktop.export.dpd_export.run_dpd` (u = DPD(x) of a DPD run, written to ``out``).

    ``dataset`` (the window's loaded dataset) is passed on only when it is the run's dataset (same fingerprint);
    otherwise run_dpd reloads the dataset recorded in the run's config.json. The DPD runs on the run's own device
    type when it is available (so that u is bit for bit the scored one), else on the CPU. A stop requested before
    the job begins skips it; run_dpd itself has no check point.
    """

    name = "Run DPD"

    def __init__(self, workspace, run_dir: str | os.PathLike, out: str | os.PathLike, split: str = "test",
                 dataset=None, input_file: str | os.PathLike | None = None, overwrite: bool = False):
        super().__init__()
        self.workspace = workspace
        self.overwrite = overwrite  # the save dialog asked before replacing an existing file
        self.run_dir = str(run_dir)
        self.out = str(out)
        self.split = split
        self.dataset = dataset
        self.input_file = str(input_file) if input_file is not None else None  # a waveform file instead of a split
        self.signals = _DpdExportSignals()

    @staticmethod
    def _device(recorded: dict) -> str:
        """The run's own device type when this machine has it (so that u is bit for bit the scored one), else cpu."""
        import torch  # imported by then (below); the window's import path stays free of torch (gui/preload.py)

        dev = str(recorded.get("device", "cpu"))
        return "cuda" if dev.startswith("cuda") and torch.cuda.is_available() else "cpu"

    def work(self) -> None:
        if self.stop_requested:
            return
        try:
            wait_for_core()  # never import torch on two threads at once
            from ..export.dpd_export import run_dpd  # PyTorch: kept off the window's import path

            record = RunRecord.open(self.run_dir)
            ds = self.dataset
            want = record.dataset.fingerprint
            if ds is not None and not (want and callable(getattr(ds, "fingerprint", None))
                                       and ds.fingerprint() == want):
                ds = None
            meta = run_dpd(self.workspace, self.run_dir, out=self.out, split=self.split,
                           device=self._device(record.device), dataset=ds, input_file=self.input_file,
                           overwrite=self.overwrite)
        except Exception as exc:  # noqa: BLE001 - shown to the user in plain words
            self.signals.failed.emit(exc, traceback.format_exc())
            return
        self.signals.done.emit(meta)


class RunDpd(QObject):
    """Run DPD…: u = DPD(x) of a DPD run written to a file, in the thread pool; ``ended("succeeded" / "failed")``.

    Args:
        session: the Session (the ended run, ``exporting``, its output-power caveat). jobs: the JobRegistry.
        workspace: the run workspace. settings: QSettings (the dialog's last folder). banner: the OutcomeBanner.
        dataset: ``dataset()`` the window's loaded dataset. status: ``status(text, ms)``. parent: the dialogs'.
    """

    ended = Signal(str)

    def __init__(self, session, jobs, workspace, settings, banner, dataset: Callable,
                 status: Callable[[str, int], None], parent: QWidget):
        super().__init__(parent)
        self.session, self.jobs, self.workspace, self._settings = session, jobs, workspace, settings
        self.banner, self._dataset, self._status, self._parent = banner, dataset, status, parent
        self._run_dir: str | None = None  # the run of the export in flight

    def finished_dpd_run(self) -> str | None:
        """The run folder of the current run when it ended (succeeded, or cancelled with a checkpoint) and is a DPD
        run with a ``best.pt``; None otherwise."""
        s = self.session
        return s.run_dir if s.state in ("succeeded", "cancelled") and s.snapshot.dpd_run_ready else None

    def ask_saved_run(self) -> None:
        root = getattr(self.workspace, "runs_dir", None) or getattr(self.workspace, "root", None) or Path.home()
        folder = QFileDialog.getExistingDirectory(self._parent, "Choose a DPD run folder", str(root))
        if folder:
            self.run(run_dir=folder)

    def run(self, out: str | os.PathLike | None = None, run_dir: str | os.PathLike | None = None,
            split: str = "test", input_file: str | os.PathLike | None = None, overwrite: bool | None = None) -> bool:
        """Write u = DPD(x) of a DPD run (default: the ended one) for ``split`` (or the waveform ``input_file``) to
        ``out`` (asked for, CSV / HDF5 / MAT, unless given). Returns False when nothing was started."""
        if self.session.snapshot.exporting:
            return False
        run_dir = str(run_dir) if run_dir is not None else self.finished_dpd_run()
        if run_dir is None:
            self.banner.show_message("error", "Run DPD needs a finished DPD run: train one (Step: DPD), or choose a "
                                     "saved DPD run folder with Run → Run DPD of a saved DPD run….")
            return False
        if overwrite is None:
            overwrite = out is None  # the save dialog asks before replacing a file
        if out is None:
            # never the run folder itself (runs/outputs.py: a run folder holds its run's record only)
            suggested = str(suggested_output(f"{Path(run_dir).name}_u_{split}.csv",
                                             self._settings.value("paths/last_dpd_dir", "", type=str),
                                             workspace=self.workspace))
            out, chosen = QFileDialog.getSaveFileName(self._parent, f"Run DPD: write u = DPD(x) of the {split} split",
                                                      suggested, ";;".join(DPD_OUTPUT_FILTERS))
            if not out:
                return False
            if Path(out).suffix.lower() not in (".csv", ".h5", ".hdf5", ".mat"):
                out += DPD_OUTPUT_FILTERS.get(chosen, ".csv")
            self._settings.setValue("paths/last_dpd_dir", str(Path(out).parent))
        self._run_dir = run_dir
        job = DpdExportJob(self.workspace, run_dir, str(out), split=split, dataset=self._dataset(),
                           input_file=input_file, overwrite=overwrite)
        job.signals.done.connect(lambda meta, job=job: self._on_done(meta, job))
        job.signals.failed.connect(lambda exc, tb, job=job: self._on_failed(exc, tb, job))
        self.jobs.add(job)
        what = f"the {split} split" if input_file is None else str(input_file)
        self.banner.show_message("info", self._with_caveat(
            f"Running the DPD of {Path(run_dir).name} on {what} → {out} …"))
        self._status("Run DPD: computing u = DPD(x)…", 0)
        self.session.update(exporting=True)
        job.submit()
        return True

    def _with_caveat(self, text: str) -> str:
        """``text`` and, when Run DPD works on the shown run, that run's output-power caveat (a Run DPD banner
        replaces the one that carried it)."""
        caveat = self.session.power_caveat
        if caveat and self._run_dir == self.session.run_dir:
            return f"{text}\n{caveat}"
        return text

    def _on_done(self, meta, job=None) -> None:
        self.jobs.discard(job)
        what = f"the {meta.get('split')} split" if meta.get("split") else f"{meta.get('input_file')}"
        text = (f"Wrote u = DPD(x) of {what} ({meta.get('samples', 0):,} samples; peak |x| "
                f"{meta.get('peak_abs_x', float('nan')):.4g}, peak |u| {meta.get('peak_abs_u', float('nan')):.4g}"
                f"{dpd_papr_text(meta)}) to {meta.get('file')}\nMetadata: {meta.get('file')}.meta.json")
        if meta.get("nonfinite_u_samples"):
            text += f"\n{meta['nonfinite_u_samples']} samples of u are not finite."
        shown = self._with_caveat(text)
        self.banner.show_message("warning" if shown != text or meta.get("nonfinite_u_samples") else "success", shown)
        self._status(f"Run DPD: wrote {meta.get('file')}", 8000)
        self.session.update(exporting=False)
        self.ended.emit("succeeded")

    def _on_failed(self, exc, tb: str, job=None) -> None:
        self.jobs.discard(job)
        msg = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
        self.banner.show_message("error", self._with_caveat(f"Run DPD failed: {msg}"), detail=tb)
        self._status("Run DPD failed", 8000)
        self.session.update(exporting=False)
        self.ended.emit("failed")


def install_model_exports(window, run_dpd: RunDpd) -> ModelExports:
    """Add Run ▸ Export MP/GMP coefficients… and Run ▸ Run DPD on a waveform file… to ``window``."""
    exports = ModelExports(window, run_dpd)
    for action in window.menuBar().actions():
        if action.text().replace("&", "") == "Run" and action.menu() is not None:
            menu = action.menu()
            anchor = getattr(window, "act_run_dpd_saved", None)
            actions = menu.actions()
            after = actions[actions.index(anchor) + 1] if anchor in actions and actions.index(anchor) + 1 < len(
                actions) else None
            for a in (exports.act_waveform, exports.act_coefficients):
                if after is not None:
                    menu.insertAction(after, a)
                else:
                    menu.addAction(a)
    window.model_exports = exports
    return exports
