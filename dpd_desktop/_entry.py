"""Process entry point of ``dpd-desktop`` and ``python -m dpd_desktop``.

Importing this tiny module installs a provisional Ctrl+C handler at once (through the C module ``_signal``: the
``signal`` module's enums cost milliseconds), which only counts SIGINTs while the command line module (argparse,
threading, …) imports; :func:`dpd_desktop.cli.run` then replays them through its cooperative handler (first: cancel,
second: abort). So a Ctrl+C is a plain cancel (exit status 3) from the first statement of our code on; only the
Python interpreter's own start-up (~20 ms: site, .pth files) comes before it and keeps Python's default behavior.
"""
import _signal

_EARLY: list = []


def _count_sigint(signum, frame) -> None:
    _EARLY.append(signum)


try:
    _signal.signal(_signal.SIGINT, _count_sigint)
except (ValueError, OSError):  # imported outside the main thread: nothing to guard
    pass


def run() -> None:
    """Import the command line and run it (never returns)."""
    from .cli import run as cli_run

    cli_run(early_sigints=_EARLY)
