"""The command line, ``dpd-desktop``: one module per command group; :mod:`.entry` parses and dispatches."""
from .entry import build_parser, execute, main, run

__all__ = ["build_parser", "execute", "main", "run"]
