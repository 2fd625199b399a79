"""The kernel setting reaches the backend (issue 14 point 2): in ``fast`` mode every recurrent family (GRU, DGRU, LSTM,
TRes-GRU) and both modules of a DPD cascade run their recurrence through the backend module (here a fake, a plain
step loop checked against float64 nn.GRU / nn.LSTM, tests/fake_kernels.py); in ``reference`` mode the backend is
never called and the recurrence is nn.GRU / nn.LSTM bitwise."""
from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from fake_kernels import STUB_REASON, gru_steps, install, install_stub, lstm_steps  # tests/fake_kernels.py

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.kernels.dispatch import apply_kernel, run_recurrent
from dpd_desktop.models import Cascade, build_model
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training.trainer import Trainer

RECURRENT = ("gru", "dgru", "lstm", "tres_gru")
DEMO = dict(seed=2, n_train=3000, n_val=4096, n_test=4096)


def _inputs(seed=0, b=3, t=17, h=5, layers=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, t, 2, generator=g) * 0.5, torch.randn(layers, b, h, generator=g) * 0.3


@pytest.fixture(scope="module")
def ds():
    return make_demo_dataset(**DEMO)


# ------------------------------------------------------------------------------------------------ the fake itself
@pytest.mark.parametrize("kind", ["gru", "gru-nobias", "lstm"])
def test_the_fake_step_loop_equals_float64_torch(kind):
    """The fake backend is PyTorch's recurrence: float32 step loop against nn.GRU / nn.LSTM in float64, forward and
    gradients of the input, h0 and every weight."""
    torch.manual_seed(1)
    cls = nn.LSTM if kind == "lstm" else nn.GRU
    rnn = cls(input_size=4, hidden_size=7, batch_first=True, bias=kind != "gru-nobias")
    x = torch.randn(2, 30, 4, requires_grad=True)
    h0 = (torch.randn(1, 2, 7) * 0.5).requires_grad_()
    ref = cls(input_size=4, hidden_size=7, batch_first=True, bias=kind != "gru-nobias").double()
    ref.load_state_dict({k: v.double() for k, v in rnn.state_dict().items()})
    x64, h64 = x.detach().double().requires_grad_(), h0.detach().double().requires_grad_()
    if kind == "lstm":
        y = lstm_steps(x, h0[0], h0[0], rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, rnn.bias_hh_l0)
        y64 = ref(x64, (h64, h64))[0]
    else:
        b_ih, b_hh = (rnn.bias_ih_l0, rnn.bias_hh_l0) if rnn.bias else (None, None)
        y = gru_steps(x, h0[0], rnn.weight_ih_l0, rnn.weight_hh_l0, b_ih, b_hh)
        y64 = ref(x64, h64)[0]
    assert torch.allclose(y.double(), y64, rtol=0, atol=2e-6)
    w = torch.linspace(-1, 1, y.numel()).reshape(y.shape)
    (y * w).sum().backward()
    (y64 * w.double()).sum().backward()
    pairs = [(x.grad, x64.grad), (h0.grad, h64.grad)] + [(p.grad, q.grad) for p, q in zip(rnn.parameters(),
                                                                                        ref.parameters())]
    for g32, g64 in pairs:
        assert torch.allclose(g32.double(), g64, rtol=1e-5, atol=1e-5 * float(g64.abs().max()))


# ------------------------------------------------------------------------------------------------ models
@pytest.mark.parametrize("family", RECURRENT)
@pytest.mark.parametrize("layers", [1, 2])
def test_fast_mode_calls_the_backend_for_every_layer_and_matches_reference(monkeypatch, family, layers):
    fake = install(monkeypatch)
    torch.manual_seed(3)
    net = build_model(family, 5, layers)
    rnn = net.backbone.rnn
    x, h0 = _inputs(h=5, layers=layers)
    y_ref = net.backbone(x, h0)
    assert fake.calls == []  # the default is reference
    choice = apply_kernel(net, "fast", "cpu")
    assert choice.notes == () and choice.used == {"model": "fast"}
    y_fast = net.backbone(x, h0)
    kind = "lstm" if family == "lstm" else "gru"
    assert [k for k, _ in fake.calls] == [kind] * layers
    for layer in range(layers):
        assert fake.saw(getattr(rnn, f"weight_hh_l{layer}")) == 1
    assert torch.allclose(y_fast, y_ref, rtol=0, atol=1e-5)
    # the gradients reach every recurrent weight through the backend
    y_fast.pow(2).mean().backward()
    for name, p in rnn.named_parameters():
        assert p.grad is not None and float(p.grad.abs().sum()) > 0, name


