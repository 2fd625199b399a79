"""A run's end spread over event-loop passes (issue 28, the longest stall): RunFinished and the worker's end arrive
together from the worker's thread; neither slot draws the final plots, each data panel is drawn in a pass of its
own, and ``runEnded`` comes in a pass after the last panel."""
from __future__ import annotations

from PySide6.QtWidgets import QApplication

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.runs.events import RunFinished

from gui_fakes import make_plotdata


def test_the_runs_end_draws_one_panel_per_pass_then_ends(make_window, monkeypatch):
    w = make_window()
    w.write_plots_on_finish = False
    w.session.start(ExperimentConfig(epochs=2, hidden_size=8, frame_length=50, stride=8, device="cpu"))
    app = QApplication.instance()
    for _ in range(5):
        app.processEvents()
    passes = [0]
    drawn, ended = [], []
    draw = w.plots._draw_panel
    monkeypatch.setattr(w.plots, "_draw_panel",
                        lambda panel, plots, label: (drawn.append((panel.title, passes[0])), draw(panel, plots, label)))
    w.runEnded.connect(lambda state: ended.append((state, passes[0])))
    ev = RunFinished(run_id="r", run_dir=None, best_epoch=1, val_metrics={"NMSE": -30.0},
                     test_metrics={"NMSE": -30.1}, wall_s=3.0, plots=make_plotdata(7, source="test"))
    w.runs._on_run_finished(ev)  # the two queued slots, in one pass
    w.runs._on_worker_done()
    assert drawn == [] and ended == []
    while not ended and passes[0] < 200:
        passes[0] += 1
        app.processEvents()
    titles = [t for t, _ in drawn]
    assert titles == [p.title for p in (w.psd_panel, w.amam_panel, w.ampm_panel, w.time_panel)]
    at = [p for _, p in drawn]
    assert all(b > a for a, b in zip(at, at[1:])), drawn  # one panel per pass
    assert ended == [("succeeded", ended[0][1])] and ended[0][1] > at[-1]
    assert w.plots.last_plots is ev.plots
