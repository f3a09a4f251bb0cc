"""Friction identification experiments on any backend (simulated table, emulator, real drive).

Order: ``breakaway`` (Fs, and a rough stiffness from the ramps' start), ``presliding``
(sigma0), ``sigma1`` (ringing recorded from the rest the pre-sliding loops leave; fitted at the
end), ``sweep`` (settled by the measured Fs/sigma0), ``inertia`` (J). The sweep needs the
bristle length Fs/sigma0 to settle each speed (soft bristles need 30× more travel than the
shipped prior says), and the sigma1 fit needs J. Each experiment is a control law run by the one
:class:`~controller.loop.ControlLoop` (:mod:`hil.identify_laws`) on the injected clock
(lockstep SimClock: fast; RealClock: a machine): the loop's safety checks, safe-stop path,
SIGINT/SIGTERM handling and crash-safe log (``<out>/experiments/<name>/run.fctl``, one per
experiment). Any fault ends the identification: the loop's stop path brings the torque to zero
and disables the drive, and :class:`IdentificationError` names the experiment, the fault, the
time and the log. Each experiment starts with ``enable()`` and ends with the loop's stop path
and ``disable()``, so the computations between experiments never leave a drive enabled without
commands (a drive-side watchdog would trip).

Experiments (defaults in :class:`IdentifySettings`; described in the sweep-first order they
were developed in, run in the order above):

``sweep`` — constant-velocity sweep. Speeds log-spaced from 0.01·vs to 10·vs of the prior, plus a
few up to 60 % of ``safety.velocity_limit_rad_s`` (σ2 lives there). At each speed the axis moves
forward over a stretch of angle at constant speed, rests, and comes back over the same stretch.
Speed is held by a position loop following a trapezoidal ramp (the project's PID with the
triple-pole rule; a velocity PI loop is the same controller, its integral being the position
error) plus feedforward of the prior's Stribeck curve and J·a_ref. The loop's bandwidth is a
compromise measured on the simulated table (2^24 counts, 1 kHz):

- too soft and sliding on the falling part of the curve is unstable: the derivative gain must
  exceed the negative slope of the Stribeck curve ((Fs − Fc)·√2·e^(−½)/vs at most for δ = 2;
  6.9 N·m·s/rad on the reference table). At 2–5 Hz the axis stick-slipped (mean torque 46 %
  low at 1e-4 rad/s);
- too stiff and, at a fraction of a count per tick, the loop turns encoder quantization into a
  velocity dither as large as the speed: the bristles never reach their steady deflection and
  the mean friction drops (BRIEF §4's warning). At 40 Hz: −90 % at 1e-4 rad/s; with vs = 4 mrad/s
  at 4e-5 rad/s: −19 % at 20 Hz, +0.3 % at 5–12 Hz. The windowed velocity cannot see this dither.

So the bandwidth is scheduled per speed: ``bandwidth_hz`` (12 Hz), raised only where the prior's
curve falls steeply near that speed (kd = 3Jω >= 2 × the local negative slope, see
:func:`sweep_bandwidth`). With it the sweep's steady torques came within 0.3 % of the true curve
from 1e-4 to 0.6 rad/s. Each speed settles for ``settle_travel`` pre-sliding lengths Fs/sigma0
(from rest the bristles load and the loop catches up; 10–15 lengths left errors of 1–3 % at the
lowest speeds, 30 sufficed) and at least ``settle_s``, then dwells. The steady torque is Kt·i
averaged over the dwell, minus J·Δv/T (≈0); forward and reverse are averaged over the same stretch
of angle, so cogging, unbalance and offsets cancel in the half difference (they do not in the per-
direction values, whose uncertainty therefore includes the measured position-dependent torque
ripple). Points whose windowed velocity shows stick-slip are dropped
(:func:`hil.identify_fit.detect_stick_slip`). When the fitted vs lies outside [vs/1.5, 1.5·vs] of
the prior, a second pass adds speeds around the fitted vs. When no steady point lies on the
falling part (all rejected), Fc and σ2 come from a Coulomb + viscous line and vs stays the
prior's, with a note, unless the points bound it lower: the Stribeck excess Fs − Fc (the
breakaway's) must have fallen to within each point's residual by its speed (:func:`_line_vs`);
a low point well above the line of the faster ones is on the falling part and left out of the
line (:func:`_flat_line`).

``breakaway`` — from rest (zero torque, settled), a torque ramp to 2·Fs of the prior over 4 s,
alternating directions at the same place. The breakaway torque is the peak of the
inertia-corrected friction estimate up to gross sliding (:func:`hil.identify_fit.breakaway_from_ramp`);
onset = windowed velocity above 0.1·vs. Preferred for Fs (BRIEF §4); the mean of the two
directions cancels position-dependent torques.

``presliding`` — torque A·sin(2πft), A = 0.4·Fc, 1 Hz, 6 cycles, the first discarded: sigma0 from
the central slope of the torque–position loops (:func:`hil.identify_fit.presliding_sigma0`). The
loop spans only some counts (2·A/sigma0: 15 counts on the reference table); see that function
for how quantization enters the standard error. A guard stops it if the axis slides (travel
beyond 4× the expected loop), and it is retried at half amplitude once.

``sigma1`` — small torque steps inside pre-sliding (0 → +A → 0 → −A, A = 0.3·Fc, 0.4 s each,
three repetitions): the bristle spring rings against the inertia (≈100 Hz on the reference
table), and sigma1 is fitted to the ringing with sigma0's value for the frequency left free
(:func:`hil.identify_fit.fit_sigma1_ringing` says why). Needs the believed J to be right:
sigma1 scales with it: fitted with the J of ``inertia`` when it ran.

``inertia`` — the axis follows two sines while sliding (peak speed ``inertia_speed_fraction`` of
the velocity limit, peak J·a ``inertia_torque_factor``·Fs; the second at half the frequency
and twice the amplitude), closed-loop like the sweep; J from the quasi-steady sliding ticks
(:func:`hil.identify_sliding.fit_inertia`, with the sweep's curve subtracted and a
position-binned torque). J ± its SE goes to params.yaml (``J:``) and is used by the sigma1 fit
when its SE is under 5 %; otherwise the config's J stays (a warning).

A ramp does not read Fs: LuGre's breakaway depends on the torque rate (the bristles creep while
they load) and, where vs lies below that creep speed, on the Stribeck curve below it. The
breakaway is first corrected for the bristle creep at onset (:func:`bristle_creep_fraction`),
then solved for Fs on the identified model (:func:`_ramp_corrected_fs`: the same ramp simulated
and read by the same function, :func:`hil.identify_fit.ramp_breakaway_model`); where that
reading hardly depends on Fs (elasticity below ``RAMP_FS_ELASTICITY_MIN``) Fs is the sweep's.

Outputs in ``out_dir``: ``params.yaml`` (``friction:`` usable as ``controller.friction``,
``uncertainty:`` standard errors, ``diagnostics:``), ``identify.json`` (every raw point and
trial), ``experiments/<name>/run.fctl`` (the tick records), ``identify.png`` (the report).
"""

from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import yaml
from scipy.optimize import brentq

from controller.config import Config
from controller.friction import DirectionalParams, FrictionParams, LuGreParams, g
from controller.gains import PIDGains
from controller.reference import PiecewiseReference, Reference, rest_to_rest
from controller.units import ROTARY, AxisUnits
from drivers.backend import Backend, Clock, DriveState
from drivers.errors import FrictionctlError

from .identify_sliding import InertiaFit, fit_inertia, ramp_stiffness, sliding_samples
from .identify_laws import (
    BreakawayRamp,
    ExperimentRunner,
    IdentificationError,
    Record,
    SineSequence,
    TorqueProfile,
    Track,
)
from .identify_fit import (
    Breakaway,
    LineFit,
    PreslidingFit,
    Sigma1Fit,
    StribeckFit,
    breakaway_from_ramp,
    constant_velocity_segments,
    detect_stick_slip,
    fit_coulomb_viscous,
    fit_sigma1_ringing,
    fit_stribeck,
    fit_stribeck_levels,
    position_dependent_ripple,
    position_matched_means,
    presliding_sigma0,
    ramp_breakaway_model,
    steady_torque,
    stribeck_determined,
    stribeck_vs_bound,
    windowed_velocity,
)

EXPERIMENTS = ("breakaway", "presliding", "sigma1", "sweep", "inertia")
PARAM_NAMES = ("Fc", "Fs", "vs", "sigma0", "sigma1", "sigma2", "delta")

Progress = Callable[[float, float], None]


# --- settings -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IdentifySettings:
    """Experiment design. Speeds as factors of the prior's vs, torques as factors of its Fc/Fs."""

    # sweep
    n_speeds: int = 12  # constant-velocity points per direction
    speed_min_factor: float = 0.01  # lowest speed = this × vs [-]
    speed_knee_factor: float = 10.0  # the low band ends at this × vs [-]
    speed_top_fraction: float = 0.6  # highest speed = this × safety.velocity_limit_rad_s [-]
    settle_s: float = 0.3  # at least this long at speed before the dwell [s]
    settle_travel: float = 30.0  # and at least this many pre-sliding lengths Fs/sigma0 [-]
    max_settle_s: float = 5.0  # [s]
    dwell_s: float = 2.0  # averaging window at each speed and direction [s]
    rest_s: float = 0.3  # rest between passes [s]
    accel_rad_s2: float = 2.0  # ramp acceleration [rad/s²]
    bandwidth_hz: float = 12.0  # position-loop triple-pole bandwidth, at least [Hz]
    derivative_cutoff_hz: float = 100.0  # PID derivative filter [Hz]
    max_travel_rad: float = math.inf  # longest stretch one pass may travel [rad]
    refine: bool = True  # add speeds around the fitted vs when the prior's vs was far off
    stick_rel_std_max: float = 0.3  # stick-slip: windowed velocity spread / |v| above this [-]
    stick_fraction_max: float = 0.1  # stick-slip: share of windows near standstill above this [-]
    stick_window_counts: float = 20.0  # velocity windows span at least this many counts [-]
    fit_delta: bool = False  # fit the Stribeck exponent (else hold ``delta``)
    delta: float = 2.0  # [-]
    settled_lengths_min: float = 10.0  # a point whose travel before its dwell is under this many
    #   pre-sliding lengths Fs/sigma0 (measured sigma0) is rejected: bristles not settled [-]
    # breakaway
    breakaway_trials: int = 2  # per direction, alternating
    breakaway_peak_factor: float = 2.0  # ramp ends at this × Fs of the prior [-]
    breakaway_ramp_s: float = 4.0  # [s]
    breakaway_rest_s: float = 0.5  # zero torque before each ramp [s]
    breakaway_onset_factor: float = 0.1  # onset speed = this × vs [-]
    # pre-sliding (sigma0)
    presliding_amplitude: float = 0.4  # × Fc [-]
    presliding_frequency_hz: float = 1.0  # [Hz]
    presliding_cycles: int = 6  # the first is discarded
    # ringing (sigma1)
    ringing_amplitude: float = 0.3  # × Fc [-]
    ringing_hold_s: float = 0.4  # [s]
    ringing_repeats: int = 3
    # inertia (J): sines at two frequencies, sliding fast, large accelerations
    inertia_speed_fraction: float = 0.3  # peak speed = this × safety.velocity_limit_rad_s [-]
    inertia_torque_factor: float = 1.5  # peak J·a = this × Fs (bounded by half the torque limit) [-]
    inertia_cycles: int = 3  # whole cycles per frequency
    # direction-dependent result
    asymmetry_sigmas: float = 3.0  # forward/reverse differ beyond this many standard errors …
    asymmetry_min_rel: float = 0.03  # … and by more than this fraction [-]

    def __post_init__(self) -> None:
        positive = ("speed_min_factor", "speed_knee_factor", "speed_top_fraction", "dwell_s",
                    "accel_rad_s2", "bandwidth_hz", "derivative_cutoff_hz", "max_travel_rad",
                    "breakaway_peak_factor", "breakaway_ramp_s", "breakaway_onset_factor",
                    "presliding_amplitude", "presliding_frequency_hz", "ringing_amplitude",
                    "ringing_hold_s", "delta", "max_settle_s", "inertia_speed_fraction",
                    "inertia_torque_factor")
        for name in positive:
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}: must be > 0, got {getattr(self, name)!r}")
        if self.inertia_cycles < 1:
            raise ValueError(f"inertia_cycles: must be >= 1, got {self.inertia_cycles}")
        for name in ("settle_s", "settle_travel", "settled_lengths_min", "rest_s", "breakaway_rest_s", "asymmetry_sigmas",
                     "asymmetry_min_rel"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name}: must be >= 0, got {getattr(self, name)!r}")
        if self.n_speeds < 6:
            raise ValueError(f"n_speeds: must be >= 6 (the fit has 4-5 parameters), got {self.n_speeds}")
        if self.breakaway_trials < 1 or self.ringing_repeats < 1:
            raise ValueError("breakaway_trials and ringing_repeats must be >= 1")
        if self.presliding_cycles < 2:
            raise ValueError(f"presliding_cycles: must be >= 2 (the first is discarded), "
                             f"got {self.presliding_cycles}")
        if not 0 < self.speed_top_fraction <= 1:
            raise ValueError(f"speed_top_fraction: must be in (0, 1], got {self.speed_top_fraction}")
        if not 0 < self.presliding_amplitude < 1 or not 0 < self.ringing_amplitude < 1:
            raise ValueError("presliding_amplitude and ringing_amplitude must be in (0, 1) (× Fc)")


