"""Identification from sliding of any motion: pure functions, no I/O.

Sines, scans and ramps slide too, not only constant-speed stretches. Where the bristles have
settled (enough travel since the last reversal or rest) and the speed changes slowly next to
their time constant, LuGre friction equals its steady value at the current speed (quasi-steady):

    Kt·i − J·a = Fc·sgn v + (Fs − Fc)·exp(−|v/vs|^δ)·sgn v + sigma2·v   (+ offsets)

- :func:`sliding_samples`: velocity and acceleration from the encoder (Savitzky–Golay), the
  friction estimate Kt·i − J·a, and which ticks are quasi-steady sliding (the rules are in
  that function);
- :func:`binned_friction_points`: those ticks binned by speed per direction, the points a
  Stribeck fit takes (the same fields as the constant-velocity sweep's points);
- :func:`fit_inertia`: J (with the static friction as nuisance terms) from the ticks of a motion
  with large accelerations, by linear least squares;
- :func:`ramp_stiffness`: a rough pre-sliding stiffness from the start of a breakaway ramp (to size
  the pre-sliding experiment when the prior's sigma0 is far off).

Units (rotary SI): [rad], [rad/s], [rad/s²], [N·m], [kg·m²], [s].
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np
from scipy.signal import savgol_filter


@dataclass(frozen=True)
class SlidingSamples:
    """Per-tick quantities of :func:`sliding_samples` (arrays of one length)."""

    v: np.ndarray  # smoothed velocity [rad/s]
    a: np.ndarray  # smoothed acceleration [rad/s²]
    torque: np.ndarray  # smoothed measured torque Kt·i [N·m]
    friction: np.ndarray  # torque − J·a [N·m]
    travel: np.ndarray  # travel since the last reversal or rest [rad]
    steady: np.ndarray  # bool: quasi-steady sliding


def smoothing_ticks(dt_s: float, window_s: float = 0.02) -> int:
    """Odd Savitzky–Golay window of about ``window_s`` (at least 7 ticks)."""
    k = max(7, int(round(window_s / dt_s)))
    return k if k % 2 else k + 1


def travel_since_reversal(x: np.ndarray, v: np.ndarray, v_rest: float) -> np.ndarray:
    """Distance moved since the velocity last changed sign or was below ``v_rest`` [rad]."""
    out = np.zeros_like(x)
    start = x[0] if x.size else 0.0
    sign = 0
    for i in range(x.size):
        s = 0 if abs(v[i]) < v_rest else (1 if v[i] > 0 else -1)
        if s == 0 or s != sign:
            start = x[i]
            sign = s
        out[i] = abs(x[i] - start)
    return out


def sliding_samples(t, pos, torque, *, J: float, rad_per_count: float, presliding_rad: float,
                    settle_lengths: float = 10.0, lag_fraction: float = 0.05,
                    valid=None, window_s: float = 0.02) -> SlidingSamples:
    """Velocity, acceleration, friction estimate and the quasi-steady sliding mask of a record.

    ``presliding_rad``: the pre-sliding length Fs/sigma0 of the best known set [rad].
    A tick is quasi-steady sliding when

    - the axis has travelled at least ``settle_lengths`` pre-sliding lengths since the last
      reversal or rest (the bristle deflection approaches its steady value exponentially over
      that length; at 10 lengths it is within 5e-5 of it), and
    - the bristle time constant g/(sigma0·|v|) ≈ presliding_rad/|v| is below ``lag_fraction``
      of the time |v/a| in which the speed changes (the deflection follows the speed), and
    - the speed covers at least 2 counts over the smoothing window (the encoder resolves it).

    ``valid``: ticks to consider (faults, a disabled drive excluded)."""
    t = np.asarray(t, dtype=float)
    x = np.asarray(pos, dtype=float)
    tq = np.asarray(torque, dtype=float)
    dt = float(np.median(np.diff(t)))
    k = smoothing_ticks(dt, window_s)
    if x.size < k + 2:
        raise ValueError(f"record of {x.size} ticks is shorter than the smoothing window ({k})")
    # quintic fits: the second derivative of a cubic fit of a sine of ω over ±h ticks is low by
    # O((ωh)²) (J +0.4 … +0.8 % at 8–12 rad/s with a 21 ms window); a quintic's by O((ωh)⁴)
    v = savgol_filter(x, k, 5, deriv=1, delta=dt)
    a = savgol_filter(x, k, 5, deriv=2, delta=dt)
    tq_s = savgol_filter(tq, k, 5)
    v_min = 2.0 * rad_per_count / (k * dt)
    travel = travel_since_reversal(x, v, v_min)
    speed = np.abs(v)
    tau = presliding_rad / np.maximum(speed, 1e-300)
    changes = speed / np.maximum(np.abs(a), 1e-300)
    steady = (speed >= v_min) & (travel >= settle_lengths * presliding_rad) & (tau <= lag_fraction * changes)
    # the smoothing window must not reach over a reversal or a rest (the friction's sign flip
    # smoothed into the torque near a reversal, where a sine's |a| is largest, biased J by
    # +0.5 … +0.9 % on the simulated plants), nor over an invalid tick or the record's ends
    half = k // 2
    moving = np.where(speed >= v_min, np.sign(v), 0.0)
    bad = np.zeros(x.size, dtype=bool)
    bad[1:] = moving[1:] != moving[:-1]
    bad[:half] = bad[-half:] = True
    if valid is not None:
        bad |= ~np.asarray(valid, dtype=bool)
    steady &= ~(np.convolve(bad.astype(float), np.ones(k), mode="same") > 0)
    return SlidingSamples(v=v, a=a, torque=tq_s, friction=tq_s - J * a, travel=travel, steady=steady)


def binned_friction_points(s: SlidingSamples, *, dt_s: float, bins_per_decade: float = 6.0,
                           min_samples: int = 20, source: str = "log") -> list[dict[str, Any]]:
    """Quasi-steady ticks binned by speed (log-spaced, per direction) → friction points.

    Per bin and direction: speed = mean |v|, friction_nm = mean of sgn(v)·(Kt·i − J·a) and its
    standard error (the sample spread over the number of independent samples: ticks within one
    smoothing window are correlated, so n counts windows, not ticks). A ``both`` point per bin
    with both directions: the mean of the two magnitudes (a direction-independent offset cancels;
    a position-dependent torque cancels where the two directions cover the same angles, as the
    returns of a sine or a scan do); its ``ripple_nm`` is that offset's size, which the
    per-direction values carry. Bins with fewer than ``min_samples`` ticks are left out."""
    speed = np.abs(s.v)
    sel = s.steady
    if not sel.any():
        return []
    lo, hi = float(speed[sel].min()), float(speed[sel].max())
    n_bins = max(1, int(math.ceil(bins_per_decade * math.log10(hi / lo)))) if hi > lo else 1
    edges = np.geomspace(lo, hi * (1 + 1e-12), n_bins + 1)
    which = np.clip(np.searchsorted(edges, speed, side="right") - 1, 0, n_bins - 1)
    window_ticks = 20  # correlation length used for the standard error [ticks]
    points: list[dict[str, Any]] = []
    for b in range(n_bins):
        per_dir: dict[int, dict[str, Any]] = {}
        for d in (1, -1):
            m = sel & (which == b) & (np.sign(s.v) == d)
            n = int(m.sum())
            if n < min_samples:
                continue
            F = d * s.friction[m]
            n_eff = max(1.0, n / window_ticks)
            per_dir[d] = {
                "speed_rad_s": float(speed[m].mean()), "direction": "forward" if d > 0 else "reverse",
                "torque_nm": float(np.mean(s.friction[m])), "friction_nm": float(F.mean()),
                "se_nm": float(F.std(ddof=1) / math.sqrt(n_eff)) if n > 1 else math.nan,
                "n": n, "speed_span_rad_s": [float(edges[b]), float(edges[b + 1])],
                "used": True, "reason": "", "pass": source,
            }
        points += list(per_dir.values())
        if 1 in per_dir and -1 in per_dir:
            f, r = per_dir[1], per_dir[-1]
            points.append({
                "speed_rad_s": 0.5 * (f["speed_rad_s"] + r["speed_rad_s"]), "direction": "both",
                "friction_nm": 0.5 * (f["friction_nm"] + r["friction_nm"]),
                "offset_nm": 0.5 * (f["torque_nm"] + r["torque_nm"]),
                # what a direction's value carries besides friction: a direction-independent
                # torque (offset, cogging over the angles covered), the floor of its error
                "ripple_nm": abs(0.5 * (f["torque_nm"] + r["torque_nm"])),
                "se_nm": 0.5 * math.hypot(f["se_nm"], r["se_nm"]), "n": f["n"] + r["n"],
                "used": True, "reason": "", "pass": source,
            })
    return points


@dataclass(frozen=True)
class InertiaFit:
    """Result of :func:`fit_inertia`."""

    J: float  # [kg·m²]
    se: float  # standard error [kg·m²]
    coefficients: dict[str, float]  # every regressor's coefficient
    rms_residual_nm: float
    n: int  # ticks used
    accel_rms_rad_s2: float  # rms acceleration of the ticks used


def fit_inertia(s: SlidingSamples, pos, *, static: Optional[Callable[[np.ndarray], np.ndarray]] = None,
                window_ticks: int = 20, position_bins: int = 48) -> InertiaFit:
    """J from quasi-steady sliding ticks with acceleration, by linear least squares on

        Kt·i − F_static(v) = J·a + c_c·sgn v + c_v·v + T_pos(x)

    ``static``: the identified steady friction with its sign (the Stribeck sweep's curve); the
    terms c_c, c_v absorb what it gets wrong in Fc and sigma2. T_pos is any position-dependent
    torque (cogging, unbalance, a cable, an offset): one level per position bin
    (``position_bins`` over the range covered). Within one sine a = ω²·(A − x) is a function of
    x, so T_pos is told apart from J·a only by a motion with at least two frequencies over the
    same angles (the inertia experiment's two sines); cogging left in the fit biased J by −0.6 %
    on the simulated table. The standard error counts one independent residual per
    ``window_ticks`` (neighbouring residuals share the smoothing window)."""
    m = s.steady
    n = int(m.sum())
    if n < 50:
        raise ValueError(f"only {n} quasi-steady sliding ticks: too few for an inertia fit")
    v, a, x = s.v[m], s.a[m], np.asarray(pos, dtype=float)[m]
    y = s.torque[m] - (static(v) if static is not None else 0.0)
    edges = np.linspace(x.min(), x.max() * (1 + 1e-12) + 1e-15, position_bins + 1)
    which = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, position_bins - 1)
    occupied = np.unique(which)
    bins = (which[:, None] == occupied[None, :]).astype(float)
    cols = {"J": a, "coulomb": np.sign(v), "viscous": v}
    A = np.column_stack(list(cols.values()) + [bins])
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    res = y - A @ coef
    dof = max(1, n - A.shape[1])
    s2 = float(res @ res / dof) * window_ticks
    cov = np.linalg.pinv(A.T @ A) * s2
    levels = coef[len(cols):]
    return InertiaFit(J=float(coef[0]), se=float(math.sqrt(max(cov[0, 0], 0.0))),
                      coefficients={**{k: float(c) for k, c in zip(cols, coef)},
                                    "position_torque_span_nm": float(np.ptp(levels))},
                      rms_residual_nm=float(math.sqrt(np.mean(res**2))), n=n,
                      accel_rms_rad_s2=float(math.sqrt(np.mean(a**2))))


def ramp_stiffness(pos, torque, direction: int, *, ramp_start_index: int, level_nm: float,
                   rad_per_count: float) -> float:
    """A rough pre-sliding stiffness [N·m/rad] from a torque ramp from rest: the torque reached
    ``level_nm`` (a fraction of the breakaway, say 0.3·Fs, where the deflection is nearly
    linear) over the displacement it took. NaN when the displacement is under 3 counts."""
    x = (np.asarray(pos, dtype=float) - pos[ramp_start_index]) * direction
    tq = np.asarray(torque, dtype=float) * direction
    seg = tq[ramp_start_index:]
    hits = np.flatnonzero(seg >= level_nm)
    if not hits.size:
        return math.nan
    i = ramp_start_index + int(hits[0])
    dx = float(np.median(x[max(ramp_start_index, i - 5):i + 6]))
    if dx < 3 * rad_per_count:
        return math.nan
    return level_nm / dx


__all__ = ["InertiaFit", "SlidingSamples", "binned_friction_points", "fit_inertia", "ramp_stiffness",
           "sliding_samples", "smoothing_ticks", "travel_since_reversal"]
