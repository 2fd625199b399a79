"""Every argument error of the training commands that needs no dataset exits 2 with a message naming the option,
and the workspace's runs folder stays empty (no run folder is created; the dataset is not even read)."""
from __future__ import annotations

import json
import os
import re

import pytest
import torch

from dpd_desktop.cli.entry import main as cli_main

PA = ["train-pa", "--dataset", "demo", "--epochs", "1", "--hidden-size", "4", "--no-plots", "--quiet"]
DPD = ["train-dpd", "--dataset", "demo", "--epochs", "1", "--hidden-size", "3", "--no-plots", "--quiet"]
NO_CUDA = not torch.cuda.is_available()
CORES = os.cpu_count() or 1

# (command + options, regex the error line must match: the field and the option)
CASES = [
    (PA + ["--device", "gpu"], r"device: expected auto, cpu, cuda or cuda:N, got 'gpu' \(option --device\)"),
    (PA + ["--device", "cuda:x"], r"device: expected auto, cpu, cuda or cuda:N, got 'cuda:x' \(option --device\)"),
    (PA + ["--threads", str(CORES + 1)],
     rf"threads: {CORES + 1} is more than the {CORES} CPU cores of this machine \(option --threads\)"),
    (PA + ["--threads", "0"], r"threads: expected a positive integer or none, got 0 \(option --threads\)"),
    (PA + ["--hidden-size", "0"], r"hidden_size: expected a positive integer, got 0 \(option --hidden-size\)"),
    (PA + ["--num-layers", "0"], r"num_layers: expected a positive integer, got 0 \(option --num-layers\)"),
    (PA + ["--frame-length", "0"], r"frame_length: expected a positive integer, got 0 \(option --frame-length\)"),
    (PA + ["--frame-length", "-5"], r"frame_length: expected a positive integer, got -5 \(option --frame-length\)"),
    (PA + ["--frame-length", "40", "--stride", "41"],
     r"stride: 41 is longer than frame_length \(40\).*\(option --stride\)"),
    (PA + ["--stride", "0"], r"stride: expected a positive integer, got 0 \(option --stride\)"),
    (PA + ["--epochs", "0"], r"epochs: expected a positive integer, got 0 \(option --epochs\)"),
    (PA + ["--batch-size", "0"], r"batch_size: expected a positive integer, got 0 \(option --batch-size\)"),
    (PA + ["--backbone", "transformer"], r"backbone: expected one of .*got 'transformer' \(option --backbone\)"),
    (PA + ["--lr", "-1"], r"lr: expected a finite positive number, got -1.0 \(option --lr\)"),
    (PA + ["--lr", "1e-3", "--lr-end", "1e-2"], r"lr_end: must not exceed lr .*\(option --lr-end\)"),
    (PA + ["--decay-factor", "1.5"], r"decay_factor: expected 0 < factor < 1, got 1.5 \(option --decay-factor\)"),
    (PA + ["--preview-every", "0"], r"preview_every: expected a positive integer or none, got 0"),
    (PA + ["--max-train-samples", "10"], r"max_train_samples: must be at least frame_length \(200\)"),
    (PA + ["--seed", "-1"], r"seed: expected an integer from 0 to 4294967295 .*\(option --seed\)"),
    (PA + ["--grad-clip", "-1"], r"grad_clip: expected a finite number >= 0 \(0: off\), got -1.0"),
    (DPD + ["--pa-run", "no-such-run"], r"pa_run: run 'no-such-run' not found: .*\(option --pa-run\)"),
]
if NO_CUDA:
    CASES += [
        (PA + ["--device", "cuda"], r"device: CUDA was requested but no CUDA GPU is available .*\(option --device\)"),
        (PA + ["--device", "cuda:0"], r"device: CUDA was requested but no CUDA GPU is available"),
    ]
else:
    CASES.append((PA + ["--device", f"cuda:{torch.cuda.device_count()}"], r"device: cuda:\d+ does not exist"))


def _runs(ws):
    d = ws / "runs"
    return sorted(os.listdir(d)) if d.is_dir() else []


@pytest.mark.parametrize("argv,pattern", CASES, ids=[" ".join(c[0][-2:]) for c in CASES])
def test_argument_error_exits_2_naming_the_option_before_a_run_folder(tmp_path, capsys, monkeypatch, argv, pattern):
    import dpd_desktop.training.trainer as trainer_mod

    def no_dataset(*a, **k):  # these errors need no dataset: it must not even be read
        raise AssertionError("the dataset was read")

    monkeypatch.setattr(trainer_mod, "load_dataset_for", no_dataset)
    rc = cli_main(["--workspace", str(tmp_path), *argv])
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    assert re.search(pattern, lines[0]), lines[0]
    assert _runs(tmp_path) == []


def test_a_dpd_through_a_dpd_run_is_refused_before_a_run_folder(tmp_path, capsys):
    """--pa-run naming a run that is not a PA run: exit 2 naming the option, no new run folder."""
    fake = tmp_path / "runs" / "2026-01-01-000000-dpd-gru3"
    fake.mkdir(parents=True)
    (fake / "config.json").write_text(json.dumps({"schema": 2, "experiment": {
        "step": "dpd", "backbone": "gru", "hidden_size": 3, "num_layers": 1, "pa_run": "x"}}))
    rc = cli_main(["--workspace", str(tmp_path), *DPD, "--pa-run", fake.name])
    err = capsys.readouterr().err
    assert rc == 2 and f"pa_run: {fake.name} is a DPD run; a DPD needs a PA run (option --pa-run)" in err, err
    assert _runs(tmp_path) == [fake.name]


@pytest.mark.parametrize("argv,bad", [
    (["train-pa", "--dataset", "x", "--e", "3"], "--e 3"),  # was read as --epochs 3
    (["train-pa", "--dataset", "x", "--works", "w"], "--works w"),  # --workspace after the sub-command
    (["queue", "add", "pa", "--dataset", "x", "--epoch", "3"], "--epoch 3"),  # a sub-command two levels down
])
def test_abbreviated_options_are_refused(tmp_path, capsys, argv, bad):
    from dpd_desktop.cli.entry import build_parser

    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["--workspace", str(tmp_path), *argv])
    assert info.value.code == 2
    assert f"unrecognized arguments: {bad}" in capsys.readouterr().err


def test_abbreviated_train_option_in_a_sweep_base_is_refused(tmp_path, capsys):
    rc = cli_main(["--workspace", str(tmp_path), "sweep", "--step", "pa", "--grid", "lr=1e-3,2e-3", "--base",
                   "--dataset", "x", "--hidden", "8"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "unrecognized arguments: --hidden 8" in err and "Traceback" not in err, err
    assert _runs(tmp_path) == []
