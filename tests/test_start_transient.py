"""The feedforward model's damping transient at a start from rest (observer.ff_start_fraction):
beyond the model's |F̂| bound a fixed fraction of the excess is fed forward, only from a start
from rest until the reference stops or reverses; at 0 the bound is the hard one, exactly; in the
loop, a heavily damped exact set starts closer to its reference."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from controller.compensation import TickSignals
from controller.estimation_config import ObserverConfig
from controller.friction import LuGreParams
from controller.lugre_compensator import make_lugre_compensator
from controller.observer import LuGreObserver

from .conftest import reference_config, sim

DT = 1e-3
# seed 2's mc1 of ``bench compensation --monte-carlo 20``: bristle damping ratio 1.8 with J = 0.08;
# its start transient sigma1·dz/dt rises well above Fs
DAMPED = LuGreParams(Fc=0.213, Fs=0.242, vs=0.0529, sigma0=7034.0, sigma1=84.4, sigma2=0.04)


def _start(obs: LuGreObserver, v: float = 0.01, ticks: int = 30) -> np.ndarray:
    """F̂ over a start from rest at constant speed v (no correction: L = 0)."""
    return np.array([obs.step(v, DT) for _ in range(ticks)])


def test_the_fraction_passes_its_share_of_the_excess_and_zero_is_the_hard_bound():
    margin = 0.25 * DAMPED.Fc
    free = _start(LuGreObserver(DAMPED))  # unbounded: the model's own transient
    base = DAMPED.Fs + DAMPED.sigma2 * 0.01
    assert free.max() > base + 2 * margin  # the transient does rise past the bound
    hard_obs = LuGreObserver(DAMPED, margin_nm=margin)
    hard = _start(hard_obs)
    assert hard.max() == pytest.approx(base + margin, rel=1e-12)
    for fraction in (0.3, 0.54, 1.0):
        obs = LuGreObserver(DAMPED, margin_nm=margin)
        obs.transient_fraction = fraction
        out = _start(obs)
        expect = np.where(free > base + margin,
                          base + np.maximum(margin, fraction * (free - base)), free)
        np.testing.assert_allclose(out, expect, rtol=1e-12)
        assert obs.z_hat == hard_obs.z_hat  # the bound acts on F̂ only, never on ẑ
    zero = LuGreObserver(DAMPED, margin_nm=margin)
    zero.transient_fraction = 0.0
    assert np.array_equal(_start(zero), hard)


def _compensator(fraction: float | None = None):
    ctrl = reference_config().controller
    ctrl = dataclasses.replace(ctrl, friction=DAMPED,
                               observer=dataclasses.replace(ctrl.observer,
                                                            ff_start_fraction=fraction))
    return make_lugre_compensator(ctrl, adaptive=True)


def test_the_fraction_acts_from_a_start_from_rest_until_a_reversal():
    """Reference profile: rest, start forward, reverse, stop, start backward. The feedforward
    model takes the resolved fraction from the start's first tick until the reversal, 0 from
    the reversal on, and the fraction again at the next start from rest."""
    comp = _compensator()
    fraction = comp.cfg.ff_start_fraction
    assert 0.0 < fraction < 1.0
    s = TickSignals()
    seen: list[tuple[float, float]] = []
    v_profile = [0.0] * 50 + [0.01] * 100 + [-0.01] * 100 + [0.0] * 50 + [-0.01] * 50
    pos = 0.0
    for k, v in enumerate(v_profile):
        s.t_s = k * DT
        s.vel_ref_rad_s = s.vel_rad_s = v
        pos += v * DT
        s.pos_ref_rad = s.pos_rad = pos
        comp.step(s, DT)
        seen.append((v, comp.ff_model.transient_fraction))
    frac = np.array([f for _, f in seen])
    assert np.all(frac[50:150] == fraction)  # the start from rest, until the reversal
    assert np.all(frac[150:250] == 0.0)  # after the reversal: the hard bound
    assert np.all(frac[300:] == fraction)  # the next start from rest
    # an explicit value overrides the rule; 0 keeps the hard bound throughout
    assert _compensator(0.2).cfg.ff_start_fraction == 0.2
    off = _compensator(0.0)
    for k, v in enumerate(v_profile[:150]):
        s.vel_ref_rad_s = s.vel_rad_s = v
        off.step(s, DT)
        assert off.ff_model.transient_fraction == 0.0


def test_a_heavily_damped_exact_set_starts_closer_with_its_transient(tmp_path):
    """Seed 2's mc1 believed exactly (friction and J), creep: the start's first second, default
    fraction against the hard bound (ff_start_fraction 0): measured 0.756 → 0.631 µrad rms."""
    cfg = reference_config()
    cfg = dataclasses.replace(cfg, plant=dataclasses.replace(cfg.plant, friction=DAMPED))
    ctrl = dataclasses.replace(cfg.controller, friction=DAMPED, J=cfg.plant.J)
    rms = {}
    for fraction in (None, 0.0):
        c = dataclasses.replace(cfg, controller=dataclasses.replace(
            ctrl, observer=dataclasses.replace(ctrl.observer, ff_start_fraction=fraction)))
        _, log, _ = sim(c, tmp_path / str(fraction), scenario="creep", duration_s=1.5,
                        compensation="lugre_adaptive")
        t, err = log["t_s"], log["pos_ref_rad"] - log["pos_rad"]
        first = (t >= 0.2) & (t < 1.2)
        rms[fraction] = math.sqrt(float(np.mean(err[first] ** 2)))
    assert rms[None] < 0.9 * rms[0.0]


def test_the_rule_follows_the_stated_uncertainty():
    from controller.estimation_config import start_transient_fraction
    assert start_transient_fraction(math.inf) == pytest.approx(0.7 / 1.3)
    assert start_transient_fraction(0.05) == pytest.approx(1 / 1.15)
    assert start_transient_fraction(1e-9) == pytest.approx(1 / 1.03)  # u floored at 1 %
    with pytest.raises(ValueError, match="ff_start_fraction"):
        ObserverConfig(ff_start_fraction=1.5)
    from controller.config import config_from_mapping
    from controller.schema import ConfigError, to_plain
    data = to_plain(reference_config())
    data["controller"]["observer"]["ff_start_fraction"] = -0.1
    with pytest.raises(ConfigError, match=r"controller\.observer\.ff_start_fraction: must be in"):
        config_from_mapping(data)
