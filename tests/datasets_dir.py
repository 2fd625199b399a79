"""Where the tests find the measured datasets: ``$DPD_DESKTOP_DATASETS`` when set, else ``../shared/datasets``
beside the checkout (where CI lays it). Tests that need one skip outside CI when it is absent (tests/conftest.py)."""
import os
from pathlib import Path

DATASETS = Path(os.environ.get("DPD_DESKTOP_DATASETS")
                or Path(__file__).resolve().parents[1].parent / "shared" / "datasets")
