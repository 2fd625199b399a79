"""Retention (runs/retention.py, `dpd-desktop runs clean`): exactly the scratch runs that ended more than
retention_hours ago go; kept, live and referenced-PA runs stay; nothing outside the runs folder is touched."""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from dpd_desktop import cli
from dpd_desktop.runs import retention
from dpd_desktop.runs.index import RunIndex
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.runs.settings import WorkspaceSettings
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.runs.writer import set_pinned

from run_folders import HOUR, make_run  # tests/run_folders.py

def _size(d: Path) -> int:
    return sum(p.lstat().st_size for p in d.rglob("*") if p.is_file() or p.is_symlink())


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


@pytest.fixture
def ws(tmp_path):
    """A workspace with one run of each kind retention judges."""
    w = Workspace(tmp_path / "ws")
    runs = {
        "old": make_run(w, "2026-01-01-000001-pa-old"),
        "young": make_run(w, "2026-01-01-000002-pa-young", ended_h=2.0),
        "created-long-ago": make_run(w, "2026-01-01-000003-pa-recent-end", ended_h=1.0, created_h=500.0),
        "kept": make_run(w, "2026-01-01-000004-pa-kept", pinned=True),
        "live": make_run(w, "2026-01-01-000005-pa-live", state="running"),  # this process: alive
        "killed": make_run(w, "2026-01-01-000006-pa-killed", state="running"),
        "pa-of-kept": make_run(w, "2026-01-01-000007-pa-base", payload=3000),
        "pa-of-due": make_run(w, "2026-01-01-000008-pa-base2", payload=5000),
        "failed": make_run(w, "2026-01-01-000009-pa-failed", state="failed", message="boom"),
    }
    runs["dpd-kept"] = make_run(w, "2026-01-01-000010-dpd-kept", step="dpd", pa=runs["pa-of-kept"], pinned=True)
    runs["dpd-due"] = make_run(w, "2026-01-01-000011-dpd-due", step="dpd", pa=runs["pa-of-due"])
    st = json.loads((runs["killed"] / "status.json").read_text())
    st["pid"], st["host"] = _dead_pid(), socket.gethostname()
    (runs["killed"] / "status.json").write_text(json.dumps(st))
    bad = w.runs_dir / "2026-01-01-000012-pa-unreadable"
    bad.mkdir()
    (bad / "config.json").write_text("{broken")
    runs["unreadable"] = bad
    return w, runs


DUE = ("old", "killed", "pa-of-due", "failed", "dpd-due")


def test_plan_lists_exactly_the_due_scratch_runs_and_why_the_others_stay(ws):
    w, runs = ws
    plan = retention.plan_retention(w)
    assert plan.retention_hours == 24.0
    assert [i.run_id for i in plan.due] == sorted(runs[k].name for k in DUE)
    for item in plan.due:
        assert item.size_bytes == _size(item.folder) and item.age_s == pytest.approx(48 * HOUR, abs=60)
    assert {i.run_id: i.state for i in plan.due}[runs["killed"].name] == "interrupted"
    why = {i.run_id: i.reason for i in plan.kept}
    assert why == {
        runs["young"].name: "scratch, ended 2.0 h ago (not older than 24 h)",
        runs["created-long-ago"].name: "scratch, ended 1.0 h ago (not older than 24 h)",  # age: since it ended
        runs["kept"].name: "kept (pinned)",
        runs["live"].name: "live (running)",
        runs["pa-of-kept"].name: f"PA of kept DPD run {runs['dpd-kept'].name}",
        runs["dpd-kept"].name: "kept (pinned)",
        runs["unreadable"].name: "unreadable: check it by hand",
    }
    assert plan.due_bytes == sum(_size(runs[k]) for k in DUE)


