"""Momentum observer, LuGre observer (residual / tracking-error correction), containment, and the
lugre compensator in a closed loop on the simulated turntable."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import configs
from controller.compensation import NoCompensation, TickSignals, make_compensator
from controller.config import load_config
from controller.estimation_config import ObserverConfig
from controller.friction import DirectionalParams, LuGreParams, lugre_step, stribeck
from controller.lugre_compensator import LuGreCompensator, make_lugre_compensator
from controller.observer import (LoadEstimate, LuGreObserver, MomentumObserver, Watchdog,
                                 lugre_driven_step)
from controller.runlog import read_log
from controller.velocity import VelocityEstimator
from controller.schema import ConfigError, parse_dataclass
from hil.plant import Turntable

from .conftest import reference_config, sim

DT = 1e-3
CFG = load_config(configs.path("turntable"))
P = CFG.controller.friction  # = the plant's truth in the reference config


# --- a small closed loop: PID with the configured gains, encoder velocity, compensator ---------


def closed_loop(comp, ref, duration_s, *, plant_cfg=None, ctrl=None, seed=1, on_tick=None):
    """Run ``comp`` with the configured PID on a Turntable; ref(t) -> (pos, vel, acc).
    Returns (rms, max) of the true tracking error after 1 s [rad]."""
    plant = Turntable(plant_cfg or CFG.plant, seed=seed)
    ctrl = ctrl or CFG.controller
    gains = ctrl.pid
    s = TickSignals()
    a_v = 1.0 - math.exp(-2 * math.pi * ctrl.velocity.cutoff_hz * DT)
    a_d = 1.0 - math.exp(-2 * math.pi * gains.derivative_cutoff_hz * DT)
    vel = integ = d_f = e_prev = pos_prev = 0.0
    sq = peak = 0.0
    count = 0
    for k in range(int(round(duration_s / DT))):
        t = k * DT
        m = plant.measure()
        vel += a_v * ((m.position_rad - pos_prev) / DT - vel) if k else 0.0
        pos_prev = m.position_rad
        pr, vr, ar = ref(t)
        s.t_s, s.pos_rad, s.vel_rad_s, s.current_a = t, m.position_rad, vel, m.current_a
        s.pos_ref_rad, s.vel_ref_rad_s, s.acc_ref_rad_s2 = pr, vr, ar
        s.temperature_c, s.true_friction_nm = plant.temperature_c, plant.friction_nm
        ff = comp.step(s, DT)
        e = pr - m.position_rad
        d_f += a_d * ((e - e_prev) / DT - d_f) if k else 0.0
        e_prev = e
        u = gains.kp * e + gains.ki * integ + gains.kd * d_f + ff + ctrl.J * ar
        s.saturated = abs(u) > gains.output_limit_nm
        if s.saturated:
            u = math.copysign(gains.output_limit_nm, u)
        else:
            integ += e * DT
        s.torque_cmd_prev_nm = u
        if on_tick:
            on_tick(t, plant, comp)
        if t >= 1.0:
            err = pr - plant.theta_rad
            sq += err * err
            peak = max(peak, abs(err))
            count += 1
        plant.advance(u / ctrl.Kt, DT)
    return math.sqrt(sq / count), peak


def sine_ref(t, start=0.2, amp=0.0159155, w=math.pi):
    """A(1 − cos ωt): starts at rest, peak 0.05 rad/s, reverses every second."""
    tt = t - start
    if tt <= 0:
        return 0.0, 0.0, 0.0
    return amp * (1 - math.cos(w * tt)), amp * w * math.sin(w * tt), amp * w * w * math.cos(w * tt)


# --- the exponential update ------------------------------------------------------------------


@pytest.mark.parametrize("v", [0.0, 1e-7, -3e-4, 0.01, -0.05, 1.0])
@pytest.mark.parametrize("dt", [1e-5, 1e-3, 0.1])
def test_driven_step_without_extras_is_lugre_step(v, dt):
    for z in (0.0, 0.5 * P.z_max, -P.z_max):
        z_ref, _ = lugre_step(P, z, v, dt)
        z_new, _ = lugre_driven_step(P, z, v, dt)
        assert z_new == pytest.approx(z_ref, rel=1e-12, abs=1e-18)


@settings(max_examples=300, deadline=None)
@given(z=st.floats(-1.0, 1.0), v=st.floats(-10.0, 10.0), dt=st.floats(1e-6, 10.0),
       L=st.floats(0.0, 1e3), r=st.floats(-5.0, 5.0), scale=st.floats(0.2, 5.0))
def test_driven_step_is_a_convex_combination(z, v, dt, L, r, scale):
    """For every L >= 0 and dt the corrected update lands between ẑ and the step's equilibrium."""
    z = z * P.z_max
    u, c = L * (r - P.sigma2 * v), L * P.sigma0
    z_new, a = lugre_driven_step(P, z, v, dt, u, c, scale)
    assert math.isfinite(z_new)
    if a + c > 0:
        eq = (v + u) / (a + c)
        lo, hi = min(z, eq), max(z, eq)
        assert lo - 1e-12 * (1 + abs(lo)) <= z_new <= hi + 1e-12 * (1 + abs(hi))


@pytest.mark.parametrize("v", [-0.2, -0.01, -0.002, 0.003, 0.01, 0.05, 0.3])
def test_observer_steady_state_is_the_stribeck_curve(v):
    obs = LuGreObserver(P)
    for _ in range(3000):
        f = obs.step(v, DT)
    assert f == pytest.approx(stribeck(P, v), rel=1e-9)


def test_directional_sets_and_parameter_swap_clamp_the_state():
    fwd = P
    rev = P.scaled(Fc=0.5, Fs=0.5)
    obs = LuGreObserver(DirectionalParams(fwd, rev))
    for _ in range(500):
        obs.step(-0.05, DT)
    assert obs.active is rev
    assert obs.f_hat == pytest.approx(stribeck(rev, -0.05))
    obs.z_hat = fwd.z_max
    obs.set_params(P.scaled(Fs=0.8, Fc=0.8))  # smaller bound: ẑ carried over, clamped
    assert obs.z_hat == pytest.approx(0.8 * P.z_max)


# --- momentum observer -----------------------------------------------------------------------


def test_momentum_observer_recovers_a_constant_torque_with_its_time_constant():
    """J·ω' = Kt·i − d with constant i and d: r(t) = d·(1 − exp(−K·t)) at every tick."""
    J, Kt, bw = 0.08, 0.6, 50.0
    K = 2 * math.pi * bw
    i, d = 0.5, 0.17
    obs = MomentumObserver(J, Kt, bw)
    for k in range(1, 201):
        t = k * DT
        r = obs.step(i, (Kt * i - d) / J * t, DT)
        assert r == pytest.approx(d * (1 - math.exp(-K * t)), rel=1e-9)
    # one time constant: 63 % of the step
    obs.reset()
    n = int(round(1 / K / DT))
    for k in range(1, n + 1):
        r = obs.step(i, (Kt * i - d) / J * k * DT, DT)
    assert r / d == pytest.approx(1 - math.exp(-n * DT * K), rel=1e-9)
    assert 0.55 < r / d < 0.7


def test_momentum_observer_measures_the_plant_friction_when_sliding():
    """Open loop on the plant (current noise, quantized encoder): constant torque above Fs."""
    plant = Turntable(CFG.plant, seed=3)
    obs = MomentumObserver(CFG.controller.J, CFG.controller.Kt, 100.0)
    errs = []
    pos_prev = 0.0
    for k in range(3000):
        plant.advance(0.5 / CFG.plant.Kt if k < 200 else 0.232 / CFG.plant.Kt, DT)
        m = plant.measure()
        v = (m.position_rad - pos_prev) / DT
        pos_prev = m.position_rad
        r = obs.step(m.current_a, v, DT)
        if k > 1500:
            errs.append(r - plant.friction_nm - plant.disturbance_nm(plant.theta_rad))
    mean = sum(errs) / len(errs)
    rms = math.sqrt(sum(e * e for e in errs) / len(errs))
    assert abs(mean) < 0.002 and rms < 0.02  # N·m, against Fc = 0.2


def test_the_momentum_balance_takes_out_the_velocity_filters_lag_on_the_plan():
    """The loop's velocity is the encoder difference through a first-order low-pass, whose
    increments trail the acceleration: J·(a − LPF(a)) would read as friction, +J·a through the
    first ticks of a ramp and −J·a where it ends. An axis that follows its plan exactly under a
    constant load: the compensator's measured friction r is what a momentum observer on the
    true velocity reads (the load through its lag), tick by tick; without the correction
    (velocity_cutoff_hz 0) it is off by a large part of J·a at each end of the ramp."""
    J, Kt, load = CFG.controller.J, CFG.controller.Kt, 0.2

    def acc(k):  # the planned acceleration over the tick [k, k+1] (a_ref at tick k)
        return 2.0 if 100 <= k < 110 else (-2.0 if 300 <= k < 310 else 0.0)

    def worst(cutoff_hz):
        comp = LuGreCompensator(P, J, Kt, observer=ObserverConfig(),
                                velocity_cutoff_hz=cutoff_hz)
        truth = MomentumObserver(J, Kt, comp.momentum.bandwidth_hz)
        velocity = VelocityEstimator("encoder", CFG.controller.velocity.cutoff_hz)
        s = TickSignals()
        pos = v = 0.0
        errors = []
        for k in range(500):
            s.t_s = k * DT
            s.pos_rad = s.pos_ref_rad = pos
            s.vel_ref_rad_s = v
            s.vel_rad_s = velocity.step(pos, 0.0, DT)
            s.acc_ref_rad_s2 = acc(k)
            s.current_a = (J * acc(k - 1) + load) / Kt  # held over the tick just elapsed
            comp.step(s, DT)
            errors.append(comp.momentum_nm - truth.step(s.current_a, v, DT))
            pos += v * DT + 0.5 * acc(k) * DT * DT
            v += acc(k) * DT
        return max(abs(e) for e in errors)

    assert worst(CFG.controller.velocity.cutoff_hz) < 1e-9
    assert worst(0.0) > 0.2 * J * 2.0


