"""Stop categories: STO cuts the torque at once, SS1 decelerates under closed-loop control and
escalates to STO when the axis speeds up, the controlled hold keeps an overhauling load in
place for ``safety.hold_s``; the normal end decelerates the moving reference; every stop ends
with a logged disable row."""

from __future__ import annotations

import numpy as np
import pytest

from controller.safety import FaultKind
from controller.stop import CATEGORY, STO_FAULTS, StopCategory, StopPhase, stop_deceleration_limit

from .conftest import sim, with_changes


def _stop_rows(run):
    phase = run["stop_phase"]
    k = int(np.argmax(phase != StopPhase.RUN))
    assert phase[k] != StopPhase.RUN, "the run never stopped"
    return k, phase


def test_every_fault_kind_has_a_category():
    assert set(CATEGORY) == set(FaultKind)
    for kind, category in CATEGORY.items():
        expected = StopCategory.STO if kind in STO_FAULTS else StopCategory.SS1
        assert category is expected
    # the feedback or the drive cannot be trusted: torque off at once
    for kind in (FaultKind.NON_FINITE, FaultKind.DRIVE_FAULT, FaultKind.STALE_FEEDBACK,
                 FaultKind.VELOCITY_LIMIT, FaultKind.COMMUNICATION):
        assert CATEGORY[kind] is StopCategory.STO
    for kind in (FaultKind.NONE, FaultKind.STOP_REQUESTED, FaultKind.FOLLOWING_ERROR,
                 FaultKind.OVERRUN):
        assert CATEGORY[kind] is StopCategory.SS1


def test_deceleration_bound_follows_the_torque_limit_and_inertia(ref_cfg):
    assert stop_deceleration_limit(ref_cfg) == pytest.approx(
        0.5 * ref_cfg.safety.torque_limit_nm / ref_cfg.controller.J)
    cfg = with_changes(ref_cfg, safety={"stop_decel_rad_s2": 3.0})
    assert stop_deceleration_limit(cfg) == 3.0


def test_normal_end_decelerates_the_moving_reference_under_control(ref_cfg, tmp_path):
    # end the reversal sine near its peak speed (0.05 rad/s): SS1 from there, not a torque drop
    summary, run, backend = sim(ref_cfg, tmp_path, scenario="reversal", duration_s=2.6)
    k, phase = _stop_rows(run)
    assert phase[k] == StopPhase.SS1 and summary["faults"] == []
    v0 = abs(run["vel_rad_s"][k])
    assert v0 > 0.02  # it was moving when the run ended
    err = np.abs(run["pos_ref_rad"][k:-1] - run["pos_rad"][k:-1])
    assert err.max() < 5e-5  # followed the deceleration reference within 50 µrad
    # its inertia feedforward takes the mean deceleration over each tick (the loop's rule), so
    # the tick in which the ramp reaches rest is braked only for the part it still decelerates
    ss1 = (phase[:-1] == StopPhase.SS1) & np.isin(phase[1:], (StopPhase.SS1, StopPhase.HOLD))
    mean_acc = np.diff(run["vel_ref_rad_s"]) / 1e-3
    np.testing.assert_allclose(run["acc_ref_rad_s2"][:-1][ss1], mean_acc[ss1], rtol=0, atol=1e-9)
    assert abs(run["vel_rad_s"][-2]) < 0.1 * v0  # at standstill when disabled
    assert phase[-1] == StopPhase.DISABLED and not backend.enabled
    # the stop took about stop_ramp_s (plus standstill detection), never open-ended
    assert (run.data.shape[0] - k) * 1e-3 <= 2 * ref_cfg.safety.stop_ramp_s + 0.005


def test_controlled_hold_keeps_an_overhauling_load_in_place(ref_cfg, tmp_path):
    cfg = with_changes(ref_cfg, plant={"load_torque_nm": 3.0}, safety={"hold_s": 0.3})
    summary, run, backend = sim(cfg, tmp_path, scenario="creep", duration_s=1.5)
    k, phase = _stop_rows(run)
    hold = np.flatnonzero(phase == StopPhase.HOLD)
    assert hold.size >= 300 - 5  # held for hold_s
    pos = run["pos_rad"][k:-1]
    assert np.ptp(pos) < 1e-3  # the load did not run the axis away during the stop
    assert np.all(np.abs(run["vel_rad_s"][hold]) < 0.01)
    assert np.mean(np.abs(run["torque_cmd_nm"][hold])) > 2.5  # the loop holds the 3 N·m load
    assert phase[-1] == StopPhase.DISABLED and not backend.enabled


def test_inverted_sign_is_torque_off_with_no_push_the_wrong_way(ref_cfg, tmp_path):
    summary, run, backend = sim(ref_cfg, tmp_path, scenario="reversal", duration_s=3.0,
                                faults=((1.0, "inverted_sign"),))
    k, phase = _stop_rows(run)
    assert phase[k] == StopPhase.STO
    assert np.all(run["torque_cmd_nm"][k:] == 0.0)
    speed = np.abs(run["vel_rad_s"][k:])
    assert np.all(speed[1:] <= speed[0] + 1e-9)  # no speed rise after the STO
    assert not backend.enabled and summary["faults"]


def test_a_loop_with_a_latched_fault_never_enables_again(ref_cfg):
    from controller.clock import SimClock
    from controller.loop import ControlLoop
    from controller.reference import make_reference
    from drivers.errors import FrictionctlError
    from hil.sim_backend import SimBackend

    sc = ref_cfg.scenario("creep")
    clock = SimClock()
    enables = []

    class RecordsEnables(SimBackend):  # a hook override: the compiled loop calls the class's own
        def _enable(self, timeout_s):
            enables.append(1)
            super()._enable(timeout_s)

    backend = RecordsEnables(ref_cfg, clock, seed=1, scenario=sc)
    backend.inject_at(0.2, "drive_fault")
    loop = ControlLoop(ref_cfg, backend, clock,
                       make_reference(sc.reference, ref_cfg.plant.encoder.rad_per_count, 0.5), 0.5)
    assert loop.run().faults
    assert enables == [1]
    enables.clear()
    with pytest.raises(FrictionctlError, match="fault latched"):
        loop.run()
    assert enables == [] and not backend.enabled
