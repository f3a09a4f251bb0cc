"""Gain scheduling: config, smooth and hysteretic blending, the scheduled compensator."""

from __future__ import annotations

import dataclasses
import math

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import configs
from controller.compensation import TickSignals
from controller.config import load_config
from controller.estimation_config import (SCALED_FIELDS, FrictionScale, ScheduleConfig, Widths,
                                          anchored)
from controller.friction import DirectionalParams, LuGreParams
from controller.gains import PIDGains
from controller.lugre_compensator import make_lugre_compensator
from controller.schedule import Scheduler, blend_friction, membership
from controller.schema import ConfigError, parse, parse_dataclass

DT = 1e-3
CFG = load_config(configs.path("turntable"))  # also registers the FrictionParams parser

SCHEDULE_YAML = """
sets:
  - name: cold
    friction: {Fc: 0.22, Fs: 0.31, vs: 0.01, sigma0: 3.0e+4, sigma1: 0.08, sigma2: 0.05}
    region: {temperature_c: [-.inf, 30.0]}
  - name: warm
    friction: {Fc: 0.20, Fs: 0.28, vs: 0.012, sigma0: 3.0e+4, sigma1: 0.08, sigma2: 0.04}
    pid: {kp: 4000.0, ki: 160000.0, kd: 32.0, output_limit_nm: 5.0}
    region: {temperature_c: [30.0, .inf]}
blend_width: {temperature_c: 4.0}
hysteresis: {temperature_c: 1.0}
weight_rate_per_s: 2.0
max_ff_step_nm: 0.05
"""


def load(text=SCHEDULE_YAML, **changes) -> ScheduleConfig:
    data = yaml.safe_load(text)
    data.update(changes)
    return parse_dataclass(ScheduleConfig, data, "schedule")


def sweep(sched, values, name="temperature_c", **fixed):
    out = []
    for x in values:
        params, gains, weights = sched.update(DT, **{name: x}, **fixed)
        out.append((params, gains, weights, sched.active))
    return out


# --- config ----------------------------------------------------------------------------------


def test_schedule_config_loads_from_yaml():
    cfg = load()
    assert [s.name for s in cfg.sets] == ["cold", "warm"]
    assert cfg.sets[0].region.temperature_c == (-math.inf, 30.0)
    assert isinstance(cfg.sets[1].pid, PIDGains) and cfg.sets[0].pid is None
    assert cfg.blend_width == Widths(temperature_c=4.0)
    directional = load(SCHEDULE_YAML.replace(
        "friction: {Fc: 0.22, Fs: 0.31, vs: 0.01, sigma0: 3.0e+4, sigma1: 0.08, sigma2: 0.05}",
        "friction: {forward: {Fc: 0.22, Fs: 0.31, vs: 0.01, sigma0: 3.0e+4, sigma1: 0.08, sigma2: 0.05},"
        " reverse: {Fc: 0.24, Fs: 0.33, vs: 0.01, sigma0: 3.0e+4, sigma1: 0.08, sigma2: 0.05}}"))
    assert isinstance(directional.sets[0].friction, DirectionalParams)


@pytest.mark.parametrize("change, message", [
    ({"sets": [{"name": "a", "friction": {"Fc": 0.2, "Fs": 0.3, "vs": 0.01, "sigma0": 1e4,
                                          "sigma1": 0, "sigma2": 0},
                "region": {"temperature_c": [40, 30]}}]},
     r"^schedule\.sets\[0\]\.region\.temperature_c: must be \[lo, hi\] with lo <= hi"),
    ({"sets": [{"name": "a", "friction": {"Fc": 0.2, "Fs": 0.1, "vs": 0.01, "sigma0": 1e4,
                                          "sigma1": 0, "sigma2": 0}}]},
     r"^schedule\.sets\[0\]\.friction\.Fs: must be >= Fc"),
    ({"sets": [{"name": "a", "friction": {"Fc": 0.2, "Fs": 0.3, "vs": 0.01, "sigma0": 1e4,
                                          "sigma1": 0, "sigma2": 0}, "region": {"humidity": [0, 1]}}]},
     r"^schedule\.sets\[0\]\.region\.humidity: unknown key"),
    ({"sets": []}, r"^schedule\.sets: at least one"),
    ({"hysteresis": {"temperature_c": -1}}, r"^schedule\.hysteresis\.temperature_c: must be finite"),
    ({"weight_rate_per_s": 0}, r"^schedule\.weight_rate_per_s: must be > 0"),
])
def test_schedule_config_errors_name_the_key(change, message):
    with pytest.raises(ConfigError, match=message):
        load(**change)


