"""Position PID in physical units, LinuxCNC style (``src/hal/components/pid.c``).

Units (rotary SI): position [rad], velocity [rad/s], torque [N·m], period ``dt_s`` [s];
gains kp [N·m/rad], ki [N·m/(rad·s)], kd [N·m·s/rad], derivative cutoff fc [Hz]
(see :class:`~controller.config.PIDGains`). The integrator is stored as a torque [N·m], not as
∫e, so swapping ``gains`` between ticks (gain scheduling) never makes the output jump through it.

One tick (``step``), all inputs read once; ``lim = gains.output_limit_nm`` (``inf`` = no limit)::

    if not enabled:                     return 0
    if not (0 < dt < inf):              reject the tick (below)
    e       = pos_ref − pos                                  # following error [rad]
    alpha   = 1 − exp(−2π·fc·dt)                             # exact discretisation of 1/(1 + s/2πfc)
    v_raw   = (pos − prev_pos) / dt                          # measured velocity [rad/s]
    v_filt  = v_filt + alpha·(v_raw − v_filt)
    p       = kp·e
    d       = kd·(vel_ref − v_filt)     # derivative on measurement; the reference's own analytic
                                        # velocity is the velocity feedforward, so a step in
                                        # pos_ref never kicks the derivative
    total   = p + i + d + ff            # unclamped, feedforward included
    if total is not finite:             reject the tick (below)
    # conditional integration (anti-windup): only while the total is inside the limit, or when
    # the error drives it back out of saturation
    if −lim <= total <= lim  or  total·e < 0:
        i = clamp(i + ki·e·dt, −lim, lim)
        total = p + i + d + ff
    saturated = |total| > lim
    out       = clamp(total, −lim, lim)
    prev_pos  = pos

Rejected tick (a NaN or inf input, or dt not in (0, inf)): the integrator is not touched, the
outputs ``out_nm`` and the return value are NaN so the safety layer faults on them, and
``saturated`` is False. The derivative filter still takes the new measurement when its state stays
finite (e.g. only ``ff`` was bad); otherwise it keeps the last good one. One bad tick therefore
never poisons the controller: the next good tick computes normally.

``enable(pos, u0)`` is bumpless: prev_pos = pos, v_filt = 0, i = clamp(u0, ±lim), so with zero
error and zero derivative the first output is u0 (plus that tick's ``ff``: pass u0 − ff when the
caller already knows the feedforward). ``disable()`` resets: i = 0, out = 0, not enabled.
"""

from __future__ import annotations

import math
from typing import Final

from .config import PIDGains
from .fastmath import isfinite

_INF: Final = math.inf
_NAN: Final = math.nan
_TWO_PI: Final = 2.0 * math.pi


def inertia_feedforward(J: float, acc_ref: float) -> float:
    """Inertia feedforward J·a_ref [N·m] from inertia J [kg·m²] and reference acceleration [rad/s²]."""
    return J * acc_ref


