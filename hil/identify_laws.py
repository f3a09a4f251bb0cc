"""Identification experiments as control laws of the one :class:`~controller.loop.ControlLoop`.

Each experiment is a law with :class:`~controller.control_law.ControlLaw`'s interface
(``enable``, ``step(signals, dt_s)``, ``ff_nm``, ``pid``, ``done``) and runs through
:func:`controller.runner.run_session`: the loop's safety checks, safe-stop path, crash-safe log
(``<out>/experiments/<name>/run.fctl``), SIGINT/SIGTERM handling and summary. Open-loop laws
(torque ramps and oscillations) restate the measured position as the reference they follow,
so the following-error and standstill checks see no error (a travel guard of their own ends a
run that slides); the sweep closes a position loop with its own gains on the loop's reference.

:class:`ExperimentRunner` runs one law after another and turns each log back into a
:class:`Record`; a fault or a stop request in any experiment raises
:class:`IdentificationError` naming the experiment, the fault, its time and the log.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

from controller.compensation import TickSignals
from controller.config import Config
from controller.friction import DirectionalParams, FrictionParams, g
from controller.gains import PIDGains
from controller.pid import PID
from controller.reference import HoldReference, Reference, SineReference
from controller.safety import FaultKind
from drivers.backend import Backend, Clock
from drivers.errors import FrictionctlError

if TYPE_CHECKING:
    from controller.loop import ControlLoop

Progress = Callable[[float, float], None]


class IdentificationError(FrictionctlError):
    """An identification that could not complete (a fault, or data that cannot be fitted)."""


@dataclass
class Record:
    """The ticks of one experiment run. Arrays per tick; times on the run's own clock from 0."""

    name: str
    t: np.ndarray  # [s]
    pos: np.ndarray  # relative to the experiment start [rad]
    vel: np.ndarray  # velocity estimate [rad/s]
    torque: np.ndarray  # measured Kt·i [N·m]
    cmd: np.ndarray  # commanded torque (after the clamp) [N·m]
    pos_ref: np.ndarray
    vel_ref: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)
    log: str = ""  # the experiment's run.fctl


class ExperimentLaw:
    """Base of the experiment laws. ``step`` is called once per tick by the loop; subclasses
    implement ``_step(k, signals, dt_s) -> torque``. ``abort_reason`` (with ``done``) ends the
    run early for a reason the analysis must know (e.g. the axis slid)."""

    done = False
    abort_reason = ""
    open_loop = True

    def __init__(self, gains: PIDGains) -> None:
        self.pid = PID(gains)  # closed-loop laws use it; open-loop ones log its zeros
        self.ff_nm = 0.0
        self.stop_event: Optional[threading.Event] = None
        self.loop: Optional[ControlLoop] = None  # the ControlLoop running this law (set by the runner)

    def enable(self, pos_rad: float) -> None:
        self.pid.enable(pos_rad, 0.0)

    def step(self, s: TickSignals, dt_s: float) -> float:
        ev = self.stop_event
        if ev is not None and ev.is_set() and self.loop is not None:
            self.loop.request_stop("stop requested")
        k = int(round(s.t_s / dt_s))
        if self.open_loop:  # no reference to follow: the checks see no following error
            s.pos_ref_rad = s.pos_rad
            s.vel_ref_rad_s = 0.0
        return self._step(k, s, dt_s)

    def _step(self, k: int, s: TickSignals, dt_s: float) -> float:  # pragma: no cover
        raise NotImplementedError


