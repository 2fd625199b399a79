"""End to end: PA → DPD through the frozen PA → run-DPD export, on CPU, with tiny settings.

(a) the exported u is bit for bit the run's scored DPD output, and PA(u) reproduces the scored prediction and the
    reported test metrics exactly; CSV, HDF5 and MAT outputs agree; the side-car metadata is complete;
(b) the PA stays bit for bit the PA run's checkpoint through a whole DPD run;
(c) a DPD run refuses to start, naming file and field, without the PA's best.pt or with a changed architecture;
(d) run-dpd errors (unknown extension, a PA run, a missing run, a dataset that cannot be reloaded);
(e) every model family trains as PA and as DPD through the Trainer;
plus the window's "Run DPD…" action.
"""
from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from dpd_desktop.cli.entry import main as cli_main  # noqa: E402
from dpd_desktop.config import ExperimentConfig  # noqa: E402
from dpd_desktop.data import IQDataset, Split, load_dataset, make_demo_dataset  # noqa: E402
from dpd_desktop.data.framing import segment, unsegment  # noqa: E402
from dpd_desktop.metrics import compute_metrics  # noqa: E402
from dpd_desktop.models import build_model  # noqa: E402
from dpd_desktop.runs import artifacts  # noqa: E402
from dpd_desktop.export.dpd_export import DpdExportError, run_dpd  # noqa: E402
from dpd_desktop.runs.outputs import OutputRefused  # noqa: E402
from dpd_desktop.runs.workspace import Workspace  # noqa: E402
from dpd_desktop.runs.events import RunFailed, RunFinished  # noqa: E402
from dpd_desktop.training.trainer import Trainer  # noqa: E402

DPA_160 = Path(__file__).resolve().parents[2].parent / "shared" / "datasets" / "DPA_160MHz"
FAMILIES = ("gru", "dgru", "lstm", "tres_gru", "rvtdcnn")
TINY = dict(hidden_size=8, frame_length=50, stride=8, device="cpu", threads=None)


# ------------------------------------------------------------------------------------------------------ helpers
def _cut(split: Split, n: int) -> Split:
    return Split(split.x[:n], split.y[:n],
                 x64=None if split.x64 is None else split.x64[:n], y64=None if split.y64 is None else split.y64[:n])


def _run(cfg: ExperimentConfig, ds, ws: Workspace):
    events = []
    trainer = Trainer(cfg, dataset=ds, workspace=ws, observers=[events.append])
    result = trainer.run()
    return trainer, result, events


def _finished(events) -> RunFinished:
    (ev,) = [e for e in events if isinstance(e, RunFinished)]
    return ev


def _read_csv_u(path: Path) -> tuple[np.ndarray, np.ndarray]:
    assert path.read_text().splitlines()[0] == "I,Q,I_dpd,Q_dpd"
    a32 = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float64).astype(np.float32)  # like read_iq_csv
    return np.ascontiguousarray(a32[:, :2]), np.ascontiguousarray(a32[:, 2:])


def _forward_segments(model, series: np.ndarray, nperseg: int, bs: int) -> np.ndarray:
    """The trainer's evaluation pass: segments, eval mode, inference mode, batches of ``bs`` segments."""
    xs = torch.from_numpy(segment(series, nperseg))
    model.eval()
    with torch.inference_mode():
        out = torch.cat([model(xs[i:i + bs]) for i in range(0, xs.shape[0], bs)], dim=0)
    return unsegment(out.numpy(), series.shape[0])


def _load_model(run_dir: Path):
    cfg = json.loads((run_dir / "config.json").read_text())
    exp = cfg["experiment"]
    model = build_model(exp["backbone"], exp["hidden_size"], exp["num_layers"])
    state, _ = artifacts.load_checkpoint(run_dir / "best.pt")
    model.load_state_dict(state)
    return model, cfg


