"""The trainer's exceptions (a module of their own: the device, PA-loading and trainer modules all raise them)."""


class TrainingError(RuntimeError):
    """A run cannot start or continue; the message names the file, field or setting in plain words."""


class Cancelled(Exception):
    """Raised inside the trainer when a cancel was requested; turned into a RunCancelled event."""
