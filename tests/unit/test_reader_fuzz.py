"""Property tests (hypothesis): random bytes and random CSV-like text thrown at every reader give either a result or
one of our own error types (DatasetError, RecordError, CheckpointError, DpdExportError), whose message names the
file; never a bare ValueError / KeyError / UnicodeDecodeError / IndexError / TypeError traceback."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpd_desktop.data import DatasetError, load_dataset, read_iq_csv
from dpd_desktop.data.spec import normalize_spec, read_spec_file
from dpd_desktop.runs.artifacts import CheckpointError, load_checkpoint
from dpd_desktop.export.dpd_export import DpdExportError, read_input_file
from dpd_desktop.runs.record import RecordError, RunRecord

OURS = (DatasetError, RecordError, CheckpointError, DpdExportError)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _ours(call, name: str):
    """Run ``call``: it returns, or raises one of OURS naming the file ``name`` (any other exception fails the
    test with its traceback)."""
    try:
        call()
    except OURS as exc:
        assert name in str(exc), str(exc)


def _in_tmp(fn):
    with tempfile.TemporaryDirectory() as d:
        return fn(Path(d))


# ------------------------------------------------------------------------------------------------ random bytes
FILE_READERS = [
    ("data.csv", lambda p: load_dataset(p)),
    ("train_input.csv", lambda p: read_iq_csv(p)),
    ("pa.h5", lambda p: load_dataset(p)),
    ("spec.json", lambda p: read_spec_file(p)),
    ("best.pt", lambda p: load_checkpoint(p)),
    ("x.mat", lambda p: read_input_file(p)),
    ("x.h5", lambda p: read_input_file(p)),
    ("x.csv", lambda p: read_input_file(p)),
]


@pytest.mark.parametrize("name,reader", FILE_READERS, ids=[r[0] for r in FILE_READERS])
@FUZZ
@given(data=st.binary(max_size=2048))
def test_random_bytes_give_only_our_errors(name, reader, data):
    def run(d: Path):
        p = d / name
        p.write_bytes(data)
        _ours(lambda: reader(p), name)
    _in_tmp(run)


@FUZZ
@given(data=st.binary(max_size=1024), status=st.binary(max_size=256))
def test_random_run_folder_gives_only_record_errors(data, status):
    def run(d: Path):
        (d / "config.json").write_bytes(data)
        (d / "status.json").write_bytes(status)
        _ours(lambda: RunRecord.open(d), "config.json")
        rec = RunRecord.read(d)  # the listing's reader never raises
        assert rec is not None and isinstance(rec.state, str)
    _in_tmp(run)


@FUZZ
@given(data=st.binary(max_size=1024))
def test_random_split_folder_spec_gives_only_dataset_errors(data):
    def run(d: Path):
        (d / "spec.json").write_bytes(data)
        _ours(lambda: load_dataset(d), ".")  # spec.json, or the split files it lacks
    _in_tmp(run)


# ------------------------------------------------------------------------------------------------ random CSV text
CELL = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-10**40, max_value=10**40).map(str),
    st.sampled_from(["", " ", "nan", "inf", "-inf", "1e999", "abc", '"1.0"', "1_000", "0x10", "+", "-", ".",
                     "1,5", "I", "Q", "I_in", "Q_out", "\ufeff", "é", "\x00"]),
    st.text(max_size=6),
)
SEP = st.sampled_from([",", ",", ",", ";", "\t", " ", ", "])
LINE_END = st.sampled_from(["\n", "\r\n", "\r", "\n\n"])


@st.composite
def csv_text(draw, header: str):
    n_cols = draw(st.integers(min_value=0, max_value=6))
    rows = draw(st.lists(st.lists(CELL, min_size=n_cols, max_size=n_cols + 1), max_size=12))
    sep, end = draw(SEP), draw(LINE_END)
    head = draw(st.sampled_from([header, header.replace(",", ";"), "", header.lower(), "1,2,3,4"]))
    return head + end + end.join(sep.join(r) for r in rows) + draw(st.sampled_from(["", end]))


@FUZZ
@given(text=csv_text("I_in,Q_in,I_out,Q_out"), encoding=st.sampled_from(["utf-8", "utf-8-sig", "latin-1"]))
def test_random_single_csv_text(text, encoding):
    def run(d: Path):
        p = d / "data.csv"
        p.write_bytes(text.encode(encoding, errors="replace"))
        _ours(lambda: load_dataset(p), "data.csv")
    _in_tmp(run)


@FUZZ
@given(text=csv_text("I,Q"))
def test_random_iq_csv_text(text):
    def run(d: Path):
        p = d / "train_input.csv"
        p.write_text(text, encoding="utf-8", errors="replace")
        _ours(lambda: read_iq_csv(p), "train_input.csv")
        _ours(lambda: read_input_file(p), "train_input.csv")
    _in_tmp(run)


# ------------------------------------------------------------------------------------------------ random JSON
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                         max_size=3), max_leaves=8)
SPEC_KEYS = st.sampled_from(["input_signal_fs", "fs", "sample_rate", "bw_main_ch", "bw_sub_ch", "n_sub_ch",
                             "nperseg", "dataset_format", "csv_filename", "split_ratios", "input_signal_bw"])


@FUZZ
@given(raw=st.dictionaries(SPEC_KEYS, JSON_VALUES | st.sampled_from(["640e6", "160 MHz", "-1", "0"]), max_size=6))
def test_random_spec_fields_give_only_dataset_errors(raw):
    try:
        spec = normalize_spec(raw, source="spec.json")
        spec.require_metrics("spec.json")
    except DatasetError as exc:
        assert "spec.json" in str(exc)


EXPERIMENT_KEYS = st.sampled_from(["step", "backbone", "hidden_size", "num_layers", "epochs", "frame_length",
                                   "dataset", "lr", "seed", "device", "pa_run", "threads", "zzz"])


@FUZZ
@given(exp=st.dictionaries(EXPERIMENT_KEYS, JSON_VALUES, max_size=8), schema=JSON_VALUES,
       dataset=JSON_VALUES, status=st.dictionaries(st.sampled_from(["state", "best_epoch", "pid", "host",
                                                                    "epochs_completed"]), JSON_VALUES))
def test_random_config_json_gives_only_record_errors(exp, schema, dataset, status):
    def run(d: Path):
        (d / "config.json").write_text(json.dumps({"schema": schema, "experiment": exp, "dataset": dataset}))
        (d / "status.json").write_text(json.dumps(status))
        _ours(lambda: RunRecord.open(d), "config.json")
        rec = RunRecord.read(d)
        assert rec is not None and isinstance(rec.state, str)
        rec.label, rec.best_epoch, rec.message  # noqa: B018 - the listing reads them
    _in_tmp(run)


@FUZZ
@given(pid=st.integers(min_value=-2**70, max_value=2**70), state=st.sampled_from(["running", "queued", "succeeded"]),
       start=JSON_VALUES)
def test_a_status_of_this_host_with_any_pid_reads(pid, state, start):
    """status.json recording this host and any pid (a damaged or foreign file) still gives a state."""
    import socket

    def run(d: Path):
        (d / "config.json").write_text(json.dumps({"schema": 2, "experiment": {
            "step": "pa", "backbone": "gru", "hidden_size": 4, "num_layers": 1}}))
        (d / "status.json").write_text(json.dumps({"state": state, "pid": pid, "host": socket.gethostname(),
                                                   "process_start": start}))
        assert RunRecord.open(d).state in ("running", "queued", "succeeded", "interrupted")
    _in_tmp(run)
