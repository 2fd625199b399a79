"""``python -m dpd_desktop`` → the command line (window by default)."""
from ._entry import run  # first: installs the provisional Ctrl+C handler

if __name__ == "__main__":
    run()