# --- LuGre observer on the plant -------------------------------------------------------------


def _drive_open_loop(obs_step, seconds, amp_nm=0.35, freq_hz=0.5, seed=2, z0_error=0.0):
    """Sinusoidal torque through breakaway and reversals; returns list of (F̂ − F) after 2 s."""
    plant = Turntable(CFG.plant, seed=seed)
    mom = MomentumObserver(CFG.controller.J, CFG.controller.Kt, 100.0)
    errs = []
    pos_prev = 0.0
    for k in range(int(seconds / DT)):
        t = k * DT
        plant.advance(amp_nm * math.sin(2 * math.pi * freq_hz * t) / CFG.plant.Kt, DT)
        m = plant.measure()
        v = (m.position_rad - pos_prev) / DT
        pos_prev = m.position_rad
        r = mom.step(m.current_a, v, DT)
        f_hat = obs_step(v, r)
        if t >= 2.0:
            errs.append(f_hat - plant.friction_nm)
    return errs


def test_observer_with_true_parameters_tracks_the_plant_friction():
    L = LuGreObserver.gain_for(30.0, P)
    obs = LuGreObserver(P, L)
    obs.z_hat = -P.z_max  # wrong start
    errs = _drive_open_loop(lambda v, r: obs.step(v, DT, r), 6.0)
    rms = math.sqrt(sum(e * e for e in errs) / len(errs))
    assert rms < 0.05 * P.Fc


def test_residual_correction_removes_an_initial_state_error():
    """Stuck under a torque below breakaway (ramped in, no bristle ringing): friction = applied
    torque. Without correction a wrong ẑ persists; with it F̂ converges at ω_L = L·sigma0."""
    plant = Turntable(CFG.plant, seed=4)
    torque = 0.15
    bw = 30.0
    corrected = LuGreObserver(P, LuGreObserver.gain_for(bw, P))
    uncorrected = LuGreObserver(P, 0.0)
    corrected.z_hat = uncorrected.z_hat = -P.z_max
    mom = MomentumObserver(CFG.controller.J, CFG.controller.Kt, 100.0)
    pos_prev = 0.0
    for k in range(600):
        plant.advance(torque * min(1.0, k / 200) / CFG.plant.Kt, DT)
        m = plant.measure()
        v = (m.position_rad - pos_prev) / DT
        pos_prev = m.position_rad
        r = mom.step(m.current_a, v, DT)
        f_c = corrected.step(v, DT, r)
        f_u = uncorrected.step(v, DT, r)
    assert plant.friction_nm == pytest.approx(torque, abs=0.01)  # stuck (cogging aside)
    assert f_c == pytest.approx(plant.friction_nm, abs=0.01)
    assert abs(f_u - plant.friction_nm) > 0.03  # stuck, no correction: the error stays


def test_tracking_error_correction_moves_the_state_against_the_error():
    obs = LuGreObserver(P, 0.0, tracking_gain_per_s=20.0)
    obs.step(0.0, DT, e_rad=-1e-6)  # lagging behind the reference: more friction forward
    assert obs.z_hat == pytest.approx(20.0 * 1e-6 * DT)


# --- containment -----------------------------------------------------------------------------


@pytest.mark.parametrize("L", [-1.0, -1e-3, 1e3])
def test_wrong_sign_or_huge_gain_stays_bounded(L):
    obs = LuGreObserver(P, L, margin_nm=0.05)
    errs = _drive_open_loop(lambda v, r: obs.step(v, DT, r), 3.0)
    assert all(math.isfinite(e) for e in errs)
    assert abs(obs.z_hat) <= P.z_max
    assert max(abs(e) for e in errs) < 2 * P.Fs + 0.1


def test_watchdog_trips_on_persistent_disagreement_not_on_spikes():
    wd = Watchdog(0.1, 0.03, watchdog_s=0.2, recover_s=1.0)
    for k in range(1000):  # a 5 ms spike every 100 ms
        wd.step(0.5 if k % 100 < 5 else 0.0, 0.2, 0.05, DT)
    assert not wd.fallback
    for _ in range(199):
        wd.step(0.0, -0.2, 0.05, DT)  # wrong sign while sliding
    assert not wd.fallback
    wd.step(0.0, -0.2, 0.05, DT)
    assert wd.fallback and wd.reason == "wrong sign"
    for _ in range(999):
        wd.step(0.0, 0.2, 0.05, DT)
    assert wd.fallback
    wd.step(0.0, 0.2, 0.05, DT)
    assert not wd.fallback and wd.trips == 1
    wd.step(math.nan, 0.2, 0.05, DT, finite=False)
    assert wd.fallback and wd.reason == "non-finite input"


def test_watchdog_recovers_across_isolated_spikes_counted_from_the_trip():
    """Recovery accumulates leakily like the trip: consistent time since the trip, less the
    inconsistent, must reach recover_s; a spike at every reversal no longer resets it (with
    that, a reversing motion never recovered). Time before the trip does not count, and a
    non-finite input restarts the count."""
    wd = Watchdog(0.1, 0.03, watchdog_s=0.2, recover_s=1.0)
    for _ in range(2000):
        wd.step(0.0, 0.2, 0.05, DT)  # consistent for 2 s before: no credit
    for _ in range(200):
        wd.step(0.5, 0.2, 0.05, DT)
    assert wd.fallback and wd.good_s == 0.0
    ticks = 0
    while wd.fallback and ticks < 5000:  # a 5 ms spike every 100 ms: 90 ms net per period
        wd.step(0.5 if ticks % 100 < 5 else 0.0, 0.2, 0.05, DT)
        ticks += 1
    assert 1100 <= ticks <= 1150  # 1.0 s / 0.9 of the time, about
    for _ in range(200):
        wd.step(0.5, 0.2, 0.05, DT)
    assert wd.fallback and wd.trips == 2
    for _ in range(900):
        wd.step(0.0, 0.2, 0.05, DT)
    wd.step(math.nan, 0.2, 0.05, DT, finite=False)  # restarts the count
    for _ in range(999):
        wd.step(0.0, 0.2, 0.05, DT)
    assert wd.fallback
    wd.step(0.0, 0.2, 0.05, DT)
    assert not wd.fallback


def test_a_residual_within_its_share_of_the_measured_torque_is_consistent():
    """``share``: a residual beyond the limit but within share·|measured| (the estimate explains
    the larger part of what is measured: a level or a load off, the adapter's and the learned
    terms' to correct) does not count; beyond both it does; share 0 is the limit alone. At a
    measured torque near 0 (a reversal, rest) the limit decides."""
    shared = Watchdog(0.1, 0.03, watchdog_s=0.2, share=0.5)
    alone = Watchdog(0.1, 0.03, watchdog_s=0.2)
    for _ in range(1000):  # 0.12 off of 0.3 measured: within half of it
        shared.step(0.12, 0.2, 0.05, DT, True, 0.3)
        alone.step(0.12, 0.2, 0.05, DT, True, 0.3)
    assert not shared.fallback and shared.bad_s == 0.0
    assert alone.fallback and alone.reason == "residual"
    for _ in range(199):  # 0.16 off of 0.3: beyond half of it
        shared.step(0.16, 0.2, 0.05, DT, True, 0.3)
    assert not shared.fallback
    shared.step(0.16, 0.2, 0.05, DT, True, 0.3)
    assert shared.fallback and shared.reason == "residual"
    near_zero = Watchdog(0.1, 0.03, watchdog_s=0.2, share=0.5)
    for _ in range(200):  # measured 0.02: the limit alone decides
        near_zero.step(0.11, 0.2, 0.05, DT, True, 0.02)
    assert near_zero.fallback