@pytest.mark.parametrize("family", RECURRENT)
def test_reference_mode_never_calls_the_backend_and_is_nn_recurrence_bitwise(monkeypatch, family):
    fake = install(monkeypatch)
    torch.manual_seed(4)
    net = build_model(family, 6, 2)
    choice = apply_kernel(net, "reference", "cpu")
    assert choice.notes == () and choice.used == {"model": "reference"}
    rnn = net.backbone.rnn
    f = torch.randn(3, 20, rnn.input_size)
    h0 = torch.randn(2, 3, 6)
    y = run_recurrent(rnn, f, h0, "reference")
    direct = rnn(f, (h0, h0))[0] if family == "lstm" else rnn(f, h0)[0]
    assert torch.equal(y, direct)
    x, h0 = _inputs(h=6, layers=2)
    net.backbone(x, h0).sum().backward()
    assert fake.calls == []


def test_cascade_fast_mode_runs_the_dpd_and_the_frozen_pa_through_the_backend(monkeypatch):
    fake = install(monkeypatch)
    torch.manual_seed(5)
    dpd, pa = build_model("gru", 4, 1), build_model("lstm", 6, 1)
    net = Cascade(dpd, pa).freeze_pa()
    choice = apply_kernel(net, "fast", "cpu")
    assert choice.notes == () and choice.used == {"dpd": "fast", "pa": "fast"}
    net(torch.randn(2, 25, 2) * 0.4).pow(2).mean().backward()
    assert fake.saw(dpd.backbone.rnn.weight_hh_l0) == 1 and fake.saw(pa.backbone.rnn.weight_hh_l0) == 1
    assert dpd.backbone.rnn.weight_hh_l0.grad is not None and pa.backbone.rnn.weight_hh_l0.grad is None


def test_a_refused_module_falls_back_alone_with_its_reason(monkeypatch):
    install(monkeypatch, refuse=lambda rnn: "hidden 6 is not built" if rnn.hidden_size == 6 else None)
    net = Cascade(build_model("gru", 4, 1), build_model("gru", 6, 1))
    choice = apply_kernel(net, "fast", "cpu")
    assert choice.notes == ("pa: GRU runs on the reference kernel (hidden 6 is not built)",)
    assert choice.used == {"dpd": "fast", "pa": "reference"}
    assert net.dpd.backbone.kernel == "fast" and net.pa.backbone.kernel == "reference"


@pytest.mark.parametrize("family", ["rvtdcnn", "mp"])
def test_families_without_recurrence_have_no_kernel_to_choose(family):
    net = build_model(family, 5, 1)
    choice = apply_kernel(net, "fast", "cpu")
    assert choice.notes == () and choice.used == {} and choice.summary == "no recurrent layer"


# ------------------------------------------------------------------------------------------------ training runs
def _cfg(**kw):
    base = dict(step="pa", dataset="demo", backbone="gru", hidden_size=4, epochs=1, frame_length=50, stride=8,
                device="cpu")
    base.update(kw)
    return ExperimentConfig(**base)