# --- results --------------------------------------------------------------------------------------


@dataclass
class IdentifyResult:
    """What :func:`identify` found. ``friction`` loads as ``controller.friction``."""

    friction: FrictionParams
    uncertainty: dict[str, Any]
    diagnostics: dict[str, Any]
    sources: dict[str, str]
    directional: bool
    points: list[dict[str, Any]]
    breakaway: list[dict[str, Any]] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    experiment_s: float = 0.0  # time spent in experiments on the run clock [s]
    wall_s: float = 0.0
    J: Optional[float] = None  # identified inertia [kg·m²] (None: not identified)
    J_se: float = math.nan  # its standard error [kg·m²]

    def params_block(self) -> dict[str, Any]:
        """The ``friction:`` block as plain data."""
        return _friction_block(self.friction)


# --- planning -------------------------------------------------------------------------------------


def planning_params(prior: FrictionParams) -> LuGreParams:
    """One set to plan experiments with: a directional prior's two sets averaged."""
    if isinstance(prior, LuGreParams):
        return prior
    f, r = prior.forward, prior.reverse
    vals = {n: 0.5 * (getattr(f, n) + getattr(r, n)) for n in PARAM_NAMES}
    vals["Fs"] = max(vals["Fs"], vals["Fc"])
    return LuGreParams(**vals)


def sweep_speeds(cfg: Config, prior: FrictionParams, settings: IdentifySettings) -> list[float]:
    """The sweep's speeds [rad/s], ascending: log-spaced over [min_factor·vs, knee_factor·vs]
    and, above it, a quarter of the points log-spaced up to the top speed."""
    p = planning_params(prior)
    lo = settings.speed_min_factor * p.vs
    top = settings.speed_top_fraction * cfg.safety.velocity_limit_rad_s
    knee = settings.speed_knee_factor * p.vs
    n = settings.n_speeds
    if top <= lo * 10:
        raise IdentificationError(
            f"identify: top speed {top:.4g} rad/s (speed_top_fraction × safety.velocity_limit_rad_s) "
            f"is not above 10 × the lowest speed {lo:.4g} rad/s: no Stribeck curve to sweep")
    if knee * 1.5 >= top:
        return [float(v) for v in np.geomspace(lo, top, n)]
    n_high = max(2, int(round(n / 4)))
    n_low = n - n_high
    low = np.geomspace(lo, knee, n_low)
    high = np.geomspace(knee, top, n_high + 1)[1:]
    return [float(v) for v in np.concatenate([low, high])]


REFINE_FACTORS = (0.4, 0.7, 1.0, 1.4, 2.0)  # the refine sweep's speeds, × the fitted vs


def refine_speeds(vs_fit: float, lowest: float, top: float) -> list[float]:
    """The refine sweep's speeds [rad/s], ascending: :data:`REFINE_FACTORS` × the first sweep's
    vs, up to ``top``. The curve's shape needs points below vs: one that falls below the
    sweep's ``lowest`` speed (the slowest it was planned to run) is taken at that speed, not
    dropped (dropped, a low-vs plant kept one point below vs, and whether a stick-slip check
    passed it at 0.32 against 0.3 decided vs between −7 and +13 %)."""
    return sorted({max(f * vs_fit, lowest) for f in REFINE_FACTORS if f * vs_fit <= top})


def stribeck_descent(p: LuGreParams, v: float) -> float:
    """The steepest negative slope of the prior's steady curve within [v/2, 2v] [N·m·s/rad]
    (0 where the curve rises): −d/du[(Fs − Fc)·exp(−(u/vs)^δ) + σ2·u]."""
    u = np.geomspace(0.5 * v, 2.0 * v, 25) / p.vs
    d = p.delta
    slope = (p.Fs - p.Fc) * d / p.vs * u ** (d - 1.0) * np.exp(-(u**d)) - p.sigma2
    return float(max(0.0, slope.max()))


def sweep_bandwidth(J: float, prior: FrictionParams, settings: IdentifySettings, rate_hz: float,
                    v: float) -> float:
    """Position-loop bandwidth at speed v [Hz]: ``bandwidth_hz``, raised where the prior's
    Stribeck curve falls steeply near v so that kd = 3Jω >= 2 × that negative slope (else
    sliding there is unstable: stick-slip), capped at rate/25.

    Not stiffer than needed: at speeds of a fraction of a count per tick, a stiff loop turns the
    encoder quantization into a velocity dither comparable to the speed itself, and the mean
    friction drops (measured on the simulated table with vs = 4 mrad/s at 4e-5 rad/s:
    −19 % at 20 Hz, −30 % at 25 Hz, +0.3 % at 5–12 Hz)."""
    p = planning_params(prior)
    bw_need = 2.0 * stribeck_descent(p, v) / (3.0 * J) / (2.0 * math.pi)
    return float(min(max(settings.bandwidth_hz, bw_need), rate_hz / 25.0))


def settle_time(v: float, p: LuGreParams, settings: IdentifySettings) -> float:
    """Time at speed before the dwell [s]: ``settle_travel`` pre-sliding lengths, >= settle_s."""
    travel = settings.settle_travel * p.Fs / p.sigma0
    return float(min(settings.max_settle_s, max(settings.settle_s, travel / abs(v))))


@dataclass(frozen=True)
class _Pass:
    speed: float
    direction: int
    window: tuple[float, float]  # dwell window on the sweep's clock [s]
    t_start: float = 0.0  # start of the move [s]


def build_sweep(speeds: list[float], p: LuGreParams, settings: IdentifySettings
                ) -> tuple[PiecewiseReference, list[_Pass], float, list[dict[str, Any]]]:
    """The sweep as one reference: per speed forward, rest, back over the same stretch, rest.

    Returns (reference, passes with their dwell windows, duration [s], skipped speeds). Each pass
    cruises for settle + dwell + settle, so the reverse dwell covers the forward one's stretch."""
    acc = settings.accel_rad_s2
    segments: list[tuple[float, ...]] = [(settings.rest_s, 0.0, 0.0, 0.0)]
    passes: list[_Pass] = []
    skipped: list[dict[str, Any]] = []
    t = settings.rest_s
    for v in speeds:
        settle = settle_time(v, p, settings)
        dwell = settings.dwell_s
        dist = v * (2.0 * settle + dwell) + v * v / acc
        if dist > settings.max_travel_rad:
            dwell = (settings.max_travel_rad - v * v / acc) / v - 2.0 * settle
            if dwell < 0.25 * settings.dwell_s:
                skipped.append({"speed_rad_s": v, "reason": "max_travel_rad too short for this speed"})
                continue
            dist = v * (2.0 * settle + dwell) + v * v / acc
        for direction, (start, end) in ((1, (0.0, dist)), (-1, (dist, 0.0))):
            move = rest_to_rest(end - start, v, acc)
            t_acc = move[0][0]
            w0 = t + t_acc + settle
            passes.append(_Pass(v, direction, (w0, w0 + dwell), t))
            segments += move
            t += sum(seg[0] for seg in move)
            segments.append((settings.rest_s, 0.0, 0.0, end))
            t += settings.rest_s
    ref = PiecewiseReference(segments)
    return ref, passes, t, skipped


def sweep_reference(cfg: Config, *, prior: FrictionParams | None = None,
                    settings: IdentifySettings | None = None) -> tuple[Reference, float]:
    """The identification sweep as a loop reference, and its duration [s].

    For recording a sweep with the ordinary control loop (``frictionctl run``/``sim`` with
    compensation off) and fitting it later with :func:`identify_from_log`."""
    settings = settings or IdentifySettings()
    prior = prior if prior is not None else cfg.controller.friction
    ref, _, duration, _ = build_sweep(sweep_speeds(cfg, prior, settings), planning_params(prior), settings)
    return ref, duration


# --- analysis helpers ---------------------------------------------------------------------------


def _window(rec: Record, w: tuple[float, float]) -> slice:
    i0 = int(np.searchsorted(rec.t, w[0]))
    i1 = int(np.searchsorted(rec.t, w[1]))
    return slice(i0, i1)


