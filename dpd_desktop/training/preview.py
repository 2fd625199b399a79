"""Live batch preview: a frozen copy of the model runs validation segment 0 every N batches.

Only when "Live batch preview" is on (it costs inference). The copy is made once per run (eval mode, gradients off,
RNN weights repacked); each preview loads the live weights into it under ``torch.inference_mode``, drawing no random
numbers, so training (and a captured CUDA graph) is unaffected.
"""
from __future__ import annotations

import torch

from ..metrics import nmse_db
from ..metrics.aclr import aclr_db
from ..runs.events import PlotData
from ..runs.plotdata import build_plot_data
from .overlap import frozen_copy


class LivePreview:
    """A run's live batch preview: its period ``every`` (batches; None: off), which another thread may change
    (:meth:`set_every`: one attribute, read at each batch boundary), the :class:`BatchPreview` made at the first
    preview, and whether a preview failed (no more are tried)."""

    def __init__(self, every: int | None):
        self.every = every
        self.failed = False
        self.shadow: BatchPreview | None = None
        self.notes: list[str] = []  # log lines of other threads, for the training thread to log

    def set_every(self, n: int | None) -> None:
        """Raises ValueError unless ``n`` is a positive integer or None."""
        if n is not None and (not isinstance(n, int) or n < 1):
            raise ValueError(f"preview_every: expected a positive integer or None, got {n!r}")
        self.every = n
        self.notes.append(f"live batch preview: {'every %d batches' % n if n else 'off'}")

    def due(self, batch: int) -> bool:
        """Whether a preview is due after ``batch`` batches."""
        every = self.every
        return bool(every) and batch % every == 0 and not self.failed

    def plots(self, net, val_set, device, spec, names: tuple[str, str]) -> tuple[PlotData, float]:
        """:meth:`BatchPreview.plots` of the live ``net`` (the shadow copy is made at the first call)."""
        if self.shadow is None:
            self.shadow = BatchPreview(net, val_set, device)
        return self.shadow.plots(net, spec, names)


class BatchPreview:
    """Shadow model for previews. ``run(live_net) -> (1, N, 2) float32 numpy`` prediction of val segment 0."""

    def __init__(self, net, val_set, device):
        self.shadow = frozen_copy(net).eval()
        self.x0 = val_set["x"][:1]
        self.val_set = val_set

    def run(self, live_net):
        with torch.inference_mode():
            self.shadow.load_state_dict(live_net.state_dict())
            return self.shadow(self.x0).cpu().numpy()

    def plots(self, live_net, spec, names: tuple[str, str]) -> tuple[PlotData, float]:
        """(plot data, NMSE [dB]) of the live weights on val segment 0; ``names`` = (target, prediction) names."""
        pred = self.run(live_net)
        es = self.val_set
        n = min(es["n"], pred.shape[1])
        t_seg0 = es["t_seg"][:1]
        nmse = float(nmse_db(pred, t_seg0))
        tname, pname = names
        sig = {tname: t_seg0[0][:n], pname: pred[0][:n]}
        plots = build_plot_data("preview", es["x_seg"][0][:n], sig, spec, target_name=tname, pred_name=pname,
                                aclr=preview_aclr(sig, spec), error_of=(pname, tname))
        return plots, nmse


def preview_aclr(signals, spec) -> dict[str, tuple[float, float]]:
    """(left, right) ACLR [dBc] of each (N, 2) signal of a preview (validation segment 0), the metrics' own
    definition (:func:`~dpd_desktop.metrics.aclr.aclr_db` on that one segment); {} when the spec has no sample rate
    or channel layout, or the segment is too short for it."""
    fs, bw, n_sub = (getattr(spec, a, None) for a in ("sample_rate_hz", "bw_main_hz", "n_sub_ch"))
    if not (fs and bw and n_sub):
        return {}
    out = {}
    for name, s in signals.items():
        try:
            left, right, _ = aclr_db(s[None], fs, bw, n_sub)
        except ValueError:
            return {}
        out[name] = (left, right)
    return out
