"""Motion references: position [rad], velocity [rad/s] and acceleration [rad/s²] at time t [s].

``sample(t_s)`` is pure (no state changes) and cheap enough for every tick: every profile except
the sine is a table of constant-jerk segments built once in the constructor,

    x(τ) = x0 + v0·τ + a0·τ²/2 + j·τ³/6,   v(τ) = v0 + a0·τ + j·τ²/2,   a(τ) = a0 + j·τ,

with τ the time into the segment, found by ``bisect`` over the segment start times. Repeating
profiles (steps, scan) store one period and add a per-period position shift, so the table size
does not grow with the run length and ``sample`` costs the same at any t.

Kinds (:class:`~controller.config.ReferenceConfig`); every kind holds still at 0 before ``start_s``:

- ``hold``: x = 0.
- ``constant_velocity``: ramp at ``max_accel_rad_s2`` to ``velocity_rad_s``, then constant.
- ``sine``: x = A·(1 − cos(ω·τ)), τ = t − start_s, ω = 2π·frequency_hz: the velocity starts at 0
  and peaks at A·ω; the acceleration jumps from 0 to A·ω² at start_s (by construction).
- ``steps``: moves of ``step_rad`` (or ``step_counts``·rad_per_count when step_rad is 0), each
  followed by ``dwell_s``. Rest-to-rest profile limited by max velocity and max acceleration
  (trapezoidal), and by max jerk when it is finite (7-segment S-curve); short moves that cannot
  reach a limit get a triangular (or shortened S-curve) profile. During a dwell the position is
  exactly k·step.
- ``scan``: 0 → distance_rad → 0, repeated, cruising at ``velocity_rad_s`` with the same
  rest-to-rest profile (``max_accel_rad_s2``, and ``max_jerk_rad_s3`` when finite), ``dwell_s``
  at each end. The position stays within [0, distance_rad].

Steps and scan are continuous in position and velocity (and in acceleration for the S-curve),
with |v| and |a| (and |da/dt|) within their limits. Where the acceleration switches, ``sample``
returns the value of the segment that starts at t (right-continuous), also at ``start_s``.
"""

from __future__ import annotations

from controller.compile_hints import mypyc_attr
import abc
import math
from bisect import bisect_right
from typing import Optional, Sequence, Final

from .config import ReferenceConfig
from .fastmath import isfinite

_INF: Final = math.inf

Sample = tuple[float, float, float]  # (position [rad], velocity [rad/s], acceleration [rad/s²])
Window = Optional[tuple[float, float]]


@mypyc_attr(allow_interpreted_subclasses=True)
class Reference(abc.ABC):
    """A reference trajectory. Attributes:

    - ``constant_speed_window``: a span (t0, t1) [s] within the run where |v| is constant and
      non-zero (for velocity-ripple metrics), or None if there is none.
    - ``period_s``: repeat period [s] of the motion (sine, steps, scan), or None.
    """

    constant_speed_window: Window = None
    period_s: Optional[float] = None

    @abc.abstractmethod
    def sample(self, t_s: float) -> Sample:
        """(position [rad], velocity [rad/s], acceleration [rad/s²]) at time ``t_s`` [s]."""

    @abc.abstractmethod
    def reversals(self, until_s: float) -> list[float]:
        """Times [s] <= ``until_s`` at which the motion direction changes: the instant the
        velocity leaves zero with the opposite sign to the previous motion (with a dwell between
        the two moves, the start of the new move; without one, the zero crossing)."""


class HoldReference(Reference):
    """Stay at 0."""

    def sample(self, t_s: float) -> Sample:
        return (0.0, 0.0, 0.0)

    def reversals(self, until_s: float) -> list[float]:
        return []


