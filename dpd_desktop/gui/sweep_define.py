"""The Sweep view's "New sweep…": the search space as a small table (parameter | values or range) over the Train
form's settings, the search (grid, random, Optuna) and its trial count; "Create and run" creates the sweep folder
on a pool job (sweep/runner.py ``create_sweep``, what ``dpd-desktop sweep`` does) and runs it in the view.

The table is read by the core (sweep/space_table.py ``spec_from_table`` → sweep/spec.py ``parse_spec``): an error
names the row's field and is shown under the table, the row marked; nothing is created until the spec is valid.
"""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QDialog, QDialogButtonBox, QFormLayout, QHBoxLayout,
                               QHeaderView, QLabel, QLineEdit, QPushButton, QSpinBox, QTableWidget, QTableWidgetItem,
                               QVBoxLayout)

from ..config import ConfigError
from ..sweep.runner import create_sweep
from ..sweep.space_table import SEARCHABLE_FIELDS, param_text, spec_from_table, trial_count
from ..sweep.spec import ALIASES, MAX_TRIALS, SweepSpecError
from .preload import preload_job
from .runs_jobs import start_job

#: The rows a new sweep starts with: (parameter, cell) — a size and a learning-rate choice.
DEFAULT_ROWS = (("hidden_size", "8, 16"), ("lr", "0.002, 0.005"))
SEARCH_LABELS = (("grid", "grid (every combination)"), ("random", "random"), ("optuna", "Optuna (TPE, pruning)"))
ERROR_STYLE = "color: #c62828;"
#: The row in error: a translucent amber that keeps the text readable on light and dark palettes.
MARK = QColor(255, 176, 0, 110)