def test_duplicate_set_names_are_refused():
    data = yaml.safe_load(SCHEDULE_YAML)
    data["sets"][1]["name"] = "cold"
    with pytest.raises(ConfigError, match=r"^schedule\.sets\[1\]\.name: duplicate set name 'cold'"):
        parse(ScheduleConfig, data, "schedule")


# --- membership and blending -----------------------------------------------------------------


def test_membership_is_continuous_and_flat_inside():
    xs = [25.0 + 0.001 * k for k in range(20001)]  # 25 … 45 °C
    mu = [membership(x, 30.0, 40.0, 4.0) for x in xs]
    assert mu[0] == 0.0 and mu[-1] == 0.0
    assert membership(30.0, 30.0, 40.0, 4.0) == membership(40.0, 30.0, 40.0, 4.0) == 1.0
    assert membership(28.0, 30.0, 40.0, 4.0) == 0.5
    assert max(abs(b - a) for a, b in zip(mu, mu[1:])) < 1.5 / 4.0 * 0.001 * 1.01
    assert membership(30.0, 30.0, 40.0, 0.0) == 1.0 and membership(29.99, 30.0, 40.0, 0.0) == 0.0


def test_blend_is_field_wise_and_valid():
    a = LuGreParams(0.2, 0.28, 0.01, 3e4, 0.08, 0.04)
    b = LuGreParams(0.3, 0.30, 0.02, 1e4, 0.0, 0.06)
    p = blend_friction((a, b), (0.25, 0.75))
    assert p.Fc == pytest.approx(0.275) and p.sigma0 == pytest.approx(1.5e4)
    assert p.Fs >= p.Fc
    d = blend_friction((DirectionalParams(a, b), a), (0.5, 0.5))
    assert d.forward == a and d.reverse.Fc == pytest.approx(0.25)


valid_sets = st.builds(
    lambda fc, ratio, vs, s0, s1, s2, d: LuGreParams(fc, fc * ratio, vs, s0, s1, s2, d),
    st.floats(1e-3, 10), st.floats(1.0, 3.0), st.floats(1e-4, 0.1), st.floats(1e2, 1e8),
    st.floats(0, 10), st.floats(0, 10), st.floats(0.5, 2.5))


@settings(max_examples=200, deadline=None)
@given(sets=st.lists(valid_sets, min_size=1, max_size=4), raw=st.lists(st.floats(0, 1), min_size=4, max_size=4))
def test_any_convex_blend_of_valid_sets_is_valid(sets, raw):
    raw = raw[:len(sets)]
    if sum(raw) == 0:
        raw[0] = 1.0
    weights = tuple(x / sum(raw) for x in raw)
    p = blend_friction(tuple(sets), weights)  # the validating constructor accepts it
    assert min(q.Fc for q in sets) * (1 - 1e-9) <= p.Fc <= max(q.Fc for q in sets) * (1 + 1e-9)


def test_blended_parameters_change_continuously_across_a_boundary():
    """A slow temperature ramp over the 30 °C boundary: no jump in any blended field."""
    sched = Scheduler(load(), CFG.controller.pid)
    out = sweep(sched, [20.0 + 0.002 * k for k in range(10001)])
    fcs = [p.Fc for p, *_ in out]
    kps = [g.kp for _, g, *_ in out]
    assert fcs[0] == 0.22 and fcs[-1] == 0.20
    # the smoothstep slope bounds the change per tick: 1.5/width · dT · ΔFc (normalised blend ≤ 2×)
    bound = 2 * 1.5 / 4.0 * 0.002 * 0.02
    assert max(abs(b - a) for a, b in zip(fcs, fcs[1:])) <= bound
    assert max(abs(b - a) for a, b in zip(kps, kps[1:])) <= 2 * 1.5 / 4.0 * 0.002 * 210.0
    assert [w for *_, w, _ in out][0] == (1.0, 0.0)


