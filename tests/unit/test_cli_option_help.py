"""Every option of train-pa / train-dpd (and of queue add pa|dpd, which share them) has a help line that shows its
default, and the shown default is the one of the config table (config.py), not a second copy (issue 28)."""
from __future__ import annotations

import argparse
import re

import pytest

from dpd_desktop.cli.entry import build_parser
from dpd_desktop.config import ExperimentConfig, default_hidden_size

#: command-line dest → ExperimentConfig field where the names differ
FIELD = {"odd_only": "poly_odd_only", "time_limit": "time_limit_s"}


def _sub(parser: argparse.ArgumentParser, *names: str) -> argparse.ArgumentParser:
    for name in names:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def _options(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or "--workspace" in action.option_strings:
            continue
        yield action


PARSERS = [(("train-pa",), "pa"), (("train-dpd",), "dpd"), (("queue", "add", "pa"), "pa"),
           (("queue", "add", "dpd"), "dpd")]


@pytest.mark.parametrize("names,step", PARSERS, ids=[" ".join(n) for n, _ in PARSERS])
def test_every_training_option_has_help_and_shows_the_config_default(names, step):
    parser = _sub(build_parser(), *names)
    formatter = parser._get_formatter()
    config = ExperimentConfig()
    checked = 0
    for action in _options(parser):
        opt = action.option_strings[0]
        text = formatter._expand_help(action) if action.help else ""
        assert text.strip(), f"{opt}: no help"
        assert "\n" not in action.help, f"{opt}: the help is more than one line"
        if action.required:
            continue
        assert "default" in text, f"{opt}: the help shows no default: {text!r}"
        name = FIELD.get(action.dest, action.dest)
        if not hasattr(config, name):
            continue
        want = default_hidden_size(step) if name == "hidden_size" else getattr(config, name)
        if action.nargs == 0:  # a flag: its unset value is the config's default
            assert action.default == want or (action.default is None and want is None), opt
        elif action.default is None:
            # resolved later (the workspace's setting, the backbone): the help says which, and names the config's
            # default where it has one
            assert re.search(r"\(default: [^)]+\)|default: ", text), f"{opt}: {text!r}"
            if want is not None and not isinstance(want, bool):
                assert str(want) in text, f"{opt}: the help does not show the config's default {want!r}: {text!r}"
        else:
            assert action.default == want, f"{opt}: default {action.default!r}, the config's {want!r}"
            assert f"default {want}" in text, f"{opt}: shows no 'default {want}': {text!r}"
        checked += 1
    assert checked >= 40  # the config-backed options of train-pa are more than 40


def test_the_shown_defaults_follow_the_config_table(monkeypatch):
    """Other defaults in the config class change the options' defaults and help: the options read the one table."""
    import dataclasses

    changed = dataclasses.make_dataclass("Changed", [("patience", int, 7), ("warmup_epochs", int, 3),
                                                     ("cross_lag", int, 4)], bases=(ExperimentConfig,))
    for module in ("train", "poly"):
        monkeypatch.setattr(f"dpd_desktop.cli.{module}.ExperimentConfig", changed)
    parser = _sub(build_parser(), "train-pa")
    formatter = parser._get_formatter()
    shown = {a.dest: (a.default, formatter._expand_help(a)) for a in parser._actions if a.help}
    assert shown["patience"][0] == 7 and shown["patience"][1].endswith("(default 7)")
    assert shown["warmup_epochs"][0] == 3 and shown["warmup_epochs"][1].endswith("(default 3)")
    assert shown["cross_lag"][0] == 4 and shown["cross_lag"][1].endswith("(default 4)")


def test_resume_says_its_limits_default_to_the_runs_own():
    """A resume keeps the limits its run recorded (training/resume.py prepare_resume: None keeps them), and says so
    in its help rather than a new run's "the workspace's setting"."""
    resume = {a.dest: a.help for a in _options(_sub(build_parser(), "resume"))}
    new = {a.dest: a.help for a in _options(_sub(build_parser(), "train-pa"))}
    for dest in ("time_limit", "cuda_memory_fraction"):
        assert "(default: the run's recorded value, else the workspace's setting)" in resume[dest], resume[dest]
        assert "(default: the workspace's setting, else none)" in new[dest]
