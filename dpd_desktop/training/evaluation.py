"""Evaluation of a network on the val/test segments (reference §4.7 net_eval), plot data and the results arrays.

``segments`` (default): ``nperseg``-sample segments, each from a zero state (reference §2.2); losses are the
criterion of each eval batch, averaged in float64 like the reference.

``overlap`` (a DPD; OpenDPD 2.4.2 Arena's "offline_overlap_200_100"): the DPD runs on windows of W = frame_length
samples at hop W/2 from a zero state, the split padded with W/4 zeros in front, keeping each window's samples
[W/4, 3W/4) (W/4 of past and of future context, as the middle of a training frame); its limited output of the whole
split drives the PA as one sequence. Metrics: the run's profile without the first and last W samples, the loss on
the whole split; besides, POWER_DB = 10·log10(Σ|ŷ|²/Σ|g·x|²) and OBJECTIVE = 0.5·(EVM + max(ACLR_L, ACLR_R)) (EVM:
the in-band error in the corrected profile), the power-gated selection's inputs.
"""
from __future__ import annotations

import contextlib
import math
import threading
from typing import Any, Callable

import numpy as np
import torch

from ..data.framing import segment, unsegment
from ..config import ExperimentConfig
from ..metrics.profiles import compute_profile_metrics, profile_aclr
from ..metrics.spectra import psd_db
from ..runs.events import SplitResults
from ..runs.plotdata import PSD_NPERSEG_MAX, build_plot_data


def scaled_target(split, gain: float) -> np.ndarray:
    """g·x in float64 from the float64 samples when the reader kept them, then cast to float32 (reference §2.3)."""
    x64 = getattr(split, "x64", None)
    if x64 is None:
        x64 = split.x.astype(np.float64)
    return np.ascontiguousarray((gain * x64).astype(np.float32))



class EvalConstants:
    """What an evaluator computes once and never again, because its inputs never change during a run: a DPD's
    baseline PA(x) per split (the PA is frozen, §5.3) and its ACLR, the targets' ACLR, and the plots' PSDs of the
    input, the target and the baseline (``psd_cache``). One per evaluator by default; the runs of one training group
    (training/group.py), whose configurations agree on everything these depend on (dataset, PA run, gain rule,
    metric profile, evaluation mode: group_plan.group_key), share one, so the group computes each once instead of
    once per member. Thread-safe: the members' epoch ends run on their own threads; a value being computed by one is
    waited for by the others."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[tuple, Any] = {}
        self._locks: dict[tuple, threading.Lock] = {}
        self._psd: dict[str, dict] = {}
        self._psd_filled: set[str] = set()

    def get(self, key: tuple, compute: Callable[[], Any]) -> Any:
        """The value of ``key``, from ``compute()`` the first time (one caller computes, any others wait)."""
        if key in self._values:
            return self._values[key]
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._values:
                self._values[key] = compute()
        return self._values[key]

    def psd_cache(self, split: str) -> tuple[dict, Any]:
        """``(cache, guard)``: the split's PSD cache for runs/plotdata.build_plot_data and a context to hold while
        using it: the split's lock until its first use has filled it (the constant PSDs), then none."""
        with self._lock:
            cache = self._psd.setdefault(split, {})
            if split in self._psd_filled:
                return cache, contextlib.nullcontext()
            lock = self._locks.setdefault(("psd", split), threading.Lock())
        return cache, _Filling(self, split, lock)


class _Filling:
    """The context of a split's first plot data: its lock held, the split marked filled when it ends well."""

    def __init__(self, constants: EvalConstants, split: str, lock: threading.Lock) -> None:
        self.constants, self.split, self.lock = constants, split, lock

    def __enter__(self):
        self.lock.acquire()

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                with self.constants._lock:
                    self.constants._psd_filled.add(self.split)
        finally:
            self.lock.release()
        return False


