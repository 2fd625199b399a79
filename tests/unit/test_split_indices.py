"""spec.json's ``split_indices`` cuts a single CSV at the rows it names (it was silently ignored, the ratios used);
out-of-range, out-of-order, overlapping or mistyped values are refused naming spec.json and the field. spec.json's
``csv_filename`` is confined to the dataset folder: a path or a link leading out of it is refused without the
foreign file being read (its first line was echoed in the error)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from dpd_desktop.cli.entry import main
from dpd_desktop.data import DatasetError, load_dataset, make_demo_dataset, save_hdf5, save_split_csv

N = 6000
SPEC = {"dataset_format": "single_csv", "csv_filename": "data.csv", "input_signal_fs": 800e6, "bw_main_ch": 200e6,
        "n_sub_ch": 1, "nperseg": 256}


@pytest.fixture
def single(tmp_path):
    """A single-CSV dataset folder of N rows whose I_in column is the row number (rows are told apart)."""
    folder = tmp_path / "single"
    folder.mkdir()
    rows = "".join(f"{i},{-i},{2 * i},{-2 * i}\n" for i in range(N))
    (folder / "data.csv").write_text("I_in,Q_in,I_out,Q_out\n" + rows)
    return folder


def _spec(folder, **kw):
    (folder / "spec.json").write_text(json.dumps({**SPEC, **kw}))


def _rows(split) -> tuple[int, int]:
    """(first, last + 1) row numbers of a split (I_in holds the row number)."""
    i = split.x[:, 0]
    assert np.array_equal(i, np.arange(i[0], i[0] + len(i), dtype=np.float32))  # contiguous, in order
    return int(i[0]), int(i[-1]) + 1


@pytest.mark.parametrize("indices,expected", [
    ({"train_end": 1000, "val_end": 4500}, {"train": (0, 1000), "val": (1000, 4500), "test": (4500, N)}),
    ({"train": [0, 3000], "val": [3100, 4000], "test": [4100, 5900]},
     {"train": (0, 3000), "val": (3100, 4000), "test": (4100, 5900)}),
    ({"train": [10, 20], "val": [20, 30], "test": [30, N]}, {"train": (10, 20), "val": (20, 30), "test": (30, N)}),
])
def test_split_indices_cut_the_single_csv_at_their_rows(single, indices, expected):
    _spec(single, split_indices=indices)  # the ratios (default 0.6/0.2/0.2) would give 3600/1200/1200
    ds = load_dataset(single)
    assert {s: _rows(sp) for s, sp in ds.splits.items()} == expected
    _spec(single)  # without them, the ratios as before
    assert {s: _rows(sp) for s, sp in load_dataset(single).splits.items()} == {
        "train": (0, 3600), "val": (3600, 4800), "test": (4800, N)}


@pytest.mark.parametrize("indices,field,words", [
    ({"train_end": 1000, "val_end": N + 1}, "split_indices.val_end", "do not fit the file's 6000 data rows"),
    ({"train_end": 1000, "val_end": N}, "split_indices.val_end", "split test would be rows [6000, 6000)"),
    ({"train_end": 0, "val_end": 10}, "split_indices.train_end", "the train split would be empty"),
    ({"train_end": 3000, "val_end": 2000}, "split_indices.val_end", "is not after train_end"),
    ({"train": [0, 3000], "val": [2999, 4000], "test": [4000, N]}, "split_indices.val", "overlap or are out of order"),
    ({"train": [4000, N], "val": [0, 100], "test": [100, 200]}, "split_indices.val", "overlap or are out of order"),
    ({"train": [0, 10], "val": [10, 20], "test": [20, N + 5]}, "split_indices.test", "do not fit"),
    ({"train": [5, 5], "val": [10, 20], "test": [20, 30]}, "split_indices.train", "is empty"),
    ({"train_end": -1, "val_end": 10}, "split_indices.train_end", "an integer >= 0"),
    ({"train_end": "1000", "val_end": 4000}, "split_indices.train_end", "an integer >= 0"),
    ({"train_end": True, "val_end": 4000}, "split_indices.train_end", "an integer >= 0"),
    ({"train_end": 1.5, "val_end": 4000}, "split_indices.train_end", "an integer >= 0"),
    ({"train": [0, 10], "val": [10, 20]}, "split_indices", "expected the keys"),
    ({"train_end": 10}, "split_indices", "expected the keys"),
    ([1000, 4000], "split_indices", "expected an object"),
    ({"train": [0], "val": [10, 20], "test": [20, 30]}, "split_indices.train", "a row range [start, end]"),
])
def test_bad_split_indices_name_spec_json_and_the_field(single, indices, field, words, capsys):
    _spec(single, split_indices=indices)
    with pytest.raises(DatasetError) as info:
        load_dataset(single)
    msg = str(info.value)
    assert msg.startswith(f"spec.json field '{field}': ") and words in msg, msg
    assert main(["inspect", str(single)]) == 2
    assert f"spec.json field '{field}'" in capsys.readouterr().err


def test_split_indices_of_a_split_folder_or_hdf5_must_agree_with_the_stored_splits(tmp_path):
    ds = make_demo_dataset(seed=1, n_train=1000, n_val=512, n_test=512, nperseg=256)
    folder = save_split_csv(ds, tmp_path / "split")
    spec = json.loads((folder / "spec.json").read_text())
    for indices in ({"train_end": 1000, "val_end": 1512}, {"train": [0, 1000], "val": [1000, 1512],
                                                            "test": [1512, 2024]}):
        (folder / "spec.json").write_text(json.dumps({**spec, "split_indices": indices}))
        assert load_dataset(folder).n_samples == {"train": 1000, "val": 512, "test": 512}
    (folder / "spec.json").write_text(json.dumps({**spec, "split_indices": {"train_end": 900, "val_end": 1512}}))
    with pytest.raises(DatasetError, match=r"^spec.json field 'split_indices': the split indices train \[0, 900\)"
                                           r".* disagree with the stored splits \(train \[0, 1000\)"):
        load_dataset(folder)
    import dataclasses

    bad = dataclasses.replace(ds, spec=dataclasses.replace(ds.spec, extra={"split_indices": {"train_end": 5,
                                                                                             "val_end": 10}}))
    h5 = save_hdf5(bad, tmp_path / "d.h5")
    with pytest.raises(DatasetError, match=r"^d.h5 root attributes field 'split_indices': .* disagree"):
        load_dataset(h5)


SECRET = "root-secret-line:x:0:0"


@pytest.mark.parametrize("name", ["../outside.csv", "../../outside.csv", "{abs}", "/dev/zero", "~/outside.csv",
                                  "link.csv", "sub/../../outside.csv"])
def test_csv_filename_is_confined_to_the_dataset_folder(single, tmp_path, name, capsys):
    outside = tmp_path / "outside.csv"
    outside.write_text(SECRET + "\n1,2\n")
    (single / "link.csv").symlink_to(outside)
    name = name.replace("{abs}", str(outside))
    _spec(single, csv_filename=name)
    with pytest.raises(DatasetError) as info:
        load_dataset(single)
    msg = str(info.value)
    assert msg.startswith("spec.json field 'csv_filename': ") and "outside the dataset folder" in msg, msg
    assert SECRET not in msg
    assert main(["inspect", str(single)]) == 2
    err = capsys.readouterr().err
    assert "field 'csv_filename'" in err and SECRET not in err and "Traceback" not in err


def test_csv_filename_in_a_subfolder_of_the_dataset_is_read(single):
    (single / "sub").mkdir()
    (single / "data.csv").rename(single / "sub" / "data.csv")
    _spec(single, csv_filename="sub/data.csv")
    assert load_dataset(single).n_samples == {"train": 3600, "val": 1200, "test": 1200}
