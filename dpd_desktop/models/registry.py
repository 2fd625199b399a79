"""Model family registry and the ``build_model`` factory (reference §3, §3.7, §3.8)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from torch import Tensor, nn

from . import deltagru, dgru, gru, gru_amp, lstm, pn_gru, rvtdcnn, tcn, tres_deltagru, tres_gru
from .base import CoreModel
from .poly import POLY_BACKBONES, PolyBackbone
from ..config import PolySpec

__all__ = ["BACKBONES", "POLY_BACKBONES", "REGISTRY", "ModelFamily", "build_model", "build_from_arch"]


@dataclass(frozen=True)
class ModelFamily:
    """Static description of one model family.

    Attributes:
        name: registry key / ``backbone`` argument of :func:`build_model` (lower case).
        label: display name (``"TRes-GRU"``, ...).
        description: one line on the architecture (the window's tooltip).
        features: feature names per time step seen by the network, in order (§2.4).
        feature_fn: ``(B, T, 2) -> (B, T, n_features)`` feature extraction function of the family.
        backbone_cls: backbone class, constructed as ``backbone_cls(hidden_size, num_layers)``.
        formula: ``(hidden_size, num_layers) -> int`` parameter count (§3.2–§3.6); use :meth:`param_count`.
        has_layers: whether ``num_layers`` is meaningful (False for RVTDCNN, §3.6).
        poly: an MP/GMP family (models/poly.py): built from a :class:`PolySpec`, hidden size and layers ignored.
        delta: a delta-thresholded recurrence (models/deltagru.py): built with the thresholds ``thx``, ``thh``.
    """

    name: str
    label: str
    description: str
    features: tuple[str, ...]
    feature_fn: Callable[[Tensor], Tensor] = field(repr=False, compare=False)
    backbone_cls: type[nn.Module] = field(repr=False, compare=False)
    formula: Callable[[int, int], int] = field(repr=False, compare=False)
    has_layers: bool = True
    poly: bool = False
    delta: bool = False

    @property
    def n_features(self) -> int:
        return len(self.features)

    def param_count(self, hidden_size: int, num_layers: int = 1) -> int:
        """Closed-form parameter count for this family (RVTDCNN ignores ``num_layers``).

        Raises:
            ValueError: for MP/GMP, whose count depends on the orders (use models/cost.py ``model_cost``).
        """
        if self.poly:
            raise ValueError(f"{self.label}: the parameter count depends on the orders; use models.cost.model_cost")
        return int(self.formula(int(hidden_size), int(num_layers) if self.has_layers else 1))


_IQ = ("I", "Q")
_POLAR = ("I", "Q", "|x|", "|x|^3", "sin(phi)", "cos(phi)")
_TRES = ("I", "Q", "|x|", "|x|^3", "I(t+1)", "Q(t+1)")

REGISTRY: dict[str, ModelFamily] = {f.name: f for f in (
    ModelFamily("gru", "GRU", "nn.GRU(2, H) + linear head H→2 (§3.2)", _IQ, gru.features, gru.GRUBackbone,
                lambda h, n: 3 * h * h + 14 * h + 2 + (n - 1) * (6 * h * h + 6 * h)),
    ModelFamily("dgru", "DGRU", "polar-feature GRU(6, H) → ReLU(H→H) → [a; features] → 2, feature skip (§3.4)",
                _POLAR, dgru.features, dgru.DGRUBackbone,
                lambda h, n: 4 * h * h + 27 * h + 14 + (n - 1) * (6 * h * h + 6 * h)),
    ModelFamily("lstm", "LSTM", "nn.LSTM(2, H) + linear head H→2 (§3.3)", _IQ, lstm.features, lstm.LSTMBackbone,
                lambda h, n: 4 * h * h + 18 * h + 2 + (n - 1) * (8 * h * h + 8 * h)),
    ModelFamily("tres_gru", "TRes-GRU",
                "bias-free GRU(6, H) + linear H→2, plus dilated-conv TCN residual with Hardswish (§3.5)",
                _TRES, tres_gru.features, tres_gru.TResGRUBackbone,
                lambda h, n: 3 * h * h + 20 * h + 24 + (n - 1) * (6 * h * h)),
    ModelFamily("deltagru", "DeltaGRU", "delta-thresholded GRU(6, H) on polar features + linear head H→2 (OpenDPD "
                "2.4.2; dense GRU at zero thresholds)", _POLAR, deltagru.features, deltagru.DeltaGRUBackbone,
                lambda h, n: 3 * h * h + 26 * h + 2 + (n - 1) * (6 * h * h + 6 * h), delta=True),
    ModelFamily("tres_deltagru", "TRes-DeltaGRU", "TRes-GRU with a delta-thresholded bias-free recurrence (OpenDPD "
                "2.4.2; dense at zero thresholds)", _TRES, tres_gru.features, tres_deltagru.TResDeltaGRUBackbone,
                lambda h, n: 3 * h * h + 20 * h + 24 + (n - 1) * (6 * h * h), delta=True),
    ModelFamily("gru_amp", "GRU-amp", "GRU(4, H) on [I, Q, |x|, |x|³] + linear head H→2 (OpenDPD 2.4.2 qgru_amp1, "
                "float32)", ("I", "Q", "|x|", "|x|^3"), gru_amp.features, gru_amp.GRUAmpBackbone,
                lambda h, n: 3 * h * h + 20 * h + 2 + (n - 1) * (6 * h * h + 6 * h)),
    ModelFamily("pn_gru", "PN-GRU", "phase-normalized GRU(6, H) on [|x|, |x|³, x(t±1)·u*] + linear H→2 turned back by "
                "u = x/|x|: y = x + u·o (models/pn_gru.py)", ("|x|", "|x|^3", "Re x(t-1)u*", "Im x(t-1)u*",
                "Re x(t+1)u*", "Im x(t+1)u*"), pn_gru.pn_features, pn_gru.PNGRUBackbone,
                lambda h, n: 3 * h * h + 26 * h + 2 + (n - 1) * (6 * h * h + 6 * h)),
    ModelFamily("pn_gru2", "PN-GRU-2", "PN-GRU reading x(t±1) and x(t±2): GRU(10, H) (models/pn_gru.py)",
                ("|x|", "|x|^3", "Re x(t-1)u*", "Im x(t-1)u*", "Re x(t+1)u*", "Im x(t+1)u*", "Re x(t-2)u*",
                 "Im x(t-2)u*", "Re x(t+2)u*", "Im x(t+2)u*"), pn_gru.pn_features2, pn_gru.PNGRU2Backbone,
                lambda h, n: 3 * h * h + 38 * h + 2 + (n - 1) * (6 * h * h + 6 * h)),
    ModelFamily("gru_gain", "GRU-gain", "GRU(6, H) on polar features + linear H→4: y = x·(1 + g) + a, a complex gain "
                "and an additive term (models/pn_gru.py)", _POLAR, deltagru.features, pn_gru.GRUGainBackbone,
                lambda h, n: 3 * h * h + 28 * h + 4 + (n - 1) * (6 * h * h + 6 * h)),
    ModelFamily("gru_gain3", "GRU-gain-3", "GRU-gain generating complex gains on x(t−1), x(t), x(t+1): y = x + Σ "
                "x(t+k)·g_k + a (models/pn_gru.py)", _POLAR, deltagru.features, pn_gru.GRUGain3Backbone,
                lambda h, n: 3 * h * h + 24 * h + 8 * (h + 1) + (n - 1) * (6 * h * h + 6 * h)),
    ModelFamily("gru_gain3p", "GRU-gain-3p", "GRU-gain-3 plus a complex gain on x(t)·|x(t)|²: y = x + Σ x(t+k)·g_k "
                "+ x·|x|²·g_p + a (models/pn_gru.py)", _POLAR, deltagru.features, pn_gru.GRUGain3PBackbone,
                lambda h, n: 3 * h * h + 24 * h + 10 * (h + 1) + (n - 1) * (6 * h * h + 6 * h)),
    ModelFamily("gru_gain5", "GRU-gain-5", "GRU-gain generating complex gains on x(t−2) … x(t+2) (models/pn_gru.py)",
                _POLAR, deltagru.features, pn_gru.GRUGain5Backbone,
                lambda h, n: 3 * h * h + 24 * h + 12 * (h + 1) + (n - 1) * (6 * h * h + 6 * h)),
    ModelFamily("tcn", "TCN", "pointwise conv 6→C, four depthwise dilated convs (k 5), pointwise C→2, I/Q residual "
                "(OpenDPD 2.4.2 TCN; hidden size = channels C)", _POLAR, tcn.features, tcn.TCNBackbone,
                lambda h, n: 29 * h, has_layers=False),
    ModelFamily("rvtdcnn", "RVTDCNN", "real-valued time-delay CNN: 4×5 windows → Conv2d 1→3 → 36 → H → 2 (§3.6)",
                ("I", "Q", "|x|", "|x|^2", "|x|^3"), rvtdcnn.features, rvtdcnn.RVTDCNNBackbone,
                lambda h, n: 39 * h + 32, has_layers=False),
    ModelFamily("mp", "MP", "memory polynomial x(n−m)|x(n−m)|^(k−1), orders K × memory depth M (Kim & Konstantinou "
                "2001)", _IQ, gru.features, PolyBackbone, lambda h, n: 0, has_layers=False, poly=True),
    ModelFamily("gmp", "GMP", "generalized memory polynomial: MP + lagging/leading envelope cross terms (Morgan et al. "
                "2006)", _IQ, gru.features, PolyBackbone, lambda h, n: 0, has_layers=False, poly=True),
)}

#: Backbone names accepted by :func:`build_model`.
BACKBONES: tuple[str, ...] = tuple(REGISTRY)


def build_model(backbone: str, hidden_size: int, num_layers: int = 1,
                poly: PolySpec | Mapping[str, Any] | None = None, thx: float = 0.0, thh: float = 0.0) -> CoreModel:
    """Construct and initialize one model exactly as the reference does (§3.1–§3.6).

    Args:
        backbone: one of :data:`BACKBONES` (case-insensitive, surrounding whitespace ignored).
        hidden_size: H ≥ 1 (ignored by MP/GMP but still validated).
        num_layers: recurrent layers ≥ 1 (ignored by RVTDCNN, MP and GMP but still validated).
        poly: MP/GMP orders (a :class:`PolySpec` or config.json's ``poly`` block; None: the defaults).
        thx, thh: the delta thresholds of a delta family (DeltaGRU, TRes-DeltaGRU), finite and >= 0; ignored by the
            others.
    Returns:
        A :class:`CoreModel` (float32, CPU, train mode). Maps ``(B, T, 2)`` float32 → ``(B, T, 2)``.
    Raises:
        ValueError: unknown backbone (the message lists the choices), hidden_size < 1 or num_layers < 1, an MP/GMP
            order out of range, a negative or non-finite delta threshold.

    RNG: draws from the global torch generator in the reference's order (default inits in module registration
    order, then the backbone's ``reset_parameters()``, §3.1): state_dict and RNG state after the same
    ``torch.manual_seed`` are bitwise the reference's.
    """
    key = str(backbone).strip().lower()
    if key not in REGISTRY:
        raise ValueError(f"unknown backbone {backbone!r}; choose one of: {', '.join(BACKBONES)}")
    if isinstance(hidden_size, bool) or int(hidden_size) != hidden_size or hidden_size < 1:
        raise ValueError(f"hidden_size must be an integer >= 1, got {hidden_size!r}")
    if isinstance(num_layers, bool) or int(num_layers) != num_layers or num_layers < 1:
        raise ValueError(f"num_layers must be an integer >= 1, got {num_layers!r}")
    family = REGISTRY[key]
    if family.poly:  # no random numbers drawn (identity initialization)
        spec = poly if isinstance(poly, PolySpec) else PolySpec.from_mapping(key, poly)
        if spec.kind != key:
            raise ValueError(f"poly: the orders are for {spec.kind!r}, the backbone is {key!r}")
        return CoreModel(PolyBackbone(spec), key, int(hidden_size), int(num_layers))
    if family.delta:
        module = family.backbone_cls(int(hidden_size), int(num_layers), thx=thx, thh=thh)
    else:
        module = family.backbone_cls(int(hidden_size), int(num_layers))
    return CoreModel(module, key, int(hidden_size), int(num_layers))


def build_from_arch(arch: Mapping[str, Any]) -> CoreModel:
    """:func:`build_model` from a run record's architecture (``backbone``, ``hidden_size``, ``num_layers``; for
    MP/GMP ``poly``; for a delta family ``thx``, ``thh``: runs/record.py ``RunRecord.arch``)."""
    return build_model(arch["backbone"], arch["hidden_size"], arch["num_layers"], poly=arch.get("poly"),
                       thx=arch.get("thx", 0.0), thh=arch.get("thh", 0.0))
