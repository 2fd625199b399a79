"""Tests for dpd_desktop.data readers/writers and spec normalization.

Measured data: ../shared/datasets (OpenDPD reference §1.3-1.4 for the expected counts and gains); skipped when absent.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import h5py
import numpy as np
import pytest

from dpd_desktop.data import (
    DatasetError,
    DatasetSpec,
    IQDataset,
    Split,
    load_dataset,
    make_demo_dataset,
    normalize_spec,
    read_iq_csv,
    save_hdf5,
    save_split_csv,
)
from dpd_desktop.data.readers import _h5_to_iq
from dpd_desktop.metrics import channel_bins
from datasets_dir import DATASETS  # tests/datasets_dir.py

SPLIT_FILES = [f"{s}_{r}.csv" for s in ("train", "val", "test") for r in ("input", "output")]


def _need(name: str) -> Path:
    p = DATASETS / name
    if not (p / "train_input.csv").is_file():
        pytest.skip(f"measured dataset {name} not found at {p} (set DPD_DESKTOP_DATASETS, or lay ../shared/datasets beside the checkout)")
    return p


# ---------------------------------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------------------------------
def _rows(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, size=(n, 2)).round(6)


def _write_iq(path: Path, a: np.ndarray, header: str = "I,Q") -> None:
    path.write_text(header + "\n" + "".join(f"{i:.6f},{q:.6f}\n" for i, q in a))


def make_split_folder(root: Path, n: int = 8, spec: dict | None = None) -> Path:
    """Valid split-CSV folder with n rows per file; lines 2..n+1 hold the data."""
    root.mkdir(parents=True, exist_ok=True)
    for k, f in enumerate(SPLIT_FILES):
        _write_iq(root / f, _rows(n, k))
    spec = {"input_signal_fs": 800e6, "bw_main_ch": 200e6, "n_sub_ch": 10, "nperseg": 4} if spec is None else spec
    (root / "spec.json").write_text(json.dumps(spec, indent=4))
    return root


def _set_line(path: Path, lineno: int, text: str) -> None:
    lines = path.read_text().split("\n")
    lines[lineno - 1] = text
    path.write_text("\n".join(lines))


def _write_single(path: Path, n: int, columns=("I_in", "Q_in", "I_out", "Q_out")) -> None:
    """Single CSV whose cell values encode the row index, so the cut can be checked exactly."""
    rows = []
    for r in range(n):
        vals = {"I_in": r + 0.125, "Q_in": -r - 0.25, "I_out": 2 * r + 0.5, "Q_out": -2 * r - 0.75, "extra": 9.0}
        rows.append(",".join(repr(vals[c]) for c in columns))
    path.write_text(",".join(columns) + "\n" + "\n".join(rows) + "\n")


def _h5_write(path: Path, splits: dict, attrs: dict | None = None) -> None:
    with h5py.File(path, "w") as f:
        for k, v in (attrs or {}).items():
            f.attrs[k] = v
        for s, arrs in splits.items():
            g = f.create_group(s)
            for k, a in arrs.items():
                g[k] = a


def _h5_valid(n: int = 10, complex_: bool = True) -> dict:
    rng = np.random.default_rng(3)
    out = {}
    for s in ("train", "val", "test"):
        z = {k: (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64) for k in ("x", "y")}
        if not complex_:
            z = {k: np.stack([v.real, v.imag], axis=1).astype(np.float64) for k, v in z.items()}
        out[s] = z
    return out


# ---------------------------------------------------------------------------------------------------------------------
# measured data
# ---------------------------------------------------------------------------------------------------------------------
@pytest.mark.dataset
def test_dpa_200mhz_counts_spec_gain():
    ds = load_dataset(_need("DPA_200MHz"))
    assert ds.name == "DPA_200MHz"
    assert ds.n_samples == {"train": 23040, "val": 7680, "test": 7680}  # reference §1.3
    for split in ds.splits.values():
        for a in (split.x, split.y):
            assert a.dtype == np.float32 and a.ndim == 2 and a.shape[1] == 2 and a.flags["C_CONTIGUOUS"]
    s = ds.spec
    assert s.sample_rate_hz == 800e6 and s.bw_main_hz == 200e6 and s.bw_sub_hz == 20e6
    assert s.n_sub_ch == 10 and s.nperseg == 2560 and s.dataset_format == "split_csv"
    assert s.split_ratios == {"train": 0.6, "val": 0.2, "test": 0.2}
    assert s.extra["modulation"] == "64QAM" and s.extra["standard"] == "LTE"
    s.require_metrics()  # complete
    assert ds.gain == pytest.approx(2.52081, abs=1e-4)  # reference §1.4
    assert np.abs(ds.train.x_complex).max() == pytest.approx(1.0, abs=1e-6)  # peak-normalized in the files
    summ = ds.summary()
    assert summ["fs_mhz"] == 800 and summ["train"] == 23040 and summ["n_sub_ch"] == 10 and "DPA_200MHz" in summ["text"]
    fp = ds.fingerprint()
    assert len(fp) == 64 and fp == load_dataset(_need("DPA_200MHz") / "spec.json").fingerprint()


@pytest.mark.dataset
def test_dpa_160mhz_counts_and_gain():
    ds = load_dataset(_need("DPA_160MHz"))
    assert ds.n_samples == {"train": 294912, "val": 98304, "test": 98304}
    assert ds.spec.nperseg == 16384 and ds.spec.n_sub_ch == 4 and ds.spec.sample_rate_hz == 640e6
    assert ds.gain == pytest.approx(2.29554, abs=1e-4)


# ---------------------------------------------------------------------------------------------------------------------
# split CSV
# ---------------------------------------------------------------------------------------------------------------------
def test_split_folder_values_and_float32(tmp_path):
    folder = make_split_folder(tmp_path / "ds", n=8)
    ds = load_dataset(folder)
    assert ds.n_samples == {"train": 8, "val": 8, "test": 8}
    np.testing.assert_array_equal(ds.val.x, _rows(8, 2).astype(np.float32))
    np.testing.assert_array_equal(ds.test.y, _rows(8, 5).astype(np.float32))
    assert ds.spec.sample_rate_hz == 800e6 and ds.source == folder.resolve()


def test_split_folder_without_spec_uses_defaults(tmp_path):
    folder = make_split_folder(tmp_path / "nospec", n=5)
    (folder / "spec.json").unlink()
    ds = load_dataset(folder)
    assert ds.spec.nperseg == 2560 and ds.spec.sample_rate_hz is None and ds.spec.dataset_format == "split_csv"
    assert not ds.spec.has_metrics
    with pytest.raises(DatasetError) as ei:
        ds.spec.require_metrics("nospec")  # a display name: used as given
    msg = str(ei.value)
    assert "input_signal_fs" in msg and "bw_main_ch" in msg and "n_sub_ch" in msg and "nperseg" not in ei.value.field


@pytest.mark.parametrize("given", ["folder", "spec.json"])
def test_an_unreadable_dataset_folder_is_a_dataset_error_naming_it(tmp_path, monkeypatch, given):
    """A folder without read/search permission (chmod 000; root is not refused, so the refusal is injected)."""
    folder = make_split_folder(tmp_path / "locked", n=5)
    real_stat = Path.stat

    def stat(self, *a, **kw):
        if folder in Path(os.path.abspath(self)).parents:
            raise PermissionError(13, "Permission denied", str(self))
        return real_stat(self, *a, **kw)
    monkeypatch.setattr(Path, "stat", stat)
    with pytest.raises(DatasetError) as ei:
        load_dataset(folder if given == "folder" else folder / "spec.json")
    msg = str(ei.value)
    assert "cannot read" in msg and "Permission denied" in msg and "locked" in msg and "expected a readable" in msg


def test_require_metrics_says_spec_json_is_missing(tmp_path):
    """The trainer passes the dataset's path: a folder without spec.json is named, not 'fields missing in spec.json'."""
    folder = make_split_folder(tmp_path / "nospec", n=5)
    (folder / "spec.json").unlink()
    ds = load_dataset(folder)
    with pytest.raises(DatasetError) as ei:
        ds.spec.require_metrics(str(ds.source))
    msg = str(ei.value)
    assert msg.startswith(f"{folder.resolve()}: spec.json is missing in this folder"), msg
    assert "training" in msg and "input_signal_fs" in msg and "bw_main_ch" in msg and "n_sub_ch" in msg
    assert "expected a file" in msg and str(folder.resolve() / "spec.json") in msg
    assert "expected these fields in spec.json" not in msg


