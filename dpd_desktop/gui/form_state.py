"""The form's state in the window: the config the form and the toolbar's step, PA run and preview tick describe,
the run-time estimate beside Start (:mod:`.estimate`), suggested epochs/stride when a dataset loads, and the form,
step and dataset saved in QSettings at close and restored at the next start (values coerced back to their types;
odd ones ignored).
"""
from __future__ import annotations

import dataclasses
import math
import os
import sys
from typing import Any, Callable

from PySide6.QtCore import Qt

from ..config import ExperimentConfig, default_hidden_size
from .estimate import estimate_run, suggest_cpu_defaults
from .run_control import validate_config
from .session import format_duration
from .widgets.poly_form import parse_int_list

#: Form fields saved in QSettings under ``form/<name>``, with their types.
SAVED_FIELDS: dict[str, type] = {"backbone": str, "hidden_size": int, "num_layers": int, "epochs": int,
                                 "batch_size": int, "lr": float, "frame_length": int, "stride": int, "seed": int,
                                 "device": str, "kernel": str, "preview_every": int}
#: The MP/GMP fields (gui/widgets/poly_form.py), saved from their widgets whichever backbone is chosen: the grids
#: as their text ("3,5,7"), the cross order as its spin value (its minimum, 1, means "auto (= K)").
POLY_SAVED_FIELDS: dict[str, type] = {"fit": str, "poly_order": int, "memory_depth": int, "poly_odd_only": bool,
                                      "cross_order": int, "cross_lag": int, "cross_lead": int, "grid_k": str,
                                      "grid_m": str}


def coerce(value: Any, kind: type) -> Any:
    """``value`` (as QSettings returns it: often a string) as ``kind``; None when it does not convert cleanly
    (``"12.5"`` is no int, ``"nan"`` no float, a list no str)."""
    if value is None or isinstance(value, (list, tuple, dict, bytes, bytearray)):
        return None
    try:
        if kind is bool:
            if isinstance(value, str):
                return {"true": True, "false": False, "1": True, "0": False}.get(value.strip().lower())
            return bool(value) if isinstance(value, (int, float)) else None
        if kind is int:
            if isinstance(value, bool):
                return None
            f = float(value)
            return int(f) if math.isfinite(f) and f == int(f) else None
        if kind is float:
            f = float(value)
            return f if math.isfinite(f) else None
        return str(value) if isinstance(value, (str, int, float)) else None
    except (TypeError, ValueError, OverflowError):
        return None


def cuda_available() -> bool:
    """Whether torch sees a CUDA device, asked only once torch is imported (it loads behind the first paint)."""
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - a broken CUDA set-up: the run reports it; the estimate assumes the CPU
        return False


def on_cuda(device: str) -> bool:
    """Whether a run of ``device`` ("auto", "cpu", "cuda", "cuda:N") trains on CUDA."""
    return device.startswith("cuda") or (device == "auto" and cuda_available())


def duration_range(low: float, high: float) -> str:
    """"5 min", or "5–9 min" / "40 s – 2 min" when the two ends read differently (:func:`format_duration`)."""
    a, b = format_duration(low), format_duration(high if math.isfinite(high) else low)
    if a == b:
        return a
    ua, ub = a.split(" ", 1)[-1], b.split(" ", 1)[-1]
    if ua == ub and a.count(" ") == 1:
        return f"{a.split(' ')[0]}–{b}"
    return f"{a} – {b}"


