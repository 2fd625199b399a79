"""Deploying a DPD run: the fixed-point export (golden vectors reproduced bit for bit from the folder's own files,
the C header, the README), the ONNX export against PyTorch on the test split, quantisation-aware fine-tuning (a new
run linked to its parent), the quantised metrics in the index, compare and reports, and the refusals."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from dpd_desktop import cli
from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.data.segments import segment
from dpd_desktop.models import build_model
from dpd_desktop.config import QuantSpec
from dpd_desktop.runs import artifacts
from dpd_desktop.runs.compare import compare_runs
from dpd_desktop.export.fixed_export import FixedExportError, export_fixed, read_golden, verify_export
from dpd_desktop.runs.index import RunIndex
from dpd_desktop.export.onnx_export import OnnxExportError, _export_bytes, _gru_nodes_ok, export_onnx
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.runs.report_html import write_report
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training.trainer import Trainer

DEMO = dict(seed=2, n_train=3000, n_val=4096, n_test=4096)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A workspace with a PA run (GRU 6) and a DPD run (GRU 5) on the demo dataset, 2 epochs each."""
    root = tmp_path_factory.mktemp("deploy")
    ws = Workspace(root / "ws")
    ds = make_demo_dataset(**DEMO)
    base = dict(dataset="demo", backbone="gru", epochs=2, frame_length=50, stride=8, device="cpu")
    pa = Trainer(ExperimentConfig(step="pa", hidden_size=6, **base), dataset=ds, workspace=ws).run()
    dpd = Trainer(ExperimentConfig(step="dpd", pa_run=pa.run_id, hidden_size=5, **base), dataset=ds,
                  workspace=ws).run()
    assert pa.state == dpd.state == "succeeded"
    return {"ws": ws, "root": root, "ds": ds, "pa": pa.run_id, "dpd": dpd.run_id, "dpd_dir": Path(dpd.run_dir)}


@pytest.fixture(scope="module")
def exported(runs):
    out = {}
    for w, a in ((16, 16), (8, 8)):
        folder = runs["root"] / f"export-w{w}a{a}"
        out[w] = (folder, export_fixed(runs["ws"], runs["dpd"], folder, spec=QuantSpec(w, a), dataset=runs["ds"]))
    return out


# ---------------------------------------------------------------------------------------------------- fixed point
@pytest.mark.parametrize("w", [16, 8])
def test_the_folder_reproduces_its_golden_vectors_bit_for_bit(exported, w):
    folder, meta = exported[w]
    report = verify_export(folder)  # rebuilt from formats.json + coefficients.csv alone
    assert report["mismatches"] == {}
    keys = list(meta["golden"]["tensors"])
    assert keys[0] == "x" and keys[-1] == "fc_out"
    assert {"gru0", "gru0.r", "gru0.z", "gru0.n", "gru0.r_pre", "gru0.hn", "gru0.n_pre"} <= set(keys)
    assert report["words"] == sum(int(np.prod(t["shape"])) for t in meta["golden"]["tensors"].values())
    _, x, golden = read_golden(folder)
    assert x.shape == (4, 50, 2) and golden["gru0"].shape == (4, 50, 5)
    a_bits = w
    assert golden["gru0"].max() <= 2 ** (a_bits - 1) - 1 and golden["gru0"].min() >= -2 ** (a_bits - 1)
    assert golden["gru0.z"].min() >= 0 and golden["gru0.z"].max() >= 2 ** (a_bits - 1)  # unsigned gate words
    assert meta["golden"]["tensors"]["gru0.z"]["signed"] is False and meta["golden"]["tensors"]["gru0.n"]["signed"]


