"""DPD Desktop: neural PA behavioral modeling and digital predistortion for measured I/Q data."""
__version__ = "0.1.0"
