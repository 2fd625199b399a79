"""What a trained model gives away, from the window: an MP/GMP run's coefficients (Run ▸ Export MP/GMP
coefficients…, the ``coefficients`` command's core: export/coef_export.py) and u = DPD(x) of a waveform file the user
picks (Run ▸ Run DPD on a waveform file…, ``run-dpd --input``: export/dpd_export.py). Both run on the thread pool;
the output file is checked by the core (which refuses a file of a run folder or of the dataset, as on the command
line); the outcome goes to the banner.
"""
from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog

from ..metrics.ccdf import peak_papr_db
from ..runs.record import RunRecord
from .preload import wait_for_core
from .runs_jobs import start_job

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

    def __init__(self, window):
        self.window = window
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
        the ended DPD run, else one chosen in a dialog), written to ``out`` (asked). The window's Run DPD job
        (:meth:`RunControl.run_dpd_export`) does the work. Returns False when nothing was started."""
        w = self.window
        if w.session.snapshot.exporting:
            return False
        run_dir = str(run_dir) if run_dir is not None else w.finished_dpd_run()
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
            from .run_control import DPD_OUTPUT_FILTERS  # here: run_control imports this module

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
        return w.run_dpd_export(out=out, run_dir=run_dir, input_file=str(input_file), overwrite=asked)


def install_model_exports(window) -> ModelExports:
    """Add Run ▸ Export MP/GMP coefficients… and Run ▸ Run DPD on a waveform file… to ``window``."""
    exports = ModelExports(window)
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
