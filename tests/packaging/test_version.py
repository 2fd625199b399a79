"""One version number: dpd_desktop.__version__, read by pyproject.toml, shown by --version, the window title and the
About box, recorded in config.json (tests/packaging/test_selftest.py checks that one)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (requires-python >= 3.10): the tomli backport
    import tomli as tomllib
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import PySide6  # noqa: E402
import torch  # noqa: E402
from PySide6.QtCore import QSettings  # noqa: E402
from PySide6.QtWidgets import QMessageBox  # noqa: E402

from dpd_desktop import __version__, cli  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_takes_the_version_from_the_package():
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in doc["project"] and doc["project"]["dynamic"] == ["version"]
    assert doc["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "dpd_desktop.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)


def test_version_option_prints_it(tmp_path):
    r = subprocess.run([sys.executable, "-m", "dpd_desktop", "--version"], cwd=ROOT, capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
    assert r.returncode == 0 and r.stdout == f"dpd-desktop {__version__}\n"


def _window(qtbot, tmp_path):
    from dpd_desktop.gui.main_window import MainWindow
    from dpd_desktop.runs.workspace import Workspace

    w = MainWindow(workspace=Workspace(tmp_path / "ws"),
                   settings=QSettings(str(tmp_path / "w.ini"), QSettings.Format.IniFormat))
    w.write_plots_on_finish = False
    qtbot.addWidget(w)
    w.show()
    return w


def test_window_title_and_about_box_show_it(qtbot, tmp_path):
    w = _window(qtbot, tmp_path)
    assert w.windowTitle().startswith(f"DPD Desktop {__version__} — PA · ")
    help_menu = [a.menu() for a in w.menuBar().actions() if a.text() == "&Help"][0]
    assert [a.text() for a in help_menu.actions()] == ["About DPD Desktop"]
    help_menu.actions()[0].trigger()
    box = w.about_box
    assert isinstance(box, QMessageBox) and box.isVisible() and box.windowTitle() == "About DPD Desktop"
    assert f"<h3>DPD Desktop {__version__}</h3>" in box.text()
    assert f"PyTorch {torch.__version__}" in box.text() and f"PySide6) {PySide6.__version__}" in box.text()
    box.close()


def test_no_sub_command_opens_the_window_without_a_dataset(monkeypatch, tmp_path):
    """`dpd-desktop` alone (the .desktop entry's command) opens the window; it used to fail on args.dataset."""
    seen = {}
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.delenv("QT_QPA_PLATFORM", raising=False)
    monkeypatch.setattr(cli.entry, "_window", lambda ws, **kw: seen.update(kw, root=ws.root) or 0)
    assert cli.execute(["--workspace", str(tmp_path)]).status == 0
    assert seen == {"dataset": None, "root": tmp_path}
