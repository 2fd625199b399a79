"""CudaGraphStep._pointers (training/fast_path.py): the addresses a captured graph holds, so that a changed one
makes the step capture again — parameters and gradients always, the AdamW moments once the update is in the graph
(GraphAdamW or the fused GRU step bake them in). CPU: no capture is needed to check the bookkeeping."""
import torch

from dpd_desktop.data.framing import FrameLoader
from dpd_desktop.training.fast_path import CudaGraphStep
from dpd_desktop.training.optim import AdamW


def _step():
    net = torch.nn.Linear(2, 2)
    params = list(net.parameters())
    opt = AdamW(params, lr=1e-3)
    series = torch.zeros(100, 2)
    step = CudaGraphStep(net, torch.nn.MSELoss(), params, 0.0, torch.device("cpu"),
                         FrameLoader(series, series, 10, 1, 8), 8, optimizer=opt)
    for p in params:
        p.grad = torch.zeros_like(p)
    return step, params, opt


def test_the_moments_count_once_the_update_is_in_the_graph():
    step, params, opt = _step()
    assert step._pointers() == tuple((p.data_ptr(), p.grad.data_ptr()) for p in params)
    opt.ensure_state()
    step.graph_opt = object()  # the update is captured
    before = step._pointers()
    assert before[0] == (params[0].data_ptr(), params[0].grad.data_ptr(),
                         opt.state[params[0]]["exp_avg"].data_ptr(), opt.state[params[0]]["exp_avg_sq"].data_ptr())
    opt.state[params[1]]["exp_avg_sq"] = torch.zeros_like(params[1])  # e.g. a state dict loaded after the capture
    after = step._pointers()
    assert after[0] == before[0] and after[1] != before[1]
