"""Neural PA / DPD model families (reference OpenDPD 2.2.1 behavior, spec sections 2.4, 2.5, 3, 5.1).

Public API:

* :func:`build_model` ``(backbone, hidden_size, num_layers=1) -> CoreModel`` — ``(B, T, 2)`` float32 → ``(B, T, 2)``.
* :data:`REGISTRY` ``dict[str, ModelFamily]`` and :data:`BACKBONES` (accepted names).
* :func:`build_from_arch` (a run record's architecture, MP/GMP orders included); models/poly.py: the MP/GMP basis,
  least squares and module; models/cost.py: parameters and MACs per sample of every family.
* :class:`CoreModel` (wrapper, §3.1), :class:`Cascade` (DPD → frozen PA, §5.1), :func:`count_parameters`.
"""

from .base import CoreModel, count_parameters
from .cascade import Cascade
from .registry import BACKBONES, POLY_BACKBONES, REGISTRY, ModelFamily, build_from_arch, build_model

__all__ = ["BACKBONES", "POLY_BACKBONES", "REGISTRY", "Cascade", "CoreModel", "ModelFamily", "build_from_arch",
           "build_model", "count_parameters"]
