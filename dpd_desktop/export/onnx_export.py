"""``dpd-desktop export RUN --format onnx``: a DPD run's selected checkpoint as an ONNX model, checked numerically.

The model maps ``x`` (batch, time, 2) float32 I/Q to ``u`` (batch, time, 2), batch and time dynamic, zero initial
state per sequence. It is written only after onnxruntime (CPU) ran it on the whole test split, segmented as the run's
evaluation, within :data:`TOLERANCE` of PyTorch (``max |u_onnx − u_torch| / max |u_torch|``); a side-car ``<out>.json``
records the check.

Decision: the TorchScript exporter (``torch.onnx.export(dynamo=False)``), which writes ``nn.GRU`` as an ONNX ``GRU``
with ``linear_before_reset=1`` (PyTorch's formula) and keeps time dynamic; the dynamo exporter has written
``linear_before_reset=0`` silently (pytorch/pytorch#189225) and fixed the time axis (benchmarks/results/
2026-12-04-notes-core.md). Every GRU node must carry ``linear_before_reset=1`` and the check must pass.
"""
from __future__ import annotations

import io
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .. import __version__
from ..data.segments import segment
from ..runs import artifacts
from .. import atomic
from ..runs.outputs import OutputRefused, check_output, recorded_dataset
from .quantized import QuantEvalError, load_dpd
from ..runs.record import DatasetChanged, DatasetUnavailable, RecordError, RunRecord
from ..runs.workspace import Workspace

__all__ = ["OnnxExportError", "export_onnx", "TOLERANCE", "OPSET"]

TOLERANCE = 1e-5
OPSET = 17


class OnnxExportError(ValueError):
    """The run cannot be exported to ONNX, the export failed the numerical check, or onnx/onnxruntime are
    missing; the message says which."""


def _runtime():
    try:
        import onnx  # noqa: F401 - the checker, and the graph's attributes
        import onnxruntime
    except ImportError as exc:
        raise OnnxExportError(f"ONNX export needs the packages onnx and onnxruntime ({exc}); install them with "
                              "pip install 'dpd-desktop[onnx]'") from exc
    return onnxruntime


def _export_bytes(model, example: torch.Tensor, opset: int) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(model, (example,), buf, dynamo=False, input_names=["x"], output_names=["u"],
                          dynamic_axes={"x": {0: "batch", 1: "time"}, "u": {0: "batch", 1: "time"}},
                          opset_version=opset, do_constant_folding=True)
    return buf.getvalue()


def _gru_nodes_ok(data: bytes) -> list[str]:
    """The names of GRU nodes whose ``linear_before_reset`` is not 1 (PyTorch's GRU formula needs 1)."""
    import onnx

    graph = onnx.load_model_from_string(data).graph
    bad = []
    for node in graph.node:
        if node.op_type == "GRU":
            lbr = next((a.i for a in node.attribute if a.name == "linear_before_reset"), 0)
            if lbr != 1:
                bad.append(node.name or "GRU")
    return bad


def export_onnx(workspace: Workspace, run: str | Path, out: str | Path, *, overwrite: bool = False, dataset=None,
                tolerance: float = TOLERANCE, opset: int = OPSET) -> dict[str, Any]:
    """Export ``run``'s DPD to ``out`` (.onnx) after the check of the module docstring; returns the side-car's dict.

    Raises:
        OnnxExportError: not a DPD run, no best.pt, ``out`` not ``.onnx``, inside a run folder or existing without
            ``overwrite``, the dataset cannot be reloaded, onnx/onnxruntime missing, the exporter failed, a GRU node
            with ``linear_before_reset`` ≠ 1, or the error above ``tolerance`` (nothing written).
    """
    ort = _runtime()
    try:
        rec = RunRecord.open(workspace.resolve(run))
        if Path(out).suffix.lower() != ".onnx":
            raise OnnxExportError(f"{out}: the ONNX file's name must end in .onnx")
        target = check_output(out, overwrite=overwrite, run_dir=rec.run_dir,
                              workspace=workspace, datasets=[recorded_dataset(rec.dataset)])
        side = target.with_name(target.name + ".json")
        check_output(side, overwrite=overwrite, run_dir=rec.run_dir,
                              workspace=workspace, datasets=[recorded_dataset(rec.dataset)])
        model = load_dpd(rec)
        ds = rec.dataset.load(dataset)
    except (FileNotFoundError, RecordError, OutputRefused, QuantEvalError, DatasetChanged,
            DatasetUnavailable) as exc:
        raise OnnxExportError(str(exc)) from exc
    nps = int(ds.spec.nperseg)
    bs = int(rec.config.batch_size_eval)
    segs = np.ascontiguousarray(segment(ds.test.x, nps), dtype=np.float32)
    t0 = time.perf_counter()
    try:
        data = _export_bytes(model, torch.from_numpy(segs[:1]), opset)
    except Exception as exc:  # noqa: BLE001 - any exporter failure is reported in words
        raise OnnxExportError(f"the ONNX exporter failed for the {rec.backbone} model: {type(exc).__name__}: "
                              f"{exc}") from exc
    export_s = time.perf_counter() - t0
    bad = _gru_nodes_ok(data)
    if bad:
        raise OnnxExportError(f"the exported GRU node(s) {', '.join(bad)} have linear_before_reset != 1 (not "
                              "PyTorch's GRU); nothing written")
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
    with torch.inference_mode():
        ref = torch.cat([model(torch.from_numpy(segs[i:i + bs])) for i in range(0, segs.shape[0], bs)]).numpy()
    got = np.concatenate([sess.run(["u"], {"x": segs[i:i + bs]})[0] for i in range(0, segs.shape[0], bs)])
    peak = float(np.max(np.abs(ref))) if ref.size else 0.0
    max_abs = float(np.max(np.abs(got.astype(np.float64) - ref))) if ref.size else 0.0
    rel = max_abs / peak if peak > 0 else max_abs
    meta = {"format": "dpd-desktop-onnx-export-1", "file": str(target), "run_id": rec.run_id,
            "model": {**rec.arch, "model_id": rec.model.get("model_id")},
            "checkpoint_sha256": artifacts.file_sha256(rec.best_checkpoint), "opset": opset,
            "exporter": "torch.onnx.export(dynamo=False) (TorchScript-based; see export/onnx_export.py)",
            "inputs": {"x": "float32 (batch, time, 2) I/Q, zero initial state per sequence"},
            "outputs": {"u": "float32 (batch, time, 2) DPD output"},
            "check": {"split": "test", "segments": int(segs.shape[0]), "nperseg": nps,
                      "runtime": f"onnxruntime {ort.__version__} CPUExecutionProvider",
                      "max_abs_error": max_abs, "peak_abs_u": peak, "max_rel_error": rel, "tolerance": tolerance,
                      "definition": "max |u_onnx - u_torch| / max |u_torch| over the test split"},
            "export_s": export_s, "torch": torch.__version__, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "dpd_desktop_version": __version__}
    if not rel <= tolerance:
        raise OnnxExportError(f"the ONNX model's output differs from PyTorch's by {rel:.3g} relative (max |Δu| "
                              f"{max_abs:.3g}, peak {peak:.3g}) on the test split, above {tolerance:g}; nothing "
                              "written")
    try:
        atomic.atomic_write_bytes(target, data)
    except OSError as exc:
        raise OnnxExportError(f"cannot write {target}: {exc.strerror or exc}; nothing written") from exc
    try:
        atomic.atomic_write_json(side, meta)
    except OSError as exc:
        raise OnnxExportError(f"cannot write {side}: {exc.strerror or exc}; {target} was written without its "
                              "side-car") from exc
    return meta