def _analyse_speed(v: float, segs: dict[int, tuple[np.ndarray, np.ndarray]], dt: float, J: float,
                   q: float, settings: IdentifySettings) -> list[dict[str, Any]]:
    """Points for one speed from its forward/reverse (position, torque) windows."""
    out: dict[int, dict[str, Any]] = {}
    for d, (x, tq) in segs.items():
        chk = detect_stick_slip(x, dt, d * v, rad_per_count=q, window_counts=settings.stick_window_counts,
                                rel_std_max=settings.stick_rel_std_max,
                                stuck_fraction_max=settings.stick_fraction_max)
        mean, se = steady_torque(tq, x, dt, J)
        vw = windowed_velocity(x, dt, chk.window_ticks)
        v_meas = float(np.mean(vw)) if vw.size else math.nan
        reasons = []
        if chk.stick_slip:
            reasons.append("stick-slip: " + chk.reason)
        if vw.size and abs(v_meas - d * v) > 0.05 * v:
            reasons.append(f"mean speed {v_meas:.4g} rad/s is not the reference {d * v:.4g}")
        out[d] = {
            "speed_rad_s": v, "direction": "forward" if d > 0 else "reverse",
            "torque_nm": mean, "friction_nm": d * mean, "se_nm": se, "n": int(tq.size),
            "measured_speed_rad_s": v_meas, "rel_std": chk.rel_std, "stuck_fraction": chk.stuck_fraction,
            "window_ticks": chk.window_ticks, "resolved": chk.resolved,
            "used": not reasons, "reason": "; ".join(reasons),
            "position_span_rad": [float(x.min()), float(x.max())] if x.size else [math.nan, math.nan],
        }
    points = list(out.values())
    if 1 in segs and -1 in segs:
        (xf, tf), (xr, tr) = segs[1], segs[-1]
        mf, mr, nf, nr, overlap = position_matched_means(xf, tf, xr, tr)
        # inertia corrections of each window (≈0 at constant speed) applied to the matched means
        cf = float(np.mean(tf)) - out[1]["torque_nm"]
        cr = float(np.mean(tr)) - out[-1]["torque_nm"]
        both = out[1]["used"] and out[-1]["used"]
        reason = "" if both else "rejected in " + " and ".join(
            o["direction"] for o in out.values() if not o["used"])
        points.append({
            "speed_rad_s": v, "direction": "both", "friction_nm": 0.5 * ((mf - cf) - (mr - cr)),
            "offset_nm": 0.5 * ((mf - cf) + (mr - cr)), "n": nf + nr, "overlap": overlap,
            "ripple_nm": position_dependent_ripple(xf, tf, xr, tr),
            "se_nm": 0.5 * math.hypot(out[1]["se_nm"], out[-1]["se_nm"]),
            "used": both, "reason": reason,
        })
    return points


def position_ripple(points: list[dict[str, Any]]) -> float:
    """The largest position-dependent torque ripple seen at any speed [N·m] (0 if unknown)."""
    vals = [p.get("ripple_nm", 0.0) for p in points if p["direction"] == "both" and p["used"]]
    vals = [v for v in vals if v is not None and math.isfinite(v)]
    return float(max(vals)) if vals else 0.0


def error_floor(points: list[dict[str, Any]], direction: str) -> float:
    """Per-point error floor of one direction's points [N·m]: the position ripple (a direction's
    points carry the position-dependent torque of their stretch of angle; it cancels only in the
    two directions' half-difference, ``both``, whose floor is 0)."""
    return 0.0 if direction == "both" else position_ripple(points)


def _point_se(point: dict[str, Any], floor_nm: float) -> float:
    """A sweep point's standard error with the error floor in quadrature (a non-finite SE: the
    floor alone)."""
    se = point["se_nm"]
    return math.hypot(se, floor_nm) if math.isfinite(se) else floor_nm


def _fit_points(points: list[dict[str, Any]], direction: str, settings: IdentifySettings,
                vs_guess: float, prior: Optional[LuGreParams] = None) -> tuple[Optional[StribeckFit], str]:
    """The Stribeck fit of one direction's used points; with fewer than 5 (and a ``prior``),
    Fc and Fs with the prior's vs, sigma2 and delta held."""
    used = [p for p in points if p["direction"] == direction and p["used"]]
    v = np.array([p["speed_rad_s"] for p in used])
    F = np.array([p["friction_nm"] for p in used])
    floor = error_floor(points, direction)
    if len(used) < (6 if settings.fit_delta else 5):
        if prior is None or len(used) < 3:
            return None, f"{len(used)} usable {direction} points: too few to fit"
        # too few speeds for the curve's shape: its levels only, the shape held at the prior
        return fit_stribeck_levels(v, F, vs=prior.vs, sigma2=prior.sigma2, delta=prior.delta,
                                   noise_floor_nm=floor), ""
    try:
        return fit_stribeck(v, F, delta=settings.delta, fit_delta=settings.fit_delta, vs_guess=vs_guess,
                            noise_floor_nm=floor), ""
    except ValueError as err:
        return None, f"{direction}: {err}"


def _quick_fc(points: list[dict[str, Any]]) -> Optional[float]:
    """A robust Fc for sizing the next experiments: the smallest used combined friction."""
    vals = [p["friction_nm"] for p in points if p["direction"] == "both" and p["used"]]
    if not vals:
        vals = [p["friction_nm"] for p in points if p["used"]]
    return float(min(vals)) if vals else None


# --- the identification -------------------------------------------------------------------------


def identify(cfg: Config, backend: Backend, clock: Clock, out_dir: str | Path, *,
             experiments: tuple[str, ...] = EXPERIMENTS, progress: Optional[Progress] = None,
             settings: IdentifySettings | None = None, prior: FrictionParams | None = None,
             plot: bool = True, stop_event: Optional[threading.Event] = None) -> IdentifyResult:
    """Run the identification experiments on ``backend`` and write the results to ``out_dir``.

    ``cfg``: loop rate, safety limits, believed J and Kt (controller), encoder resolution
    (plant.encoder), and the prior friction (controller.friction, unless ``prior`` is given: it
    sets the sweep's speeds and the experiments' torque levels). ``experiments``: any of
    ``EXPERIMENTS``, run in that order; a parameter no experiment measured keeps the prior's
    value (``diagnostics.sources`` says which). ``progress(done_s, total_s)``: called about once
    per second of experiment time (planned total; breakaway trials usually end early).

    ``stop_event``: set it (e.g. from a SIGINT/SIGTERM handler) to stop: the running experiment
    ramps the torque to zero, disables the drive and :class:`IdentificationError` says
    "stopped on request".

    The backend is opened if needed, enabled per experiment and left disabled (not closed).
    Raises :class:`IdentificationError` on a safety fault (after the safe stop; the partial raw
    data are still written to ``identify.json``) or when the data cannot be fitted.
    """
    wall0 = time.perf_counter()
    settings = settings or IdentifySettings()
    prior = prior if prior is not None else cfg.controller.friction
    unknown = [e for e in experiments if e not in EXPERIMENTS]
    if unknown:
        raise ValueError(f"experiments: unknown {unknown} (known: {', '.join(EXPERIMENTS)})")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    p = planning_params(prior)
    dt = cfg.loop.dt_s
    J = cfg.controller.J
    q = cfg.plant.encoder.rad_per_count

    speeds = sweep_speeds(cfg, prior, settings) if "sweep" in experiments else []
    total = _planned_seconds(settings, build_sweep(speeds, p, settings) if speeds else None, experiments)
    runner = ExperimentRunner(cfg, backend, clock, out, progress, total, stop_event)
    state = _State(cfg=cfg, settings=settings, prior=prior, p=p, dt=dt, J=J, q=q, J_prior=J)
    try:
        if "breakaway" in experiments:
            _run_breakaway(runner, state)
        if "presliding" in experiments:
            _run_presliding(runner, state)
        if "sigma1" in experiments:  # recorded here, from the rest the pre-sliding loops left;
            _run_ringing(runner, state)  # fitted at the end, with the identified J
        if "sweep" in experiments:
            # settle lengths from what was measured: Fs (breakaway) and sigma0 (pre-sliding)
            sweep_plan = build_sweep(speeds, state.p_measured(), settings)
            runner.total_s += sweep_plan[2] - build_sweep(speeds, p, settings)[2]
            _run_sweep(runner, state, sweep_plan, tag="sweep")
            fit = state.fits.get("both")
            if (settings.refine and fit is not None and "both" not in state.lines
                    and not (p.vs / 1.5 <= fit.vs <= p.vs * 1.5)):
                top = settings.speed_top_fraction * cfg.safety.velocity_limit_rad_s
                extra = refine_speeds(fit.vs, speeds[0], top)
                if extra:
                    plan2 = build_sweep(extra, replace(state.p_measured(), vs=fit.vs), settings)
                    runner.total_s += plan2[2]
                    _run_sweep(runner, state, plan2, tag="sweep_refine")
        if "inertia" in experiments:
            _run_inertia(runner, state)
    except IdentificationError as err:
        state.error = str(err)
        _write_raw(out, state, runner.records, failed=True)
        raise
    finally:
        backend.safe_stop()
    if progress is not None:
        progress(runner.total_s, runner.total_s)
    if "sigma1" in experiments and state.ringing_rec is not None:
        _fit_ringing(state)
    result = _assemble(state)
    if state.inertia is not None and state.J != state.J_prior:
        result.J, result.J_se = state.J, state.inertia.se
    result.experiment_s = runner.done_s
    files = _write_outputs(out, state, result, runner, plot=plot)
    result.files = files
    result.wall_s = time.perf_counter() - wall0
    return result


@dataclass
class _State:
    """Everything measured so far (mutable scratchpad of one identification)."""

    cfg: Config
    settings: IdentifySettings
    prior: FrictionParams
    p: LuGreParams
    dt: float
    J: float
    q: float
    points: list[dict[str, Any]] = field(default_factory=list)
    fits: dict[str, StribeckFit] = field(default_factory=dict)
    lines: dict[str, LineFit] = field(default_factory=dict)  # where the Stribeck part is undetermined
    falling: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # points above that line
    fit_notes: dict[str, str] = field(default_factory=dict)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    bandwidths: dict[float, float] = field(default_factory=dict)
    breaks: list[Breakaway] = field(default_factory=list)
    break_records: list[Record] = field(default_factory=list)
    presliding: Optional[PreslidingFit] = None
    presliding_rec: Optional[Record] = None
    presliding_info: dict[str, Any] = field(default_factory=dict)
    ringing_rec: Optional[Record] = None
    ringing_segments: list[tuple[int, int]] = field(default_factory=list)
    ringing: Optional[Sigma1Fit] = None
    ringing_note: str = ""
    warnings: list[str] = field(default_factory=list)
    error: str = ""
    hold_shape_if_few: bool = False  # few speeds: fit Fc, Fs with the prior's shape (logs)
    J_prior: float = math.nan  # the config's believed J [kg·m²]
    ramp_sigma0: list[float] = field(default_factory=list)  # rough stiffness per breakaway ramp
    fs_solved: dict[str, dict[str, Any]] = field(default_factory=dict)  # per set: the ramp solved for Fs
    inertia: Optional[InertiaFit] = None
    inertia_rec: Optional[Record] = None
    inertia_info: dict[str, Any] = field(default_factory=dict)

    def fc_now(self) -> float:
        if "both" in self.lines:
            return self.lines["both"].Fc
        fit = self.fits.get("both")
        if fit is not None:
            return fit.Fc
        quick = _quick_fc(self.points)
        return quick if quick is not None and quick > 0 else self.p.Fc

    def sigma0_now(self) -> float:
        """Pre-sliding stiffness: measured, else the breakaway ramps' rough value, else the prior."""
        if self.presliding is not None:
            return self.presliding.sigma0
        rough = [k for k in self.ramp_sigma0 if math.isfinite(k) and k > 0]
        return float(np.median(rough)) if rough else self.p.sigma0

    def p_measured(self) -> LuGreParams:
        """The planning set with what has been measured so far (Fs, sigma0) in place."""
        return replace(self.p, Fs=max(self.fs_now(), self.p.Fc), sigma0=self.sigma0_now())

    def fs_now(self) -> float:
        found = [b.breakaway_nm for b in self.breaks if b.found]
        if found:
            return float(np.mean(found))
        fit = self.fits.get("both")
        return fit.Fs if fit is not None and "both" not in self.lines else self.p.Fs


