"""Plot panels, one file per plot. Each panel creates its curves once and updates them with ``setData``."""
from .amam import AMAMPanel
from .ampm import AMPMPanel
from .base import PlotPanel
from .ccdf import CCDFPanel
from .compression import CompressionPanel, PinPoutPanel
from .learning import LearningPanel
from .psd import PSDPanel
from .timedomain import TimeDomainPanel

__all__ = ["PlotPanel", "LearningPanel", "PSDPanel", "AMAMPanel", "AMPMPanel", "TimeDomainPanel", "CompressionPanel",
           "PinPoutPanel", "CCDFPanel", "DEFAULT_PANELS"]

#: The default panels in export order.
DEFAULT_PANELS = (LearningPanel, PSDPanel, AMAMPanel, AMPMPanel, TimeDomainPanel)
