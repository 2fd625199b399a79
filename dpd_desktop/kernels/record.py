"""What a run records of its recurrence kernels (the ``kernel`` setting, dpd_desktop/kernels), and how it reads back.

config.json's ``device.kernel`` block (written from the trainer's set-up, training/record_payload.py)::

    {"requested": "fast", "used": {"dpd": "fast", "pa": "reference"}, "ran": "mixed",
     "notes": ["pa.backbone: GRU runs on the reference kernel (<reason>)"]}

* ``requested``: the run's setting (config.json ``experiment.kernel``): "reference" or "fast".
* ``used``: per recurrent module, the kernel that ran it: ``model`` for a PA run, ``dpd`` and ``pa`` for a DPD
  cascade (its frozen PA runs under the DPD run's setting too); empty for a family without recurrence (RVTDCNN,
  MP, GMP), where the setting changes nothing.
* ``ran``: one word for all of them: "reference", "fast", "mixed" or "none" (no recurrent module).
* ``notes``: one line per module that fell back to the reference kernel, with the reason (also in log.txt).

status.json carries ``kernel`` = ``{"requested", "ran"}`` (runs/writer.py). A run recorded before the setting
existed, or one that failed before its model was built, has no block: it reads as its ``experiment.kernel``
(default "reference", what every earlier run computed). Pure Python, no torch: the runs browser and ``runs`` read it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..config import KERNELS, ExperimentConfig

#: the setting's values and the default of a run that does not record one (config.py)
REFERENCE, FAST = KERNELS
DEFAULT_KERNEL = ExperimentConfig.kernel
#: ``ran`` when mixed / when the model has no recurrent module
MIXED, NONE = "mixed", "none"


def module_key(name: str) -> str:
    """The ``used`` key of a recurrent module's qualified name: ``backbone`` → ``model``, ``dpd.backbone`` →
    ``dpd``, ``pa.backbone`` → ``pa`` (any other name is kept)."""
    short = name.removesuffix(".backbone") if name != "backbone" else ""
    return short or "model"


def ran_of(used: Mapping[str, str]) -> str:
    """One word for the kernels in ``used``: the common one, :data:`MIXED`, or :data:`NONE` when empty."""
    kinds = set(used.values())
    if not kinds:
        return NONE
    return kinds.pop() if len(kinds) == 1 else MIXED


def kernel_block(requested: str, used: Mapping[str, str], notes: Sequence[str]) -> dict[str, Any]:
    """config.json's ``device.kernel`` block (module docstring)."""
    used = {str(k): str(v) for k, v in used.items()}
    return {"requested": str(requested), "used": used, "ran": ran_of(used), "notes": [str(n) for n in notes]}


@dataclass(frozen=True)
class KernelRun:
    """The kernels a run asked for and ran (the ``device.kernel`` block read back).

    ``recorded`` is False when the run has no block (``used`` is then unknown and empty, ``ran`` the requested
    setting: runs before the setting existed ran the reference kernels)."""

    requested: str = DEFAULT_KERNEL
    used: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    recorded: bool = False

    @property
    def ran(self) -> str:
        return ran_of(self.used) if self.recorded else self.requested

    @property
    def fell_back(self) -> tuple[str, ...]:
        """The ``used`` keys that ran the reference kernel although ``fast`` was requested, in order."""
        if self.requested != FAST:
            return ()
        return tuple(k for k, v in self.used.items() if v != FAST)

    @property
    def label(self) -> str:
        """Short text for tables and the device line: ``reference``, ``fast``, ``fast → reference`` (every module
        fell back), ``fast, pa → reference`` (some did), ``fast (no recurrence)``."""
        if self.requested != FAST or not self.recorded:
            return self.requested
        if not self.used:
            return f"{FAST} (no recurrence)"
        back = self.fell_back
        if not back:
            return FAST
        if len(back) == len(self.used):
            return f"{FAST} → {REFERENCE}"
        return f"{FAST}, {', '.join(back)} → {REFERENCE}"

    def describe(self) -> str:
        """A sentence or two for tooltips and reports: what was asked, what ran per module, why any fell back."""
        meaning = {REFERENCE: "nn.GRU / nn.LSTM (cuDNN on CUDA), bitwise equal to OpenDPD 2.2.1",
                   FAST: "our own recurrence kernels: the same equations, not bitwise equal to the reference"}
        text = f"Kernel setting: {self.requested} ({meaning.get(self.requested, '?')})."
        if not self.recorded:
            return text
        if self.used:
            text += " Ran: " + ", ".join(f"{k} {v}" for k, v in self.used.items()) + "."
        else:
            text += " The model has no recurrent layer: the setting changes nothing."
        if self.notes:
            text += "\nFell back: " + "; ".join(self.notes)
        return text


def _text(v, default: str) -> str:
    return v if isinstance(v, str) and v else default


def read_kernel(doc: Mapping[str, Any] | None) -> KernelRun:
    """The :class:`KernelRun` of a run from its config.json ``doc``: the ``device.kernel`` block, else
    ``experiment.kernel`` alone (not recorded). Values of a wrong type in a hand-edited file are ignored; never
    raises."""
    doc = doc if isinstance(doc, Mapping) else {}
    exp = doc.get("experiment") if isinstance(doc.get("experiment"), Mapping) else {}
    requested = _text(exp.get("kernel"), DEFAULT_KERNEL)
    dev = doc.get("device") if isinstance(doc.get("device"), Mapping) else {}
    block = dev.get("kernel")
    if not isinstance(block, Mapping):
        return KernelRun(requested=requested)
    used = block.get("used") if isinstance(block.get("used"), Mapping) else {}
    notes = block.get("notes") if isinstance(block.get("notes"), list) else []
    return KernelRun(requested=_text(block.get("requested"), requested),
                     used={str(k): v for k, v in used.items() if isinstance(v, str)},
                     notes=tuple(str(n) for n in notes), recorded=True)
