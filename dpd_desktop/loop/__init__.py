"""The instrument loop: play a waveform through a PA, capture, align, normalise and measure it, update the
predistortion (ILC or indirect learning, then a DPD family fitted through the training core), for N iterations or
until the ACLR/EVM targets are met. Driven by engine.py ``LoopRunner``, recorded by store.py. No Qt.
"""
from .config import LoopConfig

__all__ = ["LoopConfig"]