def test_the_load_is_the_half_sum_of_the_two_directions_at_common_speeds():
    """A load L and a friction error ±e: forward the friction less the believed curve is
    L + e, backward L − e. One direction alone cannot tell them apart (0, not trusted); both
    measured at a common speed for ``evidence_s``, the half-sum is L. Directions measured only
    at different speeds are not compared (an error that depends on the speed is not a load).
    Not sliding or a non-finite input holds it; the mean forgets with ``time_constant_s`` of
    in-bin time."""
    est = LoadEstimate(time_constant_s=2.0, evidence_s=0.2, vs=0.01)
    for _ in range(1000):
        assert est.step(0.05 + 0.04, 0.05, +1, DT) == 0.0
    for _ in range(1000):  # backward, but 25 times slower: another speed
        est.step(0.05 - 0.01, -0.002, -1, DT)
    assert not est.trusted and est.load_nm == 0.0
    for _ in range(199):
        est.step(0.05 - 0.04, -0.05, -1, DT)
    assert not est.trusted and est.load_nm == 0.0
    est.step(0.05 - 0.04, -0.05, -1, DT)
    assert est.trusted and est.load_nm == pytest.approx(0.05, rel=1e-9)
    assert est.level_error_nm == pytest.approx(0.04, rel=1e-9)  # the friction's own error
    assert est.step(5.0, 0.05, 0, DT) == est.step(math.nan, 0.05, +1, DT) == \
        pytest.approx(0.05, rel=1e-9)
    # the load changes to 0.02 (the axis turned under an unbalance), measured backward: up to
    # 2 s of in-bin time the plain mean (0.2 s at 0.05 − 0.04 before, 1.8 s at 0.02 − 0.04
    # now), then forgetting with the 2 s time constant (0.2 s more); the bins' weight is the
    # shorter in-bin time, 1 s forward
    for _ in range(2000):
        est.step(0.02 - 0.04, -0.05, -1, DT)
    mean = (0.2 * 0.01 + 1.8 * -0.02) / 2.0
    mean = -0.02 + (mean + 0.02) * (1.0 - DT / 2.0) ** 200
    assert est.load_nm == pytest.approx(0.5 * (0.09 + mean), rel=1e-6)
    est.reset()
    assert not est.trusted and est.load_nm == 0.0
    # errors of opposite sign at two speeds (the believed Fs high, Fc low) do not cancel: the
    # level error is their magnitude, the load the half-sum as ever
    for v, error in ((0.01, +0.03), (0.1, -0.03)):
        for direction in (+1, -1):
            for _ in range(300):
                est.step(0.05 + direction * error, direction * v, direction, DT)
    assert est.load_nm == pytest.approx(0.05, rel=1e-9)
    assert est.level_error_nm == pytest.approx(0.03, rel=1e-9)
    est.reset()
    # a floor: a measured load up to it is not taken as one (measured_nm still says it)
    est = LoadEstimate(time_constant_s=2.0, evidence_s=0.2, vs=0.01, floor_nm=0.02)
    for direction, friction in ((+1, 0.015 + 0.04), (-1, 0.015 - 0.04)):
        for _ in range(300):
            est.step(friction, 0.05 * direction, direction, DT)
    assert est.trusted and est.load_nm == 0.0
    assert est.measured_nm == pytest.approx(0.015, rel=1e-9)
    for _ in range(3000):
        est.step(0.03 + 0.04, 0.05, +1, DT)
        est.step(0.03 - 0.04, -0.05, -1, DT)
    mean = (0.3 * 0.015 + 1.7 * 0.03) / 2.0  # the plain mean to 2 s, then 1.3 s forgetting
    assert est.load_nm == pytest.approx(0.03 + (mean - 0.03) * (1.0 - DT / 2.0) ** 1300,
                                        rel=1e-6)


def _compensator(ctrl=None, **observer):
    ctrl = ctrl or CFG.controller
    return LuGreCompensator(ctrl.friction, ctrl.J, ctrl.Kt, observer=ObserverConfig(**observer))


def _loop_compensator(ctrl=None, **observer):
    """For ``closed_loop``, whose velocity is the loop's filtered encoder difference: the
    compensator takes that filter's lag out of its momentum balance, as the loop's does."""
    ctrl = ctrl or CFG.controller
    return LuGreCompensator(ctrl.friction, ctrl.J, ctrl.Kt, observer=ObserverConfig(**observer),
                            velocity_cutoff_hz=ctrl.velocity.cutoff_hz)


@pytest.mark.parametrize("wrong, mode, limit", [(dict(Fc=3.0, Fs=3.0), "off", None),
                                                (dict(Fc=0.3, Fs=0.3), "off", None),
                                                (dict(Fc=1.6, Fs=1.6), "off", 0.1)])
def test_wildly_wrong_parameters_are_contained(wrong, mode, limit):
    """The residual trips the watchdog; the static curve of the same wrong set disagrees with the
    measurement too, so the feedforward is dropped: degraded to no compensation, no runaway.
    (A 60 % too high Fc is inside the derived limit 0.5·Fc of the believed set — the adapter's
    job — so that case uses an explicit, tighter limit: the override.)"""
    ctrl = dataclasses.replace(CFG.controller, friction=P.scaled(**wrong))
    comp = _loop_compensator(ctrl, residual_limit_nm=limit)
    ff = []
    rms, peak = closed_loop(comp, sine_ref, 5.2, ctrl=ctrl,
                            on_tick=lambda t, plant, c: ff.append(c.feedforward_nm))
    assert comp.watchdog.trips >= 1 and comp.fallback and comp.fallback_mode == mode
    margin = comp.cfg.clamp_margin_nm  # derived: 0.25·Fc of the believed set
    assert margin == pytest.approx(0.25 * ctrl.friction.Fc)
    dob = comp.cfg.dob_limit_nm  # derived: 0.5·Fs, the bound of the disturbance-observer term
    assert dob == pytest.approx(0.5 * ctrl.friction.Fs)
    assert max(map(abs, ff)) <= ctrl.friction.Fs + ctrl.friction.sigma2 * 0.06 + margin + dob + 1e-9
    rms_off, peak_off = closed_loop(NoCompensation(), sine_ref, 5.2)
    assert peak < 3 * peak_off


def test_stribeck_fallback_when_only_the_dynamics_are_wrong():
    """Wrong-sign bristle dynamics (a diverging ẑ) with a correct static curve: Stribeck kept."""
    comp = _loop_compensator()
    comp.estimator.L = comp.ff_model.L = -comp.estimator.L * 20  # wrong-sign correction
    rms, peak = closed_loop(comp, sine_ref, 4.0)
    assert comp.watchdog.trips >= 1
    assert comp.fallback_mode == "stribeck"
    assert peak < 30e-6


def test_at_a_held_speed_the_residual_correction_fades_with_the_dob_term():
    """Ramp to 0.01 rad/s, hold it: the estimator's and the feedforward model's correction gain
    stay full while accelerating and for dob_steady_s at the held speed, then fall with the
    DOB weight to 0 by twice that; the next acceleration restores them at once."""
    comp = _compensator()
    full = comp.estimator.L
    assert full > 0.0 and comp.ff_model.L == full
    steady = comp.cfg.dob_steady_s
    s, t, v, seen = TickSignals(), 0.0, 0.0, []
    for k in range(int((0.1 + 2.5 * steady) / DT)):
        t += DT
        acc = 0.1 if t < 0.1 else 0.0
        v = min(v + acc * DT, 0.01)
        s.t_s, s.vel_ref_rad_s, s.vel_rad_s, s.acc_ref_rad_s2 = t, v, v, acc
        s.pos_ref_rad += v * DT
        s.pos_rad = s.pos_ref_rad
        s.current_a = stribeck(P, v) / CFG.controller.Kt
        comp.step(s, DT)
        seen.append((t, comp.estimator.L, comp.ff_model.L, comp.dob_weight))
    assert all(e == f == full for tt, e, f, _ in seen if tt < 0.1 + steady - 2 * DT)
    mid = [(e, w) for tt, e, f, w in seen if 0.1 + 1.4 * steady < tt < 0.1 + 1.6 * steady]
    assert all(0.0 < e < full for e, _ in mid)
    assert seen[-1][1] == seen[-1][2] == 0.0
    s.acc_ref_rad_s2 = 0.1  # accelerating again
    s.vel_ref_rad_s = 0.0101
    comp.step(s, DT)
    assert comp.estimator.L == comp.ff_model.L == full


def _dob_weight_after_ramp(comp, acc: float, v_end: float) -> float:
    """The DOB weight on the first tick at v_end after a ramp from rest at ``acc`` (the plant
    follows the reference exactly; the measured current is the static curve)."""
    s = TickSignals()
    t = 0.0
    v = 0.0
    while True:
        t += DT
        v = min(v + acc * DT, v_end)
        s.t_s = t
        s.vel_ref_rad_s = s.vel_rad_s = v
        s.acc_ref_rad_s2 = acc if v < v_end else 0.0
        s.pos_ref_rad += v * DT
        s.pos_rad = s.pos_ref_rad
        s.current_a = stribeck(P, v) / CFG.controller.Kt
        comp.step(s, DT)
        if v >= v_end:
            return comp.dob_weight


def test_below_vs_the_dob_is_attenuated_after_a_jump_but_not_after_a_slow_sweep():
    """Rule of observer.dob_sweep_s: below vs the term is weighted |v_ref|peak/vs after a
    reference that crossed vs/|a_ref| faster than dob_sweep_s, and close to 1 after a slow
    ramp (a sine's start): the same speed, four times the sweep time. (The pre-sliding ramp,
    dob_presliding_rad, is off here: it would still be ramping the weight in on the short
    jump; its own test follows.)"""
    vs = P.vs
    comp = _compensator(dob_presliding_rad=0.0)
    sweep_s = comp.cfg.dob_sweep_s  # derived (tests/test_derived_defaults.py)
    jump = _dob_weight_after_ramp(comp, acc=10 * vs / sweep_s, v_end=0.5 * vs)
    assert jump == pytest.approx(0.5, abs=0.01)  # attenuated by |v|/vs
    comp = _compensator(dob_presliding_rad=0.0)
    slow = _dob_weight_after_ramp(comp, acc=vs / (4 * sweep_s), v_end=0.5 * vs)
    # the held sweep ratio 1/4 (decayed over the ramp): weight 0.5 + 0.5·(1 − 1/4) or more
    assert 0.875 <= slow < 1.0
    # the override: the same ramp is now a jump
    comp = _compensator(dob_sweep_s=sweep_s * 100, dob_presliding_rad=0.0)
    assert _dob_weight_after_ramp(comp, acc=vs / (4 * sweep_s), v_end=0.5 * vs) == pytest.approx(0.5, abs=0.01)


def test_the_dob_weight_is_ramped_in_over_the_pre_sliding_travel():
    """Rule of observer.dob_presliding_rad (the reference table's bristle mode is lightly
    damped, ζ_b 0.0008): after a start the weight is the sweep rule's times travel/(3·Fs/sigma0)
    until the reference has travelled the pre-sliding range, then the sweep rule's alone."""
    ramp_rad = 3 * P.Fs / P.sigma0
    acc, v_end = 0.01, 0.02  # a slow sweep through vs: the sweep rule leaves the weight near 1
    comp = _compensator()
    assert comp.cfg.dob_presliding_rad == pytest.approx(ramp_rad)
    free = _compensator(dob_presliding_rad=0.0)
    s, t = TickSignals(), 0.0
    seen = 0
    start = None  # the reference position on the first moving tick: travel counts from there
    while s.pos_ref_rad < 2 * ramp_rad:
        t += DT
        v = min(s.vel_ref_rad_s + acc * DT, v_end)
        s.t_s, s.vel_ref_rad_s, s.vel_rad_s, s.acc_ref_rad_s2 = t, v, v, acc if v < v_end else 0.0
        s.pos_ref_rad += v * DT
        s.pos_rad = s.pos_ref_rad
        s.current_a = stribeck(P, v) / CFG.controller.Kt
        comp.step(s, DT)
        free.step(s, DT)
        start = s.pos_ref_rad if start is None else start
        travel = s.pos_ref_rad - start
        expected = free.dob_weight * min(1.0, travel / ramp_rad)
        assert comp.dob_weight == pytest.approx(expected, rel=1e-9, abs=1e-12)
        seen += travel < ramp_rad and free.dob_weight > 0.5
    assert seen > 5  # the ramp really acted on a weight that was there


