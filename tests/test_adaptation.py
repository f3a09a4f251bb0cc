"""Online Fc adaptation (FcAdapter) and the re-identify alarm (DriftMonitor), unit and closed loop."""

from __future__ import annotations

import dataclasses
import math

import pytest

import configs
from controller.adaptation import DriftMonitor, FcAdapter, SlidingGate
from controller.compensation import TickSignals
from controller.config import load_config
from controller.estimation_config import AdaptationConfig, resolve_adaptation
from controller.lugre_compensator import make_lugre_compensator
from controller.schema import ConfigError, parse_dataclass
from hil.plant import Turntable

DT = 1e-3
CFG = load_config(configs.path("turntable"))
A = resolve_adaptation(AdaptationConfig(), CFG.controller.friction)  # the rules on the reference set


def run_loop(comp, ref, duration_s, *, plant_cfg=None, seed=5, on_tick=None):
    """The configured PID plus ``comp`` on a Turntable (encoder-difference velocity, 100 Hz)."""
    plant = Turntable(plant_cfg or CFG.plant, seed=seed)
    ctrl, gains = CFG.controller, CFG.controller.pid
    s = TickSignals()
    a_v = 1.0 - math.exp(-2 * math.pi * ctrl.velocity.cutoff_hz * DT)
    a_d = 1.0 - math.exp(-2 * math.pi * gains.derivative_cutoff_hz * DT)
    vel = integ = d_f = e_prev = pos_prev = 0.0
    for k in range(int(round(duration_s / DT))):
        t = k * DT
        m = plant.measure()
        vel += a_v * ((m.position_rad - pos_prev) / DT - vel) if k else 0.0
        pos_prev = m.position_rad
        s.pos_ref_rad, s.vel_ref_rad_s = ref(t)
        s.t_s, s.pos_rad, s.vel_rad_s, s.current_a = t, m.position_rad, vel, m.current_a
        ff = comp.step(s, DT)
        e = s.pos_ref_rad - m.position_rad
        d_f += a_d * ((e - e_prev) / DT - d_f) if k else 0.0
        e_prev = e
        u = gains.kp * e + gains.ki * integ + gains.kd * d_f + ff
        s.saturated = abs(u) > gains.output_limit_nm
        u = max(-gains.output_limit_nm, min(gains.output_limit_nm, u))
        integ += 0.0 if s.saturated else e * DT
        if on_tick:
            on_tick(t, plant, comp)
        plant.advance(u / ctrl.Kt, DT)


def segments(segs, start=0.2):
    """Constant-velocity segments [(v [rad/s], duration [s]), ...] repeated: ref(t) -> (pos, vel)."""
    period = sum(d for _, d in segs)

    def ref(t):
        tt = t - start
        if tt <= 0:
            return 0.0, 0.0
        n, rem = divmod(tt, period)
        pos = n * sum(v * d for v, d in segs)
        for v, d in segs:
            if rem <= d:
                return pos + v * rem, v
            pos += v * d
            rem -= d
        return pos, 0.0

    return ref


SCAN = segments([(0.05, 2.0), (-0.05, 2.0)])
# high band (0.06 rad/s = 6 vs) and low band (0.015 rad/s = 1.5 vs), both directions
BANDS = segments([(0.06, 2.0), (-0.06, 2.0), (0.015, 3.0), (-0.015, 3.0)])


def scaled_plant(**factors):
    return dataclasses.replace(CFG.plant, friction=CFG.plant.friction.scaled(**factors))


# --- FcAdapter: the law, its gate, bounds and rate limit --------------------------------------


def test_gate_needs_sliding_for_the_holdoff_after_each_reversal():
    gate = SlidingGate(0.03, math.inf, 0.3)
    assert all(gate.step(0.02, DT) == 0 for _ in range(1000))  # below the gate
    out = [gate.step(0.05, DT) for _ in range(400)]
    assert out.index(1) == 300  # settled after 0.3 s
    out = [gate.step(-0.05, DT) for _ in range(400)]
    assert out.index(-1) == 300  # a reversal restarts the holdoff


