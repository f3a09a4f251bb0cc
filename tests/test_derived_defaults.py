"""Every table-dependent observer/adaptation threshold follows its documented rule for any
believed set; an explicit config value overrides the rule."""

from __future__ import annotations

import dataclasses
import math

import pytest

from controller.estimation_config import (BELIEF_ERROR, AdaptationConfig, ObserverConfig,
                                          damping_time_uncertainty, resolve_adaptation,
                                          resolve_observer)
from controller.friction import DirectionalParams, FrictionUncertainty, LuGreParams
from controller.gains import PIDGains
from controller.lugre_compensator import LuGreCompensator

SETS = [
    LuGreParams(Fc=0.20, Fs=0.28, vs=0.01, sigma0=3e4, sigma1=0.08, sigma2=0.04),  # reference
    LuGreParams(Fc=1.5, Fs=2.1, vs=0.002, sigma0=1e5, sigma1=30.0, sigma2=0.5),  # stiff, damped
    LuGreParams(Fc=0.05, Fs=0.06, vs=0.08, sigma0=1e3, sigma1=16.0, sigma2=0.01),  # sigma0/sigma1 61
]


@pytest.mark.parametrize("p", SETS)
@pytest.mark.parametrize("J, pid_hz", [(0.08, 20.0), (0.5, 8.0)])
def test_observer_defaults_follow_their_rules(p, J, pid_hz):
    pid = PIDGains.triple_pole(J, pid_hz)
    assert pid.position_bandwidth_hz(J) == pytest.approx(pid_hz)
    o = resolve_observer(ObserverConfig(), p, J, pid)
    assert o.momentum_bandwidth_hz == pytest.approx(5 * pid_hz)
    cap = 0.1 * p.sigma0 / p.sigma1 / (2 * math.pi)  # findings §2: ω_L << sigma0/sigma1
    assert o.bandwidth_hz == pytest.approx(min(1.5 * pid_hz, cap))
    assert 2 * math.pi * o.bandwidth_hz <= 0.1 * p.sigma0 / p.sigma1 + 1e-9
    assert o.clamp_margin_nm == pytest.approx(0.25 * p.Fc)
    assert o.residual_limit_nm == pytest.approx(0.5 * p.Fc)
    assert o.wrong_sign_velocity_rad_s == pytest.approx(3 * p.vs)
    assert o.dob_deadzone_nm == pytest.approx(0.02 * p.Fc)
    assert o.learning_deadzone_nm == pytest.approx(0.01 * p.Fc)
    assert o.learning_smoothing == 0.5  # in bins, which are in units of Fs/sigma0: any set
    assert o.dob_limit_nm == pytest.approx(0.5 * p.Fs)
    assert o.dob_bandwidth_hz == pytest.approx(20 * pid_hz)
    f_b = math.sqrt(p.sigma0 / J) / (2 * math.pi)  # the bristle mode: Nyquist above it
    assert o.dob_min_rate_hz == pytest.approx(max(22.5 * pid_hz, 2 * f_b))
    # the PID's corner kp/kd, not f_p: a believed J 30 % low moves f_p, not the rule
    assert resolve_observer(ObserverConfig(), p, 0.7 * J, pid).dob_min_rate_hz == pytest.approx(
        max(22.5 * pid_hz, 2 * f_b / math.sqrt(0.7)))
    slow = PIDGains.triple_pole(J, 0.05 * f_b)  # a soft loop: the bristle mode decides
    assert resolve_observer(ObserverConfig(), p, J, slow).dob_min_rate_hz == pytest.approx(2 * f_b)
    # the momentum observer at most a tenth of the loop rate: capped where 5·f_p is above it
    for rate in (1000.0, 20.0 * pid_hz, 2000.0):
        capped = resolve_observer(ObserverConfig(), p, J, pid, rate_hz=rate)
        assert capped.momentum_bandwidth_hz == pytest.approx(min(5 * pid_hz, rate / 10))
        assert capped.bandwidth_hz < capped.momentum_bandwidth_hz
    assert resolve_observer(ObserverConfig(momentum_bandwidth_hz=70.0), p, J, pid,
                            rate_hz=400.0).momentum_bandwidth_hz == 70.0  # stated: kept
    assert o.dob_steady_s == pytest.approx(20 / (2 * math.pi * pid_hz))
    assert o.dob_sweep_s == pytest.approx(10 / (2 * math.pi * pid_hz))
    assert o.dob_hunting_nm == pytest.approx(0.25 * p.Fs)  # half the term's bound
    assert o.dob_hunting_recover_s == pytest.approx(100 / (2 * math.pi * pid_hz))
    assert o.rest_stiffness == pytest.approx(min(1.0, 1 / 1.3 + pid.kp / p.sigma0))
    assert 0.0 < o.rest_stiffness <= 1.0
    assert o.off_reference_rad == pytest.approx(p.Fs / p.sigma0)
    # a bristle time believed at most (1 + 0.3)/(1 − 0.3) times too long: 1/1.857 of its transient
    assert o.ff_start_fraction == pytest.approx((1 - BELIEF_ERROR) / (1 + BELIEF_ERROR))
    zeta = p.sigma1 / (2 * math.sqrt(p.sigma0 * J))  # the bristle mode's damping ratio
    assert o.dob_presliding_rad == (pytest.approx(3 * p.Fs / p.sigma0) if zeta < 0.1 else 0.0)
    assert o.rest_spring_s == pytest.approx(pid.kp / pid.ki)
    # the slower of the integrator and the estimator's correction takes over at a stop
    assert o.learning_release_s == pytest.approx(max(pid.kp / pid.ki,
                                                     1 / (2 * math.pi * o.bandwidth_hz)))
    assert resolve_observer(ObserverConfig(correction="none"), p, J, pid).learning_release_s \
        == pytest.approx(pid.kp / pid.ki)  # no correction: the integrator alone
    assert o.handover_rate_nm_s == pytest.approx(pid.ki * 0.02 * p.Fc / p.sigma0)
    assert o.dob_damping_limit == pytest.approx(pid.kd)
    assert resolve_adaptation(AdaptationConfig(), p).inconsistent_residual_nm == pytest.approx(0.1 * p.Fc)
    a = resolve_adaptation(AdaptationConfig(), p)
    assert a.gate_velocity_rad_s == pytest.approx(3 * p.vs)
    assert (a.fc_min_nm, a.fc_max_nm) == pytest.approx((0.5 * p.Fc, 2 * p.Fc))
    assert a.rate_limit_nm_s == pytest.approx(0.25 * p.Fc)
    assert a.drift_low_threshold_nm == pytest.approx(0.1 * p.Fc)
    assert a.drift_high_threshold_nm == pytest.approx(0.05 * p.Fc)
    # the lesson alarm: the correction a set 20 % off needs, at 4 pass ends in a row
    assert a.lesson_threshold_nm == pytest.approx(0.2 * p.Fc) and a.lesson_passes == 4
    assert resolve_adaptation(AdaptationConfig(lesson_threshold_nm=0.05), p).lesson_threshold_nm \
        == 0.05


