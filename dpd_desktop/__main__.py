"""``python -m dpd_desktop`` → the command line (window by default): :func:`dpd_desktop.cli.entry.run`."""
from .cli.entry import run

if __name__ == "__main__":
    run()
