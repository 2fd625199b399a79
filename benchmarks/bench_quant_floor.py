"""The resolution floor of a B-bit DPD (issue 26): how much ACLR a DPD loses when only its stored activation words
are rounded to B bits, everything else kept in float — a lower bound on the loss of any integer model of it whose
activation words have B bits.

    python benchmarks/bench_quant_floor.py RUN [RUN ...] --dataset ../shared/datasets/DPA_160MHz --bits 8,10,12,16

Per DPD run (a float TCN or GRU DPD and its frozen PA, both from the run record):

* TCN: every conv output word (the pre-activation before Hardswish, the activation after it, the last conv's
  correction) is rounded to B bits; weights at B bits (``--weights-too``) or float; the features, the accumulators
  and the residual add stay float.
* GRU: only the hidden state h(t) is rounded to B bits at every step (it is stored and fed back); the gates, the
  tables and the head stay float.

Each word's format is the power-of-two format of least squared error on the training split's first
segments (``--calib-segments``: the first few), either one per tensor (what quant/plan.py does) or one per channel (an idealisation:
a shift per channel). The table gives the test split's u error (relative to the float u), NMSE, ACLR (average of
both sides) and EVM through the PA under the run's metric profile, and ΔACLR against the float DPD.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's package, not an installed one

from dpd_desktop.data import load_dataset  # noqa: E402
from dpd_desktop.data.segments import segment  # noqa: E402
from dpd_desktop.export.quantized import load_run_models  # noqa: E402
from dpd_desktop.metrics.profiles import compute_profile_metrics  # noqa: E402
from dpd_desktop.models.tcn import features as tcn_features  # noqa: E402
from dpd_desktop.runs.record import RunRecord  # noqa: E402


def _fq(v: torch.Tensor, frac, bits: int) -> torch.Tensor:
    s = torch.as_tensor(2.0, dtype=v.dtype) ** frac
    return torch.clamp(torch.floor(v * s + 0.5), -2 ** (bits - 1), 2 ** (bits - 1) - 1) / s


def _least_error_frac(v: torch.Tensor, bits: int) -> int:
    """The fraction of least squared rounding + saturation error over the values ``v`` (candidates: no saturation
    and up to bits − 2 finer)."""
    mx = float(v.abs().max())
    if mx == 0:
        return bits - 1
    base = bits - 1 - math.ceil(math.log2(mx * 1.125))
    errs = [(float(((_fq(v, f, bits) - v) ** 2).sum()), f) for f in range(base, base + bits - 1)]
    return min(errs)[1]


def _formats(v: torch.Tensor, bits: int, per_channel: bool, axis: int):
    """One fraction (per tensor) or one per channel along ``axis``, broadcastable against ``v``."""
    if not per_channel:
        return torch.tensor(float(_least_error_frac(v, bits)), dtype=v.dtype)
    fr = [float(_least_error_frac(v.select(axis, c), bits)) for c in range(v.shape[axis])]
    shape = [1] * v.dim()
    shape[axis] = len(fr)
    return torch.tensor(fr, dtype=v.dtype).reshape(shape)


def _weight_q(w: torch.Tensor, bits: int) -> torch.Tensor:
    frac = bits - 1 - torch.ceil(torch.log2(w.abs().amax(dim=tuple(range(1, w.dim())), keepdim=True)))
    return _fq(w, frac, bits)


class TCNFloor:
    """The TCN of ``models/tcn.py`` with its conv outputs rounded (module docstring). Words: (B, C, T), channel
    axis 1."""

    def __init__(self, dpd) -> None:
        self.net = list(dpd.backbone.network)

    def run(self, x, bits=None, fmt=None, collect=None, weights=False):
        h = tcn_features(x).transpose(1, 2)
        k, i = 0, 0
        while i < len(self.net):
            conv = self.net[i]
            w = _weight_q(conv.weight, bits) if (weights and bits) else conv.weight
            h = torch.nn.functional.conv1d(h, w, conv.bias, padding=conv.padding, dilation=conv.dilation,
                                           groups=conv.groups)
            if i + 1 < len(self.net) and not isinstance(self.net[i + 1], torch.nn.Conv1d):
                h = self._word(h, f"pre{k}", bits, fmt, collect)
                h = self.net[i + 1](h)
                i += 1
            h = self._word(h, f"out{k}", bits, fmt, collect)
            i += 1
            k += 1
        return h.transpose(1, 2) + x

    @staticmethod
    def _word(h, key, bits, fmt, collect):
        if collect is not None:
            collect.setdefault(key, []).append(h)
        return _fq(h, fmt[key], bits) if fmt is not None else h

    channel_axis = 1


class GRUFloor:
    """The GRU family's recurrence (one layer) with h(t) rounded at every step; words (B, H), channel axis 1."""

    def __init__(self, dpd) -> None:
        rnn = dpd.backbone.rnn
        if rnn.num_layers != 1:
            raise SystemExit("GRU floor: one layer only")
        self.cell = torch.nn.GRUCell(rnn.input_size, rnn.hidden_size).double()
        with torch.no_grad():
            for a in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                getattr(self.cell, a).copy_(getattr(rnn, a + "_l0"))
        self.fc = dpd.backbone.fc_out
        self.hidden = rnn.hidden_size

    def run(self, x, bits=None, fmt=None, collect=None, weights=False):
        h = torch.zeros(x.shape[0], self.hidden, dtype=x.dtype)
        hs = []
        for t in range(x.shape[1]):
            h = self.cell(x[:, t], h)
            if fmt is not None:
                h = _fq(h, fmt["h"], bits)
            hs.append(h)
        seq = torch.stack(hs, 1)
        if collect is not None:
            collect.setdefault("h", []).append(seq.reshape(-1, self.hidden))
        return self.fc(seq)

    channel_axis = 1