def test_hard_edges_are_smoothed_in_time_by_the_weight_slew():
    cfg = load(blend_width={}, hysteresis={})  # widths 0: memberships jump
    sched = Scheduler(cfg, CFG.controller.pid)
    out = sweep(sched, [29.0] * 10 + [31.0] * 1000)
    weights = [w for *_, w, _ in out]
    steps = [max(abs(x - y) for x, y in zip(a, b)) for a, b in zip(weights, weights[1:])]
    assert max(steps) == pytest.approx(cfg.weight_rate_per_s * DT)
    assert weights[10 + int(0.5 / DT) + 1] == (0.0, 1.0)  # took 1/rate = 0.5 s
    assert all(abs(sum(w) - 1.0) < 1e-12 for w in weights)


def test_dithering_around_a_boundary_does_not_toggle_the_active_set():
    cfg = load(blend_width={}, hysteresis={"temperature_c": 1.0})
    sched = Scheduler(cfg, CFG.controller.pid)
    sweep(sched, [25.0 + 0.001 * k for k in range(5001)])  # approach 30 °C from below
    assert sched.active == "cold"
    dither = [30.0 + 0.8 * math.sin(2 * math.pi * k / 2000) for k in range(6000)]  # 0.5 Hz
    out = sweep(sched, dither)
    assert {a for *_, a in out} == {"cold"}
    assert {w for *_, w, _ in out} == {(1.0, 0.0)}
    # the set stays until the variable is more than the hysteresis outside its region
    sweep(sched, [30.9] * 100)
    assert sched.weights == (1.0, 0.0)
    sweep(sched, [31.1] * 1000)
    assert sched.active == "warm" and sched.weights == (0.0, 1.0)
    # without hysteresis the same dither toggles
    bare = Scheduler(load(blend_width={}, hysteresis={}), CFG.controller.pid)
    out = sweep(bare, [29.0] * 10 + dither)
    assert {a for *_, a in out} == {"cold", "warm"}


def test_direction_and_speed_regions():
    a = LuGreParams(0.2, 0.28, 0.01, 3e4, 0.08, 0.04)
    b = a.scaled(Fc=1.2)
    sets = [{"name": "fwd", "friction": a.as_dict(), "region": {"direction": "forward"}},
            {"name": "rev", "friction": b.as_dict(), "region": {"direction": "reverse"}}]
    sched = Scheduler(load(sets=sets), CFG.controller.pid)
    sched.update(DT, speed_rad_s=0.05, direction=+1)
    assert sched.active == "fwd"
    for _ in range(100):
        sched.update(DT, speed_rad_s=0.0, direction=0)  # at rest: the direction is held
    assert sched.weights == (1.0, 0.0)
    out = [sched.update(DT, speed_rad_s=0.05, direction=-1)[0].Fc for _ in range(1000)]
    assert max(abs(y - x) for x, y in zip(out, out[1:])) <= 2.0 * DT * (b.Fc - a.Fc) * 1.0001
    assert sched.active == "rev"
    speed_sets = [{"name": "slow", "friction": a.as_dict(), "region": {"speed_rad_s": [0, 0.02]}},
                  {"name": "fast", "friction": b.as_dict(), "region": {"speed_rad_s": [0.02, math.inf]}}]
    sched = Scheduler(load(sets=speed_sets), CFG.controller.pid)
    assert sched.update(DT, speed_rad_s=0.001)[0] == a
    for _ in range(2000):
        sched.update(DT, speed_rad_s=0.5)
    assert sched.params == b