def test_adapter_follows_the_law_with_its_time_constant():
    """Residual = true − estimated Coulomb level while sliding: exp(−t/τ) convergence."""
    cfg = dataclasses.replace(A, reversal_holdoff_s=0.0, rate_limit_nm_s=math.inf)
    adapter = FcAdapter(cfg, fc_nominal_nm=0.2)
    fc_true = 0.26
    n = int(cfg.time_constant_s / DT)
    # sliding in reverse, friction is negative: a plant rubbing harder gives a negative residual
    for _ in range(n + 1):
        adapter.step(+(fc_true - adapter.fc_hat_nm), -0.1, DT)  # wrong sign for reverse
    assert adapter.fc_hat_nm < 0.2
    adapter.reset()
    for _ in range(n + 1):
        adapter.step(-(fc_true - adapter.fc_hat_nm), -0.1, DT)
    err = (fc_true - adapter.fc_hat_nm) / (fc_true - 0.2)
    assert err == pytest.approx(math.exp(-1.0), rel=2e-3)


def test_adapter_respects_rate_limit_and_bounds():
    adapter = FcAdapter(A, fc_nominal_nm=0.2)
    fcs = [adapter.fc_hat_nm]
    for _ in range(30000):
        adapter.step(5.0, 0.1, DT)
        fcs.append(adapter.fc_hat_nm)
    steps = [b - a for a, b in zip(fcs, fcs[1:])]
    assert max(steps) <= A.rate_limit_nm_s * DT * (1 + 1e-9)
    assert steps[int(A.reversal_holdoff_s / DT) + 5] == pytest.approx(A.rate_limit_nm_s * DT)
    assert adapter.fc_hat_nm == pytest.approx(A.fc_max_nm) and adapter.at_bound
    for _ in range(30000):
        adapter.step(-5.0, 0.1, DT)
    assert adapter.fc_hat_nm == pytest.approx(A.fc_min_nm)
    assert adapter.scale == pytest.approx(A.fc_min_nm / 0.2)


def test_adapter_is_frozen_while_held_or_not_sliding():
    adapter = FcAdapter(A, fc_nominal_nm=0.2)
    for _ in range(2000):
        adapter.step(0.05, 0.1, DT, hold=True)  # saturated / faulted / contained
    for _ in range(2000):
        adapter.step(0.05, 0.01, DT)  # in the Stribeck region: not adapted
    assert adapter.scale == 1.0 and not adapter.active
    disabled = FcAdapter(dataclasses.replace(A, enabled=False), fc_nominal_nm=0.2)
    for _ in range(2000):
        disabled.step(0.05, 0.1, DT)
    assert disabled.scale == 1.0


def test_compensator_freezes_adaptation_while_saturated():
    comp = make_lugre_compensator(CFG.controller, adaptive=True)
    s = TickSignals()
    s.saturated = True
    s.vel_rad_s = s.vel_ref_rad_s = 0.1
    for _ in range(3000):
        s.pos_rad += 0.1 * DT
        s.pos_ref_rad = s.pos_rad
        s.current_a = 0.4  # 0.24 N·m: the plant rubs harder than the model's 0.204
        comp.step(s, DT)
    assert comp.adapter.scale == 1.0
    s.saturated = False
    for _ in range(3000):
        s.pos_rad += 0.1 * DT
        s.pos_ref_rad = s.pos_rad
        comp.step(s, DT)
    assert comp.fc_hat_nm > 0.21


def test_adaptation_converges_after_an_fc_step():
    """Plant Fc (and Fs) × 1.3 at t = 1 s; ±0.05 rad/s scan: Fc_hat within 5 % after ~10 s of
    sliding."""
    comp = make_lugre_compensator(CFG.controller, adaptive=True)
    sliding = [0.0]

    def on_tick(t, plant, c):
        if t >= 1.0:
            plant.extra_fc_scale = 1.3
        sliding[0] += DT if c.adapter.active else 0.0

    run_loop(comp, SCAN, 13.0, on_tick=on_tick)
    assert 9.0 <= sliding[0] <= 12.0
    assert comp.fc_hat_nm == pytest.approx(1.3 * CFG.plant.friction.Fc, rel=0.05)
    assert comp.adapter.fc_hat_nm * CFG.controller.friction.Fs / CFG.controller.friction.Fc == \
        pytest.approx(comp.adapter.scale * CFG.controller.friction.Fs)  # Fs follows the ratio
    assert comp.watchdog.trips == 0 and not comp.reidentify


