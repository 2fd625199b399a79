"""Live batch preview: a frozen copy of the model runs validation segment 0 every N batches.

Only used when the user ticks "Live batch preview" (it costs extra inference). The copy is made once per run,
outside inference mode, put in eval mode with gradients off, and its cuDNN RNN weights are repacked once
(``flatten_parameters``) so that previews neither run on unpacked weights nor warn about non-contiguous weights.
Each preview copies the live weights in place (``load_state_dict``) and runs under ``torch.inference_mode``; it
uses no random numbers, so training (and a captured CUDA graph) is unaffected.
"""
from __future__ import annotations

import copy


class BatchPreview:
    """Shadow model for previews. ``run(live_net) -> (1, N, 2) float32 numpy`` prediction of val segment 0."""

    def __init__(self, net, val_set, device):
        import torch

        self.shadow = copy.deepcopy(net)
        self.shadow.eval()
        for p in self.shadow.parameters():
            p.requires_grad_(False)
        for m in self.shadow.modules():
            if isinstance(m, torch.nn.RNNBase):
                m.flatten_parameters()
        self.x0 = val_set["x"][:1]

    def run(self, live_net):
        import torch

        with torch.inference_mode():
            self.shadow.load_state_dict(live_net.state_dict())
            return self.shadow(self.x0).cpu().numpy()
