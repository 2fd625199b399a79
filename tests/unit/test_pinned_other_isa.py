"""The tests that compare numbers across releases (pinned history and tensors, the first release's run folders) pass
on a machine with other arithmetic. CI has one CPU, so this runs them again in a child pytest with a lower
instruction set for every library that picks one at run time: ATen's CPU dispatch, oneDNN, MKL and NumPy's SIMD
targets. The child's fingerprint then differs from the recorded one, so the tolerance path of tests/machine.py is
the one checked.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from machine import numpy_simd, fingerprint  # tests/machine.py

ROOT = Path(__file__).resolve().parents[2]
PINNED_TESTS = ["tests/unit/test_pinned_numbers.py", "tests/unit/test_record.py"]


def other_isa() -> dict:
    """Environment variables that lower each library's instruction set below what this CPU runs by default."""
    high = torch.backends.cpu.get_cpu_capability() == "AVX512"
    env = {"ATEN_CPU_CAPABILITY": "avx2" if high else "default",
           "ONEDNN_MAX_CPU_ISA": "AVX2" if high else "SSE41",
           "MKL_ENABLE_INSTRUCTIONS": "AVX2" if high else "SSE4_2"}
    simd = numpy_simd()
    if simd:
        env["NPY_DISABLE_CPU_FEATURES"] = ",".join(simd)
    return env


def _child_env() -> dict:
    env = dict(os.environ, **other_isa(), PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    return env


def test_child_runs_other_arithmetic():
    """The child's fingerprint differs from this process's (so the pinned tests take their tolerance path there)."""
    out = subprocess.run([sys.executable, "-c", "import json, sys; sys.path.insert(0, 'tests'); import machine; "
                          "print(json.dumps(machine.fingerprint()))"], cwd=ROOT, env=_child_env(),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    child = json.loads(out.stdout)
    here = fingerprint()
    assert child != here  # at least by the ISA variables, whatever this CPU already runs
    assert child["isa_env"]["ONEDNN_MAX_CPU_ISA"] == other_isa()["ONEDNN_MAX_CPU_ISA"]


def test_pinned_numbers_pass_under_another_instruction_set():
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *PINNED_TESTS,
                          "-k", "pinned or first_release or schema_1 or dataset_ref"],
                         cwd=ROOT, env=_child_env(), capture_output=True, text=True, timeout=900)
    tail = "\n".join(out.stdout.splitlines()[-30:])
    assert out.returncode == 0, f"under {other_isa()}:\n{tail}\n{out.stderr[-2000:]}"
    assert " passed" in tail and " failed" not in tail and "error" not in tail.lower(), tail
