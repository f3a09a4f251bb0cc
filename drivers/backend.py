"""The backend interface shared by real drives and the simulated turntable.

Lifecycle (each step paired with its inverse): ``open()``/``close()``, ``enable()``/``disable()``.
Per control tick: ``read()`` one :class:`Feedback` sample, then ``write(torque_nm)``.
``write`` is refused unless enabled. ``safe_stop()`` never raises. SI units at this interface;
drivers convert protocol units at their edge.
"""

from __future__ import annotations

from controller.compile_hints import mypyc_attr
import abc
import enum
import logging
import math
from typing import Final

from .errors import BackendError, EnableError, NotEnabledError
from controller.fastmath import isfinite

log = logging.getLogger(__name__)

NAN: Final = float("nan")


class DriveState(enum.IntEnum):
    """Backend-neutral drive state (protocol state machines map onto it)."""

    CLOSED = 0  # not opened
    DISABLED = 1  # open, power stage off
    ENABLING = 2  # transition in progress
    ENABLED = 3  # accepting torque commands
    FAULT = 4  # drive-side fault latched


class Feedback:
    """One feedback sample. NaN marks a quantity the drive does not report. Immutable by
    convention (nothing assigns a field after construction). A plain class with slots, not a
    NamedTuple: in the compiled build it is a native object whose fields the loop and the safety
    checks read directly (a NamedTuple field is a descriptor looked up on every read)."""

    __slots__ = ("t_s", "position_rad", "velocity_rad_s", "current_a", "torque_nm", "state",
                 "fault_code", "fault_text", "temperature_c", "sequence", "age_s")

    def __init__(self, t_s: float, position_rad: float, velocity_rad_s: float, current_a: float,
                 torque_nm: float, state: DriveState, fault_code: int = 0, fault_text: str = "",
                 temperature_c: float = NAN, sequence: int = 0, age_s: float = 0.0) -> None:
        self.t_s = t_s  # time of the sample on the loop's clock [s]
        self.position_rad = position_rad  # [rad]
        self.velocity_rad_s = velocity_rad_s  # drive's own estimate, NaN if not reported [rad/s]
        self.current_a = current_a  # measured motor current (q axis) [A]
        self.torque_nm = torque_nm  # drive's torque estimate, NaN if not available [N·m]
        self.state = state
        self.fault_code = fault_code  # protocol fault/error code, 0 = none
        self.fault_text = fault_text  # decoded fault text
        self.temperature_c = temperature_c  # [°C]
        self.sequence = sequence  # increments with each new sample from the drive; unchanged = stale
        self.age_s = age_s  # time since the drive produced this sample [s]

    def __repr__(self) -> str:
        return (f"Feedback(t_s={self.t_s!r}, position_rad={self.position_rad!r}, "
                f"velocity_rad_s={self.velocity_rad_s!r}, current_a={self.current_a!r}, "
                f"torque_nm={self.torque_nm!r}, state={self.state!r}, "
                f"fault_code={self.fault_code!r}, fault_text={self.fault_text!r}, "
                f"temperature_c={self.temperature_c!r}, sequence={self.sequence!r}, "
                f"age_s={self.age_s!r})")


ENABLE_TIMEOUT_S: Final = 1.0  # default bound of Backend.enable [s]


@mypyc_attr(allow_interpreted_subclasses=True)
class Clock(abc.ABC):
    """The loop's time source: monotonic seconds, and waiting for an absolute deadline."""

    @abc.abstractmethod
    def now(self) -> float: ...

    @abc.abstractmethod
    def sleep_until(self, t_s: float) -> None: ...

    @property
    def simulated(self) -> bool:
        return False