def test_require_metrics_spec_json_present_but_incomplete_names_it(tmp_path):
    folder = make_split_folder(tmp_path / "ds", n=5, spec={"input_signal_fs": 800e6, "bw_main_ch": 200e6})
    ds = load_dataset(folder)
    with pytest.raises(DatasetError) as ei:
        ds.spec.require_metrics(str(ds.source))
    assert str(ei.value).startswith(f"{folder.resolve() / 'spec.json'} field 'n_sub_ch': missing field(s)")
    assert "carrier count" in str(ei.value) and "expected these fields in spec.json" in str(ei.value)


def test_require_metrics_direct_csv_without_spec_beside(tmp_path):
    p = tmp_path / "capture.csv"
    _write_single(p, 11)
    ds = load_dataset(p)
    with pytest.raises(DatasetError, match=r"spec\.json is missing in this folder \(beside capture\.csv\)"):
        ds.spec.require_metrics(str(ds.source))


def test_require_metrics_hdf5_without_attributes(tmp_path):
    p = tmp_path / "bare.h5"
    _h5_write(p, _h5_valid())
    ds = load_dataset(p)
    with pytest.raises(DatasetError) as ei:
        ds.spec.require_metrics(str(ds.source))
    msg = str(ei.value)
    assert msg.startswith("bare.h5 root attributes field 'input_signal_fs, bw_main_ch, n_sub_ch': "
                          "the HDF5 file has no root attribute(s) for input_signal_fs, bw_main_ch, n_sub_ch"), msg
    assert "training" in msg and "expected root attributes" in msg and "spec.json" not in msg


def test_csv_tolerates_crlf_bom_trailing_blank_and_quoted(tmp_path):
    p = tmp_path / "x.csv"
    p.write_bytes(b'\xef\xbb\xbf"I","Q"\r\n0.5,-0.25\r\n"1e-3", 2\r\n\r\n')
    a = read_iq_csv(p)
    np.testing.assert_array_equal(a, np.array([[0.5, -0.25], [1e-3, 2]], dtype=np.float32))
    assert a.dtype == np.float32 and a.flags["C_CONTIGUOUS"]


def test_csv_line_numbers_with_crlf(tmp_path):
    p = tmp_path / "train_input.csv"
    p.write_bytes(b"I,Q\r\n0.1,0.2\r\n0.3,0.4\r\n0.5,nan\r\n")
    with pytest.raises(DatasetError) as ei:
        read_iq_csv(p)
    assert ei.value.line == 4 and "train_input.csv line 4" in str(ei.value)