def test_a_changed_golden_word_is_found(exported, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(exported[16][0], folder)
    p = folder / "golden" / "gru0.z.csv"
    lines = p.read_text().splitlines()
    cells = lines[7].split(",")
    cells[3] = str(int(cells[3]) + 1)
    lines[7] = ",".join(cells)
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(FixedExportError, match="hold different words"):  # the .hex twin disagrees
        verify_export(folder)
    h = folder / "golden" / "gru0.z.hex"
    words = h.read_text().splitlines()
    row = words[6].split()
    row[1] = format((int(row[1], 16) + 1) & 0xFFFF, "04x")
    words[6] = " ".join(row)
    h.write_text("\n".join(words) + "\n")
    assert verify_export(folder)["mismatches"] == {"gru0.z": 1}


def test_sixteen_bits_lose_almost_nothing_eight_bits_more(exported):
    m16, m8 = exported[16][1]["metrics"], exported[8][1]["metrics"]
    f = m16["float_metrics"]["test"]
    assert m8["float_metrics"]["test"] == f  # the same float model, scored the same way
    d16 = {k: m16["metrics"]["test"][k] - f[k] for k in ("ACLR_AVG", "EVM", "NMSE")}
    assert abs(d16["ACLR_AVG"]) < 0.05 and abs(d16["EVM"]) < 0.05
    assert m16["u_error"]["test"]["rel_error_db"] < -65
    assert m8["u_error"]["test"]["rel_error_db"] > m16["u_error"]["test"]["rel_error_db"] + 30
    # words clipped per tensor are counted (here the 16-bit output never is: its range has 1/8 headroom)
    assert isinstance(m16["saturated"]["test"], dict) and "fc_out" not in m16["saturated"]["test"]


def test_float_metrics_are_the_runs_own(runs, exported):
    """The float model scored by the export's path equals the run's recorded test metrics (the same segments, the
    same PA, the same profile)."""
    rec = RunRecord.open(runs["dpd_dir"])
    f = exported[16][1]["metrics"]["float_metrics"]["test"]
    for k, v in rec.test_metrics.items():
        assert f[k] == pytest.approx(v, abs=1e-9)


def test_readme_and_header(exported, tmp_path):
    folder, meta = exported[8]
    readme = (folder / "README.md").read_text()
    for text in ("round half up", "Saturation", "W8A8", "| x | io | Q0.15 | 16 | 15 |", "sigmoid: table of 1025",
                 "h = sat(n + round_shift(z * (h - n), 8))", "gates r, z UQ0.8 (unsigned)",
                 "| test | ACLR_AVG [dBc] |", "golden/"):
        assert text in readme
    header = (folder / "dpd_coeffs.h").read_text()
    assert "static const int8_t dpd_gru0_w_ir[5][2]" in header and "static const int32_t dpd_gru0_b_ir[5]" in header
    assert "static const uint8_t dpd_lut_sigmoid[1025]" in header and "static const int8_t dpd_lut_tanh[1025]" in header
    assert "#define DPD_FRAC_GATE 8" in header and "#define DPD_FRAC_X 15" in header
    assert "#define DPD_IO_BITS 16" in header
    coef = (folder / "coefficients.csv").read_text().splitlines()
    assert coef[0] == "tensor,index,value,hex,real,bits,frac,signed"
    if shutil.which("cc"):
        src = tmp_path / "use.c"
        src.write_text(f'#include "{folder / "dpd_coeffs.h"}"\n'
                       "int main(void) { return (int)dpd_gru0_w_ir[0][0] + DPD_FRAC_X - DPD_FRAC_X; }\n")
        r = subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", "-Wno-unused-const-variable", "-fsyntax-only",
                            str(src)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


def test_quantised_metrics_reach_index_compare_and_reports(runs, exported, tmp_path):
    rec = RunRecord.open(runs["dpd_dir"])
    assert sorted(rec.quantized) == ["W16A16", "W8A8"]
    with RunIndex.open(runs["ws"]) as idx:
        row = idx.get(runs["dpd"])
    assert row.quant == "W16A16, W8A8" and row.quant_label == "W8A8"  # the narrowest is shown
    assert row.quant_test_aclr_avg == pytest.approx(exported[8][1]["metrics"]["metrics"]["test"]["ACLR_AVG"])
    cmp = compare_runs([runs["dpd_dir"], runs["ws"].runs_dir / runs["pa"]])
    table = {label: values for label, _, values in cmp.metric_table()}
    assert table["quantised test ACLR avg"][0] == pytest.approx(row.quant_test_aclr_avg)
    assert table["quantised test ACLR avg"][1] is None
    page = write_report([runs["dpd_dir"]], tmp_path / "r.html").read_text()
    assert "quantised test ACLR avg" in page
    pa_page = write_report([runs["ws"].runs_dir / runs["pa"]], tmp_path / "p.html").read_text()
    assert "quantised" not in pa_page  # rows no run has are left out


# ---------------------------------------------------------------------------------------------------- refusals
def test_bad_inputs_get_clear_errors(runs, tmp_path, capsys):
    ws = runs["ws"]
    with pytest.raises(FixedExportError, match="field 'experiment.step' is 'pa'; a DPD run is needed"):
        export_fixed(ws, runs["pa"], tmp_path / "x", spec=QuantSpec())
    with pytest.raises(OnnxExportError, match="a DPD run is needed"):
        export_onnx(ws, runs["pa"], tmp_path / "x.onnx")
    nobest = ws.runs_dir / (runs["dpd"] + "-nobest")
    shutil.copytree(runs["dpd_dir"], nobest)
    (nobest / "best.pt").unlink()
    with pytest.raises(FixedExportError, match="no selected checkpoint"):
        export_fixed(ws, nobest.name, tmp_path / "y", spec=QuantSpec())
    shutil.rmtree(nobest)
    with pytest.raises(FixedExportError, match="^weights: expected an integer from 4 to 16 bits, got 17"):
        export_fixed(ws, runs["dpd"], tmp_path / "z", spec=QuantSpec(17, 16))
    with pytest.raises(FixedExportError, match="inside the run folder"):
        export_fixed(ws, runs["dpd"], runs["dpd_dir"] / "export", spec=QuantSpec())
    with pytest.raises(OnnxExportError, match="inside the run folder"):
        export_onnx(ws, runs["dpd"], runs["dpd_dir"] / "best.onnx")
    with pytest.raises(OnnxExportError, match="must end in .onnx"):
        export_onnx(ws, runs["dpd"], tmp_path / "m.pt")
    argv = ["--workspace", str(ws.root)]
    assert cli.main(argv + ["export", runs["dpd"], "--format", "fixed", "--activations", "3",
                            "--out", str(tmp_path / "c")]) == 2
    assert "activations: expected an integer from 4 to 16 bits, got 3" in capsys.readouterr().err
    assert cli.main(argv + ["finetune", runs["pa"], "--qat", "8,8"]) == 2
    assert "a fine-tune (quantisation-aware training) starts from a DPD run" in capsys.readouterr().err
    assert cli.main(argv + ["finetune", runs["dpd"], "--qat", "8,20"]) == 2
    assert "activations: expected an integer from 4 to 16 bits, got 20" in capsys.readouterr().err
    assert not (tmp_path / "c").exists() and not list(tmp_path.glob("x*")) and not (tmp_path / "y").exists()


def test_existing_outputs_need_overwrite(runs, tmp_path):
    out = tmp_path / "exp"
    out.mkdir()
    (out / "data.csv").write_text("a folder of the user's")
    with pytest.raises(FixedExportError, match="exists; the folder is not replaced unless --overwrite"):
        export_fixed(runs["ws"], runs["dpd"], out, spec=QuantSpec(12, 12), dataset=runs["ds"])
    with pytest.raises(FixedExportError, match="not an export folder .* not replaced, even with --overwrite"):
        export_fixed(runs["ws"], runs["dpd"], out, spec=QuantSpec(12, 12), dataset=runs["ds"], overwrite=True)
    assert (out / "data.csv").read_text() == "a folder of the user's"
    (out / "data.csv").unlink()
    export_fixed(runs["ws"], runs["dpd"], out, spec=QuantSpec(16, 16), dataset=runs["ds"])  # empty: written
    (out / "stale.txt").write_text("left by hand in an export")
    export_fixed(runs["ws"], runs["dpd"], out, spec=QuantSpec(12, 12), dataset=runs["ds"], overwrite=True)
    assert json.loads((out / "formats.json").read_text())["label"] == "W12A12"
    assert not (out / "stale.txt").exists() and verify_export(out)["mismatches"] == {}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left
    f = tmp_path / "f.onnx"
    f.write_bytes(b"x")
    with pytest.raises(OnnxExportError, match=r"f.onnx exists \(give --overwrite to replace it"):
        export_onnx(runs["ws"], runs["dpd"], f, dataset=runs["ds"])


# ---------------------------------------------------------------------------------------------------- ONNX
def test_onnx_matches_pytorch_on_the_test_split(runs, tmp_path):
    out = tmp_path / "dpd.onnx"
    meta = export_onnx(runs["ws"], runs["dpd"], out, dataset=runs["ds"])
    assert json.loads((tmp_path / "dpd.onnx.json").read_text())["check"] == meta["check"]
    # recomputed here: onnxruntime on the test split's segments against the checkpoint's PyTorch model
    rec = RunRecord.open(runs["dpd_dir"])
    model = build_model("gru", 5).eval()
    artifacts.load_state_checked(model, rec.best_checkpoint, rec.arch)
    segs = segment(runs["ds"].test.x, int(runs["ds"].spec.nperseg)).astype(np.float32)
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"x": segs})[0]
    with torch.no_grad():
        ref = model(torch.from_numpy(segs)).numpy()
    rel = np.max(np.abs(got - ref)) / np.max(np.abs(ref))
    assert rel <= 1e-5 and meta["check"]["max_rel_error"] <= 1e-5
    short = sess.run(None, {"x": segs[:, :333]})[0]  # batch and time are dynamic
    assert short.shape == (segs.shape[0], 333, 2)
    assert _gru_nodes_ok(out.read_bytes()) == []


