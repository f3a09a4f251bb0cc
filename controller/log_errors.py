"""The run log's errors (a module of their own: the compiled ring and the interpreted writer and
reader raise them alike; never compiled)."""

from __future__ import annotations

from drivers.errors import FrictionctlError


class RunLogError(FrictionctlError):
    """Base of the run-log errors."""


class LogOverflowError(RunLogError):
    """The ring buffer is full: the writer thread fell behind. The row was not logged."""


class LogWriteError(RunLogError):
    """The writer thread failed (the cause is chained), or the log is closed."""


class LogFormatError(RunLogError):
    """A file that is not a readable run log; the message names the path and byte offset."""