def test_uncovered_point_holds_weights_and_start_uses_the_first_set():
    sets = [{"name": "a", "friction": CFG.controller.friction.as_dict(),
             "region": {"temperature_c": [0, 10]}},
            {"name": "b", "friction": CFG.controller.friction.scaled(Fc=1.1).as_dict(),
             "region": {"temperature_c": [20, 30]}}]
    sched = Scheduler(load(sets=sets), CFG.controller.pid)
    sched.update(DT, temperature_c=100.0)
    assert sched.weights == (1.0, 0.0) and sched.uncovered
    assert any("no region covers" in w for w in sched.warnings)
    sweep(sched, [25.0] * 1000)
    assert sched.weights == (0.0, 1.0)
    sweep(sched, [15.0] * 10)  # between the regions (beyond the blend widths): hold
    assert sched.weights == (0.0, 1.0) and sched.uncovered
    sweep(sched, [math.nan] * 10)  # unknown: does not discriminate, held value kept
    assert sched.weights == (0.0, 1.0)


def test_passivity_warnings_are_collected():
    active = CFG.controller.friction.scaled(sigma1=5.0)  # sigma2 − sigma1·(Fs−Fc)/Fc < 0
    sets = [{"name": "lively", "friction": active.as_dict()},
            {"name": "calm", "friction": CFG.controller.friction.as_dict(),
             "region": {"temperature_c": [40, 50]}}]
    sched = Scheduler(load(sets=sets), CFG.controller.pid)
    assert len(sched.warnings) == 1 and "'lively'" in sched.warnings[0]
    assert "passivity margin" in sched.warnings[0]


# --- the scheduled compensator ---------------------------------------------------------------


def scheduled_controller(schedule):
    """The reference controller with ``schedule``; absolute sets become the believed set ("cold")
    and factors on it (a schedule is anchored to controller.friction)."""
    believed = schedule.sets[0].friction
    sets = (dataclasses.replace(schedule.sets[0], friction=None),) + tuple(
        dataclasses.replace(s, friction=None, scale=FrictionScale(**{
            k: getattr(s.friction, k) / getattr(believed, k) for k in SCALED_FIELDS}))
        for s in schedule.sets[1:])
    return dataclasses.replace(CFG.controller, friction=believed,
                               schedule=dataclasses.replace(schedule, sets=sets))


def test_scheduled_compensator_publishes_gains_and_bounds_the_feedforward_step():
    cfg = load()
    comp = make_lugre_compensator(scheduled_controller(cfg), adaptive=True)
    assert comp.mode == "lugre_adaptive" and comp.scheduler is not None
    s = TickSignals()
    s.temperature_c = 20.0
    ffs, kps, steps = [], [], []
    for k in range(6000):
        t = k * DT
        if t >= 2.0:
            s.temperature_c = 40.0  # a step (new drive reading): weights slew, ff bounded
        v = 0.05 * math.sin(math.pi * t)  # reversals: the largest feedforward changes
        s.vel_ref_rad_s = s.vel_rad_s = v
        s.acc_ref_rad_s2 = 0.05 * math.pi * math.cos(math.pi * t)
        s.pos_ref_rad = s.pos_rad = 0.05 / math.pi * (1 - math.cos(math.pi * t))
        s.current_a = 0.4 * math.tanh(v / 0.002)
        ffs.append(comp.step(s, DT))
        kps.append(comp.pid_gains.kp)
        steps.append(comp.param_step_nm)
    # the parameter-induced change per tick stays within the bound, and the switch did change
    # the feedforward (the absorbed bump was released, not dropped)
    assert max(steps) <= cfg.max_ff_step_nm + 1e-12
    assert sum(steps) > 0.01  # the sets differ by ~0.02 N·m in Fc
    assert kps[0] == CFG.controller.pid.kp and kps[-1] == 4000.0
    assert max(abs(b - a) for a, b in zip(kps, kps[1:])) <= 2 * DT * (4000.0 - CFG.controller.pid.kp) + 1e-9
    for k in SCALED_FIELDS:
        assert getattr(comp.estimator.params, k) == pytest.approx(getattr(cfg.sets[1].friction, k))
    assert comp.estimator.L * cfg.sets[1].friction.sigma0 == pytest.approx(2 * math.pi * comp.cfg.bandwidth_hz)
    assert comp.cfg.bandwidth_hz == pytest.approx(30.0, rel=1e-3)  # 1.5·f_p, f_p = kd/(3J) = 20 Hz
    assert comp.weights == (0.0, 1.0)


