"""The fixed-rate control loop: the same code runs the simulation, a HIL bench and a machine.

Tick k is scheduled at the absolute time t0 + k·dt on the injected clock (lockstep: the
simulated clock jumps there; real: sleep, then spin). Per tick:

    read → velocity estimate → reference → friction feedforward → PID → safety → write → log

Lateness (start − deadline) is measured on every tick; a tick that ends after the next deadline
is an overrun, and the overrun policy of the safety layer applies. Any fault latches and starts
the safe stop: the torque is ramped from its last value to zero over ``safety.stop_ramp_s``
while the loop keeps ticking and logging, then the drive is disabled; if the ramp cannot be
sent, the drive is disabled at once. A stop request (SIGINT/SIGTERM) and the normal end of the
run take the same path. ``backend.safe_stop()`` runs in ``finally`` whatever happens.
"""

from __future__ import annotations

import gc
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

from drivers.backend import Backend, Clock, DriveState, Feedback
from drivers.errors import FrictionctlError

from .compensation import Compensator, TickSignals, make_compensator
from .config import Config
from .control_law import ControlLaw
from .pid import PID
from .reference import Reference
from .safety import FaultKind, SafetyMonitor
from .stop import SafeStop, StopPhase
from .velocity import VelocityEstimator

log = logging.getLogger(__name__)

# (name, unit) of every logged column, in row order.
LOG_COLUMNS: tuple[tuple[str, str], ...] = (
    ("t_s", "s"), ("pos_rad", "rad"), ("vel_rad_s", "rad/s"), ("pos_ref_rad", "rad"),
    ("vel_ref_rad_s", "rad/s"), ("acc_ref_rad_s2", "rad/s^2"), ("current_a", "A"),
    ("torque_cmd_nm", "N·m"), ("torque_pid_nm", "N·m"), ("torque_ff_nm", "N·m"),
    ("friction_hat_nm", "N·m"), ("z_hat", "rad"), ("fc_hat_nm", "N·m"), ("residual_nm", "N·m"),
    ("friction_true_nm", "N·m"), ("p_nm", "N·m"), ("i_nm", "N·m"), ("d_nm", "N·m"),
    # compute_us: estimate + control + safety of the tick, without backend I/O or logging
    ("late_us", "us"), ("compute_us", "us"), ("overrun", "-"), ("fault", "FaultKind"),
    ("drive_state", "DriveState"), ("sequence", "-"), ("temperature_c", "degC"),
    ("saturated", "-"), ("reidentify", "-"), ("drive_vel_rad_s", "rad/s"), ("payload_kg", "kg"),
    ("ff_param_step_nm", "N·m"), ("fallback", "-"),
    ("learned_nm", "N·m"),  # feedforward learned from the residual (DOB term + learned table)
    ("stop_phase", "StopPhase"),  # 0 run, 1 SS1 deceleration, 2 hold, 3 STO, 4 disabled
    # the interval the velocity estimate stepped over on this tick (the drive's sample times on
    # the real clock); 0: no new sample, the estimate held. The replay steps with it.
    ("vel_dt_s", "s"),
)
COLUMN_NAMES = tuple(name for name, _ in LOG_COLUMNS)


class LogSink(Protocol):
    """What the loop needs of a log writer (``controller.runlog.RunLogWriter`` is one)."""

    def append(self, row: tuple) -> None:  # pragma: no cover - interface
        ...


class Law(Protocol):
    """What the loop needs of a control law: :class:`~controller.control_law.ControlLaw`, or an
    identification experiment (``hil.identify_laws``) that may command torque open-loop, restate
    the reference it follows in the signals (the safety checks and the log use it) and end the
    run early by setting ``done``. A protocol, not a base class: the compiled loop accepts any
    object with these members."""

    pid: PID
    ff_nm: float
    done: bool

    def enable(self, pos_rad: float) -> None: ...

    def step(self, s: TickSignals, dt_s: float) -> float: ...


@dataclass
class LoopStatus:
    """Live figures for a status line, written by the loop, read by another thread."""

    tick: int = 0
    t_s: float = 0.0
    late_us: float = 0.0
    error_rad: float = 0.0
    torque_nm: float = 0.0
    overruns: int = 0
    fault: str = ""