class Track(ExperimentLaw):
    """Position PID on the loop's reference with its own gains (switched at given times,
    bumpless), plus the prior's Stribeck curve and J·a_ref as feedforward."""

    open_loop = False

    def __init__(self, gains: PIDGains, J: float, prior: FrictionParams,
                 schedule: list[tuple[float, PIDGains]] | None = None) -> None:
        super().__init__(gains)
        self.schedule = deque(sorted(schedule or [], key=lambda tg: tg[0]))
        self.J = J
        self.prior = prior

    def _step(self, k, s, dt_s):
        t = s.t_s
        while self.schedule and self.schedule[0][0] <= t:
            self.pid.gains = self.schedule.popleft()[1]
        v_r = s.vel_ref_rad_s
        ff = self.J * s.acc_ref_rad_s2
        if v_r != 0.0:  # the prior's steady friction at the reference speed
            p = self.prior.for_velocity(v_r) if isinstance(self.prior, DirectionalParams) else self.prior
            ff += math.copysign(g(p, v_r), v_r) + p.sigma2 * v_r
        self.ff_nm = ff
        return self.pid.step(s.pos_ref_rad, v_r, s.pos_rad, ff, dt_s)


class BreakawayRamp(ExperimentLaw):
    """Zero torque for ``rest_s``, then a ramp until gross sliding, then zero torque to rest."""

    def __init__(self, gains: PIDGains, direction: int, rate: float, peak: float, rest_s: float,
                 v_onset: float, onset_ticks: int, stop_s: float, dt: float, guard_rad: float) -> None:
        super().__init__(gains)
        self.dir = direction
        self.rate = rate
        self.peak = peak
        self.v_onset = v_onset
        self.w = onset_ticks
        self.stop_ticks = int(round(stop_s / dt))
        self.guard = guard_rad
        self.hist: deque[float] = deque(maxlen=onset_ticks + 1)
        self.onset_k = -1
        self.ramp_k = int(round(rest_s / dt))
        self.off_k = -1

    def _step(self, k, s, dt_s):
        pos = s.pos_rad
        self.hist.append(pos)
        u = 0.0
        if self.off_k < 0 and k >= self.ramp_k:
            u = self.dir * self.rate * (k - self.ramp_k) * dt_s
            if abs(u) >= self.peak:
                self.off_k = k
            if self.onset_k < 0 and len(self.hist) == self.hist.maxlen:
                if self.dir * (self.hist[-1] - self.hist[0]) / (self.w * dt_s) > self.v_onset:
                    self.onset_k = k
            if self.onset_k >= 0 and k >= self.onset_k + 3 * self.w:
                self.off_k = k
            if self.off_k >= 0:
                u = 0.0
        if abs(pos) > self.guard:
            self.abort_reason = f"travel {pos:.4g} rad beyond the guard {self.guard:.4g} rad"
            self.done = True
        if self.off_k >= 0 and k >= self.off_k + self.stop_ticks:
            self.done = True
        return u


class TorqueProfile(ExperimentLaw):
    """An open-loop torque profile u(t) with a travel guard."""

    def __init__(self, gains: PIDGains, profile: Callable[[float], float], duration_s: float,
                 guard_rad: float) -> None:
        super().__init__(gains)
        self.profile = profile
        self.duration_s = duration_s
        self.guard = guard_rad

    def _step(self, k, s, dt_s):
        t = k * dt_s
        if t >= self.duration_s:
            self.done = True
        if abs(s.pos_rad) > self.guard:
            self.abort_reason = (f"travel {s.pos_rad:.4g} rad beyond the guard {self.guard:.4g} rad "
                                 "(sliding)")
            self.done = True
        return self.profile(t)


class SineSequence(Reference):
    """Sines x = A·(1 − cos ω·τ) one after another, each for whole cycles (so each ends at rest
    at 0 and the next starts there), then rest at 0. ``parts``: (amplitude [rad], frequency [Hz],
    cycles). Two frequencies at the same peak speed make a = −ω²·(x − A) differ between the
    parts, so a position-proportional torque is told apart from J·a (the inertia experiment)."""

    def __init__(self, parts: list[tuple[float, float, int]], start_s: float = 0.0) -> None:
        self.parts: list[tuple[float, float, SineReference]] = []
        t = start_s
        for amp, f, cycles in parts:
            if cycles < 1:
                raise ValueError(f"cycles: must be >= 1, got {cycles}")
            self.parts.append((t, t + cycles / f, SineReference(amp, f, start_s=t)))
            t += cycles / f
        self.end_s = t

    def sample(self, t_s: float):
        for t0, t1, ref in self.parts:
            if t0 <= t_s < t1:
                return ref.sample(t_s)
        return (0.0, 0.0, 0.0)

    def reversals(self, until_s: float) -> list[float]:
        out: list[float] = []
        for t0, t1, ref in self.parts:
            out += [r for r in ref.reversals(min(until_s, t1)) if r < t1]
            if t1 <= until_s:
                out.append(t1)  # the next part starts from rest in the opposite sense
        return [r for r in out if r <= until_s]


