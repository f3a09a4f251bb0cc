"""Tests of controller.friction: LuGre exact update, static curves, parameter validation.

Reference numbers: BRIEF §2 (models) and §3 (numerics, stick-slip reference case).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.integrate import solve_ivp

from controller.friction import (
    DirectionalParams,
    LuGreParams,
    coulomb,
    g,
    lugre_euler_step,
    lugre_step,
    passivity_warning,
    stribeck,
)

# The reference turntable's set (configs/turntable.yaml), passive.
TURNTABLE = LuGreParams(Fc=0.20, Fs=0.28, vs=0.01, sigma0=3.0e4, sigma1=0.08, sigma2=0.04)
# The classic LuGre 1995 example: not passive (sigma1 large).
CLASSIC = LuGreParams(Fc=1.0, Fs=1.5, vs=0.001, sigma0=1e5, sigma1=math.sqrt(1e5), sigma2=0.4)
# A stiff precision stage (BRIEF §2: 2.5e7 measured).
STIFF = LuGreParams(Fc=0.20, Fs=0.28, vs=0.01, sigma0=2.5e7, sigma1=0.08, sigma2=0.04)
# Other Stribeck exponents.
DELTA_15 = LuGreParams(Fc=2.0, Fs=3.0, vs=0.05, sigma0=1e6, sigma1=10.0, sigma2=0.5, delta=1.5)
DELTA_1 = LuGreParams(Fc=0.5, Fs=0.6, vs=0.002, sigma0=5e3, sigma1=0.0, sigma2=0.0, delta=1.0)
# Direction-dependent set: reverse differs in every field.
DIRECTIONAL = DirectionalParams(
    forward=TURNTABLE,
    reverse=LuGreParams(Fc=0.25, Fs=0.40, vs=0.02, sigma0=5e4, sigma1=0.05, sigma2=0.06, delta=1.5),
)

SETS = [TURNTABLE, CLASSIC, STIFF, DELTA_15, DELTA_1]
SET_IDS = ["turntable", "classic1995", "stiff", "delta1.5", "delta1"]


def _active(params, v):
    return params.for_velocity(v) if isinstance(params, DirectionalParams) else params


def _velocities(vs: float) -> list[float]:
    """Many speeds of both signs: far below, around and far above the Stribeck velocity."""
    mags = [1e-9, 1e-6, 1e-4, 0.1 * vs, 0.5 * vs, 0.9 * vs, vs, 1.1 * vs, 1.5 * vs, 2 * vs,
            3 * vs, 10 * vs, 1.0, 100.0]
    return [s * m for m in mags for s in (1.0, -1.0)]


# --- 1. steady state = Stribeck curve ----------------------------------------------------------


@pytest.mark.parametrize("params", SETS + [DIRECTIONAL], ids=SET_IDS + ["directional"])
def test_steady_state_equals_stribeck_large_step(params):
    vs = _active(params, 1.0).vs
    for v in _velocities(vs):
        p = _active(params, v)
        a = p.sigma0 * abs(v) / g(p, v)
        dt = 60.0 / a  # a·dt = 60: exp(−60) is below double resolution relative to 1
        for z0 in (0.0, p.z_max, -p.z_max):
            z, f = lugre_step(params, z0, v, dt)
            expected = stribeck(params, v)
            assert f == pytest.approx(expected, rel=1e-9), (v, z0)
            assert z == pytest.approx(math.copysign(g(p, v), v) / p.sigma0, rel=1e-9), (v, z0)


@pytest.mark.parametrize("params", SETS + [DIRECTIONAL], ids=SET_IDS + ["directional"])
def test_steady_state_equals_stribeck_iterated(params):
    """Iterating small steps at constant v converges to the same fixed point."""
    vs = _active(params, 1.0).vs
    for v in _velocities(vs):
        p = _active(params, v)
        dt = 0.7 * g(p, v) / (p.sigma0 * abs(v))  # a·dt = 0.7 per step
        z = -math.copysign(p.z_max, v)  # start from the opposite extreme
        for _ in range(200):  # exp(−140): converged to the last bit
            z_prev = z
            z, f = lugre_step(params, z, v, dt)
        assert abs(z - z_prev) <= 4 * math.ulp(z)
        assert f == pytest.approx(stribeck(params, v), rel=1e-9), v


def test_zero_velocity_holds_state():
    for z0 in (0.0, 3e-6, -5e-6):
        z, f = lugre_step(TURNTABLE, z0, 0.0, 1e-3)
        assert z == z0
        assert f == TURNTABLE.sigma0 * z0
    assert stribeck(TURNTABLE, 0.0) == 0.0
    assert coulomb(TURNTABLE, 0.0) == 0.0


def test_directional_set_chosen_by_velocity_sign_and_at_rest_by_z():
    d = DIRECTIONAL
    assert d.for_velocity(1e-9) is d.forward
    assert d.for_velocity(-1e-9) is d.reverse
    assert d.for_velocity(0.0, 1e-7) is d.forward
    assert d.for_velocity(0.0, -1e-7) is d.reverse
    v = 0.03
    assert stribeck(d, v) == pytest.approx(stribeck(d.forward, v), rel=1e-15)
    assert stribeck(d, -v) == pytest.approx(stribeck(d.reverse, -v), rel=1e-15)
    arr = stribeck(d, np.array([-v, v]))
    assert arr[0] == pytest.approx(stribeck(d.reverse, -v)) and arr[1] == pytest.approx(stribeck(d.forward, v))
    assert d.z_max == max(d.forward.z_max, d.reverse.z_max)


def test_static_curves_vectorised_and_shaped():
    for p in SETS:
        vs = np.array(_velocities(p.vs))
        vec_s = stribeck(p, vs)
        vec_c = coulomb(p, vs)
        for i, v in enumerate(vs):
            expected = math.copysign(g(p, float(v)), v) + p.sigma2 * v
            assert stribeck(p, float(v)) == pytest.approx(expected, rel=1e-12)
            assert vec_s[i] == pytest.approx(expected, rel=1e-12)
            assert vec_c[i] == pytest.approx(math.copysign(p.Fc, v) + p.sigma2 * v, rel=1e-12)
        # the Stribeck drop: at rest-side speeds friction is near Fs, far above vs near Fc + σ2·v
        assert stribeck(p, 1e-9 * p.vs) == pytest.approx(p.Fs, rel=1e-6)
        assert stribeck(p, 50 * p.vs) == pytest.approx(p.Fc + p.sigma2 * 50 * p.vs, rel=1e-9)
        # odd symmetry
        assert np.allclose(stribeck(p, -vs), -vec_s, rtol=1e-15, atol=0)


def test_regularised_sign():
    p = TURNTABLE
    v_eps = 1e-3
    assert stribeck(p, 0.0, v_eps=v_eps) == 0.0
    assert coulomb(p, v_eps, v_eps=v_eps) == pytest.approx(p.Fc * math.tanh(1.0) + p.sigma2 * v_eps)
    # far beyond v_eps the regularised curve equals the discontinuous one
    assert stribeck(p, 1.0, v_eps=v_eps) == pytest.approx(stribeck(p, 1.0), rel=1e-12)


# --- 2. exact update vs a tight stiff ODE solution ---------------------------------------------

# (velocity [rad/s], hold time [s]): sign changes, near-zero, exact zero, around vs, fast.
PROFILE = [(0.02, 0.004), (-0.001, 0.005), (1e-6, 0.004), (0.0, 0.002), (0.01, 0.003),
           (-0.2, 0.002), (-1e-5, 0.003), (0.0003, 0.004)]
REF_DT = 1e-4


def _radau_reference(params, z0, profile, dt):
    """z at every step boundary of the held-velocity profile, by Radau (rtol 1e-10)."""
    zs = [z0]
    z = z0
    for v, hold in profile:
        n = round(hold / dt)
        if v == 0.0:
            zs.extend([z] * n)
            continue
        p = params.for_velocity(v, z) if isinstance(params, DirectionalParams) else params
        a = p.sigma0 * abs(v) / g(p, v)
        t_eval = np.arange(1, n + 1) * dt
        sol = solve_ivp(lambda t, y: [v - a * y[0]], (0.0, n * dt), [z], method="Radau",
                        t_eval=t_eval, rtol=1e-10, atol=1e-13 * p.z_max, jac=lambda t, y: [[-a]])
        assert sol.success
        zs.extend(sol.y[0].tolist())
        z = float(sol.y[0, -1])
    return np.array(zs)


def _lugre_run(params, z0, profile, dt, step=lugre_step):
    zs, fs, vs = [z0], [], []
    z = z0
    for v, hold in profile:
        for _ in range(round(hold / dt)):
            z, f = step(params, z, v, dt)
            zs.append(z)
            fs.append(f)
            vs.append(v)
    return np.array(zs), np.array(fs), vs


@pytest.mark.parametrize("params", [TURNTABLE, STIFF, DIRECTIONAL], ids=["turntable", "stiff", "directional"])
def test_exact_update_matches_radau(params):
    z0 = -0.3 * params.z_max
    ref_fine = _radau_reference(params, z0, PROFILE, REF_DT)
    for dt in (1e-4, 1e-3):
        every = round(dt / REF_DT)
        ref = ref_fine[::every]
        zs, fs, vs = _lugre_run(params, z0, PROFILE, dt)
        assert zs.shape == ref.shape
        assert np.max(np.abs(zs - ref)) <= 1e-8 * params.z_max, dt
        # the force is the end-of-step force of the reference state
        for k, v in enumerate(vs, start=1):
            p = params.for_velocity(v, ref[k - 1]) if isinstance(params, DirectionalParams) else params
            a = p.sigma0 * abs(v) / g(p, v) if v != 0.0 else 0.0
            f_ref = p.sigma0 * ref[k] + p.sigma1 * (v - a * ref[k]) + p.sigma2 * v
            scale = max(p.Fs, abs(p.sigma1 * v), abs(p.sigma2 * v))
            assert abs(fs[k - 1] - f_ref) <= 1e-7 * scale, (dt, k, v)


def test_tiny_decay_has_no_cancellation():
    """a·dt → 0: z⁺ = z + v·dt·(1 − a·dt/2 + …), accurate to the last digits (expm1 form)."""
    p = LuGreParams(Fc=1.0, Fs=1.0, vs=1.0, sigma0=100.0, sigma1=0.0, sigma2=0.0)
    v, dt = 1e-6, 1e-6  # a·dt = 1e-10
    x = p.sigma0 * v / p.Fc * dt
    z, _ = lugre_step(p, 0.0, v, dt)
    assert z == pytest.approx(v * dt * (1.0 - x / 2.0 + x * x / 6.0), rel=1e-14)
    z, _ = lugre_step(p, 2e-3, v, dt)
    assert z == pytest.approx(2e-3 * math.exp(-x) + v * dt * (1.0 - x / 2.0), rel=1e-14)
    # a·dt underflowing to 0 degenerates to pure integration
    z, f = lugre_step(p, 1e-5, 1e-300, 1e-20)
    assert z == 1e-5 + 1e-320 and math.isfinite(f)


# --- 3. pre-sliding slope = sigma0 ---------------------------------------------------------------


@pytest.mark.parametrize("params", [TURNTABLE, CLASSIC, STIFF, DELTA_1], ids=["turntable", "classic", "stiff", "delta1"])
def test_presliding_slope_is_sigma0(params):
    # displacement up to 1e-3·Fc/sigma0 at a speed where sigma1·v is negligible against Fc
    v = 1e-4 * params.Fc / max(params.sigma1, 1.0)
    d = 1e-3 * params.Fc / params.sigma0
    n = 200
    dt = d / v / n
    z, x = 0.0, 0.0
    xs, fs = [], []
    for _ in range(n):
        z, f = lugre_step(params, z, v, dt)
        x += v * dt
        xs.append(x)
        fs.append(f)
    slope = np.polyfit(xs, fs, 1)[0]
    assert slope == pytest.approx(params.sigma0, rel=0.01)
    # and the bristle carries the whole displacement: z ≈ x
    assert z == pytest.approx(x, rel=0.01)
    # stopped there, the friction is the bristle spring alone
    _, f_rest = lugre_step(params, z, 0.0, dt)
    assert f_rest / x == pytest.approx(params.sigma0, rel=0.01)


# --- 4. pre-sliding hysteresis loop -------------------------------------------------------------


def _loop(params, amplitude, freq_hz, cycles=4, n_per_cycle=1000):
    """Prescribed x = A·sin(2πft); held v per step makes x exact at the nodes."""
    w = 2 * math.pi * freq_hz
    dt = 1.0 / freq_hz / n_per_cycle
    t = np.arange(cycles * n_per_cycle + 1) * dt
    x = amplitude * np.sin(w * t)
    z = 0.0
    f = np.empty(len(t) - 1)
    for k in range(len(t) - 1):
        v = (x[k + 1] - x[k]) / dt
        z, f[k] = lugre_step(params, z, v, dt)
    return x[1:], f, n_per_cycle


def _cycle_work(x, f, n, c):
    """∮F dx over cycle c (the energy lost to friction in that cycle) and the shoelace area."""
    xs = x[c * n:(c + 1) * n]
    fs = f[c * n:(c + 1) * n]
    work = float(np.sum(fs * np.diff(np.r_[xs[-1], xs])))
    shoelace = 0.5 * float(np.sum(xs * np.roll(fs, -1) - np.roll(xs, -1) * fs))
    return work, shoelace


@pytest.mark.parametrize("params", [TURNTABLE, CLASSIC, STIFF], ids=["turntable", "classic", "stiff"])
def test_presliding_hysteresis_loop_has_positive_area(params):
    amp = 0.5 * params.Fc / params.sigma0
    x, f, n = _loop(params, amp, 1.0)
    w2, area2 = _cycle_work(x, f, n, 1)  # first cycle discarded (virgin curve from z = 0)
    w3, _ = _cycle_work(x, f, n, 2)
    fmax = float(np.max(np.abs(f[n:])))
    assert w2 > 1e-3 * fmax * 2 * amp  # clearly positive, not rounding noise
    # later cycles repeat it (the loop settles geometrically after the virgin first cycle)
    w4, _ = _cycle_work(x, f, n, 3)
    assert w3 == pytest.approx(w2, rel=0.02)
    assert abs(w4 - w3) < 0.5 * abs(w3 - w2)
    # friction opposes motion: the loop runs clockwise in (x, F), its signed area is −work
    assert -area2 > 0
    assert -area2 == pytest.approx(w2, rel=0.05)


def test_bristle_hysteresis_is_rate_independent():
    """With sigma1 = sigma2 = 0 the loop is pure bristle hysteresis: positive area, nearly the
    same at 0.1 Hz and 1 Hz (vs large so that g ≈ Fs over the loop)."""
    p = LuGreParams(Fc=0.2, Fs=0.28, vs=10.0, sigma0=3e4, sigma1=0.0, sigma2=0.0)
    amp = 0.5 * p.Fc / p.sigma0
    fast = _cycle_work(*_loop(p, amp, 1.0), 1)[0]
    slow = _cycle_work(*_loop(p, amp, 0.1), 1)[0]
    assert fast > 0 and slow > 0
    assert fast == pytest.approx(slow, rel=0.01)


# --- 5. boundedness (property), validation, passivity --------------------------------------------


def _log_uniform(lo_exp, hi_exp):
    return st.floats(lo_exp, hi_exp).map(lambda e: 10.0 ** e)


@st.composite
def lugre_params(draw):
    fc = draw(_log_uniform(-3, 3))
    fs = fc * draw(st.floats(1.0, 3.0))
    vs = draw(_log_uniform(-6, 0))
    sigma0 = draw(st.one_of(st.just(2.5e7), _log_uniform(2, math.log10(2.5e7))))
    sigma1 = draw(st.one_of(st.just(0.0), _log_uniform(-4, 3)))
    sigma2 = draw(st.one_of(st.just(0.0), _log_uniform(-4, 1)))
    delta = draw(st.one_of(st.just(2.0), st.floats(0.5, 2.5)))
    return LuGreParams(Fc=fc, Fs=fs, vs=vs, sigma0=sigma0, sigma1=sigma1, sigma2=sigma2, delta=delta)


def _signed(mag):
    return st.tuples(mag, st.booleans()).map(lambda t: -t[0] if t[1] else t[0])


velocities = st.one_of(
    st.just(0.0),
    _signed(_log_uniform(-300, -6)),  # tiny
    st.floats(-10.0, 10.0),  # ordinary
    _signed(_log_uniform(3, 12)),  # huge
    st.sampled_from([5e-324, -5e-324, 1e-308]),  # subnormal and smallest normal
)
steps = _log_uniform(-9, 1).filter(lambda d: 1e-9 < d < 10.0)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(params=lugre_params(), frac=st.floats(-1.0, 1.0),
       moves=st.lists(st.tuples(velocities, steps), min_size=1, max_size=12))
def test_z_stays_bounded_and_finite(params, frac, moves):
    zmax = params.z_max
    tol = zmax * 1e-12
    z = frac * zmax
    for v, dt in moves:
        z, f = lugre_step(params, z, v, dt)
        assert math.isfinite(z) and math.isfinite(f), (v, dt, z, f)
        assert abs(z) <= zmax + tol, (v, dt, z / zmax)


@settings(max_examples=50, deadline=None)
@given(forward=lugre_params(), reverse=lugre_params(), frac=st.floats(-1.0, 1.0),
       moves=st.lists(st.tuples(velocities, steps), min_size=1, max_size=8))
def test_directional_z_stays_bounded_and_finite(forward, reverse, frac, moves):
    params = DirectionalParams(forward, reverse)
    zmax = params.z_max
    z = frac * zmax
    for v, dt in moves:
        z, f = lugre_step(params, z, v, dt)
        assert math.isfinite(z) and math.isfinite(f)
        assert abs(z) <= zmax * (1 + 1e-12)


@settings(max_examples=80, deadline=None)
@given(params=lugre_params())
def test_passivity_margin_formula(params):
    expected = params.sigma2 - params.sigma1 * (params.Fs - params.Fc) / params.Fc
    assert params.passivity_margin == pytest.approx(expected, rel=1e-12, abs=1e-300)
    assert (passivity_warning(params) is None) == (params.passivity_margin >= 0)


VALID = dict(Fc=1.0, Fs=1.5, vs=0.001, sigma0=1e5, sigma1=10.0, sigma2=0.4, delta=2.0)
INVALID = [
    ("Fc", 0.0), ("Fc", -1.0), ("Fs", 0.5), ("vs", 0.0), ("vs", -0.01), ("sigma0", 0.0),
    ("sigma0", -1e5), ("sigma1", -0.1), ("sigma2", -0.4), ("delta", 0.0), ("delta", -2.0),
    ("Fc", float("nan")), ("sigma0", float("inf")), ("Fs", float("-inf")), ("vs", "0.01"),
    ("sigma1", None), ("delta", True),
]


@pytest.mark.parametrize("name, value", INVALID, ids=[f"{n}={v!r}" for n, v in INVALID])
def test_invalid_parameter_raises_with_field_name_and_value(name, value):
    with pytest.raises(ValueError) as info:
        LuGreParams(**{**VALID, name: value})
    message = str(info.value)
    assert message.startswith(f"{name}: "), message
    assert repr(value) in message or str(value) in message, message


def test_valid_parameters_are_floats_and_ints_accepted():
    p = LuGreParams(Fc=1, Fs=1, vs=1, sigma0=100000, sigma1=0, sigma2=0, delta=2)
    assert all(type(v) is float for v in p.as_dict().values())
    assert p.Fs == p.Fc  # Fs == Fc is allowed (no Stribeck drop)


def test_scaled_copy():
    p = TURNTABLE.scaled(Fc=2.0)
    assert p.Fc == pytest.approx(0.4) and p.Fs == pytest.approx(0.4)  # Fs lifted to keep Fs >= Fc
    q = TURNTABLE.scaled(Fc=1.5, Fs=1.5)
    assert q.Fs == pytest.approx(0.42) and q.sigma0 == TURNTABLE.sigma0
    with pytest.raises(ValueError, match=r"^Fcc: "):
        TURNTABLE.scaled(Fcc=2.0)


def test_passivity_warning_classic_and_passive_sets():
    assert TURNTABLE.passivity_margin == pytest.approx(0.04 - 0.08 * 0.08 / 0.20)
    assert TURNTABLE.passivity_margin == pytest.approx(0.008)
    assert passivity_warning(TURNTABLE) is None
    passive = LuGreParams(Fc=1.0, Fs=1.0, vs=0.001, sigma0=1e5, sigma1=316.0, sigma2=0.0)
    assert passive.passivity_margin == 0.0 and passivity_warning(passive) is None

    margin = 0.4 - math.sqrt(1e5) * 0.5 / 1.0
    assert CLASSIC.passivity_margin == pytest.approx(margin)
    warning = passivity_warning(CLASSIC)
    assert isinstance(warning, str) and "\n" not in warning
    assert f"{margin:.4g}" in warning and "passivity" in warning

    both_passive = DirectionalParams(TURNTABLE, TURNTABLE.scaled(sigma2=2.0))
    assert passivity_warning(both_passive) is None
    rev_bad = DirectionalParams(TURNTABLE, CLASSIC)
    assert rev_bad.passivity_margin == pytest.approx(margin)
    assert passivity_warning(rev_bad).startswith("reverse ")
    assert passivity_warning(DirectionalParams(CLASSIC, TURNTABLE)).startswith("forward ")


# --- 6. why the exact update exists ---------------------------------------------------------


def test_naive_euler_diverges_on_stiff_set_exact_update_stays_bounded():
    p = STIFF
    dt = 1e-3
    v = 0.01
    a_dt = p.sigma0 * v / g(p, v) * dt
    assert a_dt > 2  # beyond explicit Euler's stability limit
    z_e = z_x = 0.0
    diverged_at = None
    for k in range(400):
        vk = v if (k // 50) % 2 == 0 else -v  # reversals every 50 steps
        z_x, f_x = lugre_step(p, z_x, vk, dt)
        assert abs(z_x) <= p.z_max * (1 + 1e-12) and abs(f_x) < 10 * p.Fs
        if diverged_at is None:
            z_e, _ = lugre_euler_step(p, z_e, vk, dt)
            if not math.isfinite(z_e) or abs(z_e) > 1e6 * p.z_max:
                diverged_at = k
    assert diverged_at is not None and diverged_at < 10
    # the exact update sits on the steady state after one step at a·dt ≫ 1
    assert z_x == pytest.approx(-g(p, v) / p.sigma0, rel=1e-12)


def test_naive_euler_oscillates_between_1_and_2_and_is_monotone_below_1():
    p = TURNTABLE
    v = 0.02
    a = p.sigma0 * v / g(p, v)
    z_ss = g(p, v) / p.sigma0

    def errors(step, a_dt, n=12):
        z, out = -z_ss, []
        for _ in range(n):
            z, _ = step(p, z, v, a_dt / a)
            out.append(z - z_ss)
        return np.array(out)

    osc = errors(lugre_euler_step, 1.5)
    assert np.all(np.sign(osc[:-1]) != np.sign(osc[1:]))  # alternates around z_ss
    assert abs(osc[-1]) < abs(osc[0])  # but still converges
    mono = errors(lugre_euler_step, 0.5)
    assert np.all(mono < 0)
    for a_dt in (0.5, 1.5, 2.5, 1e3):
        exact = errors(lugre_step, a_dt)
        assert np.all(exact <= 1e-12 * z_ss)  # approaches from below, never overshoots
        assert np.all(np.diff(exact) >= 0)
        assert exact[0] == pytest.approx(-2 * z_ss * math.exp(-a_dt), rel=1e-9, abs=1e-15 * z_ss)


# --- 7. stick-slip: the mass-spring reference case (BRIEF §3) -------------------------------------


def _drag(Fs, drive_speed=0.02, duration=10.0, h=2e-4):
    """Mass on a spring whose end moves at drive_speed; LuGre friction, symplectic Euler."""
    p = LuGreParams(Fc=3.0, Fs=Fs, vs=0.005, sigma0=1e5, sigma1=100.0, sigma2=0.2)
    m, k = 1.0, 100.0
    n = round(duration / h)
    x = v = z = 0.0
    vel = np.empty(n)
    spring = np.empty(n)
    for i in range(n):
        s = k * (drive_speed * i * h - x)
        z, f = lugre_step(p, z, v, h)
        v += h * (s - f) / m
        x += h * v
        vel[i] = v
        spring[i] = s
    return vel, spring, h


def _breakaways(vel, drive_speed):
    """Indices where the velocity rises through the drive speed coming out of a stick phase."""
    stuck = np.abs(vel) < 0.02 * drive_speed
    out, was_stuck = [], False
    for i, (vi, st_i) in enumerate(zip(vel, stuck)):
        if st_i:
            was_stuck = True
        elif was_stuck and vi > drive_speed:
            out.append(i)
            was_stuck = False
    return out


def _stick_durations(vel, drive_speed, h):
    stuck = np.abs(vel) < 0.02 * drive_speed
    edges = np.flatnonzero(np.diff(np.r_[0, stuck.astype(np.int8), 0]))
    return (edges[1::2] - edges[0::2]) * h


def test_stick_slip_sawtooth_reference_case():
    vd = 0.02
    vel, spring, h = _drag(Fs=4.0, drive_speed=vd)
    first = int(np.argmax(vel > vd))
    assert first > 0
    # sticks first, then breaks away when the spring force reaches Fs = 4 N
    assert spring[first] == pytest.approx(4.0, rel=0.03)
    assert np.max(np.abs(vel[: first // 2])) < 0.01 * vd
    # sawtooth: repeated stick phases and breakaways, each breakaway again near Fs
    breaks = _breakaways(vel, vd)
    assert len(breaks) >= 5
    for i in breaks:
        assert spring[i] == pytest.approx(4.0, rel=0.03)
    sticks = _stick_durations(vel, vd, h)
    long_sticks = sticks[sticks > 0.2]
    assert len(long_sticks) >= 5
    # a limit cycle: after the first one the stick phases are alike, and each slip drops the
    # spring force well below Fc (overshoot), by roughly 2·(Fs − Fc)
    assert np.ptp(long_sticks[1:-1]) < 0.05 * np.mean(long_sticks[1:-1])
    late = spring[breaks[1]:]
    assert np.min(late) < 3.0 - 0.5


def test_no_stribeck_drop_gives_smooth_sliding():
    vd = 0.02
    vel, spring, h = _drag(Fs=3.0, drive_speed=vd, duration=20.0)
    first = int(np.argmax(vel > vd))
    assert spring[first] == pytest.approx(3.0, rel=0.08)  # breakaway near Fc (= Fs here)
    after = vel[first:]
    # no further stick phases: the velocity never dwells near zero after the breakaway
    sticks = _stick_durations(after, vd, h)
    assert len(sticks) == 0 or sticks.max() < 0.05
    assert len(_breakaways(vel, vd)) == 1
    # the transient oscillation decays toward the drive speed (σ2 damping)
    n = len(vel)
    early = vel[first:first + n // 5]
    last = vel[-n // 5:]
    assert np.ptp(last) < 0.6 * np.ptp(early)
    assert np.all(np.abs(last - vd) < 0.5 * vd)
    assert np.mean(last) == pytest.approx(vd, rel=0.05)
