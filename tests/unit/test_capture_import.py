"""import-capture: round trip of a synthetic capture (delay removed, normalized, split exactly) and the CLI faces."""
from __future__ import annotations

import json
import math

import h5py
import numpy as np
import pytest
from scipy.io import savemat

import capture_fixtures as cf
from datasets_dir import DATASETS
from dpd_desktop.analysis.capture_import import CaptureImportError, import_capture, read_signal
from dpd_desktop.analysis.inspect import inspect_dataset
from dpd_desktop.cli.entry import main
from dpd_desktop.data import load_dataset

N = 40000


def _write_csv(path, z):
    np.savetxt(path, np.stack([z.real, z.imag], axis=1), delimiter=",", header="I,Q", comments="", fmt="%.17g")


@pytest.fixture
def files(tmp_path):
    x, y = cf.capture(N, delay=12.0)
    _write_csv(tmp_path / "x.csv", x)
    with h5py.File(tmp_path / "y.h5", "w") as f:
        f["y"] = y
    return tmp_path / "x.csv", tmp_path / "y.h5", x, y


def test_round_trip_removes_the_delay_and_splits_exactly(files, tmp_path):
    xf, yf, x, y = files
    out = tmp_path / "ds"
    res = import_capture(xf, yf, out, sample_rate_hz=cf.FS, bandwidth_hz=cf.BW, split=(0.6, 0.2, 0.2))
    assert res.delay_integer == 12 and abs(res.delay_fraction) < 0.05
    m = N - 12
    n_train, n_val = math.floor(m * 0.6), math.floor(m * 0.2)
    assert res.n_samples == {"train": n_train, "val": n_val, "test": m - n_train - n_val}
    ds = load_dataset(out)
    assert ds.n_samples == res.n_samples
    scale = np.abs(x[:n_train]).max()
    assert res.scale == pytest.approx(scale, rel=1e-15)
    want_x = np.stack([x.real, x.imag], 1)[:m] / scale
    want_y = np.stack([y.real, y.imag], 1)[12:] / scale
    got_x = np.concatenate([ds.train.x, ds.val.x, ds.test.x])
    got_y = np.concatenate([ds.train.y, ds.val.y, ds.test.y])
    np.testing.assert_array_equal(got_x, want_x.astype(np.float32))
    np.testing.assert_array_equal(got_y, want_y.astype(np.float32))
    assert np.abs(ds.train.x_complex).max() == pytest.approx(1.0, abs=1e-6)
    spec = json.loads((out / "spec.json").read_text())
    assert spec["input_signal_fs"] == cf.FS and spec["bw_main_ch"] == cf.BW and spec["n_sub_ch"] == 1
    assert spec["import"]["delay_removed_samples"] == 12 and spec["import"]["output_file"] == "y.h5"
    rep = inspect_dataset(ds)
    assert abs(rep.delay_samples) < 0.05
    assert rep.errors == () and "DELAY" not in [f.code for f in rep.flags]
    assert not list(tmp_path.glob(".ds.*"))  # the temporary folder is gone


def test_fractional_delay_is_reported_not_resampled(tmp_path):
    x, y = cf.capture(N, delay=7.3)
    savemat(tmp_path / "x.mat", {"x": x.reshape(-1, 1)})
    savemat(tmp_path / "y.mat", {"y": y})
    res = import_capture(tmp_path / "x.mat", tmp_path / "y.mat", tmp_path / "ds", sample_rate_hz=cf.FS,
                         bandwidth_hz=cf.BW)
    assert res.delay_integer == 7 and abs(res.delay_fraction - 0.3) < 0.05
    ds = load_dataset(tmp_path / "ds")
    np.testing.assert_array_equal(ds.train.y[:5], (np.stack([y.real, y.imag], 1)[7:12] / res.scale).astype(np.float32))
    assert abs(inspect_dataset(ds).delay_samples - 0.3) < 0.05