@pytest.mark.parametrize("family,layers", [("gru", 2), ("dgru", 1)])
def test_onnx_exporter_on_more_layouts(family, layers):
    torch.manual_seed(0)
    m = build_model(family, 7, layers).eval()
    x = torch.randn(2, 300, 2) * 0.3
    data = _export_bytes(m, x[:1], 17)
    g = onnx.load_model_from_string(data).graph
    assert sum(n.op_type == "GRU" for n in g.node) == layers and _gru_nodes_ok(data) == []
    got = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x.numpy()})[0]
    with torch.no_grad():
        ref = m(x).numpy()
    assert np.max(np.abs(got - ref)) / np.max(np.abs(ref)) <= 1e-5


def test_onnx_over_tolerance_is_refused_and_nothing_written(runs, tmp_path):
    with pytest.raises(OnnxExportError, match="above 0; nothing written"):
        export_onnx(runs["ws"], runs["dpd"], tmp_path / "m.onnx", dataset=runs["ds"], tolerance=0.0)
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------------- QAT
def test_finetune_is_a_new_run_linked_to_its_parent(runs, capsys):
    ws = runs["ws"]
    before = {p.name for p in ws.runs_dir.iterdir()}
    status = cli.main(["--workspace", str(ws.root), "finetune", runs["dpd"], "--qat", "8,8", "--epochs", "1",
                       "--quiet", "--no-plots", "--lut-bits", "8"])
    assert status == 0
    out = capsys.readouterr().out
    assert "quantisation-aware fine-tune of" in out and "integer model test" in out
    (new,) = {p.name for p in ws.runs_dir.iterdir()} - before
    assert new.endswith("dpd-gru5-qat-w8a8")
    rec = RunRecord.open(ws.runs_dir / new)
    assert rec.config.qat == {"weights": 8, "activations": 8, "lut_bits": 8, "lut_interp": "linear", "io_bits": 16}
    assert rec.config.parent_run == runs["dpd"] and rec.config.lr == pytest.approx(5e-4)
    parent = RunRecord.open(runs["dpd_dir"])
    assert rec.qat["parent_run"] == runs["dpd"]
    assert rec.qat["parent_sha256"] == artifacts.file_sha256(parent.best_checkpoint)
    formats = rec.qat["plan"]["formats"]
    assert (formats["x"]["bits"], formats["fc_out"]["bits"], formats["gru0.r_pre"]["bits"]) == (16, 16, 32)
    assert "training split" in rec.qat["plan"]["calibration"]
    assert rec.pa["sha256"] == parent.pa["sha256"]  # through the same frozen PA
    # the fine-tune's checkpoint loads into the plain family model; its integer model scores what the run recorded
    # (float32 fake quantisation vs the int64 reference: the same arithmetic up to float32 rounding of wide words)
    model = build_model("gru", 5)
    artifacts.load_state_checked(model, rec.best_checkpoint, rec.arch)
    q = rec.quantized["W8A8-L8"]
    assert q["plan_source"].startswith("recorded by the quantisation-aware run")
    for k in ("ACLR_AVG", "EVM", "NMSE"):
        assert q["metrics"]["test"][k] == pytest.approx(rec.test_metrics[k], abs=0.05)
    with RunIndex.open(ws) as idx:
        row = idx.get(new)
    assert (row.qat, row.parent_run_id, row.quant_label) == ("W8A8-L8", runs["dpd"], "W8A8-L8")
    # the fine-tune exports with the formats it trained with
    meta = export_fixed(ws, new, runs["root"] / "qat-export", spec=QuantSpec(8, 8, 8), dataset=runs["ds"])
    assert meta["plan"] == rec.qat["plan"] and verify_export(runs["root"] / "qat-export")["mismatches"] == {}


