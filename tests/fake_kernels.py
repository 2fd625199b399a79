"""A fake fast-kernel backend for the kernel-setting tests: PyTorch's GRU / LSTM gate equations as a plain step loop
over time (float32, autograd through every step), installed in place of ``dpd_desktop.kernels.cpu_rnn``'s functions.

It records every call (which recurrence, and the ``weight_hh`` tensor it was given), so a test can tell that fast
mode really reached the backend for each module, and that reference mode never did. Its numbers are checked against
``nn.GRU`` / ``nn.LSTM`` in float64 (tests/unit/test_kernel_backend.py).

Gate equations (torch.nn.GRU / torch.nn.LSTM documentation):
    GRU:  r, z, n = σ(W_ir x + b_ir + W_hr h + b_hr), σ(W_iz x + b_iz + W_hz h + b_hz),
          tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn));  h' = (1 − z) ⊙ n + z ⊙ h
    LSTM: i, f, g, o = σ(·), σ(·), tanh(·), σ(·) of W_i x + b_i + W_h h + b_h;  c' = f ⊙ c + i ⊙ g;  h' = o ⊙ tanh(c')
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch


def gru_steps(x, h0, w_ih, w_hh, b_ih, b_hh):
    """``(B, T, I)``, ``(B, H)`` → ``(B, T, H)``; biases may be None."""
    gi = x @ w_ih.t() + (b_ih if b_ih is not None else 0)
    h, out = h0, []
    for t in range(x.shape[1]):
        gh = h @ w_hh.t() + (b_hh if b_hh is not None else 0)
        i_r, i_z, i_n = gi[:, t].chunk(3, dim=-1)
        h_r, h_z, h_n = gh.chunk(3, dim=-1)
        r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        h = (1 - z) * n + z * h
        out.append(h)
    return torch.stack(out, dim=1)


def lstm_steps(x, h0, c0, w_ih, w_hh, b_ih, b_hh):
    """``(B, T, I)``, ``(B, H)``, ``(B, H)`` → ``(B, T, H)``."""
    gi = x @ w_ih.t() + b_ih
    h, c, out = h0, c0, []
    for t in range(x.shape[1]):
        i, f, g, o = (gi[:, t] + h @ w_hh.t() + b_hh).chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        out.append(h)
    return torch.stack(out, dim=1)


@dataclass
class FakeBackend:
    """The calls seen: ``(kind, weight_hh)`` per call; ``refuse(rnn) -> reason | None`` decides ``unsupported``."""

    calls: list = field(default_factory=list)
    refuse: object = None

    def unsupported(self, rnn):
        return self.refuse(rnn) if self.refuse is not None else None

    def gru_sequence(self, x, h0, w_ih, w_hh, b_ih, b_hh):
        _float32(x, h0, w_ih, w_hh, b_ih, b_hh)
        self.calls.append(("gru", w_hh))
        return gru_steps(x, h0, w_ih, w_hh, b_ih, b_hh)

    def lstm_sequence(self, x, h0, c0, w_ih, w_hh, b_ih, b_hh):
        _float32(x, h0, c0, w_ih, w_hh, b_ih, b_hh)
        self.calls.append(("lstm", w_hh))
        return lstm_steps(x, h0, c0, w_ih, w_hh, b_ih, b_hh)

    def saw(self, weight) -> int:
        """How many calls were given exactly this tensor as ``weight_hh``."""
        return sum(1 for _, w in self.calls if w is weight)


def _float32(*tensors):
    for t in tensors:
        assert t is None or t.dtype == torch.float32, f"the backend contract is float32, got {t.dtype}"


def install(monkeypatch, refuse=None) -> FakeBackend:
    """Put a :class:`FakeBackend` in place of ``dpd_desktop.kernels.cpu_rnn``'s ``unsupported``, ``gru_sequence`` and
    ``lstm_sequence``; returns it."""
    from dpd_desktop.kernels import cpu_rnn

    fake = FakeBackend(refuse=refuse)
    monkeypatch.setattr(cpu_rnn, "unsupported", fake.unsupported)
    monkeypatch.setattr(cpu_rnn, "gru_sequence", fake.gru_sequence)
    monkeypatch.setattr(cpu_rnn, "lstm_sequence", fake.lstm_sequence)
    return fake


#: the stub's reason (what cpu_rnn said before its kernels were built): tests of a fallback install it, so that they
#: keep testing a fallback once the real CPU kernels exist
STUB_REASON = "no fast kernel is built for this device yet"


def install_stub(monkeypatch) -> None:
    """Make ``cpu_rnn.unsupported`` refuse every module with :data:`STUB_REASON`."""
    from dpd_desktop.kernels import cpu_rnn

    monkeypatch.setattr(cpu_rnn, "unsupported", lambda rnn: STUB_REASON)
