"""Issue 24 on the GPU (skipped without CUDA): the frontier families and the Arena's training settings in fast mode.

* A DeltaGRU / TRes-DeltaGRU / TCN DPD through a frozen TRes-GRU PA with the Arena's settings (loss window, peak
  limiter, overlap evaluation, power-gated selection, absolute plateau threshold) and with the cosine schedule and
  the power term (and a gain-head GRU with the phase augmentation and the out-of-band term) trains with the CUDA
  graph on, bitwise equal to the same run trained eagerly (history, selected
  checkpoint, parameters, gradients, optimizer state) — the fast kernel and the reference kernel each.
* The zero-threshold recurrences on the fast kernel: gradients of every parameter and of the input within 1e-5
  (relative to the largest) of the float64 computation of the same equations (the delta recurrence on the CPU).
  PN-GRU, PN-GRU-2 and the gain-head GRUs likewise, against the float64 nn.GRU on the CPU.
* Whole-split sequences beyond 32,768 steps run in chunks with the state carried: within 1e-5 of one float64 pass.
* The tiny Arena protocol on CUDA in fast mode: the seeds train as one group, every trial's fast path on.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.kernels.dispatch import apply_kernel, run_recurrent
from dpd_desktop.models import build_model
from dpd_desktop.models.deltagru import delta_sequence
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training.trainer import Trainer

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the GPU machine)")]

SKIP_COLS = {"TIME:", "EPOCH_SECONDS"}
ARENA = dict(loss_window=[12, 38], peak_limit=1.2, evaluation="overlap", selection="power-gated",
             plateau_threshold=0.01, plateau_threshold_mode="abs", patience=0, test_every_epoch=False,
             metric_profile="corrected")


@pytest.fixture(scope="module")
def ds():
    return make_demo_dataset(seed=1, n_train=3000, n_val=4300, n_test=4300)


@pytest.fixture(scope="module")
def pa_run(tmp_path_factory, ds):
    ws = Workspace(tmp_path_factory.mktemp("pa"))
    cfg = ExperimentConfig(step="pa", dataset="demo", backbone="tres_gru", hidden_size=12, epochs=1,
                           frame_length=50, stride=4, device="cuda")
    res = Trainer(cfg, dataset=ds, workspace=ws).run()
    assert res.state == "succeeded", res.message
    return str(res.run_dir)


def _run(tmp_path, ds, cfg, fast, tag):
    t = Trainer(cfg, dataset=ds, workspace=Workspace(tmp_path / tag), fast_path=fast)
    res = t.run()
    assert res.state == "succeeded", res.message
    return t, res


def _same_history(a_rows, b_rows):
    assert len(a_rows) == len(b_rows)
    for a, b in zip(a_rows, b_rows):
        for k in a:
            if k in SKIP_COLS:
                continue
            va, vb = a[k], b[k]
            assert (math.isnan(va) and math.isnan(vb)) if isinstance(va, float) and math.isnan(va) else va == vb, \
                f"epoch {a['EPOCH']} {k}: {va!r} != {vb!r}"


@pytest.mark.parametrize("kernel", ["fast", "reference"])
@pytest.mark.parametrize("dpd,extra", [("deltagru", {}), ("tres_deltagru", {}), ("tcn", {}), ("pn_gru", {}),
                                       ("gru_gain", {}), ("gru_gain3", {}), ("gru_gain3p", {}),
                                       pytest.param("gru_gain3", {"augment": "phase", "oob_weight": 3.0},
                                                    id="gru_gain3-augment-oob"),
                                       pytest.param("gru_gain3p", {"augment": "phase", "oob_weight": 1.0,
                                                                   "oob_side": "worse"},
                                                    id="gru_gain3p-augment-oob-worse"),
                                       ("deltagru", {"lr_schedule": "cosine", "warmup_epochs": 1,
                                                     "power_weight": 1e-3, "gain_rule": "small-signal"})])
def test_arena_settings_graph_equals_eager(tmp_path, ds, pa_run, dpd, extra, kernel):
    cfg = ExperimentConfig(step="dpd", dataset="demo", backbone=dpd, hidden_size=8, epochs=3, frame_length=50,
                           stride=1, device="cuda", pa_run=pa_run, kernel=kernel, **ARENA, **extra)
    tf, rf = _run(tmp_path, ds, cfg, True, "fast")
    te, re_ = _run(tmp_path, ds, cfg, False, "eager")
    assert tf.fast_path_status == "on" and tf.fast_step.captures >= 1
    assert te.fast_path_status.startswith("off")
    _same_history(rf.history, re_.history)
    assert rf.best_epoch == re_.best_epoch
    for (n, a), (_, b) in zip(tf.net.named_parameters(), te.net.named_parameters()):
        assert torch.equal(a, b), n
        if a.grad is not None:
            assert torch.equal(a.grad, b.grad), n
    sa, sb = tf.optimizer.state_dict(), te.optimizer.state_dict()
    for i in sa["state"]:
        for k in sa["state"][i]:
            assert torch.equal(torch.as_tensor(sa["state"][i][k]), torch.as_tensor(sb["state"][i][k])), (i, k)


@pytest.mark.parametrize("backbone", ["deltagru", "tres_deltagru", "pn_gru", "pn_gru2", "gru_gain", "gru_gain3",
                                      "gru_gain3p", "gru_gain5"])
def test_fast_kernel_gradients_within_1e5_of_float64(backbone):
    torch.manual_seed(0)
    model = build_model(backbone, 16).cuda()
    apply_kernel(model, "fast", "cuda")
    assert model.backbone.kernel == "fast"
    ref = build_model(backbone, 16).double()
    ref.load_state_dict({k: v.double().cpu() for k, v in model.state_dict().items()})
    x = (torch.randn(4, 120, 2) * 0.4)
    xg = x.cuda().requires_grad_(True)
    xr = x.double().requires_grad_(True)
    dy = torch.randn(4, 120, 2)
    (model(xg) * dy.cuda()).sum().backward()
    if backbone in ("deltagru", "tres_deltagru"):  # float64: the delta recurrence itself (zero thresholds)
        bb = ref.backbone
        feats = (__import__("dpd_desktop.models.deltagru", fromlist=["features"]).features if backbone == "deltagru"
                 else __import__("dpd_desktop.models.tres_gru", fromlist=["features"]).features)(xr)
        h = delta_sequence(bb.rnn, feats, torch.zeros(1, 4, 16, dtype=torch.float64), 0.0, 0.0)
        out = bb.fc_out(h) + (bb.residual(xr) if backbone == "tres_deltagru" else 0)
    else:  # float64: the same model on the reference kernel (nn.GRU on the CPU)
        out = ref(xr)
    (out * dy.double()).sum().backward()
    pairs = [(xg.grad, xr.grad)] + [(a.grad, b.grad) for a, b in zip(model.parameters(), ref.parameters())]
    for got, want in pairs:
        rel = (got.double().cpu() - want).abs().max() / want.abs().max()
        assert rel.item() <= 1e-5


@pytest.mark.parametrize("kernel", ["fast", "reference"])
def test_long_sequences_in_chunks(kernel):
    torch.manual_seed(1)
    rnn = torch.nn.GRU(6, 20, batch_first=True, bias=False).cuda()
    x = torch.randn(1, 40000, 6, device="cuda") * 0.5
    h0 = torch.zeros(1, 1, 20, device="cuda")
    with torch.inference_mode():
        got = run_recurrent(rnn, x, h0, kernel)
    ref = torch.nn.GRU(6, 20, batch_first=True, bias=False).double()
    ref.load_state_dict({k: v.double().cpu() for k, v in rnn.state_dict().items()})
    with torch.no_grad():
        want = ref(x.double().cpu(), h0.double().cpu())[0]
    assert (got.double().cpu() - want).abs().max().item() <= 1e-5


def test_tiny_arena_groups_seeds_in_fast_mode(tmp_path):
    from tests.unit.test_arena import DPA200, TINY
    from dpd_desktop.cli.entry import main

    if not (DPA200 / "spec.json").is_file():
        pytest.skip(f"dataset DPA_200MHz not found at {DPA200}")
    spec = tmp_path / "tiny.toml"
    spec.write_text(TINY.format(dataset=DPA200).replace("threads = 1\n", ""))
    out = tmp_path / "out"
    assert main(["--workspace", str(tmp_path / "ws"), "arena", str(spec), "--device", "cuda", "--kernel", "fast",
                 "--out", str(out), "--assets", str(tmp_path / "none")]) == 0
    doc = json.loads((out / "leaderboard.json").read_text())
    assert len(doc["trials"]) == 4 and all("quality_db" in t for t in doc["trials"])
    sweeps = [json.loads(p.read_text()) for p in (tmp_path / "ws" / "sweeps").glob("*/sweep.json")]
    dpd = [s for s in sweeps if s["spec"]["base"]["step"] == "dpd"]
    assert len(dpd) == 2
    for s in dpd:
        groups = {t.get("group") for t in s["trials"]}
        assert len(groups) == 1 and None not in groups, s["trials"]
    for t in doc["trials"]:
        cfg = json.loads((tmp_path / "ws" / "runs" / t["run_id"] / "config.json").read_text())
        assert cfg["device"]["fast_path"] == "on", cfg["device"]
        assert cfg["experiment"]["kernel"] == "fast"