class PID:
    """Position PID with filtered derivative on measurement and conditional integration.

    The algorithm and the units are in the module docstring. After each ``step`` the components
    are readable for logging: ``p_nm``, ``i_nm`` (integrator state), ``d_nm``, ``ff_nm``,
    ``out_nm`` (limited total), ``saturated``, ``error_rad``, ``vel_filt_rad_s``.
    """

    __slots__ = (
        "_gains", "_kp", "_ki", "_kd", "_wc", "_lim", "_alpha", "_alpha_dt",
        "_enabled", "_prev_pos",
        "p_nm", "i_nm", "d_nm", "ff_nm", "out_nm", "saturated", "error_rad", "vel_filt_rad_s",
    )

    def __init__(self, gains: PIDGains) -> None:
        self._enabled = False
        self._prev_pos = 0.0
        self.i_nm = 0.0
        self.gains = gains
        self._zero_outputs()

    # --- gains (swappable between ticks) -------------------------------------------------------

    @property
    def gains(self) -> PIDGains:
        return self._gains

    @gains.setter
    def gains(self, gains: PIDGains) -> None:
        """Swap gains between ticks. Bumpless: the integrator keeps its torque value (clamped to
        the new limit); the derivative filter keeps its velocity."""
        self._gains = gains
        self._kp = float(gains.kp)
        self._ki = float(gains.ki)
        self._kd = float(gains.kd)
        self._wc = _TWO_PI * float(gains.derivative_cutoff_hz)
        self._lim = float(gains.output_limit_nm)
        self._alpha_dt = _NAN  # NaN never equals a dt: forces the recompute on the next tick
        self._alpha = 0.0
        if self.i_nm > self._lim:
            self.i_nm = self._lim
        elif self.i_nm < -self._lim:
            self.i_nm = -self._lim

    # --- lifecycle ----------------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        return self._enabled

    def enable(self, pos_rad: float, u0_nm: float = 0.0, vel_rad_s: float = 0.0) -> None:
        """Start (bumpless): the derivative filter starts at the measurement ``pos_rad`` [rad]
        moving at ``vel_rad_s`` [rad/s] (0: at rest; a stop that starts at speed passes the
        measured speed, or the derivative term kicks by kd·v), the integrator at ``u0_nm`` [N·m]
        clamped to the limit, so that with zero error and a reference moving at the measured
        speed the first output is ``u0_nm`` (+ that tick's ff)."""
        if not isfinite(pos_rad):
            raise ValueError(f"pos_rad: must be finite to enable, got {pos_rad!r}")
        if not isfinite(u0_nm):
            raise ValueError(f"u0_nm: must be finite to enable, got {u0_nm!r}")
        lim = self._lim
        u0 = lim if u0_nm > lim else (-lim if u0_nm < -lim else float(u0_nm))
        self._zero_outputs()
        self.vel_filt_rad_s = float(vel_rad_s) if isfinite(vel_rad_s) else 0.0
        self._prev_pos = float(pos_rad)
        self.i_nm = u0
        self.out_nm = u0
        self._enabled = True

    def disable(self) -> None:
        """Reset: integrator 0, output 0, derivative filter 0, not enabled."""
        self._enabled = False
        self.i_nm = 0.0
        self._zero_outputs()

    def _zero_outputs(self) -> None:
        self.p_nm = 0.0
        self.d_nm = 0.0
        self.ff_nm = 0.0
        self.out_nm = 0.0
        self.saturated = False
        self.error_rad = 0.0
        self.vel_filt_rad_s = 0.0

    # --- the tick -----------------------------------------------------------------------------

    def step(self, pos_ref_rad: float, vel_ref_rad_s: float, pos_rad: float, ff_nm: float,
             dt_s: float) -> float:
        """One tick: reference position [rad] and velocity [rad/s], measured position [rad],
        feedforward [N·m] (added inside the limit), period [s]. Returns the limited total
        command [N·m]; 0.0 when not enabled; NaN when the tick is rejected (module docstring)."""
        if not self._enabled:
            return 0.0
        if not 0.0 < dt_s < _INF:  # also False for NaN
            return self._reject(pos_ref_rad - pos_rad, ff_nm, _NAN, _NAN, False)
        if dt_s != self._alpha_dt:
            self._alpha = 1.0 - math.exp(-self._wc * dt_s)
            self._alpha_dt = dt_s
        e = pos_ref_rad - pos_rad
        v_filt = self.vel_filt_rad_s
        v_filt += self._alpha * ((pos_rad - self._prev_pos) / dt_s - v_filt)
        p = self._kp * e
        d = self._kd * (vel_ref_rad_s - v_filt)
        i = self.i_nm
        total = p + i + d + ff_nm
        if total - total != 0.0:  # inf or NaN somewhere in the inputs (0·inf is NaN too)
            return self._reject(e, ff_nm, p, d, v_filt - v_filt == 0.0, v_filt, pos_rad)
        lim = self._lim
        if -lim <= total <= lim or total * e < 0.0:
            i += self._ki * e * dt_s
            if i > lim:
                i = lim
            elif i < -lim:
                i = -lim
            self.i_nm = i
            total = p + i + d + ff_nm
        self._prev_pos = pos_rad
        self.vel_filt_rad_s = v_filt
        self.error_rad = e
        self.p_nm = p
        self.d_nm = d
        self.ff_nm = ff_nm
        if total > lim:
            self.saturated = True
            total = lim
        elif total < -lim:
            self.saturated = True
            total = -lim
        else:
            self.saturated = False
        self.out_nm = total
        return total

    def _reject(self, e: float, ff: float, p: float, d: float, filter_ok: bool,
                v_filt: float = 0.0, pos: float = 0.0) -> float:
        """A tick with a non-finite input: integrator untouched, output NaN (module docstring)."""
        if filter_ok:
            self._prev_pos = pos
            self.vel_filt_rad_s = v_filt
        self.error_rad = e
        self.p_nm = p
        self.d_nm = d
        self.ff_nm = ff
        self.saturated = False
        self.out_nm = _NAN
        return _NAN


__all__ = ["PID", "inertia_feedforward"]