def _planned_seconds(settings: IdentifySettings, sweep_plan, experiments) -> float:
    total = 0.0
    if "sweep" in experiments and sweep_plan is not None:
        total += sweep_plan[2]
    if "breakaway" in experiments:
        per = settings.breakaway_rest_s + settings.breakaway_ramp_s / settings.breakaway_peak_factor + 0.6
        total += 2 * settings.breakaway_trials * per
    if "presliding" in experiments:
        total += 0.5 + settings.presliding_cycles / settings.presliding_frequency_hz
    if "sigma1" in experiments:
        total += settings.ringing_hold_s * (4 * settings.ringing_repeats + 1)
    if "inertia" in experiments:
        total += 1.0 + 3.0 * settings.inertia_cycles  # about; the frequencies follow the plant
    return total


def _run_sweep(runner: ExperimentRunner, st: _State, plan, tag: str) -> None:
    cfg, settings = st.cfg, st.settings
    ref, passes, duration, skipped = plan
    st.skipped += skipped
    def gains_for(v: float) -> PIDGains:
        bw = sweep_bandwidth(st.J, st.prior, settings, cfg.loop.rate_hz, v)
        st.bandwidths[v] = bw
        return PIDGains.triple_pole(st.J, bw, derivative_cutoff_hz=settings.derivative_cutoff_hz,
                                    output_limit_nm=cfg.safety.torque_limit_nm)

    schedule = [(pz.t_start, gains_for(pz.speed)) for pz in passes]
    law = Track(schedule[0][1] if schedule else gains_for(st.p.vs), st.J, st.prior, schedule)
    rec = runner.run(tag, law, duration, reference=ref)
    rec.info["passes"] = [asdict(pz) for pz in passes]
    by_speed: dict[float, dict[int, tuple[np.ndarray, np.ndarray]]] = {}
    lengths: dict[tuple[float, int], float] = {}
    length = max(st.fs_now(), st.p.Fc) / st.sigma0_now()  # pre-sliding length [rad]
    for pz in passes:
        sl = _window(rec, pz.window)
        by_speed.setdefault(pz.speed, {})[pz.direction] = (rec.pos[sl], rec.torque[sl])
        i_start = int(np.searchsorted(rec.t, pz.t_start))
        if sl.start < rec.pos.size:
            lengths[(pz.speed, pz.direction)] = abs(rec.pos[sl.start] - rec.pos[i_start]) / length
    for v, segs in by_speed.items():
        for pt in _analyse_speed(v, segs, st.dt, st.J, st.q, settings):
            pt["pass"] = tag
            pt["bandwidth_hz"] = st.bandwidths.get(v, math.nan)
            dirs = (1, -1) if pt["direction"] == "both" else (1 if pt["direction"] == "forward" else -1,)
            settled = min(lengths.get((v, d), math.inf) for d in dirs)
            pt["settle_lengths"] = settled
            if settled < settings.settled_lengths_min:
                pt["used"] = False
                pt["reason"] = "; ".join(r for r in (pt["reason"], (
                    f"bristles not settled: {settled:.3g} pre-sliding lengths of travel before the "
                    f"dwell (< {settings.settled_lengths_min:g}; max_settle_s)")) if r)
            st.points.append(pt)
    _fit_sweep(st)


def _fit_sweep(st: _State) -> None:
    """Stribeck fits of the combined and the per-direction points. Where the points do not pin
    down the Stribeck part, a Coulomb + viscous line stands in for Fc and sigma2."""
    for direction in ("both", "forward", "reverse"):
        fit, note = _fit_points(st.points, direction, st.settings, st.p.vs,
                                prior=st.p if st.hold_shape_if_few else None)
        st.lines.pop(direction, None)
        st.falling.pop(direction, None)
        if fit is None:
            st.fits.pop(direction, None)
            st.fit_notes[direction] = note
            continue
        st.fits[direction] = fit
        st.fit_notes.pop(direction, None)
        if fit.held:
            st.fit_notes[direction] = (f"{fit.n_points} speeds only: Fc and Fs fitted with "
                                       f"{', '.join(fit.held)} held at the prior's values")
            continue
        ok, why = stribeck_determined(fit)
        if not ok:
            used = [p for p in st.points if p["direction"] == direction and p["used"]]
            st.lines[direction], st.falling[direction] = _flat_line(used, error_floor(st.points, direction))
            st.fit_notes[direction] = (f"{why}: Fc and sigma2 from a Coulomb + viscous line, "
                                       "vs kept from the prior")
            if st.falling[direction]:
                st.fit_notes[direction] += (
                    f" ({len(st.falling[direction])} lowest speed(s) above the line left out: "
                    "the falling part, too few points to fit it)")


FALLING_SIGMAS = 3.0  # a low-speed point this many SEs above the line of the rest is on the falling part


def _flat_line(used: list[dict[str, Any]], floor_nm: float) -> tuple[LineFit, list[dict[str, Any]]]:
    """(line, falling points): the Coulomb + viscous line through the flat part of the curve.
    From the lowest speed up, a point that stands above the line of the faster ones by more than
    FALLING_SIGMAS standard errors (the position ripple included per direction) lies on the
    Stribeck curve's falling part and is left out, while at least three points remain. Fitted
    through it, one such point pulled the line (measured, a Monte Carlo plant with vs 3.2e-4
    rad/s whose 1e-4 rad/s point was the only one below vs: Fc +7 %, sigma2 −45 %)."""
    pts = sorted(used, key=lambda p: p["speed_rad_s"])

    def line_of(ps: list[dict[str, Any]]) -> LineFit:
        return fit_coulomb_viscous([p["speed_rad_s"] for p in ps], [p["friction_nm"] for p in ps],
                                   noise_floor_nm=floor_nm)

    k = 0
    while len(pts) - k - 1 >= 3:
        rest = line_of(pts[k + 1:])
        low = pts[k]
        above = low["friction_nm"] - (rest.Fc + rest.sigma2 * low["speed_rad_s"])
        if above <= FALLING_SIGMAS * _point_se(low, floor_nm):
            break
        k += 1
    return line_of(pts[k:]), pts[:k]


def _line_vs(st: _State, direction: str, fs: float) -> tuple[float, float]:
    """(vs, the speed that bounds it): where a Coulomb + viscous line stands in for the sweep's
    curve, the prior's vs unless the points bound it lower. Each used point bounds vs from above
    (:func:`hil.identify_fit.stribeck_vs_bound`): the Stribeck excess Fs − Fc (``fs``: the
    breakaway's, or a falling point's friction if higher) must have fallen to within the point's
    residual from the line plus two standard errors (the position ripple included per direction)
    by its speed; the tightest bound is taken. A flat point bounds vs below its speed; a point
    on the falling part (:func:`_flat_line`), just above the speed its excess says. Kept at the
    prior's, a vs the sweep shows too large leaves the believed curve falling through speeds
    where the plant is already at Fc (measured, a Monte Carlo plant with vs 1.1e-4 rad/s and
    the prior's 0.01: the set 13 % above the plant at 0.01 rad/s, creep 1.52× oracle, and the
    ringing fit on that curve put sigma1 28 % low)."""
    line = st.lines[direction]
    floor = error_floor(st.points, direction)
    best, at = st.p.vs, math.nan
    for p in st.points:
        if p["direction"] != direction or not p["used"]:
            continue
        v = p["speed_rad_s"]
        resid = abs(p["friction_nm"] - (line.Fc + line.sigma2 * v))
        bound = stribeck_vs_bound(v, fs - line.Fc, resid + 2.0 * _point_se(p, floor), st.p.delta)
        if bound < best:
            best, at = bound, v
    return best, at


def _run_breakaway(runner: ExperimentRunner, st: _State) -> None:
    settings, dt, q = st.settings, st.dt, st.q
    determined = "both" in st.fits and "both" not in st.lines
    fs_guess = st.fits["both"].Fs if determined else st.p.Fs
    vs_now = st.fits["both"].vs if determined else st.p.vs
    peak = min(settings.breakaway_peak_factor * fs_guess, st.cfg.safety.torque_limit_nm)
    rate = peak / settings.breakaway_ramp_s
    v_on = settings.breakaway_onset_factor * vs_now
    w = max(10, int(math.ceil(5.0 * q / v_on / dt)))
    guard = min(0.25 * st.cfg.safety.velocity_limit_rad_s, 0.5)  # [rad] far beyond any onset
    for i in range(settings.breakaway_trials):
        for direction in (1, -1):
            law = BreakawayRamp(runner.gains, direction, rate, peak, settings.breakaway_rest_s, v_on, w,
                                0.5, dt, guard)
            max_s = settings.breakaway_rest_s + settings.breakaway_ramp_s + 2.0
            rec = runner.run(f"breakaway_{'fwd' if direction > 0 else 'rev'}_{i + 1}", law, max_s)
            ramp_start = law.ramp_k
            b = breakaway_from_ramp(rec.t, rec.pos, rec.torque, direction, J=st.J, rad_per_count=q,
                                    v_onset=v_on, ramp_start_index=ramp_start, onset_counts=5.0)
            rec.info.update({"direction": direction, "ramp_start_index": ramp_start,
                             "rate_nm_s": rate, "peak_nm": peak, "v_onset": v_on})
            level = 0.3 * (b.breakaway_nm if b.found else fs_guess)
            st.ramp_sigma0.append(ramp_stiffness(rec.pos, rec.torque, direction, ramp_start_index=ramp_start,
                                                 level_nm=level, rad_per_count=q))
            if not b.found:
                st.warnings.append(f"breakaway {direction:+d} trial {i + 1}: no motion up to {peak:.4g} N·m")
            st.breaks.append(b)
            st.break_records.append(rec)