def test_float_finetune_is_the_control(runs):
    """Without --qat the fine-tune continues the float training from the parent's checkpoint (the control that
    tells quantisation-aware training from extra epochs)."""
    ws = runs["ws"]
    before = {p.name for p in ws.runs_dir.iterdir()}
    assert cli.main(["--workspace", str(ws.root), "finetune", runs["dpd"], "--epochs", "1", "--quiet",
                     "--no-plots"]) == 0
    (new,) = {p.name for p in ws.runs_dir.iterdir()} - before
    rec = RunRecord.open(ws.runs_dir / new)
    assert new.endswith("dpd-gru5-ft") and rec.config.qat is None and rec.qat is None
    assert rec.parent_run == runs["dpd"] and rec.doc["finetune"]["parent_sha256"] == artifacts.file_sha256(
        runs["dpd_dir"] / "best.pt")
    with RunIndex.open(ws) as idx:
        row = idx.get(new)
    assert (row.parent_run_id, row.qat, row.quant) == (runs["dpd"], None, None)
    # it started from the parent's weights: its first epoch's validation loss is near the parent's, not a fresh
    # model's (the parent's selected epoch scored val loss v; one more epoch at lr/10 moves it little)
    parent_val = RunRecord.open(runs["dpd_dir"]).history()[RunRecord.open(runs["dpd_dir"]).best_epoch]["VAL_LOSS"]
    assert rec.history()[0]["VAL_LOSS"] == pytest.approx(parent_val, rel=0.2)