# ------------------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def dpa_slice():
    if not (DPA_160 / "spec.json").is_file():
        pytest.skip(f"measured dataset not found at {DPA_160}")
    full = load_dataset(DPA_160)
    nps = full.spec.nperseg
    return IQDataset(name=f"{full.name} (slice)", source=full.source, spec=full.spec, train=_cut(full.train, 20_000),
                     val=_cut(full.val, nps), test=_cut(full.test, nps))


@pytest.fixture(scope="module")
def pipeline(dpa_slice, tmp_path_factory):
    """A PA run (1 epoch) and a DPD run through it (2 epochs) on the DPA_160MHz slice."""
    ws = Workspace(tmp_path_factory.mktemp("dpd-pipeline"))
    _, pa, _ = _run(ExperimentConfig(step="pa", dataset=str(DPA_160), backbone="gru", epochs=1, **TINY),
                    dpa_slice, ws)
    assert pa.state == "succeeded", pa.message
    dpd_trainer, dpd, events = _run(
        ExperimentConfig(step="dpd", dataset=str(DPA_160), backbone="gru", epochs=2, pa_run=str(pa.run_dir), **TINY),
        dpa_slice, ws)
    assert dpd.state == "succeeded", dpd.message
    return {"ws": ws, "pa": pa, "dpd": dpd, "trainer": dpd_trainer, "finished": _finished(events), "ds": dpa_slice}


@pytest.fixture(scope="module")
def demo_small():
    return make_demo_dataset(seed=0, n_train=3000, n_val=4096, n_test=4096)


@pytest.fixture(scope="module")
def demo_gru_pa(demo_small, tmp_path_factory):
    ws = Workspace(tmp_path_factory.mktemp("families"))
    _, res, _ = _run(ExperimentConfig(step="pa", dataset="demo", backbone="gru", epochs=1,
                                      **dict(TINY, frame_length=40, stride=16)), demo_small, ws)
    assert res.state == "succeeded", res.message
    return ws, res


