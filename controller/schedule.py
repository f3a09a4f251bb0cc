"""Gain scheduling: identified parameter sets for operating regions, blended smoothly.

Scheduling variables: temperature_c [°C], payload_kg [kg], speed_rad_s (|v_ref| [rad/s]) and the
direction of v_ref. Per tick (:meth:`Scheduler.update`):

1. hysteresis: each continuous variable passes through a play (backlash) of width h:
   x_h ← clamp(x_h, x − h, x + h). Dithering within ±h changes nothing; a set whose region the
   variable leaves stays fully in until the variable is more than h outside. The direction is
   held while v_ref is 0. Unknown variables (NaN) do not discriminate between sets.
2. membership of each set: the product over variables of μ(x_h), μ = 1 inside [lo, hi] and
   falling smoothly (smoothstep) to 0 over the blend width outside it — continuous in x.
3. target weights: memberships normalised to sum 1 (all zero: hold the present weights, flag
   ``uncovered``; at start the first set is the default).
4. weights move toward the target along a straight line at most weight_rate_per_s·dt per tick
   (the sum stays 1), so the blended parameters change continuously in time as well.
5. blend: LuGre fields (and PID gains) as weight-averaged values. Every constraint of a LuGre set
   (Fc > 0, Fs >= Fc, vs, sigma0 > 0, sigma1, sigma2 >= 0) is preserved by a convex combination,
   and the result is built through the validating constructor anyway. Passivity is not convex:
   the blend's margin is checked and any negative one recorded in ``warnings``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Final, TypeVar

from .estimation_config import ScheduleConfig
from .friction import DirectionalParams, FrictionParams, LuGreParams, passivity_warning
from .gains import PIDGains

NAN: Final = float("nan")
VARIABLES = ("temperature_c", "payload_kg", "speed_rad_s")
_LUGRE_FIELDS = tuple(f.name for f in fields(LuGreParams))
_PID_FIELDS = tuple(f.name for f in fields(PIDGains))
_Blended = TypeVar("_Blended", LuGreParams, PIDGains)


def smoothstep(t: float) -> float:
    """3t² − 2t³ on [0, 1], clamped outside: C¹ from 0 to 1."""
    if t <= 0.0:
        return 0.0
    if t >= 1.0:
        return 1.0
    return t * t * (3.0 - 2.0 * t)


def membership(x: float, lo: float, hi: float, width: float) -> float:
    """1 on [lo, hi], smoothly to 0 over ``width`` outside it (hard edge for width 0)."""
    if x < lo:
        return smoothstep((x - (lo - width)) / width) if width > 0.0 else 0.0
    if x > hi:
        return smoothstep(((hi + width) - x) / width) if width > 0.0 else 0.0
    return 1.0


def _weighted(values: Sequence[float], weights: Sequence[float]) -> float:
    total = 0.0
    for w, x in zip(weights, values):
        if w > 0.0:
            total += w * x  # inf stays inf (an unlimited output limit in any set in use)
    return total


def _columns(objects: Sequence[object], names: Sequence[str]) -> tuple[tuple[float, ...], ...]:
    """Per field, the values of every object (blending then needs no attribute lookups)."""
    return tuple(tuple(getattr(o, name) for o in objects) for name in names)


def _blend_columns(cls: Callable[..., _Blended], names: Sequence[str],
                   columns: Sequence[Sequence[float]], weights: Sequence[float]) -> _Blended:
    return cls(**{name: _weighted(col, weights) for name, col in zip(names, columns)})


def blend_lugre(sets: tuple[FrictionParams, ...], weights: tuple[float, ...]) -> LuGreParams:
    """Field-wise weighted average (weights >= 0, sum 1) of flat sets; validated by the
    constructor."""
    return _blend_columns(LuGreParams, _LUGRE_FIELDS, _columns(sets, _LUGRE_FIELDS), weights)


def _split(sets: tuple[FrictionParams, ...]
           ) -> tuple[tuple[LuGreParams, ...], tuple[LuGreParams, ...]] | None:
    """(forward sets, reverse sets) when any set is directional, else None."""
    if not any(isinstance(p, DirectionalParams) for p in sets):
        return None
    return (tuple(p.forward if isinstance(p, DirectionalParams) else p for p in sets),
            tuple(p.reverse if isinstance(p, DirectionalParams) else p for p in sets))


def blend_friction(sets: tuple[FrictionParams, ...], weights: tuple[float, ...]) -> FrictionParams:
    """Blend flat and directional sets; directional when any set is (forward with forward)."""
    split = _split(sets)
    if split is None:
        return blend_lugre(sets, weights)
    return DirectionalParams(blend_lugre(split[0], weights), blend_lugre(split[1], weights))


def blend_pid(sets: tuple[PIDGains, ...], weights: tuple[float, ...]) -> PIDGains:
    return _blend_columns(PIDGains, _PID_FIELDS, _columns(sets, _PID_FIELDS), weights)


class Scheduler:
    """Blends the sets of a :class:`ScheduleConfig`. ``base_pid``: gains of sets without ``pid``.

    After each :meth:`update`: ``weights`` (tuple, one per set, sum 1), ``params`` (blended
    friction), ``gains`` (blended PID, or None without any gains), ``active`` (name of the
    heaviest set), ``uncovered``, ``changed`` (the blend was recomputed this tick), ``warnings``.
    """

    def __init__(self, cfg: ScheduleConfig, base_pid: PIDGains | None = None) -> None:
        self.cfg = cfg
        self.names = tuple(s.name for s in cfg.sets)
        missing = [s.name for s in cfg.sets if s.friction is None]
        if missing:
            raise ValueError(f"schedule: sets {missing} have no friction yet: anchor the schedule "
                             "to controller.friction first (estimation_config.anchored)")
        self._friction: tuple[FrictionParams, ...] = tuple(
            s.friction for s in cfg.sets if s.friction is not None)  # all of them (checked above)
        split = _split(self._friction)
        self._friction_columns = (
            (_columns(self._friction, _LUGRE_FIELDS),) if split is None
            else (_columns(split[0], _LUGRE_FIELDS), _columns(split[1], _LUGRE_FIELDS)))
        pids = tuple(s.pid or base_pid for s in cfg.sets)
        self._pids = pids if all(p is not None for p in pids) else None
        self._pid_columns = _columns(self._pids, _PID_FIELDS) if self._pids else ()
        if self._pids is None and any(p is not None for p in pids):
            raise ValueError("schedule: some sets have pid gains and no base gains are given "
                             "for the others")
        # per set: ((variable index, lo, hi), ...) for the variables its region constrains
        self._ranges = tuple(
            tuple((i, *getattr(s.region, name)) for i, name in enumerate(VARIABLES)
                  if getattr(s.region, name) is not None)
            for s in cfg.sets)
        self._used = tuple(sorted({i for ranges in self._ranges for i, _, _ in ranges}))
        self._direction = tuple({"forward": 1, "reverse": -1, "any": 0}[s.region.direction]
                                for s in cfg.sets)
        self._uses_direction = any(self._direction)
        self._width = tuple(getattr(cfg.blend_width, name) or 0.0 for name in VARIABLES)
        self._play = tuple(getattr(cfg.hysteresis, name) or 0.0 for name in VARIABLES)
        self.warnings: list[str] = []
        self._warned: set[frozenset[str]] = set()
        for s, friction in zip(cfg.sets, self._friction):
            message = passivity_warning(friction)
            if message:
                self.warnings.append(f"schedule set {s.name!r}: {message}")
        self.reset()

    def reset(self) -> None:
        self._held = [NAN] * len(VARIABLES)  # the variables after the play, in VARIABLES order
        self._dir = 0
        self._settled = False  # weights at their target: nothing to do until a variable moves
        self.weights: tuple[float, ...] = ()
        self.params: FrictionParams = self._friction[0]
        self.gains: PIDGains | None = self._pids[0] if self._pids else None
        self.active = self.names[0]
        self.uncovered = False
        self.changed = False

    def held(self, name: str) -> float:
        """A scheduling variable after the play (NaN: never known)."""
        return self._held[VARIABLES.index(name)]

    def targets(self) -> tuple[float, ...] | None:
        """Normalised memberships at the held variables, or None when no set covers them."""
        held, width = self._held, self._width
        mu = []
        for ranges, direction in zip(self._ranges, self._direction):
            m = 0.0 if direction and self._dir and direction != self._dir else 1.0
            for i, lo, hi in ranges:
                x = held[i]
                if m > 0.0 and x == x:
                    m *= membership(x, lo, hi, width[i])
            mu.append(m)
        total = sum(mu)
        return tuple(m / total for m in mu) if total > 0.0 else None

    def update(self, dt_s: float, *, temperature_c: float = NAN, payload_kg: float = NAN,
               speed_rad_s: float = NAN, direction: int = 0
               ) -> tuple[FrictionParams, PIDGains | None, tuple[float, ...]]:
        """One tick with the scheduling variables (NaN: unknown; direction: sign of v_ref, 0 =
        at rest, keep the last). Returns (blended friction, blended gains, weights)."""
        values = (temperature_c, payload_kg, speed_rad_s)
        held, play = self._held, self._play
        moved = False
        for i in self._used:  # the play (backlash) on each variable some region constrains
            x = values[i]
            if x != x:  # NaN: unknown, keep what we had
                continue
            h = held[i]
            if h != h:
                new = x
            else:
                p = play[i]
                new = x - p if h < x - p else (x + p if h > x + p else h)
            if new != h:
                held[i] = new
                moved = True
        if direction and self._uses_direction:
            d = 1 if direction > 0 else -1
            if d != self._dir:
                self._dir = d
                moved = True
        if self._settled and not moved:
            self.changed = False
            return self.params, self.gains, self.weights
        target = self.targets()
        self.uncovered = target is None
        w = self.weights
        if not w:  # first tick: no slew from nothing
            if target is None:
                target = (1.0,) + (0.0,) * (len(self.names) - 1)
                self.warnings.append("schedule: no region covers the start point; "
                                     f"using the first set {self.names[0]!r}")
            new_w = target
        elif target is None:
            new_w = w
        else:
            step = self.cfg.weight_rate_per_s * dt_s
            biggest = max(abs(t - x) for t, x in zip(target, w))
            if biggest <= step:
                new_w = target
            else:
                f = step / biggest
                new_w = tuple(x + f * (t - x) for t, x in zip(target, w))
        self._settled = target is None or new_w == target
        self.changed = new_w != w
        if self.changed:
            self.weights = new_w
            self._blend()
        return self.params, self.gains, self.weights

    def _blend(self) -> None:
        w = self.weights
        heaviest = max(range(len(w)), key=w.__getitem__)
        self.active = self.names[heaviest]
        if w[heaviest] == 1.0:  # one set alone: no blending, no allocation
            self.params = self._friction[heaviest]
            self.gains = self._pids[heaviest] if self._pids else None
            return
        cols = self._friction_columns
        if len(cols) == 1:
            self.params = _blend_columns(LuGreParams, _LUGRE_FIELDS, cols[0], w)
        else:
            self.params = DirectionalParams(_blend_columns(LuGreParams, _LUGRE_FIELDS, cols[0], w),
                                            _blend_columns(LuGreParams, _LUGRE_FIELDS, cols[1], w))
        if self._pids:
            self.gains = _blend_columns(PIDGains, _PID_FIELDS, self._pid_columns, w)
        mixed = frozenset(name for name, x in zip(self.names, w) if x > 0.0)
        if mixed not in self._warned:
            message = passivity_warning(self.params)
            if message:  # once per combination of sets
                self._warned.add(mixed)
                self.warnings.append(f"schedule blend of {', '.join(sorted(mixed))} "
                                     f"(weights {', '.join(f'{x:.3f}' for x in w)}): {message}")
