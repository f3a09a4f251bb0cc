"""PID: components against hand calculations, derivative filter, anti-windup, lifecycle, closed loop."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.config import PIDGains
from controller.pid import PID, inertia_feedforward

DT = 1e-3  # [s]
J = 0.08  # [kg·m²], the shipped turntable


def make(kp=0.0, ki=0.0, kd=0.0, fc=300.0, lim=math.inf, pos0=0.0, u0=0.0) -> PID:
    pid = PID(PIDGains(kp=kp, ki=ki, kd=kd, derivative_cutoff_hz=fc, output_limit_nm=lim))
    pid.enable(pos0, u0)
    return pid


class NaivePID:
    """The same law with unconditional integration and no integrator clamp (windup reference)."""

    def __init__(self, g: PIDGains) -> None:
        self.g, self.i, self.prev, self.vf = g, 0.0, 0.0, 0.0

    def step(self, ref, vel_ref, pos, ff, dt):
        g = self.g
        e = ref - pos
        alpha = 1.0 - math.exp(-2.0 * math.pi * g.derivative_cutoff_hz * dt)
        self.vf += alpha * ((pos - self.prev) / dt - self.vf)
        self.prev = pos
        self.i += g.ki * e * dt
        u = g.kp * e + self.i + g.kd * (vel_ref - self.vf) + ff
        return max(-g.output_limit_nm, min(g.output_limit_nm, u))


def simulate(ctrl, ref, ticks, load_nm=0.0, x0=0.0, on_tick=None):
    """Double integrator J·ẍ = u − load, torque held over the period, 10 semi-implicit Euler
    substeps per tick. Returns the positions after each tick."""
    x, v = x0, 0.0
    xs = []
    h = DT / 10
    for k in range(ticks):
        if on_tick is not None:
            on_tick(k)
        u = ctrl.step(ref, 0.0, x, 0.0, DT)
        for _ in range(10):
            v += (u - load_nm) / J * h
            x += v * h
        xs.append(x)
    return xs


# --- components ---------------------------------------------------------------------------------


def test_proportional_component():
    pid = make(kp=2.0, pos0=0.1)
    out = pid.step(0.3, 0.0, 0.1, 0.0, DT)
    assert pid.error_rad == pytest.approx(0.2, rel=1e-12)
    assert pid.p_nm == pytest.approx(0.4, rel=1e-12)
    assert pid.i_nm == 0.0 and pid.d_nm == 0.0
    assert out == pid.out_nm == pytest.approx(0.4, rel=1e-12)
    assert not pid.saturated


def test_integral_component_accumulates_ki_e_dt():
    pid = make(ki=10.0)
    for n in range(1, 8):
        out = pid.step(0.05, 0.0, 0.0, 0.0, 2e-3)
        assert pid.i_nm == pytest.approx(10.0 * 0.05 * 2e-3 * n, rel=1e-12)
        assert out == pytest.approx(pid.i_nm, rel=1e-12)


def test_derivative_component_uses_reference_velocity_as_feedforward():
    pid = make(kd=3.0)
    out = pid.step(0.0, 0.25, 0.0, 0.0, DT)  # measurement at rest: v_filt stays 0
    assert pid.vel_filt_rad_s == 0.0
    assert pid.d_nm == pytest.approx(0.75, rel=1e-12)
    assert out == pytest.approx(0.75, rel=1e-12)


def test_feedforward_is_added():
    pid = make(kp=1.0)
    assert pid.step(0.1, 0.0, 0.0, 0.3, DT) == pytest.approx(0.4, rel=1e-12)
    assert pid.ff_nm == 0.3


def test_derivative_filter_step_response_is_exact_first_order():
    """A position ramp makes the raw difference a velocity step; the filtered velocity follows
    v0·(1 − exp(−2π·fc·t)) exactly at the samples (exact discretisation)."""
    fc, v0 = 50.0, 0.2
    pid = make(kd=1.0, fc=fc)
    for k in range(1, 40):
        pid.step(0.0, 0.0, v0 * k * DT, 0.0, DT)
        expected = v0 * (1.0 - math.exp(-2.0 * math.pi * fc * k * DT))
        assert pid.vel_filt_rad_s == pytest.approx(expected, rel=1e-9)
        assert pid.d_nm == pytest.approx(-expected, rel=1e-9)


def test_no_derivative_kick_on_reference_step():
    g = PIDGains.triple_pole(J=J, bandwidth_hz=20)
    pid = PID(g)
    pid.enable(0.0)
    out = pid.step(1e-3, 0.0, 0.0, 0.0, DT)  # reference jumps, measurement does not move
    assert pid.d_nm == 0.0 and pid.vel_filt_rad_s == 0.0
    assert out == pytest.approx(g.kp * 1e-3 + g.ki * 1e-3 * DT, rel=1e-12)
    # derivative on error would have kicked by kd·Δe/dt = 30 N·m in this tick
    assert g.kd * 1e-3 / DT > 5 * abs(out)


def test_inertia_feedforward():
    assert inertia_feedforward(0.08, 2.5) == pytest.approx(0.2)
    assert inertia_feedforward(0.08, -1.0) == pytest.approx(-0.08)


# --- limits and anti-windup ---------------------------------------------------------------------


def test_output_limit_and_saturated_flag():
    pid = make(kp=1000.0, lim=2.0)
    assert pid.step(0.01, 0.0, 0.0, 0.0, DT) == 2.0
    assert pid.saturated and pid.p_nm == pytest.approx(10.0)
    assert pid.step(-0.01, 0.0, 0.0, 0.0, DT) == -2.0
    assert pid.saturated
    assert pid.step(0.001, 0.0, 0.0, 0.0, DT) == pytest.approx(1.0)
    assert not pid.saturated


def test_conditional_integration_blocked_plant_recovers_immediately():
    """Blocked plant (position stays 0), a large error for 2 s, then the error reverses."""
    g = PIDGains(kp=100.0, ki=1000.0, kd=0.0, output_limit_nm=5.0)
    pid, naive = PID(g), NaivePID(g)
    pid.enable(0.0)
    for _ in range(2000):
        pid.step(0.02, 0.0, 0.0, 0.0, DT)
        naive.step(0.02, 0.0, 0.0, 0.0, DT)
    # the integrator stopped where the total reached the limit (p = 2 N·m, so i ≈ 3 N·m)
    assert 3.0 <= pid.i_nm <= 3.0 + 1000.0 * 0.02 * DT
    assert pid.saturated and pid.out_nm == 5.0
    assert naive.i == pytest.approx(1000.0 * 0.02 * 2.0)  # 40 N·m of windup
    ticks_pid = ticks_naive = None
    for k in range(1, 3001):
        if ticks_pid is None and not pid.step(-0.02, 0.0, 0.0, 0.0, DT) >= 5.0:
            ticks_pid = k
        if ticks_naive is None and naive.step(-0.02, 0.0, 0.0, 0.0, DT) < 5.0:
            ticks_naive = k
    assert ticks_pid == 1
    assert ticks_naive > 1000  # (40 − 5 − 2) N·m unwinding at 0.02 N·m per tick


def test_integrator_clamped_to_limit():
    """Even when integration is allowed every tick (kp = 0: total = i), i never exceeds ±lim."""
    pid = make(ki=1e4, lim=1.5)
    for _ in range(100):
        pid.step(1.0, 0.0, 0.0, 0.0, DT)
        assert abs(pid.i_nm) <= 1.5
    assert pid.i_nm == 1.5


def test_large_feedforward_freezes_integration():
    pid = make(kp=1.0, ki=100.0, lim=5.0)
    for _ in range(50):
        pid.step(0.01, 0.0, 0.0, 4.999, DT)  # p + ff = 5.009 > 5
    assert pid.i_nm == 0.0 and pid.saturated
    free = make(kp=1.0, ki=100.0, lim=5.0)
    for _ in range(50):
        free.step(0.01, 0.0, 0.0, 0.0, DT)
    assert free.i_nm == pytest.approx(100.0 * 0.01 * DT * 50)


def test_integration_allowed_when_error_drives_out_of_saturation():
    pid = make(kp=1.0, ki=100.0, lim=5.0)
    pid.step(0.01, 0.0, 0.0, -6.0, DT)  # total −5.99 < −5, error positive: integrate
    assert pid.saturated
    assert pid.i_nm == pytest.approx(100.0 * 0.01 * DT)
    pid.step(-0.01, 0.0, 0.0, -6.0, DT)  # error negative would wind further: frozen
    assert pid.i_nm == pytest.approx(100.0 * 0.01 * DT)


# --- lifecycle ----------------------------------------------------------------------------------


def test_not_enabled_returns_zero():
    pid = PID(PIDGains(kp=1.0, ki=1.0, kd=1.0))
    assert pid.step(1.0, 1.0, 0.0, 1.0, DT) == 0.0
    assert not pid.enabled and pid.i_nm == 0.0 and pid.out_nm == 0.0


def test_bumpless_enable():
    pid = PID(PIDGains.triple_pole(J=J, bandwidth_hz=20, output_limit_nm=5.0))
    pid.enable(0.5, u0_nm=1.2)
    assert pid.enabled and pid.out_nm == 1.2
    assert pid.step(0.5, 0.0, 0.5, 0.0, DT) == 1.2  # zero error, measurement at rest
    assert pid.p_nm == 0.0 and pid.d_nm == 0.0 and pid.i_nm == 1.2


def test_enable_clamps_u0_and_rejects_non_finite():
    pid = PID(PIDGains(kp=1.0, ki=1.0, kd=0.0, output_limit_nm=2.0))
    pid.enable(0.0, u0_nm=-9.0)
    assert pid.i_nm == -2.0
    with pytest.raises(ValueError, match="pos_rad"):
        pid.enable(math.nan)
    with pytest.raises(ValueError, match="u0_nm"):
        pid.enable(0.0, math.inf)


def test_disable_resets():
    pid = make(kp=10.0, ki=100.0, kd=1.0)
    for k in range(20):
        pid.step(0.01, 0.0, 0.001 * k, 0.1, DT)
    assert pid.i_nm != 0.0 and pid.out_nm != 0.0
    pid.disable()
    assert not pid.enabled
    assert (pid.i_nm, pid.out_nm, pid.p_nm, pid.d_nm, pid.ff_nm) == (0.0, 0.0, 0.0, 0.0, 0.0)
    assert pid.step(0.01, 0.0, 0.0, 0.1, DT) == 0.0
    pid.enable(0.02)  # starts over at the new measurement: no derivative from the old one
    pid.step(0.02, 0.0, 0.02, 0.0, DT)
    assert pid.out_nm == 0.0 and pid.vel_filt_rad_s == 0.0


def test_non_finite_inputs_do_not_poison_the_state():
    pid = make(kp=10.0, ki=100.0, kd=1.0, lim=5.0)
    for _ in range(10):
        pid.step(0.01, 0.0, 0.0, 0.0, DT)
    i_before, v_before = pid.i_nm, pid.vel_filt_rad_s
    bad = [
        (math.nan, 0.0, 0.0, 0.0, DT), (0.01, 0.0, math.inf, 0.0, DT), (0.01, math.nan, 0.0, 0.0, DT),
        (0.01, 0.0, 0.0, -math.inf, DT), (0.01, 0.0, 0.0, 0.0, math.nan), (0.01, 0.0, 0.0, 0.0, 0.0),
        (0.01, 0.0, 0.0, 0.0, -DT), (0.01, 0.0, 0.0, 0.0, math.inf),
    ]
    for args in bad:
        assert math.isnan(pid.step(*args)), args
        assert math.isnan(pid.out_nm) and not pid.saturated
        assert pid.i_nm == i_before, args
        assert pid.vel_filt_rad_s == v_before, args  # measurement was 0 throughout
    out = pid.step(0.01, 0.0, 0.0, 0.0, DT)
    assert math.isfinite(out)
    assert pid.i_nm == pytest.approx(i_before + 100.0 * 0.01 * DT)


def test_bad_feedforward_tick_still_tracks_the_measurement():
    """Only ff is bad: the derivative filter takes the (good) measurement, the integrator not."""
    pid = make(kd=1.0, ki=5.0, fc=50.0)
    assert math.isnan(pid.step(0.0, 0.0, 1e-3, math.nan, DT))
    alpha = 1.0 - math.exp(-2.0 * math.pi * 50.0 * DT)
    assert pid.vel_filt_rad_s == pytest.approx(alpha * 1.0, rel=1e-12)
    assert pid.i_nm == 0.0


@settings(max_examples=60, deadline=None)
@given(
    kp=st.floats(0, 1e4), ki=st.floats(0, 1e6), kd=st.floats(0, 100), lim=st.floats(0.1, 10),
    steps=st.lists(st.tuples(st.floats(-0.1, 0.1), st.floats(-1, 1), st.floats(-0.1, 0.1),
                             st.floats(-20, 20)), min_size=1, max_size=30),
)
def test_output_and_integrator_always_within_limit(kp, ki, kd, lim, steps):
    pid = make(kp=kp, ki=ki, kd=kd, lim=lim)
    for ref, vref, pos, ff in steps:
        out = pid.step(ref, vref, pos, ff, DT)
        assert -lim <= out <= lim and -lim <= pid.i_nm <= lim
        total = pid.p_nm + pid.i_nm + pid.d_nm + pid.ff_nm
        assert out == max(-lim, min(lim, total))
        assert pid.saturated == (abs(total) > lim)


# --- closed loop --------------------------------------------------------------------------------


def test_closed_loop_step_on_double_integrator():
    """Triple-pole tuning at 20 Hz: the zero of kp·s + ki at ω/3 gives about 20 % overshoot."""
    pid = PID(PIDGains.triple_pole(J=J, bandwidth_hz=20, derivative_cutoff_hz=250, output_limit_nm=5.0))
    pid.enable(0.0)
    ref = 1e-3
    xs = simulate(pid, ref, 1500, load_nm=0.3)
    assert max(xs) < 1.3 * ref
    assert abs(xs[-1] - ref) < 1e-9 * ref  # zero steady error despite the load
    assert pid.i_nm == pytest.approx(0.3, rel=1e-6)  # the integrator carries the load


def test_closed_loop_saturating_step_windup_versus_naive():
    g = PIDGains.triple_pole(J=J, bandwidth_hz=20, derivative_cutoff_hz=250, output_limit_nm=5.0)
    pid = PID(g)
    pid.enable(0.0)
    ref = 1e-2  # kp·ref = 38 N·m: deep in saturation
    xs = simulate(pid, ref, 3000)
    xs_naive = simulate(NaivePID(g), ref, 3000)
    assert max(xs) < 1.15 * ref
    assert max(xs_naive) > 1.5 * ref  # unconditional integration winds up and overshoots
    assert abs(xs[-1] - ref) < 1e-9 * ref


def test_gain_swap_mid_run_is_bumpless():
    g20 = PIDGains.triple_pole(J=J, bandwidth_hz=20, derivative_cutoff_hz=250, output_limit_nm=5.0)
    g10 = PIDGains.triple_pole(J=J, bandwidth_hz=10, derivative_cutoff_hz=250, output_limit_nm=5.0)
    pid = PID(g20)
    pid.enable(0.0)
    outs = []

    def swap(k):
        if k == 1000:
            pid.gains = g10
        outs.append(pid.out_nm)

    xs = simulate(pid, 1e-3, 2000, load_nm=0.3, on_tick=swap)
    i_swap = 1001  # outs[k] is the output of tick k−1
    assert abs(outs[i_swap] - outs[i_swap - 1]) < 1e-6  # ~0.3 N·m both sides, no jump
    assert pid.gains is g10
    # a ki·∫e integrator would have jumped by (ki10/ki20 − 1)·0.3 N·m
    assert abs((g10.ki / g20.ki - 1.0) * 0.3) > 0.2
    assert abs(xs[-1] - 1e-3) < 1e-9


def test_gain_swap_clamps_integrator_to_new_limit():
    pid = make(ki=1e4, lim=5.0)
    for _ in range(100):
        pid.step(1.0, 0.0, 0.0, 0.0, DT)
    assert pid.i_nm == 5.0
    pid.gains = PIDGains(kp=0.0, ki=1e4, kd=0.0, output_limit_nm=2.0)
    assert pid.i_nm == 2.0