class SineReference(Reference):
    """x = A·(1 − cos(ω·(t − start))) after ``start_s``, 0 before (units in the module docstring).

    Evaluated through the half angle h = ω·τ/2 (x = 2A·sin²h, v = 2Aω·sin h·cos h,
    a = Aω²·(cos²h − sin²h)): two trig calls, and no cancellation in 1 − cos for small τ.
    """

    def __init__(self, amplitude_rad: float, frequency_hz: float, start_s: float = 0.0) -> None:
        if not (frequency_hz > 0 and isfinite(frequency_hz)):
            raise ValueError(f"frequency_hz: must be finite and > 0, got {frequency_hz!r}")
        if not isfinite(amplitude_rad):
            raise ValueError(f"amplitude_rad: must be finite, got {amplitude_rad!r}")
        self.amplitude_rad = float(amplitude_rad)
        self.omega_rad_s = 2.0 * math.pi * frequency_hz
        self.start_s = float(start_s)
        self.period_s = 1.0 / frequency_hz
        self._half_w = 0.5 * self.omega_rad_s
        self._x2 = 2.0 * self.amplitude_rad
        self._v2 = 2.0 * self.amplitude_rad * self.omega_rad_s
        self._a1 = self.amplitude_rad * self.omega_rad_s ** 2

    def sample(self, t_s: float) -> Sample:
        tau = t_s - self.start_s
        if tau < 0.0:
            return (0.0, 0.0, 0.0)
        h = self._half_w * tau
        s = math.sin(h)
        c = math.cos(h)
        return (self._x2 * s * s, self._v2 * s * c, self._a1 * (c * c - s * s))

    def reversals(self, until_s: float) -> list[float]:
        """Zero crossings of the velocity: start_s + k·period/2, k >= 1."""
        if self.amplitude_rad == 0.0:
            return []
        period = self.period_s
        assert period is not None  # set in __init__
        half = 0.5 * period
        out = []
        k = 1
        while self.start_s + k * half <= until_s:
            out.append(self.start_s + k * half)
            k += 1
        return out


def rest_to_rest(distance_rad: float, max_velocity_rad_s: float, max_accel_rad_s2: float,
                 max_jerk_rad_s3: float = _INF) -> list[tuple[float, ...]]:
    """Time-optimal rest-to-rest move over ``distance_rad`` (either sign) under the limits.

    Returns the segments as (duration [s], acceleration at segment start [rad/s²], jerk [rad/s³]),
    zero-length ones left out. Infinite jerk gives the trapezoid (accelerate, cruise, decelerate;
    triangular without cruise when the distance is too short to reach max velocity); finite jerk
    the 7-segment S-curve (jerk, constant acceleration, jerk, cruise, and the mirror image; the
    constant-acceleration and cruise segments drop out when a limit is not reached). With
    a = max accel, j = max jerk, the accelerate phase to a velocity v lasts

        T_acc(v) = 2·sqrt(v/j)      if v <= a²/j   (the acceleration limit is not reached)
                 = v/a + a/j        otherwise      (a/j = 0 for the trapezoid)

    and covers v·T_acc(v)/2. The peak velocity is vmax when |d| >= vmax·T_acc(vmax) (cruise for
    the rest), else the vp solving vp·T_acc(vp) = |d| in closed form:
    vp = (|d|·sqrt(j)/2)^(2/3) below a²/j, else the root of vp²/a + vp·a/j = |d|.
    """
    vmax, amax, jmax = max_velocity_rad_s, max_accel_rad_s2, max_jerk_rad_s3
    for name, value in (("max_velocity_rad_s", vmax), ("max_accel_rad_s2", amax),
                        ("max_jerk_rad_s3", jmax)):
        if not value > 0:
            raise ValueError(f"{name}: must be > 0, got {value!r}")
    if math.isinf(amax) and math.isinf(jmax):
        raise ValueError("max_accel_rad_s2 and max_jerk_rad_s3 cannot both be inf "
                         "(the velocity would jump)")
    if not isfinite(distance_rad):
        raise ValueError(f"distance_rad: must be finite, got {distance_rad!r}")
    d = abs(distance_rad)
    if d == 0.0:
        return []
    sign = 1.0 if distance_rad > 0 else -1.0
    jerk_limited = isfinite(jmax)
    v_acc = amax * amax / jmax if jerk_limited else 0.0  # velocity at which a reaches amax
    a_over_j = amax / jmax if jerk_limited else 0.0

    def t_acc(v: float) -> float:
        return 2.0 * math.sqrt(v / jmax) if v <= v_acc else v / amax + a_over_j

    t_cruise = 0.0
    if isfinite(vmax) and d >= vmax * t_acc(vmax):
        vp = vmax
        t_cruise = d / vmax - t_acc(vmax)
    else:
        vp = (0.5 * d * math.sqrt(jmax)) ** (2.0 / 3.0) if jerk_limited else _INF
        if vp > v_acc:
            # root of vp²/a + vp·a/j − d = 0, in the form without cancellation
            vp = 2.0 * d / (a_over_j + math.sqrt(a_over_j * a_over_j + 4.0 * d / amax))
        vp = min(vp, vmax)
    if not jerk_limited:
        accel = [(vp / amax, amax, 0.0)]
    elif vp <= v_acc:
        tj = math.sqrt(vp / jmax)
        accel = [(tj, 0.0, jmax), (tj, jmax * tj, -jmax)]
    else:
        tj = a_over_j
        accel = [(tj, 0.0, jmax), (vp / amax - tj, amax, 0.0), (tj, amax, -jmax)]
    decel = [(T, -a0, -j) for (T, a0, j) in accel]
    segments = accel + [(t_cruise, 0.0, 0.0)] + decel
    return [(T, sign * a0, sign * j) for (T, a0, j) in segments if T > 0.0]