# --- header rule (line 1 names the I/Q columns) ----------------------------------------------------------------------
def test_split_csv_numeric_first_line_is_an_error_not_a_lost_sample(tmp_path):
    f = make_split_folder(tmp_path / "ds", n=8)
    p = f / "val_input.csv"
    p.write_text("0.1,0.2\n" + "".join(f"{i:.6f},{q:.6f}\n" for i, q in _rows(8, 2)))  # no header, 9 rows
    with pytest.raises(DatasetError) as ei:
        load_dataset(f)
    assert str(ei.value) == "val_input.csv line 1: expected a header line such as 'I,Q'; found data '0.1,0.2'"
    assert ei.value.path == p and ei.value.line == 1
    with pytest.raises(DatasetError, match=r"^val_input\.csv line 1: expected a header line such as 'I,Q'"):
        read_iq_csv(p)


@pytest.mark.parametrize("header", ["foo,bar", "I,X", "I_in,Q_out", "x,y"])
def test_split_csv_unknown_header_names(tmp_path, header):
    f = make_split_folder(tmp_path / "ds", n=8)
    p = f / "train_output.csv"
    _set_line(p, 1, header)
    with pytest.raises(DatasetError) as ei:
        load_dataset(f)
    msg = str(ei.value)
    a, b = header.split(",")
    assert msg.startswith("train_output.csv line 1: header names"), msg
    assert f"{a!r}, {b!r}" in msg and "expected columns I,Q (any order" in msg


@pytest.mark.parametrize(
    "header, swapped",
    [("I,Q", False), ("i,q", False), (' "I" , \'Q\' ', False), ("I_in,Q_in", False), ("Q_OUT,I_OUT", True),
     ("real,imag", False), ("Imag,Real", True), ("re,im", False), ("q,i", True), ('"Q","I"', True)],
)
def test_split_csv_accepted_headers_and_q_first_swap(tmp_path, header, swapped):
    f = make_split_folder(tmp_path / "ds", n=8)
    _set_line(f / "test_input.csv", 1, header)
    ds = load_dataset(f)
    rows = _rows(8, 4).astype(np.float32)
    np.testing.assert_array_equal(ds.test.x, rows[:, ::-1] if swapped else rows)  # I always in column 0
    assert ds.test.x.flags["C_CONTIGUOUS"]
    np.testing.assert_array_equal(ds.test.x64, _rows(8, 4)[:, ::-1] if swapped else _rows(8, 4))
    np.testing.assert_array_equal(read_iq_csv(f / "test_input.csv"), ds.test.x)


def test_swapped_file_errors_name_the_file_columns(tmp_path):
    p = tmp_path / "u.csv"
    p.write_text("Q,I\n1,2\n3,inf\n")
    with pytest.raises(DatasetError, match=r"^u\.csv line 3: non-finite value \(inf\) in column 2 \(I\)"):
        read_iq_csv(p)


def test_float32_overflow_in_a_single_file_and_hdf5(tmp_path, recwarn):
    """A finite number beyond float32's range is an error naming the file and line (CSV) or the dataset and sample
    (HDF5), without NumPy's cast warning."""
    p = tmp_path / "u.csv"
    p.write_text("I,Q\n0.5,0.25\n-3e38,1\n0.1,-4e38\n")
    with pytest.raises(DatasetError, match=r"^u\.csv line 4: value -4e\+38 in column 2 \(Q\) .* overflows float32"):
        read_iq_csv(p)
    h5 = h5py
    f = tmp_path / "d.h5"
    with h5.File(f, "w") as fh:
        fh["x"] = np.array([[0.1, 0.2], [1e39, 0.0]])
    with h5.File(f, "r") as fh, pytest.raises(DatasetError, match="value overflowing float32 at sample index 1"):
        _h5_to_iq(fh["x"], f, "/x")
    assert not [w for w in recwarn if "overflow" in str(w.message)]


# --- blank lines ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("blank", ["", "   ", "\t", "\r"])
def test_split_csv_blank_line_inside_is_reported_with_its_line(tmp_path, blank):
    f = make_split_folder(tmp_path / "ds", n=8)
    p = f / "train_output.csv"
    lines = p.read_text().split("\n")
    lines.insert(3, blank)  # becomes line 4
    p.write_text("\n".join(lines))
    with pytest.raises(DatasetError) as ei:
        load_dataset(f)
    assert str(ei.value) == "train_output.csv line 4: empty line; expected 2 numeric columns (I,Q)"
    assert ei.value.line == 4 and "length mismatch" not in str(ei.value)