def _drive(comp, s: TickSignals, v: float, offset_nm: float, ticks: int, read) -> list:
    """Drive the compensator open-loop for ``ticks`` at constant speed ``v`` (the plant on the
    reference), the measured torque the believed static curve plus ``offset_nm``; ``read``
    of the compensator per tick."""
    out = []
    for _ in range(ticks):
        s.t_s += DT
        s.vel_ref_rad_s = s.vel_rad_s = v
        s.pos_ref_rad += v * DT
        s.pos_rad = s.pos_ref_rad
        s.current_a = (stribeck(P, v) + offset_nm) / CFG.controller.Kt
        comp.step(s, DT)
        out.append(read(comp))
    return out


def _steady_dob_terms(comp, v: float, offset_nm: float, ticks: int) -> list[float]:
    """The DOB term per tick at constant reference speed ``v`` from the first tick."""
    return _drive(comp, TickSignals(), v, offset_nm, ticks, lambda c: c.dob_nm)


def test_the_dob_term_is_handed_over_to_the_integrator_at_the_bounded_rate():
    """Rule of observer.handover_rate_nm_s (ki·dob_deadzone_nm/sigma0): once the DOB's term
    fades in steady sliding (after dob_steady_s), it falls by at most rate·dt per tick, a ramp
    the PID's integrator follows with a tracking error rate/ki; with inf it is the weight's
    linear fade over dob_steady_s, gone by 2·dob_steady_s."""
    v, offset = 5 * P.vs, 0.1 * P.Fc  # above the Stribeck region; a level the model misses
    comp = _compensator(dob_presliding_rad=0.0)
    rate, steady = comp.cfg.handover_rate_nm_s, comp.cfg.dob_steady_s
    assert 0.0 < rate < math.inf
    terms = _steady_dob_terms(comp, v, offset, 4000)
    live = int(steady / DT) - 2  # still before the fade
    fading = live + 5  # surely in it
    held = terms[live]
    assert held > 0.5 * offset  # the term was there when the fade began
    for a, b in zip(terms[fading:], terms[fading + 1:]):
        assert abs(b - a) <= rate * DT * (1 + 1e-9)
    gone = fading + next(i for i, x in enumerate(terms[fading:]) if x == 0.0)
    assert gone * DT >= steady + 0.9 * held / rate  # no faster than the rate allows
    free = _steady_dob_terms(_compensator(dob_presliding_rad=0.0, handover_rate_nm_s=math.inf),
                             v, offset, 4000)
    assert free[live] == held  # the same term until the fade
    assert all(x == 0.0 for x in free[int(2 * steady / DT) + 2:])  # the weight's fade alone
    assert gone * DT > 3 * steady


def test_sliding_damping_is_the_linearised_model_above_the_relaxation_rate():
    """sliding_damping(p, v) is dF/dv of the LuGre model linearised about steady sliding at v
    for a step in v much faster than the bristle relaxation (z held): checked against the
    model's own force one exact step after a small velocity step."""
    from controller.friction_step import g, lugre_step, sliding_damping

    p = LuGreParams(Fc=0.16, Fs=0.44, vs=0.0085, sigma0=2875.0, sigma1=67.6, sigma2=0.05)
    for v in (0.3 * p.vs, p.vs, 1.2 * p.vs, 3 * p.vs):
        z = g(p, v) / p.sigma0  # steady sliding at v
        f0 = lugre_step(p, z, v, 1e-9)[1]
        dv = 1e-6 * v
        f1 = lugre_step(p, z, v + dv, 1e-9)[1]  # a step too short for z to move
        assert (f1 - f0) / dv == pytest.approx(sliding_damping(p, v), rel=1e-3, abs=1e-6)
    assert sliding_damping(p, 1.2 * p.vs) < -p.sigma1 / 2  # the sigma1 term weakens with speed
    assert sliding_damping(p, 1e3 * p.vs) == pytest.approx(p.sigma2)
    scaled = p.scaled(Fc=1.3, Fs=1.3)  # the adapter's common scale leaves it unchanged
    assert sliding_damping(scaled, p.vs) == pytest.approx(sliding_damping(p, p.vs))


def _dob_weight_after(comp, p, speed, ticks: int, acc: float = 0.0, offset_nm: float = 0.0,
                      s: TickSignals | None = None, lead_rad_s: float = 0.0) -> float:
    """The DOB's weight after ``ticks`` on a reference that holds ``speed`` (or ramps to it at
    ``acc``), the plant moving with the reference (faster by ``lead_rad_s``) with the static
    friction of ``p`` plus ``offset_nm`` (continuing the run of ``s`` when given)."""
    s = s or TickSignals()
    t0 = s.t_s
    for i in range(1, ticks + 1):
        s.t_s = t0 + i * DT
        s.acc_ref_rad_s2 = acc
        s.vel_ref_rad_s = speed if acc == 0.0 else acc * (i - ticks) * DT + speed
        s.vel_rad_s = s.vel_ref_rad_s + lead_rad_s
        s.pos_ref_rad += s.vel_ref_rad_s * DT
        s.pos_rad += s.vel_rad_s * DT
        s.current_a = (stribeck(p, s.vel_rad_s) + offset_nm + CFG.controller.J * acc) / CFG.controller.Kt
        comp.step(s, DT)
    return comp.dob_weight


def _trapezoid(tt, sign, v=0.01, a=1.0, hold_s=0.3):
    """(pos, vel, acc) of a move from rest: ramp at a to sign·v, hold, ramp back to rest."""
    ramp = v / a
    if tt <= 0.0:
        return 0.0, 0.0, 0.0
    if tt < ramp:
        p, vel, acc = 0.5 * a * tt * tt, a * tt, a
    elif tt < ramp + hold_s:
        p, vel, acc = 0.5 * a * ramp * ramp + v * (tt - ramp), v, 0.0
    else:
        u = min(tt - ramp - hold_s, ramp)
        p = 0.5 * a * ramp * ramp + v * hold_s + v * u - 0.5 * a * u * u
        vel, acc = (v - a * u, -a) if u < ramp else (0.0, 0.0)
    return sign * p, sign * vel, sign * acc


def test_at_a_first_start_the_dob_takes_the_residual_against_the_reference_driven_model():
    """The exact stiff table (sigma1 100), three moves from rest: forward at 0.2 s and 0.8 s,
    reverse at 1.4 s. Against the estimator (driven by the measured motion, half a tick late)
    the breakaway reads as a model error and the DOB pushes the axis ahead: measured with the
    estimator's residual at every start, a DOB peak of 0.056 N·m at the first start and a lead
    of 4.4 µrad (more than Fs/sigma0). At the first start in each direction the DOB takes the
    residual against the feedforward model (driven by the reference): 0.019 N·m, 2.1 µrad; the
    second forward start, after a forward pass, takes the estimator's (0.054 N·m), with the
    learned tables or without (learning off here, so the DOB alone acts).

    That is the momentum balance that reads the velocity filter's lag as friction (the
    compensator built without ``velocity_cutoff_hz``), where this rule was found. With the lag
    taken out, as the loop runs it, the estimator's residual no longer pushes at the later
    start (0.004 N·m, a lead of 0.4 µrad, against the first start's 0.019 N·m and 1.3 µrad),
    and every lead stays within the bristle deflection. The estimator here runs on the encoder
    difference (``velocity_source: encoder``), where the half tick is."""
    from hil.bench_compensation import STIFF, with_plant_friction

    case = with_plant_friction(CFG, STIFF)
    ctrl = case.controller
    starts = ((0.2, 1.0), (0.8, 1.0), (1.4, -1.0))

    def ref(t):
        moves = [_trapezoid(t - t0, sign) for t0, sign in starts]
        return tuple(sum(m[i] for m in moves) for i in range(3))

    def run(learning, make=_compensator):
        comp = make(ctrl, learning=learning, velocity_source="encoder")
        push = {t0: 0.0 for t0, _ in starts}
        lead = {t0: 0.0 for t0, _ in starts}
        first = {t0: False for t0, _ in starts}

        def tick(t, plant, c):
            for t0, sign in starts:
                if t0 <= t < t0 + 0.02:  # the breakaway
                    push[t0] = max(push[t0], sign * c.dob_nm)
                    lead[t0] = max(lead[t0], sign * (plant.theta_rad - ref(t)[0]))
                    first[t0] |= c.dob_first_start
        closed_loop(comp, ref, 1.8, plant_cfg=case.plant, ctrl=ctrl, on_tick=tick)
        return push, lead, first

    bristle = STIFF.Fs / STIFF.sigma0  # the bristle deflection at breakaway
    push, lead, first = run(learning=False)
    assert first == {0.2: True, 0.8: False, 1.4: True}
    assert push[0.2] < 0.5 * push[0.8] and push[1.4] < 0.5 * push[0.8]
    assert lead[0.2] < bristle and lead[1.4] < bristle
    assert run(learning=True)[2] == first
    push, lead, first = run(learning=False, make=_loop_compensator)
    assert first == {0.2: True, 0.8: False, 1.4: True}
    assert push[0.8] < 0.5 * push[0.2] and max(lead.values()) < 0.5 * bristle