class PiecewiseReference(Reference):
    """A table of constant-jerk segments (module docstring), optionally repeating.

    ``segments``: (duration [s], a0 [rad/s²], jerk [rad/s³]) in order, starting at rest at
    position 0 at ``origin_s``; the start position and velocity of each segment are integrated
    here. A 4-tuple (duration, 0, 0, x_rest) is a rest at exactly ``x_rest`` [rad]: the
    integration restarts there at zero velocity, so rounding never accumulates from move to move
    and dwells sit exactly on their positions (a zero duration just re-anchors). Before
    ``origin_s`` the reference is at rest at 0. With ``repeat`` the table repeats every
    sum(durations) [s] and the position advances by ``shift_rad`` per period; otherwise the last
    segment extends forever. ``bounds`` clamp the in-period position (removes the rounding
    overshoot of a monotone move beyond its end points).
    """

    def __init__(self, segments: Sequence[tuple[float, ...]], origin_s: float = 0.0,
                 repeat: bool = False, shift_rad: float = 0.0,
                 bounds: tuple[float, float] = (-_INF, _INF),
                 constant_speed_window: Window = None) -> None:
        if not segments:
            raise ValueError("segments: need at least one segment")
        t0s: list[float] = []
        table: list[tuple[float, float, float, float, float, float, float]] = []
        dirs: list[int] = []
        t = x = v = 0.0
        for seg in segments:
            T, a0, j = seg[0], seg[1], seg[2]
            if not (T >= 0 and isfinite(a0) and isfinite(j)):
                raise ValueError(f"segment {seg!r}: need duration >= 0, finite a0 and jerk")
            if len(seg) == 4:
                if a0 != 0.0 or j != 0.0:
                    raise ValueError(f"segment {seg!r}: a rest needs a0 = jerk = 0")
                x, v = float(seg[3]), 0.0
            # (x0, v0, a0, j, a0/2, j/2, j/6): the halves and sixths precomputed for sample()
            table.append((x, v, a0, j, 0.5 * a0, 0.5 * j, j / 6.0))
            t0s.append(t)
            # direction of motion inside the segment: the sign of its mid-point velocity
            tm = 0.5 * T if isfinite(T) else 1.0
            vm = v + tm * (a0 + tm * 0.5 * j)
            dirs.append(0 if vm == 0.0 else (1 if vm > 0 else -1))
            if isfinite(T):
                x += T * (v + T * (0.5 * a0 + T * j / 6.0))
                v += T * (a0 + T * 0.5 * j)
                t += T
            else:
                t = _INF
        self._t0s = t0s
        self._table = table
        self._dirs = dirs
        self._origin = float(origin_s)
        self._repeat = bool(repeat)
        self._period = t if repeat else _INF
        if repeat and not (0.0 < t < _INF):
            raise ValueError(f"a repeating table needs a finite, positive period, got {t!r}")
        self._shift = float(shift_rad)
        self._lo, self._hi = float(bounds[0]), float(bounds[1])
        self.period_s = self._period if repeat else None
        self.constant_speed_window = constant_speed_window

    def sample(self, t_s: float) -> Sample:
        tau = t_s - self._origin
        if tau < 0.0:
            return (0.0, 0.0, 0.0)
        if self._repeat:
            k = math.floor(tau / self._period)
            tau -= k * self._period
            if tau < 0.0:  # rounding at a period boundary
                tau = 0.0
            base = k * self._shift
        else:
            base = 0.0
        i = bisect_right(self._t0s, tau) - 1
        x0, v0, a0, j, a0h, j2, j6 = self._table[i]
        tau -= self._t0s[i]
        x = x0 + tau * (v0 + tau * (a0h + tau * j6))
        if x > self._hi:
            x = self._hi
        elif x < self._lo:
            x = self._lo
        return (base + x, v0 + tau * (a0 + tau * j2), a0 + tau * j)

    def reversals(self, until_s: float) -> list[float]:
        out: list[float] = []
        last = 0
        k = 0
        while True:
            t_period = self._origin + (k * self._period if self._repeat else 0.0)
            if t_period > until_s:
                return out
            for t0, direction in zip(self._t0s, self._dirs):
                t = t_period + t0
                if t > until_s:
                    return out
                if direction != 0:
                    if last != 0 and direction != last:
                        out.append(t)
                    last = direction
            if not self._repeat:
                return out
            k += 1


