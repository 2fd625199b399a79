"""Datasets: readers (split CSV, single CSV, HDF5), spec normalization and the synthetic demo dataset.

Public API::

    load_dataset(path) -> IQDataset          # folder / .csv / .h5 (dpd_desktop.data.readers)
    IQDataset, Split                         # containers: (N, 2) float32 I/Q arrays + DatasetSpec
    DatasetSpec, normalize_spec              # spec.json fields, spellings in the wild (dpd_desktop.data.spec)
    DatasetError                             # every data error; message names file + line/field + expectation
    make_demo_dataset, write_demo_dataset    # synthetic 4-carrier OFDM through a virtual PA
    save_hdf5, save_split_csv                # writers (HDF5 layout: docs/hdf5-layout.md)

No Qt or PyTorch imports (``dpd_desktop.data.framing``, the batch loader, imports PyTorch and is not imported here).
"""

from .errors import DatasetError
from .readers import IQDataset, Split, load_dataset, read_iq_csv, save_hdf5, save_split_csv
from .spec import DatasetSpec, normalize_spec, read_spec_file
from .synthetic import make_demo_dataset, write_demo_dataset

__all__ = [
    "load_dataset",
    "IQDataset",
    "Split",
    "DatasetSpec",
    "DatasetError",
    "make_demo_dataset",
    "write_demo_dataset",
    "normalize_spec",
    "read_spec_file",
    "read_iq_csv",
    "save_hdf5",
    "save_split_csv",
]
