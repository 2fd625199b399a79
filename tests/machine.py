"""Numbers recorded on one machine, checked on another: the machine fingerprint and the stated tolerances.

A CPU result is bitwise repeatable only on the same arithmetic: the same torch release, the same kernels chosen by
ATen's CPU dispatch (``torch.backends.cpu.get_cpu_capability()``), the same MKL / oneDNN builds and the ISA they pick
for this processor (which depends on its vendor and model, and on ``ONEDNN_MAX_CPU_ISA`` / ``MKL_ENABLE_INSTRUCTIONS``
/ ``MKL_CBWR``), and the same NumPy SIMD targets (the demo dataset's synthesis runs through NumPy's ufuncs). A file of pinned numbers carries the :func:`fingerprint` of a machine on which it reproduces bit for
bit. :func:`same_arithmetic` says whether this machine has that fingerprint: then tests compare bitwise; otherwise
within the tolerances below, which a rounding difference meets and a change of the science (another RNG order, loss,
schedule, metric convention) does not.

Measured on one machine by changing only the ISA (``ATEN_CPU_CAPABILITY=default``, ``ONEDNN_MAX_CPU_ISA=AVX2``,
``MKL_CBWR=COMPATIBLE``, each alone): after 2–3 epochs of training the tiny runs' metrics moved by at most 6.6e-7
relative (e.g. VAL_NMSE −28.31733717 → −28.31733180 dB) and their tensors by at most 7.3e-7 of each tensor's largest
element.
"""
from __future__ import annotations

import os
import platform
import re
from pathlib import Path

import numpy as np
import torch

#: tolerance on metrics (NMSE, ACLR, EVM in dB, losses, learning rates) when the fingerprint differs: relative, plus
#: an absolute floor in the metric's own unit (dB, or the loss) for values near zero
METRIC_RTOL = 1e-6
METRIC_ATOL = 1e-5
#: a number printed with 8 decimals (history.csv) is exact only to half its last digit, on top of METRIC_RTOL
PRINTED_ATOL = 1e-8
#: tolerance on tensors (weights, predictions) relative to the tensor's largest magnitude, when the fingerprint differs
TENSOR_RTOL = 1e-5
#: the environment variables through which MKL and oneDNN choose their instruction set
ISA_ENV = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR", "MKL_DEBUG_CPU_TYPE")


def _cpu() -> tuple[str, str]:
    """(vendor, model name) from /proc/cpuinfo where there is one, else what :mod:`platform` says."""
    vendor = model = ""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        text = ""
    for key, dest in (("vendor_id", "vendor"), ("model name", "model")):
        m = re.search(rf"^{key}\s*:\s*(.+)$", text, re.M)
        if m:
            if dest == "vendor":
                vendor = m.group(1).strip()
            else:
                model = m.group(1).strip()
    return vendor or platform.machine(), model or platform.processor() or platform.machine()


def _blas() -> list[str]:
    """The math libraries torch was built with, as ``torch.__config__.show()`` names them (MKL, oneDNN, OpenBLAS)."""
    lines = [ln.strip(" -") for ln in torch.__config__.show().splitlines()]
    return [ln for ln in lines if re.search(r"Math Kernel Library|MKL-DNN|oneDNN|OpenBLAS|BLIS", ln)]


def numpy_simd() -> list[str]:
    """The SIMD targets NumPy dispatches to here (its ufuncs' sin/exp/... differ in the last bits between them);
    ``NPY_DISABLE_CPU_FEATURES`` removes some."""
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    return [t for t in __cpu_dispatch__ if __cpu_features__.get(t)]


def fingerprint() -> dict:
    """What decides this machine's CPU arithmetic (module docstring), as a JSON-able dict."""
    vendor, model = _cpu()
    return {
        "cpu_vendor": vendor,
        "cpu_model": model,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch": torch.__version__,
        "blas": _blas(),
        "numpy": np.__version__,
        "numpy_simd": numpy_simd(),
        "isa_env": {k: os.environ[k] for k in ISA_ENV if os.environ.get(k)},
    }