# ------------------------------------------------------------------------------------------------------ (a)
def test_exported_u_is_the_scored_u_and_reproduces_the_metrics(pipeline, tmp_path):
    ws, pa, dpd, ds = pipeline["ws"], pipeline["pa"], pipeline["dpd"], pipeline["ds"]
    with h5py.File(dpd.run_dir / "results.h5", "r") as f:
        scored_u = f["test/dpd_output"][()]
        scored_pred = f["test/prediction"][()]
        target = f["test/target"][()]
        assert np.array_equal(f["test/x"][()], ds.test.x)

    # --split test with the dataset object (the slice cannot be reloaded from config.json's source)
    meta = run_dpd(ws, dpd.run_id, out=tmp_path / "u.csv", split="test", dataset=ds)
    x_csv, u = _read_csv_u(tmp_path / "u.csv")
    assert np.array_equal(x_csv, ds.test.x)
    assert u.dtype == np.float32 and np.array_equal(u, scored_u), "exported u differs from the scored DPD output"

    # PA(u) with the frozen PA from the PA run's best.pt, segmented like the evaluation → the scored prediction
    pa_model, _ = _load_model(pa.run_dir)
    dpd_cfg = json.loads((dpd.run_dir / "config.json").read_text())
    nps, bs = dpd_cfg["dataset"]["spec"]["nperseg"], dpd_cfg["experiment"]["batch_size_eval"]
    pred = _forward_segments(pa_model, u, nps, bs)
    assert np.array_equal(pred, scored_pred)
    metrics = compute_metrics(segment(pred, nps), segment(target, nps), ds.spec)
    reported = pipeline["finished"].test_metrics
    status = json.loads((dpd.run_dir / "status.json").read_text())["test_metrics"]
    assert set(reported) == set(metrics)
    for k, v in metrics.items():
        assert float(v) == reported[k] == status[k], k

    # the same u through the CLI from an input CSV (→ .h5) and with the dataset object (→ .mat)
    inp = tmp_path / "x_in.csv"
    np.savetxt(inp, ds.test.x, fmt="%.9g", delimiter=",", header="I,Q", comments="")
    rc = cli_main(["--workspace", str(ws.root), "run-dpd", "--run", dpd.run_id, "--input", str(inp),
                   "--out", str(tmp_path / "u.h5")])
    assert rc == 0
    with h5py.File(tmp_path / "u.h5", "r") as f:
        assert f["u"].dtype == np.float32 and f["u"].shape == u.shape
        assert np.array_equal(f["u"][()], scored_u) and np.array_equal(f["x"][()], ds.test.x)
        assert f.attrs["dpd_run_id"] == dpd.run_id and f.attrs["samples"] == u.shape[0]
    run_dpd(ws, str(dpd.run_dir), out=tmp_path / "u.mat", split="test", dataset=ds)
    from scipy.io import loadmat

    m = loadmat(tmp_path / "u.mat")
    assert m["u"].dtype == np.complex64 and m["u"].shape == (u.shape[0], 1)
    assert np.array_equal(m["u"][:, 0].real, scored_u[:, 0]) and np.array_equal(m["u"][:, 0].imag, scored_u[:, 1])
    assert np.array_equal(m["x"][:, 0].real, ds.test.x[:, 0])

    # side-car metadata
    side = json.loads((tmp_path / "u.csv.meta.json").read_text())
    assert side == json.loads(json.dumps(meta))
    for key in ("columns", "dtype", "samples", "sample_rate_hz", "gain", "gain_rule", "peak_abs_x", "peak_abs_u",
                "rms_abs_x", "rms_abs_u", "dpd_run_id", "pa_run_id", "pa_checkpoint_sha256", "dataset_fingerprint",
                "dataset_source", "split", "input_file", "nperseg", "segmentation", "created",
                "dpd_desktop_version"):
        assert key in side, key
    assert list(side["columns"]) == ["I", "Q", "I_dpd", "Q_dpd"] and side["dtype"] == "float32"
    assert side["samples"] == u.shape[0] and side["split"] == "test" and side["input_file"] is None
    assert side["nperseg"] == nps and side["sample_rate_hz"] == ds.spec.sample_rate_hz
    assert side["gain"] == dpd_cfg["gain"]["value"] == ds.gain
    u64 = u.astype(np.float64)
    assert side["peak_abs_u"] == float(np.sqrt(np.max(u64[:, 0] ** 2 + u64[:, 1] ** 2)))
    x64 = ds.test.x.astype(np.float64)
    assert side["peak_abs_x"] == pytest.approx(float(np.max(np.hypot(x64[:, 0], x64[:, 1]))), rel=1e-12)
    assert side["dpd_run_id"] == dpd.run_id and side["pa_run_id"] == pa.run_id
    assert side["pa_checkpoint_sha256"] == artifacts.file_sha256(pa.run_dir / "best.pt")
    assert side["dataset_fingerprint"] == ds.fingerprint()
    assert "segment" in side["segmentation"] and "zero" in side["segmentation"]
    in_meta = json.loads((tmp_path / "u.h5.meta.json").read_text())
    assert in_meta["split"] is None and in_meta["input_file"] == str(inp.resolve())