def _run_presliding(runner: ExperimentRunner, st: _State) -> None:
    settings, q = st.settings, st.q
    f = settings.presliding_frequency_hz
    n_cyc = settings.presliding_cycles
    # below the breakaway measured just before, whatever the prior's Fc says
    amp = settings.presliding_amplitude * min(st.fc_now(), st.fs_now())
    rest = 0.5
    for attempt in range(2):
        expected = 2.0 * amp / st.sigma0_now()
        guard = max(200 * q, 4.0 * expected + 20 * q)

        def profile(t: float, amp=amp) -> float:
            return amp * math.sin(2.0 * math.pi * f * (t - rest)) if t >= rest else 0.0

        law = TorqueProfile(runner.gains, profile, rest + n_cyc / f, guard)
        rec = runner.run(f"presliding_{attempt + 1}", law, rest + n_cyc / f + 1.0)
        rec.info.update({"amplitude_nm": amp, "frequency_hz": f, "t0_s": rest})
        if "aborted" not in rec.info:
            st.presliding_rec = rec
            st.presliding_info = {"amplitude_nm": amp, "frequency_hz": f, "attempts": attempt + 1}
            try:
                st.presliding = presliding_sigma0(rec.t, rec.pos, rec.torque, frequency_hz=f, t0_s=rest,
                                                  rad_per_count=q, Fs=st.fs_now())
            except ValueError as err:
                st.warnings.append(f"presliding: {err}")
            return
        st.warnings.append(f"presliding attempt {attempt + 1} at {amp:.4g} N·m: {rec.info['aborted']}; "
                           "retrying at half amplitude" if attempt == 0 else
                           f"presliding at {amp:.4g} N·m: {rec.info['aborted']}")
        amp *= 0.5


def inertia_plan(cfg: Config, st: "_State") -> list[tuple[float, float, int]]:
    """The inertia experiment's sines (amplitude [rad], frequency [Hz], cycles): peak speed
    ``inertia_speed_fraction`` of the velocity limit (bounded by ``max_travel_rad``), peak
    J·a = ``inertia_torque_factor``·Fs within half the torque limit; the second sine at half
    the frequency and the same peak speed (half the acceleration, twice the amplitude)."""
    settings = st.settings
    fs = max(st.fs_now(), st.p.Fc)
    v = settings.inertia_speed_fraction * cfg.safety.velocity_limit_rad_s
    room = 0.5 * cfg.safety.torque_limit_nm - fs - st.p.sigma2 * v
    a = min(settings.inertia_torque_factor * fs, room) / st.J
    if not a > 0:
        raise IdentificationError(f"identify: inertia: no torque left for acceleration (Fs {fs:.3g} N·m, "
                                  f"safety.torque_limit_nm {cfg.safety.torque_limit_nm:g})")
    v = min(v, math.sqrt(max(settings.max_travel_rad, 0.0) * a / 4.0))  # travel 4·v²/a
    amp = v * v / a
    f = a / v / (2.0 * math.pi)
    return [(amp, f, settings.inertia_cycles), (2.0 * amp, 0.5 * f, settings.inertia_cycles)]


def _run_inertia(runner: ExperimentRunner, st: _State) -> None:
    """J from sines at two frequencies (:func:`hil.identify_sliding.fit_inertia`): a position
    loop at ``bandwidth_hz`` with the prior's J·a_ref and friction feedforward follows them."""
    cfg, settings = st.cfg, st.settings
    parts = inertia_plan(cfg, st)
    ref = SineSequence(parts, start_s=settings.rest_s)
    duration = ref.end_s + settings.rest_s
    gains = PIDGains.triple_pole(st.J, settings.bandwidth_hz, derivative_cutoff_hz=settings.derivative_cutoff_hz,
                                 output_limit_nm=cfg.safety.torque_limit_nm)
    rec = runner.run("inertia", Track(gains, st.J, st.prior), duration, reference=ref)
    st.inertia_rec = rec
    st.inertia_info = {"parts": [{"amplitude_rad": a, "frequency_hz": f, "cycles": c} for a, f, c in parts]}
    fit = st.fits.get("both")
    if fit is not None and "both" in st.lines:
        line = st.lines["both"]
        curve = lambda u: line.Fc + line.sigma2 * u  # noqa: E731
    elif fit is not None:
        curve = fit.curve
    else:
        curve = None
    static = (lambda v: np.sign(v) * curve(np.abs(v))) if curve is not None else None
    try:
        samples = sliding_samples(rec.t, rec.pos, rec.torque, J=0.0, rad_per_count=st.q,
                                  presliding_rad=max(st.fs_now(), st.p.Fc) / st.sigma0_now())
        st.inertia = fit_inertia(samples, rec.pos, static=static)
    except ValueError as err:
        st.warnings.append(f"inertia: {err}; J kept from the config")
        return
    J_fit = st.inertia
    st.inertia_info.update(ticks_used=J_fit.n, coefficients=J_fit.coefficients,
                           rms_residual_nm=J_fit.rms_residual_nm, accel_rms_rad_s2=J_fit.accel_rms_rad_s2)
    if not (J_fit.J > 0 and J_fit.se < 0.05 * J_fit.J):
        st.warnings.append(f"inertia: J {J_fit.J:.4g} ± {J_fit.se:.2g} kg·m² not determined; J kept "
                           "from the config")
        return
    st.J = J_fit.J


