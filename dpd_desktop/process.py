"""Process concerns of both faces (command line and window): exit statuses, display detection, Ctrl+C.

Ctrl+C (SIGINT) while :data:`CTRL_C` is installed: the first runs the action the face registered (the command line:
stop the run after the current batch; the window: close as its close button does) and says so on stderr; the second
aborts at once with exit status 130, even during one long C call (a big batch inside PyTorch), when Python's handler
cannot run: a watchdog thread counts the raw arrivals, which the C-level handler writes to the socket given to
:func:`signal.set_wakeup_fd`. SIGTERM (``kill PID``, a service manager) is handled as a Ctrl+C.
"""
from __future__ import annotations

import enum
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping


class Exit(enum.IntEnum):
    """Exit statuses of ``dpd-desktop`` (documented in :mod:`dpd_desktop.cli.entry` and the README)."""

    OK = 0  #: success
    FAILED = 1  #: the run failed (its run folder records why)
    USAGE = 2  #: bad arguments, or unusable input found before a run starts (incl. no display for the window)
    CANCELLED = 3  #: cancelled by Ctrl+C; the run stops after the current batch and stays readable
    ABORTED = 130  #: aborted by a second Ctrl+C (128 + SIGINT, the shell's convention)


# ---------------------------------------------------------------------------------------------------- display
class Display(enum.Enum):
    """Where a window would appear (:func:`detect_display`)."""

    SCREEN = "screen"  #: a screen: Windows, macOS, or X11/Wayland with $DISPLAY / $WAYLAND_DISPLAY
    CHOSEN = "chosen"  #: no screen known, but QT_QPA_PLATFORM names a Qt platform (offscreen for tests, vnc, …)
    NONE = "none"  #: neither: a window would open on no screen and block forever


NO_DISPLAY_MESSAGE = ("no display found: the window cannot open here; use `dpd-desktop demo --headless` or "
                      "`dpd-desktop train-pa --dataset ...`")


def detect_display(environ: Mapping[str, str] | None = None, platform: str | None = None) -> Display:
    """Classify the display of this process (``environ``: default ``os.environ``; ``platform``: ``sys.platform``).
    QT_QPA_PLATFORM=offscreen is never a screen, even with $DISPLAY set; any other QT_QPA_PLATFORM is respected."""
    env = os.environ if environ is None else environ
    plat = sys.platform if platform is None else platform
    chosen = env.get("QT_QPA_PLATFORM")
    if chosen == "offscreen":
        return Display.CHOSEN
    if plat in ("win32", "darwin") or env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"):
        return Display.SCREEN
    return Display.CHOSEN if chosen else Display.NONE


# ---------------------------------------------------------------------------------------------------- Ctrl+C
CANCELLING = "cancelling (Ctrl+C again to abort)…"
ABORT_MESSAGE = "aborted (second Ctrl+C)"