def test_a_first_start_ends_where_the_reference_reverses_or_leaves_pre_sliding():
    """The sine from rest: the first start's window is the pre-sliding travel (3·Fs/sigma0) of
    its first pass. The reference slides on, reverses without resting and comes back through
    its start at 2.2 s: no first start there (nor at the reversals); and a sine within the
    pre-sliding range ends its first start at its first reversal."""
    presliding = 3.0 * P.Fs / P.sigma0
    for learning in (True, False):
        fired = []
        closed_loop(_loop_compensator(learning=learning), sine_ref, 3.5,
                    on_tick=lambda t, plant, c: c.dob_first_start
                    and fired.append((t, sine_ref(t)[0])))
        assert fired and fired[0][0] >= 0.2
        assert all(p < presliding for _, p in fired)
        assert max(t for t, _ in fired) < 0.2 + 0.5  # the first pass only (reversal at 1.2 s)
    small = 0.5 * presliding  # a sine that never leaves pre-sliding: reverses at 1.2 s
    fired = []
    closed_loop(_loop_compensator(), lambda t: sine_ref(t, amp=small / 2), 3.5,
                on_tick=lambda t, plant, c: c.dob_first_start and fired.append(t))
    assert fired and max(fired) <= 1.2 + 0.5 * DT  # the first pass, up to its reversal


def test_below_vs_the_first_dob_excursion_against_the_motion_is_not_attenuated():
    """A jump start below vs: the DOB's weight is attenuated to |v_ref|/vs where its term
    pushes along the motion (the breakaway overshoot), and against the motion while the axis
    is on the reference, but not from the first tick on which it opposes the motion while the
    axis lurches, ahead of the reference and pulling away (the believed curve pushes too hard:
    the term brakes the lurch); once the term, having braked, has pushed along, a later
    excursion against the motion is attenuated again, lurch or not, until the next start or
    reversal."""
    v = 0.3 * P.vs
    d = 0.1 * P.Fc  # the measured friction this far off the believed curve
    lead = 0.05 * v  # the axis pulling ahead of the reference [rad/s]
    along = _dob_weight_after(_compensator(dob_presliding_rad=0.0), P, v, 60, offset_nm=d)
    assert along == pytest.approx(0.3)
    ahead = TickSignals()
    ahead.pos_rad = 10 * lead * DT  # ahead of the reference, falling back: no lurch
    assert _dob_weight_after(_compensator(dob_presliding_rad=0.0), P, v, 40, offset_nm=-d,
                             s=ahead, lead_rad_s=-0.1 * lead) == pytest.approx(0.3)
    assert ahead.pos_rad > ahead.pos_ref_rad
    comp = _compensator(dob_presliding_rad=0.0)
    s = TickSignals()
    assert _dob_weight_after(comp, P, v, 40, offset_nm=-d, s=s) == pytest.approx(0.3)
    assert comp.dob_nm < 0.0  # against the motion, on the reference: attenuated
    assert _dob_weight_after(comp, P, v, 20, offset_nm=-d, s=s, lead_rad_s=lead) == 1.0
    assert comp.dob_nm < 0.0  # the lurch: braked at full weight
    assert _dob_weight_after(comp, P, v, 40, offset_nm=d, s=s) == pytest.approx(0.3)
    assert comp.dob_nm > 0.0  # it pushed along the motion: the first excursion is over
    assert _dob_weight_after(comp, P, v, 40, offset_nm=-d, s=s, lead_rad_s=lead) == (
        pytest.approx(0.3))
    assert comp.dob_nm < 0.0
    # a reversal (a ramp through 0 to −v) starts a new motion: its first excursion against
    # the motion (friction below the believed curve, so a positive term), begun while the axis
    # pulls ahead in the new direction, is not attenuated
    s.pos_rad = s.pos_ref_rad
    _dob_weight_after(comp, P, -v, int(2 * v / 0.05 / DT), acc=-0.05, offset_nm=d, s=s,
                      lead_rad_s=-lead)
    assert comp._dir == -1 and comp.dob_nm > 0.0 and comp.dob_weight == 1.0


def test_braking_the_lurch_of_a_believed_peak_too_high(tmp_path):
    """Monte Carlo plant mc4 of the benchmark, seed 4: believed Fs 1.30×, Fc 0.80×, vs 0.094
    rad/s (the creep's 0.01 rad/s deep in the Stribeck region): the believed curve pushes 0.1
    N·m too hard at the start and the axis lurches 20 µrad ahead. The DOB's first excursion
    against the motion is not attenuated below vs, and brakes it. Measured (``bench
    compensation --seed 4``): creep 3.27 → 1.05× oracle, 1.03 → 0.33× ``stribeck``."""
    from hil.bench_compensation import build_cases
    from hil.scenarios import sim_run

    case = {n: c for n, _, c in build_cases(CFG, 0.2, 0.0, 20, 4)}["mc4"]
    rms = {}
    for mode in ("lugre_adaptive", "stribeck"):
        rms[mode] = sim_run(case, "creep", tmp_path / mode, compensation=mode, duration_s=2.0,
                            seed=4, plot=False)["rms_error_rad"]
    assert rms["lugre_adaptive"] < 0.5 * rms["stribeck"]


def test_at_a_held_speed_the_dob_cancels_no_more_damping_than_kd():
    """Rule of observer.dob_damping_limit (kd): at a held reference speed the DOB's weight is
    at most kd/−c, c = sliding_damping of the believed set at |v_ref|; where c > −kd, or while
    the reference accelerates, the weight is the fade's alone (1 before dob_steady_s)."""
    from controller.friction_step import sliding_damping

    soft = LuGreParams(Fc=0.16, Fs=0.44, vs=0.0085, sigma0=2875.0, sigma1=67.6, sigma2=0.05)
    ctrl = dataclasses.replace(CFG.controller, friction=soft)
    kd = _compensator(ctrl).cfg.dob_damping_limit
    assert kd == pytest.approx(3 * ctrl.J * 2 * math.pi * 20.0)  # the triple-pole rule's kd
    for v, binds in ((1.2 * soft.vs, True), (5 * soft.vs, False)):
        c = sliding_damping(soft, v)
        assert (c < -kd) == binds
        w = _dob_weight_after(_compensator(ctrl, dob_presliding_rad=0.0), soft, v, 60)
        assert w == pytest.approx(kd / -c if binds else 1.0)
        free = _compensator(ctrl, dob_presliding_rad=0.0, dob_damping_limit=math.inf)
        assert _dob_weight_after(free, soft, v, 60) == 1.0
    # accelerating to the same speed at 0.5 rad/s² (|a_ref|·dob_steady_s >> 1 % of v): free
    v = 1.2 * soft.vs
    w = _dob_weight_after(_compensator(ctrl, dob_presliding_rad=0.0), soft, v, 20, acc=0.5)
    assert w > kd / -sliding_damping(soft, v) + 0.1


def test_the_damping_limit_stops_the_hunting_of_a_steep_believed_curve(tmp_path):
    """Monte Carlo plant mc18 of the benchmark, seed 5: the believed sigma1 (399 N·m·s/rad)
    in a Stribeck curve too steep cancels 44 N·m·s/rad of damping at the creep's 0.01 rad/s,
    against the PID's kd of 30: without the limit the DOB drives a 90 Hz hunting through the
    first second of the creep. Measured (``bench compensation --seed 5``): creep 3.36 → 1.07×
    oracle, 1.74 → 0.55× stribeck. Both arms without the DOB's hunting guard
    (``dob_hunting_nm: .inf``), which catches the same hunting on its own: the guard alone
    (limit off) is a second line (1.5 s: 1.97 µrad with neither, 0.48 with the limit, 0.63 with
    the guard alone). Measured with the estimator on the encoder difference
    (``velocity_source: encoder``, pinned here), where the hunting was found, and the momentum
    observer at 5·f_p (its rule before the cap at rate/10, pinned here)."""
    from hil.bench_compensation import build_cases
    from hil.scenarios import sim_run

    case = {n: c for n, _, c in build_cases(CFG, 0.2, 0.0, 20, 5)}["mc18"]
    uncapped = 5.0 * case.controller.pid.position_bandwidth_hz(case.controller.J)
    rms = {}
    for name, limit, hunting in (("rule", None, math.inf), ("none", math.inf, math.inf),
                                 ("guard", math.inf, None)):
        observer = dataclasses.replace(case.controller.observer, dob_damping_limit=limit,
                                       dob_hunting_nm=hunting, velocity_source="encoder",
                                       momentum_bandwidth_hz=uncapped)
        cfg = dataclasses.replace(case, controller=dataclasses.replace(case.controller,
                                                                       observer=observer))
        summary = sim_run(cfg, "creep", tmp_path / name, compensation="lugre_adaptive",
                          duration_s=1.5, seed=5, plot=False)
        rms[name] = summary["rms_error_rad"]
    assert rms["rule"] < 0.5 * rms["none"]
    assert rms["guard"] < 0.5 * rms["none"]