class _ConstantVelocity(Reference):
    """Constant velocity with a velocity step at ``start_s`` (only when max_accel is inf)."""

    def __init__(self, velocity_rad_s: float, start_s: float, window: Window) -> None:
        self._v = velocity_rad_s
        self._start = start_s
        self.constant_speed_window = window

    def sample(self, t_s: float) -> Sample:
        tau = t_s - self._start
        if tau < 0.0:
            return (0.0, 0.0, 0.0)
        return (self._v * tau, self._v, 0.0)

    def reversals(self, until_s: float) -> list[float]:
        return []


def _clip_window(t0: float, t1: float, duration_s: float) -> Window:
    t1 = min(t1, duration_s)
    return (t0, t1) if t1 > t0 else None


def _cruise_window(segments: list[tuple[float, ...]], t_offset: float,
                   duration_s: float) -> Window:
    """The first cruise segment (a0 = j = 0, moving) of a move that starts at rest at t_offset."""
    t = t_offset
    v = 0.0
    for T, a0, j in segments:
        if a0 == 0.0 and j == 0.0 and v != 0.0:
            return _clip_window(t, t + T, duration_s)
        v += T * (a0 + T * 0.5 * j)
        t += T
    return None


def make_reference(cfg: ReferenceConfig, rad_per_count: float, duration_s: float) -> Reference:
    """Build the reference of a scenario. ``rad_per_count`` [rad] converts ``step_counts``;
    ``duration_s`` [s] bounds the constant-speed window. Raises ValueError on a profile that
    cannot be built (e.g. steps of size 0)."""
    start = float(cfg.start_s)
    kind = cfg.kind
    if kind == "hold":
        return HoldReference()
    if kind == "sine":
        return SineReference(cfg.amplitude_rad, cfg.frequency_hz, start)
    if kind == "constant_velocity":
        v = float(cfg.velocity_rad_s)
        if not isfinite(v):
            raise ValueError(f"velocity_rad_s: must be finite, got {v!r}")
        if v == 0.0:
            return HoldReference()
        t_ramp = abs(v) / cfg.max_accel_rad_s2  # 0 with an infinite max_accel: a velocity step
        window = _clip_window(start + t_ramp, duration_s, duration_s)
        if t_ramp == 0.0:
            return _ConstantVelocity(v, start, window)
        segments: list[tuple[float, ...]] = [(t_ramp, math.copysign(cfg.max_accel_rad_s2, v), 0.0),
                                             (_INF, 0.0, 0.0)]
        return PiecewiseReference(segments, origin_s=start, constant_speed_window=window)
    if kind == "steps":
        step = float(cfg.step_rad) if cfg.step_rad != 0 else cfg.step_counts * rad_per_count
        if step == 0.0 or not isfinite(step):
            raise ValueError(f"steps: step_rad or step_counts must give a non-zero finite step, "
                             f"got step_rad={cfg.step_rad!r}, step_counts={cfg.step_counts!r}")
        move = rest_to_rest(step, cfg.max_velocity_rad_s, cfg.max_accel_rad_s2, cfg.max_jerk_rad_s3)
        dwell = float(cfg.dwell_s)
        # one period = dwell at k·step, then the move to (k+1)·step; the first dwell lies before
        # start_s, so the first move begins at start_s and each dwell sits exactly on k·step
        segments = [(dwell, 0.0, 0.0, 0.0), *move]
        window = _cruise_window(move, start, duration_s)
        return PiecewiseReference(segments, origin_s=start - dwell, repeat=True, shift_rad=step,
                                  bounds=(min(0.0, step), max(0.0, step)),
                                  constant_speed_window=window)
    if kind == "scan":
        dist = float(cfg.distance_rad)
        fwd = rest_to_rest(dist, cfg.velocity_rad_s, cfg.max_accel_rad_s2, cfg.max_jerk_rad_s3)
        back = [(T, -a0, -j) for (T, a0, j) in fwd]
        dwell = float(cfg.dwell_s)
        window = _cruise_window(fwd, start, duration_s)
        segments = fwd + [(dwell, 0.0, 0.0, dist)] + back + [(dwell, 0.0, 0.0, 0.0)]
        return PiecewiseReference(segments, origin_s=start, repeat=True, bounds=(0.0, dist),
                                  constant_speed_window=window)
    raise ValueError(f"kind: unknown reference kind {kind!r}")


__all__ = [
    "Reference", "HoldReference", "SineReference", "PiecewiseReference", "make_reference",
    "rest_to_rest",
]