def test_explicit_values_override_the_rules():
    p = SETS[1]
    pid = PIDGains.triple_pole(0.08, 20.0)
    o = resolve_observer(ObserverConfig(residual_limit_nm=0.3, bandwidth_hz=5.0, dob_sweep_s=0.5,
                                        off_reference_rad=2e-5, rest_spring_s=0.1,
                                        learning_release_s=0.2, learning_deadzone_nm=0.0,
                                        dob_presliding_rad=1e-4, learning_smoothing=0.0,
                                        dob_min_rate_hz=0.0),
                         p, 0.08, pid)
    assert o.dob_min_rate_hz == 0.0  # the term at any loop rate
    assert o.residual_limit_nm == 0.3 and o.bandwidth_hz == 5.0 and o.dob_sweep_s == 0.5
    assert o.off_reference_rad == 2e-5 and o.rest_spring_s == 0.1 and o.learning_release_s == 0.2
    assert o.learning_deadzone_nm == 0.0  # an explicit 0 is a value, not "derived"
    assert o.learning_smoothing == 0.0
    # the hunting threshold follows an explicit bound of the term, and is overridden itself
    o3 = resolve_observer(ObserverConfig(dob_limit_nm=0.4), p, 0.08, pid)
    assert o3.dob_hunting_nm == pytest.approx(0.2)
    o4 = resolve_observer(ObserverConfig(dob_hunting_nm=math.inf, dob_hunting_recover_s=2.0),
                          p, 0.08, pid)
    assert o4.dob_hunting_nm == math.inf and o4.dob_hunting_recover_s == 2.0
    # the handover rate follows an explicit dead zone; without an integral gain it is inf
    o2 = resolve_observer(ObserverConfig(dob_deadzone_nm=0.1), p, 0.08, pid)
    assert o2.handover_rate_nm_s == pytest.approx(pid.ki * 0.1 / p.sigma0)
    no_i = PIDGains(kp=pid.kp, ki=0.0, kd=pid.kd)
    assert resolve_observer(ObserverConfig(), p, 0.08, no_i).handover_rate_nm_s == math.inf
    assert resolve_observer(ObserverConfig(handover_rate_nm_s=0.5), p, 0.08,
                            pid).handover_rate_nm_s == 0.5
    assert resolve_observer(ObserverConfig(dob_damping_limit=7.0), p, 0.08,
                            pid).dob_damping_limit == 7.0
    no_d = PIDGains(kp=pid.kp, ki=pid.ki, kd=0.0)
    assert resolve_observer(ObserverConfig(), p, 0.08, no_d).dob_damping_limit == math.inf
    assert o.dob_presliding_rad == 1e-4  # SETS[1]'s bristle mode is damped: the rule gives 0
    assert resolve_observer(ObserverConfig(), p, 0.08, pid).dob_presliding_rad == 0.0
    assert o.clamp_margin_nm == pytest.approx(0.25 * p.Fc)  # the others still derived
    a = resolve_adaptation(AdaptationConfig(fc_max_nm=9.0), p)
    assert a.fc_max_nm == 9.0 and a.fc_min_nm == pytest.approx(0.75)