class SweepDefineDialog(QDialog):
    """The definition dialog (module docstring). ``created(SweepInfo)`` once the sweep folder exists."""

    created = Signal(object)

    def __init__(self, window, rows=None, parent=None):
        super().__init__(parent or window)
        self.window_ = window
        self.setWindowTitle("New sweep")
        self.spec = None
        self._waiting = False
        lay = QVBoxLayout(self)
        form = QFormLayout()
        self.name_edit = QLineEdit("sweep")
        self.name_edit.setToolTip("The sweep folder's label")
        self.search_combo = QComboBox()
        for value, label in SEARCH_LABELS:
            self.search_combo.addItem(label, value)
        self.trials_spin = QSpinBox()
        self.trials_spin.setRange(1, MAX_TRIALS)
        self.trials_spin.setValue(8)
        self.trials_spin.setToolTip("Random and Optuna searches: how many trials")
        self.seed_spin = QSpinBox()
        self.seed_spin.setRange(0, 2**31 - 1)
        self.seed_spin.setToolTip("The search's own seed (random draws, Optuna's sampler), not the runs' seed")
        form.addRow("Name", self.name_edit)
        form.addRow("Search", self.search_combo)
        form.addRow("Trials", self.trials_spin)
        form.addRow("Search seed", self.seed_spin)
        lay.addLayout(form)

        self.table = QTableWidget(0, 2)
        self.table.setHorizontalHeaderLabels(["parameter", "values or range"])
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.table.verticalHeader().setVisible(False)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setToolTip("One row per searched field: a list of values (4, 8, 16) or a range "
                              "(1e-4 .. 1e-2, add log for log-uniform; random and Optuna only)")
        lay.addWidget(self.table, 1)
        rows_bar = QHBoxLayout()
        self.add_button = QPushButton("Add row")
        self.remove_button = QPushButton("Remove row")
        rows_bar.addWidget(self.add_button)
        rows_bar.addWidget(self.remove_button)
        rows_bar.addStretch(1)
        self.count_label = QLabel("")
        rows_bar.addWidget(self.count_label)
        lay.addLayout(rows_bar)
        self.base_label = QLabel("")
        self.base_label.setWordWrap(True)
        self.base_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.base_label)
        self.error_label = QLabel("")
        self.error_label.setWordWrap(True)
        self.error_label.setStyleSheet(ERROR_STYLE)
        self.error_label.setVisible(False)
        lay.addWidget(self.error_label)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.run_button = self.buttons.addButton("Create and run", QDialogButtonBox.ButtonRole.AcceptRole)
        lay.addWidget(self.buttons)

        for key, text in (rows if rows is not None else DEFAULT_ROWS):
            self.add_row(key, text)
        self.add_button.clicked.connect(lambda: self.add_row())
        self.remove_button.clicked.connect(self.remove_row)
        self.buttons.rejected.connect(self.reject)
        self.run_button.clicked.connect(self.create_and_run)
        self.search_combo.currentIndexChanged.connect(lambda *_: self.check())
        self.seed_spin.valueChanged.connect(lambda *_: self.check())
        self.name_edit.textChanged.connect(lambda *_: self.check())
        self.trials_spin.valueChanged.connect(lambda *_: self.check())
        self.table.itemChanged.connect(lambda *_: self.check())
        self.resize(560, 460)
        self.check()

    # -------------------------------------------------------------------------------------------- the table
    def add_row(self, key: str = "", text: str = "") -> int:
        r = self.table.rowCount()
        self.table.insertRow(r)
        combo = QComboBox()
        combo.setEditable(True)
        combo.addItems(SEARCHABLE_FIELDS)
        combo.setCurrentText(key)
        combo.currentTextChanged.connect(lambda *_: self.check())
        self.table.setCellWidget(r, 0, combo)
        self.table.setItem(r, 1, QTableWidgetItem(text))
        return r

    def remove_row(self) -> None:
        rows = sorted({i.row() for i in self.table.selectedIndexes()}, reverse=True) or [self.table.rowCount() - 1]
        for r in rows:
            if r >= 0:
                self.table.removeRow(r)
        self.check()

    def rows(self) -> list[tuple[str, str]]:
        out = []
        for r in range(self.table.rowCount()):
            combo = self.table.cellWidget(r, 0)
            item = self.table.item(r, 1)
            out.append((combo.currentText().strip() if combo else "", item.text() if item else ""))
        return out

    def set_row(self, r: int, key: str, text: str) -> None:
        self.table.cellWidget(r, 0).setCurrentText(key)
        self.table.item(r, 1).setText(text)

    # -------------------------------------------------------------------------------------------- checking
    def base_config(self):
        """The Train form's configuration (ConfigError when the form is not valid)."""
        return self.window_.config_from_form()

    def check(self):
        """Read the table into a spec (shown: the trial count, or the error under the table); the spec or None."""
        search = self.search_combo.currentData()
        self.trials_spin.setEnabled(search != "grid")
        self.seed_spin.setEnabled(search != "grid")
        self.spec = None
        self._paint_rows(None)
        job = preload_job()
        if job is not None and not job.is_done():
            # the check validates every value (ExperimentConfig.validate imports the model registry, i.e. PyTorch):
            # not on the GUI thread while the preload imports it (gui/run_control.py validate_config)
            self._error("Checking the table once PyTorch has loaded…")
            if not self._waiting:
                self._waiting = True
                self.window_.coreLoaded.connect(self._core_loaded)
            return None
        try:
            base = self.base_config()
        except ConfigError as exc:
            self._error(f"The Train form's settings are not valid: {exc}")
            return None
        self.base_label.setText(f"Each trial: the Train form's settings ({describe_base(base)}) with the table's "
                                "values.")
        try:
            spec = spec_from_table(self.rows(), base, search=search,
                                   trials=self.trials_spin.value() if search != "grid" else None,
                                   seed=self.seed_spin.value(), name=self.name_edit.text().strip() or "sweep")
        except SweepSpecError as exc:
            self._mark(exc.key)
            self._error(str(exc).split(": ", 1)[-1])
            return None
        self.spec = spec
        n = trial_count(spec)
        self.count_label.setText(f"{n} trial{'' if n == 1 else 's'}")
        self.error_label.setVisible(False)
        self.run_button.setEnabled(True)
        return spec

    def _core_loaded(self) -> None:
        self._waiting = False
        self.window_.coreLoaded.disconnect(self._core_loaded)
        self.check()

    def _paint_rows(self, field: str | None) -> None:
        """Mark the rows of ``field`` (None: none); the table's signals are blocked meanwhile (a repaint of an item
        is an itemChanged, which would check again)."""
        self.table.blockSignals(True)
        try:
            for r, (k, _) in enumerate(self.rows()):
                item = self.table.item(r, 1)
                if item is not None:
                    hit = field is not None and ALIASES.get(k, k) == field
                    item.setBackground(MARK if hit else Qt.GlobalColor.transparent)
        finally:
            self.table.blockSignals(False)

    def _error(self, text: str) -> None:
        self.error_label.setText(text)
        self.error_label.setVisible(True)
        self.count_label.setText("")
        self.run_button.setEnabled(False)

    def _mark(self, key: str) -> None:
        """Mark the row of ``space.<field>`` in the error."""
        if key.startswith("space.") and "." in key:
            self._paint_rows(key.split(".")[1])

    # -------------------------------------------------------------------------------------------- create
    def create_and_run(self) -> bool:
        """Create the sweep on a pool job; ``created`` and the dialog closes when it exists. False when the table
        is not valid."""
        spec = self.check()
        ws = self.window_.workspace
        if spec is None or ws is None:
            return False
        self.run_button.setEnabled(False)
        start_job(self.window_, "create sweep", create_sweep, ws, spec, done=self._created, failed=self._failed)
        return True

    def _created(self, info) -> None:
        self.created.emit(info)
        self.accept()

    def _failed(self, exc, tb) -> None:
        self._error(f"The sweep was not created: {exc}")


def describe_base(cfg) -> str:
    """A short description of a configuration: family and size, step, dataset, epochs, device."""
    size = (f"K{cfg.poly_order} M{cfg.memory_depth}" if str(cfg.backbone) in ("mp", "gmp")
            else f"H {cfg.hidden_size}")
    return (f"{str(cfg.backbone).upper()} {size}, {cfg.step.upper()}, dataset {cfg.dataset or 'demo'}, "
            f"{cfg.epochs} epoch{'' if cfg.epochs == 1 else 's'}, {cfg.device}")


def rows_of(spec) -> list[tuple[str, str]]:
    """A spec's search space as table rows (to start a new sweep from a shown one)."""
    return [(p.key, param_text(p)) for p in spec.space]
