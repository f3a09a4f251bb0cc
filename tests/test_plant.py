"""Tests of the simulated turntable (hil/plant.py) on the reference config."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import configs
from controller.config import load_config
from controller.friction import DirectionalParams, LuGreParams
from hil.plant import Turntable, profile_value

DT = 1e-3  # the 1 kHz control period


@pytest.fixture(scope="module")
def shipped():
    return load_config(configs.path("turntable")).plant


@pytest.fixture()
def clean(shipped):
    """The reference plant without cogging (a conservative torque energy_j does not count)."""
    return dataclasses.replace(shipped, cogging=())


def _fric(plant_cfg) -> LuGreParams:
    f = plant_cfg.friction
    assert isinstance(f, LuGreParams)
    return f


# --- unpowered coast-down -----------------------------------------------------------------------


@pytest.mark.parametrize("omega0", [0.5, -0.3, 0.02])
def test_coast_down_dissipates_and_stops(clean, omega0):
    plant = Turntable(clean, seed=0)
    plant.omega_rad_s = omega0
    e0 = plant.energy_j()
    energy = [e0]
    omega = [omega0]
    theta = [0.0]
    for _ in range(3000):
        plant.advance(0.0, DT)
        energy.append(plant.energy_j())
        omega.append(plant.omega_rad_s)
        theta.append(plant.theta_rad)
    energy, omega, theta = map(np.array, (energy, omega, theta))
    assert np.all(np.isfinite(energy))
    # never gains energy beyond a tiny numerical tolerance: symplectic Euler's wobble of the
    # bristle ring (it shrinks as h³ with more substeps), 1 % of the bristle energy scale
    p = _fric(clean)
    tol = 0.01 * 0.5 * p.sigma0 * p.z_max**2
    assert np.max(np.diff(energy)) <= tol
    assert energy[-1] < 1e-6 * e0
    # it stops in finite time (friction ≥ Fc), and the stopping distance matches the energy:
    # Fc·|θ| ≤ ½Jω0² ≤ (Fs + σ2·|ω0|)·|θ|
    stop = int(np.argmax(np.abs(omega) < 1e-3 * abs(omega0)))
    assert 0 < stop < len(omega) - 1000
    travel = abs(theta[stop])
    assert np.sign(theta[stop]) == np.sign(omega0)
    assert p.Fc * travel <= e0 <= (p.Fs + p.sigma2 * abs(omega0)) * travel
    # and stays stopped: 1 s after stopping, only a decaying bristle ring is left, well inside
    # the pre-sliding range
    rest = slice(stop + 1000, None)
    assert np.max(np.abs(omega[rest])) < 1e-4
    assert np.ptp(theta[rest]) < 0.1 * p.z_max
    assert abs(plant.z_rad) <= p.z_max


def test_coast_down_directional_friction_stops_too(clean):
    p = _fric(clean)
    rev = p.scaled(Fc=1.5, Fs=1.5)
    cfg = dataclasses.replace(clean, friction=DirectionalParams(p, rev))
    for omega0, expected_level in ((0.4, p), (-0.4, rev)):
        plant = Turntable(cfg, seed=0)
        plant.omega_rad_s = omega0
        e0 = plant.energy_j()
        for _ in range(2000):
            plant.advance(0.0, DT)
        assert abs(plant.omega_rad_s) < 1e-3
        travel = abs(plant.theta_rad)
        # the direction's own Coulomb level dissipated the energy
        assert expected_level.Fc * travel <= e0 <= (expected_level.Fs + 0.04 * 0.4) * travel


# --- sensors ------------------------------------------------------------------------------------


def _record(cfg, seed, n=300):
    plant = Turntable(cfg, seed=seed)
    out = []
    for k in range(n):
        plant.advance(0.6 * math.sin(0.05 * k), DT)
        m = plant.measure()
        out.append((m.position_rad, m.position_counts, m.current_a))
    return out


def test_same_seed_same_measurements_different_seed_different_noise(shipped):
    a = _record(shipped, seed=7)
    b = _record(shipped, seed=7)
    c = _record(shipped, seed=8)
    assert a == b
    assert [x[:2] for x in a] == [x[:2] for x in c]  # noise does not touch the dynamics
    currents_a = np.array([x[2] for x in a])
    currents_c = np.array([x[2] for x in c])
    assert np.sum(currents_a != currents_c) > len(a) // 2
    # the noise has about the configured size and the readings sit on the ADC grid
    sensor = shipped.current_sensor
    res = sensor.resolution_a
    assert np.allclose(currents_a / res, np.round(currents_a / res), rtol=0, atol=1e-6)
    diff = currents_a - currents_c  # two independent noise draws on the same truth
    assert 0.5 * sensor.noise_std_a < np.std(diff) / math.sqrt(2) < 1.6 * sensor.noise_std_a


def test_noise_free_sensor_reports_the_true_current(shipped):
    cfg = dataclasses.replace(shipped, current_sensor=dataclasses.replace(
        shipped.current_sensor, noise_std_a=0.0, resolution_a=0.0))
    plant = Turntable(cfg, seed=1)
    plant.advance(1.234, DT)
    assert plant.measure().current_a == plant.current_a


@pytest.mark.parametrize("counts_per_rev", [4096, 2**24])
def test_encoder_quantization(shipped, counts_per_rev):
    cfg = dataclasses.replace(shipped, encoder=dataclasses.replace(shipped.encoder, counts_per_rev=counts_per_rev))
    plant = Turntable(cfg)
    step = 2 * math.pi / counts_per_rev
    rng = np.random.default_rng(3)
    thetas = np.r_[rng.uniform(-20.0, 20.0, 400), rng.uniform(-50, 50, 100) * step,
                   np.arange(-5, 6) * step, 0.0]
    for theta in thetas:
        plant.theta_rad = float(theta)
        m = plant.measure()
        assert isinstance(m.position_counts, int)
        assert m.position_rad == m.position_counts * step
        assert m.position_rad / step == pytest.approx(round(m.position_rad / step), abs=1e-6)
        # floor: within one count below the truth (never above it)
        assert theta - step * (1 + 1e-9) <= m.position_rad <= theta + 1e-12 * step, theta


# --- current loop ---------------------------------------------------------------------------------


def test_current_limit_respected(shipped):
    limit = shipped.current_loop.limit_a
    plant = Turntable(shipped)
    plant.blocked = True
    for cmd in (100.0, -1e6, math.inf, 3.0 * limit):
        for _ in range(20):
            plant.advance(cmd, DT)
            assert abs(plant.current_a) <= limit
    assert plant.current_a == pytest.approx(limit, rel=1e-9)
    plant.advance(-math.inf, DT)
    assert abs(plant.current_a) <= limit
    plant.advance(math.nan, DT)  # a non-finite command is ignored: the drive goes to zero
    assert math.isfinite(plant.current_a)
    for _ in range(20):
        plant.advance(math.nan, DT)
    assert abs(plant.current_a) < 1e-6


def test_current_loop_first_order_lag(shipped):
    bw = shipped.current_loop.bandwidth_hz
    tau = 1.0 / (2 * math.pi * bw)
    plant = Turntable(shipped)
    plant.blocked = True
    plant.advance(1.0, tau)  # one period of exactly one time constant
    assert plant.current_a == pytest.approx(1.0 - math.exp(-1.0), rel=1e-9)  # ≈ 63 %
    plant = Turntable(shipped)
    plant.blocked = True
    plant.advance(2.0, 3 * tau)
    assert plant.current_a == pytest.approx(2.0 * (1.0 - math.exp(-3.0)), rel=1e-9)
    # split into periods of different length, the same exact lag
    plant = Turntable(shipped)
    plant.blocked = True
    plant.advance(1.0, 0.25 * tau)
    plant.advance(1.0, 0.75 * tau)
    assert plant.current_a == pytest.approx(1.0 - math.exp(-1.0), rel=1e-9)


# --- friction drift profile -----------------------------------------------------------------------


def test_fc_profile_scales_friction_at_the_right_times(clean):
    base = _fric(clean)
    profile = ((0.1, 1.0), (0.3, 2.0), (0.5, 1.5))
    for plant in (Turntable(clean, fc_profile=profile),
                  Turntable(dataclasses.replace(clean, fc_profile=profile))):
        assert plant.fc_scale == 1.0 and plant.friction.Fc == base.Fc
        for k in range(700):
            t_start = plant.t_s
            plant.advance(0.0, DT)
            expected = profile_value(profile, t_start)  # applied from the start of each period
            assert plant.fc_scale == pytest.approx(expected, rel=1e-9), t_start
            assert plant.friction.Fc == pytest.approx(base.Fc * expected, rel=1e-9)
            assert plant.friction.Fs == pytest.approx(base.Fs * expected, rel=1e-9)
            assert plant.friction.sigma0 == base.sigma0
        assert plant.fc_scale == pytest.approx(1.5)  # held after the last breakpoint
    assert profile_value(profile, 0.0) == 1.0
    assert profile_value(profile, 0.2) == pytest.approx(1.5)
    assert profile_value(profile, 0.4) == pytest.approx(1.75)
    assert profile_value(profile, 9.0) == 1.5


def test_fc_profile_changes_the_breakaway(clean):
    """A torque between Fs and 2·Fc slides the table at scale 1 but not once Fc has doubled."""
    base = _fric(clean)
    torque = 0.5 * (base.Fs + 2 * base.Fc)
    assert base.Fs < torque < 2 * base.Fc
    for profile, should_slide in (((0.0, 1.0),), True), (((0.0, 2.0),), False):
        plant = Turntable(clean, fc_profile=profile)
        for _ in range(500):
            plant.advance(torque / clean.Kt, DT)
        slid = abs(plant.theta_rad) > 1e-3  # sliding covers > 100 × the pre-sliding range
        assert slid == should_slide


# --- mechanics ------------------------------------------------------------------------------------


def test_blocked_rotor_does_not_move(shipped):
    plant = Turntable(shipped)
    plant.blocked = True
    for _ in range(200):
        plant.advance(shipped.current_loop.limit_a, DT)
        assert plant.theta_rad == 0.0 and plant.omega_rad_s == 0.0
    assert plant.measure().position_counts == 0
    assert plant.t_s == pytest.approx(0.2)


def test_torque_above_fs_accelerates(clean):
    p = _fric(clean)
    torque = 1.25 * p.Fs  # 0.35 N·m
    plant = Turntable(clean)
    omegas = []
    for _ in range(1000):
        plant.advance(torque / clean.Kt, DT)
        omegas.append(plant.omega_rad_s)
    omegas = np.array(omegas)
    assert np.all(np.diff(omegas[100:]) > 0)  # keeps accelerating
    # far above vs the friction is Fc + σ2·ω: ω(t) = ω∞·(1 − exp(−t·σ2/J)) up to the start-up
    w_inf = (torque - p.Fc) / p.sigma2
    expected = w_inf * (1 - math.exp(-1.0 * p.sigma2 / clean.J))
    assert omegas[-1] == pytest.approx(expected, rel=0.05)
    assert plant.friction_nm == pytest.approx(p.Fc + p.sigma2 * omegas[-1], rel=0.01)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_torque_below_half_fc_stays_in_presliding(clean, sign):
    p = _fric(clean)
    torque = sign * 0.45 * p.Fc
    elastic = torque / p.sigma0
    # a step: the lightly damped bristle ring (ζ = σ1/(2·sqrt(σ0·J)) ≈ 1e-3) lets the position
    # drift a few pre-sliding ranges (LuGre's known pre-sliding drift), then it stays put
    plant = Turntable(clean)
    thetas = []
    for _ in range(3000):
        plant.advance(torque / clean.Kt, DT)
        thetas.append(plant.theta_rad)
    thetas = np.array(thetas)
    assert np.max(np.abs(thetas)) <= 10 * p.z_max  # vs. ≈ 0.5 rad/s² when sliding
    assert np.sign(plant.theta_rad) == sign
    assert abs(plant.omega_rad_s) < 1e-3
    assert np.ptp(thetas[-500:]) < 0.1 * p.z_max  # settling: the drift dies out with the ring
    assert np.ptp(thetas[-500:]) < 0.5 * np.ptp(thetas[-1500:-1000])
    assert plant.z_rad == pytest.approx(elastic, rel=0.01)  # the bristle carries the torque
    assert plant.friction_nm == pytest.approx(torque, rel=0.02)
    # applied smoothly (no ring), the deflection follows LuGre's virgin pre-sliding curve: at
    # |v| ≪ vs, g ≈ Fs and dz/dθ = 1 − σ0·z/Fs, so θ = (Fs/σ0)·(−ln(1 − |τ|/Fs)) (≈ 1.21·τ/σ0 here)
    plant = Turntable(clean)
    for k in range(2500):
        ramp = 0.5 - 0.5 * math.cos(math.pi * min(1.0, k / 1500))
        plant.advance(ramp * torque / clean.Kt, DT)
    virgin = sign * p.Fs / p.sigma0 * -math.log(1.0 - abs(torque) / p.Fs)
    assert abs(plant.theta_rad) <= p.z_max
    assert plant.theta_rad == pytest.approx(virgin, rel=0.005)
    assert plant.z_rad == pytest.approx(elastic, rel=0.005)


def test_substeps_resolve_the_bristle_period(shipped):
    plant = Turntable(shipped)
    period = 2 * math.pi * math.sqrt(shipped.J / _fric(shipped).sigma0)
    for dt in (1e-4, 1e-3, 1e-2):
        n = plant.substeps(dt)
        assert n >= shipped.min_substeps
        assert dt / n <= period / 20 * (1 + 1e-12)
    stiff = dataclasses.replace(shipped, friction=_fric(shipped).scaled(sigma0=1000.0))
    assert Turntable(stiff).substeps(1e-3) >= math.ceil(1e-3 / (2 * math.pi * math.sqrt(shipped.J / 3e7) / 20))


# --- the current sensor: one sample per plant instant -------------------------------------------


def test_current_noise_is_one_sample_per_plant_instant(shipped):
    """A drive that answers several requests within one period reads the same sensor sample, so
    the noise sequence (and a lockstep HIL run) does not depend on how often it is read."""
    read_once, read_thrice = Turntable(shipped, seed=3), Turntable(shipped, seed=3)
    once, thrice = [], []
    for _ in range(50):
        once.append(read_once.measure().current_a)
        samples = [read_thrice.measure().current_a for _ in range(3)]
        assert samples[0] == samples[1] == samples[2]
        thrice.append(samples[0])
        read_once.advance(0.05, DT)
        read_thrice.advance(0.05, DT)
    assert once == thrice
    assert len(set(once)) > 3  # the noise is really there and moves with the plant