def test_split_of_a_non_reloadable_dataset_says_so(pipeline, tmp_path, capsys):
    """config.json's source is the full DPA_160MHz folder, the run trained on a slice: the fingerprint differs."""
    rc = cli_main(["--workspace", str(pipeline["ws"].root), "run-dpd", "--run", pipeline["dpd"].run_id,
                   "--split", "test", "--out", str(tmp_path / "u.csv")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "fingerprint" in err and "--input" in err
    assert not (tmp_path / "u.csv").exists()


def test_input_file_formats_give_the_same_u(pipeline, tmp_path):
    from scipy.io import savemat

    ws, dpd, ds = pipeline["ws"], pipeline["dpd"], pipeline["ds"]
    x = ds.test.x
    xc = (x[:, 0] + 1j * x[:, 1]).astype(np.complex64)
    with h5py.File(tmp_path / "root.h5", "w") as f:
        f["x"] = xc
    with h5py.File(tmp_path / "split.h5", "w") as f:
        f["val/x"] = x[:10]
        f["test/x"] = x
    savemat(tmp_path / "c.mat", {"x": xc.reshape(-1, 1)})
    savemat(tmp_path / "iq.mat", {"x": x})
    with h5py.File(dpd.run_dir / "results.h5", "r") as f:
        scored_u = f["test/dpd_output"][()]
    for name in ("root.h5", "split.h5", "c.mat", "iq.mat"):
        out = tmp_path / f"u-{name}.h5"
        meta = run_dpd(ws, dpd.run_id, out=out, input_file=tmp_path / name, split="test")
        with h5py.File(out, "r") as f:
            assert np.array_equal(f["u"][()], scored_u), name
        assert meta["input_file"] == str((tmp_path / name).resolve()) and meta["samples"] == x.shape[0]
    savemat(tmp_path / "nox.mat", {"y": x})
    with pytest.raises(DpdExportError, match="variable 'x' missing"):
        run_dpd(ws, dpd.run_id, out=tmp_path / "u.csv", input_file=tmp_path / "nox.mat")
    with h5py.File(tmp_path / "bad.h5", "w") as f:
        f["x"] = np.zeros((4, 3), np.float32)
    with pytest.raises(DpdExportError, match=r"bad.h5: /x has shape \(4, 3\)"):
        run_dpd(ws, dpd.run_id, out=tmp_path / "u.csv", input_file=tmp_path / "bad.h5")


# ------------------------------------------------------------------------------------------------------ (b)
def test_frozen_pa_unchanged_by_a_whole_dpd_run(pipeline):
    pa_state, _ = artifacts.load_checkpoint(pipeline["pa"].run_dir / "best.pt")
    cascade = pipeline["trainer"].net
    got = cascade.pa.state_dict()
    assert set(got) == set(pa_state)
    for k, v in got.items():
        assert torch.equal(v.cpu(), pa_state[k]), k
    assert not any(p.requires_grad for p in cascade.pa.parameters())


# ------------------------------------------------------------------------------------------------------ (c)
def test_dpd_refuses_to_start_without_pa_checkpoint_or_with_other_architecture(demo_gru_pa, demo_small, tmp_path):
    ws, pa = demo_gru_pa
    no_ckpt = tmp_path / "pa-without-best"
    shutil.copytree(pa.run_dir, no_ckpt)
    (no_ckpt / "best.pt").unlink()
    other = tmp_path / "pa-other-arch"
    shutil.copytree(pa.run_dir, other)
    cfg = json.loads((other / "config.json").read_text())
    cfg["experiment"]["hidden_size"] += 1
    (other / "config.json").write_text(json.dumps(cfg))
    for pa_dir, words in ((no_ckpt, ("best.pt",)), (other, ("best.pt", "hidden_size"))):
        _, res, events = _run(ExperimentConfig(step="dpd", dataset="demo", backbone="gru", epochs=1, pa_run=str(pa_dir),
                                               **dict(TINY, frame_length=40, stride=16)), demo_small, ws)
        assert res.state == "failed" and res.history == []
        (failed,) = [e for e in events if isinstance(e, RunFailed)]
        for w in words:
            assert w in failed.message, failed.message
        assert str(pa_dir / "best.pt") in failed.message


# ------------------------------------------------------------------------------------------------------ (d)
def test_run_dpd_errors(pipeline, tmp_path, capsys):
    ws, pa, dpd = pipeline["ws"], pipeline["pa"], pipeline["dpd"]
    base = ["--workspace", str(ws.root), "run-dpd"]
    assert cli_main(base + ["--run", dpd.run_id, "--out", str(tmp_path / "u.txt")]) == 2
    err = capsys.readouterr().err
    assert "'.txt'" in err and ".csv" in err and ".h5" in err and ".mat" in err
    assert not (tmp_path / "u.txt").exists()

    assert cli_main(base + ["--run", pa.run_id, "--out", str(tmp_path / "u.csv")]) == 2
    err = capsys.readouterr().err
    assert "config.json" in err and "experiment.step" in err and "DPD run" in err

    assert cli_main(base + ["--run", "no-such-run", "--out", str(tmp_path / "u.csv")]) == 2
    err = capsys.readouterr().err
    assert "no-such-run" in err and "not found" in err
    assert not (tmp_path / "u.csv").exists()

    with pytest.raises(DpdExportError, match="not the run's dataset"):
        run_dpd(ws, dpd.run_id, out=tmp_path / "u.csv", dataset=make_demo_dataset(n_train=64, n_val=64, n_test=64,
                                                                                 nperseg=64))
    bad = tmp_path / "bad.csv"
    bad.write_text("I,Q\n0.1,0.2\n0.3,abc\n")
    with pytest.raises(DpdExportError, match="bad.csv"):
        run_dpd(ws, dpd.run_id, out=tmp_path / "u.csv", input_file=bad)


def test_run_dpd_input_csv_header_rule(pipeline, tmp_path):
    """--input CSVs follow the split-CSV header rule: a numeric line 1 is refused (it used to be dropped as the
    header, losing a sample), other names are refused, and a Q,I file gives the same u as an I,Q file."""
    ws, dpd, ds = pipeline["ws"], pipeline["dpd"], pipeline["ds"]
    x = ds.test.x
    no_header = tmp_path / "no_header.csv"
    np.savetxt(no_header, x, fmt="%.9g", delimiter=",")
    first = no_header.read_text().split("\n", 1)[0]
    with pytest.raises(DpdExportError) as ei:
        run_dpd(ws, dpd.run_id, out=tmp_path / "u.csv", input_file=no_header)
    assert str(ei.value) == (f"input file no_header.csv line 1: expected a header line such as 'I,Q'; "
                             f"found data '{first}'")
    foo = tmp_path / "foo.csv"
    np.savetxt(foo, x, fmt="%.9g", delimiter=",", header="foo,bar", comments="")
    with pytest.raises(DpdExportError) as ei:
        run_dpd(ws, dpd.run_id, out=tmp_path / "u.csv", input_file=foo)
    assert "foo.csv line 1: header names 'foo', 'bar'" in str(ei.value)
    assert "expected columns I,Q (any order" in str(ei.value)
    blank = tmp_path / "blank.csv"
    blank.write_text("I,Q\n0.1,0.2\n\n0.3,0.4\n")
    with pytest.raises(DpdExportError, match=r"blank\.csv line 3: empty line; expected 2 numeric columns \(I,Q\)"):
        run_dpd(ws, dpd.run_id, out=tmp_path / "u.csv", input_file=blank)
    assert not (tmp_path / "u.csv").exists()

    qi = tmp_path / "qi.csv"
    np.savetxt(qi, x[:, ::-1], fmt="%.9g", delimiter=",", header="Q,I", comments="")
    run_dpd(ws, dpd.run_id, out=tmp_path / "u_qi.h5", input_file=qi)
    with h5py.File(dpd.run_dir / "results.h5", "r") as f, h5py.File(tmp_path / "u_qi.h5", "r") as g:
        assert np.array_equal(g["x"][()], x) and np.array_equal(g["u"][()], f["test/dpd_output"][()])


def test_run_dpd_corrupt_input_files(pipeline, tmp_path):
    from scipy.io import savemat

    ws, dpd, ds = pipeline["ws"], pipeline["dpd"], pipeline["ds"]
    x = ds.test.x
    savemat(tmp_path / "good.mat", {"x": x})
    data = (tmp_path / "good.mat").read_bytes()
    with h5py.File(tmp_path / "good.h5", "w") as f:
        f["x"] = x
    h5 = (tmp_path / "good.h5").read_bytes()
    cases = {
        "trunc.mat": (data[: len(data) // 2], "not a readable MATLAB file"),
        "tiny.mat": (data[:50], "not a readable MATLAB file"),
        "junk.mat": (b"not a mat file at all" * 4, "not a readable MATLAB file"),
        "trunc.h5": (h5[: len(h5) // 2], "not a readable HDF5 file"),
        "junk.hdf5": (b"\x89HDF\r\n\x1a\n" + b"\0" * 200, "not a readable HDF5 file"),
    }
    for name, (content, words) in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(DpdExportError) as ei:
            run_dpd(ws, dpd.run_id, out=tmp_path / "u.csv", input_file=tmp_path / name)
        assert str(ei.value).startswith(f"input file {name}: {words} ("), str(ei.value)
        assert "expected" in str(ei.value)
    folder = tmp_path / "folder.csv"
    folder.mkdir()
    for p, words in ((folder, "is a folder; give a file"), (tmp_path / "missing.csv", "not found")):
        with pytest.raises(DpdExportError, match=f"input file {p}: {words}"):
            run_dpd(ws, dpd.run_id, out=tmp_path / "u.csv", input_file=p)
    assert not (tmp_path / "u.csv").exists()


def test_run_dpd_out_errors_name_the_requested_path(pipeline, tmp_path, capsys):
    ws, dpd, ds = pipeline["ws"], pipeline["dpd"], pipeline["ds"]
    folder = tmp_path / "outdir.csv"  # a folder, even with a file extension
    folder.mkdir()
    for out in (tmp_path, folder):
        with pytest.raises(OutputRefused) as ei:
            run_dpd(ws, dpd.run_id, out=out, dataset=ds)
        assert str(ei.value) == f"the output {out} is a folder (give a file name ending in .csv, .h5, .hdf5, .mat)"
    assert cli_main(["--workspace", str(ws.root), "run-dpd", "--run", dpd.run_id, "--out", str(tmp_path)]) == 2
    assert f"the output {tmp_path} is a folder (give a file name ending in" in capsys.readouterr().err
    if not Path("/proc/self").is_dir():
        pytest.skip("platform: no /proc on this system")
    for name in ("u.csv", "u.h5", "u.mat"):
        out = Path("/proc") / name
        with pytest.raises(DpdExportError) as ei:
            run_dpd(ws, dpd.run_id, out=out, dataset=ds)
        msg = str(ei.value)
        assert msg.startswith(f"cannot write the output file {out}: "), msg
        assert f".{name}." not in msg and ".tmp" not in msg, msg  # not the temporary file's name
        assert "expected a file in a writable folder" in msg


def test_run_dpd_refuses_a_missing_folder_and_its_own_input(pipeline, tmp_path, capsys):
    ws, dpd, ds = pipeline["ws"], pipeline["dpd"], pipeline["ds"]
    missing = tmp_path / "nope" / "deeper" / "u.csv"
    with pytest.raises(OutputRefused, match=f"the output {missing} cannot be written: the folder {missing.parent} "
                                            "does not exist"):
        run_dpd(ws, dpd.run_id, out=missing, dataset=ds)
    assert not (tmp_path / "nope").exists()  # nothing created
    src = tmp_path / "in.csv"
    x = ds.test.x[:4096]
    src.write_text("I,Q\n" + "".join(f"{i!r},{q!r}\n" for i, q in x.tolist()))
    before = src.read_bytes()
    assert cli_main(["--workspace", str(ws.root), "run-dpd", "--run", dpd.run_id, "--input", str(src),
                     "--out", str(src)]) == 2
    assert "writing it would destroy the input" in capsys.readouterr().err
    assert src.read_bytes() == before and not (tmp_path / "in.csv.meta.json").exists()


def test_run_dpd_never_overwrites_run_files_dataset_files_or_read_only_files(pipeline, tmp_path, capsys):
    """--out naming a file of a run folder (this run's results.h5, another run's best.csv, a plot), a file of the
    run's dataset, or a read-only file: exit 2, file unchanged. A previous export is replaced with --overwrite only
    (runs/outputs.py, the rule of every output)."""
    from dpd_desktop.runs.outputs import check_output

    ws, dpd, ds = pipeline["ws"], pipeline["dpd"], pipeline["ds"]
    run_dirs = [p for p in (ws.root / "runs").iterdir() if p.is_dir()]
    victims = [Path(dpd.run_dir) / "results.h5"] + [d / "best.csv" for d in run_dirs if (d / "best.csv").exists()]
    victims += list((Path(dpd.run_dir) / "plots").glob("*.png"))[:1]
    for victim in victims:
        before = victim.read_bytes()
        assert cli_main(["--workspace", str(ws.root), "run-dpd", "--run", dpd.run_id, "--out", str(victim)]) == 2
        err = capsys.readouterr().err
        assert f"the output {victim} is a file of the run folder" in err and "destroy" in err, err
        assert cli_main(["--workspace", str(ws.root), "run-dpd", "--run", dpd.run_id, "--out", str(victim),
                         "--overwrite"]) == 2  # never, whatever the flag
        assert "is a file of the run folder" in capsys.readouterr().err
        assert victim.read_bytes() == before and not Path(str(victim) + ".meta.json").exists()
    # a file of the dataset the run was trained on (split folder or single file), whatever its extension
    data = tmp_path / "dataset"
    data.mkdir()
    (data / "test_input.csv").write_text("I,Q\n0,0\n")
    for source, target in ((data, data / "test_input.csv"), (data / "test_input.csv", data / "test_input.csv")):
        with pytest.raises(OutputRefused, match="is (a file of )?the dataset"):
            check_output(target, overwrite=True, datasets=[source])
    check_output(tmp_path / "elsewhere.csv", datasets=[data])  # a new file: fine
    # read-only
    ro = tmp_path / "ro.csv"
    ro.write_text("keep")
    ro.chmod(0o444)
    assert cli_main(["--workspace", str(ws.root), "run-dpd", "--run", dpd.run_id, "--out", str(ro)]) == 2
    assert "exists and is read-only" in capsys.readouterr().err and ro.read_text() == "keep"
    # an earlier export is replaced with overwrite only
    out = tmp_path / "u.csv"
    first = run_dpd(ws, dpd.run_id, out=out, dataset=ds)
    with pytest.raises(OutputRefused, match="exists"):
        run_dpd(ws, dpd.run_id, out=out, dataset=ds)
    assert run_dpd(ws, dpd.run_id, out=out, dataset=ds, overwrite=True)["samples"] == first["samples"] > 0


def test_bad_spec_geometry_fails_before_a_run_folder_exists(tmp_path):
    """bw_main_ch = 2 GHz at fs = 800 MHz: refused at setup (naming spec.json and the field), not after an epoch."""
    from dpd_desktop.data import save_split_csv

    folder = save_split_csv(make_demo_dataset(seed=0, n_train=1024, n_val=512, n_test=512, nperseg=256),
                            tmp_path / "ds")
    spec = json.loads((folder / "spec.json").read_text())
    spec.update(input_signal_fs=800e6, bw_main_ch=2e9)
    (folder / "spec.json").write_text(json.dumps(spec))
    ds = load_dataset(folder)
    ws = Workspace(tmp_path / "ws")
    _, res, events = _run(ExperimentConfig(step="pa", dataset=str(folder), backbone="gru", epochs=1,
                                           **dict(TINY, frame_length=40, stride=16)), ds, ws)
    assert res.state == "failed" and res.history == [] and res.run_dir is None
    assert str(folder.resolve() / "spec.json") in res.message and "field 'bw_main_ch'" in res.message
    assert "expected bw_main_ch < input_signal_fs" in res.message
    assert ws.list_runs() == []
    assert not ws.runs_dir.exists() or not any(ws.runs_dir.iterdir())


# ------------------------------------------------------------------------------------------------------ (e)
@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_trains_as_pa_and_as_dpd(family, demo_gru_pa, demo_small):
    ws, gru_pa = demo_gru_pa
    small = dict(TINY, frame_length=40, stride=16)
    for step, pa_run in (("pa", None), ("dpd", str(gru_pa.run_dir))):
        _, res, _ = _run(ExperimentConfig(step=step, dataset="demo", backbone=family, epochs=1, pa_run=pa_run,
                                          **small), demo_small, ws)
        assert res.state == "succeeded", f"{family} {step}: {res.message}"
        assert set(res.test_metrics) == {"NMSE", "EVM", "ACLR_L", "ACLR_R", "ACLR_AVG"}
        for name, m in (("val", res.val_metrics), ("test", res.test_metrics)):
            assert all(math.isfinite(v) for v in m.values()), f"{family} {step} {name}: {m}"
        if step == "dpd":  # and run-dpd works for the family, the demo regenerated from config.json
            meta = run_dpd(ws, res.run_id, out=ws.root / f"{family}.h5", split="val")
            with h5py.File(res.run_dir / "results.h5", "r") as f, h5py.File(ws.root / f"{family}.h5", "r") as g:
                assert np.array_equal(g["u"][()], f["val/dpd_output"][()])
            assert meta["samples"] == 4096 and math.isfinite(meta["peak_abs_u"])


# ------------------------------------------------------------------------------------------------------ GUI
def test_window_run_dpd_action(pipeline, qtbot, tmp_path):
    from PySide6.QtCore import QSettings

    from dpd_desktop.gui.main_window import MainWindow
    from dpd_desktop.runs.events import RunFinished

    ws, pa, dpd, ds = pipeline["ws"], pipeline["pa"], pipeline["dpd"], pipeline["ds"]
    w = MainWindow(workspace=ws, settings=QSettings(str(tmp_path / "w.ini"), QSettings.Format.IniFormat))
    w.write_plots_on_finish = False
    qtbot.addWidget(w)
    assert not w.act_run_dpd.isEnabled()
    for run, ready in ((pa, False), (dpd, True)):  # the session ends a run as the trainer's events say
        w.session.start()
        w.session.on_finished(RunFinished(run_id=run.run_id, run_dir=str(run.run_dir), best_epoch=0, val_metrics={},
                                          test_metrics={}, wall_s=0.0))
        assert w.act_run_dpd.isEnabled() is ready, "a PA run cannot be run as a DPD"
    w.set_dataset(ds, str(DPA_160))
    out = tmp_path / "gui_u.h5"
    with qtbot.waitSignal(w.dpdExportEnded, timeout=60_000) as blocker:
        assert w.run_dpd_export(out)
        assert not w.act_run_dpd.isEnabled()  # one export at a time
    assert blocker.args == ["succeeded"], w.banner.message
    assert w.banner.kind == "success" and str(out) in w.banner.message
    with h5py.File(dpd.run_dir / "results.h5", "r") as f, h5py.File(out, "r") as g:
        assert np.array_equal(g["u"][()], f["test/dpd_output"][()])
    assert w.act_run_dpd.isEnabled()
    with qtbot.waitSignal(w.dpdExportEnded, timeout=60_000) as blocker:
        assert w.run_dpd_export(tmp_path / "u.wav")
    assert blocker.args == ["failed"]
    assert w.banner.kind == "error" and "'.wav'" in w.banner.message and "Traceback" not in w.banner.message
