"""The safety layer: per-tick checks before anything is sent, latched faults, overrun policy.

Checks and the tick on which each trips (k = the first offending tick):

| fault | condition | trips |
|---|---|---|
| NON_FINITE | position, current, velocity estimate, reference or command not finite | k |
| DRIVE_FAULT | the drive reports FAULT state or a non-zero fault code | k |
| STALE_FEEDBACK | the feedback sequence number did not advance | k + stale_ticks − 1 |
| STALE_FEEDBACK | no sample received at all (the drivers' ``age_s`` = inf: its values are NaN) | k |
| VELOCITY_LIMIT | \\|v\\| > velocity_limit_rad_s | k |
| FOLLOWING_ERROR | \\|e\\| > floor + per_speed·\\|v_ref\\| | k |
| STANDSTILL | reference at rest for standstill_after_s and \\|e\\| > window | k |
| TORQUE_LIMIT | measured Kt·\\|i\\| > 1.25·torque_limit_nm (the command itself is clamped) | k + 2 |
| TEMPERATURE | drive temperature > max_temperature_c | k |
| OVERRUN | max_consecutive overruns in a row, or max_per_second within 1 s | at the limit |
| COMMUNICATION, LOG_OVERFLOW, ESTIMATOR | raised by the backend / log writer / estimator | k |
| STOP_REQUESTED | SIGINT/SIGTERM or the caller asked to stop | k |
| INTERNAL | an unexpected exception escaped the tick (a bug): safe stop at once | k |

A fault latches: only :meth:`SafetyMonitor.reset` clears it (an explicit operator action).
"""

from __future__ import annotations

import enum
import math
from collections import deque
from typing import Final

from drivers.backend import DriveState, Feedback

from .config import OverrunPolicy, SafetyConfig
from .fastmath import isfinite

TORQUE_FAULT_FACTOR: Final = 1.25  # measured torque above this × limit: the drive does not obey
TORQUE_FAULT_TICKS: Final = 3


class FaultKind(enum.IntEnum):
    NONE = 0
    NON_FINITE = 1
    DRIVE_FAULT = 2
    STALE_FEEDBACK = 3
    VELOCITY_LIMIT = 4
    FOLLOWING_ERROR = 5
    STANDSTILL = 6
    TORQUE_LIMIT = 7
    TEMPERATURE = 8
    OVERRUN = 9
    COMMUNICATION = 10
    LOG_OVERFLOW = 11
    ESTIMATOR = 12
    STOP_REQUESTED = 13
    INTERNAL = 14  # an unexpected exception escaped the tick


# module constants: the compiled build loads them directly (an enum member is otherwise looked
# up on its class on every use)
_NONE: Final = FaultKind.NONE
_DRIVE_FAULT: Final = DriveState.FAULT
INF: Final = math.inf