@dataclass
class RunResult:
    ticks: int
    duration_s: float
    rate_hz: float
    wall_s: float
    stop_reason: str  # "completed", "stop requested: …" or "fault: …"
    faults: list[str] = field(default_factory=list)
    overruns: int = 0
    warnings: list[str] = field(default_factory=list)
    reidentify: bool = False
    fc_hat_final_nm: float = math.nan
    drive_enabled_at_exit: bool = False  # True unless the drive confirmed the disable
    missed_deadlines: int = 0  # real clock: deadlines skipped after a stall


class ControlLoop:
    """One run of the loop against a backend. Construct, then :meth:`run` once."""

    def __init__(self, cfg: Config, backend: Backend, clock: Clock, reference: Reference,
                 duration_s: float, *, compensator: Compensator | None = None,
                 log_sink: LogSink | None = None,
                 progress: Callable[[float, float], None] | None = None,
                 truth: Callable[[], float] | None = None,
                 law: Law | None = None) -> None:
        self.cfg = cfg
        self.backend = backend
        self.clock = clock
        self.reference = reference
        self.duration_s = duration_s
        self.dt_s = cfg.loop.dt_s
        self.compensator = compensator or make_compensator(cfg.controller, rate_hz=cfg.loop.rate_hz)
        self.log_sink = log_sink
        self.progress = progress
        # the plant's true friction (simulation and HIL only; NaN on a machine)
        self.truth = truth or backend.true_friction_nm
        # ``law``: another control law (see :class:`Law`), e.g. an identification experiment
        self.law: Law = law if law is not None else ControlLaw(cfg.controller, self.compensator)
        self.pid = self.law.pid
        self.velocity = VelocityEstimator(cfg.controller.velocity.source,
                                          cfg.controller.velocity.cutoff_hz)
        axis = cfg.axis
        self.safety = SafetyMonitor(cfg.safety, cfg.loop.overrun, self.dt_s, cfg.controller.Kt,
                                    (axis.length, axis.speed, axis.force))
        self._stop = SafeStop(cfg)
        self.missed_deadlines = 0
        self.status = LoopStatus()
        self._stop_request = ""
        self._sig = TickSignals()
        self._vel_dt = 0.0  # this tick's velocity-estimate interval [s] (the vel_dt_s column)

    def request_stop(self, reason: str) -> None:
        """Ask the loop to stop (signal handlers call this): the safe-stop path, no fault."""
        self._stop_request = reason or "stop requested"

    # --- the run -------------------------------------------------------------------------------
    def run(self) -> RunResult:
        if self.safety.faulted:  # a latched fault enables nothing: reset it explicitly first
            raise FrictionctlError(f"fault latched ({self.safety.fault.name}: {self.safety.message}): "
                                   f"the drive is not enabled until the fault is reset")
        backend = self.backend
        wall0 = time.perf_counter()
        gc_was_enabled = gc.isenabled()
        # nothing allocated so far is scanned again during the run, and no collection runs in
        # it (no full collection first either: garbage frozen here is freed after the run)
        gc.freeze()
        gc.disable()
        self._k = 0
        stop_reason = "completed"
        try:
            backend.open()
            backend.enable()
            stop_reason = self._ticks()
        except Exception as err:  # noqa: BLE001 - any escape ends in the safe stop below
            kind = FaultKind.COMMUNICATION if isinstance(err, FrictionctlError) else FaultKind.INTERNAL
            self.safety.trip(kind, f"{type(err).__name__}: {err}")
            stop_reason = f"fault: {kind.name}: {self.safety.message}"
        finally:
            backend.safe_stop()
            if gc_was_enabled:
                gc.enable()
            gc.unfreeze()
        ticks = self._k
        faults: list[str] = []
        if self.safety.faulted and self.safety.fault is not FaultKind.STOP_REQUESTED:
            faults.append(f"{self.safety.fault.name}: {self.safety.message}")
        comp = self.compensator
        return RunResult(
            ticks=ticks, duration_s=ticks * self.dt_s, rate_hz=self.cfg.loop.rate_hz,
            wall_s=time.perf_counter() - wall0, stop_reason=stop_reason, faults=faults,
            overruns=self.safety.overruns, warnings=list(self.safety.warnings),
            reidentify=bool(comp.reidentify), fc_hat_final_nm=comp.fc_hat_nm,
            drive_enabled_at_exit=backend.enabled, missed_deadlines=self.missed_deadlines,
        )

    def _ticks(self) -> str:
        """The tick loop (``self._k`` counts the ticks run). Returns the stop reason."""
        cfg = self.cfg
        backend, clock, safety, law = self.backend, self.clock, self.safety, self.law
        velocity, reference, sink, status = self.velocity, self.reference, self.log_sink, self.status
        dt = self.dt_s
        n_run = int(round(self.duration_s / dt))
        temperature_default = cfg.plant.temperature_c
        real = not clock.simulated
        perf = time.perf_counter
        sig = self._sig
        truth = self.truth
        progress = self.progress
        NAN = math.nan

        fb: Feedback | None = backend.read()
        assert fb is not None
        # the position origin needs a position: a drive whose first encoder frame has not
        # arrived yet (a CAN drive's cyclic estimates, just enabled) is read again, once a
        # period, for up to safety.stale_ticks periods (then the first tick's check trips
        # NON_FINITE and the run stops safely, as for any feedback without a position)
        for _ in range(cfg.safety.stale_ticks):
            pos_first = fb.position_rad
            if pos_first - pos_first == 0.0:  # finite
                break
            clock.sleep_until(clock.now() + dt)
            fb = backend.read()
            assert fb is not None
        velocity.reset(0.0)  # positions are taken relative to pos0 below
        pos0 = fb.position_rad  # the reference is relative to where the axis starts
        law.enable(0.0)
        t0 = clock.now() + dt
        progress_every = max(1, int(round(1.0 / dt)))
        u_last = 0.0
        stopping_at = -1  # tick at which the safe stop began
        stop = self._stop  # the stop plan (category, deceleration reference, end)
        stop_reason = "completed"
        k = 0
        last_sample_t = NAN  # time of the last feedback sample
        # the first tick's sample counts as new whatever its number (so does the replay's and
        # the safety monitor's): the enable-time read above only fixed the position origin
        last_seq = -1  # sequence number of the last new sample (the drivers count from 0)
        held = 0  # ticks since then that repeated it
        k_new = -1  # the tick of the last new sample (the enable-time read: one period before)
        stale_ticks = self.cfg.safety.stale_ticks
        pos_last = vel_last = 0.0  # position and velocity estimate at that sample
        missed = 0  # deadlines skipped in this run
        while True:
            deadline = t0 + k * dt
            clock.sleep_until(deadline)
            start = clock.now()
            behind = 0
            if real and start - deadline >= dt:
                # a stall: the deadlines already past are skipped, not run late one after
                # another; counted, and the overrun policy sees them
                behind = int((start - deadline) / dt)
                k += behind
                missed += behind
                deadline = t0 + k * dt
            self._k = k
            late_us = (start - deadline) * 1e6 if real else 0.0
            t_ref = k * dt
            if stopping_at < 0:
                if k >= n_run or law.done:
                    stopping_at = k
                elif self._stop_request:
                    safety.trip(FaultKind.STOP_REQUESTED, self._stop_request, t_ref)
                    stop_reason = f"stop requested: {self._stop_request}"
                    stopping_at = k
            # read
            try:
                fb = backend.read()
            except Exception as err:  # noqa: BLE001 - vendor errors included: a fault, not a crash
                safety.trip(FaultKind.COMMUNICATION, f"read: {type(err).__name__}: {err}", t_ref)
                fb = None
            c0 = perf()  # controller compute: from here to just before the write
            if fb is not None and fb.sequence != last_seq:  # a new sample
                pos = fb.position_rad - pos0
                # on the real clock the velocity estimate takes the time between the samples
                # (the drive's sample times: a late tick followed by an early one is not a
                # velocity spike); in lockstep the nominal periods since the last new sample
                t_sample = fb.t_s
                dt_vel = (t_sample - last_sample_t if real and t_sample > last_sample_t
                          else dt * (k - k_new))  # skipped deadlines counted
                if t_sample == t_sample:
                    last_sample_t = t_sample
                vel = velocity.step(pos, fb.velocity_rad_s, dt_vel)
                self._vel_dt = dt_vel
                last_seq = fb.sequence
                held = 0
                k_new = k
                pos_last, vel_last = pos, vel
            elif fb is not None:
                # the same sample again (a lost frame or reply; the safety layer counts it as
                # stale): no new information. The velocity estimate is held and the position
                # extrapolated with it; read as a new sample, the repeated position would be
                # zero speed for a tick and the PID would push (measured, the fault campaign's
                # odrive_ascii/line_noise: peak 0.26 rad/s against the 0.1 rad/s reference)
                # During a stop the safety checks no longer run: past the stale limit the
                # feedback counts as lost (the stop cuts the torque), and a stale fault is
                # recorded; extrapolated on, the stop would brake a motion it cannot see.
                held += 1
                self._vel_dt = 0.0
                if stopping_at >= 0 and held >= stale_ticks:
                    safety.trip(FaultKind.STALE_FEEDBACK, f"no new feedback sample for {held} "
                                "ticks during the stop", t_ref)
                    pos = vel = NAN
                else:
                    vel = vel_last
                    pos = pos_last + vel_last * dt * (k - k_new)  # skipped deadlines counted
            else:
                pos = vel = NAN
                self._vel_dt = 0.0
            pos_ref, vel_ref, _ = reference.sample(t_ref)
            # the torque is held over the coming tick: the acceleration it must give the inertia
            # is the reference's mean over [t, t + dt], not its value at t (a ramp that ends
            # inside the tick, a boundary sampled on the wrong side by rounding). A velocity step
            # (no acceleration limit) is therefore one tick of Δv/dt: the inertia feedforward
            # J·Δv/dt (within the torque limit) and, a tick later, the DOB's planned acceleration
            acc_ref = (reference.sample(t_ref + dt)[1] - vel_ref) / dt
            f_true = truth()
            if stopping_at < 0 and not safety.fault and fb is not None:
                # estimate and control
                sig.t_s = t_ref
                sig.pos_rad = pos
                sig.vel_rad_s = vel
                sig.pos_ref_rad = pos_ref
                sig.vel_ref_rad_s = vel_ref
                sig.acc_ref_rad_s2 = acc_ref
                sig.current_a = fb.current_a
                sig.torque_cmd_prev_nm = u_last
                temp = fb.temperature_c
                sig.temperature_c = temp if temp == temp else temperature_default
                sig.payload_kg = backend.payload_kg
                sig.true_friction_nm = f_true
                try:
                    u = law.step(sig, dt)
                except Exception as err:  # noqa: BLE001
                    safety.trip(FaultKind.ESTIMATOR, f"compensator: {type(err).__name__}: {err}", t_ref)
                    u = NAN
                pos_ref, vel_ref = sig.pos_ref_rad, sig.vel_ref_rad_s
                ff = law.ff_nm
                fault = safety.check(t_ref, fb, pos, vel, pos_ref, vel_ref, u)
                if not fault:  # FaultKind.NONE
                    u = safety.clamp(u)
                else:
                    stopping_at = k
                    stop_reason = f"fault: {fault.name}: {safety.message}"
            elif safety.fault and stopping_at < 0:
                stopping_at = k
                stop_reason = f"fault: {safety.fault.name}: {safety.message}"
            if stopping_at >= 0:
                # the stop of its category (controller/stop.py): STO at once; SS1 / hold under
                # closed-loop control along a bounded deceleration, escalated to STO when the
                # axis speeds up or the feedback can no longer be trusted
                if k == stopping_at:
                    stop.begin(safety.fault, fb, pos, vel, pos_ref, vel_ref, u_last, t_ref)
                    self.pid = stop.law.pid
                    if stop_reason == "completed" and safety.fault:
                        stop_reason = f"fault: {safety.fault.name}: {safety.message}"
                u, pos_ref, vel_ref, acc_ref = stop.step(fb, pos, vel, t_ref, sig, dt)
                u = safety.clamp(u)
                ff = stop.law.ff_nm
                if stop.torque_off and backend.enabled:
                    backend.safe_stop()
            compute_us = (perf() - c0) * 1e6
            # write
            if backend.enabled:
                try:
                    backend.write(u)
                except Exception as err:  # noqa: BLE001
                    safety.trip(FaultKind.COMMUNICATION, f"write: {type(err).__name__}: {err}", t_ref)
                    backend.safe_stop()
                    u = 0.0
                    if stopping_at < 0:
                        stopping_at = k
                        stop_reason = f"fault: COMMUNICATION: {safety.message}"
            else:
                u = 0.0  # nothing is sent to a disabled drive: log what it actually gets
            u_last = u
            # log
            end = clock.now()
            overrun = real and end > deadline + dt
            if real:
                safety.record_overrun(t_ref, overrun, behind)
            if sink is not None:
                try:
                    sink.append(self._row(t_ref, pos, vel, pos_ref, vel_ref, acc_ref, fb, u, ff,
                                          late_us, compute_us, overrun, f_true))
                except Exception as err:  # noqa: BLE001
                    safety.trip(FaultKind.LOG_OVERFLOW, f"log: {type(err).__name__}: {err}", t_ref)
                    if stopping_at < 0:
                        stopping_at = k + 1  # this tick's command is out: the stop starts next
                        stop_reason = f"fault: LOG_OVERFLOW: {err}"
            if real:  # the status line runs on the real clock only
                status.tick = k
                status.t_s = t_ref
                status.late_us = late_us
                status.error_rad = pos_ref - pos
                status.torque_nm = u
                status.overruns = safety.overruns
                if safety.fault:
                    status.fault = safety.fault.name
            if progress is not None and k % progress_every == 0:
                progress(t_ref, self.duration_s)
            k += 1
            self.missed_deadlines = missed
            if stopping_at >= 0 and (stop.finished or not backend.enabled):
                self._k = k
                try:
                    backend.disable()
                except Exception as err:  # noqa: BLE001 - not confirmed: a fault, and the row says so
                    safety.trip(FaultKind.COMMUNICATION, f"disable: {type(err).__name__}: {err}",
                                k * dt)
                    log.error("%s: disable not confirmed: %s", backend.name, err)
                stop.phase = StopPhase.DISABLED
                if sink is not None:  # the disable is a row of its own: what the drive reports
                    self._log_disable(sink, k * dt, pos, vel, pos_ref, vel_ref, fb, f_true)
                return stop_reason

    def _row(self, t: float, pos: float, vel: float, pos_ref: float, vel_ref: float,
             acc_ref: float, fb: Feedback | None, u: float, ff: float, late_us: float,
             compute_us: float, overrun: bool, f_true: float) -> tuple[float, ...]:
        """One log row (the order of :data:`LOG_COLUMNS`). Typed: the compiled build reads every
        field natively."""
        pid, comp = self.pid, self.compensator
        if fb is None:
            current = drive_vel = temp = seq = math.nan
            state = float(DriveState.FAULT)
        else:
            current, drive_vel, temp, seq = fb.current_a, fb.velocity_rad_s, fb.temperature_c, float(fb.sequence)
            state = float(fb.state)
        return (
            t, pos, vel, pos_ref, vel_ref, acc_ref, current, u, u - ff, ff,
            comp.friction_hat_nm, comp.z_hat, comp.fc_hat_nm, comp.residual_nm,
            f_true, pid.p_nm, pid.i_nm, pid.d_nm, late_us, compute_us,
            1.0 if overrun else 0.0, float(self.safety.fault), state, seq, temp,
            1.0 if pid.saturated else 0.0, 1.0 if comp.reidentify else 0.0, drive_vel,
            self._sig.payload_kg, comp.param_step_nm, 1.0 if comp.fallback else 0.0,
            comp.learned_nm, float(self._stop.phase), self._vel_dt,
        )

    def _log_disable(self, sink: LogSink, t: float, pos: float, vel: float, pos_ref: float,
                     vel_ref: float, fb: Feedback | None, f_true: float) -> None:
        """One row after the disable: zero command, the last measurements, and the drive's
        state as it now reports it."""
        backend = self.backend
        # still enabled here = the drive did not confirm the disable
        state = DriveState.ENABLED if backend.enabled else DriveState.DISABLED
        row = list(self._row(t, pos, vel, pos_ref, vel_ref, 0.0, fb, 0.0, 0.0, 0.0, 0.0, False,
                             f_true))
        row[COLUMN_NAMES.index("drive_state")] = float(state)
        try:
            sink.append(tuple(row))
        except Exception as err:  # noqa: BLE001 - the run is over: the log's own fault is moot
            log.warning("log: the disable row was not written: %s", err)