def test_split_csv_blank_line_right_after_header(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("I,Q\n\n1,2\n")
    with pytest.raises(DatasetError, match=r"^x\.csv line 2: empty line; expected 2 numeric columns \(I,Q\)$"):
        read_iq_csv(p)


def test_split_csv_blank_first_line(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("\nI,Q\n1,2\n")
    with pytest.raises(DatasetError, match=r"^x\.csv line 1: empty line; expected a header line such as 'I,Q'$"):
        read_iq_csv(p)


@pytest.mark.parametrize("ending", ["", "\n", "\n\n", "\r\n\r\n", "\n  \n", "\n  "])
def test_split_csv_one_trailing_blank_line_allowed(tmp_path, ending):
    p = tmp_path / "x.csv"
    p.write_bytes(("I,Q\n1,2\n3,4" + ending).encode())
    np.testing.assert_array_equal(read_iq_csv(p), np.array([[1, 2], [3, 4]], np.float32))


def test_split_csv_two_trailing_blank_lines_rejected(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("I,Q\n1,2\n3,4\n\n\n")
    with pytest.raises(DatasetError, match=r"^x\.csv line 4: empty line; expected 2 numeric columns \(I,Q\)"):
        read_iq_csv(p)


def test_csv_parse_matches_float64_then_float32(tmp_path):
    p = tmp_path / "v.csv"
    p.write_text("I,Q\n0.1234567891234,-0.98765432109876\n3.4028235e38,1e-45\n")
    a = read_iq_csv(p)
    exp = np.array([[0.1234567891234, -0.98765432109876], [3.4028235e38, 1e-45]], dtype=np.float64).astype(np.float32)
    np.testing.assert_array_equal(a, exp)


# ---------------------------------------------------------------------------------------------------------------------
# single CSV
# ---------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "n, ratios, expected",
    [
        (10, (0.6, 0.2, 0.2), (6, 2, 2)),
        (11, (0.6, 0.2, 0.2), (6, 2, 3)),
        (103, (0.7, 0.15, 0.15), (72, 15, 16)),
        (102400, (0.6, 0.2, 0.2), (61440, 20480, 20480)),  # MyCustomPA, reference §1.3
    ],
)
def test_single_csv_floor_ratio_cut(tmp_path, n, ratios, expected):
    folder = tmp_path / "single"
    folder.mkdir()
    # columns in a different order plus an ignored extra column
    _write_single(folder / "pa.csv", n, columns=("Q_out", "I_in", "extra", "I_out", "Q_in"))
    spec = {"dataset_format": "single_csv", "csv_filename": "pa.csv", "fs": "80e6",
            "split_ratios": dict(zip(("train", "val", "test"), ratios))}
    (folder / "spec.json").write_text(json.dumps(spec))
    ds = load_dataset(folder)
    n_tr, n_va, n_te = expected
    assert (len(ds.train), len(ds.val), len(ds.test)) == expected
    assert n_tr == math.floor(n * ratios[0]) and n_va == math.floor(n * ratios[1])
    r = np.arange(n, dtype=np.float64)
    x = np.stack([r + 0.125, -r - 0.25], axis=1).astype(np.float32)
    y = np.stack([2 * r + 0.5, -2 * r - 0.75], axis=1).astype(np.float32)
    np.testing.assert_array_equal(ds.train.x, x[:n_tr])
    np.testing.assert_array_equal(ds.val.y, y[n_tr : n_tr + n_va])
    np.testing.assert_array_equal(ds.test.x, x[n_tr + n_va :])
    assert ds.spec.dataset_format == "single_csv" and ds.spec.sample_rate_hz == 80e6


def test_single_csv_direct_path_defaults(tmp_path):
    p = tmp_path / "capture.csv"
    _write_single(p, 11)
    ds = load_dataset(p)
    assert ds.n_samples == {"train": 6, "val": 2, "test": 3}
    assert ds.name == "capture"
    s = ds.spec
    assert s.nperseg == 2560 and s.sample_rate_hz is None and s.bw_main_hz is None and s.n_sub_ch is None
    assert s.dataset_format == "single_csv" and s.csv_filename == "capture.csv"


def test_single_csv_direct_path_uses_spec_beside(tmp_path):
    p = tmp_path / "capture.csv"
    _write_single(p, 20)
    (tmp_path / "spec.json").write_text(
        json.dumps({"sample_rate": "640e6", "input_signal_bw": 160e6, "num_sub_ch": "4", "nperseg": 8,
                    "split_ratios": {"train": 0.5, "val": 0.25, "test": 0.25}})
    )
    ds = load_dataset(p)
    assert ds.n_samples == {"train": 10, "val": 5, "test": 5}
    assert ds.spec.has_metrics and ds.spec.sample_rate_hz == 640e6 and ds.spec.n_sub_ch == 4


# ---------------------------------------------------------------------------------------------------------------------
# HDF5
# ---------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("complex_", [True, False], ids=["complex", "float_Nx2"])
def test_hdf5_read_external_file(tmp_path, complex_):
    splits = _h5_valid(12, complex_=complex_)
    p = tmp_path / "ext.hdf5"
    _h5_write(p, splits, attrs={"fs": 640e6, "bw_main_ch": 160e6, "n_sub_ch": 4, "nperseg": 6, "modulation": "QPSK"})
    ds = load_dataset(p)
    assert ds.name == "ext" and ds.spec.dataset_format == "hdf5" and ds.spec.sample_rate_hz == 640e6
    assert ds.spec.extra == {"modulation": "QPSK"}
    for s in ("train", "val", "test"):
        for k in ("x", "y"):
            a = getattr(ds.splits[s], k)
            src = splits[s][k]
            exp = np.stack([src.real, src.imag], axis=1) if complex_ else src
            assert a.dtype == np.float32 and a.shape == (12, 2) and a.flags["C_CONTIGUOUS"]
            np.testing.assert_array_equal(a, exp.astype(np.float32))


@pytest.mark.skipif(sys.platform == "win32", reason="platform: POSIX file locks")
def test_hdf5_locked_by_another_process_is_reported_in_use(tmp_path):
    """Another process holds the file open for writing (HDF5's file lock): the error says the file is in use and
    names it (was "expected an HDF5 file"). Holder and reader are child processes with HDF5's default locking
    (``HDF5_USE_FILE_LOCKING`` unset: clusters often set it to FALSE, and HDF5 reads it only at start)."""
    p = tmp_path / "locked.h5"
    _h5_write(p, _h5_valid(12), attrs={"fs": 640e6, "bw_main_ch": 160e6, "n_sub_ch": 4, "nperseg": 6})
    env = {k: v for k, v in os.environ.items() if k != "HDF5_USE_FILE_LOCKING"}
    holder = subprocess.Popen([sys.executable, "-c", "import sys, h5py; f = h5py.File(sys.argv[1], 'a'); "
                               "print('open', flush=True); sys.stdin.read()", str(p)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout.readline().strip() == "open"
        reader = subprocess.run(
            [sys.executable, "-c", "import sys\nfrom dpd_desktop.data import DatasetError, load_dataset\n"
             "try:\n    load_dataset(sys.argv[1])\nexcept DatasetError as e:\n    print(e)\nelse:\n    print('opened')",
             str(p)], capture_output=True, text=True, env=env, timeout=120)
        msg = reader.stdout
        assert reader.returncode == 0, reader.stderr
        assert str(p) in msg and "in use by another process" in msg and "expected an HDF5 file" not in msg
    finally:
        holder.communicate("", timeout=30)
    assert load_dataset(p).name == "locked"  # readable again once the other process has closed it


@pytest.mark.parametrize("complex_samples", [True, False], ids=["complex64", "float32_Nx2"])
def test_hdf5_round_trip(tmp_path, complex_samples):
    ds = make_demo_dataset(seed=1, n_train=4096, n_val=1024, n_test=1536, nperseg=512)
    p = save_hdf5(ds, tmp_path / "sub" / "demo.h5", complex_samples=complex_samples)
    assert p.is_file() and [q.name for q in p.parent.iterdir()] == ["demo.h5"]  # no temp file left
    with h5py.File(p, "r") as f:
        assert f["train/x"].dtype == (np.complex64 if complex_samples else np.float32)
        assert f.attrs["input_signal_fs"] == 640e6 and f.attrs["n_sub_ch"] == 4
    back = load_dataset(p)
    assert back.name == ds.name
    assert back.fingerprint() == ds.fingerprint()
    for s in ("train", "val", "test"):
        np.testing.assert_array_equal(back.splits[s].x, ds.splits[s].x)
        np.testing.assert_array_equal(back.splits[s].y, ds.splits[s].y)
    assert back.spec.extra == ds.spec.extra and back.spec.split_ratios == ds.spec.split_ratios
    # overwrite in place works (atomic replace)
    save_hdf5(back, p)
    assert load_dataset(p).fingerprint() == ds.fingerprint()


def test_split_csv_round_trip_and_fingerprint(tmp_path):
    ds = make_demo_dataset(seed=2, n_train=1000, n_val=300, n_test=200, nperseg=100)
    folder = save_split_csv(ds, tmp_path / "out")
    back = load_dataset(folder)
    assert back.fingerprint() == ds.fingerprint()  # %.9g round-trips float32 exactly
    ds2 = make_demo_dataset(seed=2, n_train=1000, n_val=300, n_test=200, nperseg=100, noise_db=-40)
    assert ds2.fingerprint() != ds.fingerprint()


# ---------------------------------------------------------------------------------------------------------------------
# spec normalization
# ---------------------------------------------------------------------------------------------------------------------
def test_normalize_spec_spellings_and_extra():
    s = normalize_spec(
        {"sample_rate_hz": "640e6", "bandwidth": "160 MHz", "input_signal_sub_ch_bw": 40e6, "n_carriers": 4.0,
         "nperseg": "16384", "split_indices": {"train_end": 3, "val_end": 5}, "description": "x"}
    )
    assert s.sample_rate_hz == 640e6 and s.bw_main_hz == 160e6 and s.bw_sub_hz == 40e6
    assert s.n_sub_ch == 4 and isinstance(s.n_sub_ch, int) and s.nperseg == 16384
    assert s.extra == {"split_indices": {"train_end": 3, "val_end": 5}, "description": "x"}  # kept (fingerprint)
    assert s.split_indices == {"train": (0, 3), "val": (3, 5), "test": (5, None)}
    assert s.to_dict()["input_signal_fs"] == 640e6 and s.to_dict()["bw_main_ch"] == 160e6
    assert normalize_spec(s.to_dict()) == s
    assert normalize_spec({"fs": 1e6, "input_signal_fs": "1e6"}).sample_rate_hz == 1e6  # agreeing aliases


def test_normalize_spec_defaults():
    s = normalize_spec({})
    assert s == DatasetSpec()
    assert s.nperseg == 2560 and s.split_ratios == {"train": 0.6, "val": 0.2, "test": 0.2}
    assert s.missing_metric_fields() == ["input_signal_fs", "bw_main_ch", "n_sub_ch"]


@pytest.mark.parametrize(
    "raw, must",
    [
        ({"fs": 1e6, "sample_rate": 2e6}, ["sample_rate", "conflicting", "'fs'"]),
        ({"n_sub_ch": 2.5}, ["n_sub_ch", "expected a positive integer", "2.5"]),
        ({"bw_main_ch": True}, ["bw_main_ch", "expected a positive number in Hz", "True"]),
        ({"bw_sub_ch": [1]}, ["bw_sub_ch", "expected a positive number in Hz"]),
        ({"input_signal_fs": 0}, ["input_signal_fs", "expected a positive number"]),
        ({"split_ratios": {"train": 1.0, "val": 0, "test": 0}}, ["split_ratios.train", "[0, 1)"]),
        ({"split_ratios": {"train": 0.8, "val": 0.2}}, ["split_ratios", "missing 'test'"]),
        ({"dataset_format": "xlsx"}, ["dataset_format", "xlsx", "expected one of split_csv"]),
        ({"csv_filename": 3}, ["csv_filename", "expected a non-empty file name"]),
    ],
)
def test_normalize_spec_errors(raw, must):
    with pytest.raises(DatasetError) as ei:
        normalize_spec(raw, source="spec.json")
    msg = str(ei.value)
    assert msg.startswith("spec.json")
    for m in must:
        assert m in msg, (m, msg)


# --- spec geometry, checked by require_metrics before training starts ------------------------------------------------
def _geometry_error(tmp_path, **fields) -> DatasetError:
    spec = {"input_signal_fs": 800e6, "bw_main_ch": 200e6, "n_sub_ch": 10, "nperseg": 64, **fields}
    folder = make_split_folder(tmp_path / "ds", n=8, spec=spec)
    ds = load_dataset(folder)  # loading still works (the GUI shows the dataset)
    with pytest.raises(DatasetError) as ei:
        ds.spec.require_metrics(str(ds.source))
    assert str(ei.value).startswith(f"{folder.resolve() / 'spec.json'} field '{ei.value.field}': "), str(ei.value)
    return ei.value


def test_require_metrics_bandwidth_not_below_fs(tmp_path):
    e = _geometry_error(tmp_path, bw_main_ch=2e9)
    assert e.field == "bw_main_ch"
    assert "bw_main_ch = 2e+09 Hz (2000 MHz) is not below the sample rate input_signal_fs = 8e+08 Hz" in str(e)
    assert "expected bw_main_ch < input_signal_fs" in str(e)


def test_require_metrics_adjacent_channels_outside_grid(tmp_path):
    # fs 800 MHz, 10 carriers: B = 600 MHz reaches ±(300 + 60) MHz, inside ±400 MHz; B = 700 MHz reaches ±420 MHz
    normalize_spec({"fs": 800e6, "bw_main_ch": 600e6, "n_sub_ch": 10, "nperseg": 64}).require_metrics()
    e = _geometry_error(tmp_path, bw_main_ch=700e6)
    assert e.field == "bw_main_ch"
    msg = str(e)
    assert "adjacent channels [-B/2 - B/n, +B/2 + B/n] = [-420 MHz, +420 MHz]" in msg
    assert "[-400 MHz, +400 MHz)" in msg and "expected bw_main_ch * (1 + 2/n_sub_ch) within input_signal_fs" in msg


def test_require_metrics_adjacent_rule_is_the_metrics_grid_rule():
    for bw in np.linspace(100e6, 790e6, 70):
        for nps in (16, 64, 2560):
            s = DatasetSpec(sample_rate_hz=800e6, bw_main_hz=float(bw), n_sub_ch=4, nperseg=nps)
            try:
                ok_metrics = channel_bins(800e6, float(bw), 4, nps).adjacent_in_grid
            except ValueError:
                ok_metrics = False
            try:
                s.require_metrics()
                ok_spec = True
            except DatasetError:
                ok_spec = False
            assert ok_spec == ok_metrics, (bw, nps)


@pytest.mark.parametrize(
    "fields, field, words",
    [
        ({"nperseg": 1}, "nperseg", ["nperseg is 1", "expected an integer >= 2"]),
        ({"n_sub_ch": 40}, "n_sub_ch", ["sub-channel width is 0 bins", "expected at least one frequency bin"]),
        ({"bw_main_ch": 1e6}, "bw_main_ch", ["expected at least one frequency bin per sub-channel"]),
    ],
)
def test_require_metrics_other_geometry_errors(tmp_path, fields, field, words):
    e = _geometry_error(tmp_path, **fields)
    assert e.field == field
    for w in words:
        assert w in str(e), (w, str(e))


def test_require_metrics_geometry_in_memory_spec():
    with pytest.raises(DatasetError, match=r"^spec\.json field 'input_signal_fs': input_signal_fs is -1\.0"):
        DatasetSpec(sample_rate_hz=-1.0, bw_main_hz=1e6, n_sub_ch=1, nperseg=8).require_metrics()
    with pytest.raises(DatasetError, match=r"^spec\.json field 'n_sub_ch': n_sub_ch is 0; expected an integer >= 1"):
        DatasetSpec(sample_rate_hz=8e6, bw_main_hz=1e6, n_sub_ch=0, nperseg=8).require_metrics()


def test_require_metrics_geometry_names_hdf5_root_attributes(tmp_path):
    p = tmp_path / "pa.h5"
    _h5_write(p, _h5_valid(), attrs={"fs": 100e6, "bw_main_ch": 160e6, "n_sub_ch": 4, "nperseg": 6})
    ds = load_dataset(p)
    with pytest.raises(DatasetError) as ei:
        ds.spec.require_metrics(str(ds.source))
    assert str(ei.value).startswith("pa.h5 root attributes field 'bw_main_ch': main bandwidth bw_main_ch = 1.6e+08 Hz")
    assert "expected bw_main_ch < input_signal_fs" in str(ei.value)


@pytest.mark.dataset
@pytest.mark.parametrize("name", ["DPA_200MHz", "DPA_160MHz"])
def test_measured_specs_pass_require_metrics(name):
    ds = load_dataset(_need(name))
    ds.spec.require_metrics(str(ds.source))


def test_require_metrics_names_missing_field():
    s = normalize_spec({"fs": 1e6, "bw_main_ch": 1e5})
    with pytest.raises(DatasetError) as ei:
        s.require_metrics("spec.json")
    assert ei.value.field == "n_sub_ch" and "carrier count" in str(ei.value) and "bw_main_ch" not in ei.value.field


def test_split_container_validation():
    with pytest.raises(DatasetError):
        Split(np.zeros((3, 3), np.float32), np.zeros((3, 3), np.float32))
    with pytest.raises(DatasetError, match="equal lengths"):
        Split(np.zeros((3, 2)), np.zeros((2, 2)))
    s = Split(np.ones((4, 2), dtype=np.float64), np.zeros((4, 2)))
    assert s.x.dtype == np.float32 and len(s) == 4 and s.x_complex.dtype == np.complex64


# ---------------------------------------------------------------------------------------------------------------------
# malformed inputs: error type + message names the file, the line/field, and the expectation
# ---------------------------------------------------------------------------------------------------------------------
def _case_non_numeric(t: Path):
    f = make_split_folder(t / "ds")
    _set_line(f / "train_input.csv", 5, "abc,0.1")
    return f, ["train_input.csv line 5", "'abc'", "'abc,0.1'", "expected 2 numeric columns (I,Q)"]


def _case_nan(t):
    f = make_split_folder(t / "ds")
    _set_line(f / "val_output.csv", 3, "nan,0.2")
    return f, ["val_output.csv line 3", "non-finite", "'nan,0.2'", "expected finite numbers"]


def _case_inf(t):
    f = make_split_folder(t / "ds")
    _set_line(f / "test_input.csv", 4, "0.1,-inf")
    return f, ["test_input.csv line 4", "non-finite", "column 2 (Q)", "expected finite numbers"]


def _case_float32_overflow(t):
    f = make_split_folder(t / "ds")
    _set_line(f / "train_input.csv", 6, "1e39,0.1")
    return f, ["train_input.csv line 6", "1e+39", "column 1 (I)", "overflows float32", "3.402823e+38"]


def _case_three_columns(t):
    f = make_split_folder(t / "ds")
    _set_line(f / "train_output.csv", 2, "0.1,0.2,0.3")
    return f, ["train_output.csv line 2", "got 3 column(s)", "'0.1,0.2,0.3'", "expected 2 numeric columns"]


def _case_one_column(t):
    f = make_split_folder(t / "ds")
    _set_line(f / "val_input.csv", 6, "0.1")
    return f, ["val_input.csv line 6", "got 1 column(s)", "expected 2 numeric columns"]


def _case_all_rows_three_columns(t):
    f = make_split_folder(t / "ds")
    p = f / "test_output.csv"
    p.write_text("I,Q\n1,2,3\n4,5,6\n")
    return f, ["test_output.csv line 2", "got 3 column(s)", "expected 2 numeric columns"]


def _case_header_three_columns(t):
    f = make_split_folder(t / "ds")
    p = f / "train_input.csv"
    p.write_text("I,Q,Z\n" + p.read_text().split("\n", 1)[1])
    return f, ["train_input.csv line 1", "header has 3 column(s)", "expected 2 columns"]


def _case_empty_file(t):
    f = make_split_folder(t / "ds")
    (f / "val_input.csv").write_text("")
    return f, ["val_input.csv", "empty file", "expected a header line"]


def _case_header_only(t):
    f = make_split_folder(t / "ds")
    (f / "test_output.csv").write_text("I,Q\n")
    return f, ["test_output.csv line 1", "header only", "expected at least one data row"]


def _case_length_mismatch(t):
    f = make_split_folder(t / "ds", n=8)
    _write_iq(f / "train_output.csv", _rows(7, 1))
    return f, ["train_input.csv", "train_output.csv", "has 8 data rows", "has 7", "expected sample-aligned"]


def _case_missing_file(t):
    f = make_split_folder(t / "ds")
    (f / "val_output.csv").unlink()
    return f, ["val_output.csv", "missing file", "expected the six split files"]


def _case_split_file_is_a_folder(t):
    f = make_split_folder(t / "ds")
    (f / "test_input.csv").unlink()
    (f / "test_input.csv").mkdir()
    return f, ["test_input.csv", "is a folder, not a file", "expected the six split files"]


def _case_single_csv_is_a_folder(t):
    f = t / "ds"
    f.mkdir()
    (f / "spec.json").write_text(json.dumps({"dataset_format": "single_csv", "csv_filename": "pa.csv"}))
    (f / "pa.csv").mkdir()
    return f, ["pa.csv", "is a folder, not a file", "field 'csv_filename'", "expected the single CSV"]


def _case_broken_json(t):
    f = make_split_folder(t / "ds")
    (f / "spec.json").write_text('{\n  "input_signal_fs": 640e6,\n  "nperseg": 16384,,\n}\n')
    return f, ["spec.json line 3", "invalid JSON", "expected a JSON object"]


def _case_spec_fs_abc(t):
    f = make_split_folder(t / "ds", spec={"input_signal_fs": "abc"})
    return f, ["spec.json", "field 'input_signal_fs'", "'abc'", "expected a positive number in Hz"]


def _case_spec_negative_nperseg(t):
    f = make_split_folder(t / "ds", spec={"nperseg": -5})
    return f, ["spec.json", "field 'nperseg'", "-5", "expected a positive integer"]


def _case_spec_ratios(t):
    f = make_split_folder(t / "ds", spec={"split_ratios": {"train": 0.6, "val": 0.3, "test": 0.3}})
    return f, ["spec.json", "field 'split_ratios'", "sum to 1.2", "expected they sum to 1"]


def _case_spec_not_object(t):
    f = make_split_folder(t / "ds", spec=[1, 2])
    return f, ["spec.json", "expected a JSON object", "list"]


def _case_single_missing_q_out(t):
    p = t / "data.csv"
    p.write_text("I_in,Q_in,I_out\n0.1,0.2,0.3\n")
    return p, ["data.csv line 1", "field 'Q_out'", "missing column 'Q_out'", "expected header columns I_in,Q_in,I_out,Q_out"]


def _case_single_bad_cell(t):
    f = t / "ds"
    f.mkdir()
    (f / "spec.json").write_text(json.dumps({"dataset_format": "single_csv"}))
    (f / "data.csv").write_text("I_in,Q_in,I_out,Q_out\n1,2,3,4\n1,2,x3,4\n")
    return f, ["data.csv line 3", "'x3'", "column 3 (I_out)", "expected 4 numeric columns"]


def _case_single_row_too_long(t):
    p = t / "data.csv"
    p.write_text("I_in,Q_in,I_out,Q_out\n1,2,3,4\n1,2,3,4\n1,2,3,4,5\n1,2,3,4\n1,2,3,4\n")
    return p, ["data.csv line 4", "got 5 column(s)", "expected 4 numeric columns"]


def _case_single_missing_file(t):
    f = t / "ds"
    f.mkdir()
    (f / "spec.json").write_text(json.dumps({"dataset_format": "single_csv", "csv_filename": "pa.csv"}))
    return f, ["pa.csv", "missing file", "field 'csv_filename'", "expected the single CSV"]


def _case_single_split_empty(t):
    p = t / "tiny.csv"
    p.write_text("I_in,Q_in,I_out,Q_out\n1,2,3,4\n1,2,3,4\n")
    return p, ["tiny.csv", "split 'val' would be empty", "give 1/0/1", "expected at least 1 row in every split"]


def _case_h5_missing_val_y(t):
    splits = _h5_valid()
    del splits["val"]["y"]
    p = t / "pa.h5"
    _h5_write(p, splits)
    return p, ["pa.h5", "field '/val/y'", "missing dataset", "expected datasets /val/x (PA input) and /val/y"]


def _case_h5_missing_group(t):
    splits = _h5_valid()
    del splits["test"]
    p = t / "pa.h5"
    _h5_write(p, splits)
    return p, ["pa.h5", "field '/test'", "missing group '/test'", "expected groups /train, /val, /test"]


def _case_h5_shape_n3(t):
    splits = _h5_valid(complex_=False)
    splits["train"]["x"] = np.zeros((10, 3), np.float32)
    p = t / "pa.h5"
    _h5_write(p, splits)
    return p, ["pa.h5", "field '/train/x'", "shape (10, 3)", "expected complex64/complex128 of shape (N,) or float of shape (N, 2)"]


def _case_h5_int_dtype(t):
    splits = _h5_valid(complex_=False)
    splits["val"]["x"] = np.zeros((10, 2), np.int16)
    p = t / "pa.hdf5"
    _h5_write(p, splits)
    return p, ["pa.hdf5", "field '/val/x'", "dtype int16", "expected complex64"]


def _case_h5_bad_attr(t):
    p = t / "pa.h5"
    _h5_write(p, _h5_valid(), attrs={"nperseg": "many"})
    return p, ["pa.h5 root attributes", "field 'nperseg'", "'many'", "expected a positive integer"]


def _case_h5_not_hdf5(t):
    p = t / "fake.h5"
    p.write_text("I,Q\n1,2\n")
    return p, ["fake.h5", "cannot open as HDF5", "expected an HDF5 file"]


def _case_unsupported_ext(t):
    p = t / "data.txt"
    p.write_text("I,Q\n1,2\n")
    return p, ["data.txt", "unsupported file extension '.txt'", "expected a dataset folder"]


def _case_nonexistent(t):
    return t / "does_not_exist", ["does_not_exist", "path not found", "expected an existing dataset folder"]


MALFORMED = [
    _case_non_numeric,
    _case_nan,
    _case_inf,
    _case_float32_overflow,
    _case_three_columns,
    _case_one_column,
    _case_all_rows_three_columns,
    _case_header_three_columns,
    _case_empty_file,
    _case_header_only,
    _case_length_mismatch,
    _case_missing_file,
    _case_split_file_is_a_folder,
    _case_single_csv_is_a_folder,
    _case_broken_json,
    _case_spec_fs_abc,
    _case_spec_negative_nperseg,
    _case_spec_ratios,
    _case_spec_not_object,
    _case_single_missing_q_out,
    _case_single_bad_cell,
    _case_single_row_too_long,
    _case_single_missing_file,
    _case_single_split_empty,
    _case_h5_missing_val_y,
    _case_h5_missing_group,
    _case_h5_shape_n3,
    _case_h5_int_dtype,
    _case_h5_bad_attr,
    _case_h5_not_hdf5,
    _case_unsupported_ext,
    _case_nonexistent,
]


@pytest.mark.parametrize("case", MALFORMED, ids=[c.__name__[len("_case_"):] for c in MALFORMED])
def test_malformed_input_errors(tmp_path, case):
    target, must_contain = case(tmp_path)
    with pytest.raises(DatasetError) as ei:
        load_dataset(target)
    assert isinstance(ei.value, ValueError)
    msg = str(ei.value)
    for m in must_contain:
        assert m in msg, f"{m!r} not in {msg!r}"
    assert "expected" in msg


def test_error_attributes(tmp_path):
    f = make_split_folder(tmp_path / "ds")
    _set_line(f / "train_input.csv", 5, "abc,0.1")
    with pytest.raises(DatasetError) as ei:
        load_dataset(f)
    e = ei.value
    assert e.path == f / "train_input.csv" and e.line == 5
    assert str(e) == (
        "train_input.csv line 5: non-numeric value 'abc' in column 1 (I) of 'abc,0.1'; "
        "expected 2 numeric columns (I,Q)"
    )


def test_iqdataset_summary_and_fingerprint_sensitivity():
    ds = make_demo_dataset(n_train=2048, n_val=1024, n_test=1024, nperseg=512)
    assert isinstance(ds, IQDataset)
    fp = ds.fingerprint()
    x = ds.train.x.copy()
    x[0, 0] = np.nextafter(x[0, 0], np.float32(2))
    changed = IQDataset(ds.name, ds.source, ds.spec, Split(x, ds.train.y), ds.val, ds.test)
    assert changed.fingerprint() != fp
    respec = IQDataset(ds.name, ds.source, replace(ds.spec, nperseg=256), ds.train, ds.val, ds.test)
    assert respec.fingerprint() != fp
    s = ds.summary()
    assert s["train"] == 2048 and s["fs_mhz"] == 640 and s["bw_main_mhz"] == 160 and s["n_sub_ch"] == 4
    assert s["metrics_available"] is True and "Demo PA (synthetic)" in s["text"]


def test_import_is_light():
    """``import dpd_desktop.data`` (which the command line imports at start) brings neither PyTorch nor Qt."""
    code = "import sys, dpd_desktop.data; print(sorted(m for m in ('PySide6', 'torch') if m in sys.modules))"
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
