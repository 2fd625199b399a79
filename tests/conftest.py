"""Test-run policy: every skip must be explained.

A skipped test whose reason is not on the short allowed list below is reported as a FAILED test (so the run fails),
and the terminal summary ends with the skip counts per reason. Allowed:

* no CUDA GPU (reason starts with "needs a CUDA GPU"), or fewer than two ("needs two CUDA GPUs");
* the CPU-only case that checks the error for a missing GPU, on a machine that has one ("this machine has a GPU");
* a case for what another operating system lacks (POSIX signals, /proc, X11/Wayland): reason starts "platform:";
* outside CI only (environment variable ``CI`` unset or empty): a measured dataset of ``../shared/datasets`` that is
  absent (reason names a dataset and says "not found"/"not present"), and the OpenDPD reference sources that
  ``make test`` prepares (reason starts "OpenDPD 2.2.1 reference sources not found" or "OpenDPD 2.4.2 reference
  sources not found"). In CI both must be there.

``pytest.importorskip`` and every other reason fail the run. The GUI tests run display-less (offscreen Qt), so no
GUI case needs a skip.
"""
from __future__ import annotations

import os
from collections import Counter

import pytest

pytest_plugins = ["pytester"]  # tests/unit/test_skip_policy.py runs this policy on small generated test files

_COUNTS = pytest.StashKey[Counter]()
_REFUSED = pytest.StashKey[Counter]()


def _in_ci() -> bool:
    return bool(os.environ.get("CI", "").strip())


def allowed_category(reason: str) -> str | None:
    """The allowed-list entry that explains a skip ``reason``, or None when the skip is not allowed."""
    r = reason.strip()
    if r.startswith("needs a CUDA GPU"):
        return "no CUDA GPU"
    if r.startswith("needs two CUDA GPUs"):
        return "no second CUDA GPU"
    if r == "this machine has a GPU":
        return "CPU-only case on a GPU machine"
    if r.startswith("platform:"):
        return "not on this operating system"
    if not _in_ci():
        low = r.lower()
        if "dataset" in low and ("not found" in low or "not present" in low):
            return "measured dataset absent (outside CI)"
        if r.startswith(("OpenDPD 2.2.1 reference sources not found", "OpenDPD 2.4.2 reference sources not found")):
            return "reference sources absent (outside CI; `make test` prepares them)"
    return None


def _skip_reason(report) -> str:
    lr = report.longrepr
    if isinstance(lr, tuple) and len(lr) == 3:
        msg = str(lr[2])
    else:
        msg = str(lr)
    return msg.removeprefix("Skipped: ")


def _judge(config, report) -> None:
    """Count a skip report; turn it into a failure when its reason is not allowed."""
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report)
    category = allowed_category(reason)
    if category is not None:
        config.stash[_COUNTS][f"{category}: {reason}"] += 1
        return
    config.stash[_REFUSED][reason] += 1
    report.outcome = "failed"
    where = "in CI (CI is set) " if _in_ci() else ""
    report.longrepr = (f"skip not allowed {where}- reason not on the allowed list of tests/conftest.py: {reason}\n"
                       "Make the test run, or add the reason to the allowed list with a justification.")


def pytest_configure(config):
    config.stash[_COUNTS] = Counter()
    config.stash[_REFUSED] = Counter()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    _judge(item.config, report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    report = yield
    _judge(collector.config, report)
    return report


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    counts, refused = config.stash[_COUNTS], config.stash[_REFUSED]
    tr = terminalreporter
    tr.section("skips by reason")
    if not counts and not refused:
        tr.line("no test skipped")
    for key, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        tr.line(f"{n:5d}  allowed  {key}")
    for reason, n in sorted(refused.items(), key=lambda kv: (-kv[1], kv[0])):
        tr.line(f"{n:5d}  REFUSED  {reason}  (counted as failed)")
    tr.line(f"CI={'set' if _in_ci() else 'unset'}: {sum(counts.values())} allowed skip(s), "
            f"{sum(refused.values())} refused")
