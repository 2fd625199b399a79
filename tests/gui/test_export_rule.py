"""The window's exports follow the output rule (runs/outputs.py): the save dialogs never propose the run's own
folder (its plots/psd.png was the default, and Enter then "Yes" replaced it), and a file of a run folder chosen in the
dialog is refused with the reason, the file left byte for byte."""
from __future__ import annotations

import json

import pytest
from PySide6.QtWidgets import QFileDialog, QMessageBox

from gui_fakes import make_plotdata


def _run_folder(root):
    """A run folder as the writer leaves it, with its plots/psd.png."""
    run = root / "runs" / "2026-01-01-000000-pa-gru4"
    (run / "plots").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"experiment": {"step": "pa"}}))
    (run / "status.json").write_text(json.dumps({"state": "succeeded", "run_id": run.name}))
    (run / "history.csv").write_text("EPOCH\n0\n")
    (run / "plots" / "psd.png").write_bytes(b"\x89PNG the run's own plot")
    return run


@pytest.fixture
def shown(make_window, qtbot, tmp_path, monkeypatch):
    """A window whose session names a finished run folder, the PSD panel current, the dialogs recorded."""
    run = _run_folder(tmp_path / "workspace")
    (tmp_path / "home").mkdir(exist_ok=True)  # $HOME of the GUI tests (conftest.py)
    w = make_window()
    w.show_plots(make_plotdata(), "validation")
    w.session.run_dir = str(run)
    w.plots.set_current_panel(w.psd_panel)
    asked, warned = [], []
    answer = {"path": ""}

    def save_dialog(parent, title, start, filters=""):
        asked.append(start)
        return answer["path"] or start, filters

    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(save_dialog))
    monkeypatch.setattr(QMessageBox, "warning", staticmethod(lambda parent, title, text, *a: warned.append(text)))
    return w, run, asked, warned, answer


def test_export_dialogs_never_start_in_the_run_folder(shown, tmp_path):
    from dpd_desktop.gui.panel_export import ask_and_export

    w, run, asked, warned, _ = shown
    before = (run / "plots" / "psd.png").read_bytes()
    out = w.export_current_plot()  # File ▸ Export current plot, the dialog accepted as proposed (Enter)
    assert asked[-1] != str(run / "plots" / "psd.png") and str(run) not in asked[-1], asked
    assert out is not None and out.exists() and str(run) not in str(out)
    for fmt in ("png", "svg", "csv"):  # each plot's context menu: Export PNG / SVG / CSV
        assert ask_and_export(w, w.psd_panel, fmt, str(run / "plots")) is not None
        assert str(run) not in asked[-1], asked
    assert (run / "plots" / "psd.png").read_bytes() == before and warned == []


def test_a_run_file_chosen_in_the_dialog_is_refused_with_the_reason(shown):
    from dpd_desktop.gui.panel_export import ask_and_export

    w, run, asked, warned, answer = shown
    target = run / "plots" / "psd.png"
    before = target.read_bytes()
    answer["path"] = str(target)  # the user picks the run's own plot and confirms "Replace"
    assert w.export_current_plot() is None
    assert ask_and_export(w, w.psd_panel, "png") is None
    answer["path"] = str(run / "config.json.csv")
    assert ask_and_export(w, w.psd_panel, "csv") is None
    assert len(warned) == 3 and all("run folder" in t and str(run) in t for t in warned), warned
    assert target.read_bytes() == before and not (run / "config.json.csv").exists()