class Evaluator:
    """The val and test splits on the device, and what is computed from predictions on them.

    Args:
        dataset: the run's :class:`~dpd_desktop.data.IQDataset` (its spec: nperseg and the metric bands).
        targets: split name → (N, 2) float32 target (y for a PA, g·x for a DPD).
        criterion: the plain loss module; batch_size_eval: segments per forward call.
        constants: the :class:`EvalConstants` to use (shared by a training group), else its own.
    """

    def __init__(self, dataset, targets: dict[str, np.ndarray], step: str, criterion, batch_size_eval: int,
                 device, metric_profile: str = ExperimentConfig.metric_profile, mode: str = "segments",
                 frame_length: int | None = None, constants: EvalConstants | None = None) -> None:
        self.spec = dataset.spec
        self.profile = metric_profile
        self.step = step
        self.criterion = criterion
        self.batch_size = batch_size_eval
        self.mode = mode
        self.window = int(frame_length or 0)
        nps = dataset.spec.nperseg
        if mode == "overlap":
            if step != "dpd" or self.window < 4:
                raise ValueError("overlap evaluation is for a DPD with frame_length >= 4")
            for name in ("val", "test"):
                n = getattr(dataset, name).x.shape[0]
                if n - 2 * self.window < nps:
                    raise ValueError(f"overlap evaluation: the {name} split has {n} samples; its metrics need "
                                     f"nperseg ({nps}) + 2·frame_length ({2 * self.window})")
        self.sets: dict[str, dict[str, Any]] = {}
        for name in ("val", "test"):
            split = getattr(dataset, name)
            xs = segment(split.x, nps)
            ts = segment(targets[name], nps)
            self.sets[name] = {"x": torch.from_numpy(xs).to(device), "t": torch.from_numpy(ts).to(device),
                               "x_np": split.x, "t_np": targets[name], "t_seg": ts, "x_seg": xs,
                               "n": split.x.shape[0]}
        # DPD baselines (PA without DPD) and the targets' ACLR are computed once, on first use (off the start-up
        # path): the PA is frozen (§5.3) and the targets never change.
        self.constants = constants if constants is not None else EvalConstants()

    def forward_segments(self, module, x_seg) -> np.ndarray:
        """Run ``module`` in eval mode under inference mode on (S, N, 2) segments in eval batches; returns numpy."""
        was_training = module.training
        module.eval()
        bs = self.batch_size
        with torch.inference_mode():
            out = torch.cat([module(x_seg[i:i + bs]) for i in range(0, x_seg.shape[0], bs)], dim=0)
        module.train(was_training)
        return out.cpu().numpy()

    def evaluate(self, name: str, net) -> dict[str, Any]:
        """Evaluate ``net`` on the val or test split: ``{"loss", "metrics", "pred", "extra"}`` (+ ``"u"``, the DPD
        output, for a DPD); ``pred``/``u`` as (S, N, 2) segments in both modes; ``extra``: POWER_DB and OBJECTIVE
        (module docstring). Draws no random numbers (the trainer draws the iterator seeds)."""
        if self.mode == "overlap":
            return self._evaluate_overlap(name, net)
        res = self._evaluate_segments(name, net)
        res["extra"] = self._extra(unsegment(res["pred"], self.sets[name]["n"]), self.sets[name]["t_np"],
                                   res["metrics"])
        return res

    @staticmethod
    def _extra(pred: np.ndarray, target: np.ndarray, metrics: dict) -> dict[str, float]:
        p = float(np.sum(np.square(pred, dtype=np.float64)))
        t = float(np.sum(np.square(target, dtype=np.float64)))
        power = 10 * math.log10(p / t) if p > 0 and t > 0 else math.nan
        objective = 0.5 * (float(metrics["EVM"]) + max(float(metrics["ACLR_L"]), float(metrics["ACLR_R"])))
        return {"POWER_DB": power, "OBJECTIVE": objective}

    def overlap_forward(self, module, x: torch.Tensor) -> torch.Tensor:
        """``module`` on the overlap windows of ``x`` ``(N, 2)`` (module docstring), eval mode, no gradient → ``(N, 2)``."""
        w = self.window
        hop, lead = w // 2, w // 4
        n = x.shape[0]
        count = -(-n // hop)
        padded = torch.nn.functional.pad(x, (0, 0, lead, w - lead + (-n) % hop))
        windows = padded.unfold(0, w, hop).transpose(1, 2)[:count]  # (count, w, 2)
        was = module.training
        module.eval()
        with torch.inference_mode():
            out = torch.cat([module(windows[i:i + self.batch_size])[:, lead:lead + hop]
                             for i in range(0, count, self.batch_size)], dim=0)
        module.train(was)
        return out.reshape(-1, 2)[:n]

    def _evaluate_overlap(self, name: str, net) -> dict[str, Any]:
        es = self.sets[name]
        if "x_full" not in es:
            es["x_full"] = torch.from_numpy(np.ascontiguousarray(es["x_np"])).to(es["x"].device)
            es["t_full"] = torch.from_numpy(np.ascontiguousarray(es["t_np"])).to(es["x"].device)
        net.eval()
        with torch.inference_mode():
            u = net.limit(self.overlap_forward(net.dpd, es["x_full"]))
            y = net.pa(u.unsqueeze(0))[0]
            loss = float(self.criterion(y, es["t_full"]))
        pred_full, u_full = y.cpu().numpy(), u.cpu().numpy()
        nps, g, n = self.spec.nperseg, self.window, es["n"]
        inner_p, inner_t = pred_full[g:n - g], es["t_np"][g:n - g]
        metrics = compute_profile_metrics(self.profile, segment(inner_p, nps), segment(inner_t, nps), self.spec,
                                          inner_p.shape[0])
        return {"loss": loss, "metrics": metrics, "pred": segment(pred_full, nps), "u": segment(u_full, nps),
                "extra": self._extra(pred_full, es["t_np"], metrics)}

    def _evaluate_segments(self, name: str, net) -> dict[str, Any]:
        es = self.sets[name]
        net.eval()
        bs = self.batch_size
        preds, losses, dpd_out = [], [], []
        hook = None
        if self.step == "dpd":
            hook = net.dpd.register_forward_hook(lambda m, i, o: dpd_out.append(o))
        try:
            with torch.inference_mode():
                for i in range(0, es["x"].shape[0], bs):
                    out = net(es["x"][i:i + bs])
                    losses.append(self.criterion(out, es["t"][i:i + bs]))
                    preds.append(out)
        finally:
            if hook is not None:
                hook.remove()
        pred = torch.cat(preds, dim=0).cpu().numpy()
        loss = float(np.mean(torch.stack(losses).cpu().tolist()))
        metrics = compute_profile_metrics(self.profile, pred, es["t_seg"], self.spec, es["n"])
        res = {"loss": loss, "metrics": metrics, "pred": pred}
        if dpd_out:
            res["u"] = torch.cat(dpd_out, dim=0).cpu().numpy()
        return res

    def baseline(self, split: str, net) -> np.ndarray:
        """PA(x) without DPD on the (S, N, 2) segments of ``split`` (computed once; the PA is frozen). ``net`` is the
        cascade to take the PA from (the epoch-end worker passes its snapshot, never the live network)."""
        return self._baseline(split, net.pa)

    def baseline_aclr(self, split: str, net) -> tuple[float, float]:
        """(ACLR_L, ACLR_R) dBc of :meth:`baseline` (computed once)."""
        return self._baseline_aclr(split, net.pa)

    def _baseline(self, split: str, pa) -> np.ndarray:
        return self.constants.get(("baseline", split), lambda: self.forward_segments(pa, self.sets[split]["x"]))

    def _baseline_aclr(self, split: str, pa) -> tuple[float, float]:
        return self.constants.get(("baseline_aclr", split), lambda: profile_aclr(
            self.profile, self._baseline(split, pa), self.spec, self.sets[split]["n"]))

    def warm(self, pa=None) -> None:
        """Compute the constants now (a training group's first chunk: group.py), not at the first epoch end: each
        split's target ACLR and, for a DPD, its baseline and the baseline's ACLR. ``pa``: the DPD's PA, a copy that
        no other thread uses (the run's own is the live network's)."""
        for split in ("val", "test"):
            self.target_aclr(split)
            if self.step == "dpd":
                self._baseline_aclr(split, pa)

    def target_aclr(self, split: str) -> tuple[float, float]:
        es = self.sets[split]
        return self.constants.get(("target_aclr", split),
                                  lambda: profile_aclr(self.profile, es["t_seg"], self.spec, es["n"]))

    def signal_names(self) -> tuple[str, str]:
        """(reference, model output) names in the plot data: measured y / ŷ for PA, g·x / PA(DPD(x)) for DPD."""
        return ("measured y", "predicted ŷ") if self.step == "pa" else ("target g·x", "PA(DPD(x))")

    def plots(self, source: str, ev: dict[str, Any], split: str, net):
        """PlotData of one evaluation (no extra inference except the DPD's once-computed baseline)."""
        es = self.sets[split]
        n = es["n"]
        pred = unsegment(ev["pred"], n)
        aclr = {}
        m = ev["metrics"]
        tname, pname = self.signal_names()
        if self.step == "pa":
            signals = {tname: es["t_np"], pname: pred}
        else:
            signals = {tname: es["t_np"], pname: pred, "PA(x) no DPD": unsegment(self.baseline(split, net), n)}
            if "u" in ev:
                signals["DPD output u"] = unsegment(ev["u"], n)
            aclr["PA(x) no DPD"] = self.baseline_aclr(split, net)
        aclr[pname] = (m["ACLR_L"], m["ACLR_R"])
        aclr[tname] = self.target_aclr(split)
        cache, guard = self.constants.psd_cache(split)
        with guard:
            return build_plot_data(source, es["x_np"], signals, self.spec, target_name=tname, pred_name=pname,
                                   aclr=aclr, error_of=(pname, tname), psd_cache=cache,
                                   constant=(tname, "PA(x) no DPD"), input_side=("DPD output u",))

    def output_power_report(self, test: dict[str, Any], net) -> dict[str, Any]:
        """RMS output of the cascade with and without DPD on the test split and their difference in dB (a DPD must
        not "linearize" by changing the gain); ``power_warning`` above 0.5 dB."""
        n = self.sets["test"]["n"]
        with_dpd = unsegment(test["pred"], n).astype(np.float64)
        without = unsegment(self.baseline("test", net), n).astype(np.float64)
        rms = lambda a: math.sqrt(float(np.mean(a[:, 0] ** 2 + a[:, 1] ** 2)))  # noqa: E731
        r1, r0 = rms(with_dpd), rms(without)
        diff = 20 * math.log10(r1 / r0) if r0 > 0 and r1 > 0 else float("nan")
        return {"rms_out_with_dpd": r1, "rms_out_without_dpd": r0, "rms_out_diff_db": diff,
                "power_warning": bool(not abs(diff) <= 0.5)}

    def split_results(self, name: str, ev: dict[str, Any]) -> SplitResults:
        """results.h5's arrays of one split; the PSD is the plots' (:func:`dpd_desktop.metrics.spectra.psd_db`,
        at most ``PSD_NPERSEG_MAX`` bins) of the prediction."""
        es = self.sets[name]
        n = es["n"]
        pred = unsegment(ev["pred"], n)
        fz, p = psd_db(pred, self.spec.sample_rate_hz, min(int(self.spec.nperseg), PSD_NPERSEG_MAX))
        return SplitResults(x=es["x_np"], target=es["t_np"], prediction=pred,
                            dpd_output=unsegment(ev["u"], n) if "u" in ev else None, loss=ev["loss"],
                            metrics=dict(ev["metrics"]), psd_freq_hz=fz, psd_prediction_db=p)
