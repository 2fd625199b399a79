"""``dpd-desktop sweep`` on bad input (cli/sweep.py): exit 2 with one line naming the option or the file, nothing
created in the workspace; a closed standard output ends ``sweep show`` quietly; counts and the best line read as
words (plurals, ``key=value`` with 4 significant digits, the metric's unit)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dpd_desktop.cli.entry import main as cli_main
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.sweep.runner import create_sweep
from dpd_desktop.sweep.spec import parse_spec
from dpd_desktop.sweep.store import SweepStore

ROOT = Path(__file__).resolve().parents[2]
BASE = ["--base", "--dataset", "demo", "--epochs", "1", "--hidden-size", "4", "--device", "cpu"]


def run_sweep(tmp_path, *argv):
    return cli_main(["--workspace", str(tmp_path / "ws"), "sweep", *argv])


@pytest.mark.parametrize("argv, words", [
    (["--grid", "hidden_size=4,6", "--random", "0"], "command line: --random: expected an integer from 1 to 10000, "
                                                     "got 0"),
    (["--grid", "hidden_size=4,6", "--optuna", "0"], "command line: --optuna: expected an integer from 1 to 10000, "
                                                     "got 0"),
    (["--grid", "hidden_size=4,6", "--random", "0", "--optuna", "0"], "give --random N or --optuna N, not both"),
    (["--grid", "hiden_size=4,6"], "hiden_size: not a searchable configuration field (did you mean hidden_size?)"),
    (["--grid", "seed=0,1", "--seed", "0"] + BASE[:1] + ["--dataset", "demo", "--seed", "3"],
     "command line: --grid seed: seed is also given in --base: give it in one place, --base or --grid"),
])
def test_bad_options_exit_2_with_one_line_and_create_nothing(tmp_path, capsys, argv, words):
    if "--base" not in argv:
        argv = argv + BASE
    assert run_sweep(tmp_path, *argv) == 2
    err = capsys.readouterr().err
    assert err == f"error: {words}\n" if words.startswith("command line") else words in err and err.count("\n") == 1
    assert not (tmp_path / "ws").exists()


def test_spec_file_errors_and_an_unknown_word_name_what_was_typed(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "adir.toml").mkdir()
    for target, line in (("missing.toml", "missing.toml: no such spec file"),
                         ("adir.toml", "adir.toml: is a folder, not a spec file"),
                         ("sub/missing", "sub/missing: no such spec file"),
                         ("lst", "sweep: 'lst' is neither an action (list, show, resume, cancel) nor a spec file")):
        assert run_sweep(tmp_path, target) == 2
        assert capsys.readouterr().err == f"error: {line}\n"
    assert not (tmp_path / "ws").exists()


def _sweep(tmp_path, seeds, metric_value=None, params=None):
    ws = Workspace(tmp_path / "ws")
    ws.check(create=True)
    info = create_sweep(ws, parse_spec({"base": {"dataset": "demo", "epochs": 1}, "space": {"seed": seeds}}, "t"))
    if metric_value is not None:
        SweepStore(ws.root).set_trial(info.id, 0, state="succeeded", value=metric_value, run_id="R0",
                                      **({"params": params} if params else {}))
    return ws, info


def test_show_says_one_trial_and_prints_the_best_as_words(tmp_path, capsys):
    ws, info = _sweep(tmp_path, [0], metric_value=-31.23456, params={"hidden_size": 6, "lr": 0.009541234})
    assert cli_main(["--workspace", str(ws.root), "sweep", "show", info.id]) == 0
    out = capsys.readouterr().out
    assert "1 trial;" in out and "1 trials" not in out
    assert out.splitlines()[-1] == "best: trial 0 VAL_NMSE -31.235 dB run R0 hidden_size=6 lr=0.009541"


def test_show_json_into_a_closed_pipe_ends_quietly(tmp_path):
    ws, info = _sweep(tmp_path, list(range(300)))  # sweep.json larger than a pipe's buffer
    proc = subprocess.Popen([sys.executable, "-m", "dpd_desktop", "--workspace", str(ws.root), "sweep", "show",
                             info.id, "--json"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.read(10)  # `| head -c 10`
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0
    assert err == ""  # no "error: [Errno 32] Broken pipe", no "Exception ignored"
