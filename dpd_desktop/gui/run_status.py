"""What the window says about the run it shows, beyond the plots: the title, the status bar's read-outs (device and
kernel, CUDA graph, run folder, best metric) and the DPD's output-power caveat. For a live run they come from its
events (gui/run_control.py); for a run reopened from its folder (the runs browser) from its record, so that nothing
still describes the run shown before."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ..runs.labels import dataset_label
from . import history
from .widgets.config_form import BACKBONES

#: The window title's text for a run: "<dataset> · <STEP> · <MODEL>[-<H>] · <run id>".
TITLE_SEPARATOR = " · "


def model_label(backbone: str, hidden_size: int | None, labels: dict[str, str] | None = None) -> str:
    """``GRU-23``, ``TRes-GRU-40``; MP/GMP have orders, not a hidden size: ``GMP``."""
    name = (labels or {}).get(str(backbone), str(backbone).upper())
    if str(backbone) in ("mp", "gmp") or hidden_size is None:
        return name
    return f"{name}-{hidden_size}"


def best_text(selection_metric: str | None, best_value: float | None, best_epoch: int | None,
              profile: str | None) -> str:
    """The status bar's "best val NMSE -37.25 dB (ep 2) · metrics: legacy-2.2.1"; "" without a best epoch."""
    if best_epoch is None:
        return ""
    name, unit = history.metric_label(selection_metric or "VAL_NMSE")
    value = history.to_float(best_value)
    return (f"best {name} {history.fmt(value)} {unit} (ep {best_epoch}) · metrics: "
            f"{profile or 'legacy-2.2.1'}")


def device_text(device: dict[str, Any]) -> str:
    """``cpu``, ``cuda:0 · NVIDIA H200`` from a config.json ``device`` block (or a RunStarted's device, name)."""
    dev = str(device.get("device") or "—")
    name = str(device.get("name") or "")
    return dev + (f" · {name}" if name and name.lower() != dev.lower() else "")


def record_dataset_label(rec) -> str:
    """The short dataset name the runs browser shows (runs/labels.py ``dataset_label``) of a RunRecord."""
    ref = rec.dataset
    if ref is None:
        return "-"
    return dataset_label(SimpleNamespace(dataset_kind=ref.kind, dataset_shown=ref.shown, dataset_name=ref.name))


def show_reopened(window, replay) -> None:
    """Title, status bar and output-power read-out of a run reopened from its folder (``replay``: runs/replay.py
    ``Replay``)."""
    rec = replay.record
    kernel = rec.kernel
    dev = rec.device
    window.device_label.setText(f"{device_text(dev)} · kernel {kernel.label}")
    window.device_label.setToolTip(f"as recorded in {rec.config_path}\n{kernel.describe()}")
    window.menus.show_fast_path(dev.get("fast_path") or "—")
    window.run_folder_label.setText(f"run {rec.run_dir}")
    window.run_folder_label.setToolTip(str(rec.run_dir))
    profile = rec.metric_profile
    window.epoch_table.set_metric_profile(profile)
    window.best_label.setText(best_text(rec.selection_metric, rec.best_value, rec.best_epoch, profile))
    window.psd_panel.set_power_change(replay.power_change_db)
    labels = {v: label for v, label, _ in BACKBONES}
    window.set_title_run(TITLE_SEPARATOR.join([record_dataset_label(rec), str(rec.step).upper(),
                                               model_label(rec.backbone, rec.hidden_size, labels), rec.run_id]))