def record_from_log(name: str, log_path: Path, Kt: float) -> Record:
    """An experiment's :class:`Record` from its run log."""
    from controller.runlog import read_log

    run = read_log(log_path)
    return Record(name=name, t=run["t_s"], pos=run["pos_rad"], vel=run["vel_rad_s"],
                  torque=Kt * run["current_a"], cmd=run["torque_cmd_nm"], pos_ref=run["pos_ref_rad"],
                  vel_ref=run["vel_ref_rad_s"], log=str(log_path))


class ExperimentRunner:
    """Runs experiment laws one after another through ``run_session`` (one log each)."""

    def __init__(self, cfg: Config, backend: Backend, clock: Clock, out_dir: Path,
                 progress: Optional[Progress], total_s: float,
                 stop_event: Optional[threading.Event] = None) -> None:
        self.cfg = cfg
        self.backend = backend
        self.clock = clock
        self.out_dir = Path(out_dir) / "experiments"
        self.progress = progress
        self.total_s = total_s
        self.stop_event = stop_event
        self.done_s = 0.0
        self.records: list[Record] = []
        self.gains = cfg.controller.pid  # what open-loop laws carry (never stepped)

    def run(self, name: str, law: ExperimentLaw, max_duration_s: float,
            reference: Reference | None = None) -> Record:
        """One experiment: enable, tick until the law is done (or ``max_duration_s``), the
        loop's stop path, disable. Raises IdentificationError on a fault or a stop request."""
        from controller.runner import Session, run_session

        if self.stop_event is not None and self.stop_event.is_set():
            raise IdentificationError(f"identify: experiment '{name}' not started: stopped on request")
        law.stop_event = self.stop_event
        done0 = self.done_s

        def progress(t: float, _total: float) -> None:
            if self.progress is not None:
                self.progress(min(done0 + t, self.total_s), self.total_s)

        def on_loop(loop) -> None:
            law.loop = loop

        session = Session(backend=self.backend, clock=self.clock,
                          reference=reference if reference is not None else HoldReference(),
                          duration_s=max_duration_s, scenario=f"identify:{name}",
                          compensation="off", law=law, extra_header={"experiment": name})
        run_dir = self.out_dir / name
        summary = run_session(self.cfg, session, run_dir, plot=False, progress=progress,
                              on_loop=on_loop)
        loop = law.loop
        if loop is None:
            raise IdentificationError(f"identify: experiment '{name}': the loop never started")
        rec = record_from_log(name, run_dir / "run.fctl", self.cfg.controller.Kt)
        self.done_s += rec.t.size * self.cfg.loop.dt_s
        self.records.append(rec)
        safety = loop.safety
        if safety.faulted:
            when = "" if safety.fault_t_s != safety.fault_t_s else f" at t = {safety.fault_t_s:.3f} s"
            how = ("drive disabled" if not summary.get("drive_enabled_at_exit")
                   else "drive disable NOT confirmed")
            what = ("stopped on request" if safety.fault is FaultKind.STOP_REQUESTED
                    else "stopped by the safety layer")
            raise IdentificationError(
                f"identify: experiment '{name}' {what}{when}: {safety.fault.name}: {safety.message}; "
                f"safe stop of the loop: {how}; log {run_dir / 'run.fctl'}")
        if law.abort_reason:
            rec.info["aborted"] = law.abort_reason
        return rec
