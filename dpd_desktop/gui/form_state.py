"""The form's state in the window (a part of :class:`~dpd_desktop.gui.main_window.MainWindow`): the run-time
estimate beside Start (:mod:`.estimate`), suggested epochs/stride when a dataset loads, and the form, step and dataset
saved in QSettings at close and restored at the next start (values coerced back to their types; odd ones ignored).
"""
from __future__ import annotations

import dataclasses
import math
import os
import sys
from typing import Any

from ..config import ExperimentConfig
from .estimate import estimate_run, suggest_cpu_defaults
from .widgets.poly_form import parse_int_list
from .session import format_duration

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
    """Estimate, suggested defaults and saved form values of the window."""

    # ------------------------------------------------------------------------------------------------ estimate
    def _estimate_on_cuda(self, device: str) -> bool:
        return on_cuda(device)

    def update_estimate(self, *_) -> None:
        """Recompute the estimate beside Start from the dataset and the form."""
        label = self.estimate_label
        ds = self._dataset
        if ds is None:
            label.setText("≈ —")
            label.setToolTip("Estimated run time: load a dataset first (the estimate needs its size)")
            return
        cfg = self.form.config(step="dpd" if self.step_dpd.isChecked() else "pa")
        n_train = len(ds.train.x)
        if cfg.max_train_samples:
            n_train = min(n_train, int(cfg.max_train_samples))
        n_eval = len(ds.val.x) + len(ds.test.x)
        cuda = self._estimate_on_cuda(str(cfg.device))
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
    def _suggest_defaults(self, dataset) -> None:
        """Epochs and stride for the loaded dataset on the CPU (:func:`~.estimate.suggest_cpu_defaults`), applied
        only to fields the user has not chosen: still the config's defaults (unless they came from the user, see
        :meth:`mark_form_chosen`) or the window's own last suggestion."""
        if self._estimate_on_cuda(str(self.form.device.currentData())):
            return
        base = ExperimentConfig()
        untouched = set() if getattr(self, "_form_chosen", False) else {(base.epochs, base.stride)}
        if self._suggested is not None:
            untouched.add(self._suggested)
        current = (self.form.epochs.value(), self.form.stride.value())
        if current not in untouched:
            return
        s = suggest_cpu_defaults(len(dataset.train.x), self.form.frame_length.value())
        self._suggested = (s["epochs"], s["stride"])
        self.form.epochs.setValue(s["epochs"])
        self.form.stride.setValue(s["stride"])
        self.statusBar().showMessage(f"Suggested for {getattr(dataset, 'name', 'this dataset')} on the CPU: "
                                     f"{s['epochs']} epochs, stride {s['stride']}", 8000)

    def mark_form_chosen(self) -> None:
        """The form's values are the user's (restored from the last session, or a run's settings): a dataset load
        no longer replaces epochs and stride with a suggestion, even where they equal the config's defaults."""
        self._form_chosen = True
        self._suggested = None

    # ------------------------------------------------------------------------------------------------ saved form
    def save_form_settings(self) -> None:
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
        st.setValue("form/step", "dpd" if self.step_dpd.isChecked() else "pa")
        st.setValue("form/preview", bool(self.preview_check.isChecked()))
        if self._dataset_ref:
            st.setValue("form/dataset", str(self._dataset_ref))

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

    def restore_last_session(self) -> bool:
        """Fill the form, step and preview tick from QSettings and load the saved dataset in the background;
        False when nothing was saved."""
        scheme = coerce(self._settings.value("window/scheme"), str)
        if scheme in ("light", "dark"):
            self.set_color_scheme(scheme)
        if not self._settings.contains("form/epochs") and not self._settings.contains("form/dataset"):
            return False
        cfg, other = self.saved_form()
        self.set_form_from_config(cfg)
        if "preview_every" in other:
            self.form.preview_every.setValue(int(other["preview_every"]))
        self.preview_check.setChecked(bool(other.get("preview", False)))
        self.mark_form_chosen()  # the user's values: the dataset load below keeps them
        ds = other.get("dataset")
        if ds == "demo":
            self.load_demo()
        elif ds:
            self.open_dataset(ds)
        return True