def test_directional_set_uses_the_mean_of_both_directions():
    d = DirectionalParams(SETS[0], SETS[0].scaled(Fc=2.0, Fs=2.0))
    a = resolve_adaptation(AdaptationConfig(), d)
    assert a.fc_min_nm == pytest.approx(0.5 * 0.3)


def test_compensator_gain_is_capped_by_the_bristle_damping_rate():
    """A set with sigma0/sigma1 = 61 rad/s: the residual correction runs at 6.1 rad/s, not at
    the 30 Hz the reference table uses (where it double-counts the sigma1 term)."""
    p = SETS[2]
    comp = LuGreCompensator(p, 0.08, 0.6, base_pid=PIDGains.triple_pole(0.08, 20.0))
    assert comp.estimator.L * p.sigma0 == pytest.approx(0.1 * p.sigma0 / p.sigma1)
    ref = LuGreCompensator(SETS[0], 0.08, 0.6, base_pid=PIDGains.triple_pole(0.08, 20.0))
    assert ref.estimator.L * SETS[0].sigma0 == pytest.approx(2 * math.pi * 30.0)


@pytest.mark.parametrize("p", SETS)
def test_the_feedforward_bound_widens_as_far_as_the_stated_uncertainty_of_the_bristle_time(p):
    """The feedforward model's |F̂| margin is the estimator's (0.25·Fc) for a set of unstated
    uncertainty, and clamp·0.3/(3u) where sigma1/sigma0 is stated within 3u < 0.3 (the errors of
    sigma1 and sigma0 in quadrature); a parameter held fixed (se 0) or not measured counts as
    unstated; an explicit value overrides the rule."""
    pid = PIDGains.triple_pole(0.08, 20.0)
    clamp = 0.25 * p.Fc
    assert resolve_observer(ObserverConfig(), p, 0.08, pid).ff_clamp_margin_nm == pytest.approx(clamp)
    se = FrictionUncertainty(sigma1=0.03 * p.sigma1, sigma0=0.04 * p.sigma0, Fc=1e-4)
    u = damping_time_uncertainty(p, se)
    assert u == pytest.approx(0.05)
    o = resolve_observer(ObserverConfig(), p, 0.08, pid, se)
    assert o.ff_clamp_margin_nm == pytest.approx(clamp * BELIEF_ERROR / (3 * 0.05))  # 2×
    assert o.clamp_margin_nm == pytest.approx(clamp)  # the estimator's own bound stays
    assert resolve_observer(ObserverConfig(), p, 0.08, pid, FrictionUncertainty(
        sigma1=0.12 * p.sigma1, sigma0=0.0001 * p.sigma0)).ff_clamp_margin_nm == pytest.approx(
        clamp)  # three standard errors (36 %) wider than the 30 % the clamp is made for
    loose = FrictionUncertainty(sigma1=0.5 * p.sigma1, sigma0=0.01 * p.sigma0)
    assert resolve_observer(ObserverConfig(), p, 0.08, pid, loose).ff_clamp_margin_nm \
        == pytest.approx(clamp)  # known worse than 30 %: never tighter than the shipped rule
    for unstated in (FrictionUncertainty(sigma0=0.01 * p.sigma0),  # sigma1 not measured
                     FrictionUncertainty(sigma1=0.0, sigma0=0.01 * p.sigma0)):  # sigma1 held
        assert damping_time_uncertainty(p, unstated) == math.inf
        assert resolve_observer(ObserverConfig(), p, 0.08, pid, unstated).ff_clamp_margin_nm \
            == pytest.approx(clamp)
    assert resolve_observer(ObserverConfig(ff_clamp_margin_nm=0.7), p, 0.08, pid,
                            se).ff_clamp_margin_nm == 0.7
    # the start transient's fraction: 1/(1 + 3u) where 3u is below the unstated 0.857
    assert o.ff_start_fraction == pytest.approx(1 / (1 + 3 * 0.05))
    assert resolve_observer(ObserverConfig(), p, 0.08, pid, loose).ff_start_fraction \
        == pytest.approx(0.7 / 1.3)  # 3u = 1.5: the unstated worst case
    assert resolve_observer(ObserverConfig(ff_start_fraction=0.0), p, 0.08, pid,
                            se).ff_start_fraction == 0.0
    # the compensator's feedforward model carries it; its estimator keeps the clamp
    comp = LuGreCompensator(p, 0.08, 0.1, base_pid=pid, friction_se=se)
    assert comp.ff_model is not None and comp.ff_model.margin_nm == pytest.approx(clamp * 2.0)
    assert comp.estimator.margin_nm == pytest.approx(clamp)


