"""What the loop tells its observers (the loop record, the command line, the window's worker): plain immutable
dataclasses, emitted on the loop's thread. Arrays are small (one PSD of ``nperseg`` points per signal)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np


@dataclass(frozen=True)
class LoopStarted:
    loop_id: str
    folder: str
    config: Mapping[str, Any]
    bench: Mapping[str, Any]
    signal: Mapping[str, Any]
    identities: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LoopLog:
    """One line of the loop's log (also in each iteration's log.txt)."""

    text: str


@dataclass(frozen=True)
class IterationEnded:
    """One capture measured. ``metrics``: NMSE/EVM [dB], ACLR_L/R/AVG [dBc] of the gain-normalised output against
    x; ``output_dbm`` the captured RMS power, ``input_rms_dbm`` / ``input_peak_dbm`` the waveform played;
    ``delay_samples``, ``gain_db``, ``phase_deg`` the alignment; ``psd``: name → (frequency [MHz], PSD [dB/Hz])."""

    loop_id: str
    index: int
    kind: str
    run_id: str
    run_dir: str
    metrics: Mapping[str, float]
    output_dbm: float
    target_output_dbm: float
    input_rms_dbm: float
    input_peak_dbm: float
    delay_samples: float
    gain_db: float
    phase_deg: float
    psd: Mapping[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        """The iteration as loop.json and the tables list it."""
        return {"index": self.index, "kind": self.kind, "run_id": self.run_id, **dict(self.metrics),
                "output_dbm": self.output_dbm, "target_output_dbm": self.target_output_dbm,
                "input_rms_dbm": self.input_rms_dbm, "input_peak_dbm": self.input_peak_dbm,
                "delay_samples": self.delay_samples, "gain_db": self.gain_db, "phase_deg": self.phase_deg}


@dataclass(frozen=True)
class LoopEnded:
    """The loop's end: ``state`` a run state (succeeded, failed, cancelled); ``message`` one line (why it stopped,
    or the error); ``rf_off`` whether the generator's RF is known to be off."""

    loop_id: str
    folder: str
    state: str
    message: str
    iterations: int
    rf_off: bool
    best: Mapping[str, Any] | None = None
