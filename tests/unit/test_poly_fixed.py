"""MP/GMP in fixed point (quant/poly.py, export/poly_fixed.py): the integer model against a pure-Python reading of its
arithmetic, against the float model within stated bounds, the export folder's words, and the refusals."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from dpd_desktop import cli
from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.config import PolySpec
from dpd_desktop.quant import fixed
from dpd_desktop.config import QuantSpec
from dpd_desktop.quant.poly import PolyFixed
from dpd_desktop.export.coef_export import read_coefficients
from dpd_desktop.export.fixed_export import FixedExportError, _as3, verify_export
from dpd_desktop.export.poly_fixed import PolyFixedError, export_poly_fixed, verify_poly_export
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training.ls_fit import make_trainer


def _coefs(spec: PolySpec, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = (rng.normal(size=spec.n_coefficients) + 1j * rng.normal(size=spec.n_coefficients)) * 0.3
    w[0] = 1.0 + 0.05j
    return w


def _segs(seed: int = 1, s: int = 2, n: int = 300) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(s, n, 2)) * 0.25


def _rs(v: int, s: int) -> int:
    """Round half up by s bits (s > 0), exact left shift otherwise."""
    return (v + (1 << (s - 1))) >> s if s > 0 else v << -s


def test_integer_mp_matches_a_pure_python_reading_of_its_arithmetic():
    spec = PolySpec.from_mapping("gmp", {"order": 3, "memory_depth": 2, "cross_order": 3, "cross_lag": 1,
                                         "cross_lead": 1})
    pf = PolyFixed(spec, _coefs(spec), QuantSpec(12, 10))
    segs = _segs(s=1, n=40)
    pf.calibrate(segs)
    y, _ = pf.run_int(segs)
    f = pf.formats
    fx = f["x"].frac
    xq = [[int(v) for v in row] for row in fixed.quantize(segs[0], f["x"])]
    n = len(xq)

    def at(seq, k):
        return seq[k] if 0 <= k < n else None

    amp = [(math.isqrt(4 * (a * a + b * b)) + 1) >> 1 for a, b in xq]
    e2f = f["env2"].frac
    env = {1: (amp, fx), 2: ([max(-2**31, min(2**31 - 1, _rs(a * a, 2 * fx - e2f))) for a in amp], e2f)}
    fo = max(pf.coef_formats[t.order].frac + (f[f"phi{t.order}"].frac if t.order > 1 else fx) for t in pf.terms)
    want = []
    for k in range(n):
        re = im = 0
        for j, t in enumerate(pf.terms):
            xv = at(xq, k - t.delay) or [0, 0]
            if t.order == 1:
                pr, pi_, fphi = xv[0], xv[1], fx
            else:
                ev, fe = env[t.power]
                e = ev[k - t.env_delay] if 0 <= k - t.env_delay < n else 0
                fp = f[f"phi{t.order}"]
                s = fx + fe - fp.frac
                sat = lambda v: max(fp.min_int, min(fp.max_int, v))  # noqa: E731
                pr, pi_, fphi = sat(_rs(xv[0] * e, s)), sat(_rs(xv[1] * e, s)), fp.frac
            sh = fo - pf.coef_formats[t.order].frac - fphi
            cr, ci = int(pf.coef_re[j]), int(pf.coef_im[j])
            re += (cr * pr - ci * pi_) << sh
            im += (cr * pi_ + ci * pr) << sh
        fy = f["y"]
        s = fo - fy.frac
        want.append([max(fy.min_int, min(fy.max_int, _rs(v, s))) for v in (re, im)])
    assert np.array_equal(fixed.quantize(y[0], f["y"]), np.array(want))


@pytest.mark.parametrize("kind", ["mp", "gmp"])
def test_fixed_mp_against_float_within_bounds(kind):
    """Error power of the integer model relative to the float output (random coefficients, N(0, 0.25²) I/Q): W16A16
    below −70 dB, W8A8 below −25 dB."""
    spec = PolySpec.from_mapping(kind, {"order": 5, "memory_depth": 3})
    segs = _segs()
    errs = {}
    for w, a in ((16, 16), (8, 8)):
        pf = PolyFixed(spec, _coefs(spec), QuantSpec(w, a))
        pf.calibrate(segs)
        yq, _ = pf.run_int(segs)
        yf = pf.run_float(segs)
        errs[w] = 10 * math.log10(np.sum((yq - yf) ** 2) / np.sum(yf ** 2))
    assert errs[16] < -70 and errs[8] < -25


@pytest.fixture(scope="module")
def mp_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("poly")
    ws = Workspace(root / "ws")
    ds = make_demo_dataset(seed=2, n_train=3000, n_val=4096, n_test=4096)
    base = dict(dataset="demo", device="cpu", frame_length=50)
    pa = make_trainer(ExperimentConfig(step="pa", backbone="mp", fit="ls", poly_order=5, memory_depth=3, **base),
                      dataset=ds, workspace=ws).run()
    dpd = make_trainer(ExperimentConfig(step="dpd", pa_run=pa.run_id, backbone="gmp", fit="ls", poly_order=5,
                                        memory_depth=3, **base), dataset=ds, workspace=ws).run()
    assert pa.state == dpd.state == "succeeded"
    return {"ws": ws, "root": root, "ds": ds, "pa": pa.run_id, "dpd": dpd.run_id}


def test_poly_export_folder(mp_runs):
    out = mp_runs["root"] / "mp16"
    meta = export_poly_fixed(mp_runs["ws"], mp_runs["dpd"], out, spec=QuantSpec(16, 16), dataset=mp_runs["ds"])
    assert meta["error"]["rel_error_db"] < -60 and meta["error"]["saturated_words"] == {}
    rows = (out / "coefficients.csv").read_text().splitlines()
    assert rows[0].startswith("kind,order,delay,envelope_delay,re,im") and len(rows) == 1 + meta["n_coefficients"]
    first = rows[1].split(",")
    assert first[:4] == ["aligned", "1", "0", "0"]
    frac = int(first[8])
    assert int(first[4]) == math.floor(float(first[9]) * 2**frac + 0.5)  # the word rounds the float coefficient
    g = np.loadtxt(out / "golden" / "y.csv", delimiter=",", skiprows=1, dtype=np.int64)[:, 2:]
    x = np.loadtxt(out / "golden" / "x_float.csv", delimiter=",", skiprows=1, dtype=np.float32)
    # the golden y from the exported float input and the exported words, recomputed with a fresh model
    t = meta["golden"]["frame_length"]
    w, spec, _ = read_coefficients(mp_runs["ws"], mp_runs["dpd"])
    pf = PolyFixed(spec, w, QuantSpec(16, 16))
    pf.formats = {k: fixed.QFormat.from_dict(v) for k, v in meta["formats"].items()}
    _, tr = pf.run_int(x.reshape(-1, t, 2).astype(np.float64))
    assert np.array_equal(_as3(tr["y"][0]).reshape(-1, 2), g)
    assert "dpd_poly_coef_re" in (out / "dpd_coeffs.h").read_text()
    assert "coefficient formats per order" in (out / "README.md").read_text()


def test_poly_export_refusals(mp_runs, tmp_path, capsys):
    with pytest.raises(PolyFixedError, match="weights: expected an integer from 4 to 16"):
        export_poly_fixed(mp_runs["ws"], mp_runs["pa"], tmp_path / "a", spec=QuantSpec(3, 16))
    with pytest.raises(PolyFixedError, match="inside the run folder"):
        export_poly_fixed(mp_runs["ws"], mp_runs["pa"], mp_runs["ws"].runs_dir / mp_runs["pa"] / "x",
                          spec=QuantSpec())
    # a PA's coefficients export too (the PA model in fixed point), through the command line
    out = tmp_path / "pa8"
    assert cli.main(["--workspace", str(mp_runs["ws"].root), "export", mp_runs["pa"], "--format", "fixed",
                     "--weights", "8", "--activations", "8", "--out", str(out)]) == 0
    assert "MP/GMP coefficients as 8-bit words" in capsys.readouterr().out and (out / "coefficients.csv").is_file()
    assert not Path(tmp_path / "a").exists()


@pytest.mark.parametrize("w", [16, 8])
def test_poly_export_checks_itself_from_its_own_files(mp_runs, w):
    """The MP/GMP export's README named no way to check its golden vectors, and verify_export refused the folder
    ("field 'format' is 'dpd-desktop-poly-fixed-export-1'"): verify_poly_export rebuilds it from the folder alone."""
    out = mp_runs["root"] / f"verify-w{w}"
    meta = export_poly_fixed(mp_runs["ws"], mp_runs["dpd"], out, spec=QuantSpec(w, w), dataset=mp_runs["ds"])
    res = verify_poly_export(out)
    n = meta["golden"]["frames"] * meta["golden"]["frame_length"]
    assert res["mismatches"] == {} and res["tensors"] == len(meta["golden"]["tensors"]) >= 3
    assert res["words"] == sum(math.prod(t["shape"]) for t in meta["golden"]["tensors"].values()) >= 2 * n
    assert "verify_poly_export('THIS_FOLDER')" in (out / "README.md").read_text()
    with pytest.raises(FixedExportError, match="an MP/GMP export: check it with dpd_desktop.export.poly_fixed"):
        verify_export(out)
    # a changed coefficient word is found; so is a changed coefficient value (every golden y word it moves)
    c = out / "coefficients.csv"
    good = c.read_text()
    rows = good.splitlines()
    cells = rows[1].split(",")
    cells[4] = str(int(cells[4]) + 1)
    c.write_text("\n".join(rows[:1] + [",".join(cells)] + rows[2:]) + "\n")
    assert verify_poly_export(out)["mismatches"] == {"coefficients": 1}
    cells = rows[1].split(",")
    cells[9] = repr(float(cells[9]) * 1.5)
    c.write_text("\n".join(rows[:1] + [",".join(cells)] + rows[2:]) + "\n")
    mism = verify_poly_export(out)["mismatches"]
    assert mism["coefficients"] >= 1 and mism["y"] > n, mism
    (out / "formats.json").write_text("{}")
    with pytest.raises(PolyFixedError, match="field 'format' is None"):
        verify_poly_export(out)
