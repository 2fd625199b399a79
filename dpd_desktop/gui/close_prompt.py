"""Closing or quitting while something runs asks first (UI.md: never lose work without asking).

:class:`CloseGuard` sits in :meth:`MainWindow.closeEvent`: when the session model says something is busy
(:meth:`~dpd_desktop.gui.session.Session.busy`: the live run, and whatever a queue panel adds), :func:`ask` shows
the question with three answers:

* **Stop and quit** — the run is cancelled after its current batch, the window waits for it (bounded, see
  ``MainWindow.shutdown``) and closes; the run folder reads ``cancelled`` and stays readable.
* **Quit when it finishes** — nothing is stopped; the window closes itself once nothing is busy any more.
* **Cancel** — nothing happens.

Ctrl+C in the terminal (gui/app.py) is an explicit stop: :meth:`CloseGuard.stop_and_close` closes without asking.
"""
from __future__ import annotations

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QGridLayout, QMessageBox, QSizePolicy, QSpacerItem, QWidget

STOP_AND_QUIT = "stop"
QUIT_WHEN_DONE = "wait"
CANCEL = "cancel"
TITLE = "Quit DPD Desktop?"
WAITING_MESSAGE = "DPD Desktop will close when the run has finished."
MIN_WIDTH = 520  # logical pixels of the question box


def question_text(busy: list[str]) -> str:
    """The dialog's main text for the busy items ``busy`` (Session.busy()), one per line."""
    return "Still running:\n" + "\n".join(f"• {item}" for item in busy)


INFORMATIVE = ("Stop and quit: the run stops after the current batch and is kept as cancelled, with its best "
               "checkpoint so far.\n\nQuit when it finishes: training goes on; the window closes itself at the "
               "end.")


def build_dialog(parent: QWidget | None, busy: list[str]) -> tuple[QMessageBox, dict]:
    """The question box and ``{button: answer}``; "Cancel" is the default and the Escape answer."""
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Question)
    box.setWindowTitle(TITLE)
    box.setText(question_text(busy))
    box.setInformativeText(INFORMATIVE)
    stop = box.addButton("Stop and quit", QMessageBox.ButtonRole.DestructiveRole)
    wait = box.addButton("Quit when it finishes", QMessageBox.ButtonRole.AcceptRole)
    cancel = box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(cancel)
    box.setEscapeButton(cancel)
    grid = box.layout()  # QMessageBox keeps itself narrow: a spacer row gives the run id one line
    if isinstance(grid, QGridLayout):
        grid.addItem(QSpacerItem(MIN_WIDTH, 0, QSizePolicy.Policy.Minimum, QSizePolicy.Policy.Expanding),
                     grid.rowCount(), 0, 1, grid.columnCount())
    return box, {stop: STOP_AND_QUIT, wait: QUIT_WHEN_DONE, cancel: CANCEL}


def ask(parent: QWidget | None, busy: list[str]) -> str:
    """Show the question (modal) and return STOP_AND_QUIT, QUIT_WHEN_DONE or CANCEL (tests replace this function)."""
    box, answers = build_dialog(parent, busy)
    box.exec()
    return answers.get(box.clickedButton(), CANCEL)


class CloseGuard:
    """Decides whether a close of ``window`` (a MainWindow: ``session``, ``runEnded``, ``statusBar()``) proceeds."""

    def __init__(self, window) -> None:
        self.window = window
        self.quit_when_done = False
        self._force = False
        window.runEnded.connect(self._on_run_ended)
        # after "Quit when it finishes": a look every half second too, for busy states that end without a runEnded
        # (a queue between entries)
        self._idle_timer = QTimer(window, interval=500)
        self._idle_timer.timeout.connect(self._close_when_idle)

    def allow(self, event) -> bool:
        """True: let the close go on (the window then stops what still runs). False: the event is ignored."""
        busy = self.window.session.busy()
        if self._force or not busy:
            return True
        answer = ask(self.window, busy)
        if answer == STOP_AND_QUIT:
            return True
        event.ignore()
        if answer == QUIT_WHEN_DONE:
            self.quit_when_done = True
            self.window.statusBar().showMessage(WAITING_MESSAGE)
            self._idle_timer.start()
        return False

    def stop_and_close(self) -> None:
        """Close without asking (Ctrl+C in the terminal: the user asked for a stop)."""
        self._force = True
        self.window.close()

    def _on_run_ended(self, _state: str) -> None:
        if self.quit_when_done:
            QTimer.singleShot(0, self._close_when_idle)  # after the run's own end handling has finished

    def _close_when_idle(self) -> None:
        if self.quit_when_done and not self.window.session.busy():
            self._idle_timer.stop()
            self.window.close()
