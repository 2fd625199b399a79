"""The kernel setting in the window (issue 14 point 2): the Kernel choice in the Training form with what each value
means, saved in QSettings, carried by "New run from these settings" and by the queue panel; the kernel that ran on
the device line, with the reason in a banner when fast fell back; the runs browser's kernel column."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from fake_kernels import STUB_REASON, install_stub  # tests/fake_kernels.py

from dpd_desktop.config import ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.gui.kernel_view import fallback_text, kernel_of_start
from dpd_desktop.gui.runs_browser import COLUMNS
from dpd_desktop.lab.queue import RunQueue
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.runs.events import RunStarted
from dpd_desktop.training.ls_fit import make_trainer
from dpd_desktop.training.trainer import Trainer

FELL_BACK = f"model: GRU runs on the reference kernel ({STUB_REASON})"


def _tiny(**kw) -> ExperimentConfig:
    base = dict(dataset="demo", epochs=1, hidden_size=4, frame_length=50, stride=8, device="cpu")
    base.update(kw)
    return ExperimentConfig(**base)


def _items(combo):
    return [(combo.itemData(i), combo.itemText(i), combo.itemData(i, Qt.ItemDataRole.ToolTipRole))
            for i in range(combo.count())]


def test_the_form_offers_reference_and_fast_and_says_what_each_means(make_window):
    w = make_window()
    k = w.form.kernel
    items = _items(k)
    assert [(v, t) for v, t, _ in items] == [("reference", "reference"), ("fast", "fast")]
    assert "bitwise equal to OpenDPD 2.2.1" in items[0][2] and "rounded differently" in items[1][2]
    assert "reference: nn.GRU / nn.LSTM (cuDNN on CUDA), bitwise equal to OpenDPD 2.2.1" in k.toolTip()
    assert "fast: our own kernels, faster; same equations, different rounding" in k.toolTip()
    assert w.config_from_form(validate=False).kernel == "reference"  # the default
    w.set_form_from_config(_tiny(kernel="fast"))
    assert k.currentData() == "fast" and w.config_from_form(validate=False).kernel == "fast"
    w.form.set_read_only(True)
    assert not k.isEnabled()
    w.form.set_read_only(False)
    assert k.isEnabled()


def test_the_kernel_is_restored_after_a_restart_and_an_odd_one_ignored(make_window, settings):
    w = make_window()
    w.set_form_from_config(_tiny(kernel="fast"))
    w.close()
    assert settings.value("form/kernel") == "fast"
    w2 = make_window()
    assert w2.restore_last_session()
    assert w2.config_from_form(validate=False).kernel == "fast"
    settings.setValue("form/kernel", "turbo")
    settings.sync()
    w3 = make_window()
    assert w3.restore_last_session()
    assert w3.config_from_form(validate=False).kernel == "reference"


def test_the_queue_panel_queues_the_form_s_kernel(make_window, workspace):
    w = make_window()
    w.set_form_from_config(_tiny(kernel="fast", max_train_samples=200))
    entry = w.queue_panel.add_current_form()
    assert entry is not None
    with RunQueue(workspace.root) as q:
        assert q.get(entry).config.kernel == "fast"


def _started(kernel_block=None, **cfg):
    setup = {"device": {"device": "cpu", "kernel": kernel_block}} if kernel_block is not None else {}
    return RunStarted(run_id="r", run_dir="/tmp/r", step="pa", config=_tiny(**cfg).to_dict(), device="cpu",
                      device_name="CPU", fast_path="off: CPU device", batched_loader="on", n_params=1,
                      n_train_frames=10, batches_per_epoch=1, epochs=1, dataset_summary={}, setup=setup)


def test_the_device_line_names_the_kernel_that_ran(make_window):
    w = make_window()
    shown = []
    original = w.banner.show_message
    w.banner.show_message = lambda kind, text, **kw: (shown.append((kind, text)), original(kind, text, **kw))
    w.runs._on_run_started(_started({"requested": "reference", "used": {"model": "reference"}, "ran": "reference",
                                "notes": []}))
    assert w.device_label.text() == "cpu · kernel reference" and shown == []
    assert "Kernel setting: reference" in w.device_label.toolTip() and "batched loader: on" in w.device_label.toolTip()
    w.runs._on_run_started(_started({"requested": "fast", "used": {"model": "fast"}, "ran": "fast", "notes": []},
                               kernel="fast"))
    assert w.device_label.text() == "cpu · kernel fast" and shown == []
    assert "Ran: model fast." in w.device_label.toolTip()
    w.runs._on_run_started(_started({"requested": "fast", "used": {"model": "reference"}, "ran": "reference",
                                "notes": [FELL_BACK]}, kernel="fast"))
    assert w.device_label.text() == "cpu · kernel fast → reference"
    assert f"Fell back: {FELL_BACK}" in w.device_label.toolTip()
    assert shown == [("info", f"Kernel fast fell back: {FELL_BACK}.")]


def test_a_start_event_without_a_kernel_block_reads_as_its_setting():
    k = kernel_of_start(_started(kernel="fast"))
    assert (k.requested, k.recorded, k.label, fallback_text(k)) == ("fast", False, "fast", None)
    k = kernel_of_start(_started({"requested": "fast", "used": {"dpd": "fast", "pa": "reference"}}, kernel="fast"))
    assert fallback_text(k) == "Kernel fast fell back: pa runs on the reference kernel (no reason recorded)."


def test_a_real_fast_run_on_the_stub_shows_the_fallback(make_window, qtbot, monkeypatch):
    install_stub(monkeypatch)
    # the stub is installed in this process (a child would run the real CPU kernel): the real trainer here
    w = make_window(trainer_factory=lambda cfg, observers=(), **kw: make_trainer(cfg, observers=list(observers), **kw))
    w.set_dataset(make_demo_dataset(n_train=3000, n_val=4096, n_test=4096), "demo")
    w.set_form_from_config(_tiny(kernel="fast"))
    shown = []
    original = w.banner.show_message
    w.banner.show_message = lambda kind, text, **kw: (shown.append((kind, text)), original(kind, text, **kw))
    with qtbot.waitSignal(w.runEnded, timeout=120_000) as blocker:
        assert w.start_run()
    assert blocker.args == ["succeeded"]
    assert w.device_label.text() == "cpu · kernel fast → reference"
    assert ("info", f"Kernel fast fell back: {FELL_BACK}.") in shown
    cfg = json.loads((Path(w.session.run_dir) / "config.json").read_text(encoding="utf-8"))
    assert cfg["device"]["kernel"]["notes"] == [FELL_BACK]


# ------------------------------------------------------------------------------------------------ runs browser
@pytest.fixture(scope="module")
def kernel_runs(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    root = tmp_path_factory.mktemp("ws")
    ws = Workspace(root)
    ds = make_demo_dataset(seed=2, n_train=3000, n_val=4096, n_test=4096)
    out = {"root": root, "reference": Trainer(_tiny(), dataset=ds, workspace=ws).run().run_dir}
    install_stub(mp)
    try:
        out["fast"] = Trainer(_tiny(kernel="fast", seed=5), dataset=ds, workspace=ws).run().run_dir
    finally:
        mp.undo()
    return out


@pytest.fixture
def browser_win(make_window, kernel_runs, qtbot):
    w = make_window(ws=Workspace(kernel_runs["root"]))
    with qtbot.waitSignal(w.runs_browser.rowsLoaded, timeout=20000):
        w.runs_browser.refresh()
    return w


def test_the_runs_browser_has_a_kernel_column_with_the_reason(browser_win, kernel_runs):
    b = browser_win.runs_browser
    col = [c[0] for c in COLUMNS].index("kernel")
    model = b.table.model()
    shown = {}
    for r in range(model.rowCount()):
        run_id = model.index(r, 0).data()
        shown[run_id] = (model.index(r, col).data(), model.index(r, col).data(Qt.ItemDataRole.ToolTipRole))
    fast, ref = kernel_runs["fast"].name, kernel_runs["reference"].name
    assert shown[fast][0] == "fast → reference" and f"kernel fell back: {FELL_BACK}" in shown[fast][1]
    assert shown[ref][0] == "reference" and "kernel fell back" not in shown[ref][1]


def test_new_run_from_these_settings_carries_the_kernel(browser_win, kernel_runs, qtbot):
    b = browser_win.runs_browser
    b.select_ids([kernel_runs["fast"].name])
    with qtbot.waitSignal(b.formFilled, timeout=20000):
        b.fill_form_from_selected()
    assert browser_win.form.kernel.currentData() == "fast"
    assert browser_win.config_from_form(validate=False).to_dict() == RunRecord.open(kernel_runs["fast"]).config.to_dict()


def test_a_reopened_run_names_its_kernel_and_why_it_fell_back(browser_win, kernel_runs, qtbot):
    b = browser_win.runs_browser
    b.select_ids([kernel_runs["fast"].name])
    with qtbot.waitSignal(b.runOpened, timeout=20000):
        b.open_selected()
    msg = browser_win.banner.message
    assert "(succeeded, kernel fast → reference) shown from its folder" in msg and f"Fell back: {FELL_BACK}." in msg
