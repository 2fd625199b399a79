"""Dataset ▸ Inspect… and Import capture… in the window (offscreen): the values shown are the report's."""
from __future__ import annotations

import threading

import h5py
import numpy as np
import pytest
from PySide6.QtGui import QColor, QImage

import capture_fixtures as cf
from dpd_desktop.analysis.inspect import inspect_dataset, summary_rows
from dpd_desktop.gui import inspector as insp


@pytest.fixture(scope="module")
def swapped():
    x, y = cf.capture(2 ** 15)
    return cf.dataset_from(y, x, name="swapped")


def _menu_actions(w, title):
    for m in w.menuBar().actions():
        if m.menu() is not None and m.text() == title:
            return [a.text() for a in m.menu().actions()]
    return None


def test_inspector_shows_the_reports_values_and_flags(make_window, qtbot, swapped, monkeypatch):
    w = make_window()
    assert _menu_actions(w, "&Dataset") == ["&Inspect…", "Import &capture…"]
    assert not w.act_inspect.isEnabled() and not w.inspect_button.isEnabled()
    threads = []
    real = insp.inspect_dataset

    def spy(ds, frame_length=None):
        threads.append(threading.current_thread())
        return real(ds, frame_length=frame_length)

    monkeypatch.setattr(insp, "inspect_dataset", spy)
    w.set_dataset(swapped, "swapped")
    assert w.act_inspect.isEnabled() and w.inspect_button.isEnabled()
    w.inspect_button.click()
    dlg = w.inspector
    qtbot.waitUntil(lambda: dlg.report is not None, timeout=20000)
    assert threads and threads[0] is not threading.main_thread()  # the analysis ran in the pool
    assert w.inspect_job in w.jobs._jobs or w.inspect_job.is_done()
    rep = dlg.report
    expect = inspect_dataset(swapped, frame_length=w.form.config().frame_length)
    assert rep.delay_samples == expect.delay_samples and rep.gain_db == expect.gain_db
    rows = [(dlg.summary.item(i, 0).text(), dlg.summary.item(i, 1).text()) for i in range(dlg.summary.rowCount())]
    assert rows == summary_rows(expect)
    shown = dict(rows)
    assert shown["Delay y after x"].startswith(f"{expect.delay_samples:+.3f} samples")
    assert shown["Small-signal gain"] == f"{expect.gain_db:.2f} dB, {expect.phase_deg:.2f}°"
    flags = [(dlg.flags.item(i, 0).text(), dlg.flags.item(i, 1).text(), dlg.flags.item(i, 2).text())
             for i in range(dlg.flags.rowCount())]
    assert flags == [(f.severity, f.code, f.message) for f in expect.flags]
    i = [c for _, c, _ in flags].index("SWAPPED")
    assert dlg.flags.item(i, 0).background().color() == QColor(insp.SEVERITY_COLORS["error"])
    assert "1 error(s)" in dlg.status.text()
    # the plots hold the report's arrays
    items = dlg.p_xcorr.listDataItems()
    np.testing.assert_array_equal(items[0].getData()[1], rep.plots["xcorr_mag"])
    assert len(dlg.p_psd.listDataItems()) == 2


def test_render_inspector_png(tmp_path, qtbot, swapped):
    out = insp.render_inspector(inspect_dataset(swapped), tmp_path / "inspector.png", size=(900, 600))
    img = QImage(str(out))
    assert img.width() >= 900 and img.height() >= 600


def test_import_capture_dialog_writes_and_loads_the_dataset(make_window, qtbot, tmp_path):
    w = make_window()
    x, y = cf.capture(30000, delay=5.0)
    np.savetxt(tmp_path / "x.csv", np.stack([x.real, x.imag], 1), delimiter=",", header="I,Q", comments="")
    with h5py.File(tmp_path / "y.h5", "w") as f:
        f["y"] = y
    w.act_import_capture.trigger()
    dlg = w.import_dialog
    dlg.x_file.setText(str(tmp_path / "x.csv"))
    dlg.y_file.setText(str(tmp_path / "y.h5"))
    dlg.out.setText(str(tmp_path / "imported"))
    dlg.fs.setValue(800.0)
    dlg.bw.setValue(200.0)
    with qtbot.waitSignal(w.datasetLoaded, timeout=20000) as sig:
        job = dlg.start()
        assert job is not None
    ds = sig.args[0]
    assert ds.name == "imported" and ds.n_samples == {"train": 17997, "val": 5999, "test": 5999}
    assert (tmp_path / "imported" / "spec.json").is_file()
    qtbot.waitUntil(lambda: getattr(w, "inspector", None) is not None and w.inspector.report is not None,
                    timeout=20000)  # the new dataset is inspected at once
    rep = w.inspector.report
    assert rep.name == "imported" and rep.errors == () and abs(rep.delay_samples) < 0.05


def test_import_dialog_shows_the_error(make_window, qtbot, tmp_path):
    w = make_window()
    w.act_import_capture.trigger()
    dlg = w.import_dialog
    dlg.x_file.setText(str(tmp_path / "none.csv"))
    dlg.y_file.setText(str(tmp_path / "none2.csv"))
    dlg.out.setText(str(tmp_path / "o"))
    dlg.start()
    qtbot.waitUntil(lambda: "Not imported" in dlg.message.text(), timeout=10000)
    assert "none.csv: not found" in dlg.message.text()
    assert dlg.isVisible() and w.data.dataset is None
