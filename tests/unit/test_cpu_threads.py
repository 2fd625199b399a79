"""CPU threads and the OpenMP wait policy (training/cpu_threads.py, issue 14 point 4), and the run's log saying which
kernel ran."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from dpd_desktop import cli
from dpd_desktop.process import Exit
from dpd_desktop.training import cpu_threads, limits


@pytest.fixture(autouse=True)
def keep_threads():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def test_passive_wait_is_a_default_the_user_can_override():
    env = {}
    assert cpu_threads.prefer_passive_wait(env) == "PASSIVE" and env == {"OMP_WAIT_POLICY": "PASSIVE"}
    env = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert cpu_threads.prefer_passive_wait(env) == "ACTIVE" and env == {"OMP_WAIT_POLICY": "ACTIVE"}


def test_the_command_line_sets_it_before_pytorch_loads():
    """``dpd_desktop.cli.entry.run`` is the process entry of the window and the command line: the variable is set there,
    before anything imports PyTorch, so libgomp (which reads it when it loads) and the queue's children see it."""
    code = ("import os, sys; os.environ.pop('OMP_WAIT_POLICY', None); from dpd_desktop import cli; "
            "assert 'torch' not in sys.modules; sys.argv = ['dpd-desktop', 'runs', '--help']\n"
            "try:\n    cli.run()\nexcept SystemExit:\n    pass\n"
            "print('policy', os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert "policy PASSIVE False" in out.stdout, out.stdout + out.stderr


@pytest.mark.parametrize("requested, kernel, want", [(None, "fast", 1), (None, "reference", 7), (2, "fast", 2),
                                                     (1, "reference", 1)])
def test_thread_rule_depends_on_the_settings_only(requested, kernel, want):
    threads, note = cpu_threads.choose_threads(requested, kernel, 7)
    assert threads == want and note.startswith(f"CPU threads: {want} ")
    assert ("the run's setting" in note) == (requested is not None)


@pytest.mark.parametrize("kernel, threads", [("fast", 1), ("reference", limits.TORCH_DEFAULT_THREADS)])
def test_run_log_names_the_kernel_and_config_records_the_threads(tmp_path, kernel, threads):
    """Also: a reference run after a fast one in the same process (the window) goes back to PyTorch's default."""
    torch.set_num_threads(1 if kernel == "reference" else limits.TORCH_DEFAULT_THREADS)
    small = ["--dataset", "demo", "--epochs", "1", "--hidden-size", "4", "--frame-length", "40", "--stride", "16",
             "--max-train-samples", "600", "--batch-size-eval", "256", "--quiet", "--no-plots", "--device", "cpu",
             "--kernel", kernel]
    assert cli.main(["--workspace", str(tmp_path), "train-pa", *small]) == Exit.OK
    (run,) = (tmp_path / "runs").iterdir()
    conf = json.loads((run / "config.json").read_text())
    assert conf["experiment"]["kernel"] == kernel and conf["experiment"]["threads"] is None
    assert conf["training"]["torch_threads"] == threads
    log = (run / "log.txt").read_text()
    expected = "kernels ran: model: GRU on fast (cpu_rnn)" if kernel == "fast" else "kernels ran: model: GRU on reference"
    assert expected in log
    assert f"CPU threads: {threads} (" in log