def test_a_velocity_step_reference_raises_no_lesson_alarm():
    """The exact set on ±0.05 rad/s velocity steps: after each step the path table learns the
    loop's own reaction (the unplanned deceleration read as friction, odd in the velocity, up
    to the table's bound), but a pass in which the reference jumped is not judged."""
    comp = make_lugre_compensator(CFG.controller, adaptive=True)
    run_loop(comp, SCAN, 13.0)
    assert comp.path_table.pass_ends >= 5
    assert comp.path_table.odd_nm > 2.0 * comp.adaptation_cfg.lesson_threshold_nm
    assert not comp.reidentify


# --- DriftMonitor ----------------------------------------------------------------------------


def test_drift_monitor_raises_and_clears_with_hysteresis():
    mon = DriftMonitor(A)
    vs = 0.01

    def feed(v, residual_sgn, seconds):
        for _ in range(int(round(seconds / DT))):
            mon.step(residual_sgn * math.copysign(1.0, v), v, vs, DT)

    feed(0.015, 0.05, 10.0)  # low band off, high band never seen: nothing to compare
    assert not mon.reidentify
    feed(0.06, 0.0, 3.0)  # high band explained
    feed(0.015, 0.05, 3.0 + A.reversal_holdoff_s + 0.2)
    assert mon.reidentify
    feed(0.015, 0.0, 2.0)  # residual gone, but not yet for drift_persist_s
    assert mon.reidentify
    feed(0.015, 0.0, A.drift_persist_s + 2.0)
    assert not mon.reidentify


def test_drift_monitor_ignores_a_low_band_error_while_the_high_band_is_off():
    """A pure Fc change shows in both bands: not a moved Stribeck region."""
    mon = DriftMonitor(A)
    for _ in range(6):
        for v, res, sec in ((0.06, 0.06, 2.0), (0.015, 0.06, 3.0)):
            for _ in range(int(sec / DT)):
                mon.step(res, v, 0.01, DT)
    assert not mon.reidentify and mon.high_mean_nm > A.drift_high_threshold_nm


@pytest.mark.parametrize("moved, expect", [(dict(vs=1.5, Fs=1.25), True), (dict(Fc=1.3, Fs=1.3), False)])
def test_reidentify_when_the_stribeck_region_moves_not_when_fc_moves(moved, expect):
    comp = make_lugre_compensator(CFG.controller, adaptive=True)
    run_loop(comp, BANDS, 20.0, plant_cfg=scaled_plant(**moved))
    assert comp.reidentify is expect
    plant_fc = CFG.plant.friction.Fc * moved.get("Fc", 1.0)
    assert comp.fc_hat_nm == pytest.approx(plant_fc, rel=0.03)  # Fc is adapted either way
    assert comp.watchdog.trips == 0


def test_adaptation_config_rules_name_the_key():
    with pytest.raises(ConfigError, match=r"^adaptation\.fc_max_nm: must be > fc_min_nm"):
        parse_dataclass(AdaptationConfig, {"fc_min_nm": 0.5, "fc_max_nm": 0.4}, "adaptation")
    with pytest.raises(ConfigError, match=r"^adaptation\.drift_low_band_vs: must be 0 <= lo < hi"):
        parse_dataclass(AdaptationConfig, {"drift_low_band_vs": [3, 1]}, "adaptation")
    with pytest.raises(ConfigError, match=r"^adaptation\.bogus: unknown key"):
        parse_dataclass(AdaptationConfig, {"bogus": 1}, "adaptation")