def _doc(run_dir):
    return json.loads((run_dir / "config.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("family", RECURRENT)
def test_a_fast_run_trains_through_the_backend_within_0_01_db_of_reference(monkeypatch, tmp_path, ds, family):
    ws = Workspace(tmp_path)
    ref = Trainer(_cfg(backbone=family), dataset=ds, workspace=ws).run()
    fake = install(monkeypatch)
    fast = Trainer(_cfg(backbone=family, kernel="fast"), dataset=ds, workspace=ws).run()
    assert ref.state == fast.state == "succeeded"
    # one call per training batch (6 in the epoch), per val/test evaluation batch and in the final evaluation
    assert len(fake.calls) > 6
    assert {k for k, _ in fake.calls} == {"lstm" if family == "lstm" else "gru"}
    for k in ("NMSE", "ACLR_AVG", "EVM"):
        assert abs(fast.test_metrics[k] - ref.test_metrics[k]) < 0.01, (k, fast.test_metrics, ref.test_metrics)
    assert _doc(fast.run_dir)["device"]["kernel"] == {"requested": "fast", "used": {"model": "fast"}, "ran": "fast",
                                                      "notes": []}
    assert _doc(ref.run_dir)["device"]["kernel"] == {"requested": "reference", "used": {"model": "reference"},
                                                     "ran": "reference", "notes": []}


def test_a_fast_dpd_run_trains_through_the_backend_for_both_modules(monkeypatch, tmp_path, ds):
    ws = Workspace(tmp_path)
    pa = Trainer(_cfg(backbone="lstm", hidden_size=6), dataset=ds, workspace=ws).run()
    ref = Trainer(_cfg(step="dpd", pa_run=pa.run_id), dataset=ds, workspace=ws).run()
    fake = install(monkeypatch)
    tr = Trainer(_cfg(step="dpd", pa_run=pa.run_id, kernel="fast"), dataset=ds, workspace=ws)
    fast = tr.run()
    assert fast.state == ref.state == "succeeded"
    assert fake.saw(tr.net.dpd.backbone.rnn.weight_hh_l0) > 6 and fake.saw(tr.net.pa.backbone.rnn.weight_hh_l0) > 6
    assert {k for k, _ in fake.calls} == {"gru", "lstm"}
    for k in ("NMSE", "ACLR_AVG", "EVM"):
        assert abs(fast.test_metrics[k] - ref.test_metrics[k]) < 0.01, k
    assert _doc(fast.run_dir)["device"]["kernel"] == {"requested": "fast", "used": {"dpd": "fast", "pa": "fast"},
                                                      "ran": "fast", "notes": []}


def test_a_fast_run_that_falls_back_logs_and_records_why(monkeypatch, tmp_path, ds):
    install_stub(monkeypatch)
    ws = Workspace(tmp_path)
    pa = Trainer(_cfg(kernel="fast"), dataset=ds, workspace=ws).run()
    note = f"model: GRU runs on the reference kernel ({STUB_REASON})"
    assert pa.state == "succeeded"
    assert f"kernel: {note}" in (pa.run_dir / "log.txt").read_text(encoding="utf-8")
    assert _doc(pa.run_dir)["device"]["kernel"] == {"requested": "fast", "used": {"model": "reference"},
                                                    "ran": "reference", "notes": [note]}
    status = json.loads((pa.run_dir / "status.json").read_text(encoding="utf-8"))
    assert status["state"] == "succeeded" and status["kernel"] == {"requested": "fast", "ran": "reference"}
    dpd = Trainer(_cfg(step="dpd", pa_run=pa.run_id, kernel="fast"), dataset=ds, workspace=ws).run()
    log = (dpd.run_dir / "log.txt").read_text(encoding="utf-8")
    notes = [f"dpd: GRU runs on the reference kernel ({STUB_REASON})",
             f"pa: GRU runs on the reference kernel ({STUB_REASON})"]
    assert all(f"kernel: {n}" in log for n in notes)
    assert _doc(dpd.run_dir)["device"]["kernel"] == {"requested": "fast", "used": {"dpd": "reference",
                                                                                   "pa": "reference"},
                                                     "ran": "reference", "notes": notes}
    # numbers: a run that fell back is the reference run, bitwise
    ref = Trainer(_cfg(), dataset=ds, workspace=ws).run()
    assert ref.test_metrics == pa.test_metrics
