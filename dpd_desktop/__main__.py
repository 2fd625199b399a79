"""``python -m dpd_desktop`` → the command line (window by default)."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