def _run_ringing(runner: ExperimentRunner, st: _State) -> None:
    settings, dt = st.settings, st.dt
    amp = settings.ringing_amplitude * min(st.fc_now(), st.fs_now())
    hold = settings.ringing_hold_s
    levels: list[float] = []
    for _ in range(settings.ringing_repeats):
        levels += [0.0, amp, 0.0, -amp]
    levels.append(0.0)
    n_hold = int(round(hold / dt))
    duration = len(levels) * n_hold * dt

    def profile(t: float) -> float:
        i = min(int(t / dt + 1e-9) // n_hold, len(levels) - 1)
        return levels[i]

    sigma0 = st.presliding.sigma0 if st.presliding is not None else st.p.sigma0
    guard = max(400 * st.q, 8.0 * 3.0 * amp / sigma0)
    law = TorqueProfile(runner.gains, profile, duration, guard)
    rec = runner.run("ringing", law, duration + 1.0)
    rec.info.update({"amplitude_nm": amp, "hold_s": hold, "levels": levels})
    if "aborted" in rec.info:
        st.ringing_note = f"ringing: {rec.info['aborted']}"
        st.warnings.append(st.ringing_note)
        return
    st.ringing_rec = rec
    st.ringing_segments = [(r * 4 * n_hold, (r + 1) * 4 * n_hold) for r in range(settings.ringing_repeats)]


def _fit_ringing(st: _State) -> None:
    rec = st.ringing_rec
    if rec is None:  # the ringing experiment did not record (the caller checks)
        return
    fit = st.fits.get("both")
    base_vals = st.p.as_dict()
    if "both" in st.lines:
        fs = st.fs_now()
        base_vals.update(Fc=st.lines["both"].Fc, sigma2=st.lines["both"].sigma2, Fs=fs,
                         vs=_line_vs(st, "both", fs)[0])
        base_vals["Fs"] = max(base_vals["Fs"], base_vals["Fc"])
    elif fit is not None:
        base_vals.update(Fc=fit.Fc, Fs=max(fit.Fs, fit.Fc), vs=fit.vs, sigma2=fit.sigma2, delta=fit.delta)
    if st.presliding is not None:
        base_vals["sigma0"] = st.presliding.sigma0
    base = LuGreParams(**base_vals)
    n = min(rec.cmd.size, rec.pos.size)
    try:
        st.ringing = fit_sigma1_ringing(rec.pos[:n], rec.cmd[:n], base=base, J=st.J, dt_s=st.dt,
                                        rad_per_count=st.q, segments=st.ringing_segments)
    except (ValueError, np.linalg.LinAlgError) as err:
        st.ringing_note = f"sigma1 fit failed: {err}"
        st.warnings.append(st.ringing_note)
        return
    amp_counts = rec.info.get("amplitude_nm", 0.0) / base.sigma0 / st.q
    rec.info["ringing_counts"] = amp_counts
    if amp_counts < 5.0:
        st.warnings.append(f"sigma1 is quantization-limited: the ringing spans only {amp_counts:.1f} "
                           "counts (stiff bristles); its standard error is optimistic")


# --- assembling the result ----------------------------------------------------------------------


def _r(x: float, digits: int = 6) -> float:
    """A float rounded to ``digits`` significant digits (plain Python float for YAML)."""
    x = float(x)
    if not math.isfinite(x) or x == 0.0:
        return x
    return float(f"{x:.{digits}g}")


def _friction_block(params: FrictionParams) -> dict[str, Any]:
    if isinstance(params, DirectionalParams):
        return {"forward": {k: _r(v) for k, v in params.forward.as_dict().items()},
                "reverse": {k: _r(v) for k, v in params.reverse.as_dict().items()}}
    return {k: _r(v) for k, v in params.as_dict().items()}


BRISTLE_CREEP_MAX = 0.2  # above this creep fraction the breakaway does not measure Fs [-]


def bristle_creep_fraction(rate_nm_s: float, sigma0: float, v_onset: float) -> float:
    """How far below Fs a torque ramp's breakaway lies on LuGre bristles, as a fraction [-].

    While the torque ramps, the bristle force σ0·z follows it (ż ≈ rate/σ0), and
    ż = v·(1 − σ0·z/g(v)) gives σ0·z = g(v)·(1 − rate/(σ0·v)): at the onset speed v_onset the
    friction is short of g ≈ Fs by the fraction rate/(σ0·v_onset). Soft bristles creep: 14 % on
    the `damped` table (σ0 1e3) at 0.14 N·m/s and 1 mrad/s, 0.5 % on the shipped one."""
    return rate_nm_s / (sigma0 * v_onset)


def _breakaway_values(st: _State, direction: int) -> list[float]:
    """The found breakaways of one direction, corrected for the bristle creep at onset with the
    measured sigma0 (NaN where the creep fraction exceeds BRISTLE_CREEP_MAX)."""
    out = []
    for b, rec in zip(st.breaks, st.break_records):
        if not (b.found and b.direction == direction):
            continue
        r = bristle_creep_fraction(rec.info["rate_nm_s"], st.sigma0_now(), rec.info["v_onset"])
        out.append(b.breakaway_nm / (1.0 - r) if r < BRISTLE_CREEP_MAX else math.nan)
    return out


def _breakaway_summary(st: _State) -> dict[str, Any]:
    """Per-direction mean breakaway magnitudes (corrected for the bristle creep), the pair means
    (offsets cancel) and their SE. None of them when the creep is too large to correct."""
    fwd, rev = _breakaway_values(st, 1), _breakaway_values(st, -1)
    if any(not math.isfinite(v) for v in fwd + rev):
        r = bristle_creep_fraction(st.break_records[0].info["rate_nm_s"], st.sigma0_now(),
                                   st.break_records[0].info["v_onset"])
        st.warnings.append(f"breakaway: the bristles creep {100 * r:.0f} % short of Fs at the onset "
                           f"(soft bristles, sigma0 {st.sigma0_now():.3g}): Fs from the sweep")
        return {"forward": [], "reverse": [], "creep_fraction": r}
    out: dict[str, Any] = {"forward": fwd, "reverse": rev}
    raw_f = [b.breakaway_nm for b in st.breaks if b.found and b.direction == 1]
    raw_r = [b.breakaway_nm for b in st.breaks if b.found and b.direction == -1]
    if fwd and rev:
        pairs = [0.5 * (a + b) for a, b in zip(fwd, rev)]
        out["Fs"] = float(np.mean(pairs))
        out["se"] = float(np.std(pairs, ddof=1) / math.sqrt(len(pairs))) if len(pairs) >= 2 else math.nan
        out["read"] = float(np.mean([0.5 * (a + b) for a, b in zip(raw_f, raw_r)]))
    if raw_f:
        out["read_forward"] = float(np.mean(raw_f))
    if raw_r:
        out["read_reverse"] = float(np.mean(raw_r))
    ripple = position_ripple(st.points)
    for name, vals in (("Fs_forward", fwd), ("Fs_reverse", rev)):
        if vals:
            out[name] = float(np.mean(vals))
            # one direction's breakaway includes the position-dependent torque where it was
            # measured (cancels only in the pair mean)
            stat = float(np.std(vals, ddof=1) / math.sqrt(len(vals))) if len(vals) >= 2 else math.nan
            out[name + "_se"] = math.hypot(stat, ripple) if math.isfinite(stat) else (ripple or math.nan)
    return out


RAMP_FS_ELASTICITY_MIN = 0.5  # below this the breakaway ramp does not measure Fs [-]


def _ramp_corrected_fs(st: _State, p: LuGreParams, read_nm: float) -> tuple[float, float]:
    """(Fs, elasticity): Fs such that the breakaway ramp on the set ``p`` (its other parameters
    as identified) reads ``read_nm``, the mean breakaway the ramps read
    (:func:`ramp_breakaway_model`), found by a bracketed root search between Fc and where the
    reading passes ``read_nm``; and the reading's elasticity d ln(read)/d ln(Fs) there. Where
    the bristles creep past the Stribeck peak before they are loaded (soft bristles, vs below
    the creep speed) the reading hardly depends on Fs (measured, a Monte Carlo plant with
    sigma0 1.7e3 and vs 1.9e-4 rad/s: elasticity 0.00; the shipped table 0.99): below
    RAMP_FS_ELASTICITY_MIN the reading's noise and the model's errors would be amplified more
    than twice into Fs, and the caller takes the sweep's Fs instead. Fs is NaN when no Fs >= Fc
    gives the reading (the model reads no breakaway, or more than measured even at Fs = Fc: the
    other parameters' errors outweigh what Fs can move); the elasticity is then the one at
    ``p.Fs`` (NaN if the model reads no breakaway there either)."""
    info = st.break_records[0].info

    def reading(fs: float) -> float:
        return ramp_breakaway_model(replace(p, Fs=fs), st.J, info["rate_nm_s"], info["v_onset"],
                                    dt_s=st.dt, rad_per_count=st.q)

    def elasticity(fs: float) -> float:
        here, up = reading(fs), reading(1.05 * fs)
        ok = math.isfinite(here) and math.isfinite(up) and here > 0.0
        return (up / here - 1.0) / 0.05 if ok else math.nan

    lo = p.Fc
    r_lo = reading(lo)
    hi = max(p.Fs, 1.01 * lo)
    r_hi = reading(hi)
    found = math.isfinite(r_lo) and r_lo <= read_nm
    for _ in range(8):  # widen until the reading passes the measured one (it rises with Fs)
        if not (found and math.isfinite(r_hi)) or r_hi >= read_nm:
            break
        lo, r_lo = hi, r_hi
        hi *= 1.5
        r_hi = reading(hi)
    if not (found and math.isfinite(r_hi) and r_hi >= read_nm):
        return math.nan, elasticity(p.Fs)
    fs = brentq(lambda f: reading(f) - read_nm, lo, hi, xtol=1e-6 * hi) if r_hi > read_nm else hi
    return fs, elasticity(fs)


def _direction_set(st: _State, direction: str, fs: Optional[float], fs_se: float,
                   sources: dict[str, str], read_nm: Optional[float] = None
                   ) -> tuple[LuGreParams, dict[str, float]]:
    p = st.p
    vals = p.as_dict()
    unc = {k: math.nan for k in PARAM_NAMES}
    fit = st.fits.get(direction)
    line = st.lines.get(direction)
    if line is not None:
        vals.update(Fc=line.Fc, sigma2=line.sigma2)
        unc.update(Fc=line.se["Fc"], sigma2=line.se["sigma2"])
        sources.update(Fc="sweep (line)", sigma2="sweep (line)", vs="prior (not determined)")
    elif fit is not None:
        vals.update(Fc=fit.Fc, Fs=fit.Fs, vs=fit.vs, sigma2=fit.sigma2, delta=fit.delta)
        unc.update(Fc=fit.se["Fc"], Fs=fit.se["Fs"], vs=fit.se["vs"], sigma2=fit.se["sigma2"],
                   delta=fit.se["delta"])
        for k in ("Fc", "Fs", "vs", "sigma2"):
            sources[k] = "prior (held)" if k in fit.held else "sweep"
        sources["delta"] = "sweep" if fit.fit_delta else "fixed"
    if fs is not None and math.isfinite(fs):
        vals["Fs"] = fs
        stat = fs_se if math.isfinite(fs_se) else 0.0
        # the breakaway and the sweep's extrapolation measure Fs differently (LuGre's
        # breakaway depends on the torque rate): their difference counts as a systematic
        # part of the uncertainty
        sys_part = abs(fs - fit.Fs) if fit is not None and line is None else 0.0
        unc["Fs"] = math.hypot(stat, sys_part) if (stat or sys_part) else unc["Fs"]
        sources["Fs"] = "breakaway"
    # a steady point on the falling part (left out of the line) says Fs is at least its friction
    fs_floor = max((q["friction_nm"] for q in st.falling.get(direction, [])), default=0.0)
    if line is not None:
        vs, v0 = _line_vs(st, direction, max(vals["Fs"], fs_floor))
        if vs < p.vs:
            vals["vs"] = vs
            sources["vs"] = "sweep (bound)"
            st.fit_notes[direction] = st.fit_notes[direction].replace(
                "vs kept from the prior", f"vs {vs:.3g} rad/s, the most the sweep allows (bound by "
                f"its point at {v0:.3g} rad/s and Fs above the line)")
    if st.presliding is not None:
        vals["sigma0"] = st.presliding.sigma0
        unc["sigma0"] = st.presliding.se
        sources["sigma0"] = "presliding"
    if st.ringing is not None:
        vals["sigma1"] = st.ringing.sigma1
        unc["sigma1"] = st.ringing.se
        sources["sigma1"] = "ringing"
    swept = fit is not None and line is None  # the sweep determined the curve (vs, Fc)
    # or bounded vs from a flat line: vs below the lowest swept speed, the Stribeck drop is
    # below the ramp's onset speed too (measured, the plant above: the ramp read Fs 9 % low,
    # solved on the bounded set 4 % low)
    bounded = line is not None and sources["vs"] == "sweep (bound)"
    if ((swept or bounded) and sources["Fs"] == "breakaway" and read_nm is not None
            and math.isfinite(read_nm)):
        # the ramp's reading solved for Fs on the identified model (its other parameters), so
        # that neither the bristle creep nor a Stribeck drop below the creep speed is read as Fs
        creep_corrected = vals["Fs"]
        # what the sweep says of Fs: its fit, or (a flat line) nothing beyond the breakaway
        sweep_fs, sweep_se = (fit.Fs, fit.se["Fs"]) if swept and fit is not None else (
            creep_corrected, unc["Fs"])
        corrected, elasticity = _ramp_corrected_fs(
            st, LuGreParams(**{**vals, "Fs": max(vals["Fs"], vals["Fc"])}), read_nm)
        solved: dict[str, Any] = {"read": _r(read_nm), "Fs": _r(corrected), "elasticity": _r(elasticity)}
        if elasticity < RAMP_FS_ELASTICITY_MIN:
            vals["Fs"] = sweep_fs
            unc["Fs"] = sweep_se
            sources["Fs"] = "sweep (breakaway insensitive)" if swept else "breakaway"
            st.warnings.append(
                f"breakaway ({direction}): the ramp's reading moves only {elasticity:.2f}× as much as Fs "
                f"(the bristles creep past the Stribeck peak before they are loaded): Fs from the "
                + ("sweep" if swept else "creep-corrected breakaway"))
        elif not math.isfinite(corrected):
            st.warnings.append(f"breakaway ({direction}): no Fs >= Fc makes the identified model read "
                               f"{read_nm:.4g} N·m: Fs kept at the creep-corrected breakaway")
        else:
            vals["Fs"] = corrected
            # the reading's SE carried through the model: dFs/Fs = d(read)/read / elasticity
            stat = (fs_se * corrected / creep_corrected / elasticity
                    if math.isfinite(fs_se) and creep_corrected > 0.0 else 0.0)
            sys_part = abs(corrected - sweep_fs)
            unc["Fs"] = math.hypot(stat, sys_part) if (stat or sys_part) else unc["Fs"]
        solved["source"] = sources["Fs"]
        st.fs_solved[direction] = solved
    if vals["Fs"] < fs_floor:
        st.warnings.append(f"Fs {vals['Fs']:.4g} ({direction}) is below the steady friction "
                           f"{fs_floor:.4g} N·m the sweep measured on the falling part: Fs set to it")
        vals["Fs"] = fs_floor
        sources["Fs"] = "sweep (falling part)"
    if vals["Fs"] < vals["Fc"]:
        st.warnings.append(f"Fs {vals['Fs']:.4g} < Fc {vals['Fc']:.4g}: Fs set to Fc")
        vals["Fs"] = vals["Fc"]
    if vals["Fc"] <= 0:
        raise IdentificationError(f"identify: fitted Fc {vals['Fc']:.4g} N·m is not positive")
    return LuGreParams(**vals), unc


def _assemble(st: _State) -> IdentifyResult:
    settings = st.settings
    sources = {k: "prior" for k in PARAM_NAMES}
    brk = _breakaway_summary(st)
    both, unc = _direction_set(st, "both", brk.get("Fs"), brk.get("se", math.nan), sources,
                               brk.get("read"))
    directional = False
    asym: dict[str, Any] = {}
    ff, fr = st.fits.get("forward"), st.fits.get("reverse")
    if ff is not None and fr is not None:
        srcs = dict(sources)
        fwd, unc_f = _direction_set(st, "forward", brk.get("Fs_forward"),
                                    brk.get("Fs_forward_se", math.nan), srcs, brk.get("read_forward"))
        rev, unc_r = _direction_set(st, "reverse", brk.get("Fs_reverse"),
                                    brk.get("Fs_reverse_se", math.nan), srcs, brk.get("read_reverse"))
        pooled: list[str] = []
        for k in ("Fc", "Fs", "vs", "sigma2"):
            a, b = getattr(fwd, k), getattr(rev, k)
            # the position-dependent torque biases the two directions in opposite senses:
            # the errors are anti-correlated, so the SE of the difference is the sum
            se = unc_f[k] + unc_r[k]
            if not math.isfinite(se):
                se = math.inf  # not measured in both directions: no claim of a difference
            mean = 0.5 * (abs(a) + abs(b))
            diff = abs(a - b)
            sig = diff > settings.asymmetry_sigmas * se
            big = diff > settings.asymmetry_min_rel * mean if mean > 0 else False
            asym[k] = {"forward": _r(a), "reverse": _r(b), "difference": _r(diff),
                       "se_difference": _r(se), "significant": bool(sig and big)}
            if sig and big:
                directional = True
            else:
                pooled.append(k)
        if directional:
            # a parameter whose two directions do not differ significantly takes the combined
            # value (the mean of both directions cancels the position-dependent torques)
            fv, rv = fwd.as_dict(), rev.as_dict()
            for k in pooled:
                fv[k] = rv[k] = getattr(both, k)
                unc_f[k] = unc_r[k] = unc[k]
            for vals in (fv, rv):
                vals["Fs"] = max(vals["Fs"], vals["Fc"])
            friction: FrictionParams = DirectionalParams(forward=LuGreParams(**fv), reverse=LuGreParams(**rv))
            uncertainty: dict[str, Any] = {"forward": {k: _r(v) for k, v in unc_f.items()},
                           "reverse": {k: _r(v) for k, v in unc_r.items()}}
            asym["pooled"] = pooled
    if not directional:
        friction = both
        uncertainty = {k: _r(v) for k, v in unc.items()}

    used = [p for p in st.points if p["used"]]
    rejected = [p for p in st.points if not p["used"]]
    diag: dict[str, Any] = {
        "sources": sources,
        "sweep": {
            "bandwidth_hz": [_r(min(st.bandwidths.values())), _r(max(st.bandwidths.values()))]
            if st.bandwidths else None,
            "points_used": {d: sum(1 for p in used if p["direction"] == d)
                            for d in ("both", "forward", "reverse")},
            "points_rejected": {d: sum(1 for p in rejected if p["direction"] == d)
                                for d in ("both", "forward", "reverse")},
            "rejected": [{"speed_rad_s": _r(p["speed_rad_s"]), "direction": p["direction"],
                          "reason": p["reason"]} for p in rejected],
            "skipped": st.skipped,
            "rms_residual_nm": {d: _r(f.rms_residual_nm) for d, f in st.fits.items()},
            "at_bound": {d: list(f.at_bound) for d, f in st.fits.items() if f.at_bound},
            "Fs_sweep": _r(st.fits["both"].Fs) if "both" in st.fits and "both" not in st.lines else None,
            "position_ripple_nm": _r(position_ripple(st.points)),
            "notes": dict(st.fit_notes),
        } if st.points else {"run": False},
        "breakaway": ({"trials": len(st.breaks), "found": sum(b.found for b in st.breaks),
                       "Fs_forward": _r(brk.get("Fs_forward", math.nan)),
                       "Fs_reverse": _r(brk.get("Fs_reverse", math.nan)),
                       "Fs": _r(brk.get("Fs", math.nan)),
                       "creep_fraction": _r(bristle_creep_fraction(
                           st.break_records[0].info["rate_nm_s"], st.sigma0_now(),
                           st.break_records[0].info["v_onset"])),
                       "raw": [_r(b.breakaway_nm) for b in st.breaks if b.found],
                       "solved": st.fs_solved}
                      if st.breaks else {"run": False}),
        "presliding": ({
            "amplitude_nm": _r(st.presliding_info.get("amplitude_nm", math.nan)),
            "branches": st.presliding.n_branches,
            "loop_counts": _r(st.presliding.loop_counts),
            "central_span_counts": _r(st.presliding.span_counts),
            "drift_counts": _r(st.presliding.drift_counts),
            "se_statistical": _r(st.presliding.se_statistical),
            "se_quantization": _r(st.presliding.se_quantization),
            "se_curvature": _r(st.presliding.se_curvature),
        } if st.presliding is not None else {"run": False}),
        "sigma1": ({
            "rms_residual_counts": _r(st.ringing.rms_counts),
            "sigma0_ring": _r(st.ringing.sigma0_ring),
            "per_repetition": [_r(v) for v in st.ringing.per_segment],
            "se_jacobian": _r(st.ringing.se_jacobian),
            "se_spread": _r(st.ringing.se_spread),
            "offset_nm": _r(st.ringing.offset_nm),
            "ringing_counts": _r(st.ringing_rec.info.get("ringing_counts", math.nan)
                                 if st.ringing_rec is not None else math.nan),
            "at_bound": st.ringing.at_bound,
        } if st.ringing is not None else {"run": False, "note": st.ringing_note}),
        "inertia": ({"J": _r(st.J), "se": _r(st.inertia.se), "J_config": _r(st.J_prior),
                     "used": st.J != st.J_prior, "ticks": st.inertia.n,
                     "rms_residual_nm": _r(st.inertia.rms_residual_nm),
                     "accel_rms_rad_s2": _r(st.inertia.accel_rms_rad_s2)}
                    if st.inertia is not None else {"run": False, "J_config": _r(st.J_prior)}),
        "asymmetry": asym,
        "directional": directional,
        "warnings": list(st.warnings),
    }
    passive = friction.passivity_margin
    if passive < 0:
        diag["warnings"].append(f"passivity margin sigma2 - sigma1*(Fs-Fc)/Fc = {passive:.4g} < 0")
    return IdentifyResult(friction=friction, uncertainty=uncertainty, diagnostics=diag, sources=sources,
                          directional=directional, points=st.points,
                          breakaway=[asdict(b) for b in st.breaks])


# --- output files -------------------------------------------------------------------------------


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, (np.floating, np.integer)):
        obj = obj.item()
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _json_safe(obj.tolist())
    return obj


