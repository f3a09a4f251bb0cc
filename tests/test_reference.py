"""References: continuity, limits, landing, reversals, for every kind, and random profile limits."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.config import ReferenceConfig
from controller.reference import HoldReference, make_reference, rest_to_rest

RPC = 2.0 * math.pi / 2**24  # [rad/count], the shipped 24-bit encoder
EPS = 2.2e-16
INF = math.inf


def ref_of(duration_s: float = 10.0, **kw):
    return make_reference(ReferenceConfig(**kw), RPC, duration_s)


def move_time(segments) -> float:
    return sum(T for T, _, _ in segments)


def check_motion(ref, t0, t1, n, vmax, amax, jmax=INF, lo=-INF, hi=INF, monotone=0):
    """Dense uniform samples over [t0, t1]: |v|, |a| within their limits, position/velocity
    (/acceleration) Lipschitz with the limit as constant, and the trapezoid rule linking x to v
    (and v to a when jerk-limited) within its error bound. ``monotone`` = ±1 requires x to move
    only that way."""
    ts = [t0 + (t1 - t0) * k / n for k in range(n + 1)]
    s = [ref.sample(t) for t in ts]
    scale = max(abs(x) for x, _, _ in s) + 1e-300
    ex = 64 * EPS * (scale + abs(t1) * vmax)  # rounding in x, and in t times the speed
    ev = 1e-9 * vmax + 64 * EPS * abs(t1) * amax
    ea = 1e-9 * amax + (64 * EPS * abs(t1) * jmax if jmax < INF else 0.0)
    for (ta, (xa, va, aa)), (tb, (xb, vb, ab)) in zip(zip(ts, s), zip(ts[1:], s[1:])):
        h = tb - ta
        assert lo - ex <= xb <= hi + ex, (tb, xb, lo, hi)
        assert abs(vb) <= vmax * (1 + 1e-9), (tb, vb, vmax)
        assert abs(ab) <= amax * (1 + 1e-9), (tb, ab, amax)
        assert abs(xb - xa) <= vmax * h + ex, (tb, xb - xa)
        assert abs(vb - va) <= amax * h + ev, (tb, vb - va)
        assert abs(xb - xa - 0.5 * h * (va + vb)) <= 0.25 * amax * h * h + ex, tb
        if jmax < INF:
            assert abs(ab - aa) <= jmax * h + ea, (tb, ab - aa)
            assert abs(vb - va - 0.5 * h * (aa + ab)) <= 0.25 * jmax * h * h + ev, tb
        if monotone:
            assert monotone * (xb - xa) >= -ex, (tb, xb - xa)


def check_pieces(ref, t_start, segments, vmax, amax):
    """Inside each constant-jerk piece: central differences of x match v (error j·δ²/6), of v
    match a, of a match the jerk (both exact up to rounding); the piece's jerk is the table's."""
    t = t_start
    for T, a0, j in segments:
        if T < 1e4 * EPS * abs(t + T):  # a piece at the rounding level of t cannot be probed
            t += T
            continue
        m, d = t + 0.5 * T, 0.25 * T
        (_, vm, am), (xp, vp, ap), (xn, vn, an) = ref.sample(m), ref.sample(m + d), ref.sample(m - d)
        round_t = 8 * EPS * abs(m) / d  # relative error of the time differences
        tol_v = abs(j) * d * d / 6 * (1 + 1e-6) + round_t * vmax + 8 * EPS * max(abs(xp), abs(xn)) / d
        assert (xp - xn) / (2 * d) == pytest.approx(vm, abs=tol_v + 1e-300), (m, T, a0, j)
        tol_a = round_t * amax + 8 * EPS * vmax / d + 1e-9 * amax
        assert (vp - vn) / (2 * d) == pytest.approx(am, abs=tol_a), (m, T, a0, j)
        assert am == pytest.approx(a0 + j * 0.5 * T, abs=1e-9 * amax + abs(j) * round_t * T)
        if abs(j) * 2 * d > 1e-6 * amax:  # jerk resolvable against rounding of a
            assert (ap - an) / (2 * d) == pytest.approx(j, rel=1e-6 + round_t)
        t += T


# --- hold, constant velocity, sine -------------------------------------------------------------


def test_hold():
    ref = ref_of(kind="hold")
    assert isinstance(ref, HoldReference)
    assert [ref.sample(t) for t in (0.0, 1.0, 1e6)] == [(0.0, 0.0, 0.0)] * 3
    assert ref.reversals(100.0) == [] and ref.constant_speed_window is None


@pytest.mark.parametrize("kw", [
    dict(kind="constant_velocity", velocity_rad_s=0.01),
    dict(kind="sine", amplitude_rad=0.01, frequency_hz=1.0),
    dict(kind="steps", step_rad=0.001, dwell_s=0.1),
    dict(kind="steps", step_rad=0.001, dwell_s=0.0, max_jerk_rad_s3=100.0),
    dict(kind="scan", distance_rad=0.02, velocity_rad_s=0.01),
])
def test_every_kind_rests_at_zero_before_start(kw):
    ref = ref_of(start_s=0.5, **kw)
    for t in (-1.0, 0.0, 0.3, 0.4999999):
        assert ref.sample(t) == (0.0, 0.0, 0.0)
    x, v, _ = ref.sample(0.5 + 1e-3)
    assert v != 0.0 and x != 0.0


def test_constant_velocity_ramps_at_max_accel_then_cruises():
    ref = ref_of(kind="constant_velocity", velocity_rad_s=0.01, max_accel_rad_s2=1.0, start_s=0.2)
    t_ramp = 0.01
    assert ref.sample(0.205) == pytest.approx((0.5 * 1.0 * 0.005**2, 0.005, 1.0), rel=1e-9)
    for t in (0.3, 1.0, 9.0):
        x, v, a = ref.sample(t)
        assert v == pytest.approx(0.01, rel=1e-12) and a == 0.0
        assert x == pytest.approx(0.01 * (t - 0.2 - 0.5 * t_ramp), rel=1e-12)
    assert ref.constant_speed_window == pytest.approx((0.2 + t_ramp, 10.0))
    assert ref.reversals(10.0) == []
    check_motion(ref, 0.0, 0.5, 2000, vmax=0.01, amax=1.0, monotone=1)


def test_constant_velocity_negative_and_velocity_step_variant():
    ref = ref_of(kind="constant_velocity", velocity_rad_s=-0.02, max_accel_rad_s2=0.5)
    check_motion(ref, 0.0, 0.2, 2000, vmax=0.02, amax=0.5, monotone=-1)
    assert ref.sample(1.0)[1] == pytest.approx(-0.02)
    step = ref_of(kind="constant_velocity", velocity_rad_s=0.01, max_accel_rad_s2=INF, start_s=1.0)
    assert step.sample(2.0) == (0.01, 0.01, 0.0)  # accepted velocity jump at start_s
    assert step.constant_speed_window == (1.0, 10.0)


def test_sine_peak_velocity_reversals_and_derivatives():
    A, f, start = 0.0159155, 0.5, 0.2  # the shipped "reversal" scenario: 0.05 rad/s peak
    w = 2 * math.pi * f
    ref = ref_of(kind="sine", amplitude_rad=A, frequency_hz=f, start_s=start)
    assert ref.sample(start + 0.25 / f)[1] == pytest.approx(A * w, rel=1e-12)
    assert ref.sample(start + 0.5 / f) == pytest.approx((2 * A, 0.0, -A * w * w), abs=1e-15)
    vs = [ref.sample(start + k * 1e-3)[1] for k in range(4001)]
    assert max(vs) == pytest.approx(A * w, rel=1e-6) and min(vs) == pytest.approx(-A * w, rel=1e-6)
    assert ref.constant_speed_window is None and ref.period_s == 2.0
    revs = ref.reversals(3.0)
    assert revs == pytest.approx([start + 1.0, start + 2.0])
    for i, tr in enumerate(revs):
        before, after = ref.sample(tr - 1e-3)[1], ref.sample(tr + 1e-3)[1]
        assert before * after < 0 and (before > 0) == (i % 2 == 0)
    assert ref.reversals(start + 1.0 - 1e-9) == []
    # the sine is smooth after the start: the dense checks with its own bounds
    check_motion(ref, start, start + 4.0, 4000, vmax=A * w, amax=A * w * w, jmax=A * w**3, lo=0.0, hi=2 * A)
    # x = A·(1 − cos) has no cancellation error close to the start
    assert ref.sample(start + 1e-6)[0] == pytest.approx(A * (w * 1e-6) ** 2 / 2, rel=1e-9)
    assert ref_of(kind="sine", amplitude_rad=0.0, frequency_hz=1.0).reversals(10.0) == []


# --- steps --------------------------------------------------------------------------------------


def test_shipped_step_scenario_lands_on_encoder_counts():
    """10 counts per step, triangular profile (too short to reach 0.001 rad/s)."""
    cfg = dict(kind="steps", step_counts=10, dwell_s=0.3, max_velocity_rad_s=0.001,
               max_accel_rad_s2=0.1, start_s=0.2)
    ref = ref_of(duration_s=4.0, **cfg)
    d = 10 * RPC
    t_move = 2 * math.sqrt(d / 0.1)
    assert ref.period_s == pytest.approx(0.3 + t_move, rel=1e-12)
    assert ref.sample(0.2 + t_move / 2)[1] == pytest.approx(math.sqrt(d * 0.1), rel=1e-9)
    assert ref.constant_speed_window is None  # triangular: no cruise
    assert ref.reversals(4.0) == []
    P = ref.period_s
    for k in range(1, 12):
        for frac in (0.01, 0.5, 0.99):
            x, v, a = ref.sample(0.2 + (k - 1) * P + t_move + frac * 0.3)
            assert x == k * d and v == 0.0 and a == 0.0
            assert round(x / RPC) == 10 * k
        check_motion(ref, 0.2 + k * P - 1e-3, 0.2 + k * P + t_move + 1e-3, 400, vmax=0.001,
                     amax=0.1, lo=k * d, hi=(k + 1) * d, monotone=1)


def test_steps_trapezoid_with_cruise():
    ref = ref_of(kind="steps", step_rad=0.01, dwell_s=0.1, max_velocity_rad_s=0.05,
                 max_accel_rad_s2=1.0, start_s=0.2)
    t_acc, t_move = 0.05, 0.01 / 0.05 + 0.05  # d/v + v/a
    assert ref.period_s == pytest.approx(0.1 + t_move)
    assert ref.constant_speed_window == pytest.approx((0.2 + t_acc, 0.2 + t_move - t_acc))
    assert ref.sample(0.2 + t_acc / 2)[2] == 1.0
    assert ref.sample(0.2 + t_move / 2)[1:] == pytest.approx((0.05, 0.0))
    assert ref.sample(0.2 + t_move - t_acc / 2)[2] == -1.0
    check_motion(ref, 0.0, 0.2 + 3 * ref.period_s, 3000, vmax=0.05, amax=1.0, monotone=1)
    check_pieces(ref, 0.2, rest_to_rest(0.01, 0.05, 1.0), 0.05, 1.0)


@pytest.mark.parametrize("d, case", [(0.01, "full"), (2e-3, "no cruise"), (1e-4, "no const accel")])
def test_steps_s_curve_respects_jerk_accel_velocity(d, case):
    v, a, j = 0.05, 1.0, 50.0
    segs = rest_to_rest(d, v, a, j)
    assert len(segs) == {"full": 7, "no cruise": 6, "no const accel": 4}[case]
    ref = ref_of(kind="steps", step_rad=d, dwell_s=0.05, max_velocity_rad_s=v, max_accel_rad_s2=a,
                 max_jerk_rad_s3=j)
    t_move = move_time(segs)
    check_motion(ref, -0.01, 2 * ref.period_s, 4000, vmax=v, amax=a, jmax=j, monotone=1)
    check_pieces(ref, 0.0, segs, v, a)
    peak_v = ref.sample(t_move / 2)[1]
    peak_a = max(abs(ref.sample(t_move * k / 1000)[2]) for k in range(1001))
    if case == "full":
        assert t_move == pytest.approx(d / v + v / a + a / j)
        assert peak_v == pytest.approx(v) and peak_a == pytest.approx(a)
    elif case == "no cruise":  # vp²/a + vp·a/j = d
        assert peak_v**2 / a + peak_v * a / j == pytest.approx(d) and peak_a == pytest.approx(a)
    else:  # neither limit reached: vp = (d·sqrt(j)/2)^(2/3), ap = sqrt(vp·j)
        vp = (d * math.sqrt(j) / 2) ** (2 / 3)
        assert peak_v == pytest.approx(vp) and peak_a == pytest.approx(math.sqrt(vp * j), rel=1e-3)
        assert t_move == pytest.approx(4 * math.sqrt(vp / j))
    assert ref.sample(t_move + 0.025) == (d, 0.0, 0.0)


def test_steps_negative_and_far_in_time():
    ref = ref_of(kind="steps", step_rad=-0.002, dwell_s=0.2, max_velocity_rad_s=0.01,
                 max_accel_rad_s2=0.5, max_jerk_rad_s3=20.0, start_s=1.0)
    P = ref.period_s
    t_move = P - 0.2
    k = 300_000  # ~ a day in
    assert ref.sample(1.0 + (k - 1) * P + t_move + 0.1) == (-0.002 * k, 0.0, 0.0)
    t0 = 1.0 + k * P
    check_motion(ref, t0 - 0.01, t0 + t_move + 0.01, 1000, vmax=0.01, amax=0.5, jmax=20.0,
                 lo=-0.002 * (k + 1), hi=-0.002 * k, monotone=-1)


def test_steps_of_size_zero_rejected():
    with pytest.raises(ValueError, match="step"):
        ref_of(kind="steps", step_rad=0.0, step_counts=0)


def test_step_rad_takes_precedence_over_counts():
    ref = ref_of(kind="steps", step_rad=1e-3, step_counts=10, dwell_s=0.1, max_velocity_rad_s=0.1)
    t_move = ref.period_s - 0.1
    assert ref.sample(t_move + 0.05)[0] == 1e-3


def test_sample_is_pure():
    ref = ref_of(kind="scan", distance_rad=0.02, velocity_rad_s=0.01, max_accel_rad_s2=0.1, dwell_s=0.2)
    ts = [3.3, 0.1, 7.7, 3.3, 1e4, 0.1]
    first = [ref.sample(t) for t in ts]
    assert [ref.sample(t) for t in reversed(ts)] == list(reversed(first))
    assert first[0] == first[3] and first[1] == first[5]


@settings(max_examples=60, deadline=None)
@given(
    exp_d=st.floats(-7, 0), negative=st.booleans(), exp_v=st.floats(-4, 0), exp_a=st.floats(-3, 1),
    exp_j=st.one_of(st.just(None), st.floats(-1, 4)), dwell=st.one_of(st.just(0.0), st.floats(1e-3, 1.0)),
)
def test_steps_random_limits(exp_d, negative, exp_v, exp_a, exp_j, dwell):
    d = -(10**exp_d) if negative else 10**exp_d
    v, a = 10**exp_v, 10**exp_a
    j = INF if exp_j is None else 10**exp_j
    start = 0.3
    ref = ref_of(kind="steps", step_rad=d, dwell_s=dwell, max_velocity_rad_s=v,
                 max_accel_rad_s2=a, max_jerk_rad_s3=j, start_s=start, duration_s=1e9)
    segs = rest_to_rest(d, v, a, j)
    t_move = move_time(segs)
    P = ref.period_s
    assert P == pytest.approx(dwell + t_move, rel=1e-12)
    sign = -1 if negative else 1
    for k in range(3):
        t0 = start + k * P
        check_motion(ref, t0, t0 + t_move, 300, vmax=v, amax=a, jmax=j,
                     lo=min(k * d, (k + 1) * d), hi=max(k * d, (k + 1) * d), monotone=sign)
        check_pieces(ref, t0, segs, v, a)
        if dwell > 0:
            assert ref.sample(t0 + t_move + 0.5 * dwell) == ((k + 1) * d, 0.0, 0.0)
        else:  # back to back: the velocity still passes through 0 between moves
            x, vel, _ = ref.sample(t0 + t_move)  # t rounded to ~eps·t: vel to ~eps·t·a
            assert x == pytest.approx((k + 1) * d, rel=1e-9)
            assert abs(vel) <= 1e-9 * v + 64 * EPS * (t0 + t_move) * a
    # the move boundaries themselves: continuous across the switch, limits hold
    for t_b in (start, start + t_move, start + P):
        h = 1e-6 * t_move
        check_motion(ref, t_b - h, t_b + h, 4, vmax=v, amax=a, jmax=j)
    assert ref.reversals(start + 3 * P) == []


# --- scan ---------------------------------------------------------------------------------------


def test_shipped_scan_scenario():
    D, v, a, dwell, start = 0.02, 0.01, 0.1, 0.2, 0.2
    ref = ref_of(kind="scan", distance_rad=D, velocity_rad_s=v, max_accel_rad_s2=a, dwell_s=dwell, start_s=start)
    t_move = D / v + v / a  # 2.1 s
    assert ref.period_s == pytest.approx(2 * (t_move + dwell))
    assert ref.constant_speed_window == pytest.approx((start + v / a, start + t_move - v / a))
    w0, w1 = ref.constant_speed_window
    for k in range(1, 100):
        assert ref.sample(w0 + (w1 - w0) * k / 100)[1:] == pytest.approx((v, 0.0), rel=1e-12)
    expected = [start + t_move + dwell + k * (t_move + dwell) for k in range(4)]  # 2.5, 4.8, 7.1, 9.4
    revs = ref.reversals(10.0)
    assert revs == pytest.approx(expected)
    for i, tr in enumerate(revs):
        assert ref.sample(tr - 1e-3)[1] == 0.0  # end of a dwell
        direction = -1 if i % 2 == 0 else 1
        assert direction * ref.sample(tr + 1e-3)[1] > 0
    check_motion(ref, 0.0, 10.0, 10000, vmax=v, amax=a, lo=0.0, hi=D)
    assert ref.sample(start + t_move + dwell / 2) == (D, 0.0, 0.0)
    assert ref.sample(start + ref.period_s - dwell / 2) == (0.0, 0.0, 0.0)


def test_scan_too_short_to_cruise_has_no_window():
    ref = ref_of(kind="scan", distance_rad=1e-4, velocity_rad_s=0.05, max_accel_rad_s2=1.0, dwell_s=0.0)
    assert ref.constant_speed_window is None
    check_motion(ref, 0.0, 3 * ref.period_s, 3000, vmax=0.05, amax=1.0, lo=0.0, hi=1e-4)
    # without dwell the reversal is the instant the velocity passes through zero
    assert ref.reversals(ref.period_s * 1.01) == pytest.approx([ref.period_s / 2, ref.period_s])


def test_window_clipped_to_duration():
    ref = ref_of(duration_s=1.0, kind="scan", distance_rad=0.02, velocity_rad_s=0.01, max_accel_rad_s2=0.1)
    assert ref.constant_speed_window == pytest.approx((0.1, 1.0))
    assert ref_of(duration_s=0.05, kind="scan", distance_rad=0.02, velocity_rad_s=0.01,
                  max_accel_rad_s2=0.1).constant_speed_window is None


@settings(max_examples=60, deadline=None)
@given(
    exp_d=st.floats(-5, 0), exp_v=st.floats(-4, 0), exp_a=st.floats(-3, 1),
    exp_j=st.one_of(st.just(None), st.floats(-1, 4)), dwell=st.one_of(st.just(0.0), st.floats(1e-3, 1.0)),
)
def test_scan_random_limits(exp_d, exp_v, exp_a, exp_j, dwell):
    D, v, a = 10**exp_d, 10**exp_v, 10**exp_a
    j = INF if exp_j is None else 10**exp_j
    start = 0.5
    ref = ref_of(kind="scan", distance_rad=D, velocity_rad_s=v, max_accel_rad_s2=a, max_jerk_rad_s3=j,
                 dwell_s=dwell, start_s=start, duration_s=1e9)
    fwd = rest_to_rest(D, v, a, j)
    t_move = move_time(fwd)
    P = ref.period_s
    assert P == pytest.approx(2 * (t_move + dwell), rel=1e-12)
    back_start = start + t_move + dwell
    check_motion(ref, start, start + t_move, 300, vmax=v, amax=a, jmax=j, lo=0.0, hi=D, monotone=1)
    check_motion(ref, back_start, back_start + t_move, 300, vmax=v, amax=a, jmax=j, lo=0.0, hi=D, monotone=-1)
    check_motion(ref, start + 5 * P, start + 6 * P, 600, vmax=v, amax=a, jmax=j, lo=0.0, hi=D)
    check_pieces(ref, start, fwd, v, a)
    check_pieces(ref, back_start, [(T, -a0, -jj) for T, a0, jj in fwd], v, a)
    cruise = [T for T, a0, jj in fwd if a0 == 0.0 and jj == 0.0]
    if cruise:
        w0, w1 = ref.constant_speed_window
        assert w1 - w0 == pytest.approx(cruise[0], rel=1e-9)
        for frac in (0.0, 0.5, 1.0):
            assert ref.sample(w0 + frac * (w1 - w0))[1] == pytest.approx(v, rel=1e-9)
    else:
        assert ref.constant_speed_window is None
    revs = ref.reversals(start + 2 * P + 1e-9 * P)
    assert revs == pytest.approx([back_start, start + P, back_start + P, start + 2 * P], rel=1e-12)


# --- the profile generator itself ---------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(d=st.floats(-1, 1).filter(lambda x: abs(x) > 1e-9), exp_v=st.floats(-4, 1), exp_a=st.floats(-3, 2),
       exp_j=st.one_of(st.just(None), st.floats(-1, 5)))
def test_rest_to_rest_covers_the_distance_at_the_time_optimum(d, exp_v, exp_a, exp_j):
    v, a = 10**exp_v, 10**exp_a
    j = INF if exp_j is None else 10**exp_j
    segs = rest_to_rest(d, v, a, j)
    x = vel = 0.0
    for T, a0, jj in segs:
        assert T > 0 and abs(a0) <= a * (1 + 1e-12) and abs(jj) <= j
        x += T * (vel + T * (0.5 * a0 + T * jj / 6))
        vel += T * (a0 + 0.5 * T * jj)
        assert abs(vel) <= v * (1 + 1e-9)
    assert x == pytest.approx(d, rel=1e-9)
    assert abs(vel) <= 1e-9 * v
    if j == INF:  # the trapezoid's minimum time
        t_min = abs(d) / v + v / a if abs(d) >= v * v / a else 2 * math.sqrt(abs(d) / a)
        assert move_time(segs) == pytest.approx(t_min, rel=1e-9)


def test_rest_to_rest_rejects_bad_limits():
    with pytest.raises(ValueError, match="max_accel"):
        rest_to_rest(1.0, 1.0, INF, INF)
    with pytest.raises(ValueError, match="max_velocity"):
        rest_to_rest(1.0, 0.0, 1.0)
    assert rest_to_rest(0.0, 1.0, 1.0) == []
