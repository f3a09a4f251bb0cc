"""What the compensator learns from the residual, and the alarm when the model stays wrong:
the deadlock case leaves (never enters) fallback and raises reidentify with a proposed set; the
disturbance-observer term is bounded under a wrong-sign residual and frozen in a fault; replay of
a learning run reproduces the learned term exactly."""

from __future__ import annotations

import dataclasses

import numpy as np
import yaml

from controller.compensation import TickSignals
from controller.friction import LuGreParams
from controller.lugre_compensator import make_lugre_compensator
from controller.runlog import read_log
from hil.bench_compensation import mismatched
from hil.replay import replay

from .conftest import reference_config, sim

# sigma0/sigma1 = 61 rad/s (bristle damping ratio 0.9 with J = 0.08): the findings' H1 class
LARGE_SIGMA1 = LuGreParams(Fc=0.2, Fs=0.28, vs=0.01, sigma0=1e3, sigma1=16.4, sigma2=0.04)


def _deadlock_config():
    cfg = reference_config()
    cfg = dataclasses.replace(cfg, plant=dataclasses.replace(cfg.plant, friction=LARGE_SIGMA1))
    return mismatched(cfg, 0.3)  # every parameter and J 30 % off


def test_believed_set_30_percent_off_with_large_sigma1_raises_reidentify_within_5_s(tmp_path):
    summary, log, _ = sim(_deadlock_config(), tmp_path, scenario="reversal", duration_s=6.0,
                          compensation="lugre_adaptive")
    t, fallback, alarm = log["t_s"], log["fallback"], log["reidentify"]
    assert summary["reidentify"] and summary["reidentify_reason"] == "model inconsistent"
    motion_start = 0.2  # the scenario's start_s
    assert t[alarm > 0].min() - motion_start <= 5.0
    assert summary["reidentify_at_s"] - motion_start <= 5.0
    assert not fallback[t > 4.0].any()  # not stuck in fallback: the adapter kept working
    assert abs(summary["fc_hat_final_nm"] - 0.14) > 0.02  # Fc_hat moved from the believed 0.14
    proposal = yaml.safe_load((tmp_path / "proposed_params.yaml").read_text())
    proposed = LuGreParams(**proposal["friction"])
    assert proposal["diagnostics"]["reason"] == "model inconsistent"
    assert abs(proposed.Fc - 0.2) < abs(0.14 - 0.2)  # closer to the true Fc than believed


def test_exact_reference_set_raises_no_alarm(tmp_path):
    summary, _, _ = sim(reference_config(), tmp_path, scenario="reversal", duration_s=4.0,
                        compensation="lugre_adaptive")
    assert not summary["reidentify"] and summary["reidentify_reason"] == "none"
    assert not (tmp_path / "proposed_params.yaml").exists()


def test_learned_term_is_bounded_under_a_wrong_sign_residual_and_frozen_in_a_fault():
    ctrl = reference_config().controller
    comp = make_lugre_compensator(ctrl, adaptive=True)
    limit = comp.cfg.dob_limit_nm
    s = TickSignals()
    terms = []
    for k in range(3000):  # sliding forward while the drive reports a large reverse torque
        s.t_s = k * 1e-3
        s.vel_ref_rad_s = s.vel_rad_s = 0.05
        s.acc_ref_rad_s2 = 0.5  # not steady: the term is fully weighted
        s.pos_ref_rad = s.pos_rad = 0.05 * s.t_s
        s.current_a = -3.0  # −1.8 N·m of "friction" against the motion: wrong sign
        comp.step(s, 1e-3)
        terms.append(comp.learned_nm)
    assert max(abs(x) for x in terms) <= limit + 1e-12
    assert min(terms) < -0.9 * limit  # it did push against the residual, up to its bound
    held = comp.learned_nm
    s.faulted = True
    for k in range(500):  # in a fault nothing is learned: the term is frozen
        s.current_a = 3.0 * (-1) ** k
        comp.step(s, 1e-3)
        assert comp.learned_nm == held


def test_replay_of_a_learning_run_is_exact(tmp_path):
    cfg = mismatched(reference_config(), 0.2)
    summary, log, _ = sim(cfg, tmp_path / "run", scenario="reversal", duration_s=3.0,
                          compensation="lugre_adaptive")
    assert np.ptp(log["learned_nm"]) > 0.01  # the run did learn something
    result = replay(tmp_path / "run" / "run.fctl", tmp_path / "replay")
    assert result["max_abs_diff_learned_nm"] == 0.0
    assert result["max_abs_diff_torque_nm"] <= 1e-12
    assert result["max_abs_diff_friction_hat_nm"] <= 1e-12
