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


def bytecode_cache() -> str | None:
    """Keep compiled bytecode of what we import in our own cache folder when Python is told not to write it.

    With ``PYTHONDONTWRITEBYTECODE=1`` (or ``python -B``), common in container images, and a PyTorch installed
    without ``.pyc`` files, every start compiles PyTorch's Python sources again: ``import torch`` took 3.2–5.0 s on
    the GPU machine against 1.95–2.5 s with a bytecode cache (benchmarks/results/2026-11-30-gpu-epoch0.md). In that
    case only, this points :data:`sys.pycache_prefix` (Python ≥ 3.8, the mechanism of ``PYTHONPYCACHEPREFIX``) at
    ``platformdirs.user_cache_dir("dpd-desktop")/pycache`` and lets Python write there, so nothing is written next
    to any source file and the first start fills the cache (~25 MB). Off when the user set a prefix already, when
    ``DPD_DESKTOP_NO_BYTECODE_CACHE=1``, or without platformdirs. An unwritable folder only means no caching
    (Python ignores failed bytecode writes; its writes are atomic, so concurrent starts are safe).

    Returns the prefix in use, or None.
    """
    import os
    import sys

    if not sys.dont_write_bytecode or sys.pycache_prefix or os.environ.get("DPD_DESKTOP_NO_BYTECODE_CACHE"):
        return None
    try:
        from platformdirs import user_cache_dir
    except ImportError:
        return None
    sys.pycache_prefix = os.path.join(user_cache_dir("dpd-desktop", appauthor=False), "pycache")
    sys.dont_write_bytecode = False
    return sys.pycache_prefix


def _raised_loading_bytecode(exc: BaseException) -> bool:
    """Whether ``exc`` came from unmarshalling a compiled module (a damaged ``.pyc``: truncated or overwritten)."""
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "_compile_bytecode" and "importlib._bootstrap_external" in code.co_filename:
            return True
        tb = tb.tb_next
    return False


def run() -> None:
    """Import the command line and run it (never returns).

    A damaged file in our bytecode cache (:func:`bytecode_cache`; Python writes them atomically, so only outside
    damage does this) would stop the start with an ``EOFError``/``ValueError`` from ``marshal``: the cache is then
    cleared, one line says so, and the exit status is 2; the next start compiles afresh."""
    prefix = bytecode_cache()
    try:
        from .cli import run as cli_run

        cli_run(early_sigints=_EARLY)
    except (EOFError, ValueError, TypeError) as exc:
        if prefix is None or not _raised_loading_bytecode(exc):
            raise
        import shutil
        import sys

        shutil.rmtree(prefix, ignore_errors=True)
        sys.stderr.write(f"error: a damaged file in the bytecode cache {prefix} stopped the start ({exc}); the cache "
                         "was cleared: run the command again\n")
        raise SystemExit(2) from None