class SafetyMonitor:
    """Per-tick checks. ``check`` returns the latched fault (NONE while healthy)."""

    def __init__(self, cfg: SafetyConfig, overrun: OverrunPolicy, dt_s: float, Kt: float,
                 units: tuple[str, str, str] = ("rad", "rad/s", "N·m")) -> None:
        self.cfg = cfg
        # the limits read on every tick, held as plain floats (the config is frozen): in the
        # compiled build an attribute of the interpreted config dataclass is a dictionary lookup
        self._velocity_limit = cfg.velocity_limit_rad_s
        self._error_floor = cfg.following_error_floor_rad
        self._error_per_speed = cfg.following_error_per_speed_s
        self._standstill_after = cfg.standstill_after_s
        self._standstill_window = cfg.standstill_window_rad
        self._torque_limit = cfg.torque_limit_nm
        self._max_temperature = cfg.max_temperature_c
        self._stale_ticks = cfg.stale_ticks
        self.policy = overrun
        self.dt_s = dt_s
        self.Kt = Kt
        # (length, speed, force) names for the fault messages: rotary, or m, m/s, N
        self.length_unit, self.speed_unit, self.force_unit = units
        self.fault = FaultKind.NONE
        self.message = ""
        self.fault_t_s = math.nan
        self.overruns = 0
        self.warnings: list[str] = []
        self._last_seq: int | None = None
        self._stale = 0
        self._torque_high = 0
        self._rest_since = math.nan
        self._consecutive_overruns = 0
        self._overrun_times: deque[float] = deque()

    @property
    def faulted(self) -> bool:
        return self.fault is not _NONE

    def trip(self, kind: FaultKind, message: str, t_s: float = math.nan) -> FaultKind:
        """Latch a fault (the first one wins: it is the cause, later ones are consequences)."""
        if self.fault is _NONE:
            self.fault = kind
            self.message = message
            self.fault_t_s = t_s
        return self.fault

    def reset(self) -> None:
        """Explicit reset: clear the latch and the counters."""
        self.fault = FaultKind.NONE
        self.message = ""
        self.fault_t_s = math.nan
        self._last_seq = None
        self._stale = 0
        self._torque_high = 0
        self._rest_since = math.nan
        self._consecutive_overruns = 0
        self._overrun_times.clear()

    def clamp(self, torque_nm: float) -> float:
        lim = self._torque_limit
        return lim if torque_nm > lim else (-lim if torque_nm < -lim else torque_nm)

    def check(self, t_s: float, fb: Feedback, pos: float, vel: float, pos_ref: float,
              vel_ref: float, torque_cmd: float) -> FaultKind:
        """All per-tick checks, in order of cause. Call before the command is sent.
        ``pos`` is the position in the reference's frame, ``vel`` the velocity estimate."""
        if self.fault is not _NONE:
            return self.fault
        cur = fb.current_a
        if fb.age_s == INF:  # the drivers' mark for "no sample yet": name it, not its NaNs
            return self.trip(FaultKind.STALE_FEEDBACK,
                             "no feedback sample received from the drive yet", t_s)
        if not (isfinite(pos) and isfinite(cur) and isfinite(vel)
                and isfinite(pos_ref) and isfinite(vel_ref) and isfinite(torque_cmd)):
            bad = [name for name, x in (("position", pos), ("current", cur), ("velocity", vel),
                                        ("position reference", pos_ref), ("velocity reference", vel_ref),
                                        ("torque command", torque_cmd)) if not isfinite(x)]
            return self.trip(FaultKind.NON_FINITE, f"non-finite {', '.join(bad)}", t_s)
        if fb.state is _DRIVE_FAULT or fb.fault_code:
            text = fb.fault_text or "no text"
            return self.trip(FaultKind.DRIVE_FAULT, f"drive fault 0x{fb.fault_code:X}: {text}", t_s)
        if fb.sequence == self._last_seq:
            self._stale += 1
            if self._stale >= self._stale_ticks:
                return self.trip(FaultKind.STALE_FEEDBACK,
                                 f"no new feedback sample for {self._stale} ticks", t_s)
        else:
            self._stale = 0
            self._last_seq = fb.sequence
        if abs(vel) > self._velocity_limit:
            return self.trip(FaultKind.VELOCITY_LIMIT,
                             f"velocity {vel:.4g} {self.speed_unit} beyond ±{self._velocity_limit:g}", t_s)
        err = pos_ref - pos
        limit = self._error_floor + self._error_per_speed * abs(vel_ref)
        if abs(err) > limit:
            return self.trip(FaultKind.FOLLOWING_ERROR,
                             f"following error {err:.4g} {self.length_unit} beyond ±{limit:.4g}", t_s)
        if vel_ref == 0.0:
            if self._rest_since != self._rest_since:
                self._rest_since = t_s
            if t_s - self._rest_since >= self._standstill_after and abs(err) > self._standstill_window:
                return self.trip(FaultKind.STANDSTILL,
                                 f"standstill error {err:.4g} {self.length_unit} beyond ±{self._standstill_window:g}", t_s)
        else:
            self._rest_since = math.nan
        if abs(self.Kt * cur) > TORQUE_FAULT_FACTOR * self._torque_limit:
            self._torque_high += 1
            if self._torque_high >= TORQUE_FAULT_TICKS:
                return self.trip(FaultKind.TORQUE_LIMIT,
                                 f"measured {'force' if self.force_unit == 'N' else 'torque'} {self.Kt * cur:.4g} "
                                 f"{self.force_unit} beyond "
                                 f"{TORQUE_FAULT_FACTOR:g}×{self._torque_limit:g}", t_s)
        else:
            self._torque_high = 0
        temp = fb.temperature_c
        if temp > self._max_temperature:
            return self.trip(FaultKind.TEMPERATURE,
                             f"drive temperature {temp:.1f} °C beyond {self._max_temperature:g}", t_s)
        return _NONE

    def record_overrun(self, t_s: float, overrun: bool, missed: int = 0) -> FaultKind:
        """Apply the overrun policy for this tick's timing: ``overrun`` (the tick ended after
        the next deadline) counts towards ``max_consecutive``; every missed deadline (``missed``
        deadlines skipped before this tick, and an overrunning tick itself) towards
        ``max_per_second``. One stall of n periods is one overrun and n missed deadlines."""
        times = self._overrun_times
        for _ in range(missed):
            times.append(t_s)
        if not overrun:
            self._consecutive_overruns = 0
            if missed:
                return self._per_second(t_s)
            return self.fault
        self.overruns += 1
        self._consecutive_overruns += 1
        times.append(t_s)
        while times and times[0] <= t_s - 1.0:
            times.popleft()
        if self.policy.warn and len(self.warnings) < 20:
            self.warnings.append(f"t={t_s:.4f} s: tick overrun")
        if self._consecutive_overruns >= self.policy.max_consecutive:
            return self.trip(FaultKind.OVERRUN,
                             f"{self._consecutive_overruns} consecutive overruns", t_s)
        return self._per_second(t_s)

    def _per_second(self, t_s: float) -> FaultKind:
        times = self._overrun_times
        while times and times[0] <= t_s - 1.0:
            times.popleft()
        if len(times) >= self.policy.max_per_second:
            return self.trip(FaultKind.OVERRUN, f"{len(times)} missed deadlines within 1 s", t_s)
        return self.fault