def test_a_young_dpd_run_keeps_its_pa_and_the_age_limit_comes_from_settings(ws):
    w, runs = ws
    young_dpd = make_run(w, "2026-01-01-000013-dpd-young", step="dpd", pa=runs["old"], ended_h=1.0)
    plan = retention.plan_retention(w)
    assert runs["old"].name not in [i.run_id for i in plan.due]
    assert {i.run_id: i.reason for i in plan.kept}[runs["old"].name] == f"PA of staying DPD run {young_dpd.name}"
    WorkspaceSettings(retention_hours=100).save(w.root)
    assert retention.plan_retention(w).due == ()
    assert [i.run_id for i in retention.plan_retention(w, older_than_hours=0.5).due] == sorted(
        [runs[k].name for k in (*DUE, "young", "created-long-ago")] + [young_dpd.name])


def test_clean_dry_run_lists_exactly_the_due_runs_with_sizes_and_removes_nothing(ws, capsys):
    w, runs = ws
    before = sorted(p.name for p in w.runs_dir.iterdir())
    assert cli.main(["--workspace", str(w.root), "runs", "clean", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    would = [ln.split() for ln in out if ln.startswith("would remove ")]
    assert [c[2] for c in would] == sorted(runs[k].name for k in DUE)
    for c in would:
        assert " ".join(c[3:5]) == retention.format_size(_size(w.runs_dir / c[2]))
    assert out[-1] == (f"dry run: 5 run(s), {retention.format_size(sum(_size(runs[k]) for k in DUE))} would be "
                       "removed (scratch runs older than 24 h); nothing removed")
    kept = {ln.split()[1] for ln in out if ln.startswith("keeping ")}
    assert kept == {runs[k].name for k in ("kept", "live", "pa-of-kept", "dpd-kept", "unreadable")}
    assert sorted(p.name for p in w.runs_dir.iterdir()) == before


def test_clean_removes_exactly_the_due_runs_and_updates_the_index(ws, capsys):
    w, runs = ws
    with RunIndex.open(w) as idx:
        assert len(idx) == len(runs)
    assert cli.main(["--workspace", str(w.root), "runs", "clean"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1].startswith("removed 5 run(s), ")
    left = sorted(p.name for p in w.runs_dir.iterdir() if not p.name.startswith("."))
    assert left == sorted(runs[k].name for k in runs if k not in DUE)
    assert list((w.runs_dir / retention.TRASH_DIR).iterdir()) == []
    with RunIndex.open(w) as idx:
        assert idx.rebuilt is None and sorted(r.run_id for r in idx.runs()) == left
    assert cli.main(["--workspace", str(w.root), "runs", "clean", "--older-than", "0"]) == 0
    gone = {"young", "created-long-ago"}  # now old enough; pinned, live, unreadable and referenced PA stay
    assert sorted(p.name for p in w.runs_dir.iterdir() if not p.name.startswith(".")) == sorted(
        runs[k].name for k in runs if k not in DUE and k not in gone)


def test_removal_removes_only_what_was_shown_and_is_still_due(ws):
    w, runs = ws
    plan = retention.plan_retention(w)
    set_pinned(runs["old"], True)  # pinned after the prompt was shown
    make_run(w, "2026-01-01-000020-pa-later")  # due, but not in the plan shown
    report = retention.remove_due(w, plan)
    assert report.skipped == [(runs["old"].name, "no longer due")]
    assert sorted(report.removed) == sorted(runs[k].name for k in DUE if k != "old")
    assert runs["old"].is_dir() and (w.runs_dir / "2026-01-01-000020-pa-later").is_dir()


def test_a_symlink_out_of_the_workspace_is_never_followed(ws, tmp_path, capsys):
    w, runs = ws
    outside = tmp_path / "outside"
    other = Workspace(outside)
    target = make_run(other, "2026-01-01-000030-pa-elsewhere")  # an old scratch run in another workspace
    keep_me = outside / "precious.txt"
    keep_me.write_text("data")
    os.symlink(target, w.runs_dir / "2026-01-01-000031-pa-link")
    os.symlink(keep_me, runs["old"] / "precious-link.txt")  # a link inside a due run
    os.symlink(outside, runs["failed"] / "outside-dir")
    plan = retention.plan_retention(w)
    assert {i.run_id: i.reason for i in plan.kept}["2026-01-01-000031-pa-link"] == "a symbolic link (never followed)"
    assert cli.main(["--workspace", str(w.root), "runs", "clean"]) == 0
    assert "removed 5 run(s)" in capsys.readouterr().out
    assert not runs["old"].exists() and not runs["failed"].exists()
    assert keep_me.read_text() == "data" and (target / "config.json").is_file() and (target / "log.txt").is_file()
    assert os.path.islink(w.runs_dir / "2026-01-01-000031-pa-link")
    assert sorted(p.name for p in outside.iterdir()) == ["precious.txt", "runs"]


def test_removal_refuses_a_folder_that_resolves_outside_the_runs_folder(ws, tmp_path):
    w, runs = ws
    plan = retention.plan_retention(w)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    bogus = retention.RetentionItem("x", elsewhere, "succeeded", 99 * HOUR, True, "forged")
    forged = retention.RetentionPlan(plan.retention_hours, plan.now, (bogus,), (), w.runs_dir)
    assert retention.remove_due(w, forged).skipped == [("x", "no longer due")]
    assert elsewhere.is_dir()
    assert retention.inside_runs_dir(elsewhere, w.runs_dir).startswith("not a folder inside the runs folder")
    assert retention.inside_runs_dir(runs["old"] / "log.txt", w.runs_dir).startswith("not a folder inside")
    assert retention.inside_runs_dir(runs["old"], w.runs_dir) is None


def test_a_crash_mid_delete_leaves_only_trash_never_a_listed_run(ws):
    w, runs = ws
    trash = w.runs_dir / retention.TRASH_DIR
    trash.mkdir()
    os.rename(runs["old"], trash / f"{runs['old'].name}.deadbeef")  # the rename done, the delete not
    listed = [r.run_id for r in w.list_runs()]
    with RunIndex.open(w) as idx:
        assert runs["old"].name not in [r.run_id for r in idx.runs()] and runs["old"].name not in listed
    assert retention.purge_trash(w) == 1 and list(trash.iterdir()) == []


def test_pin_survives_and_a_damaged_pin_file_keeps_the_run(ws):
    w, runs = ws
    (runs["old"] / "pinned.json").write_text("{not json")
    assert RunRecord.read(runs["old"]).pinned is True
    set_pinned(runs["failed"], True)
    set_pinned(runs["failed"], False)
    assert json.loads((runs["failed"] / "pinned.json").read_text())["pinned"] is False
    assert [i.run_id for i in retention.plan_retention(w).due] == sorted(
        runs[k].name for k in DUE if k != "old")
    with pytest.raises(FileNotFoundError, match="not a run folder"):
        set_pinned(w.runs_dir, True)


def test_clean_refuses_a_negative_age_and_reports_bad_settings(ws, capsys):
    w, _ = ws
    assert cli.main(["--workspace", str(w.root), "runs", "clean", "--older-than", "-1"]) == 2
    assert "--older-than -1.0: expected hours >= 0" in capsys.readouterr().err
    (w.root / "settings.json").write_text('{"retention_hours": "soon"}')
    assert cli.main(["--workspace", str(w.root), "runs", "clean", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "settings.json" in err and "retention_hours" in err


def test_a_damaged_run_is_never_removed_on_a_doubt(ws):
    """An old scratch run whose results.h5 was overwritten reads damaged: retention keeps it for the user to check."""
    w, runs = ws
    (runs["old"] / "results.h5").write_bytes(b"not hdf5")
    plan = retention.plan_retention(w)
    assert runs["old"].name not in [i.run_id for i in plan.due]
    assert {i.run_id: i.reason for i in plan.kept}[runs["old"].name] == "damaged: check it by hand"