def test_off_the_reference_the_feedforward_crossfades_to_the_estimate():
    """Rule of observer.off_reference_rad: with the reference moving, a tracking error below
    Fs/sigma0 keeps the reference-driven model; from there to twice it the feedforward
    crossfades linearly to the estimator's F̂; at rest nothing is blended. (DOB and learning off,
    so the feedforward is the model alone; the estimator on the encoder difference, so that the
    axis set back on one tick moves F̂ away from the model.)"""
    comp = _compensator(dob=False, learning=False, velocity_source="encoder")
    e0 = comp.cfg.off_reference_rad
    assert e0 == pytest.approx(P.Fs / P.sigma0)
    s = TickSignals()
    v = 3 * P.vs
    for k in range(300):  # sliding on the reference, measured friction = the static curve
        s.t_s = k * DT
        s.vel_ref_rad_s = s.vel_rad_s = v
        s.pos_ref_rad += v * DT
        s.pos_rad = s.pos_ref_rad
        s.current_a = stribeck(P, v) / CFG.controller.Kt
        comp.step(s, DT)
    seen = {}
    for lag in (0.5, 1.25, 1.5, 1.75, 3.0):  # the axis behind by lag·e0 on one tick each
        s.t_s += DT
        s.pos_ref_rad += v * DT
        s.pos_rad = s.pos_ref_rad - lag * e0
        ff = comp.step(s, DT)
        model, f_hat = comp.ff_model.f_hat, comp.friction_hat_nm
        assert abs(f_hat - model) > 1e-5  # the two differ: the blend is visible
        w = min(1.0, max(0.0, lag - 1.0))
        assert comp.estimate_weight == pytest.approx(w)
        assert ff == pytest.approx(model + w * (f_hat - model), abs=1e-12)
        s.pos_rad = s.pos_ref_rad
        seen[lag] = comp.estimate_weight
    assert seen[0.5] == 0.0 and seen[3.0] == 1.0
    s.vel_ref_rad_s = 0.0  # the reference rests: the rest rule, not this one
    s.pos_rad = s.pos_ref_rad - 3.0 * e0
    comp.step(s, DT)
    assert comp.estimate_weight == 0.0
    big = _compensator(dob=False, learning=False, off_reference_rad=100 * e0)  # the override
    assert big.cfg.off_reference_rad == 100 * e0


def test_off_the_reference_crossfade_cuts_the_first_breakaway_of_a_wrong_fs_fc_set():
    """The stiff table believed 30 % off (Fc −30 %, Fs +30 %: the Fs/Fc ratio wrong): on the
    first start from rest the believed peak lurches the axis ahead, then the believed Fc stalls
    it while the reference runs on. Following the estimator while the axis is off the reference
    cuts the first second's error (measured: 5.9 → 2.0 µrad rms in ``bench compensation``;
    here, over 1.2 s of a sine, 3.01 → 1.82 µrad; 3.19 → 1.86 µrad before the momentum
    balance took out the velocity filter's lag)."""
    from hil.bench_compensation import STIFF, mismatched, with_plant_friction

    case = mismatched(with_plant_friction(CFG, STIFF), 0.3)
    ctrl = case.controller

    def first_second_rms(**observer):
        comp = LuGreCompensator(ctrl.friction, ctrl.J, ctrl.Kt, observer=ObserverConfig(**observer),
                                base_pid=ctrl.pid, velocity_cutoff_hz=ctrl.velocity.cutoff_hz)
        sq = []

        def tick(t, plant, c):
            if t < 1.2:
                sq.append((sine_ref(t)[0] - plant.theta_rad) ** 2)
        closed_loop(comp, sine_ref, 1.25, plant_cfg=case.plant, ctrl=ctrl, on_tick=tick)
        return math.sqrt(sum(sq) / len(sq))

    blended = first_second_rms()
    model_only = first_second_rms(off_reference_rad=1.0)  # never off: the model alone
    assert blended < 0.7 * model_only


def test_the_dob_measures_with_the_believed_inertia_raised_by_its_margin():
    """observer.dob_inertia_margin m: the DOB's residual comes from a momentum observer on
    J·(1 + m) for the acceleration the reference did not plan, so under a constant unplanned
    acceleration a it carries −m·J·a against the same run with m = 0 (an apparent extra
    inertia, never an unmodelled one), and nothing when the reference plans that acceleration
    (a_ref = a: the inertia feedforward's J). The estimator, the Fc adapter and the watchdog
    keep the believed J (their residual is unchanged)."""
    acc = 0.5
    J = CFG.controller.J
    for planned in (0.0, acc):
        runs = {}
        for m in (0.0, 0.3):
            comp = _compensator(dob_inertia_margin=m)
            s = TickSignals()
            v = 0.0
            for k in range(400):
                s.t_s = k * DT
                v += acc * DT
                s.vel_ref_rad_s = s.vel_rad_s = v
                s.acc_ref_rad_s2 = planned
                s.pos_ref_rad += v * DT
                s.pos_rad = s.pos_ref_rad
                s.current_a = (J * acc + stribeck(P, v)) / CFG.controller.Kt
                comp.step(s, DT)
            runs[m] = (comp._dob_residual, comp.residual_nm)
        unplanned = acc - planned
        assert runs[0.3][0] - runs[0.0][0] == pytest.approx(-0.3 * J * unplanned, abs=1e-9)
        assert runs[0.3][1] == runs[0.0][1]


def test_the_dob_plans_a_one_tick_acceleration_on_the_tick_after_it():
    """A velocity step of the reference (no acceleration limit) is one tick of a_ref = Δv/dt
    (the mean over the tick it starts, controller/loop.py). The momentum balance the DOB reads
    on the next tick is over that elapsed tick, so it plans that a_ref one tick later: an axis
    that follows the step exactly leaves the inertia margin nothing to act on, on every tick
    (planned on its own tick instead, the margin's J·m·Δv/dt would show on two). An axis that
    follows it a tick late is an unplanned acceleration, which the margin does see."""
    J, Kt = CFG.controller.J, CFG.controller.Kt
    v0, step, k0 = 0.05, 0.002, 50  # rad/s, rad/s, the tick of the step

    def dob_residuals(margin, late):
        comp = _compensator(dob_inertia_margin=margin)
        s = TickSignals()
        seen = []
        for k in range(120):
            s.t_s = k * DT
            s.vel_ref_rad_s = v0 + (step if k > k0 else 0.0)
            s.acc_ref_rad_s2 = step / DT if k == k0 else 0.0
            s.pos_ref_rad += s.vel_ref_rad_s * DT
            s.vel_rad_s = v = v0 + (step if k > k0 + late else 0.0)
            s.pos_rad += v * DT
            a_elapsed = step / DT if k == k0 + 1 + late else 0.0  # over the elapsed tick
            s.current_a = (J * a_elapsed + stribeck(P, v)) / Kt
            comp.step(s, DT)
            seen.append(comp._dob_residual)
        return np.array(seen)

    np.testing.assert_allclose(dob_residuals(0.3, 0), dob_residuals(0.0, 0), rtol=0, atol=1e-9)
    unplanned = np.abs(dob_residuals(0.3, 1) - dob_residuals(0.0, 1)).max()
    assert unplanned > 0.05 * 0.3 * J * step / DT


def test_an_inertia_believed_low_does_not_make_the_dob_hunt(tmp_path):
    """Monte Carlo plant mc3 of the benchmark (seed 1): believed J 23 % low, sigma1 three times
    the PID's kd. Measured with the believed J the DOB's residual carries +(J − J_n)·ω̇, which
    its lag turns into negative damping: the reversals hunt at about 100 Hz (1.47× oracle).
    With the default margin the reversal's rms error drops by more than a quarter (1.05×;
    before the inertia feedforward took the tick-mean acceleration: 1.79× → 1.11×). Both arms
    without the DOB's hunting guard (``dob_hunting_nm: .inf``), which catches that hunting
    too: with no margin it takes the reversal 0.99 → 0.73 µrad (0.66 with the margin).
    Measured with the estimator on the encoder difference (``velocity_source: encoder``,
    pinned here) and the momentum observer at 5·f_p (its rule before the cap at rate/10, which
    on this plant takes the reversal from 0.99 to 0.78 µrad with no margin and no guard; pinned
    here)."""
    from hil.bench_compensation import build_cases
    from hil.scenarios import sim_run

    case = {n: c for n, _, c in build_cases(CFG, 0.2, 0.0, 20, 1)}["mc3"]
    assert case.controller.J < 0.8 * case.plant.J
    default = case.controller.observer.dob_inertia_margin
    assert default >= case.plant.J / case.controller.J - 1.0  # the default covers this plant
    uncapped = 5.0 * case.controller.pid.position_bandwidth_hz(case.controller.J)
    rms = {}
    for m, hunting in ((0.0, math.inf), (default, math.inf), (0.0, None)):
        observer = dataclasses.replace(case.controller.observer, dob_inertia_margin=m,
                                       dob_hunting_nm=hunting, velocity_source="encoder",
                                       momentum_bandwidth_hz=uncapped)
        cfg = dataclasses.replace(case, controller=dataclasses.replace(case.controller,
                                                                       observer=observer))
        rms[m, hunting] = sim_run(cfg, "reversal", tmp_path / f"{m}-{hunting}",
                                  compensation="lugre_adaptive", duration_s=8.0, seed=1,
                                  plot=False)["rms_error_rad"]
    assert rms[default, math.inf] < 0.75 * rms[0.0, math.inf]
    assert rms[0.0, None] < 0.8 * rms[0.0, math.inf]  # the guard alone