def test_a_standard_error_must_be_one():
    from controller.config import config_from_mapping
    from controller.schema import ConfigError, to_plain

    from .conftest import reference_config

    with pytest.raises(ValueError, match="sigma1: must be a standard error"):
        FrictionUncertainty(sigma1=-0.1)
    with pytest.raises(ValueError, match="J: must be a standard error"):
        FrictionUncertainty(J=math.inf)
    data = to_plain(reference_config())
    data["controller"]["friction_se"] = {"sigma1": -1.0}
    with pytest.raises(ConfigError, match="controller.friction_se.sigma1: must be a standard"):
        config_from_mapping(data)
    data["controller"]["friction_se"] = {"sigma1": 0.01, "sigma0": 30.0}
    cfg = config_from_mapping(data)  # and the run header's round trip keeps it (replay)
    assert cfg.controller.friction_se == FrictionUncertainty(sigma1=0.01, sigma0=30.0)
    assert config_from_mapping(to_plain(cfg)).controller.friction_se == cfg.controller.friction_se


def test_the_feedforward_bound_takes_the_direction_known_least_and_widens_at_most_10_fold():
    pid = PIDGains.triple_pole(0.08, 20.0)
    p = SETS[2]
    d = DirectionalParams(p, p.scaled(sigma1=0.02))  # reverse's damping 50× smaller
    se = FrictionUncertainty(sigma1=0.01 * p.sigma1, sigma0=1e-9)
    assert damping_time_uncertainty(p, se) == pytest.approx(0.01)
    assert damping_time_uncertainty(d, se) == pytest.approx(0.5)  # 1 % of forward, 50 % of reverse
    assert resolve_observer(ObserverConfig(), d, 0.08, pid, se).ff_clamp_margin_nm \
        == pytest.approx(0.25 * p.Fc)
    tiny = FrictionUncertainty(sigma1=1e-9, sigma0=1e-9)  # no bristle time is known within 1e-9
    assert resolve_observer(ObserverConfig(), p, 0.08, pid, tiny).ff_clamp_margin_nm \
        == pytest.approx(0.25 * p.Fc * 10.0)


def test_a_schedule_that_rescales_the_bristles_leaves_the_shipped_bound():
    """The stated uncertainty is of controller.friction's sigma1 and sigma0: a scheduled set
    that scales either is a set nobody measured (the shipped schedule scales Fc, Fs, sigma2)."""
    from controller.estimation_config import FrictionScale, ParameterSetConfig
    from controller.lugre_compensator import make_lugre_compensator

    from .conftest import reference_config

    ctrl = reference_config().controller
    se = FrictionUncertainty(sigma1=0.001 * ctrl.friction.sigma1, sigma0=0.001 * ctrl.friction.sigma0)
    stated = dataclasses.replace(ctrl, friction_se=se)
    comp = make_lugre_compensator(stated, True)  # its clamp: 0.25·Fc of the schedule's start set
    assert comp.ff_model.margin_nm == pytest.approx(comp.cfg.clamp_margin_nm * 10.0)
    sets = ctrl.schedule.sets + (ParameterSetConfig(name="soft", scale=FrictionScale(sigma0=0.8)),)
    rescaled = dataclasses.replace(stated, schedule=dataclasses.replace(ctrl.schedule, sets=sets))
    comp = make_lugre_compensator(rescaled, True)
    assert comp.ff_model.margin_nm == pytest.approx(comp.cfg.clamp_margin_nm)
