"""DGRU family (reference §2.4, §3.4, quirk §9.5 — fixed here).

Features f = [I, Q, |x|, |x|³, sin φ = Q/|x|, cos φ = I/|x|] → ``nn.GRU(6, H)`` → a = ReLU(fc_hid(h)) →
output = fc_out([a ; f]) (the 6 features skip into the output layer).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..kernels.dispatch import DEFAULT_KERNEL, run_recurrent
from .base import init_linear_xavier_, init_recurrent_gate_blocks_, safe_amplitude

__all__ = ["DGRUBackbone", "features"]

N_FEATURES = 6


def features(x: Tensor) -> Tensor:
    """DGRU features (§2.4): ``[I, Q, |x|, |x|³, Q/|x|, I/|x|]`` in that order.

    Args:
        x: ``(B, T, 2)`` float32 I/Q.
    Returns:
        ``(B, T, 6)`` float32.

    Fix of the reference quirk (§2.4, §9.5): the reference divides by |x| with no epsilon, so an exactly-zero
    sample (zero padding of a final val/test segment) gives NaN features and NaN outputs to the end of the segment.
    Here a sample with ``I² + Q² == 0`` gets **sin φ = cos φ = 0** (the whole feature vector of a zero sample is then
    zero, consistent with zero padding). The division uses a safe denominator inside ``torch.where`` so neither the
    forward nor the backward produces NaN.

    Bitwise agreement (verified against OpenDPD 2.2.1 on CPU/float32 in tests/unit/test_models_vs_reference.py):
    for every sample with ``|x| != 0`` the features, the model output and the gradients with respect to the input and
    to every parameter are bitwise identical to the reference. That needs the reference's arithmetic *and* autograd
    order: ``|x|² = I² + Q²`` (``pow(·, 2)`` each), ``|x| = sqrt``, ``|x|³ = pow(|x|, 3)``, then ``cos φ = I/|x|``
    is formed **before** ``sin φ = Q/|x|`` (the creation order of the nodes fixes the order in which autograd sums
    the four gradient contributions reaching |x|, and float addition is not associative).
    """
    i = x[..., 0]
    q = x[..., 1]
    amp = safe_amplitude(i, q)
    nonzero = amp != 0
    # Creation order: |x|³, then cos φ, then sin φ — as in the reference (see the docstring for why it matters).
    # Each division gets its own pass-through ``where`` on ``amp`` so the gradient contributions reach |x| in the
    # same order and with the same values as in the unguarded formula.
    amp3 = amp**3
    cos_phi = _safe_div(i, amp, nonzero)
    sin_phi = _safe_div(q, amp, nonzero)
    return torch.stack([i, q, amp, amp3, sin_phi, cos_phi], dim=-1)


def _safe_div(num: Tensor, amp: Tensor, nonzero: Tensor) -> Tensor:
    """``num / amp`` where ``nonzero`` else 0, with a safe denominator so neither value nor gradient is NaN."""
    den = torch.where(nonzero, amp, torch.ones_like(amp))
    return torch.where(nonzero, num / den, torch.zeros_like(amp))


class DGRUBackbone(nn.Module):
    """DGRU backbone (§3.4).

    Submodules, in registration (= default-init RNG = state_dict key) order, as in the reference: ``rnn`` =
    ``nn.GRU(6, H, num_layers, bias=True, batch_first=True)``, then ``fc_out`` = ``nn.Linear(H + 6, 2)``, then
    ``fc_hid`` = ``nn.Linear(H, H)`` (the output layer is registered *before* the hidden layer, although data flows
    rnn → fc_hid → fc_out). state_dict keys (1 layer): ``rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0,
    rnn.bias_hh_l0, fc_out.weight, fc_out.bias, fc_hid.weight, fc_hid.bias``.

    Custom init (``reset_parameters``), in the same order rnn → fc_out → fc_hid: GRU exactly as §3.2 (gate-block
    orthogonal, Xavier blocks on ``weight_ih_l0`` with fan_in 6, zero biases); ``fc_out.weight`` Xavier-uniform, zero
    bias; ``fc_hid.weight`` ``kaiming_uniform_`` with PyTorch defaults (a = 0, fan_in, leaky_relu gain √2 → bound
    √(6/H)), zero bias.

    Verified bitwise against OpenDPD 2.2.1 (CPU, float32; tests/unit/test_models_vs_reference.py): state_dict keys,
    key order and values after the same ``torch.manual_seed``, the RNG state afterwards, the forward output and the
    input/parameter gradients for inputs without exactly-zero samples (a zero sample is our documented fix, see
    :func:`features`).

    Parameters (1 layer): 4H² + 27H + 14 (H = 23 → 2,751); each extra GRU layer adds 6H² + 6H.

    forward(x ``(B, T, 2)`` float32, h0 ``(L, B, H)``) → ``(B, T, 2)``.
    """

    def __init__(self, hidden_size: int, num_layers: int = 1, output_size: int = 2) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.kernel = DEFAULT_KERNEL  # "reference" | "fast" (dpd_desktop/kernels); not in the state_dict
        self.rnn = nn.GRU(input_size=N_FEATURES, hidden_size=hidden_size, num_layers=num_layers, bias=True,
                          batch_first=True, bidirectional=False)
        # Registration order rnn, fc_out, fc_hid fixes the default-init RNG consumption and the key order (§3.4).
        self.fc_out = nn.Linear(hidden_size + N_FEATURES, output_size, bias=True)
        self.fc_hid = nn.Linear(hidden_size, hidden_size, bias=True)

    def reset_parameters(self) -> None:
        """§3.4 init, order rnn → fc_out → fc_hid: GRU (§3.2), fc_out Xavier + zero bias, fc_hid Kaiming-uniform
        + zero bias."""
        init_recurrent_gate_blocks_(self.rnn, self.hidden_size)
        init_linear_xavier_(self.fc_out)
        with torch.no_grad():
            nn.init.kaiming_uniform_(self.fc_hid.weight)
            self.fc_hid.bias.zero_()

    def forward_features(self, f: Tensor, h0: Tensor) -> Tensor:
        """Run the network on precomputed features f ``(B, T, 6)`` with h0 ``(L, B, H)`` → ``(B, T, 2)``."""
        h = run_recurrent(self.rnn, f, h0, self.kernel)
        a = torch.relu(self.fc_hid(h))
        return self.fc_out(torch.cat([a, f], dim=-1))

    def forward(self, x: Tensor, h0: Tensor) -> Tensor:
        """x ``(B, T, 2)``, h0 ``(L, B, H)`` → ``(B, T, 2)``."""
        return self.forward_features(features(x), h0)
