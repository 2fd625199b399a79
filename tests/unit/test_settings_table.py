"""A setting's default is written once, in its table (config.py ExperimentConfig, runs/settings.py
WorkspaceSettings): no module reads a setting with a second copy of its default as the fallback (issue 27)."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import dpd_desktop
from dpd_desktop.config import ExperimentConfig
from dpd_desktop.runs.settings import WorkspaceSettings

PACKAGE = Path(dpd_desktop.__file__).parent
TABLES = {PACKAGE / "config.py", PACKAGE / "runs" / "settings.py"}


def _fallback_patterns() -> list[tuple[str, re.Pattern]]:
    """``.get("metric_profile", "legacy-2.2.1")``, ``getattr(a, "kernel", "reference")``, ``setdefault(
    "experiment.kernel", "reference")``: a choice-string setting read with its default typed again."""
    out = []
    for table in (ExperimentConfig, WorkspaceSettings):
        for f in dataclasses.fields(table):
            if isinstance(f.default, str):
                q = re.escape(f.default)
                out.append((f.name, re.compile(rf"""["'](?:[\w.]*\.)?{f.name}["']\s*,\s*["']{q}["']""")))
    return out


def test_no_setting_is_read_with_a_second_copy_of_its_default():
    patterns = _fallback_patterns()
    assert len(patterns) >= 10  # step, dataset, backbone, loss, device, metric_profile, gain_rule, kernel, ...
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in TABLES:
            continue
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found += [f"{path.relative_to(PACKAGE)}:{i}: {name}" for name, rx in patterns if rx.search(line)]
    assert not found, "defaults typed again instead of read from the table:\n" + "\n".join(found)


def test_the_pattern_catches_the_copies_it_is_for():
    patterns = dict(_fallback_patterns())
    assert patterns["metric_profile"].search('(ev.config or {}).get("metric_profile", "legacy-2.2.1")')
    assert patterns["kernel"].search('getattr(a, "kernel", "reference")')
    assert patterns["kernel"].search('out.setdefault("experiment.kernel", \'reference\')')
    assert not patterns["kernel"].search('out.setdefault("experiment.kernel", ExperimentConfig.kernel)')


def test_defaults_read_elsewhere_follow_the_table(monkeypatch):
    """Modules that need a default read it from the table at call time (a changed default reaches them)."""
    from dpd_desktop.runs.record import RunRecord

    rec = RunRecord.__new__(RunRecord)
    rec.config, rec.doc = None, {"experiment": {}}
    assert rec.metric_profile == ExperimentConfig.metric_profile == "legacy-2.2.1"
    monkeypatch.setattr(ExperimentConfig, "metric_profile", "corrected")
    assert rec.metric_profile == "corrected"