def say(text: str) -> None:
    """Write one line to stderr; safe in a signal handler (os.write: no reentrant call into a buffered stream)."""
    try:
        os.write(2, (text + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


class CtrlC:
    """The process's Ctrl+C handling; use the one instance, :data:`CTRL_C` (a signal handler is per process).
    ``pressed`` is set by the first Ctrl+C whatever the action, so that a face can honour one that came before it
    registered its action."""

    def __init__(self) -> None:
        self.pressed = threading.Event()
        self._handled = 0  # Ctrl+Cs seen by the Python-level handler
        self._arrived = 0  # Ctrl+Cs counted by the watchdog (may run ahead of _handled during a long C call)
        self._action: Callable[[], object] | None = None
        self._message = CANCELLING
        self._previous = None
        self._previous_term = None
        self._installed = False
        self._writer: socket.socket | None = None
        self._aborting = threading.Lock()

    @property
    def installed(self) -> bool:
        return self._installed

    def install(self, action: Callable[[], object] | None = None, message: str = CANCELLING) -> bool:
        """Handle SIGINT from now on (first: ``action`` and ``message``; second: :meth:`abort`), counting afresh.

        Returns False, changing nothing, outside the main thread (Python allows signal handlers only there).
        """
        if self._installed:
            self.uninstall()
        try:
            previous = signal.signal(signal.SIGINT, self._handle)
        except (ValueError, OSError):
            return False
        try:  # a SIGTERM is a Ctrl+C (module docstring)
            self._previous_term = signal.signal(signal.SIGTERM, self._handle)
        except (ValueError, OSError, AttributeError):
            self._previous_term = None
        self.pressed.clear()
        self._handled = self._arrived = 0
        self._action, self._message = action, message
        self._previous, self._installed = previous, True
        self._start_watchdog()
        return True

    def on_first(self, action: Callable[[], object] | None, message: str = CANCELLING) -> None:
        """Make ``action`` the first Ctrl+C's action (None: only ``pressed`` is set); when the first Ctrl+C has
        already come, ``action`` runs now."""
        self._action, self._message = action, message
        if action is not None and self.pressed.is_set():
            action()

    def uninstall(self) -> None:
        """Give SIGINT back to the handler found at :meth:`install` and stop the watchdog (no-op when not
        installed)."""
        if not self._installed:
            return
        self._installed, self._action = False, None
        try:
            signal.signal(signal.SIGINT, self._previous or signal.default_int_handler)
        except (ValueError, OSError, TypeError):
            pass
        try:
            signal.signal(signal.SIGTERM, self._previous_term or signal.SIG_DFL)
        except (ValueError, OSError, TypeError, AttributeError):
            pass
        if self._writer is not None:
            try:
                signal.set_wakeup_fd(-1)
            except (ValueError, OSError):
                pass
            self._writer.close()  # the watchdog reads end-of-file and ends
            self._writer = None

    def abort(self) -> None:
        """Say so on stderr and end the process at once with :attr:`Exit.ABORTED` (no clean-up runs). The
        Python-level handler and the watchdog may both get here for one second Ctrl+C: only the first says it."""
        if self._aborting.acquire(blocking=False):
            say("\n" + ABORT_MESSAGE)
            os._exit(Exit.ABORTED)
        while True:  # the other thread is ending the process
            time.sleep(1)

    def _handle(self, signum, frame) -> None:  # SIGINT or SIGTERM
        self._handled += 1
        if self._handled >= 2 or self._arrived >= 2:
            self.abort()
        self.pressed.set()
        say("\n" + self._message)
        if self._action is not None:
            self._action()

    def _start_watchdog(self) -> None:
        """Count SIGINTs as they arrive (the C-level handler writes the signal number, one byte per signal, to the
        wakeup socket) on a daemon thread, and abort on the second even while the main thread cannot run the
        Python-level handler."""
        try:
            reader, writer = socket.socketpair()
            writer.setblocking(False)
            signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        except (ValueError, OSError):
            return
        self._writer = writer
        threading.Thread(target=self._watch, args=(reader,), name="dpd-ctrl-c", daemon=True).start()

    def _watch(self, reader: socket.socket) -> None:
        with reader:
            try:
                while data := reader.recv(64):
                    self._arrived += data.count(int(signal.SIGINT))
                    if self._arrived >= 2 and self._installed:
                        self.abort()
            except OSError:
                return


#: The one Ctrl+C handler of this process.
CTRL_C = CtrlC()


# ---------------------------------------------------------------------------------------------------- stdout
class QuietPipe:
    """Standard output that ends quietly when its reader goes (``dpd-desktop train-pa … | head``): the first write
    or flush that meets a closed pipe points the stream's descriptor at the null device, and every write from then
    on, on every thread, is dropped without a traceback; the command goes on (the run still ends and is recorded).
    Everything else is the wrapped stream's (``isatty``, ``fileno``, ``encoding``…)."""

    def __init__(self, stream):
        self._stream = stream
        self.closed_by_reader = False

    def _gone(self) -> None:
        if not self.closed_by_reader:
            self.closed_by_reader = True
            try:
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, self._stream.fileno())  # the buffered text then goes nowhere, without a second error
                os.close(null)
            except (OSError, ValueError):
                pass

    def write(self, text: str) -> int:
        if self.closed_by_reader:
            return len(text)
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._gone()
            return len(text)

    def flush(self) -> None:
        if self.closed_by_reader:
            try:
                self._stream.flush()
            except OSError:
                pass
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._gone()

    def __getattr__(self, name):
        return getattr(self._stream, name)


def quiet_broken_pipe() -> None:
    """Wrap ``sys.stdout`` in :class:`QuietPipe` (once; the process entry point calls it)."""
    if sys.stdout is not None and not isinstance(sys.stdout, QuietPipe):
        sys.stdout = QuietPipe(sys.stdout)