def _yaml_safe(obj: Any) -> Any:
    if isinstance(obj, (np.floating, np.integer)):
        obj = obj.item()
    if isinstance(obj, dict):
        return {str(k): _yaml_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_yaml_safe(v) for v in obj]
    return obj


def params_header(axis: AxisUnits = ROTARY) -> str:
    """The comment block of params.yaml, in the units of the axis it was identified on."""
    u = axis.of
    return (
        "# frictionctl identify: identified LuGre friction.\n"
        "# friction: usable as controller.friction (a flat set, or forward:/reverse: when the two\n"
        f"#   directions differ beyond their uncertainty). Units: Fc, Fs [{u('N·m')}], vs [{u('rad/s')}],\n"
        f"#   sigma0 [{u('N·m/rad')}], sigma1, sigma2 [{u('N·m·s/rad')}], delta [-].\n"
        f"# J: the identified inertia [{u('kg·m²')}] (when the inertia experiment ran): applied as controller.J.\n"
        "# uncertainty: standard errors, same keys and units (.nan: not measured, 0: held fixed):\n"
        "#   applied with the set as controller.friction_se (how far its sigma1/sigma0 is trusted).\n"
        "# diagnostics: where each value came from, points used/rejected, fit residuals.\n")


def _write_params(path: Path, result: IdentifyResult, axis: AxisUnits = ROTARY) -> None:
    data: dict[str, Any] = {"friction": result.params_block()}
    if result.J is not None:
        data["J"] = _r(result.J)
    uncertainty = dict(result.uncertainty)
    if result.J is not None:
        uncertainty["J"] = _r(result.J_se)
    data.update(uncertainty=uncertainty, diagnostics=result.diagnostics)
    text = yaml.safe_dump(_yaml_safe(data), sort_keys=False, allow_unicode=True, width=100)
    path.write_text(params_header(axis) + text, encoding="utf-8")


def _raw(st: _State, records: list[Record]) -> dict[str, Any]:
    return {
        "format": 1,
        "kind": "frictionctl identification",
        "settings": asdict(st.settings),
        "prior": _friction_block(st.prior),
        "rate_hz": st.cfg.loop.rate_hz,
        "J": st.J, "J_config": st.J_prior, "Kt": st.cfg.controller.Kt, "rad_per_count": st.q,
        "inertia": ({**st.inertia_info, "J": st.inertia.J, "se": st.inertia.se}
                    if st.inertia is not None else None),
        "sweep_points": st.points,
        "stribeck_fits": {d: {**f.values(), "se": f.se, "rms_residual_nm": f.rms_residual_nm,
                              "n_points": f.n_points, "residuals_nm": f.residuals_nm}
                          for d, f in st.fits.items()},
        "breakaway": [asdict(b) for b in st.breaks],
        "presliding": ({**asdict(st.presliding), **st.presliding_info}
                       if st.presliding is not None else None),
        "sigma1": ({k: v for k, v in asdict(st.ringing).items() if k != "simulated"}
                   if st.ringing is not None else None),
        "experiments": [{"name": r.name, "ticks": int(r.t.size), "duration_s": float(r.t.size * st.dt),
                         "log": r.log, "info": r.info} for r in records],
        "warnings": st.warnings,
        "error": st.error or None,
    }


def _write_raw(out: Path, st: _State, records: list[Record], failed: bool = False) -> dict[str, str]:
    raw = _raw(st, records)
    raw["status"] = "failed" if failed else "ok"
    (out / "identify.json").write_text(json.dumps(_json_safe(raw), indent=1) + "\n", encoding="utf-8")
    return {"json": str(out / "identify.json"), "logs": str(out / "experiments")}


def _write_outputs(out: Path, st: _State, result: IdentifyResult, runner: ExperimentRunner, *,
                   plot: bool) -> dict[str, str]:
    files = _write_raw(out, st, runner.records)
    _write_params(out / "params.yaml", result, st.cfg.axis)
    files["params"] = str(out / "params.yaml")
    if plot:
        plot_identification(st, result, out / "identify.png")
        files["report"] = str(out / "identify.png")
    return files