def test_lugre_mode_ignores_the_schedule():
    comp = make_lugre_compensator(scheduled_controller(load()), adaptive=False)
    assert comp.scheduler is None and comp.pid_gains is None


# --- anchoring to controller.friction ---------------------------------------------------------


def test_schedule_moves_with_the_believed_set():
    """The shipped schedule is factors on controller.friction: a new identified set moves every
    region (the heavy set stays +15 % on Fc, Fs, sigma2 of whatever is believed)."""
    ctrl = CFG.controller
    new = LuGreParams(Fc=1.1, Fs=1.6, vs=0.003, sigma0=8e4, sigma1=2.0, sigma2=0.3)
    moved = dataclasses.replace(ctrl, friction=new)
    sets = anchored(moved.schedule, moved.friction).sets
    assert sets[0].friction == new
    assert sets[1].friction.Fc == pytest.approx(1.15 * 1.1)
    assert sets[1].friction.sigma2 == pytest.approx(1.15 * 0.3)
    assert sets[1].friction.vs == pytest.approx(0.003)
    comp = make_lugre_compensator(moved, adaptive=True)
    assert comp.scheduler.params == new  # starts on the believed set, never on a stored table
    sched = anchored(moved.schedule, moved.friction)
    assert sched.max_ff_step_nm == pytest.approx(0.05 * 1.1)
    assert sched.blend_width.speed_rad_s == pytest.approx(0.5 * 0.003)


def test_schedule_contradicting_the_believed_set_is_a_one_line_error(tmp_path):
    text = configs.path("turntable").read_text().replace(
        "      - name: light               # empty table: the believed set itself\n",
        "      - name: light\n        friction: {Fc: 0.25, Fs: 0.3, vs: 0.01, sigma0: 3.0e+4, "
        "sigma1: 0.08, sigma2: 0.04}\n")
    assert "Fc: 0.25" in text
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("controller.schedule.sets[0].friction: contradicts controller.friction")
    # the same set written out as the base (equal to controller.friction) is accepted
    path.write_text(text.replace("Fc: 0.25, Fs: 0.3,", "Fc: 0.20, Fs: 0.28,"))
    assert load_config(path).controller.schedule.sets[0].friction == CFG.controller.friction


def test_schedule_factors_making_an_invalid_set_name_the_key(tmp_path):
    text = configs.path("turntable").read_text().replace(
        "scale: {Fc: 1.15, Fs: 1.15, sigma2: 1.15}", "scale: {Fc: 1.6, Fs: 1.0}")
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"^controller\.schedule\.sets\[1\]\.scale: makes an invalid set"):
        load_config(path)


def test_skipping_the_settled_scheduler_changes_nothing():
    """The cheap path (weights at their target and no variable moved past its play: return the
    last result) gives exactly what the full update gives, tick for tick, over random holds,
    drifts and jumps of temperature and payload (NaN: unknown) across the regions."""
    import random

    rng = random.Random(7)
    fast = Scheduler(load(), CFG.controller.pid)
    full = Scheduler(load(), CFG.controller.pid)
    temperature, payload = 25.0, 0.0
    skipped = 0
    for _ in range(20000):
        r = rng.random()
        if r < 0.002:
            temperature = rng.uniform(0.0, 60.0)  # a jump across the regions
        elif r < 0.3:
            temperature += rng.gauss(0.0, 0.05)  # drift, often inside the play
        if rng.random() < 0.001:
            payload = rng.choice((0.0, 1.0, 5.0, math.nan))
        full._settled = False  # never allowed to skip
        was_settled = fast._settled
        a = fast.update(DT, temperature_c=temperature, payload_kg=payload)
        b = full.update(DT, temperature_c=temperature, payload_kg=payload)
        skipped += was_settled and not fast.changed
        assert a == b and fast.active == full.active and fast.changed == full.changed
    assert skipped > 10000  # the skip really ran, most of the time
