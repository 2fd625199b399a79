"""Bad inputs, one row each: the reader the user reaches, the error type and the exact message (a regex anchored at
both ends) the user sees, naming the file and the line or field. Builders in tests/unit/bad_files.py.

(Queue-file rows belong to the queue's own tests.)
"""
from __future__ import annotations

import json
import re

import numpy as np
import pytest
from scipy.io import savemat

from dpd_desktop.data import DatasetError, load_dataset, read_iq_csv
from dpd_desktop.data.spec import read_spec_file
from dpd_desktop.models import build_model
from dpd_desktop.runs.artifacts import CheckpointError, load_checkpoint, load_state_checked
from dpd_desktop.export.dpd_export import DpdExportError, read_input_file
from dpd_desktop.runs.record import RecordError, RunRecord

from bad_files import (ARCH, ROWS, SINGLE_HEADER, RunsCode, checkpoint_bytes, config_doc, h5_dataset, held_lock,
                       mat_v73, write)

IQ_EXPECTED = r"complex64/complex128 of shape \(N,\) or float of shape \(N, 2\) with columns I, Q"
MAT_SHAPE = r"a complex vector \(N,\) / \(N, 1\) / \(1, N\) or a real N×2 I/Q matrix"
IN_USE = "a file no other program is writing: close that program, or wait until it has finished"
NOT_ZIP = ("not a readable checkpoint (not the zip archive torch.save writes: the file is cut short, damaged or of "
           "another kind)")


def _csv(text, encoding="utf-8"):
    return lambda t: (lambda: load_dataset(write(t / "data.csv", text, encoding)))


def _iq(text):
    return lambda t: (lambda: read_iq_csv(write(t / "train_input.csv", text)))


def _h5(**kw):
    return lambda t: (lambda: load_dataset(h5_dataset(t / "pa.h5", **kw)))


def _mat(build):
    return lambda t: (lambda: read_input_file(build(t / "x.mat")))


def _savemat(d):
    def build(p):
        savemat(p, d)
        return p
    return build


def _spec(obj, metrics=False):
    def make(t):
        p = write(t / "ds" / "spec.json", obj if isinstance(obj, str) else json.dumps(obj))
        return (lambda: read_spec_file(p).require_metrics(p)) if metrics else (lambda: read_spec_file(p))
    return make


def _ckpt(data_of):
    return lambda t: (lambda: load_checkpoint(write(t / "best.pt", data_of(t))))


def _arch(state_of):
    def make(t):
        p = write(t / "best.pt", checkpoint_bytes(state_of(), {"format": "dpd-desktop-checkpoint-1", **ARCH}))
        return lambda: load_state_checked(build_model("gru", 4, 1), p, ARCH)
    return make


def _config(text):
    def make(t):
        write(t / "run" / "config.json", text)
        return lambda: RunRecord.open(t / "run")
    return make


def _locked(kind, build, read):
    def make(t):
        p = build(t)

        def call():
            with held_lock(p, kind):
                read(p)
        return call
    return make


def _gru(hidden):
    return lambda: build_model("gru", hidden, 1).state_dict()


def _gru_f64():
    return {k: v.double() for k, v in build_model("gru", 4, 1).state_dict().items()}


