"""``python -m dpd_desktop`` → the command line (window by default)."""
from .cli import run

if __name__ == "__main__":
    run()