def plot_identification(st: _State, result: IdentifyResult, png: Path) -> Path:
    """Four panels: Stribeck points and fits per direction, breakaway trials, pre-sliding loops,
    sigma1 ringing (measured vs fitted)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(13, 9.5))
    fig.suptitle("frictionctl identify" + ("  [directional result]" if result.directional else ""))
    q = st.q
    axis = st.cfg.axis  # rotary or linear unit names
    force, kind = axis.force, axis.force_name

    ax = axes[0, 0]
    colors = {"both": "k", "forward": "tab:blue", "reverse": "tab:orange"}
    for d, c in colors.items():
        pts = [p for p in st.points if p["direction"] == d]
        if not pts:
            continue
        v = np.array([p["speed_rad_s"] for p in pts])
        F = np.array([p["friction_nm"] for p in pts])
        ok = np.array([p["used"] for p in pts], dtype=bool)
        ax.plot(v[ok], F[ok], "o", color=c, ms=5 if d == "both" else 4, label=f"{d} points")
        if (~ok).any():
            ax.plot(v[~ok], F[~ok], "x", color="tab:red", ms=7,
                    label="rejected" if d == "both" else None)
        fit = st.fits.get(d)
        if fit is not None:
            vv = np.geomspace(v.min() * 0.7, v.max() * 1.3, 300)
            ax.plot(vv, fit.curve(vv), "-", color=c, lw=1.2 if d == "both" else 0.8,
                    label=f"{d} fit: Fc {fit.Fc:.4g}, Fs {fit.Fs:.4g}, vs {fit.vs:.3g}")
    fb = result.friction
    if isinstance(fb, LuGreParams):
        ax.axhline(fb.Fs, color="gray", ls=":", lw=1, label=f"Fs (breakaway) {fb.Fs:.4g}")
    ax.set_xscale("log")
    ax.set_xlabel(f"speed [{axis.speed}]")
    ax.set_ylabel(f"steady friction [{force}]")
    ax.set_title("constant-velocity sweep")
    ax.legend(fontsize=7)

    ax = axes[0, 1]
    for b, rec in zip(st.breaks, st.break_records):
        i0 = rec.info.get("ramp_start_index", 0)
        sl = slice(i0, None)
        d = rec.info.get("direction", 1)
        x = d * (rec.pos[sl] - rec.pos[i0]) / q
        ax.plot(d * rec.torque[sl], x, lw=0.7, color="tab:blue" if d > 0 else "tab:orange")
        if b.found:
            ax.plot(b.breakaway_nm, d * (rec.pos[b.peak_index] - rec.pos[i0]) / q, "k.", ms=8)
    ax.set_yscale("symlog", linthresh=50)
    ax.set_xlabel(f"|drive {kind}| [{force}]")
    ax.set_ylabel("travel along the ramp [counts]")
    ax.set_title("breakaway ramps (dot: breakaway)")

    ax = axes[1, 0]
    pre_rec = st.presliding_rec
    if pre_rec is not None:
        rec = pre_rec
        f = st.presliding_info.get("frequency_hz", 1.0)
        keep = (rec.t - 0.5) * f >= 1.0
        ax.plot(rec.torque[keep], rec.pos[keep] / q, lw=0.4, color="tab:gray", label="kept cycles")
        if st.presliding is not None:
            for (i0, i1) in st.presliding.branches:
                ax.plot(rec.torque[i0:i1 + 1], rec.pos[i0:i1 + 1] / q, ".", ms=1, color="tab:blue")
            tq = rec.torque[keep]
            tt = np.linspace(np.percentile(tq, 2), np.percentile(tq, 98), 10)
            xm = float(np.mean(rec.pos[keep] / q))
            ax.plot(tt, xm + (tt - np.mean(tq)) / (st.presliding.sigma0 * q), "k-", lw=1.2,
                    label=f"sigma0 = {st.presliding.sigma0:.4g} ± {st.presliding.se:.2g} {axis.of('N·m/rad')}")
        ax.legend(fontsize=8)
    ax.set_xlabel(f"drive {kind} [{force}]")
    ax.set_ylabel("position [counts]")
    ax.set_title("pre-sliding loops")

    ax = axes[1, 1]
    ring_rec = st.ringing_rec
    if ring_rec is not None:
        rec = ring_rec
        ax.plot(rec.t, rec.pos / q, lw=0.6, label="encoder")
        if st.ringing is not None and st.ringing.simulated.size:
            ax.plot(rec.t[:st.ringing.simulated.size], st.ringing.simulated / q, lw=0.6,
                    label=f"fit: sigma1 = {st.ringing.sigma1:.3g} ± {st.ringing.se:.2g}")
        ax.legend(fontsize=8)
    ax.set_xlabel("t [s]")
    ax.set_ylabel("position [counts]")
    ax.set_title(f"pre-sliding ringing after {kind} steps")
    for a in axes.flat:
        a.grid(True, alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return png


# --- identification from a run log --------------------------------------------------------------


LOG_REQUIRED = ("t_s", "pos_rad", "vel_ref_rad_s", "current_a")
MIN_LOG_SPEEDS = 5  # distinct constant-velocity speeds for the stretch analysis (else sliding)


def identify_from_log(log_paths: str | Path | list[str | Path], cfg: Config, out_dir: str | Path, *,
                      settings: IdentifySettings | None = None, prior: FrictionParams | None = None,
                      min_segment_s: float = 1.0, plot: bool = True) -> IdentifyResult:
    """Fit the Stribeck curve (Fc, Fs, vs, sigma2) from recorded run logs (one or several).

    What a log must contain (columns of ``controller.runlog``): ``t_s``, ``pos_rad``,
    ``vel_ref_rad_s`` and ``current_a`` (torque = cfg.controller.Kt × current; the J·a term uses
    cfg.controller.J). Optional: ``fault`` and ``drive_state`` (ticks with a fault or a drive
    not ENABLED are left out). Any compensation mode: only the measured current counts.

    Each log is read one of two ways:

    - **constant-velocity stretches** (a recorded identification sweep, :func:`sweep_reference`):
      when the log holds at least ``MIN_LOG_SPEEDS`` different speeds constant for
      ``min_segment_s`` or longer. The first part of each stretch (the sweep's settle time) is
      skipped; forward and reverse over the same stretch of angle cancel position-dependent
      torques; stick-slip stretches are rejected;
    - **quasi-steady sliding** (ordinary operating logs: sines, scans, moves): every tick where
      the bristles have settled and follow the speed (:func:`hil.identify_sliding.sliding_samples`:
      10 pre-sliding lengths Fs/sigma0 of the prior since the last reversal or rest, bristle lag
      below 5 % of the time the speed takes to change, at least 2 counts per smoothing window),
      with friction = Kt·i − J·a, binned by speed per direction
      (:func:`hil.identify_sliding.binned_friction_points`). Only the speeds the motion covers
      are seen: a 0.05 rad/s sine shows the falling part down to about a third of vs on the
      reference table, a scan at one speed only that speed and its ramps — where the Stribeck
      part is not pinned down, Fc and sigma2 come from a line and vs stays the prior's
      (``diagnostics.sweep.notes`` says so).

    sigma0, sigma1 and J are kept from the prior/config (``diagnostics.sources``).
    Writes params.yaml, identify.json (and identify.png).
    """
    wall0 = time.perf_counter()
    settings = settings or IdentifySettings()
    prior = prior if prior is not None else cfg.controller.friction
    paths = [log_paths] if isinstance(log_paths, (str, Path)) else list(log_paths)
    if not paths:
        raise IdentificationError("identify: no log given")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    p = planning_params(prior)
    st = _State(cfg=cfg, settings=settings, prior=prior, p=p, dt=cfg.loop.dt_s, J=cfg.controller.J,
                q=cfg.plant.encoder.rad_per_count, hold_shape_if_few=True)
    logs = []
    for path in paths:
        info = _log_points(path, st, min_segment_s)
        logs.append(info)
    if not st.points:
        raise IdentificationError(f"identify: {', '.join(map(str, paths))}: no constant-velocity stretch "
                                  f"of at least {min_segment_s:g} s and no quasi-steady sliding")
    _fit_sweep(st)
    if "both" not in st.fits:
        one = [d for d in ("forward", "reverse") if d in st.fits]
        if not one:
            raise IdentificationError(f"identify: {', '.join(map(str, paths))}: cannot fit the Stribeck "
                                      "curve: " + "; ".join(st.fit_notes.values()))
        st.fits["both"] = st.fits[one[0]]
        st.warnings.append(f"only {one[0]} motion in the log: offsets (gravity, sensor zero, "
                           "cogging) are not cancelled")
    result = _assemble(st)
    result.diagnostics["log"] = logs[0] if len(logs) == 1 else logs
    files = _write_raw(out, st, [])
    _write_params(out / "params.yaml", result, cfg.axis)
    files["params"] = str(out / "params.yaml")
    if plot:
        plot_identification(st, result, out / "identify.png")
        files["report"] = str(out / "identify.png")
    result.files = files
    result.wall_s = time.perf_counter() - wall0
    return result


def _log_points(log_path: str | Path, st: _State, min_segment_s: float) -> dict[str, Any]:
    """Friction points of one log into ``st.points`` (see :func:`identify_from_log`)."""
    from controller.runlog import read_log

    from .identify_sliding import binned_friction_points, sliding_samples

    run = read_log(log_path)
    missing = [c for c in LOG_REQUIRED if c not in run.columns]
    if missing:
        raise IdentificationError(f"identify: {log_path}: the log lacks column(s) {', '.join(missing)} "
                                  f"(needs {', '.join(LOG_REQUIRED)})")
    settings, p = st.settings, st.p
    t = run["t_s"]
    x = run["pos_rad"]
    vref = run["vel_ref_rad_s"]
    tq = st.cfg.controller.Kt * run["current_a"]
    valid = np.isfinite(x) & np.isfinite(tq) & np.isfinite(t)
    if "fault" in run.columns:
        valid &= run["fault"] == 0
    if "drive_state" in run.columns:
        valid &= run["drive_state"] == float(DriveState.ENABLED)
    dt = float(np.median(np.diff(t))) if t.size > 1 else st.cfg.loop.dt_s
    st.dt = dt
    segs = constant_velocity_segments(t, vref, min_duration_s=min_segment_s, valid=valid)
    groups: dict[float, dict[int, list[tuple[np.ndarray, np.ndarray]]]] = {}
    keys: list[float] = []
    skipped: list[dict[str, Any]] = []
    for i0, i1, v in segs:
        speed = abs(v)
        settle = settle_time(speed, p, settings)
        j0 = i0 + int(math.ceil(settle / dt))
        if i1 - j0 < int(0.5 / dt):
            skipped.append({"speed_rad_s": speed, "t_s": float(t[i0]),
                            "reason": "stretch too short after the settle time"})
            continue
        key = next((k for k in keys if abs(k - speed) <= 0.005 * speed), None)
        if key is None:
            key = speed
            keys.append(key)
        groups.setdefault(key, {}).setdefault(1 if v > 0 else -1, []).append((x[j0:i1], tq[j0:i1]))
    info: dict[str, Any] = {"path": str(log_path), "segments": len(segs), "complete": run.complete}
    if len(groups) < MIN_LOG_SPEEDS:
        try:
            samples = sliding_samples(t, x, tq, J=st.J, rad_per_count=st.q,
                                      presliding_rad=p.Fs / p.sigma0, valid=valid)
        except ValueError as err:
            raise IdentificationError(f"identify: {log_path}: {err}") from None
        pts = binned_friction_points(samples, dt_s=dt, source=str(log_path))
        st.points += pts
        info.update(method="quasi-steady sliding", ticks_used=int(samples.steady.sum()),
                    ticks=int(t.size), points=len(pts))
        return info
    st.skipped += skipped
    for speed in sorted(groups):
        merged = {d: (np.concatenate([a for a, _ in lst]), np.concatenate([b for _, b in lst]))
                  for d, lst in groups[speed].items()}
        # stick-slip is judged per stretch, on the longest one of each direction
        pts = _analyse_speed(speed, {d: max(lst, key=lambda ab: ab[0].size)
                                     for d, lst in groups[speed].items()}, dt, st.J, st.q, settings)
        if any(len(lst) > 1 for lst in groups[speed].values()):
            merged_pts = _analyse_speed(speed, merged, dt, st.J, st.q, settings)
            for a, b in zip(pts, merged_pts):  # values from all stretches, verdicts per stretch
                for k in ("torque_nm", "friction_nm", "offset_nm", "n", "se_nm", "overlap"):
                    if k in b:
                        a[k] = b[k]
        for pt in pts:
            pt["pass"] = str(log_path)
            st.points.append(pt)
    info.update(method="constant-velocity stretches", speeds=len(groups))
    return info


__all__ = [
    "EXPERIMENTS", "IdentificationError", "IdentifyResult", "IdentifySettings", "identify",
    "identify_from_log", "sweep_reference", "sweep_speeds", "plot_identification",
]