def same_arithmetic(recorded: dict) -> bool:
    """True when this machine's :func:`fingerprint` equals ``recorded`` (every field): bits may then be compared."""
    return fingerprint() == recorded


def describe(recorded: dict) -> str:
    """The fields in which this machine differs from ``recorded``, for a test's message."""
    now = fingerprint()
    diff = [f"{k}: recorded {recorded.get(k)!r}, here {now.get(k)!r}" for k in sorted(set(now) | set(recorded))
            if now.get(k) != recorded.get(k)]
    return "; ".join(diff) or "same fingerprint"


def close_number(got: float, want: float, printed: bool = False) -> bool:
    """``|got − want| ≤ METRIC_RTOL·|want| + METRIC_ATOL`` (+ PRINTED_ATOL for a number read back from text), both
    finite; or both the same non-finite value."""
    if not (np.isfinite(got) and np.isfinite(want)):
        return got == want or (np.isnan(got) and np.isnan(want))
    return abs(got - want) <= METRIC_RTOL * abs(want) + METRIC_ATOL + (PRINTED_ATOL if printed else 0.0)


def assert_close_array(got, want, what: str) -> None:
    """Same shape and dtype; values within TENSOR_RTOL of ``want``'s largest magnitude (NaN where ``want`` has NaN)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape, got.dtype, want.dtype)
    if not np.issubdtype(want.dtype, np.floating) and not np.issubdtype(want.dtype, np.complexfloating):
        assert np.array_equal(got, want), what
        return
    assert np.array_equal(np.isnan(got), np.isnan(want)), what
    ok = ~np.isnan(want)
    if not ok.any():
        return
    scale = float(np.max(np.abs(want[ok])))
    err = float(np.max(np.abs(got[ok].astype(np.complex128) - want[ok].astype(np.complex128))))
    assert err <= TENSOR_RTOL * scale, f"{what}: max |Δ| {err:.3g} > {TENSOR_RTOL:g} × max |want| {scale:.3g}"


def assert_close_tensors(got: dict, want: dict, what: str) -> None:
    """Two state dicts of arrays: the same names in the same order, each as :func:`assert_close_array`."""
    assert list(got) == list(want), what
    for k in want:
        assert_close_array(got[k], want[k], f"{what}: {k}")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def assert_csv_rows(got: list[str], want: list[str], bitwise: bool, what: str) -> None:
    """CSV lines: equal text when ``bitwise``, else the same cells with numbers :func:`close_number` (as printed)."""
    if bitwise:
        assert got == want, what
        return
    assert len(got) == len(want), what
    for i, (a, b) in enumerate(zip(got, want)):
        ca, cb = a.split(","), b.split(",")
        assert len(ca) == len(cb), f"{what}: line {i + 1}"
        for x, y in zip(ca, cb):
            if _is_number(y) and _is_number(x) and "." in y:
                assert close_number(float(x), float(y), printed=True), f"{what}: line {i + 1}: {x} vs {y}"
            else:
                assert x == y, f"{what}: line {i + 1}: {x} vs {y}"


def assert_value(got, want, bitwise: bool, what: str) -> None:
    """One recorded value (a number, string, array or tensor): equal when ``bitwise``; else a float scalar
    :func:`close_number`, a float array :func:`assert_close_array`, anything else equal."""
    if isinstance(got, torch.Tensor):
        got = got.detach().cpu().numpy()
    if isinstance(want, torch.Tensor):
        want = want.detach().cpu().numpy()
    if bitwise:
        assert np.array_equal(got, want), what
        return
    a, b = np.asarray(got), np.asarray(want)
    if b.dtype.kind in "fc" and b.ndim == 0:
        assert a.dtype.kind in "fc" and close_number(float(a), float(b)), f"{what}: {got!r} vs {want!r}"
    elif b.dtype.kind in "fc":
        assert_close_array(a, b, what)
    else:
        assert np.array_equal(a, b), f"{what}: {got!r} vs {want!r}"