@mypyc_attr(allow_interpreted_subclasses=True)
class Backend(abc.ABC):
    """Abstract drive. Subclasses implement the ``_``-prefixed hooks; the public methods enforce
    the lifecycle (template method) so every backend behaves alike."""

    name: str = "abstract"

    def __init__(self) -> None:
        # a subclass names itself by a class attribute; where that is an interpreted class's
        # plain attribute, copy it, so the compiled base (which reads an instance slot) sees it
        named = getattr(type(self), "name", None)
        if isinstance(named, str):
            self.name = named
        self._opened = False
        self._enabled = False  # the drive (as far as we know) accepts torque
        self._writable = False  # write() is allowed: False from the first step of a disable
        self.payload_kg = 0.0  # operator-declared payload [kg] (a scheduling variable)

    def identity(self) -> dict[str, str]:
        """What the drive reported and what protects it against a dead loop (``summary.json``
        ``drive``): complete once the drive was opened and enabled. The base: the protocol."""
        return {"protocol": self.name}

    # --- lifecycle ---------------------------------------------------------------------------
    def open(self) -> None:
        if not self._opened:
            self._open()
            self._opened = True

    def close(self) -> None:
        """Disable (if enabled) and release the link. Safe to call twice."""
        if not self._opened:
            return
        self.safe_stop()
        try:
            self._close()
        finally:
            self._opened = False

    def enable(self, timeout_s: float | None = None) -> None:
        """Bring the drive to the state that accepts torque; return only once it does, or raise
        after ``timeout_s`` (None: :data:`ENABLE_TIMEOUT_S`). The default is None, not a float:
        mypyc passes a float default of a method wrongly to an interpreted subclass."""
        if not self._opened:
            raise BackendError(f"{self.name}: enable() before open()")
        if not self._enabled:
            self._enable(ENABLE_TIMEOUT_S if timeout_s is None else timeout_s)
            self._enabled = True
            self._writable = True

    def disable(self) -> None:
        """Power stage off. Writes are refused from here on even if the hook fails; ``enabled``
        stays True until the drive confirmed (a failed disable is never reported as done)."""
        self._writable = False
        if self._enabled:
            self._disable()
            self._enabled = False

    @property
    def is_open(self) -> bool:
        return self._opened

    @property
    def enabled(self) -> bool:
        return self._enabled

    # --- per tick ----------------------------------------------------------------------------
    def read(self) -> Feedback:
        if not self._opened:
            raise BackendError(f"{self.name}: read() before open()")
        return self._read()

    def write(self, torque_nm: float) -> None:
        if not self._writable:
            raise NotEnabledError(f"{self.name}: write({torque_nm!r}) refused: not enabled")
        if not isfinite(torque_nm):
            raise BackendError(f"{self.name}: write({torque_nm!r}) refused: not finite")
        self._write(torque_nm)

    def reset_fault(self) -> None:
        """Clear a latched drive fault. Only on an explicit operator/caller request."""
        if self._opened:
            self._reset_fault()

    def safe_stop(self) -> None:
        """Zero torque, then disable. Never raises (errors are logged); the disable runs even if
        the zero-torque write is interrupted. After a failed disable ``enabled`` stays True."""
        was_writable = self._writable
        self._writable = False
        try:
            if was_writable:
                try:
                    self._write(0.0)
                except Exception as err:  # noqa: BLE001 - a safe stop must not raise
                    log.error("%s: safe_stop: zero torque failed: %s", self.name, err)
        finally:
            if self._opened or self._enabled:
                try:
                    self._disable()
                    self._enabled = False
                except Exception as err:  # noqa: BLE001
                    log.error("%s: safe_stop: disable failed: %s", self.name, err)

    # --- context manager ---------------------------------------------------------------------
    def __enter__(self) -> "Backend":
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- hooks -------------------------------------------------------------------------------
    @abc.abstractmethod
    def _open(self) -> None: ...

    @abc.abstractmethod
    def _close(self) -> None: ...

    @abc.abstractmethod
    def _enable(self, timeout_s: float) -> None: ...

    @abc.abstractmethod
    def _disable(self) -> None: ...

    @abc.abstractmethod
    def _read(self) -> Feedback: ...

    @abc.abstractmethod
    def _write(self, torque_nm: float) -> None: ...

    def _reset_fault(self) -> None:
        """Protocol-specific fault reset; default: nothing to do."""

    # --- optional facts ----------------------------------------------------------------------
    def true_friction_nm(self) -> float:
        """The plant's true friction torque (simulation only); NaN on real drives."""
        return NAN

    def max_rate_hz(self) -> float:
        """The highest loop rate the link can hold [Hz]; inf when not link-limited."""
        return math.inf


def refuse_or_warn_unprotected(where: str, reason: str, allowed: bool, consequence: str) -> None:
    """At enable, for a drive whose own protection (watchdog, heartbeat consumer) could not be
    configured and confirmed: refuse (EnableError, one line) unless ``drive.allow_unprotected``,
    then a loud warning at every enable."""
    if not allowed:
        raise EnableError(f"{where}: {reason}: {consequence}; refused (fix the drive, or set "
                          f"drive.allow_unprotected: true to run without it)")
    log.warning("%s: UNPROTECTED: %s: %s (drive.allow_unprotected is true)", where, reason, consequence)