# (id, make(tmp) -> call, error type, message regex; {T} stands for the tmp folder)
ROWS_TABLE = [
    # ------------------------------------------------------------------------------------------------ CSV
    ("csv-empty", _csv(""), DatasetError,
     r"data\.csv: empty file; expected a header line \(e\.g\. 'I_in,Q_in,I_out,Q_out'\) followed by at least one "
     r"data row"),
    ("csv-header-only", _csv(SINGLE_HEADER), DatasetError,
     r"data\.csv line 1: header only, no data rows; expected at least one data row of 4 numbers"),
    ("csv-one-column", _iq("I\n0.1\n0.2\n"), DatasetError,
     r"train_input\.csv line 1: header has 1 column\(s\): 'I'; expected 2 columns, e\.g\. 'I,Q'"),
    ("csv-text-in-numbers", _csv(SINGLE_HEADER + ROWS + "0.1,abc,0.3,0.4\n"), DatasetError,
     r"data\.csv line 62: non-numeric value 'abc' in column 2 \(Q_in\) of '0\.1,abc,0\.3,0\.4'; expected 4 "
     r"numeric columns \(I_in,Q_in,I_out,Q_out\)"),
    ("csv-nan", _csv(SINGLE_HEADER + ROWS + "0.1,nan,0.3,0.4\n"), DatasetError,
     r"data\.csv line 62: non-finite value \(nan\) in column 2 \(Q_in\) of '0\.1,nan,0\.3,0\.4'; expected finite "
     r"numbers \(no NaN/Inf\)"),
    ("csv-inf", _iq("I,Q\n0.1,0.2\n-inf,0.2\n"), DatasetError,
     r"train_input\.csv line 3: non-finite value \(-inf\) in column 1 \(I\) of '-inf,0\.2'; expected finite numbers "
     r"\(no NaN/Inf\)"),
    ("csv-ragged", _csv(SINGLE_HEADER + "0.1,0.2,0.3,0.4\n0.1,0.2,0.3\n" + ROWS), DatasetError,
     r"data\.csv line 3: expected 4 numeric columns \(I_in,Q_in,I_out,Q_out\) separated by ',', got 3 column\(s\): "
     r"'0\.1,0\.2,0\.3'"),
    ("csv-semicolons", _csv(SINGLE_HEADER.replace(",", ";") + ROWS.replace(",", ";")), DatasetError,
     r"data\.csv line 1: the columns are separated by semicolons, not commas: 'I_in;Q_in;I_out;Q_out'; expected "
     r"comma-separated values \(save the file as CSV with ',' between columns\)"),
    ("csv-tabs", _iq("I\tQ\n0.1\t0.2\n"), DatasetError,
     r"train_input\.csv line 1: the columns are separated by tabs, not commas: 'I\\tQ'; expected comma-separated "
     r"values .*"),
    ("csv-utf16-bom", _csv(SINGLE_HEADER + ROWS, "utf-16"), DatasetError,
     r"data\.csv line 1: UTF-16 \(little-endian\) text \(byte-order mark 0xFF 0xFE\); expected UTF-8 or ASCII "
     r"text: save the file as CSV \(UTF-8\)"),
    ("csv-huge-value", _csv(SINGLE_HEADER + "1e40,0.2,0.3,0.4\n" + ROWS), DatasetError,
     r"data\.csv line 2: value 1e\+40 in column 1 \(I_in\) of '1e40,0\.2,0\.3,0\.4' overflows float32; expected "
     r"\|value\| ≤ 3\.402823e\+38 \(samples are stored as float32\)"),
    ("csv-not-text", _csv(b"I_in,Q_in,I_out,Q_out\n\x00\x9f\xff\n"), DatasetError,
     r"data\.csv line 2: not text: undecodable byte 0x9f; expected UTF-8/ASCII CSV text"),
    ("csv-locked-flock", _locked("flock", lambda t: write(t / "data.csv", SINGLE_HEADER + ROWS), load_dataset),
     DatasetError, rf"data\.csv: in use by another process \(it holds a flock lock on {{T}}/data\.csv\); "
                   rf"expected {IN_USE}"),
    ("csv-locked-lockf", _locked("lockf", lambda t: write(t / "train_input.csv", "I,Q\n0,0\n"), read_iq_csv),
     DatasetError, rf"train_input\.csv: in use by another process \(it holds a fcntl lock on "
                   rf"{{T}}/train_input\.csv\); expected {IN_USE}"),
    # ------------------------------------------------------------------------------------------------ HDF5
    ("h5-not-hdf5", lambda t: (lambda: load_dataset(write(t / "pa.h5", "hello"))), DatasetError,
     r"pa\.h5: cannot open as HDF5 \(.*file signature not found.*\); expected an HDF5 file \(layout in "
     r"docs/hdf5-layout\.md\)"),
    ("h5-missing-dataset", _h5(skip=("val", "y")), DatasetError,
     r"pa\.h5 field '/val/y': missing dataset '/val/y'; expected datasets /val/x \(PA input\) and /val/y \(PA "
     r"output\)"),
    ("h5-wrong-shape", _h5(bad={"/val/y": np.zeros((64, 3), np.float32)}), DatasetError,
     rf"pa\.h5 field '/val/y': dataset /val/y has shape \(64, 3\) and dtype float32; expected {IQ_EXPECTED}"),
    ("h5-complex-2-columns", _h5(bad={"/train/x": np.zeros((64, 2), np.complex64)}), DatasetError,
     rf"pa\.h5 field '/train/x': dataset /train/x has shape \(64, 2\) and dtype complex64; expected {IQ_EXPECTED}"),
    ("h5-length-mismatch", _h5(bad={"/test/y": np.zeros((63, 2), np.float32)}), DatasetError,
     r"pa\.h5 field '/test': length mismatch: /test/x has 64 samples but /test/y has 63; expected equal lengths "
     r"\(sample-aligned input/output\)"),
    ("h5-locked", _locked("h5py", lambda t: h5_dataset(t / "pa.h5"), load_dataset), DatasetError,
     rf"pa\.h5: in use by another process \(it holds the HDF5 file lock of {{T}}/pa\.h5, e\.g\. while writing "
     rf"it\); expected {IN_USE}"),
    # ------------------------------------------------------------------------------------------------ MAT
    ("mat-not-mat", _mat(lambda p: write(p, "hello world, this is not a MAT file")), DpdExportError,
     r"input file x\.mat: not a readable MATLAB file \(.*\); expected a MATLAB v4-v7 \.mat file with a variable x"),
    ("mat-v7.3", _mat(mat_v73), DpdExportError,
     r"input file x\.mat: MATLAB v7\.3 file; save it with -v7 or use HDF5 \(.*\)"),
    ("mat-missing-variable", _mat(_savemat({"y": np.zeros((8, 2))})), DpdExportError,
     r"input file x\.mat: variable 'x' missing \(expected a complex vector or an N×2 I/Q matrix\)"),
    ("mat-wrong-shape", _mat(_savemat({"x": np.zeros((8, 3))})), DpdExportError,
     rf"input file x\.mat: variable x has shape \(8, 3\) and dtype float64; expected {MAT_SHAPE}"),
    ("mat-locked", _locked("flock", lambda t: _savemat({"x": np.zeros((8, 2))})(t / "x.mat"), read_input_file),
     DpdExportError,
     rf"input file x\.mat: in use by another process \(it holds a flock lock on {{T}}/x\.mat\); expected {IN_USE}"),
    # ------------------------------------------------------------------------------------------------ spec.json
    ("spec-not-json", _spec("{not json"), DatasetError,
     r"spec\.json line 1: invalid JSON at column 2 \(Expecting property name enclosed in double quotes\); expected "
     r"a JSON object such as .*"),
    ("spec-wrong-type", _spec({"nperseg": "abc"}), DatasetError,
     r"spec\.json field 'nperseg': expected a positive integer \(segment length in samples\), got 'abc'"),
    ("spec-unknown-format", _spec({"dataset_format": "parquet"}), DatasetError,
     r"spec\.json field 'dataset_format': unknown dataset_format 'parquet'; expected one of split_csv, single_csv, "
     r"hdf5"),
    ("spec-sample-rate-0", _spec({"input_signal_fs": 0}), DatasetError,
     r"spec\.json field 'input_signal_fs': expected a positive number in Hz \(e\.g\. 640e6 or \"640e6\" or \"640 "
     r"MHz\"\), got 0"),
    ("spec-sample-rate-negative", _spec({"input_signal_fs": -640e6}), DatasetError,
     r"spec\.json field 'input_signal_fs': expected a positive number in Hz .*, got -640000000\.0"),
    ("spec-bandwidth-above-rate", _spec({"input_signal_fs": 100e6, "bw_main_ch": 200e6, "n_sub_ch": 1,
                                         "nperseg": 256}, metrics=True), DatasetError,
     r"{T}/ds/spec\.json field 'bw_main_ch': main bandwidth bw_main_ch = 2e\+08 Hz \(200 MHz\) is not below the "
     r"sample rate input_signal_fs = 1e\+08 Hz \(100 MHz\); expected bw_main_ch < input_signal_fs; .*"),
    ("spec-locked", _locked("lockf", lambda t: write(t / "ds" / "spec.json", "{}"), read_spec_file), DatasetError,
     rf"spec\.json: in use by another process \(it holds a fcntl lock on {{T}}/ds/spec\.json\); expected {IN_USE}"),
    # ------------------------------------------------------------------------------------------------ checkpoint
    ("ckpt-not-a-zip", _ckpt(lambda t: b"hello, not a checkpoint"), CheckpointError,
     rf"{{T}}/best\.pt: {re.escape(NOT_ZIP)}"),
    ("ckpt-truncated", _ckpt(lambda t: checkpoint_bytes(_gru(4)())[:400]), CheckpointError,
     rf"{{T}}/best\.pt: {re.escape(NOT_ZIP)}"),
    ("ckpt-pickle-payload", _ckpt(lambda t: checkpoint_bytes(_gru(4)(), {"note": RunsCode(t / "RAN")})),
     CheckpointError,
     r"{T}/best\.pt: not a readable checkpoint \(UnpicklingError\): it holds a pickled Python object "
     r"\((posix|nt)\.system\), which a checkpoint never contains; it was not loaded"),
    ("ckpt-other-format", _ckpt(lambda t: checkpoint_bytes(_gru(4)(), {"format": "someone-else-9"})),
     CheckpointError,
     r"{T}/best\.pt: field 'meta\.format' is 'someone-else-9'; this version reads dpd-desktop-checkpoint-1"),
    ("ckpt-not-tensors", _ckpt(lambda t: checkpoint_bytes({"w": [1, 2, 3]})), CheckpointError,
     r"{T}/best\.pt: field 'state_dict\.w' is a list, expected a tensor"),
    ("ckpt-wrong-arch", _arch(_gru(5)), CheckpointError,
     r"{T}/best\.pt: field 'backbone\.rnn\.weight_ih_l0' has shape \(15, 2\), expected \(12, 2\) for gru H=4"),
    ("ckpt-wrong-dtype", _arch(_gru_f64), CheckpointError,
     r"{T}/best\.pt: field 'backbone\.rnn\.weight_ih_l0' has dtype torch\.float64, expected torch\.float32"),
    # ------------------------------------------------------------------------------------------------ config.json
    ("config-wrong-schema", _config(config_doc(schema=9)), RecordError,
     r"{T}/run/config\.json: field 'schema' is 9; this version reads schemas 1, 2"),
    ("config-missing-experiment", _config(config_doc(experiment=None)), RecordError,
     r"{T}/run/config\.json: field 'experiment' is missing or not an object \(not a run's configuration\)"),
    ("config-bad-field", _config(config_doc(experiment={"hidden_size": "x"})), RecordError,
     r"{T}/run/config\.json: field 'experiment\.hidden_size' is 'x', expected a positive integer"),
    ("config-unknown-field", _config(config_doc(experiment={"colour": "red"})), RecordError,
     r"{T}/run/config\.json: field 'experiment\.colour': colour: unknown configuration field \(known: .*\)"),
    ("config-not-json", _config("{"), RecordError, r"{T}/run/config\.json: not valid JSON \(.*\)"),
]


@pytest.mark.parametrize("make,error,pattern", [r[1:] for r in ROWS_TABLE], ids=[r[0] for r in ROWS_TABLE])
def test_bad_input_gives_its_message(tmp_path, make, error, pattern):
    call = make(tmp_path)
    with pytest.raises(error) as info:
        call()
    assert re.fullmatch(pattern.replace("{T}", re.escape(str(tmp_path))), str(info.value)), str(info.value)


def test_the_table_has_every_kind_of_input():
    kinds = {r[0].split("-")[0] for r in ROWS_TABLE}
    assert kinds == {"csv", "h5", "mat", "spec", "ckpt", "config"} and len(ROWS_TABLE) >= 25


def test_a_pickled_payload_never_runs(tmp_path):
    marker = tmp_path / "RAN"
    p = write(tmp_path / "best.pt", checkpoint_bytes(_gru(4)(), {"note": RunsCode(marker)}))
    with pytest.raises(CheckpointError):
        load_checkpoint(p)
    assert not marker.exists()
