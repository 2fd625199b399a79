"""The Sweep view's Ray bar: run or resume the shown sweep on a Ray cluster, and the trials' live rows from its events.

Ray never starts in the window's process: the bar gives the view a
:class:`~dpd_desktop.sweep.ray_helper.HelperExecutor`, which starts the helper process
(``python -m dpd_desktop.sweep.ray_helper``) for each batch of trials; the view's :class:`SweepWorker` thread reads
its events, and the view draws them (:class:`LiveTrials`). The address field takes ``local`` (a token-authenticated
cluster started on this machine for the sweep, dashboard on the loopback) or ``host:port`` / ``ray://host:port``
(the helper inherits this process's ``RAY_AUTH_MODE`` / ``RAY_AUTH_TOKEN`` / ``RAY_AUTH_TOKEN_PATH``). A remote
cluster without token authentication is refused by the helper (sweep/ray_security.py); the refusal is shown in red
under the bar. The override is a separate checkbox whose warning (the risk, in Ray's security page's words) shows
while it is ticked; it is never remembered. In the packaged app the bar is disabled with the reason
(ray_executor.IN_BUNDLE).
"""
from __future__ import annotations

import sys

from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QLineEdit, QVBoxLayout, QWidget

from ..runs.labels import epoch_of
from ..sweep.ray_executor import IN_BUNDLE, LOCAL_ADDRESS
from ..sweep.ray_helper import HelperExecutor
from ..sweep.ray_security import RISK

#: the view's metric columns (sweep/table.py TrialRow names) in a history row (history.csv column names)
LIVE_COLUMNS = {"val_nmse": "VAL_NMSE", "val_aclr_avg": "VAL_ACLR_AVG", "test_nmse": "TEST_NMSE",
                "test_aclr_avg": "TEST_ACLR_AVG", "n_params": "N_PARAM"}
ERROR_STYLE = "color: #c0392b;"
WARNING_STYLE = "color: #b9770e;"
INFO_STYLE = "color: #566573;"


class RayBar(QWidget):
    """The cluster controls (module docstring). ``executor(workspace, on_event)``: the executor of the next run, None
    when the "Ray cluster" box is off (the workspace's queue runs the trials)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        self.enabled_box = QCheckBox("Run on a Ray cluster:")
        self.enabled_box.setToolTip("Resume sends the trials to a Ray cluster through a helper process; their run "
                                    "folders come back into this workspace")
        self.address_edit = QLineEdit(LOCAL_ADDRESS)
        self.address_edit.setPlaceholderText("local, host:port or ray://host:port")
        self.address_edit.setToolTip("'local': a cluster started on this machine (token authentication, loopback "
                                     "dashboard). A remote cluster needs token authentication: RAY_AUTH_MODE=token "
                                     "and RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH in this program's environment")
        self.address_edit.setMaximumWidth(260)
        self.override_box = QCheckBox("Allow a cluster without token authentication (unsafe)")
        self.override_box.setToolTip(f"WARNING: {RISK}")
        row.addWidget(self.enabled_box)
        row.addWidget(self.address_edit)
        row.addWidget(self.override_box)
        row.addStretch(1)
        lay.addLayout(row)
        self.message = QLabel("")
        self.message.setWordWrap(True)
        self.message.hide()
        lay.addWidget(self.message)
        self.enabled_box.toggled.connect(self._sync)
        self.override_box.toggled.connect(self._sync)
        if getattr(sys, "frozen", False):
            self.enabled_box.setEnabled(False)
            self.enabled_box.setToolTip(IN_BUNDLE)
        self._sync()

    def _sync(self, *_):
        on = self.enabled_box.isChecked()
        self.address_edit.setEnabled(on)
        self.override_box.setEnabled(on)
        if on and self.override_box.isChecked():
            self.show_message(f"WARNING: token authentication is not required of the cluster: {RISK}. Use it only "
                              "on a network you trust.", WARNING_STYLE)
        elif self.message.styleSheet() == WARNING_STYLE and self.message.text().startswith("WARNING: token"):
            self.show_message("")

    def show_message(self, text: str, style: str = ERROR_STYLE) -> None:
        self.message.setText(text)
        self.message.setStyleSheet(style)
        self.message.setVisible(bool(text))

    def address(self) -> str | None:
        """The cluster's address when the box is on, else None."""
        text = self.address_edit.text().strip()
        return (text or LOCAL_ADDRESS) if self.enabled_box.isChecked() else None

    def executor(self, workspace, on_event) -> HelperExecutor | None:
        address = self.address()
        if address is None:
            return None
        return HelperExecutor(address, workspace, allow_unauthenticated=self.override_box.isChecked(),
                              on_event=on_event)


class LiveTrials:
    """The trials' progress from the helper's events: per trial number, its last epoch (``epoch``, ``epochs``) and
    the history row of its best epoch so far (the ``is_best`` one), until its run is imported."""

    def __init__(self):
        self.epochs: dict[int, tuple[int, int]] = {}
        self.best_rows: dict[int, dict] = {}

    def clear(self) -> None:
        self.epochs.clear()
        self.best_rows.clear()

    def add(self, ev: dict) -> bool:
        """Take one event; True when a trial's row changed."""
        n = ev.get("trial")
        if ev.get("event") != "epoch" or not isinstance(n, int):
            return False
        self.epochs[n] = (int(ev.get("epoch", 0)), int(ev.get("epochs", 0)))
        if ev.get("is_best") or n not in self.best_rows:
            self.best_rows[n] = dict(ev.get("row") or {})
        return True

    def state_text(self, number: int, state: str) -> str:
        """``running`` with its epoch: "running (epoch 3 of 0–19)" (runs/labels.py epoch_of)."""
        if state != "running" or number not in self.epochs:
            return state
        e, total = self.epochs[number]
        return f"running (epoch {epoch_of(e, total)})"

    def metric(self, number: int, name: str):
        """The live value of a view metric (None when none came)."""
        col = LIVE_COLUMNS.get(name)
        try:
            return float(self.best_rows.get(number, {})[col]) if col else None
        except (KeyError, TypeError, ValueError):
            return None