class FormState:
    """The form's config, estimate, suggested defaults and saved values.

    Args:
        form: the ConfigForm. bar: the window's Actions (``step_pa``, ``step_dpd``, ``pa_run_combo``,
        ``preview_check``, ``estimate_label``). data: the DatasetController (``dataset``, ``ref``). session: the
        Session (``step``, ``pa_run_available``). settings: QSettings. workspace: lists the PA runs (or None).
        status: ``status(text, ms)``.
    """

    def __init__(self, form, bar, data, session, settings, workspace, status: Callable[[str, int], None]):
        self.form, self.bar, self.data, self.session = form, bar, data, session
        self._settings, self.workspace, self._status = settings, workspace, status
        self._form_chosen = False
        self._suggested: tuple[int, int] | None = None  # (epochs, stride) last suggested for a dataset

    # ------------------------------------------------------------------------------------------------ config
    def config(self, validate: bool = True) -> ExperimentConfig:
        """The ExperimentConfig the form describes. Raises :class:`ConfigError` (shown next to the form)."""
        step = "dpd" if self.bar.step_dpd.isChecked() else "pa"
        overrides: dict[str, Any] = {
            "step": step,
            "preview_every": self.form.preview_period if self.bar.preview_check.isChecked() else None,
        }
        if step == "dpd":
            overrides["pa_run"] = self.bar.pa_run_combo.currentData()
        if self.data.ref:
            overrides["dataset"] = self.data.ref
        cfg = self.form.config(**overrides)
        if validate:
            validate_config(cfg)
        return cfg

    def set_config(self, cfg: ExperimentConfig) -> None:
        """Fill the toolbar and forms from ``cfg``."""
        # The step first: switching it may put that step's default hidden size in the form, which cfg then overrides.
        (self.bar.step_dpd if cfg.step == "dpd" else self.bar.step_pa).setChecked(True)
        self.form.set_config(cfg)
        combo = self.bar.pa_run_combo
        if cfg.pa_run:
            i = combo.findData(cfg.pa_run)
            if i < 0:
                if combo.count() == 1 and combo.itemData(0) is None:
                    combo.clear()
                combo.addItem(str(cfg.pa_run), cfg.pa_run)
                i = combo.count() - 1
            combo.setCurrentIndex(i)
        self.bar.preview_check.setChecked(cfg.preview_every is not None)
        self.sync_pa_runs()
        self.mark_chosen()  # a dataset load keeps these epochs and stride

    def on_step_toggled(self, dpd: bool) -> None:
        new, old = ("dpd", "pa") if dpd else ("pa", "dpd")
        # A hidden size the user has not edited (still the other step's default) becomes this step's default
        # (config.default_hidden_size: the reference command line's PA 23, DPD 15), as on the command line.
        if self.form.hidden_size.value() == default_hidden_size(old):
            self.form.hidden_size.setValue(default_hidden_size(new))
        if dpd:
            self.refresh_pa_runs()
        self.session.update(step=new)
        self.update_estimate()

    def sync_pa_runs(self) -> None:
        combo = self.bar.pa_run_combo
        self.session.update(pa_run_available=combo.count() > 0 and combo.itemData(0) is not None)

    def refresh_pa_runs(self) -> None:
        """Fill the DPD combo with PA runs from the workspace (newest first as the workspace lists them)."""
        combo = self.bar.pa_run_combo
        current = combo.currentData()
        combo.clear()
        runs = []
        if self.workspace is not None:
            try:
                runs = list(self.workspace.list_runs(step="pa"))
            except Exception as exc:  # noqa: BLE001
                self._status(f"Could not list PA runs: {exc}", 8000)
        # Usable: succeeded runs, and cancelled ones that kept a best checkpoint.
        runs = [r for r in runs if getattr(r, "status", None) == "succeeded" or
                (getattr(r, "status", None) == "cancelled" and getattr(r, "best_epoch", None) is not None)]
        for rec in runs:
            best = getattr(rec, "best_epoch", None)
            size = "" if str(rec.backbone) in ("mp", "gmp") else f"-{rec.hidden_size}"  # MP/GMP: orders, no H
            label = f"{rec.run_id} · {str(rec.backbone).upper()}{size}"
            if getattr(rec, "status", None):
                label += f" · {rec.status}"
            if best is not None:
                label += f" · ep {best}"
            combo.addItem(label, rec.run_id)
            combo.setItemData(combo.count() - 1, str(rec.run_dir), Qt.ItemDataRole.ToolTipRole)
        if not runs:
            combo.addItem("(no PA run yet — train a PA first)", None)
        i = combo.findData(current) if current is not None else -1
        combo.setCurrentIndex(i if i >= 0 else 0)
        self.sync_pa_runs()

    # ------------------------------------------------------------------------------------------------ estimate
    def update_estimate(self, *_) -> None:
        """Recompute the estimate beside Start from the dataset and the form."""
        label = self.bar.estimate_label
        ds = self.data.dataset
        if ds is None:
            label.setText("≈ —")
            label.setToolTip("Estimated run time: load a dataset first (the estimate needs its size)")
            return
        cfg = self.form.config(step="dpd" if self.bar.step_dpd.isChecked() else "pa")
        n_train = len(ds.train.x)
        if cfg.max_train_samples:
            n_train = min(n_train, int(cfg.max_train_samples))
        n_eval = len(ds.val.x) + len(ds.test.x)
        cuda = on_cuda(str(cfg.device))
        est = estimate_run(n_train, n_eval, backbone=cfg.backbone, hidden_size=cfg.hidden_size, epochs=cfg.epochs,
                           batch_size=cfg.batch_size, frame_length=cfg.frame_length, stride=cfg.stride,
                           step=cfg.step, cuda=cuda)
        if est is None:
            fits = cfg.frame_length <= n_train
            label.setText("≈ seconds" if fits else "⚠ frame > split")
            label.setToolTip("MP/GMP are fitted by least squares, no epochs" if fits else
                             f"frame length {cfg.frame_length} > {n_train:,} training samples")
            return
        label.setText(f"≈ {duration_range(est.seconds, est.seconds_busy)}")
        if cuda:
            pace = f"Estimated run time on CUDA: {format_duration(est.epoch_s)} per epoch × {cfg.epochs}"
        else:
            pace = (f"Estimated run time on the CPU: {format_duration(est.seconds)} on an idle machine, "
                    f"{format_duration(est.seconds_busy)} while another program keeps a core busy; "
                    f"{duration_range(est.epoch_s, est.epoch_s_busy)} per epoch × {cfg.epochs}")
        label.setToolTip(f"{pace} ({est.frames:,} frames per epoch).\nModel: {est.basis}.\nA rough guide: the "
                         "progress read-out gives the measured pace once running.")

    # ------------------------------------------------------------------------------------------------ defaults
    def suggest_defaults(self, dataset) -> None:
        """Epochs and stride for the loaded dataset on the CPU (:func:`~.estimate.suggest_cpu_defaults`), applied
        only to fields the user has not chosen: still the config's defaults (unless they came from the user, see
        :meth:`mark_chosen`) or the window's own last suggestion."""
        if on_cuda(str(self.form.device.currentData())):
            return
        base = ExperimentConfig()
        untouched = set() if self._form_chosen else {(base.epochs, base.stride)}
        if self._suggested is not None:
            untouched.add(self._suggested)
        current = (self.form.epochs.value(), self.form.stride.value())
        if current not in untouched:
            return
        s = suggest_cpu_defaults(len(dataset.train.x), self.form.frame_length.value())
        self._suggested = (s["epochs"], s["stride"])
        self.form.epochs.setValue(s["epochs"])
        self.form.stride.setValue(s["stride"])
        self._status(f"Suggested for {getattr(dataset, 'name', 'this dataset')} on the CPU: "
                     f"{s['epochs']} epochs, stride {s['stride']}", 8000)

    def mark_chosen(self) -> None:
        """The form's values are the user's (restored from the last session, or a run's settings): a dataset load
        no longer replaces epochs and stride with a suggestion, even where they equal the config's defaults."""
        self._form_chosen = True
        self._suggested = None

    # ------------------------------------------------------------------------------------------------ saved form
    def save(self) -> None:
        """Write the form's values, the step, the preview tick and the dataset to QSettings."""
        st = self._settings
        cfg = self.form.config()
        for name in SAVED_FIELDS:
            value = self.form.preview_period if name == "preview_every" else getattr(cfg, name)
            st.setValue(f"form/{name}", value)
        poly = self.form.poly
        for name, w in poly.fields.items():
            value = (w.currentData() if name == "fit" else w.isChecked() if name == "poly_odd_only" else
                     w.text() if name in ("grid_k", "grid_m") else w.value())
            st.setValue(f"form/{name}", value)
        st.setValue("form/step", "dpd" if self.bar.step_dpd.isChecked() else "pa")
        st.setValue("form/preview", bool(self.bar.preview_check.isChecked()))
        if self.data.ref:
            st.setValue("form/dataset", str(self.data.ref))

    def saved_form(self) -> tuple[ExperimentConfig, dict[str, Any]]:
        """The config saved at the last close (defaults for values missing, not of their type or out of their field's
        range; MP/GMP's too) and the other saved values (``step``, ``preview``, ``dataset``; missing when absent or
        unusable)."""
        st = self._settings
        values: dict[str, Any] = {}
        for name, kind in {**SAVED_FIELDS, **POLY_SAVED_FIELDS}.items():
            v = coerce(st.value(f"form/{name}"), kind)
            if v is not None:
                values[name] = v
        for name in ("grid_k", "grid_m"):  # text → list of integers; anything else is dropped
            if name in values:
                grid = parse_int_list(values.pop(name))
                if isinstance(grid, list) and all(1 <= k <= self.form.poly.fields[
                        "poly_order" if name == "grid_k" else "memory_depth"].maximum() for k in grid):
                    values[name] = grid
        if values.get("cross_order") == self.form.poly.cross_order.minimum():
            values["cross_order"] = None  # "auto (= K)"
        other: dict[str, Any] = {}
        step = coerce(st.value("form/step"), str)
        if step in ("pa", "dpd"):
            other["step"] = step
        preview = coerce(st.value("form/preview"), bool)
        if preview is not None:
            other["preview"] = preview
        ds = coerce(st.value("form/dataset"), str)
        if ds and (ds == "demo" or os.path.exists(ds)):
            other["dataset"] = ds
        base = ExperimentConfig()
        good = {name: v for name, v in values.items() if self._fits_form(name, v)}
        preview_every = good.pop("preview_every", None)
        cfg = dataclasses.replace(base, step=other.get("step", base.step), **good)
        if preview_every is not None:
            other["preview_every"] = preview_every
        return cfg, other

    def _fits_form(self, name: str, value: Any) -> bool:
        """Whether a saved value is one the form can show as it is (in its field's range or list); checked by hand,
        not with ``ExperimentConfig.validate`` (that imports the model registry, i.e. torch, at start-up)."""
        if name in ("grid_k", "grid_m", "poly_odd_only") or (name == "cross_order" and value is None):
            return True  # checked when read
        w = self.form._fields[name] if name in self.form._fields else self.form.poly.fields[name]
        if name in ("backbone", "device", "kernel", "fit"):
            return w.findData(value) >= 0
        if name == "lr":
            return w.minimum() <= value <= w.maximum()
        return w.minimum() <= value <= w.maximum() and (name in ("seed", "cross_lag", "cross_lead") or value >= 1)