def test_leaving_the_fallback_hands_the_feedforward_over_at_the_bounded_rate(tmp_path):
    """Monte Carlo plant mc3 of the benchmark, seed 2: the creep starts in the fallback (the
    believed set's residual just over its limit) and leaves it at 2.77 s. The observer's
    feedforward is then 0.06 N·m above the fallback's; crossfaded in fade_s (50 ms) that is a
    ramp the integrator follows 7 µrad behind. At the handover rate (observer.
    handover_rate_nm_s) the axis stays within a count. Measured (``bench compensation --seed
    2``): creep 1.16× → 0.95× stribeck. (With ``residual_share`` at its 0.5 the residual is
    within half the measured torque and the watchdog does not trip: the case takes the limit
    alone, share 0, to exercise the exit.)"""
    from hil.bench_compensation import build_cases
    from hil.scenarios import sim_run

    case = {n: c for n, _, c in build_cases(CFG, 0.2, 0.0, 20, 2)}["mc3"]
    peak, rms = {}, {}
    for name, rate in (("rule", None), ("fade only", math.inf)):
        observer = dataclasses.replace(case.controller.observer, handover_rate_nm_s=rate,
                                       residual_share=0.0)
        cfg = dataclasses.replace(case, controller=dataclasses.replace(case.controller,
                                                                       observer=observer))
        summary = sim_run(cfg, "creep", tmp_path / name.replace(" ", "_"),
                          compensation="lugre_adaptive", duration_s=6.0, seed=2, plot=False)
        log = read_log(summary["log"])
        t, fallback = log.column("t_s"), log.column("fallback")
        e = log.column("pos_rad") - log.column("pos_ref_rad")
        left = np.nonzero(np.diff(fallback) < 0)[0]
        assert len(left) == 1 and fallback[0] == 0.0 and 1.0 < t[left[0]] < 4.0
        after = (t > t[left[0]]) & (t < t[left[0]] + 1.5)
        peak[name] = np.max(np.abs(e[after]))
        rms[name] = summary["rms_error_rad"]
    assert peak["fade only"] > 5e-6  # the case exercises the exit
    assert peak["rule"] < 1e-6
    assert rms["rule"] < 0.85 * rms["fade only"]


def _slide(comp, s, v: float, offset_nm: float, seconds: float) -> list[bool]:
    """The fallback flag per tick, sliding at v for ``seconds`` (:func:`_drive`)."""
    return _drive(comp, s, v, offset_nm, round(seconds / DT), lambda c: c.fallback)


def test_the_other_direction_is_not_judged_until_the_load_is_known_nor_for_long():
    """Once one direction has slid, a residual in the other may be a load (only the two
    together tell a load from a friction error): it goes unjudged until the load estimate
    has both directions at common speeds, at most ``recover_s`` of such ticks. Here the other
    direction slides ten times faster (no common speed bin: the load never becomes known)
    with a residual of 0.3 N·m: the watchdog trips ``watchdog_s`` after the grace ends, not
    ``watchdog_s`` after the reversal (as it did before the grace). In the first direction,
    and with the grace spent, the residual is judged as ever."""
    comp = _compensator()
    s = TickSignals()
    assert not any(_slide(comp, s, 0.05, 0.0, 1.0))  # consistent: the forward side measured
    assert comp.load.sides == 1 and not comp.load.trusted
    flags = _slide(comp, s, -0.5, 0.3, 3.0)
    first = flags.index(True) * DT
    grace, watch = comp.cfg.recover_s, comp.cfg.watchdog_s
    assert grace + watch - 0.05 <= first <= grace + watch + 0.05, first
    assert comp._grace_s == pytest.approx(grace, abs=2 * DT)
    fresh = _compensator()  # the first direction: judged at once
    t = TickSignals()
    flags = _slide(fresh, t, 0.05, 0.3, 1.0)
    assert flags.index(True) * DT == pytest.approx(watch, abs=0.02)
    # an unjudged tick is no evidence of consistency: tripped in the first direction, the
    # watchdog does not recover through the other direction's grace (it did, at 2.0 s, when
    # unjudged ticks were judged consistent)
    flags = _slide(fresh, t, -0.5, 0.3, grace + 0.1)
    assert all(flags) and fresh.watchdog.good_s == 0.0


def test_non_finite_measurement_falls_back_at_once_and_keeps_state():
    comp = _compensator()
    s = TickSignals()
    s.vel_ref_rad_s = s.vel_rad_s = 0.05
    for _ in range(100):
        s.pos_rad += 0.05 * DT
        s.pos_ref_rad = s.pos_rad
        s.current_a = stribeck(P, 0.05) / CFG.controller.Kt
        comp.step(s, DT)
    z = comp.z_hat
    s.current_a = math.nan
    ff = comp.step(s, DT)
    assert comp.fallback and math.isfinite(ff) and comp.z_hat == z


# --- config ----------------------------------------------------------------------------------


def test_observer_config_rules_name_the_key():
    with pytest.raises(ConfigError, match=r"^observer\.bandwidth_hz: must be in \(0, mom"):
        parse_dataclass(ObserverConfig, {"bandwidth_hz": 150.0, "momentum_bandwidth_hz": 100.0},
                        "observer")
    with pytest.raises(ConfigError, match=r"^observer\.correction: must be one of"):
        parse_dataclass(ObserverConfig, {"correction": "magic"}, "observer")
    with pytest.raises(ConfigError, match=r"^observer\.recover_s: must be > 0"):
        parse_dataclass(ObserverConfig, {"recover_s": 0}, "observer")
    assert parse_dataclass(ObserverConfig, {"recover_s": ".inf"}, "observer").recover_s == math.inf
    assert parse_dataclass(ObserverConfig, {"correction": "none", "bandwidth_hz": 0}).bandwidth_hz == 0


# --- the compensator in the loop -------------------------------------------------------------


def test_make_compensator_builds_the_lugre_modes():
    ctrl = dataclasses.replace(CFG.controller, compensation="lugre")
    assert make_compensator(ctrl).mode == "lugre"
    assert make_compensator(ctrl, "lugre_adaptive").mode == "lugre_adaptive"
    assert make_lugre_compensator(ctrl, adaptive=True).adapter is not None


def test_lugre_feedforward_beats_no_feedforward_on_reversals():
    """The reversal scenario (0.05 rad/s peak sine), exact parameters: reference-driven model."""
    rms_off, _ = closed_loop(NoCompensation(), sine_ref, 3.2)
    comp = make_lugre_compensator(CFG.controller, adaptive=False)
    rms_lugre, peak = closed_loop(comp, sine_ref, 3.2)
    assert comp.watchdog.trips == 0
    assert rms_lugre < 0.1 * rms_off
    assert abs(comp.residual_nm) < 0.05


def test_reset_forgets_the_state():
    comp = _loop_compensator()
    closed_loop(comp, sine_ref, 1.2)
    comp.reset()
    assert comp.z_hat == 0.0 and comp.friction_hat_nm == 0.0 and not comp.fallback
    assert comp.estimator.z_hat == 0.0 and comp.momentum.r_nm == 0.0


@pytest.mark.parametrize("scenario, duration_s", [("reversal", 4.2), ("scan", 5.0), ("step", 2.0)])
@pytest.mark.parametrize("mode", ["lugre", "lugre_adaptive"])
def test_lugre_in_the_control_loop(tmp_path, scenario, duration_s, mode):
    """The real loop on the simulated backend: the observer feedforward removes > 75 % of the
    rms error of no feedforward (≈ 98 % on reversals; > 70 % on the steps of 10 counts, whose
    error is below one count: 0.251 against 0.993 µrad, 0.233 with the path table's dead zone
    at 0.02·Fc instead of its rule's 0.01·Fc, which the mismatched sets need) without tripping
    the watchdog."""
    off, _, _ = sim(CFG, tmp_path / "off", scenario=scenario, compensation="off", duration_s=duration_s)
    summary, log, _ = sim(CFG, tmp_path / mode, scenario=scenario, compensation=mode,
                          duration_s=duration_s)
    assert not summary["faults"]
    removed = 0.7 if scenario == "step" else 0.75
    assert summary["rms_error_rad"] < (1.0 - removed) * off["rms_error_rad"]
    assert summary["max_error_rad"] < 2e-6  # rad
    assert not summary["reidentify"]


# --- the feedforward at rest ----------------------------------------------------------------------


def _rest_after(travel_rad: float, ctrl=None, plant_cfg=None, duration_s: float = 1.2,
                comp=None):
    """Run a constant-speed reference over ``travel_rad`` in 0.3 s, then rest, on the closed
    loop; per rest tick (feedforward − learned term, sigma0·ẑ of the estimator, the model's ẑ,
    the estimator's ẑ, the measured position), and the rms true error after 1 s (at rest).
    ``comp``: the compensator to run (default: ``lugre_adaptive`` on ``ctrl``)."""
    ctrl = ctrl or CFG.controller
    speed_rad_s = travel_rad / 0.3
    comp = comp or make_lugre_compensator(ctrl, adaptive=True)
    seen = []
    stop_s = 0.5

    def ref(t):
        t1 = min(max(t - 0.2, 0.0), stop_s - 0.2)
        return speed_rad_s * t1, (speed_rad_s if 0.2 <= t < stop_s else 0.0), 0.0

    def on_tick(t, _plant, comp_):
        if t >= stop_s - 1e-9:  # the reference rests from stop_s on
            est = comp_.estimator
            seen.append((comp_.feedforward_nm - comp_.learned_nm, est.active.sigma0 * est.z_hat,
                         comp_.ff_model.z_hat, est.z_hat, comp_._pos_prev))

    rms, _ = closed_loop(comp, ref, duration_s, ctrl=ctrl, plant_cfg=plant_cfg, on_tick=on_tick)
    return seen, rms


def _observer(ctrl, **changes):
    return dataclasses.replace(ctrl, observer=dataclasses.replace(ctrl.observer, **changes))


def test_at_rest_after_sliding_the_feedforward_is_the_estimators_static_friction():
    """After a motion that slid (travelled well past the pre-sliding range Fs/sigma0) the
    reference-driven model would hold its state from the stop; at rest the feedforward follows
    the estimator's sigma0·ẑ instead (with ``rest_stiffness`` 1: all of its spring), and the
    model carries the estimator's ẑ into the next start."""
    seen, _ = _rest_after(100.0 * P.Fs / P.sigma0, ctrl=_observer(CFG.controller, rest_stiffness=1.0))
    assert len(seen) > 100
    for ff, static, z_model, z_est, _ in seen:
        assert ff == pytest.approx(static, abs=1e-12)
        assert z_model == z_est
    # the estimator's friction really moves at rest (the bristles unload): not a frozen value
    assert max(x[1] for x in seen) - min(x[1] for x in seen) > 0.01 * P.Fc


