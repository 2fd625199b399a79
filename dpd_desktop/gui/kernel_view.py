"""The kernel a run ran on, in the window: the status bar's device line (text and tooltip) and, when ``fast`` fell
back to the reference kernel, an info banner with the reason (kernels/record.py reads the recorded block)."""
from __future__ import annotations

from typing import Any, Mapping

from ..kernels.record import KernelRun, read_kernel


def kernel_of_start(ev) -> KernelRun:
    """The :class:`KernelRun` of a ``RunStarted`` event (its ``config`` and the ``device`` block of ``setup``)."""
    setup: Mapping[str, Any] = ev.setup if isinstance(getattr(ev, "setup", None), Mapping) else {}
    return read_kernel({"experiment": dict(ev.config or {}), "device": setup.get("device") or {}})


def fallback_text(kernel: KernelRun) -> str | None:
    """The banner text when ``fast`` was asked for and some recurrent module runs on the reference kernel."""
    if not kernel.fell_back:
        return None
    why = "; ".join(kernel.notes) or f"{', '.join(kernel.fell_back)} runs on the reference kernel (no reason recorded)"
    return f"Kernel fast fell back: {why}."


def show_run_kernel(device_label, banner, ev, device_text: str, device_tip: str) -> KernelRun:
    """Put ``device_text · kernel <label>`` on the status bar's ``device_label``, the kernel's description in its
    tooltip (after ``device_tip``), and the fallback reason in an info ``banner`` when fast fell back; returns the
    kernel."""
    kernel = kernel_of_start(ev)
    device_label.setText(f"{device_text} · kernel {kernel.label}")
    device_label.setToolTip(f"{device_tip}\n{kernel.describe()}")
    text = fallback_text(kernel)
    if text is not None:
        banner.show_message("info", text, run_dir=getattr(ev, "run_dir", None))
    return kernel
