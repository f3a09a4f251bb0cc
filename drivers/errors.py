"""The project's exception tree. Vendor and bus errors are translated ``from`` the original."""

from __future__ import annotations


class FrictionctlError(Exception):
    """Base of every error this project raises on purpose."""


class BackendError(FrictionctlError):
    """A backend (drive or simulation) could not do what was asked."""


class NotEnabledError(BackendError):
    """A torque command was written while the backend is not enabled."""


class EnableError(BackendError):
    """The drive did not reach a state that accepts torque commands."""


class DriveFaultError(BackendError):
    """The drive reports a fault (code and decoded text in the message)."""

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code


class CommunicationError(BackendError):
    """The link to the drive failed: timeout, bus error, port closed."""


class ProtocolError(BackendError):
    """A frame or reply that does not decode; the message names frame id or byte offset."""


class MissingDependencyError(BackendError):
    """An optional package needed by the chosen backend is not installed."""
