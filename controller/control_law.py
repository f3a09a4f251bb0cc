"""The control law of one tick: friction feedforward + inertia feedforward + PID.

Shared by the loop and by offline replay, so that replaying a log with the code and parameters
that produced it reproduces the logged estimates and commands exactly.
"""

from __future__ import annotations

from .compensation import Compensator, TickSignals
from .config import ControllerConfig
from .pid import PID, inertia_feedforward

# What the control law computes, as a number: logged in every run's header
# (``control_law_revision``) and compared by the replay, since a log replays exactly only with the
# law that recorded it. Bumped by every change that moves the commands for the same logged inputs
# (README, Replay); logs without the key were recorded before it was logged.
#   1  the DOB at a first start takes the residual against the reference-driven model
#   2  that first start ends where the reference first reverses or leaves pre-sliding
#   3  the momentum balance takes out the velocity filter's lag for an axis on its plan, and
#      the DOB brakes only a lurch (the axis ahead of the reference and pulling away)
#   4  once the axis hunts at rest, less of the bristle spring is fed forward at rest
#      (LuGreCompensator._watch_rest)
#   5  beyond the path table's last bin its term falls at observer.handover_rate_nm_s instead
#      of ending in one tick (controller.learning.PathTable)
#   6  a load on the axis judged apart from the friction (controller.observer.LoadEstimate):
#      the watchdogs and the inconsistency alarm judge and the speed table samples less it
#      (the samples taken before it was known shifted), a static curve judged wrong before it
#      was known is fed again once the curve less it agrees; the watchdog's recovery
#      accumulates leakily (observer.Watchdog)
#   7  the known load fed forward apart and taken out of what the models, the DOB, the learned
#      tables and the Fc adapter see (the path table's lessons give it up, PathTable.shift);
#      a residual within observer.residual_share of the measured friction is consistent (both
#      watchdogs)
#   8  the load estimate compares each direction with its own believed curve, and the speed
#      table samples a set believed per direction at each direction's ratio (DirectionalParams);
#      once one direction has slid, the other's residual goes unjudged until the load is known
#      (LuGreCompensator._load_grace, at most recover_s)
#   9  when the load becomes known and the two directions show the believed curve right within
#      the inconsistency alarm's bound, the alarm's count made with the load in the residual
#      restarts (LuGreCompensator._rejudge_inconsistency); the path table gives up a fed load
#      in steps of its dead zone, not tick by tick (PathTable.shift)
#   (controller.friction_se, which widens the feedforward model's bound, is not a bump: a log
#   without it replays as before, and one with it names it in its header's config)
CONTROL_LAW_REVISION = 9


class ControlLaw:
    """``u = PID(e) + F̂ + J·a_ref``. State: the PID and the compensator."""

    done = False  # a law that ends the run early sets it (the loop then takes the normal end)

    def __init__(self, cfg: ControllerConfig, compensator: Compensator) -> None:
        self.pid = PID(cfg.pid)
        self.compensator = compensator
        self.J_ff = cfg.J if cfg.inertia_feedforward else 0.0
        self.ff_nm = 0.0  # total feedforward of the last step [N·m]

    def enable(self, pos_rad: float) -> None:
        """Bumpless start at the current position; the estimator starts afresh."""
        self.pid.enable(pos_rad, 0.0)
        self.compensator.reset()

    def step(self, s: TickSignals, dt_s: float) -> float:
        """Torque command before the safety clamp [N·m]. ``s.saturated`` is filled here (the
        PID's flag from the previous tick); the compensator may raise ArithmeticError or
        ValueError, which the loop turns into an ESTIMATOR fault."""
        pid = self.pid
        comp = self.compensator
        s.saturated = pid.saturated
        ff = comp.step(s, dt_s)
        gains = comp.pid_gains
        if gains is not None and gains is not pid.gains:
            pid.gains = gains
        ff += inertia_feedforward(self.J_ff, s.acc_ref_rad_s2)
        self.ff_nm = ff
        return pid.step(s.pos_ref_rad, s.vel_ref_rad_s, s.pos_rad, ff, dt_s)
