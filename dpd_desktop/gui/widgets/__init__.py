"""Small widgets of the main window (form, banner, dataset summary, epoch table)."""
from .banner import OutcomeBanner
from .config_form import ConfigForm
from .inputs import LearningRateSpinBox
from .dataset_summary import DatasetSummary
from .epoch_table import EpochTable
from .signal_legend import SignalLegend

__all__ = ["OutcomeBanner", "ConfigForm", "LearningRateSpinBox", "DatasetSummary", "EpochTable", "SignalLegend"]