def test_bad_inputs_name_the_file(tmp_path, files):
    xf, yf, x, y = files
    bad = x.copy()
    bad[321] = np.nan
    savemat(tmp_path / "nan.mat", {"x": bad})
    with pytest.raises(CaptureImportError, match=r"nan\.mat: 1 non-finite sample\(s\), the first at index 321"):
        read_signal(tmp_path / "nan.mat")
    with pytest.raises(CaptureImportError, match="missing.csv: not found"):
        import_capture(tmp_path / "missing.csv", yf, tmp_path / "o", sample_rate_hz=cf.FS, bandwidth_hz=cf.BW)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    with pytest.raises(CaptureImportError, match="already exists"):
        import_capture(xf, yf, tmp_path / "full", sample_rate_hz=cf.FS, bandwidth_hz=cf.BW)
    assert (tmp_path / "full" / "keep.txt").read_text() == "mine"
    with pytest.raises(CaptureImportError, match="split val would hold"):
        import_capture(xf, yf, tmp_path / "o", sample_rate_hz=cf.FS, bandwidth_hz=cf.BW, split=(0.9, 0.05, 0.05))
    with pytest.raises(CaptureImportError, match="summing to 1"):
        import_capture(xf, yf, tmp_path / "o", sample_rate_hz=cf.FS, bandwidth_hz=cf.BW, split=(0.6, 0.3, 0.3))
    with pytest.raises(CaptureImportError, match=r"^channel layout \(--bandwidth\): spec\.json field 'bw_main_ch': "
                                                 r"main bandwidth bw_main_ch = 9e\+08 Hz \(900 MHz\) is not below"):
        import_capture(xf, yf, tmp_path / "o", sample_rate_hz=640e6, bandwidth_hz=900e6)
    with pytest.raises(CaptureImportError, match=r"x\.csv: named as both the PA input and the PA output"):
        import_capture(xf, tmp_path / "." / "x.csv", tmp_path / "o", sample_rate_hz=cf.FS, bandwidth_hz=cf.BW)
    _write_csv(tmp_path / "x_copy.csv", x)
    with pytest.raises(CaptureImportError, match=r"x_copy\.csv: the PA output equals the PA input \(x\.csv\)"):
        import_capture(xf, tmp_path / "x_copy.csv", tmp_path / "o", sample_rate_hz=cf.FS, bandwidth_hz=cf.BW)
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------------------------------------------------- CLI
def test_cli_import_then_inspect_json(files, tmp_path, capsys):
    xf, yf, _, _ = files
    out = tmp_path / "cli_ds"
    assert main(["--workspace", str(tmp_path / "ws"), "import-capture", "--input", str(xf), "--output", str(yf),
                 "--sample-rate", "800e6", "--bandwidth", "200e6", "--split", "0.6,0.2,0.2",
                 "--out", str(out)]) == 0
    assert "removed a delay of 12 samples" in capsys.readouterr().out
    assert main(["--workspace", str(tmp_path / "ws"), "inspect", str(out), "--json", "--frame-length", "9000"]) == 0
    d = json.loads(capsys.readouterr().out)
    for key in ("name", "spec", "n_samples", "papr_x_db", "papr_y_db", "delay_samples", "delay_integer",
                "delay_fraction", "delay_method", "gain_db", "phase_deg", "am_am", "am_pm", "p1db_input_amplitude",
                "obw_x_hz", "obw_ratio", "aclr_x_db", "aclr_y_db", "flags", "methods"):
        assert key in d, key
    assert d["n_samples"]["train"] == 23992
    assert [f["code"] for f in d["flags"]] == ["FRAME_TOO_LONG", "FRAME_TOO_LONG"]
    assert d["flags"][0]["severity"] == "error"


def test_cli_exit_codes(tmp_path, capsys):
    ws = ["--workspace", str(tmp_path / "ws")]
    assert main(ws + ["inspect", str(tmp_path / "nothing")]) == 2
    assert "path not found" in capsys.readouterr().err
    assert main(ws + ["import-capture", "--input", str(tmp_path / "a.csv"), "--output", str(tmp_path / "b.csv"),
                      "--sample-rate", "1e6", "--bandwidth", "2e5", "--out", str(tmp_path / "o")]) == 2
    assert "a.csv: not found" in capsys.readouterr().err


@pytest.mark.parametrize("option, value, message", [
    ("--carriers", "0", "--carriers 0: expected a positive integer"),
    ("--carriers", "-2", "--carriers -2: expected a positive integer"),
    ("--nperseg", "0", "--nperseg 0: expected a positive integer"),
    ("--nperseg", "-1", "--nperseg -1: expected a positive integer"),
    ("--sample-rate", "0", "--sample-rate 0.0: expected a positive number of Hz"),
    ("--bandwidth", "0", "--bandwidth 0.0: expected a positive number of Hz"),
    ("--carrier-bandwidth", "nan", "--carrier-bandwidth nan: expected a positive number of Hz"),
])
def test_cli_bad_layout_options_name_the_option(files, tmp_path, capsys, option, value, message):
    """A carrier count, segment length, rate or bandwidth of zero or less is exit 2 naming the option (--carriers 0
    was a ZeroDivisionError traceback; --nperseg 0 blamed a spec.json field), and nothing is written."""
    xf, yf, _, _ = files
    args = {"--sample-rate": "800e6", "--bandwidth": "200e6", option: value}
    argv = ["--workspace", str(tmp_path / "ws"), "import-capture", "--input", str(xf), "--output", str(yf),
            "--out", str(tmp_path / "o")]
    for k, v in args.items():
        argv += [k, v]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == f"error: {message}"
    assert not (tmp_path / "o").exists()


def test_cli_inspect_frame_length_must_be_positive(files, tmp_path, capsys):
    """--frame-length 0 or -5 was accepted and ignored (exit 0, no flag); now exit 2 naming the option."""
    xf, yf, _, _ = files
    out = tmp_path / "ds"
    import_capture(xf, yf, out, sample_rate_hz=cf.FS, bandwidth_hz=cf.BW)
    for v in ("0", "-5"):
        assert main(["--workspace", str(tmp_path / "ws"), "inspect", str(out), "--frame-length", v]) == 2
        assert capsys.readouterr().err.strip() == f"error: --frame-length {v}: expected a positive number of samples"


def test_cli_human_table_prints_flags_and_exits_0(tmp_path, capsys):
    d = DATASETS / "DPA_200MHz"
    if not d.is_dir():
        pytest.skip("dataset DPA_200MHz not found")
    assert main(["--workspace", str(tmp_path / "ws"), "inspect", str(d), "--frame-length", "8000"]) == 0
    out = capsys.readouterr().out
    assert "Delay y after x" in out and "P1dB (input)" in out
    assert "ERROR    FRAME_TOO_LONG    Frame length 8000 is longer than the val split (7680 samples)." in out
