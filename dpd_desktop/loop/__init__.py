"""The instrument loop: play a waveform through a PA, capture it, align and normalise it, measure it and update
the predistortion (ILC or indirect learning, then a trained DPD family fitted through the training core), for N
iterations or until the ACLR/EVM targets are met. No Qt.

    config.py   LoopConfig (validated, serializable)
    signal.py   the reference waveform and its channel layout
    align.py    fractional delay estimation, alignment, gain/phase, period averaging
    update.py   ILC and ILA updates
    measure.py  metrics (dpd_desktop/metrics) and spectra of one capture
    engine.py   LoopRunner: the loop, safety (power limit, mute first), stop
    store.py    loop.json and the iteration runs (written by runs/writer.py's RunWriter)
    fit.py      direct learning of a DPD family through the training core
    dataset.py  a capture → a dataset folder in one step (analysis/capture_import.py)
    report.py   the loop's HTML report
"""
from .config import LoopConfig

__all__ = ["LoopConfig"]
