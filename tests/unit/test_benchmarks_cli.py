"""The benchmark scripts import and parse their arguments (they run on the GPU machine; here only --help)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.parametrize("script, option", [("bench_gpu.py", "--dry-run"), ("startup_ab.py", "--env")])
def test_help_parses(script, option):
    out = subprocess.run([sys.executable, str(BENCH / script), "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert option in out.stdout
