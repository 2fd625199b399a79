"""Sweep specs (sweep/spec.py): grid order, random search reproducible from its seed, errors naming file and key."""
from __future__ import annotations

import math
import random

import pytest

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.sweep.spec import (SweepSpecError, expand, load_spec, parse_grid_option, spec_from_options,
                                    trial_config)

BASE = """
[base]
dataset = "demo"
epochs = 2
frame_length = 50
lr_end = 1e-6
"""


def _write(tmp_path, text, name="spec.toml"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_grid_order_is_the_product_with_the_first_key_slowest(tmp_path):
    p = _write(tmp_path, '[sweep]\nname = "g"\n' + BASE + """
[space]
family = ["gru", "lstm"]
hidden = [4, 8, 16]
seeds = [0, 1]
""")
    spec = load_spec(p)
    trials = expand(spec)
    assert [p.key for p in spec.space] == ["backbone", "hidden_size", "seed"]
    assert [(t["backbone"], t["hidden_size"], t["seed"]) for t in trials] == [
        ("gru", 4, 0), ("gru", 4, 1), ("gru", 8, 0), ("gru", 8, 1), ("gru", 16, 0), ("gru", 16, 1),
        ("lstm", 4, 0), ("lstm", 4, 1), ("lstm", 8, 0), ("lstm", 8, 1), ("lstm", 16, 0), ("lstm", 16, 1)]
    cfg = trial_config(spec, trials[7], "SID", 7)
    assert (cfg.backbone, cfg.hidden_size, cfg.seed, cfg.epochs, cfg.frame_length) == ("lstm", 4, 1, 2, 50)
    assert cfg.name == "sweep SID trial 7" and cfg.extra == {"sweep": {"id": "SID", "trial": 7}}


def test_random_search_is_reproducible_from_its_seed(tmp_path):
    text = '[sweep]\nsearch = "random"\ntrials = 6\nseed = SEED\n' + BASE + """
[space]
lr = {low = 1e-4, high = 1e-2, log = true}
hidden_size = {low = 4, high = 32}
gain_rule = ["peak", "rms", "small-signal"]
weight_decay = {low = 0.0, high = 0.1}
"""
    a = expand(load_spec(_write(tmp_path, text.replace("SEED", "7"), "a.toml")))
    b = expand(load_spec(_write(tmp_path, text.replace("SEED", "7"), "b.toml")))
    c = expand(load_spec(_write(tmp_path, text.replace("SEED", "8"), "c.toml")))
    assert a == b and a != c and len(a) == 6
    # an independent draw: random.Random(seed), the keys in [space] order, per trial
    rng = random.Random(7)
    want = []
    for _ in range(6):
        lr = math.exp(rng.uniform(math.log(1e-4), math.log(1e-2)))
        h = rng.randint(4, 32)
        g = rng.choice(("peak", "rms", "small-signal"))
        wd = rng.uniform(0.0, 0.1)
        want.append({"lr": lr, "hidden_size": h, "gain_rule": g, "weight_decay": wd})
    assert a == want
    assert all(isinstance(t["hidden_size"], int) and 1e-4 <= t["lr"] <= 1e-2 for t in a)


@pytest.mark.parametrize("text, key, words", [
    ("[space]\nhiden_size = [4]\n", "space.hiden_size",
     "not a searchable configuration field (did you mean hidden_size?)"),
    ("[space]\nepochs = [1, 3]\n", "space.epochs",
     "epochs is also set in [base] (base.epochs = 2): give it in one place, [base] or [space]"),
    ("[space]\nzzzz = [1]\n", "space.zzzz", "not a searchable configuration field (expected one of "),
    ("[space]\nlr = [1e-3, -1.0]\n", "space.lr", "expected a finite positive number, got -1.0"),
    ("[space]\nhidden_size = [4, 0]\n", "space.hidden_size", "expected a positive integer, got 0"),
    ("[space]\nbackbone = [\"gru\", \"transformer\"]\n", "space.backbone", "expected one of"),
    ("[space]\nlr = {low = 1e-3, high = 1e-2}\n", "space.lr", "a grid needs a list of values"),
    ("[space]\nstep = [\"pa\"]\n", "space.step", "not a searchable"),
    ("[space]\n", "space", "nothing to search"),
    ("[sweep]\nsearch = \"bayes\"\n[space]\nseed = [0]\n", "sweep.search", "expected one of"),
    ("[sweep]\nsearch = \"random\"\n[space]\nseed = [0]\n", "sweep.trials", "expected an integer from 1"),
    ("[sweep]\nsearch = \"optuna\"\ntrials = 2\n[optuna]\npruner = \"magic\"\n[space]\nseed = [0]\n",
     "optuna.pruner", "expected one of"),
    ("[sweep]\nsearch = \"optuna\"\ntrials = 2\n[optuna]\nenqueue = [{lr = 1e-3}]\n[space]\nseed = [0]\n",
     "optuna.enqueue[0].lr", "not a field of [space]"),
    ("[sweep]\nsearch = \"random\"\ntrials = 2\n[space]\nlr = {low = 1e-2, high = 1e-3}\n", "space.lr",
     "expected low < high"),
    ("[runs]\nx = 1\n", "runs", "unknown table"),
])
def test_spec_errors_name_the_file_and_the_key(tmp_path, text, key, words):
    p = _write(tmp_path, text + BASE)
    with pytest.raises(SweepSpecError) as info:
        load_spec(p)
    assert info.value.key == key
    assert str(info.value).startswith(f"{p}: {key}: ") and words in str(info.value)


def test_base_errors_and_bad_toml_name_the_file(tmp_path):
    p = _write(tmp_path, "[base]\nepochs = 0\n[space]\nseed = [0, 1]\n")
    with pytest.raises(SweepSpecError, match=r"spec\.toml: base\.epochs: expected a positive integer, got 0"):
        load_spec(p)
    p = _write(tmp_path, "[base]\ndataset = \"nowhere\"\n[space]\nseed = [0]\n")
    with pytest.raises(SweepSpecError, match=r"base\.dataset: .*nowhere: no such file or folder"):
        load_spec(p)
    p = _write(tmp_path, "[space\nseed = [0]\n")
    with pytest.raises(SweepSpecError, match=r"spec\.toml: file: not valid TOML"):
        load_spec(p)
    # a value that conflicts with the base names the searched key and the field it conflicts with
    p = _write(tmp_path, "[base]\nlr_end = 1e-3\n[space]\nlr = [1e-2, 1e-4]\n")
    with pytest.raises(SweepSpecError, match=r"space\.lr: 0\.0001 conflicts with lr_end"):
        load_spec(p)


def test_command_line_grid_reads_each_field_type(tmp_path):
    assert parse_grid_option("hidden-size=4,8") == ("hidden_size", [4, 8])
    assert parse_grid_option("lr=1e-3,5e-3") == ("lr", [1e-3, 5e-3])
    assert parse_grid_option("family=gru,lstm") == ("backbone", ["gru", "lstm"])
    assert parse_grid_option("max_train_samples=none,500") == ("max_train_samples", [None, 500])
    assert parse_grid_option("poly_odd_only=true,false") == ("poly_odd_only", [True, False])
    for bad, words in (("hidden_size=4,x", "'x' is not a value of hidden_size"), ("nope=1", "not a searchable"),
                       ("seed=", "expected KEY=V1,V2"), ("seed=1,,2", "an empty value")):
        with pytest.raises(SweepSpecError, match=words):
            parse_grid_option(bad)
    spec = spec_from_options(["seed=0,1,2,3", "hidden=4"], ExperimentConfig(epochs=2, frame_length=50),
                             random_trials=3, seed=5)
    assert spec.search == "random" and spec.trials == 3 and spec.base == {"epochs": 2, "frame_length": 50}
    assert expand(spec) == expand(spec) and len(expand(spec)) == 3
    assert len({t["seed"] for t in expand(spec)}) == 3  # each combination at most once
    with pytest.raises(SweepSpecError, match="only 2 distinct combinations"):
        spec_from_options(["seed=0,1", "hidden=4"], ExperimentConfig(epochs=2, frame_length=50), random_trials=3)
    # a value given twice would train the same trial twice: refused, naming it
    for opts, words in ((["seed=0,0"], r"space\.seed: 0 is listed twice"),
                        (["lr=1e-3,0.001"], r"space\.lr: 0\.001 is listed twice")):
        with pytest.raises(SweepSpecError, match=words):
            spec_from_options(opts, ExperimentConfig(epochs=2, frame_length=50))
    p = _write(tmp_path, "[space]\nbackbone = [\"gru\", \"lstm\", \"gru\"]\n")
    with pytest.raises(SweepSpecError, match=r"space\.backbone: 'gru' is listed twice"):
        load_spec(p)


def test_devices_are_taken_in_turn_unless_searched(tmp_path):
    p = _write(tmp_path, '[sweep]\ndevices = ["cpu", "cuda:0", "cuda:1"]\n' + BASE + "[space]\nseed = [0, 1, 2, 3]\n")
    spec = load_spec(p)
    assert [trial_config(spec, t, "S", i).device for i, t in enumerate(expand(spec))] == [
        "cpu", "cuda:0", "cuda:1", "cpu"]
    p = _write(tmp_path, '[sweep]\ndevices = ["gpu7"]\n' + BASE + "[space]\nseed = [0]\n")
    with pytest.raises(SweepSpecError, match=r"sweep\.devices: expected auto, cpu, cuda or cuda:N"):
        load_spec(p)


def test_base_typo_gets_a_close_match_and_no_source_file_is_named(tmp_path):
    p = _write(tmp_path, "[base]\nhiden_size = 3\n[space]\nseed = [0]\n")
    with pytest.raises(SweepSpecError) as info:
        load_spec(p)
    assert str(info.value) == f"{p}: base.hiden_size: not a configuration field (did you mean hidden_size?)"
    p = _write(tmp_path, "[base]\nqqqq = 3\n[space]\nseed = [0]\n")
    with pytest.raises(SweepSpecError, match=r"base\.qqqq: not a configuration field \(expected one of .*hidden_size"):
        load_spec(p)
    for text in (str(info.value), (load_spec.__doc__ or "")):
        assert "config.py" not in text


def test_an_alias_in_space_of_a_base_field_is_refused(tmp_path):
    p = _write(tmp_path, "[base]\nhidden_size = 3\n[space]\nhidden = [4, 6]\n")
    with pytest.raises(SweepSpecError) as info:
        load_spec(p)
    assert info.value.key == "space.hidden" and "hidden_size is also set in [base] (base.hidden_size = 3)" in str(
        info.value)
    with pytest.raises(SweepSpecError) as info:
        spec_from_options(["hidden_size=4,6"], ExperimentConfig(hidden_size=8))
    assert str(info.value) == ("command line: --grid hidden_size: hidden_size is also given in --base: give it in "
                               "one place, --base or --grid")


@pytest.mark.parametrize("option", ["random", "optuna"])
@pytest.mark.parametrize("n", [0, -1, 10_001])
def test_zero_or_out_of_range_trials_are_refused_naming_the_option(option, n):
    with pytest.raises(SweepSpecError) as info:
        spec_from_options(["seed=0,1"], ExperimentConfig(), **{f"{option}_trials": n})
    assert str(info.value) == f"command line: --{option}: expected an integer from 1 to 10000, got {n}"


def test_a_missing_file_or_a_folder_is_one_line(tmp_path):
    from dpd_desktop.sweep.spec import SpecFileError

    (tmp_path / "adir.toml").mkdir()
    for name, words in (("missing.toml", "no such spec file"), ("adir.toml", "is a folder, not a spec file")):
        with pytest.raises(SpecFileError) as info:
            load_spec(tmp_path / name)
        assert str(info.value) == f"{tmp_path / name}: {words}"


def test_paths_in_a_spec_resolve_against_its_folder(tmp_path, monkeypatch):
    spec_dir = tmp_path / "specs"
    (spec_dir / "data").mkdir(parents=True)
    (spec_dir / "runs" / "r1").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)  # another folder than the spec's
    p = _write(spec_dir, '[base]\nstep = "dpd"\ndataset = "data"\npa_run = "runs/r1"\n[space]\nseed = [0]\n')
    spec = load_spec(p)
    assert spec.base["dataset"] == str((spec_dir / "data").resolve())
    assert spec.base["pa_run"] == str((spec_dir / "runs" / "r1").resolve())
    p = _write(spec_dir, '[base]\nstep = "dpd"\npa_run = "20261201-pa-id"\n[space]\nseed = [0]\n')
    assert load_spec(p).base["pa_run"] == "20261201-pa-id"  # a run id stays a run id
