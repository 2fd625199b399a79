"""The benchmark scripts with options import and parse them (they run on the GPU machine; here only --help).

probe_adamw_kernels.py and profile_cuda_init.py take no options and need CUDA at once."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.parametrize("script, option", [("bench_kernels_cpu.py", "--batches"),
                                            ("bench_gpu.py", "--dry-run"), ("startup_ab.py", "--env"),
                                            ("compare_reference_cpu.py", "--ref"), ("gui_overhead.py", "--screenshot"),
                                            ("profile_startup.py", "--dataset"),
                                            ("science_table.py", "--dry-run"),
                                            ("gain_rules.py", "--rules"), ("bench_kernels.py", "--headline"),
                                            ("bench_gpu.py", "--kernel")])
def test_help_parses(script, option):
    out = subprocess.run([sys.executable, str(BENCH / script), "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert option in out.stdout