def _rel_db(a: np.ndarray, b: np.ndarray) -> float:
    return 10 * math.log10(float(np.sum((a - b) ** 2)) / float(np.sum(b ** 2)))


def _floor_rows(run: str, ds, bits_list, calib_segments: int | None, weights: bool) -> tuple[str, list[dict]]:
    rec = RunRecord.open(run)
    dpd, pa, _ = load_run_models(rec)
    dpd = dpd.double()
    name = rec.config.backbone
    model = {"tcn": TCNFloor, "gru": GRUFloor}.get(name)
    if model is None:
        raise SystemExit(f"{run}: the floor is written for the tcn and gru families, not {name!r}")
    model = model(dpd)
    nps = int(ds.spec.nperseg)
    n = ds.test.x.shape[0]
    segs = torch.from_numpy(segment(ds.test.x, nps)).double()
    calib = torch.from_numpy(segment(ds.train.x, nps)[:calib_segments]).double()
    target = segment((ds.test.x.astype(np.float64) * rec.gain).astype(np.float32), nps)

    def score(u: torch.Tensor) -> dict:
        with torch.inference_mode():
            y = pa(u.float()).numpy()
        return {k: float(v) for k, v in compute_profile_metrics(rec.metric_profile, y, target, ds.spec, n).items()}

    with torch.no_grad():
        uf = model.run(segs)
        assert torch.allclose(uf, dpd(segs), atol=1e-9), "the floor model is not the DPD"
        rows = [{"variant": "float", "u_err": float("-inf"), **score(uf)}]
        for bits in bits_list:
            for per_channel in (False, True):
                seen: dict = {}
                model.run(calib, collect=seen)
                fmt = {k: _formats(torch.cat(v, 0), bits, per_channel, model.channel_axis) for k, v in seen.items()}
                u = model.run(segs, bits, fmt, weights=weights)
                label = f"A{bits} {'per channel' if per_channel else 'per tensor'}" + (f", W{bits}" if weights else "")
                rows.append({"variant": label, "u_err": _rel_db(u.numpy(), uf.numpy()), **score(u)})
                print(f"  {run}: {label}: u error {rows[-1]['u_err']:.1f} dB, ACLR {rows[-1]['ACLR_AVG']:.2f} dBc",
                      flush=True)
    label = f"{name.upper()}-{rec.config.hidden_size} ({Path(run).name})"
    return label, rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="DPD run folders (tcn or gru family)")
    p.add_argument("--dataset", required=True)
    p.add_argument("--bits", default="8,10,12,16")
    p.add_argument("--calib-segments", type=int, default=None, help="default: the whole training split")
    p.add_argument("--weights-too", action="store_true", help="also round the weights (per output channel)")
    p.add_argument("--out", default=None, help="write the table as Markdown here")
    a = p.parse_args(argv)
    ds = load_dataset(a.dataset)
    bits_list = [int(b) for b in a.bits.split(",")]
    t0 = time.perf_counter()
    parts = []
    for run in a.runs:
        label, rows = _floor_rows(run, ds, bits_list, a.calib_segments, a.weights_too)
        fl = rows[0]
        lines = [f"### {label}", "", "| words | u error [dB] | NMSE [dB] | ACLR [dBc] | EVM [dB] | ΔACLR [dB] | ΔEVM [dB] |",
                 "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in rows:
            d = "–" if r is fl else f"{r['ACLR_AVG'] - fl['ACLR_AVG']:+.2f}"
            de = "–" if r is fl else f"{r['EVM'] - fl['EVM']:+.2f}"
            ue = "–" if r is fl else f"{r['u_err']:.1f}"
            lines.append(f"| {r['variant']} | {ue} | {r['NMSE']:.2f} | {r['ACLR_AVG']:.2f} | {r['EVM']:.2f} | {d} | {de} |")
        parts.append("\n".join(lines))
    cmd = "python benchmarks/bench_quant_floor.py " + " ".join(sys.argv[1:] if argv is None else argv)
    text = ("\n\n".join(parts) + f"\n\n{time.perf_counter() - t0:.0f} s. Command: `{cmd}`\n")
    print(text, flush=True)
    if a.out:
        Path(a.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
