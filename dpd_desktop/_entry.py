"""Process entry point of ``dpd-desktop`` and ``python -m dpd_desktop``.

Importing this tiny module installs a provisional Ctrl+C handler at once (through the C module ``_signal``: the
``signal`` module's enums cost milliseconds), which only counts SIGINTs while the command line module (argparse,
threading, …) imports; :func:`dpd_desktop.cli.run` then replays them through its cooperative handler (first: cancel,
second: abort). So a Ctrl+C is a plain cancel (exit status 3) from the first statement of our code on; only the
Python interpreter's own start-up (~20 ms: site, .pth files) comes before it and keeps Python's default behavior.

:func:`run` then turns on our own bytecode cache where Python may not write bytecode (:func:`bytecode_cache`).
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
    to any source file and the first start fills the cache (~30 MB). Off when the user set a prefix already, when
    ``DPD_DESKTOP_NO_BYTECODE_CACHE`` is set (to anything but ``0`` or empty), or without platformdirs. An
    unwritable folder only means no caching (Python ignores failed bytecode writes; its writes are atomic, so
    concurrent starts are safe). A cache file damaged from outside is compiled again from its source and removed
    (so the next start rewrites it), wherever the import happens (:func:`_recompile_damaged_cache_files`).

    Returns the prefix in use, or None.
    """
    import os
    import sys

    if not sys.dont_write_bytecode or sys.pycache_prefix or \
            os.environ.get("DPD_DESKTOP_NO_BYTECODE_CACHE", "0") not in ("", "0"):
        return None
    try:
        from platformdirs import user_cache_dir
    except ImportError:
        return None
    sys.pycache_prefix = os.path.join(user_cache_dir("dpd-desktop", appauthor=False), "pycache")
    sys.dont_write_bytecode = False
    _recompile_damaged_cache_files(sys.pycache_prefix)
    return sys.pycache_prefix


def _recompile_damaged_cache_files(prefix: str) -> None:
    """Make a damaged ``.pyc`` under ``prefix`` harmless: CPython's source loader validates a cached file's header
    but not its body, so a body cut short or overwritten would make that import fail with ``EOFError`` or
    ``ValueError`` from ``marshal`` in every later process. This wraps the loader's unmarshalling step
    (``_frozen_importlib_external._compile_bytecode``, looked up by ``SourceLoader.get_code`` at each call, CPython
    3.8–3.13): for a file under ``prefix`` with a source, such an error instead removes the file and compiles the
    source. Anything else is untouched; where the hook is missing, nothing is wrapped."""
    import os

    try:
        import _frozen_importlib_external as loader_module

        unmarshal = loader_module._compile_bytecode
    except (ImportError, AttributeError):
        return
    root = os.path.join(prefix, "")

    def compile_bytecode(data, name=None, bytecode_path=None, source_path=None):
        try:
            return unmarshal(data, name=name, bytecode_path=bytecode_path, source_path=source_path)
        except (EOFError, ValueError, TypeError, ImportError):
            if not (bytecode_path and source_path and str(bytecode_path).startswith(root)):
                raise
        try:
            os.unlink(bytecode_path)
        except OSError:
            pass
        with open(source_path, "rb") as fh:
            return compile(fh.read(), source_path, "exec", dont_inherit=True)

    loader_module._compile_bytecode = compile_bytecode


def run() -> None:
    """Import the command line and run it (never returns)."""
    bytecode_cache()
    from .cli import run as cli_run

    cli_run(early_sigints=_EARLY)