def test_at_rest_only_the_rest_stiffness_fraction_of_the_bristle_spring_is_fed_forward():
    """sigma0·ẑ − (1 − κ)·sigma0·HP(θ − θ_stop), κ by its rule, HP a first-order high-pass
    of time constant rest_spring_s (rule kp/ki); with a believed sigma0 18 % above the plant's
    (a stiff table, 36 000 N·m/rad) the full spring hunts at rest, the rule's fraction holds
    the axis."""
    pid = CFG.controller.pid
    kappa = min(1.0, 1 / 1.3 + pid.kp / P.sigma0)
    assert kappa < 1.0
    decay = math.exp(-DT * pid.ki / pid.kp)
    seen, _ = _rest_after(100.0 * P.Fs / P.sigma0)
    moved, prev, stop = 0.0, seen[0][4], seen[0][4]
    static_rule = []  # what the un-filtered reduction would have removed beyond this one
    for ff, static, _, _, pos in seen:
        moved = (moved + pos - prev) * decay
        prev = pos
        assert ff == pytest.approx(static - (1 - kappa) * P.sigma0 * moved, abs=1e-12)
        static_rule.append((1 - kappa) * P.sigma0 * abs((pos - stop) - moved))
    # the axis settles at rest: the high-pass lets the settled part go (the integrator need not
    # hold it), so the two rules differ by more than 1 mN·m on this run
    assert max(static_rule) > 1e-3
    true = dataclasses.replace(P, sigma0=36000.0, sigma1=150.0, vs=0.00055)
    plant_cfg = dataclasses.replace(CFG.plant, friction=true)
    believed = dataclasses.replace(CFG.controller, friction=true.scaled(sigma0=1.18))
    travel = 100.0 * true.Fs / true.sigma0
    _, rms_full = _rest_after(travel, ctrl=_observer(believed, rest_stiffness=1.0),
                              plant_cfg=plant_cfg, duration_s=2.0)
    _, rms_rule = _rest_after(travel, ctrl=believed, plant_cfg=plant_cfg, duration_s=2.0)
    assert rms_rule < 0.5 * rms_full


# a soft plant (kp/sigma0 0.24 at J 0.08) like seed 3's mc0 of the benchmark
SOFT = LuGreParams(Fc=0.158, Fs=0.207, vs=0.0013, sigma0=16100.0, sigma1=92.6, sigma2=0.04)


def _soft_rest(sigma0_factor: float, *, switch: bool = True, **observer):
    """A stop from sliding on SOFT believed with sigma0 × ``sigma0_factor``, then 1.5 s of rest;
    ``switch`` False: the strict fraction set to the rule's (no switch). (compensator, rms at
    rest)."""
    plant_cfg = dataclasses.replace(CFG.plant, friction=SOFT)
    believed = _observer(dataclasses.replace(CFG.controller,
                                             friction=SOFT.scaled(sigma0=sigma0_factor)),
                         **observer)
    comp = make_lugre_compensator(believed, adaptive=True)
    if not switch:
        comp._rest_stiffness_strict = comp._rest_stiffness
    _, rms = _rest_after(100.0 * SOFT.Fs / SOFT.sigma0, ctrl=believed, plant_cfg=plant_cfg,
                         duration_s=2.0, comp=comp)
    return comp, rms


@pytest.mark.parametrize("factor", [1.15, 1.3])
def test_an_axis_that_hunts_at_rest_is_fed_less_of_the_bristle_spring_from_then_on(factor):
    """Moving back against bristles that hold the sliding friction moves the plant's z and the
    estimator's ẑ twice as far as the axis: with sigma0 believed 15–30 % high the rule's
    fraction (0.95–1 on this soft plant) feeds (1 + κ)·sigma0 against the plant's 2·sigma0 +
    kp, a net negative stiffness, and the axis hunts at rest. Three large, slow swings switch
    to the fraction with that factor, min(1, 2/1.3 − 1 + kp/sigma0) (about 0.7), and the rest
    settles (rms at rest several times lower than without the switch); the run's warnings
    say so. A stated rest_stiffness is kept (and the warning says so)."""
    comp, rms = _soft_rest(factor)
    pid = CFG.controller.pid
    sigma0 = factor * SOFT.sigma0
    assert comp.cfg.rest_stiffness == pytest.approx(min(1.0, 1 / 1.3 + pid.kp / sigma0))
    assert 0.5 < comp.rest_hunted_at_s < 1.0  # during the rest (from 0.5 s on), soon
    strict = min(1.0, 2 / 1.3 - 1 + pid.kp / sigma0)
    assert comp._rest_stiffness_strict == pytest.approx(strict) and strict < 0.8
    (note,) = [w for w in comp.warnings(1000.0) if "rest_stiffness" in w]
    assert f"from then on {strict:.3g} of the bristle spring" in note
    unswitched, rms_unswitched = _soft_rest(factor, switch=False)
    assert rms < 0.3 * rms_unswitched
    stated, _ = _soft_rest(factor, rest_stiffness=comp.cfg.rest_stiffness)
    assert stated.rest_hunted_at_s == pytest.approx(comp.rest_hunted_at_s)
    (note,) = [w for w in stated.warnings(1000.0) if "rest_stiffness" in w]
    assert "was kept" in note


@pytest.mark.parametrize("table", ["reference", "stiff", "damped"])
def test_an_exact_set_never_switches_at_rest(table):
    """Believed exactly, the axis holds at rest: the encoder's flicker and the integrator's
    creep leave no three large, slow swings in a row; the rule's fraction stays, no warning."""
    from hil.bench_compensation import DAMPED, STIFF

    true = {"reference": P, "stiff": STIFF, "damped": DAMPED}[table]
    ctrl = dataclasses.replace(CFG.controller, friction=true)
    comp = make_lugre_compensator(ctrl, adaptive=True)
    _rest_after(100.0 * true.Fs / true.sigma0, ctrl=ctrl,
                plant_cfg=dataclasses.replace(CFG.plant, friction=true), duration_s=2.0,
                comp=comp)
    assert comp.rest_hunted_at_s != comp.rest_hunted_at_s  # NaN: never
    assert not [w for w in comp.warnings(1000.0) if "rest_stiffness" in w]


def test_at_rest_after_presliding_the_model_is_kept():
    """A motion within the pre-sliding range (one Fs/sigma0 of travel, below the rule's three:
    the ``step`` scenario) leaves the model's own state: its bristle state is the spring
    itself."""
    seen, _ = _rest_after(P.Fs / P.sigma0)
    assert len(seen) > 100
    assert any(z_model != z_est for _, _, z_model, z_est, _ in seen)


def test_a_set_of_stated_uncertainty_keeps_its_damping_transient_at_a_start(tmp_path):
    """Heavily damped bristles (mc5 of the benchmark: sigma1 76, damping ratio 1.6): the plant's
    friction overshoots Fs by 0.1–0.15 N·m through sigma1·ż while a creep starts. The
    feedforward model clamped at Fs + 0.25·Fc cuts that and the axis lags; with the set's
    uncertainty stated (sigma1 and sigma0 within 1 %, as identify measures them there) the bound
    widens and the model delivers the transient: the breakaway error shrinks. Unstated, the rule
    passes 0.54 of the model's excess over the bound at a start from rest
    (``observer.ff_start_fraction``): between the two."""
    from controller.friction import FrictionUncertainty
    from hil.bench_compensation import Task, run_one, with_plant_friction

    soft = LuGreParams(Fc=0.1855, Fs=0.2421, vs=0.0665, sigma0=6711.0, sigma1=76.25, sigma2=0.04)
    cfg = with_plant_friction(reference_config(), soft)
    se = FrictionUncertainty(sigma1=0.6, sigma0=67.0)
    stated = dataclasses.replace(cfg, controller=dataclasses.replace(cfg.controller, friction_se=se))
    hard = dataclasses.replace(cfg, controller=dataclasses.replace(
        cfg.controller, observer=dataclasses.replace(cfg.controller.observer,
                                                     ff_start_fraction=0.0)))
    runs = {name: run_one(Task(name, c, "creep", "lugre_adaptive", 1.2, 1, str(tmp_path / name),
                               keep_log=True))
            for name, c in (("clamped", hard), ("stated", stated), ("unstated", cfg))}
    peak, over = {}, {}
    for name, r in runs.items():
        log = read_log(r["log"])
        peak[name] = float(np.max(np.abs(log["pos_ref_rad"] - log["pos_rad"])))
        ff_friction = log["torque_ff_nm"] - log["learned_nm"] - cfg.controller.J * log["acc_ref_rad_s2"]
        bound = soft.Fs + soft.sigma2 * np.abs(log["vel_ref_rad_s"]) + 0.25 * soft.Fc
        beyond = np.max(ff_friction - bound)
        over[name] = beyond
    # the hard bound: the model stays within scale·Fs + sigma2·|v| + 0.25·Fc (the Fc adapter's
    # scale moves it by a few mN·m); stated: the transient the plant has, delivered; unstated:
    # part of it (measured: 0, 0.079 and 0.021 N·m beyond the bound; peak error 6.2, 1.2 and
    # 5.1 µrad)
    assert over["clamped"] <= 0.01 < over["unstated"] < 0.5 * over["stated"]
    assert over["stated"] > 0.05
    assert peak["stated"] < peak["unstated"] < peak["clamped"]
    assert runs["unstated"]["breakaway_rms_rad"] < runs["clamped"]["breakaway_rms_rad"]
    assert peak["stated"] < 0.6 * peak["clamped"], peak
    assert runs["stated"]["breakaway_rms_rad"] < 0.6 * runs["clamped"]["breakaway_rms_rad"]
