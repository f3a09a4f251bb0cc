"""The safe stop, by stop category (IEC 61800-5-2 vocabulary).

Every fault, a stop request (SIGINT/SIGTERM) and the normal end of a run stop the axis through
this one path. The category follows from why the loop stops (:data:`CATEGORY`):

| category | when | what |
|---|---|---|
| STO (safe torque off) | the feedback or the drive cannot be trusted, or the axis runs away: NON_FINITE, DRIVE_FAULT, STALE_FEEDBACK, VELOCITY_LIMIT, TORQUE_LIMIT, COMMUNICATION, ESTIMATOR, INTERNAL | zero torque and disable on the detecting tick |
| SS1 (safe stop 1) | the axis is still under control: FOLLOWING_ERROR, STANDSTILL, TEMPERATURE, OVERRUN, LOG_OVERFLOW, STOP_REQUESTED, the normal end | a velocity reference from the measured speed down to standstill at a bounded deceleration, followed by a position loop (the PID alone, started bumplessly from the last command: the friction estimator is not trusted in a stop); then disable |
| controlled hold | SS1 with ``safety.hold_s`` > 0 | SS1, then the position held for ``hold_s`` before the disable (for loads that would run away unpowered — a holding brake is the real answer: fit one) |

Rules (derived from the active config, each overridable):
- deceleration: ``|v0| / stop_ramp_s`` — the stop takes ``stop_ramp_s`` — but at most
  ``safety.stop_decel_rad_s2``, by default half the torque authority over the believed inertia,
  ``0.5 · torque_limit_nm / controller.J`` (the other half is left for friction and load);
- standstill: the reference at rest and ``|v| ≤ 4 counts per period``
  (``4 · rad_per_count · rate_hz``: encoder quantization alone stays below it), or
  ``stop_ramp_s`` after the reference came to rest, whichever is first;
- runaway at the stop (STO instead of SS1): the axis moves away from its reference faster than
  the reference moves (``e·v < 0`` and ``|v| > |v_ref| + 8 counts per period``);
- escalation to STO: the speed rises above ``|v0| + max(0.25·|v0|, 8 counts per period)`` (a
  wrong motor sign or an overhauling load the loop cannot hold), the feedback is lost or not
  finite, the drive reports a fault, or the stop controller raises.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import TYPE_CHECKING, Optional

from drivers.backend import DriveState, Feedback

from .compensation import TickSignals, make_compensator
from .control_law import ControlLaw
from .safety import FaultKind
from .fastmath import isfinite

if TYPE_CHECKING:  # pragma: no cover
    from .config import Config


class StopCategory(enum.IntEnum):
    NONE = 0
    SS1 = 1
    HOLD = 2
    STO = 3


class StopPhase(enum.IntEnum):
    """The ``stop_phase`` log column."""

    RUN = 0
    SS1 = 1  # decelerating under closed-loop control
    HOLD = 2  # at standstill, position held (controlled hold, or SS1 settling)
    STO = 3  # torque off
    DISABLED = 4  # the disable row


STO_FAULTS = frozenset({
    FaultKind.NON_FINITE, FaultKind.DRIVE_FAULT, FaultKind.STALE_FEEDBACK, FaultKind.VELOCITY_LIMIT,
    FaultKind.TORQUE_LIMIT, FaultKind.COMMUNICATION, FaultKind.ESTIMATOR, FaultKind.INTERNAL,
})
# Every FaultKind, with its category (NONE = the normal end of the run).
CATEGORY: dict[FaultKind, StopCategory] = {
    kind: (StopCategory.STO if kind in STO_FAULTS else StopCategory.SS1) for kind in FaultKind
}


def stop_deceleration_limit(cfg: "Config") -> float:
    """``safety.stop_decel_rad_s2``, or half the torque authority over the believed inertia."""
    explicit = cfg.safety.stop_decel_rad_s2
    return explicit if explicit is not None else 0.5 * cfg.safety.torque_limit_nm / cfg.controller.J


class SafeStop:
    """The stop plan of one run: :meth:`begin` on the stop tick, then :meth:`step` each tick
    until :attr:`finished` (the loop then disables) or :attr:`torque_off` (the loop cuts the
    torque and disables at once)."""

    def __init__(self, cfg: "Config") -> None:
        self.cfg = cfg
        self.dt_s = cfg.loop.dt_s
        self.hold_s = cfg.safety.hold_s
        self.ramp_s = cfg.safety.stop_ramp_s
        self.decel_limit = stop_deceleration_limit(cfg)
        count_rate = cfg.plant.encoder.rad_per_count * cfg.loop.rate_hz  # one count per period
        self.standstill_vel = 4.0 * count_rate
        self.rise_floor = 8.0 * count_rate
        # the PID alone (friction feedforward off), with the run's gains
        ctl = dataclasses.replace(cfg.controller, compensation="off", schedule=None)
        self.law = ControlLaw(ctl, make_compensator(ctl))
        self.phase = StopPhase.RUN
        self.category = StopCategory.NONE
        self.cause = FaultKind.NONE
        self.torque_off = False
        self.finished = False
        self.reason = ""
        self._t0 = 0.0
        self._p0 = 0.0
        self._v0 = 0.0
        self._decel = 0.0
        self._t_rest = 0.0  # time from the stop's start at which the reference is at rest
        self._v_bound = math.inf
        self._rest_at = math.nan  # stop time at which standstill was reached

    # --- the plan --------------------------------------------------------------------------------
    def begin(self, cause: FaultKind, fb: Optional[Feedback], pos: float, vel: float,
              pos_ref: float, vel_ref: float, u_last: float, t_s: float) -> None:
        self.cause = cause
        category = CATEGORY[cause]
        if category is not StopCategory.STO and self.runaway(pos, vel, pos_ref, vel_ref):
            category = StopCategory.STO  # closing the loop would push further the wrong way
        if category is StopCategory.SS1 and self.hold_s > 0:
            category = StopCategory.HOLD
        self.category = category
        self._t0 = t_s
        if category is StopCategory.STO or not self._trusted(fb, pos, vel):
            self._sto(f"{cause.name}: torque off at once" if category is StopCategory.STO
                      else "feedback not trusted at the stop")
            return
        v0 = vel
        self._p0, self._v0 = pos, v0
        self._decel = min(self.decel_limit, max(abs(v0) / self.ramp_s if self.ramp_s > 0 else math.inf,
                                               1e-12))
        self._t_rest = abs(v0) / self._decel if v0 != 0.0 else 0.0
        self._v_bound = abs(v0) + max(0.25 * abs(v0), self.rise_floor)
        u0 = u_last if isfinite(u_last) else 0.0
        self.law.enable(pos)
        # bumpless: the integrator carries the last command; the derivative filter starts at
        # the measured speed, from where the axis was one period ago at that speed (the first
        # stop tick differences this tick's own position: a zero difference would kick kd·v0)
        self.law.pid.enable(pos - v0 * self.dt_s, u0, v0)
        self.phase = StopPhase.SS1

    def runaway(self, pos: float, vel: float, pos_ref: float, vel_ref: float) -> bool:
        """The axis moves away from its reference faster than the reference moves: a wrong
        motor sign or a load the loop has lost (the error grows, ``e·v < 0``, with
        ``|v| > |v_ref| + 8 counts per period``)."""
        e = pos_ref - pos
        return e * vel < 0 and abs(vel) > abs(vel_ref) + self.rise_floor

    def _trusted(self, fb: Optional[Feedback], pos: float, vel: float) -> bool:
        return (fb is not None and isfinite(pos) and isfinite(vel)
                and fb.state is not DriveState.FAULT and not fb.fault_code)

    def _sto(self, reason: str) -> None:
        self.category = StopCategory.STO
        self.phase = StopPhase.STO
        self.torque_off = True
        self.finished = True
        self.reason = reason

    def reference(self, s: float) -> tuple[float, float, float]:
        """(position, velocity, acceleration) of the stop reference ``s`` seconds in."""
        v0, a = self._v0, self._decel
        sgn = 1.0 if v0 > 0 else -1.0
        if s < self._t_rest:
            return (self._p0 + v0 * s - 0.5 * sgn * a * s * s, v0 - sgn * a * s, -sgn * a)
        t = self._t_rest
        return self._p0 + v0 * t - 0.5 * sgn * a * t * t, 0.0, 0.0

    # --- each tick -------------------------------------------------------------------------------
    def step(self, fb: Optional[Feedback], pos: float, vel: float, t_s: float, sig: TickSignals,
             dt_s: float) -> tuple[float, float, float, float]:
        """(command, pos_ref, vel_ref, acc_ref) of this stop tick."""
        s = t_s - self._t0
        if self.torque_off:
            p, v, _ = self.reference(s) if self.phase is not StopPhase.STO else (pos, 0.0, 0.0)
            return 0.0, p, 0.0, 0.0
        if not self._trusted(fb, pos, vel):
            self._sto("feedback lost during the stop")
            return 0.0, pos, 0.0, 0.0
        if abs(vel) > self._v_bound:
            self._sto(f"speed rose during the stop: |v| {abs(vel):.4g} > {self._v_bound:.4g} "
                     f"{self.cfg.axis.speed}")
            return 0.0, pos, 0.0, 0.0
        p_ref, v_ref, _ = self.reference(s)
        a_ref = (self.reference(s + dt_s)[1] - v_ref) / dt_s  # the mean over the tick (loop)
        assert fb is not None
        sig.t_s = t_s
        sig.pos_rad = pos
        sig.vel_rad_s = vel
        sig.pos_ref_rad = p_ref
        sig.vel_ref_rad_s = v_ref
        sig.acc_ref_rad_s2 = a_ref
        sig.current_a = fb.current_a
        sig.faulted = True
        try:
            u = self.law.step(sig, dt_s)
        except Exception as err:  # noqa: BLE001 - a stop controller that fails: torque off
            self._sto(f"stop controller: {type(err).__name__}: {err}")
            return 0.0, pos, 0.0, 0.0
        if not isfinite(u):
            self._sto("stop controller: non-finite command")
            return 0.0, pos, 0.0, 0.0
        if s >= self._t_rest:
            if math.isnan(self._rest_at) and (abs(vel) <= self.standstill_vel
                                             or s >= self._t_rest + self.ramp_s):
                self._rest_at = s
            if not math.isnan(self._rest_at):
                self.phase = StopPhase.HOLD
                if s >= self._rest_at + self.hold_s:
                    self.finished = True
        return u, p_ref, v_ref, a_ref
